// Bindings for the simulator, replay reports and timelines.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "daydream/export/chrome_trace.h"
#include "daydream/graph/graph.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "converters.h"
#include "handles.h"
#include "init.h"
#include "status_casters.h"

namespace py = pybind11;

namespace daydream::python {
namespace {

std::shared_ptr<ScheduleHandle> RunSimulation(const std::shared_ptr<Graph>& graph) {
  if (graph == nullptr) ThrowIfError(absl::InvalidArgumentError("simulate: graph is None"));
  auto handle = std::make_shared<ScheduleHandle>();
  handle->graph = graph;
  // With the GIL held, as in predict: no two threads build it at once.
  if (!graph->has_adjacency()) graph->BuildAdjacency();
  {
    py::gil_scoped_release release;
    handle->replayed = ValueOrThrow(ReplayGraph(*graph));
  }
  return handle;
}

}  // namespace

void InitSim(py::module_& m) {
  py::class_<ScheduleHandle, std::shared_ptr<ScheduleHandle>>(
      m, "Schedule", "A simulated schedule: start and end of every task, iteration times, critical path.")
      .def_property_readonly("makespan_ms", [](const ScheduleHandle& h) { return Ms(h.schedule().makespan_ns); })
      .def_property_readonly("start_ns", [](const ScheduleHandle& h) { return h.schedule().start_ns; })
      .def_property_readonly("end_ns", [](const ScheduleHandle& h) { return h.schedule().end_ns; })
      .def_property_readonly("iterations", [](const ScheduleHandle& h) { return IterationList(h.report()); },
                             "Per iteration: name, measured_ms, replayed_ms, error_pct, begin_ms, end_ms.")
      .def_property_readonly("whole_trace", [](const ScheduleHandle& h) { return h.report().whole_trace; })
      .def_property_readonly("median_error_pct", [](const ScheduleHandle& h) { return h.report().median_error_pct; })
      .def_property_readonly("mean_error_pct", [](const ScheduleHandle& h) { return h.report().mean_error_pct; })
      .def_property_readonly("gpu_start_error_us",
                             [](const ScheduleHandle& h) {
                               py::dict d;
                               d["p50"] = static_cast<double>(h.report().gpu_start_error_p50_ns) / 1e3;
                               d["p95"] = static_cast<double>(h.report().gpu_start_error_p95_ns) / 1e3;
                               return d;
                             },
                             "|replayed - recorded| start of GPU tasks, median and 95th percentile, in us.")
      .def_property_readonly("critical_path", [](const ScheduleHandle& h) {
        const Iteration* last = h.graph->iterations.empty() ? nullptr : &h.graph->iterations.back();
        return CriticalPath(h.schedule(), last != nullptr ? last->end_task : -1);
      }, "Task ids on the critical path, first to last.")
      .def_property_readonly("critical_path_summary",
                             [](const ScheduleHandle& h) { return CriticalPathDict(h.report().critical_path); })
      .def_property_readonly("busy_ms_by_resource",
                             [](const ScheduleHandle& h) {
                               py::dict d;
                               for (size_t r = 0; r < h.graph->resources.size(); ++r) {
                                 d[py::str(std::string(h.graph->Str(h.graph->resources[r].name)))] =
                                     Ms(h.schedule().busy_ns[r]);
                               }
                               return d;
                             })
      .def(
          "write_timeline",
          [](const ScheduleHandle& h, const std::string& path, const std::string& label) {
            py::gil_scoped_release release;
            ThrowIfError(WriteTimeline(*h.graph, h.schedule(), path, label));
          },
          py::arg("path"), py::arg("label") = "replay",
          "Writes the schedule as Chrome-trace JSON for ui.perfetto.dev.");

  py::class_<TimelineWriter>(m, "TimelineWriter", "Several schedules in one Perfetto-readable file.")
      .def(py::init<>())
      .def(
          "add",
          [](TimelineWriter& w, const ScheduleHandle& h, const std::string& label) {
            w.Add(*h.graph, h.schedule(), label);
          },
          py::arg("schedule"), py::arg("label"))
      .def(
          "write",
          [](const TimelineWriter& w, const std::string& path) {
            py::gil_scoped_release release;
            ThrowIfError(w.Write(path));
          },
          py::arg("path"));

  m.def("simulate", &RunSimulation, py::arg("graph"), "Replays a graph in the event simulator.");
}

}  // namespace daydream::python
