// The event simulator: replays a Graph and returns its Schedule.
//
// Semantics (DESIGN.md): each resource runs one task at a time. A task is
// ready when every start constraint holds (ordinary edges: tail end + lag;
// launch edges: tail start + lag); it starts at max(ready, resource free +
// gap) and ends at max(start + duration, every sync edge's tail end + lag).
// Among ready tasks on one resource the higher priority wins, then the lower
// task id (trace order). Events are processed in (time, insertion sequence)
// order, so the result is deterministic. O((V + E) log V).
#ifndef DAYDREAM_SIM_SIMULATOR_H_
#define DAYDREAM_SIM_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/base/time.h"
#include "daydream/graph/graph.h"

namespace daydream {

// What held a task back: the edge whose constraint on its start was latest,
// the task that ran before it on its resource, or a sync edge that held its
// end past start + duration.
enum class BindingKind : uint8_t { kNone = 0, kEdge, kResource, kEndEdge };

struct Schedule {
  std::vector<TimeNs> start_ns;  // per task, simulation clock (0 = graph origin)
  std::vector<TimeNs> end_ns;
  // Per task: the predecessor that determined its end (through its start or
  // directly, for sync edges), for critical-path walks.
  std::vector<int32_t> binding_task;
  std::vector<BindingKind> binding_kind;
  std::vector<int32_t> binding_edge;  // the edge that bound it (-1: its resource, or nothing)
  std::vector<TimeNs> busy_ns;   // per resource: sum of task durations run
  TimeNs makespan_ns = 0;        // latest end
  int32_t last_task = -1;        // the task that ends last
};

// Where `schedule` places iteration `it` of its graph: from its begin task's
// start, less its begin offset, to its end task's end, plus its end offset
// (the span the graph's iteration measured).
inline TimeNs IterationBeginNs(const Schedule& schedule, const Iteration& it) {
  return schedule.start_ns[static_cast<size_t>(it.begin_task)] - it.begin_offset_ns;
}
inline TimeNs IterationEndNs(const Schedule& schedule, const Iteration& it) {
  return schedule.end_ns[static_cast<size_t>(it.end_task)] + it.end_offset_ns;
}

// Replays `graph`, whose adjacency must be current (Graph::BuildAdjacency).
// Errors: stale adjacency; a graph whose edges can never all be satisfied
// (deadlock), named by the first task that never finished.
absl::StatusOr<Schedule> Simulate(const Graph& graph);

namespace sim_internal {
class Simulation;
}  // namespace sim_internal

// Simulate, for graph after graph on one thread, keeping the simulator's
// working memory between runs, and that of the schedules given back with
// Recycle: a what-if search replays many variants of one graph, and fresh
// memory for each was a quarter of a search's time on a 1 M-task graph.
class Simulator {
 public:
  Simulator();
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  // As Simulate(graph).
  absl::StatusOr<Schedule> Run(const Graph& graph);
  // Hands `schedule`'s memory to the next Run.
  void Recycle(Schedule&& schedule);

 private:
  std::unique_ptr<sim_internal::Simulation> sim_;
};

// The critical path ending at `last` (the schedule's last task when -1):
// task ids from first to last, following binding predecessors.
std::vector<int32_t> CriticalPath(const Schedule& schedule, int32_t last = -1);

}  // namespace daydream

#endif  // DAYDREAM_SIM_SIMULATOR_H_
