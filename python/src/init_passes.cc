// Bindings for passes and predictions: daydream._core.passes(), predict().
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "converters.h"
#include "daydream/analysis/predict.h"
#include "daydream/passes/pass.h"
#include "handles.h"
#include "init.h"
#include "status_casters.h"

namespace py = pybind11;

namespace daydream::python {
namespace {

std::string_view OptionTypeName(OptionType t) {
  switch (t) {
    case OptionType::kDouble: return "float";
    case OptionType::kInt: return "int";
    case OptionType::kBool: return "bool";
    case OptionType::kString: return "str";
  }
  return "str";
}

py::list PassList() {
  py::list out;
  for (const PassInfo& info : RegisteredPasses()) {
    py::list options;
    for (const OptionSpec& s : info.options) {
      py::dict o;
      o["name"] = s.name;
      o["type"] = std::string(OptionTypeName(s.type));
      o["default"] = s.default_value;
      o["help"] = s.help;
      options.append(o);
    }
    py::dict d;
    d["name"] = info.name;
    d["summary"] = info.summary;
    d["model"] = info.model;
    d["options"] = options;
    out.append(d);
  }
  return out;
}

// A prediction with the graphs and schedules it came from.
struct PredictionHandle {
  Prediction prediction;
  std::shared_ptr<ScheduleHandle> baseline;
  std::shared_ptr<ScheduleHandle> predicted;
  std::shared_ptr<Graph> predicted_graph;
};

py::dict BreakdownDict(const TimeBreakdown& b) {
  py::dict d;
  d["by_phase_ms"] = Shares(b.by_phase);
  d["by_resource_ms"] = Shares(b.by_resource);
  return d;
}

std::shared_ptr<PredictionHandle> RunPredict(const std::shared_ptr<Graph>& graph,
                                             const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& passes,
                                             const std::shared_ptr<ScheduleHandle>& baseline,
                                             const std::shared_ptr<PredictScratch>& scratch) {
  if (graph == nullptr) ThrowIfError(absl::InvalidArgumentError("predict: graph is None"));
  std::vector<PassRequest> requests;
  for (const auto& [name, options] : passes) requests.push_back(PassRequest{name, OptionMap(options.begin(), options.end())});
  if (baseline != nullptr && baseline->graph.get() != graph.get()) {
    ThrowIfError(absl::InvalidArgumentError(
        "predict: baseline= must be a replay of the graph predicted from (a baseline_schedule of it)"));
  }
  // With the GIL held, so that predictions on threads of their own never
  // build the shared graph's adjacency at the same time.
  if (!graph->has_adjacency()) graph->BuildAdjacency();
  // A scratch is one thread's: held from the copy into it to the recycling.
  if (scratch != nullptr && scratch->in_use.exchange(true)) {
    ThrowIfError(absl::FailedPreconditionError(
        "predict: this PredictScratch is in use by another prediction (use one per thread)"));
  }
  struct Release {
    PredictScratch* scratch;
    ~Release() {
      if (scratch != nullptr) scratch->in_use = false;
    }
  } release_scratch{scratch.get()};
  auto handle = std::make_shared<PredictionHandle>();
  {
    py::gil_scoped_release release;
    handle->prediction =
        ValueOrThrow(Predict(*graph, requests, baseline != nullptr ? baseline->replayed : nullptr, scratch.get()));
  }
  Prediction& p = handle->prediction;
  handle->baseline = baseline != nullptr ? baseline : std::make_shared<ScheduleHandle>(ScheduleHandle{graph, p.baseline});
  if (scratch != nullptr) {
    // The figures and reports stay; the graph and schedule go back to the scratch.
    scratch->Recycle(p);
    return handle;
  }
  handle->predicted_graph = std::make_shared<Graph>(std::move(p.predicted_graph));
  if (!handle->predicted_graph->has_adjacency()) handle->predicted_graph->BuildAdjacency();
  handle->predicted = std::make_shared<ScheduleHandle>(ScheduleHandle{handle->predicted_graph, p.predicted});
  return handle;
}

}  // namespace

void InitPasses(py::module_& m) {
  m.def("passes", &PassList, "Every pass: name, summary, model, options (name, type, default, help).");

  py::class_<PredictionHandle, std::shared_ptr<PredictionHandle>>(m, "PredictionResult",
                                                                  "The C++ result behind daydream.Prediction.")
      .def_property_readonly("measured_ms", [](const PredictionHandle& h) { return Ms(h.prediction.measured_ns); })
      .def_property_readonly("replayed_ms", [](const PredictionHandle& h) { return Ms(h.prediction.replayed_ns); })
      .def_property_readonly("predicted_ms", [](const PredictionHandle& h) { return Ms(h.prediction.predicted_ns); })
      .def_property_readonly("speedup", [](const PredictionHandle& h) { return h.prediction.speedup; })
      .def_property_readonly("notes", [](const PredictionHandle& h) { return h.prediction.notes; })
      .def_property_readonly("iterations",
                             [](const PredictionHandle& h) {
                               py::list out;
                               for (const IterationPrediction& it : h.prediction.iterations) {
                                 py::dict d;
                                 d["name"] = it.name;
                                 d["measured_ms"] = Ms(it.measured_ns);
                                 d["replayed_ms"] = Ms(it.replayed_ns);
                                 d["predicted_ms"] = Ms(it.predicted_ns);
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("before", [](const PredictionHandle& h) { return BreakdownDict(h.prediction.before); })
      .def_property_readonly("after", [](const PredictionHandle& h) { return BreakdownDict(h.prediction.after); })
      .def_property_readonly("critical_path_before",
                             [](const PredictionHandle& h) {
                               return CriticalPathDict(h.prediction.baseline->report.critical_path);
                             })
      .def_property_readonly("critical_path_after",
                             [](const PredictionHandle& h) {
                               return CriticalPathDict(h.prediction.predicted->report.critical_path);
                             })
      .def_property_readonly("baseline_schedule", [](const PredictionHandle& h) { return h.baseline; })
      .def_property_readonly("predicted_schedule", [](const PredictionHandle& h) { return h.predicted; })
      .def_property_readonly("predicted_graph", [](const PredictionHandle& h) { return h.predicted_graph; });

  py::class_<PredictScratch, std::shared_ptr<PredictScratch>>(
      m, "PredictScratch",
      "Memory one thread reuses over the predictions of a search; a prediction made in it keeps its figures "
      "and reports but not its predicted graph and schedule.")
      .def(py::init<>());

  m.def("predict", &RunPredict, py::arg("graph"), py::arg("passes"), py::arg("baseline") = nullptr,
        py::arg("scratch") = nullptr,
        "Applies passes [(name, {option: text})] to a copy of graph and replays both; baseline, the "
        "baseline_schedule of an earlier prediction from the same graph, saves replaying it again; in a "
        "scratch (one per thread), predicted_graph and predicted_schedule are None.");
}

}  // namespace daydream::python
