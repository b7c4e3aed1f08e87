// Predict: "how fast will my iteration be with optimization X?" Runs the
// requested passes on a copy of a baseline graph, replays both, and compares
// them: step time, time by phase and by resource, the critical path.
#ifndef DAYDREAM_ANALYSIS_PREDICT_H_
#define DAYDREAM_ANALYSIS_PREDICT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"

namespace daydream {

struct PassRequest {
  std::string name;
  OptionMap options;
};

// Where an iteration's time goes, averaged over iterations: busy time by phase
// and by resource (sums of task durations; resources run in parallel, so these
// do not add up to the step time).
struct TimeBreakdown {
  std::vector<TimeShare> by_phase;
  std::vector<TimeShare> by_resource;
};

struct IterationPrediction {
  std::string name;
  TimeNs measured_ns = 0;   // steady-state step (see IterationReplay::step_*), from the trace
  TimeNs replayed_ns = 0;   // same, baseline replay
  TimeNs predicted_ns = 0;  // same, after the passes
};

struct Prediction {
  std::vector<PassRequest> passes;
  std::vector<std::string> notes;      // what each pass did
  // Medians over iterations of the steady-state step time.
  TimeNs measured_ns = 0;
  TimeNs replayed_ns = 0;
  TimeNs predicted_ns = 0;
  double speedup = 1.0;                // replayed / predicted
  std::vector<IterationPrediction> iterations;
  TimeBreakdown before;
  TimeBreakdown after;
  std::shared_ptr<const ReplayedGraph> baseline;   // the one Predict was given, if any
  std::shared_ptr<const ReplayedGraph> predicted;  // of predicted_graph
  Graph predicted_graph;
};

// What one thread keeps between the predictions of a what-if search: the
// memory of the last variant graph and of its simulation. Predict copies the
// baseline into it; Recycle takes a prediction's graph and schedule back
// once its figures are read (the report and the rest stay).
// One thread at a time: the Python binding refuses a scratch already in use
// (`in_use`).
struct PredictScratch {
  Graph graph;
  Simulator simulator;
  std::atomic<bool> in_use{false};
  void Recycle(Prediction& prediction);
};

// Runs `passes` on a copy of `baseline` and replays both. `replayed`, when
// given, is `baseline`'s replay (ReplayGraph of it, unchanged since), which
// the variants of a what-if search share instead of each simulating the
// baseline again; `scratch`, the memory to work in.
absl::StatusOr<Prediction> Predict(const Graph& baseline, const std::vector<PassRequest>& passes,
                                   std::shared_ptr<const ReplayedGraph> replayed = nullptr,
                                   PredictScratch* scratch = nullptr);

// Busy time per phase and per resource name, per iteration, most first: the
// report's sums (ReplayReport::phase_busy_ns, resource_busy_ns) named.
TimeBreakdown Breakdown(const Graph& graph, const ReplayReport& report);

}  // namespace daydream

#endif  // DAYDREAM_ANALYSIS_PREDICT_H_
