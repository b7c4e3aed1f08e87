#include "daydream/trace/job.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sched.h>
#endif

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/base/status_macros.h"

namespace daydream {

bool IsTraceFileName(const std::string& name) {
  return EndsWith(name, ".json") || EndsWith(name, ".json.gz");
}

namespace {

// The traces of `files`, in their order, read up to `threads` files at a
// time; or the error of the first of them (in that order) that failed: the
// one a reading in order reports. Files are handed out in order, so when one
// fails every file before it has been taken and is read to its end; the
// files after it that were not yet taken are not read.
absl::StatusOr<std::vector<Trace>> ReadTraceFiles(const std::vector<std::string>& files,
                                                  const ReadOptions& caller_options, int threads) {
  const size_t n = files.size();
  // As many files as threads or more keep the threads busy: each file's
  // windows are then parsed one at a time, without a helper thread's
  // wake-ups and merges. (Fewer files leave cores for the helpers.)
  ReadOptions options = caller_options;
  if (threads > 1 && n >= static_cast<size_t>(threads)) options.parallel_windows = false;
  std::vector<std::optional<absl::StatusOr<Trace>>> read(n);
  // Each file counts what its read did apart (threads read at once), and
  // the counts are added up at the end.
  std::vector<ReadStats> stats(caller_options.stats != nullptr ? n : 0);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      ReadOptions file_options = options;
      if (!stats.empty()) file_options.stats = &stats[i];
      read[i] = ReadTraceFile(files[i], file_options);
      if (!read[i]->ok()) failed.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min(n, static_cast<size_t>(std::max(threads, 1))); ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: those started (and this one) read them all
    }
  }
  work();
  for (std::thread& h : helpers) h.join();
  for (const ReadStats& s : stats) caller_options.stats->Add(s);
  std::vector<Trace> traces;
  traces.reserve(n);
  for (std::optional<absl::StatusOr<Trace>>& r : read) {
    // A file not taken comes only after one that failed, which returned first.
    if (!r.has_value()) return absl::InternalError("LoadJob: a file was left unread (a daydream bug)");
    if (!r->ok()) return r->status();
    traces.push_back(*std::move(*r));
  }
  return traces;
}

}  // namespace

int DefaultJobThreads() {
#if defined(__linux__)
  cpu_set_t usable;  // the CPUs this process may run on (a container's cpuset narrows them)
  if (sched_getaffinity(0, sizeof(usable), &usable) == 0 && CPU_COUNT(&usable) > 0) return CPU_COUNT(&usable);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::StatusOr<Job> LoadJob(const std::string& path, const ReadOptions& options, int threads) {
  namespace fs = std::filesystem;
  Job job;
  job.path = path;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(StrCat(path, ": no such file or directory"));
  }
  if (!fs::is_directory(status)) {
    DD_ASSIGN_OR_RETURN(Trace trace, ReadTraceFile(path, options));
    if (trace.rank < 0) trace.rank = 0;
    job.ranks.push_back(std::move(trace));
    return job;
  }
  std::vector<std::string> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && IsTraceFileName(it->path().filename().string())) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::InvalidArgumentError(StrCat(path, ": cannot list directory: ", ec.message()));
  if (files.empty()) {
    return absl::InvalidArgumentError(
        StrCat(path, ": no trace files (*.json, *.json.gz) in this directory"));
  }
  std::sort(files.begin(), files.end());
  DD_ASSIGN_OR_RETURN(job.ranks, ReadTraceFiles(files, options, threads > 0 ? threads : DefaultJobThreads()));
  // Ranks must be distinct; when they are not (or unknown), fall back to name order.
  std::set<int32_t> seen;
  bool usable = true;
  for (const Trace& t : job.ranks) usable = usable && t.rank >= 0 && seen.insert(t.rank).second;
  if (!usable) {
    job.warnings.Add("ranks_from_order",
                     StrCat(path, ": rank missing or repeated in some files; ranks assigned "
                                        "in file-name order"));
    for (size_t i = 0; i < job.ranks.size(); ++i) job.ranks[i].rank = static_cast<int32_t>(i);
  }
  std::sort(job.ranks.begin(), job.ranks.end(),
            [](const Trace& a, const Trace& b) { return a.rank < b.rank; });
  return job;
}

}  // namespace daydream
