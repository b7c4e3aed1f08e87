// A Job: the traces of every rank of one training job, as torch.profiler
// writes them for torchrun (one file per rank in a directory).
#ifndef DAYDREAM_TRACE_JOB_H_
#define DAYDREAM_TRACE_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/trace/kineto_reader.h"
#include "daydream/trace/trace.h"

namespace daydream {

struct Job {
  std::string path;           // the directory (or the single file)
  std::vector<Trace> ranks;   // sorted by rank; ranks[i].rank is set for every entry
  Warnings warnings;          // job-level problems (duplicate or missing ranks)
};

// True when `name` looks like a trace file: *.json or *.json.gz.
bool IsTraceFileName(const std::string& name);

// Loads `path`: a directory of per-rank trace files, or one file (a job of one
// rank). Each rank comes from its distributedInfo, else from the file name,
// else from its position in name order. Errors name the offending file: of
// several bad files, the first in name order. Up to `threads` files are read
// at once (0: DefaultJobThreads()); the Job is the same whatever the number.
// With at least as many files as threads, each file's windows are parsed one
// at a time (ReadOptions::parallel_windows off: the files keep the threads
// busy), so a file with several faults may have another of them reported
// than a read with one thread reports.
absl::StatusOr<Job> LoadJob(const std::string& path, const ReadOptions& options = {}, int threads = 0);

// One file per CPU this process may run on (its affinity mask on Linux, else
// every CPU): LoadJob's default. (A gzip file's reader adds an inflating
// thread, which overlaps with the other files' work.)
int DefaultJobThreads();

}  // namespace daydream

#endif  // DAYDREAM_TRACE_JOB_H_
