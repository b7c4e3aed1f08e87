#include "daydream/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

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

}  // namespace

CriticalPathSummary SummarizeCriticalPath(const Graph& graph, const Schedule& schedule,
                                          const std::vector<int32_t>& path, TimeNs from_ns, TimeNs to_ns,
                                          size_t top) {
  CriticalPathSummary out;
  std::map<std::string, TimeNs> by_kind, by_phase, by_resource, by_name;
  TimeNs idle = 0;
  auto credit = [&](int32_t t, TimeNs lo, TimeNs hi) {
    lo = std::max(lo, from_ns);
    hi = std::min(hi, to_ns);
    if (hi <= lo) return;
    const Task& task = graph.tasks[static_cast<size_t>(t)];
    by_kind[std::string(TaskKindName(task.kind))] += hi - lo;
    by_phase[std::string(PhaseName(task.phase))] += hi - lo;
    by_resource[std::string(graph.Str(graph.resources[static_cast<size_t>(task.resource)].name))] += hi - lo;
    by_name[std::string(graph.Str(task.name))] += hi - lo;
  };
  auto wait = [&](TimeNs lo, TimeNs hi) {
    lo = std::max(lo, from_ns);
    hi = std::min(hi, to_ns);
    if (hi > lo) idle += hi - lo;
  };
  TimeNs cursor = to_ns;
  for (auto it = path.rbegin(); it != path.rend() && cursor > from_ns; ++it) {
    const auto t = static_cast<size_t>(*it);
    const TimeNs start = schedule.start_ns[t], end = schedule.end_ns[t];
    if (schedule.binding_kind[t] == BindingKind::kEndEdge && schedule.binding_task[t] >= 0) {
      // Held open by the work it waited on: only its tail is its own.
      const TimeNs released = std::max(start, schedule.end_ns[static_cast<size_t>(schedule.binding_task[t])]);
      const TimeNs run_end = std::min(end, cursor);
      wait(run_end, cursor);
      credit(*it, released, run_end);
      cursor = std::min(cursor, released);
      ++out.num_tasks;
      continue;
    }
    const TimeNs run_end = std::min(end, cursor);
    wait(run_end, cursor);
    credit(*it, start, run_end);
    cursor = std::min(cursor, start);
    ++out.num_tasks;
  }
  wait(from_ns, cursor);
  if (idle > 0) by_kind["idle"] += idle;
  out.length_ns = std::max<TimeNs>(0, to_ns - from_ns);
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
      it.begin_ns = schedule.start_ns[static_cast<size_t>(iter.begin_task)] - iter.begin_offset_ns;
      it.end_ns = schedule.end_ns[static_cast<size_t>(iter.end_task)] + iter.end_offset_ns;
      it.replayed_ns = it.end_ns - it.begin_ns;
      it.error_pct = ErrorPct(it.replayed_ns, it.measured_ns);
      errors.push_back(std::fabs(it.error_pct));
      report.iterations.push_back(it);
    }
    path_end = graph.iterations.back().end_task;
    window_begin = report.iterations.front().begin_ns;
    window_end = report.iterations.back().end_ns;
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
  DD_ASSIGN_OR_RETURN(Schedule schedule, Simulate(graph));
  return MakeReplayReport(graph, schedule);
}

}  // namespace daydream
