// Helpers shared by the C++ tests: small traces written inline, paths to test
// data and to the real traces in ../shared/traces.
#ifndef DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_
#define DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/trace.h"

namespace daydream::testing {

// tests/data/<name>
std::string TestDataPath(const std::string& name);

// ../shared/traces/<relative>; fails the calling test (REQUIRE) if missing.
std::string SharedTracePath(const std::string& relative);

// A fresh empty directory under the system temp dir, removed at exit.
std::string TempDir();

// Wraps event objects (JSON text, comma-separated) into a Kineto document:
// {"traceEvents": [<events>]} plus optional extra top-level fields.
std::string KinetoDoc(const std::string& events, const std::string& extra_top_level = "");

// Parses `json` (a whole document) with ParseTraceText and REQUIREs success.
Trace ParseOrDie(const std::string& json);

// Finds the first task named `name`; REQUIREs that it exists.
int32_t TaskNamed(const Graph& graph, const std::string& name);

// True if an edge of `kind` runs from `from` to `to`.
bool HasEdge(const Graph& graph, int32_t from, int32_t to, EdgeKind kind);

// This process's resident memory now, in KiB (mapped file pages included).
long ResidentKiB();

// Writes `data` to `path` (plain) or gzip-compressed when `gzip` is true.
void WriteFile(const std::string& path, const std::string& data, bool gzip = false);

// Replays `graph`; REQUIREs success.
Schedule Sim(const Graph& graph);

// The median steady-state step (IterationReplay::step_replayed_ns) of a
// replay of `graph`; REQUIREs success and at least one iteration.
TimeNs MedianStep(const Graph& graph);

// The pass notes of `context`, one per line.
std::string AllNotes(const PassContext& context);

// Parses `options` for the pass `info` describes, creates it and runs it on
// `g`; REQUIREs that the options parse and the pass is created, and returns
// what Pass::Run returns.
absl::StatusOr<bool> RunPass(const PassInfo& info, Graph& g, PassContext& context, const OptionMap& options = {});

// REQUIREs that g.ValidateResourceChains() passes (what a pass that changed
// the graph must leave).
void RequireResourceChains(const Graph& g);

// A small graph for the pass tests, built a task at a time: CPU threads that
// launch work onto GPU streams. Each task follows the previous task on its
// resource by a kSequential edge and joins the current iteration, whose
// begin_task (its first task) and end_task (its last task on the first
// thread) follow the tasks as they are added.
struct PassTestGraph {
  // How Launch times a launch: the runtime call's duration and the gap
  // (framework time) before it, and the lag of the kLaunch edge.
  struct LaunchTiming {
    TimeNs call_ns = 5000;
    TimeNs gap_ns = 2000;
    TimeNs lag_ns = 3000;
  };

  Graph g;
  PassContext context;
  std::vector<int32_t> threads;
  std::vector<int32_t> streams;
  int32_t thread = -1;              // threads[0]
  std::vector<int32_t> last;        // per resource: its last task, or -1
  int32_t iteration = -1;           // the iteration new tasks join, or -1
  LaunchTiming launch_timing;
  bool record_trace_order = false;  // stamp recorded_start_ns = 1 us x task id

  // One CPU thread ("thread 1"), `num_streams` GPU streams ("stream 7",
  // "stream 8", ...) and one iteration, "ProfilerStep#1", that tasks join.
  explicit PassTestGraph(int num_streams = 1);
  // `num_threads` CPU threads ("thread <first_tid>", ...), then `num_streams`
  // GPU streams, and no iteration until BeginIteration.
  PassTestGraph(int num_threads, int64_t first_tid, int num_streams);

  // Starts a new iteration that the following tasks join; an empty name
  // means "ProfilerStep#<its index>".
  void BeginIteration(std::string name = "");

  // Appends a task on `resource` (a resource of `g`, including any added
  // after construction) and chains it after that resource's last task.
  int32_t Add(int32_t resource, TaskKind kind, const std::string& name, TimeNs duration, Phase phase, TimeNs gap);

  // A kCpuOp on the first thread.
  int32_t CpuOp(const std::string& name, TimeNs duration, Phase phase = Phase::kForward, TimeNs gap = 2000);

  // A "cudaLaunchKernel" call on threads[thread_index] (timed by launch_timing)
  // and the GPU task of `kind` it launches onto streams[stream], with no gap;
  // returns the GPU task.
  int32_t Launch(TaskKind kind, const std::string& name, TimeNs duration, Phase phase, int stream = 0,
                 int thread_index = 0);

  // REQUIREs that the graph validates, then builds its adjacency.
  void Finish();

  TimeNs Duration(int32_t task) const { return g.tasks[static_cast<size_t>(task)].duration_ns; }
};

// The graph of the bundled V100 trace (examples/traces, the same file as
// ../shared/traces/hta-v100-1rank), built once.
const Graph& BundledV100();

}  // namespace daydream::testing

#endif  // DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_
