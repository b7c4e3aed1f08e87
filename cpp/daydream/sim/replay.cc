#include "daydream/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daydream/base/status_macros.h"

namespace daydream {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<TimeShare> Sorted(const std::map<std::string, TimeNs>& m, size_t limit) {
  std::vector<TimeShare> out;
  for (const auto& [name, t] : m) {
    if (t > 0) out.push_back(TimeShare{name, t});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TimeShare& a, const TimeShare& b) { return a.time_ns > b.time_ns; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

double ErrorPct(TimeNs replayed, TimeNs measured) {
  if (measured <= 0) return 0.0;
  return 100.0 * static_cast<double>(replayed - measured) / static_cast<double>(measured);
}

// When the predecessor that held task `t`'s end open let it go: the start of
// the predecessor for edges from a start (a full launch queue), else its end.
TimeNs ReleaseTime(const Graph& graph, const Schedule& schedule, size_t t) {
  const auto by = static_cast<size_t>(schedule.binding_task[t]);
  const int32_t e = schedule.binding_edge[t];
  if (e >= 0 && FromTailStart(graph.edges[static_cast<size_t>(e)].kind)) return schedule.start_ns[by];
  return schedule.end_ns[by];
}

// Per iteration: the time its host thread spent with a launch call held open
// past its own cost by a full launch queue.
std::vector<TimeNs> LaunchWaits(const Graph& graph, const Schedule& schedule) {
  std::vector<int32_t> thread(graph.iterations.size());
  for (size_t i = 0; i < graph.iterations.size(); ++i) {
    thread[i] = graph.tasks[static_cast<size_t>(graph.iterations[i].begin_task)].resource;
  }
  std::vector<TimeNs> waits(graph.iterations.size(), 0);
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const Task& task = graph.tasks[t];
    if (task.iteration < 0 || schedule.binding_kind[t] != BindingKind::kEndEdge) continue;
    const auto i = static_cast<size_t>(task.iteration);
    if (task.resource != thread[i]) continue;
    const int32_t e = schedule.binding_edge[t];
    if (e >= 0 && graph.edges[static_cast<size_t>(e)].kind == EdgeKind::kLaunchQueue) {
      waits[i] += std::max<TimeNs>(0, schedule.end_ns[t] - schedule.start_ns[t] - task.duration_ns);
    }
  }
  return waits;
}

// Time credited per key while walking a path; keys are small ids (enum
// values, interned names) so that no string is built per task. Merge() adds
// the totals into a map by name, which orders them as the report does.
class Tally {
 public:
  void Add(int32_t key, TimeNs t) {
    const auto k = static_cast<size_t>(key);
    if (k >= totals_.size()) {
      totals_.resize(k + 1, 0);
      used_.resize(k + 1, 0);
    }
    totals_[k] += t;
    used_[k] = 1;
  }
  template <typename NameOf>
  void Merge(std::map<std::string, TimeNs>& out, NameOf name_of) const {
    for (size_t k = 0; k < totals_.size(); ++k) {
      if (used_[k]) out[std::string(name_of(static_cast<int32_t>(k)))] += totals_[k];
    }
  }

 private:
  std::vector<TimeNs> totals_;
  std::vector<uint8_t> used_;
};

}  // namespace

CriticalPathSummary SummarizeCriticalPath(const Graph& graph, const Schedule& schedule,
                                          const std::vector<int32_t>& path, TimeNs from_ns, TimeNs to_ns,
                                          size_t top) {
  CriticalPathSummary out;
  // Keys of `kinds` beyond the task kinds: the time between path tasks.
  enum Between : int32_t { kLatency = kNumTaskKinds, kCpuGap, kGpuGap, kAfterLastTask };
  auto kind_name = [](int32_t k) -> std::string_view {
    switch (k) {
      case kLatency: return "latency";
      case kCpuGap: return "cpu_gap";
      case kGpuGap: return "gpu_gap";
      case kAfterLastTask: return "after_last_task";
      default: return TaskKindName(static_cast<TaskKind>(k));
    }
  };
  Tally kinds, phases, resources, names;  // resources and names by interned name
  auto clip = [&](TimeNs lo, TimeNs hi) { return std::max<TimeNs>(0, std::min(hi, to_ns) - std::max(lo, from_ns)); };
  auto credit = [&](int32_t t, TimeNs lo, TimeNs hi) {
    const TimeNs d = clip(lo, hi);
    if (d <= 0) return;
    const Task& task = graph.tasks[static_cast<size_t>(t)];
    kinds.Add(static_cast<int32_t>(task.kind), d);
    phases.Add(static_cast<int32_t>(task.phase), d);
    resources.Add(graph.resources[static_cast<size_t>(task.resource)].name, d);
    names.Add(task.name, d);
  };
  // Time between two tasks of the path: the resource's own gap (framework
  // overhead on a CPU thread, launch overhead between kernels) when the later
  // task waited for its resource, else a latency (launch, wake-up, sync).
  auto between = [&](int32_t t, TimeNs lo, TimeNs hi) {
    const TimeNs d = clip(lo, hi);
    if (d <= 0) return;
    const auto i = static_cast<size_t>(t);
    int32_t key = kLatency;
    if (schedule.binding_kind[i] == BindingKind::kResource || schedule.binding_kind[i] == BindingKind::kNone) {
      const ResourceKind rk = graph.resources[static_cast<size_t>(graph.tasks[i].resource)].kind;
      key = rk == ResourceKind::kCpuThread ? kCpuGap : kGpuGap;
    }
    kinds.Add(key, d);
  };
  TimeNs cursor = to_ns;
  int32_t later = -1;  // the path task after the current one
  for (auto it = path.rbegin(); it != path.rend() && cursor > from_ns; ++it) {
    const auto t = static_cast<size_t>(*it);
    const TimeNs start = schedule.start_ns[t], end = schedule.end_ns[t];
    TimeNs own_from = start;
    if (schedule.binding_kind[t] == BindingKind::kEndEdge && schedule.binding_task[t] >= 0) {
      // Held open by the work it waited on: only its tail, after that work
      // released it (its end for a sync, its start for a full launch queue),
      // is its own.
      own_from = std::min(end, std::max(start, ReleaseTime(graph, schedule, t)));
    }
    const TimeNs run_end = std::min(end, cursor);
    if (later >= 0) between(later, run_end, cursor);
    else kinds.Add(kAfterLastTask, clip(run_end, cursor));
    credit(*it, own_from, run_end);
    cursor = std::min(cursor, own_from);
    later = *it;
    ++out.num_tasks;
  }
  if (later >= 0) between(later, from_ns, cursor);
  out.length_ns = std::max<TimeNs>(0, to_ns - from_ns);
  std::map<std::string, TimeNs> by_kind, by_phase, by_resource, by_name;
  kinds.Merge(by_kind, kind_name);
  phases.Merge(by_phase, [](int32_t p) { return PhaseName(static_cast<Phase>(p)); });
  resources.Merge(by_resource, [&](int32_t id) { return graph.Str(id); });
  names.Merge(by_name, [&](int32_t id) { return graph.Str(id); });
  out.by_kind = Sorted(by_kind, 64);
  out.by_phase = Sorted(by_phase, 64);
  out.by_resource = Sorted(by_resource, 64);
  out.top_tasks = Sorted(by_name, top);
  return out;
}

ReplayReport MakeReplayReport(const Graph& graph, const Schedule& schedule) {
  ReplayReport report;
  report.makespan_ns = schedule.makespan_ns;
  std::vector<double> errors;
  int32_t path_end = schedule.last_task;
  TimeNs window_begin = 0, window_end = schedule.makespan_ns;
  if (graph.iterations.empty()) {
    report.whole_trace = true;
    IterationReplay it;
    it.name = "whole trace";
    it.measured_ns = graph.recorded_end_ns - graph.origin_ns;
    it.begin_ns = 0;
    it.end_ns = schedule.makespan_ns;
    it.replayed_ns = it.end_ns - it.begin_ns;
    it.error_pct = ErrorPct(it.replayed_ns, it.measured_ns);
    errors.push_back(std::fabs(it.error_pct));
    report.iterations.push_back(it);
  } else {
    for (const Iteration& iter : graph.iterations) {
      IterationReplay it;
      it.name = std::string(graph.Str(iter.name));
      it.measured_ns = iter.measured_ns;
      it.begin_ns = IterationBeginNs(schedule, iter);
      it.end_ns = IterationEndNs(schedule, iter);
      it.replayed_ns = it.end_ns - it.begin_ns;
      it.error_pct = ErrorPct(it.replayed_ns, it.measured_ns);
      errors.push_back(std::fabs(it.error_pct));
      report.iterations.push_back(it);
    }
    path_end = graph.iterations.back().end_task;
    window_begin = report.iterations.front().begin_ns;
    window_end = report.iterations.back().end_ns;
  }
  // GPU fidelity: spans per iteration and start errors per task.
  std::vector<TimeNs> rec_lo(report.iterations.size(), 0), rec_hi(report.iterations.size(), 0);
  std::vector<TimeNs> sim_lo(report.iterations.size(), 0), sim_hi(report.iterations.size(), 0);
  std::vector<uint8_t> seen(report.iterations.size(), 0);
  std::vector<TimeNs> start_errors;
  std::vector<uint8_t> device_seen(report.iterations.size(), 0);
  std::vector<TimeNs> device_rec_lo(report.iterations.size(), 0), device_rec_hi(report.iterations.size(), 0);
  std::vector<TimeNs> device_sim_lo(report.iterations.size(), 0), device_sim_hi(report.iterations.size(), 0);
  report.phase_busy_ns.assign(kNumPhases, -1);
  report.resource_busy_ns.assign(graph.resources.size(), -1);
  auto add_busy = [](TimeNs& sum, TimeNs busy) { sum = std::max<TimeNs>(sum, 0) + busy; };
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const Task& task = graph.tasks[t];
    // In an iteration (every task of a whole trace), and which one.
    const bool counted = report.whole_trace || task.iteration >= 0;
    const size_t i = report.whole_trace ? 0 : static_cast<size_t>(task.iteration);
    if (counted) {
      const TimeNs busy = schedule.end_ns[t] - schedule.start_ns[t];
      add_busy(report.phase_busy_ns[static_cast<size_t>(task.phase)], busy);
      add_busy(report.resource_busy_ns[static_cast<size_t>(task.resource)], busy);
    }
    const ResourceKind rk = graph.resources[static_cast<size_t>(task.resource)].kind;
    if (rk == ResourceKind::kCpuThread || rk == ResourceKind::kUnspecified) continue;
    const TimeNs recorded = task.recorded_start_ns - graph.origin_ns;
    // Device work of an iteration: GPU streams and network channels. Tasks
    // inserted by passes have no recorded place; their replayed one counts.
    if (counted) {
      const bool inserted = task.trace_event < 0;
      const TimeNs rec_start = inserted ? schedule.start_ns[t] : recorded;
      const TimeNs rec_end = inserted ? schedule.end_ns[t] : recorded + task.duration_ns;
      if (!device_seen[i]) {
        device_seen[i] = 1;
        device_rec_lo[i] = rec_start, device_rec_hi[i] = rec_end;
        device_sim_lo[i] = schedule.start_ns[t], device_sim_hi[i] = schedule.end_ns[t];
      } else {
        device_rec_lo[i] = std::min(device_rec_lo[i], rec_start);
        device_rec_hi[i] = std::max(device_rec_hi[i], rec_end);
        device_sim_lo[i] = std::min(device_sim_lo[i], schedule.start_ns[t]);
        device_sim_hi[i] = std::max(device_sim_hi[i], schedule.end_ns[t]);
      }
    }
    if (rk != ResourceKind::kGpuStream) continue;
    start_errors.push_back(std::abs(schedule.start_ns[t] - recorded));
    if (!counted) continue;
    const TimeNs rec_end = recorded + task.duration_ns;
    if (!seen[i]) {
      seen[i] = 1;
      rec_lo[i] = recorded, rec_hi[i] = rec_end, sim_lo[i] = schedule.start_ns[t], sim_hi[i] = schedule.end_ns[t];
    } else {
      rec_lo[i] = std::min(rec_lo[i], recorded);
      rec_hi[i] = std::max(rec_hi[i], rec_end);
      sim_lo[i] = std::min(sim_lo[i], schedule.start_ns[t]);
      sim_hi[i] = std::max(sim_hi[i], schedule.end_ns[t]);
    }
  }
  const std::vector<TimeNs> launch_waits = report.whole_trace ? std::vector<TimeNs>() : LaunchWaits(graph, schedule);
  for (size_t i = 0; i < report.iterations.size(); ++i) {
    IterationReplay& it = report.iterations[i];
    if (seen[i]) {
      it.gpu_measured_ns = rec_hi[i] - rec_lo[i];
      it.gpu_replayed_ns = sim_hi[i] - sim_lo[i];
    }
    if (device_seen[i]) {
      // From the previous iteration's device end while the device still
      // worked on it when this iteration began (a backlog: the device sets
      // the pace), else from this iteration's begin: the host's time after
      // the previous iteration's device work (its optimizer, a stall) is in
      // that iteration's span already, and counted twice it made the period
      // of the iteration after a slow one as long as both.
      const bool chained = i > 0 && device_seen[i - 1];  // never for the whole trace: one iteration
      const TimeNs rec_begin = chained ? graph.iterations[i].recorded_begin_ns - graph.origin_ns : 0;
      it.device_period_measured_ns =
          device_rec_hi[i] - (chained ? std::max(device_rec_hi[i - 1], rec_begin) : device_rec_lo[i]);
      it.device_period_replayed_ns =
          device_sim_hi[i] - (chained ? std::max(device_sim_hi[i - 1], it.begin_ns) : device_sim_lo[i]);
    }
    if (!report.whole_trace) it.launch_wait_replayed_ns = launch_waits[i];
    it.step_measured_ns = std::max(it.measured_ns, it.device_period_measured_ns);
    it.step_replayed_ns = std::max(it.replayed_ns - it.launch_wait_replayed_ns, it.device_period_replayed_ns);
  }
  if (!start_errors.empty()) {  // two selections, not a sort (a million GPU tasks: 2 ms)
    const size_t p50 = start_errors.size() / 2;
    const size_t p95 = std::min(start_errors.size() - 1, start_errors.size() * 95 / 100);  // >= p50
    std::nth_element(start_errors.begin(), start_errors.begin() + static_cast<std::ptrdiff_t>(p50), start_errors.end());
    // Read before the second selection, which reorders everything from p50 on.
    report.gpu_start_error_p50_ns = start_errors[p50];
    std::nth_element(start_errors.begin() + static_cast<std::ptrdiff_t>(p50),
                     start_errors.begin() + static_cast<std::ptrdiff_t>(p95), start_errors.end());
    report.gpu_start_error_p95_ns = start_errors[p95];
  }
  report.median_error_pct = Median(errors);
  double sum = 0;
  for (double e : errors) sum += e;
  report.mean_error_pct = errors.empty() ? 0 : sum / static_cast<double>(errors.size());
  report.critical_path = SummarizeCriticalPath(graph, schedule, CriticalPath(schedule, path_end),
                                               window_begin, window_end);
  return report;
}

absl::StatusOr<ReplayReport> Replay(const Graph& graph) {
  DD_ASSIGN_OR_RETURN(std::shared_ptr<const ReplayedGraph> replayed, ReplayGraph(graph));
  return replayed->report;
}

absl::StatusOr<std::shared_ptr<const ReplayedGraph>> ReplayGraph(const Graph& graph, Simulator* simulator) {
  auto replayed = std::make_shared<ReplayedGraph>();
  DD_ASSIGN_OR_RETURN(replayed->schedule, simulator != nullptr ? simulator->Run(graph) : Simulate(graph));
  replayed->report = MakeReplayReport(graph, replayed->schedule);
  return replayed;
}

}  // namespace daydream
