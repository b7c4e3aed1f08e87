// Trace -> Graph: the dependency rules of Daydream, Lumos and HTA, applied to
// one rank's trace.
//
//  1. CPU tasks are the innermost cpu_op / runtime / driver events on each
//     thread, in program order; the time between them is the task's gap.
//  2. GPU activities (kernels, copies, memsets) run FIFO on their stream.
//  3. A runtime/driver call is linked to the GPU activities it launched by
//     correlation id (start-to-start: the activity may start `lag` after the
//     call starts).
//  4. Synchronizing calls (device/stream/event sync, blocking copies) end no
//     earlier than the GPU work they waited on; their own duration keeps only
//     the overhead, not the wait.
//  5. Cross-stream waits (cudaEventRecord -> cudaStreamWaitEvent, or
//     cuda_sync "Stream Wait Event" records) link GPU activities of
//     different streams.
//  5b. Launch-queue back-pressure: a launch call cannot return before the
//     activity launched K launches earlier on its device has left the queue
//     (started); K is measured from the trace (the most activities ever
//     pending at a launch when launches were seen blocking there, CUDA's 1024
//     otherwise). A blocked call keeps only its typical cost as work.
//  6. A CPU task that starts right after a task on another thread of the same
//     process ends, following a long idle gap on its own thread, waited for
//     it (autograd's backward thread, DDP/NCCL threads).
//  7. Phases come from enclosing ranges (autograd, Optimizer.step, DataLoader,
//     c10d/NCCL, forward/backward annotations); layers from nn.Module ranges
//     and, for backward ops, the autograd Sequence number.
//  8. Iterations come from ProfilerStep#N, else from Optimizer.step ends.
//
// Work comes from the trace: task durations, and CPU gaps (framework time
// between recorded ops). Latencies do not: every launch latency, gap between
// back-to-back kernels, sync wake-up tail and cross-stream wait takes the
// trace's typical (median) value, so replaying the unmodified graph measures
// how well the dependency rules explain the trace instead of copying it.
// With `exact_latencies`, each activity's binding constraint keeps its
// recorded delay instead, and the replay reproduces the trace to the
// nanosecond: a consistency check of the rules' bookkeeping, not a model.
#ifndef DAYDREAM_GRAPH_BUILDER_H_
#define DAYDREAM_GRAPH_BUILDER_H_

#include "absl/status/statusor.h"
#include "daydream/base/time.h"
#include "daydream/graph/graph.h"
#include "daydream/trace/trace.h"

namespace daydream {

struct BuildOptions {
  // Rule 6: a CPU task is a candidate for a cross-thread wait when its own
  // thread was idle at least this long before it ...
  TimeNs min_thread_wait_ns = 50'000;
  // ... and a task on another thread ended at most this long before it began.
  TimeNs max_thread_wake_ns = 250'000;
  // Typical values used when the trace gives no sample (ns).
  TimeNs default_launch_latency_ns = 7'000;
  TimeNs default_kernel_gap_ns = 1'000;
  TimeNs default_sync_tail_ns = 5'000;
  // Rule 1: a stretch at least this long inside a CPU operator that encloses
  // other tasks, covered by none of them, becomes a task of its own (the
  // operator's own work, e.g. a CPU convolution after its allocation); 0
  // turns this off.
  TimeNs min_self_task_ns = 20'000;
  // Launch queue depth used when the trace never fills its queue.
  int32_t default_launch_queue_depth = 1024;
  // See the file comment.
  bool exact_latencies = false;
};

// Builds the graph of `trace`. Problems that leave the rest usable (kernels
// without launches, overlapping events, ...) are counted in graph.warnings;
// the returned graph has its adjacency built and passes Validate().
absl::StatusOr<Graph> BuildGraph(const Trace& trace, const BuildOptions& options = {});

// Classifies a runtime/driver call name ("cudaStreamSynchronize",
// "hipDeviceSynchronize", "cuCtxSynchronize", "cudaMemcpy", ...).
enum class SyncCall : uint8_t { kNone = 0, kDevice, kStream, kEvent, kBlockingCopy };
SyncCall ClassifySyncCall(std::string_view name);

// True for names of communication kernels: ncclKernel_*, ncclDevKernel_*,
// symmetric-memory all-reduce kernels.
bool IsCollectiveKernelName(std::string_view name);

}  // namespace daydream

#endif  // DAYDREAM_GRAPH_BUILDER_H_
