#include "daydream/analysis/predict.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

TimeBreakdown Breakdown(const Graph& graph, const ReplayReport& report) {
  // Named from the report's sums per phase and per resource (a name per task
  // was a string map lookup per task, a tenth of a search loop's predict);
  // resources may share a name.
  std::map<std::string, TimeNs> by_phase, by_resource;
  for (size_t k = 0; k < report.phase_busy_ns.size(); ++k) {
    const TimeNs busy = report.phase_busy_ns[k];
    if (busy >= 0) by_phase[std::string(PhaseName(static_cast<Phase>(k)))] += busy;
  }
  for (size_t r = 0; r < report.resource_busy_ns.size() && r < graph.resources.size(); ++r) {
    const TimeNs busy = report.resource_busy_ns[r];
    if (busy >= 0) by_resource[std::string(graph.Str(graph.resources[r].name))] += busy;
  }
  const auto n = static_cast<TimeNs>(std::max<size_t>(1, graph.iterations.size()));
  return TimeBreakdown{ToShares(by_phase, n), ToShares(by_resource, n)};
}

void PredictScratch::Recycle(Prediction& prediction) {
  graph = std::move(prediction.predicted_graph);
  if (prediction.predicted != nullptr && prediction.predicted.use_count() == 1) {
    // Made by ReplayGraph, not const, and held by nothing else.
    simulator.Recycle(std::move(std::const_pointer_cast<ReplayedGraph>(prediction.predicted)->schedule));
  }
}

absl::StatusOr<Prediction> Predict(const Graph& baseline, const std::vector<PassRequest>& passes,
                                   std::shared_ptr<const ReplayedGraph> replayed, PredictScratch* scratch) {
  if (passes.empty()) return absl::InvalidArgumentError("predict: no optimization given");
  if (replayed != nullptr && replayed->schedule.start_ns.size() != baseline.tasks.size()) {
    return absl::InvalidArgumentError(StrCat("predict: the baseline replay given has ", replayed->schedule.start_ns.size(),
                                             " tasks, the baseline graph ", baseline.tasks.size()));
  }
  // Its busy time per resource becomes the breakdown before the change.
  if (replayed != nullptr && replayed->report.resource_busy_ns.size() != baseline.resources.size()) {
    return absl::InvalidArgumentError(StrCat("predict: the baseline replay given has ",
                                             replayed->report.resource_busy_ns.size(), " resources, the baseline graph ",
                                             baseline.resources.size()));
  }
  Prediction p;
  p.passes = passes;
  Pipeline pipeline;
  for (const PassRequest& r : passes) {
    DD_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, CreatePass(r.name, r.options));
    pipeline.AddPass(std::move(pass));
  }
  if (replayed == nullptr) {
    DD_ASSIGN_OR_RETURN(replayed, ReplayGraph(baseline));
  }
  p.baseline = std::move(replayed);
  if (scratch != nullptr) {
    scratch->graph = baseline;  // into the vectors the last variant left
    p.predicted_graph = std::move(scratch->graph);
  } else {
    p.predicted_graph = baseline;  // the copy keeps the adjacency, if it was built
  }
  if (!p.predicted_graph.has_adjacency()) p.predicted_graph.BuildAdjacency();
  PassContext context;
  DD_RETURN_IF_ERROR(pipeline.Run(p.predicted_graph, context).status());
  p.notes = std::move(context.notes);
  DD_ASSIGN_OR_RETURN(p.predicted, ReplayGraph(p.predicted_graph, scratch != nullptr ? &scratch->simulator : nullptr));
  const ReplayReport& before = p.baseline->report;
  const ReplayReport& after = p.predicted->report;
  std::vector<TimeNs> measured, replayed_steps, predicted;
  for (size_t i = 0; i < before.iterations.size(); ++i) {
    const IterationReplay& b = before.iterations[i];
    const IterationReplay& a = after.iterations[std::min(i, after.iterations.size() - 1)];
    p.iterations.push_back(IterationPrediction{b.name, b.step_measured_ns, b.step_replayed_ns, a.step_replayed_ns});
    measured.push_back(b.step_measured_ns);
    replayed_steps.push_back(b.step_replayed_ns);
    predicted.push_back(a.step_replayed_ns);
  }
  p.measured_ns = MedianOf(measured);
  p.replayed_ns = MedianOf(replayed_steps);
  p.predicted_ns = MedianOf(predicted);
  p.speedup = p.predicted_ns > 0 ? static_cast<double>(p.replayed_ns) / static_cast<double>(p.predicted_ns) : 1.0;
  p.before = Breakdown(baseline, p.baseline->report);
  p.after = Breakdown(p.predicted_graph, p.predicted->report);
  return p;
}

}  // namespace daydream
