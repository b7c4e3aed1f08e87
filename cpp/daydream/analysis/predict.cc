#include "daydream/analysis/predict.h"

#include <algorithm>
#include <map>
#include <memory>

#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/passes/pipeline.h"

namespace daydream {
namespace {

TimeNs MedianOf(std::vector<TimeNs> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<TimeShare> ToShares(const std::map<std::string, TimeNs>& m, TimeNs divisor) {
  std::vector<TimeShare> out;
  for (const auto& [name, t] : m) out.push_back(TimeShare{name, divisor > 0 ? t / divisor : t});
  std::stable_sort(out.begin(), out.end(), [](const TimeShare& a, const TimeShare& b) { return a.time_ns > b.time_ns; });
  return out;
}

}  // namespace

TimeBreakdown Breakdown(const Graph& graph, const Schedule& schedule) {
  std::map<std::string, TimeNs> by_phase, by_resource;
  const bool whole = graph.iterations.empty();
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const Task& task = graph.tasks[t];
    if (!whole && task.iteration < 0) continue;
    const TimeNs busy = schedule.end_ns[t] - schedule.start_ns[t];
    by_phase[std::string(PhaseName(task.phase))] += busy;
    by_resource[std::string(graph.Str(graph.resources[static_cast<size_t>(task.resource)].name))] += busy;
  }
  const auto n = static_cast<TimeNs>(std::max<size_t>(1, graph.iterations.size()));
  return TimeBreakdown{ToShares(by_phase, n), ToShares(by_resource, n)};
}

absl::StatusOr<Prediction> Predict(const Graph& baseline, const std::vector<PassRequest>& passes) {
  if (passes.empty()) return absl::InvalidArgumentError("predict: no optimization given");
  Prediction p;
  p.passes = passes;
  Pipeline pipeline;
  for (const PassRequest& r : passes) {
    DD_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, CreatePass(r.name, r.options));
    pipeline.AddPass(std::move(pass));
  }
  DD_ASSIGN_OR_RETURN(p.baseline_schedule, Simulate(baseline));
  p.predicted_graph = baseline;
  p.predicted_graph.BuildAdjacency();
  PassContext context;
  DD_RETURN_IF_ERROR(pipeline.Run(p.predicted_graph, context).status());
  p.notes = std::move(context.notes);
  DD_ASSIGN_OR_RETURN(p.predicted_schedule, Simulate(p.predicted_graph));
  p.baseline_report = MakeReplayReport(baseline, p.baseline_schedule);
  p.predicted_report = MakeReplayReport(p.predicted_graph, p.predicted_schedule);
  std::vector<TimeNs> measured, replayed, predicted;
  for (size_t i = 0; i < p.baseline_report.iterations.size(); ++i) {
    const IterationReplay& b = p.baseline_report.iterations[i];
    const IterationReplay& a = p.predicted_report.iterations[std::min(i, p.predicted_report.iterations.size() - 1)];
    p.iterations.push_back(IterationPrediction{b.name, b.step_measured_ns, b.step_replayed_ns, a.step_replayed_ns});
    measured.push_back(b.step_measured_ns);
    replayed.push_back(b.step_replayed_ns);
    predicted.push_back(a.step_replayed_ns);
  }
  p.measured_ns = MedianOf(measured);
  p.replayed_ns = MedianOf(replayed);
  p.predicted_ns = MedianOf(predicted);
  p.speedup = p.predicted_ns > 0 ? static_cast<double>(p.replayed_ns) / static_cast<double>(p.predicted_ns) : 1.0;
  p.before = Breakdown(baseline, p.baseline_schedule);
  p.after = Breakdown(p.predicted_graph, p.predicted_schedule);
  return p;
}

}  // namespace daydream
