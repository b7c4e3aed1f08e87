// Replay reports: each iteration's measured time beside its replayed time,
// and what the critical path is made of.
#ifndef DAYDREAM_SIM_REPLAY_H_
#define DAYDREAM_SIM_REPLAY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/base/time.h"
#include "daydream/graph/graph.h"
#include "daydream/sim/simulator.h"

namespace daydream {

struct IterationReplay {
  std::string name;
  TimeNs measured_ns = 0;
  TimeNs replayed_ns = 0;
  TimeNs begin_ns = 0;  // replayed span, simulation clock
  TimeNs end_ns = 0;
  double error_pct = 0;  // 100 * (replayed - measured) / measured
  // Span of the iteration's GPU work (first GPU task start to last end),
  // recorded and replayed; 0 when the iteration launched no GPU work.
  TimeNs gpu_measured_ns = 0;
  TimeNs gpu_replayed_ns = 0;
  // The device's period for this iteration: to the end of its GPU and
  // network work from the end of the previous iteration's, or from this
  // iteration's begin where the device had finished the previous one's work
  // by then (the first iteration: its device span). 0 without device work.
  TimeNs device_period_measured_ns = 0;
  TimeNs device_period_replayed_ns = 0;
  // Replayed time the iteration's host thread spent blocked on a full launch
  // queue (waiting for the device to take work, not doing work).
  TimeNs launch_wait_replayed_ns = 0;
  // Steady-state step time. The host launches and the device executes as a
  // two-stage pipeline: the slower stage sets the pace. Host demand is its
  // step span less the launch-queue waits (which only mirror the device's
  // pace; real synchronizations stay in), device demand its period:
  //   step = max(CPU step span - launch waits, device period).
  // Measured: max(recorded step span, recorded device period).
  TimeNs step_measured_ns = 0;
  TimeNs step_replayed_ns = 0;
};

// One row of a breakdown: a name and the time attributed to it.
struct TimeShare {
  std::string name;
  TimeNs time_ns = 0;
};

struct CriticalPathSummary {
  TimeNs length_ns = 0;     // from the first to the last task on the path
  int64_t num_tasks = 0;
  // Task kinds, plus the time between path tasks: "cpu_gap" (framework time
  // on a CPU thread), "gpu_gap" (between back-to-back kernels), "latency"
  // (launch, wake-up, sync), "after_last_task" (window end past the last task).
  std::vector<TimeShare> by_kind;
  std::vector<TimeShare> by_phase;
  std::vector<TimeShare> by_resource;
  std::vector<TimeShare> top_tasks;    // longest tasks on the path (name, time on path)
};

struct ReplayReport {
  std::vector<IterationReplay> iterations;
  // True when the graph has no iterations and the whole trace was replayed as one.
  bool whole_trace = false;
  double median_error_pct = 0;  // median of |error_pct|
  double mean_error_pct = 0;    // mean of |error_pct|
  TimeNs makespan_ns = 0;
  // How far replayed GPU task starts land from the recorded ones (absolute,
  // after aligning both clocks at the graph origin): median and 95th percentile.
  TimeNs gpu_start_error_p50_ns = 0;
  TimeNs gpu_start_error_p95_ns = 0;
  CriticalPathSummary critical_path;
  // Replayed busy time (end - start) of the tasks in the iterations (of every
  // task for a whole trace), summed per phase (by Phase) and per resource (by
  // index); -1 where no such task ran. Breakdown (analysis/predict.h) names them.
  std::vector<TimeNs> phase_busy_ns;
  std::vector<TimeNs> resource_busy_ns;
};

// Measured vs replayed for every iteration of `graph` under `schedule`. A graph
// with no iterations is reported as one span: the whole trace.
ReplayReport MakeReplayReport(const Graph& graph, const Schedule& schedule);

// Simulates `graph` and reports. The graph's adjacency must be built.
absl::StatusOr<ReplayReport> Replay(const Graph& graph);

// A graph's replay: its simulated schedule and the report on it.
struct ReplayedGraph {
  Schedule schedule;
  ReplayReport report;
};

// Replay(), keeping the schedule: shared, as a prediction's baseline is by
// every variant predicted from it. The graph's adjacency must be built.
// With `simulator`, simulates on it (reusing its memory).
absl::StatusOr<std::shared_ptr<const ReplayedGraph>> ReplayGraph(const Graph& graph, Simulator* simulator = nullptr);

// Breaks down the critical path within [from_ns, to_ns] (simulation clock).
CriticalPathSummary SummarizeCriticalPath(const Graph& graph, const Schedule& schedule,
                                          const std::vector<int32_t>& path, TimeNs from_ns, TimeNs to_ns,
                                          size_t top = 10);

}  // namespace daydream

#endif  // DAYDREAM_SIM_REPLAY_H_
