#include "daydream/graph/profiler_overhead.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daydream/base/strings.h"

namespace daydream {
namespace {

// One CPU thread's timeline as the graph has it: the gap before each task,
// then the task. points[2i] .. points[2i+1] is task i's gap, points[2i+1] ..
// points[2i+2] the task itself (recorded times).
struct Timeline {
  std::vector<int32_t> tasks;  // in start order
  std::vector<TimeNs> points;
  std::vector<TimeNs> cost;    // per span (points.size() - 1)
};

// Elements of the JSON array `list` ("[\"float\", \"ScalarList\", \"\"]": 3).
int64_t ListLength(std::string_view list) {
  int64_t commas = 0;
  int depth = 0;
  bool in_string = false;
  bool any = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') ++depth;
    else if (c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 1) ++commas;
    if (depth >= 1 && c != '[' && c != ' ' && c != ']') any = true;
  }
  return any ? commas + 1 : 0;
}

}  // namespace

absl::StatusOr<ProfilerOverheadRemoval> RemoveProfilerOverhead(const Trace& trace, Graph& graph,
                                                               const ProfilerOverhead& per_record) {
  if (per_record.begin_ns < 0 || per_record.end_ns < 0 || per_record.per_input_ns < 0 ||
      per_record.module_hook_ns < 0 || per_record.grad_hook_ns < 0) {
    return absl::InvalidArgumentError("profiler overhead: costs must be >= 0");
  }
  if (graph.profiler_overhead.records > 0) {
    return absl::FailedPreconditionError(
        StrCat(graph.source, ": the profiler's overhead was already removed from this graph"));
  }
  ProfilerOverheadRemoval removal;
  removal.per_record = per_record;
  if (per_record.zero()) {
    graph.profiler_overhead = removal;
    return removal;
  }

  // Each CPU thread's tasks, found through the trace track of their events.
  absl::flat_hash_map<int32_t, int32_t> timeline_of_track;
  std::vector<Timeline> timelines;
  absl::flat_hash_map<int32_t, int32_t> timeline_of_resource;
  for (size_t i = 0; i < graph.tasks.size(); ++i) {
    const Task& t = graph.tasks[i];
    if (t.resource < 0 || static_cast<size_t>(t.resource) >= graph.resources.size() ||
        graph.resources[static_cast<size_t>(t.resource)].kind != ResourceKind::kCpuThread || t.trace_event < 0) {
      continue;
    }
    if (static_cast<size_t>(t.trace_event) >= trace.events.size()) {
      return absl::InvalidArgumentError(StrCat(graph.source, ": task ", i, " names trace event ", t.trace_event,
                                               "; the trace has ", trace.events.size(),
                                               " (not the trace the graph was built from)"));
    }
    const int32_t track = trace.events[static_cast<size_t>(t.trace_event)].track;
    auto [it, added] = timeline_of_resource.try_emplace(t.resource, static_cast<int32_t>(timelines.size()));
    if (added) {
      timelines.emplace_back();
      timeline_of_track.try_emplace(track, it->second);
    }
    timelines[static_cast<size_t>(it->second)].tasks.push_back(static_cast<int32_t>(i));
  }
  for (Timeline& line : timelines) {
    std::stable_sort(line.tasks.begin(), line.tasks.end(), [&](int32_t a, int32_t b) {
      return graph.tasks[static_cast<size_t>(a)].recorded_start_ns < graph.tasks[static_cast<size_t>(b)].recorded_start_ns;
    });
    const TimeNs first = graph.tasks[static_cast<size_t>(line.tasks.front())].recorded_start_ns;
    line.points.push_back(std::min(graph.origin_ns, first));
    for (int32_t id : line.tasks) {
      const Task& t = graph.tasks[static_cast<size_t>(id)];
      // Clipped overlaps keep the points in order.
      const TimeNs start = std::max(line.points.back(), t.recorded_start_ns);
      line.points.push_back(start);
      line.points.push_back(start + t.duration_ns);
    }
    line.cost.assign(line.points.size() - 1, 0);
  }

  // Each record's cost, on the span before its start and after its end.
  auto add = [&](Timeline& line, TimeNs at, TimeNs cost, bool before) {
    if (cost <= 0) return false;
    const std::vector<TimeNs>& p = line.points;
    // before: the span (p[k], p[k+1]] holding `at`; after: [p[k], p[k+1]).
    auto it = before ? std::lower_bound(p.begin(), p.end(), at) : std::upper_bound(p.begin(), p.end(), at);
    if (it == p.begin() || it == p.end()) return false;
    line.cost[static_cast<size_t>(it - p.begin() - 1)] += cost;
    removal.estimated_ns += cost;
    return true;
  };
  constexpr std::string_view kModule = "daydream.module: ";
  constexpr std::string_view kGrad = "daydream.grad: ";
  for (const TraceEvent& ev : trace.events) {
    if (ev.instant || (ev.kind != EventKind::kCpuOp && ev.kind != EventKind::kUserAnnotation)) continue;
    auto it = timeline_of_track.find(ev.track);
    if (it == timeline_of_track.end()) continue;
    Timeline& line = timelines[static_cast<size_t>(it->second)];
    const std::string_view name = trace.Str(ev.name);
    TimeNs hook = 0;
    if (StartsWith(name, kModule)) hook = per_record.module_hook_ns;
    if (StartsWith(name, kGrad)) hook = per_record.grad_hook_ns;
    const int64_t inputs = per_record.per_input_ns > 0 ? ListLength(trace.Str(ev.input_types)) : 0;
    const TimeNs before = per_record.begin_ns + inputs * per_record.per_input_ns + hook / 2;
    const TimeNs after = per_record.end_ns + (hook - hook / 2);
    const bool counted = add(line, ev.ts_ns, before, true);
    if (add(line, ev.end_ns(), after, false) || counted) ++removal.records;
  }

  // Shorten each span by its cost, never below zero. A task's gap is the
  // graph's (a task woken by another thread has none: that wait is on the
  // edge from the other thread).
  for (Timeline& line : timelines) {
    for (size_t k = 0; k < line.cost.size(); ++k) {
      if (line.cost[k] == 0) continue;
      Task& t = graph.tasks[static_cast<size_t>(line.tasks[k / 2])];
      TimeNs& span = k % 2 == 0 ? t.gap_ns : t.duration_ns;
      const TimeNs cut = std::min(span, line.cost[k]);
      span -= cut;
      removal.removed_ns += cut;
    }
  }
  graph.profiler_overhead = removal;
  return removal;
}

}  // namespace daydream
