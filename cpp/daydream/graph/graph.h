// The Graph: what the simulator needs to replay one rank's training
// iterations, and what passes rewrite. Tasks on resources (CPU threads, GPU
// streams, communication channels), dependency edges between them, layers,
// tensors, iteration boundaries, the device, the rank.
//
// In memory it is dense: tasks and edges are plain structs in vectors, ids are
// indexes, names are interned, adjacency is CSR (built by BuildAdjacency()).
// On disk it is proto/daydream/graph.proto (graph/serialization.h).
#ifndef DAYDREAM_GRAPH_GRAPH_H_
#define DAYDREAM_GRAPH_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/string_table.h"
#include "daydream/base/time.h"
#include "daydream/trace/trace.h"

namespace daydream {

enum class TaskKind : uint8_t {
  kUnspecified = 0,
  kCpuOp,       // a leaf CPU operator (aten::*, autograd, user code)
  kRuntime,     // a CUDA/HIP runtime or driver call (launches, copies, events)
  kKernel,      // a GPU kernel
  kMemcpy,      // a GPU copy
  kMemset,      // a GPU memset
  kCollective,  // communication (NCCL kernels, inserted all-reduces)
  kDataLoad,    // input pipeline work
  kSync,        // a CPU call that blocks on GPU work (stream/device/event sync)
};
inline constexpr int kNumTaskKinds = 9;

enum class Phase : uint8_t {
  kUnspecified = 0,
  kForward,
  kBackward,
  kOptimizer,
  kData,
  kComm,
  kOther,
};
inline constexpr int kNumPhases = 7;

// How an edge constrains its head. Unless noted, the head may not start
// before the tail ends plus lag_ns.
enum class EdgeKind : uint8_t {
  kUnspecified = 0,
  kSequential,  // same resource, trace order
  kLaunch,      // asynchronous runtime call -> the GPU activity it launched: the
                // work is submitted when the call returns (measured: the
                // delay from call end to kernel start varies 3-5x less than
                // from call start)
  kSync,        // GPU activity -> the CPU call that waited for it; end-to-end:
                // the call may not end before the activity ends plus lag_ns
  kStreamWait,  // GPU activity -> GPU activity on another stream (event record/wait)
  kThread,      // CPU task -> CPU task on another thread (autograd, DDP threads)
  kData,        // producer -> consumer (gradient -> all-reduce)
  kComm,        // cross-rank
  kBlockingLaunch,  // blocking call (cudaMemcpy) -> the activity it submitted
                    // and then waited for; start-to-start: the activity may
                    // start lag_ns after the call starts
  kLaunchQueue,     // GPU activity -> a later launch call that found the
                    // launch queue full; start-to-end: the call returns no
                    // earlier than the activity leaves the queue (starts)
                    // plus lag_ns
};
inline constexpr int kNumEdgeKinds = 10;

enum class ResourceKind : uint8_t {
  kUnspecified = 0,
  kCpuThread,
  kGpuStream,
  kCommChannel,
};
inline constexpr int kNumResourceKinds = 4;

enum class TensorRole : uint8_t {
  kUnspecified = 0,
  kWeight,
  kGradient,
  kActivation,
  kOptimizerState,
  kInput,
  kOther,
};

// Lowercase names used in summaries, JSON and the proto enums' suffixes.
std::string_view TaskKindName(TaskKind kind);
std::string_view PhaseName(Phase phase);
std::string_view EdgeKindName(EdgeKind kind);
std::string_view ResourceKindName(ResourceKind kind);
std::string_view TensorRoleName(TensorRole role);

// Which end of the tail an edge of this kind measures from: its start
// (kBlockingLaunch, kLaunchQueue) or its end (every other kind).
inline bool FromTailStart(EdgeKind kind) {
  return kind == EdgeKind::kBlockingLaunch || kind == EdgeKind::kLaunchQueue;
}
// Which end of the head an edge of this kind constrains: its end (kSync,
// kLaunchQueue) or its start (every other kind).
inline bool ToHeadEnd(EdgeKind kind) { return kind == EdgeKind::kSync || kind == EdgeKind::kLaunchQueue; }
// The start-to-start kind.
inline bool IsStartToStart(EdgeKind kind) { return FromTailStart(kind) && !ToHeadEnd(kind); }
// True for both launch kinds.
inline bool IsLaunch(EdgeKind kind) { return kind == EdgeKind::kLaunch || kind == EdgeKind::kBlockingLaunch; }
// The end-to-end kind.
inline bool IsEndToEnd(EdgeKind kind) { return kind == EdgeKind::kSync; }

struct Resource {
  ResourceKind kind = ResourceKind::kUnspecified;
  int64_t process = 0;  // OS pid for CPU threads, device index for GPU streams
  int64_t thread = 0;   // OS tid for CPU threads, stream id for GPU streams
  StringId name = 0;    // "thread 1102 (pt_main_thread)", "stream 7"
};

struct Task {
  TimeNs duration_ns = 0;
  // Idle time the resource must spend before this task after its previous
  // task ends (CPU framework overhead no recorded op explains; the launch
  // overhead between back-to-back GPU kernels).
  TimeNs gap_ns = 0;
  TimeNs recorded_start_ns = 0;  // start in the source trace (trace clock)
  int64_t trace_event = -1;      // index into the source Trace's events, -1 if inserted
  int64_t correlation = -1;
  int64_t bytes = -1;            // bytes moved (copies, collectives), -1 if unknown
  StringId name = 0;
  int32_t resource = -1;
  int32_t layer = -1;
  int32_t iteration = -1;
  int32_t priority = 0;          // higher runs first among ready tasks on a resource
  TaskKind kind = TaskKind::kUnspecified;
  Phase phase = Phase::kUnspecified;
};

struct Edge {
  int32_t from = -1;
  int32_t to = -1;
  EdgeKind kind = EdgeKind::kUnspecified;
  TimeNs lag_ns = 0;
};

struct Layer {
  StringId name = 0;
  int32_t parent = -1;
};

struct Tensor {
  StringId name = 0;
  StringId dtype = 0;
  int64_t bytes = 0;
  int32_t producer = -1;  // task after which the tensor is ready (first iteration that has one)
  int32_t layer = -1;
  TensorRole role = TensorRole::kUnspecified;
  std::vector<int64_t> shape;
  // Per iteration (same indexes as Graph::iterations): the task after which
  // the tensor is ready in that iteration, -1 where it is not produced.
  std::vector<int32_t> producers;
};

// One training iteration. Its replayed span runs from begin_offset_ns before
// begin_task starts to end_offset_ns after end_task ends, so a replay that
// reproduces those two tasks reproduces the measured span.
struct Iteration {
  StringId name = 0;
  int32_t begin_task = -1;
  int32_t end_task = -1;
  TimeNs begin_offset_ns = 0;
  TimeNs end_offset_ns = 0;
  TimeNs measured_ns = 0;        // recorded duration (ProfilerStep#N span)
  TimeNs recorded_begin_ns = 0;  // recorded start (trace clock)
};

struct Device {
  std::string name;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int64_t total_memory_bytes = 0;
  int32_t num_sms = 0;
};

// What the profiler that recorded the trace cost the recorded run, per
// recorded CPU range (graph/profiler_overhead.h). Zero: nothing to remove.
struct ProfilerOverhead {
  // Each recorded operator or annotation: the part spent before its start
  // stamp (the profiler's enter callback, input shapes included) and after
  // its end stamp (the exit callback).
  TimeNs begin_ns = 0;
  TimeNs end_ns = 0;
  // Before the start stamp too, per input the profiler recorded the type and
  // shape of (record_shapes; the "Input type" list of the event).
  TimeNs per_input_ns = 0;
  // A daydream.module range instead: daydream's forward pre- and post-hooks
  // (Python), their range included; half before its start, half after its end.
  TimeNs module_hook_ns = 0;
  // A daydream.grad marker instead: the post-accumulate-grad hook (Python)
  // and its range, before the marker's start.
  TimeNs grad_hook_ns = 0;
  bool zero() const {
    return begin_ns == 0 && end_ns == 0 && per_input_ns == 0 && module_hook_ns == 0 && grad_hook_ns == 0;
  }
};

// The profiler overhead removed from a graph (RemoveProfilerOverhead).
struct ProfilerOverheadRemoval {
  ProfilerOverhead per_record;  // the costs applied
  int64_t records = 0;          // recorded ranges whose cost fell inside the graph's CPU timelines
  TimeNs estimated_ns = 0;      // their cost
  TimeNs removed_ns = 0;        // what was removed: the estimate less what fell in spans shorter than it
};

// Index range into one of the CSR arrays.
struct EdgeRange {
  const int32_t* first = nullptr;
  const int32_t* last = nullptr;
  const int32_t* begin() const { return first; }
  const int32_t* end() const { return last; }
  size_t size() const { return static_cast<size_t>(last - first); }
};

// Largest byte count a task or tensor may carry (2^62, 4 EiB): sums of a
// graph's byte counts cannot overflow int64.
inline constexpr int64_t kMaxBytes = int64_t{1} << 62;

class Graph {
 public:
  // --- building -----------------------------------------------------------
  int32_t AddResource(const Resource& resource);
  int32_t AddTask(const Task& task);
  void AddEdge(int32_t from, int32_t to, EdgeKind kind, TimeNs lag_ns = 0);
  int32_t AddLayer(const Layer& layer);
  int32_t AddTensor(Tensor tensor);

  // (Re)builds the CSR adjacency after tasks or edges changed. Out-edges of a
  // task are listed in edge-index order.
  void BuildAdjacency();
  bool has_adjacency() const { return adjacency_edges_ == edges.size() && adjacency_tasks_ == tasks.size(); }

  // Edge indexes leaving / entering `task`. Requires BuildAdjacency().
  EdgeRange out_edges(int32_t task) const;
  EdgeRange in_edges(int32_t task) const;

  // Checks the invariants every pass and the simulator rely on: ids in range,
  // edges between distinct existing tasks, no cycle, non-negative durations,
  // gaps and lags, iteration anchors valid. The error names the first
  // offending task or edge.
  // Times or sizes out of range (see RangeCheck in graph.cc) are OutOfRange errors,
  // every other broken invariant FailedPrecondition.
  absl::Status Validate() const;

  // Validate's cycle check alone: a task on a cycle of the dependency edges
  // (-1 when there is none; kDanglingEdge when an edge names a task that does
  // not exist, which Validate reports first), in `stuck_tasks` about how
  // many tasks the cycles leave unable to finish, and in `cycle` the tasks
  // of one cycle in edge order, starting with the one returned. Reads only
  // the edges and the number of tasks, so it may run while another thread
  // sets the tasks' other fields.
  static constexpr int64_t kDanglingEdge = -2;
  int64_t FindCycleTask(int64_t* stuck_tasks = nullptr, std::vector<int64_t>* cycle = nullptr) const;

  // Validate, less the cycle check: for a caller that ran FindCycleTask.
  absl::Status ValidateAllButCycles() const;

  // Validate, and what every graph pass must keep besides: on each resource
  // the sequential edges form one chain (at most one sequential predecessor
  // and successor per task, both on the task's resource), reported after any
  // other error. Without `check_cycles`, no cycle search: for a caller that
  // knows the edges' ends and kinds are those of a graph that passed it.
  absl::Status ValidateEdited(bool check_cycles) const;
  // The resource chains alone (and the edges' ends in range).
  absl::Status ValidateResourceChains() const;

  std::string_view Str(StringId id) const { return strings.Get(id); }
  std::string_view TaskName(int32_t task) const { return strings.Get(tasks[static_cast<size_t>(task)].name); }

  // --- data ---------------------------------------------------------------
  std::string source;  // trace path the graph was built from
  // Recorded (trace clock) time of simulation time 0, and the latest recorded
  // end of any task: the span a replay of the whole graph reproduces.
  TimeNs origin_ns = 0;
  TimeNs recorded_end_ns = 0;
  int32_t rank = -1;
  int32_t world_size = -1;
  Device device;
  std::vector<Resource> resources;
  std::vector<Task> tasks;
  std::vector<Edge> edges;
  std::vector<Layer> layers;
  std::vector<Tensor> tensors;
  std::vector<Iteration> iterations;
  StringTable strings;
  Warnings warnings;  // from building; not serialized
  // The profiler's cost taken out of the CPU tasks and gaps (zero: none);
  // not serialized.
  ProfilerOverheadRemoval profiler_overhead;

 private:
  absl::Status ValidateImpl(bool check_cycles, bool check_chains) const;

  std::vector<int32_t> out_offsets_;
  std::vector<int32_t> out_index_;
  std::vector<int32_t> in_offsets_;
  std::vector<int32_t> in_index_;
  size_t adjacency_edges_ = static_cast<size_t>(-1);
  size_t adjacency_tasks_ = static_cast<size_t>(-1);
};

// Counts a graph's contents for reports: tasks by kind and phase, edges by
// kind, resources by kind. Keys are the lowercase names above.
struct GraphSummary {
  int64_t num_tasks = 0;
  int64_t num_edges = 0;
  int64_t num_resources = 0;
  int64_t num_layers = 0;
  int64_t num_tensors = 0;
  int64_t num_iterations = 0;
  std::vector<std::pair<std::string, int64_t>> tasks_by_kind;
  std::vector<std::pair<std::string, int64_t>> tasks_by_phase;
  std::vector<std::pair<std::string, int64_t>> edges_by_kind;
  std::vector<std::pair<std::string, int64_t>> resources_by_kind;
  TimeNs total_task_time_ns = 0;
};
GraphSummary Summarize(const Graph& graph);

}  // namespace daydream

#endif  // DAYDREAM_GRAPH_GRAPH_H_
