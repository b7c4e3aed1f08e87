// Bindings for the graph layer: Graph, build_graph, save/load.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daydream/graph/builder.h"
#include "daydream/graph/graph.h"
#include "daydream/graph/profiler_overhead.h"
#include "daydream/graph/serialization.h"
#include "daydream/trace/trace.h"
#include "init.h"
#include "status_casters.h"

namespace py = pybind11;

namespace daydream::python {
namespace {

// Plain views handed to Python (copies: graphs outlive nothing here).
struct LayerView {
  int32_t index = -1;
  std::string name;
  int32_t parent = -1;
};

struct TensorView {
  int32_t index = -1;
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t bytes = 0;
  std::string role;
  int32_t producer = -1;
  int32_t layer = -1;
  std::vector<int32_t> producers;
};

py::dict Pairs(const std::vector<std::pair<std::string, int64_t>>& items) {
  py::dict d;
  for (const auto& [k, v] : items) d[py::str(k)] = v;
  return d;
}

py::dict OverheadDict(const Graph& g) {
  const ProfilerOverheadRemoval& o = g.profiler_overhead;
  py::dict d;
  d["begin_ns"] = o.per_record.begin_ns;
  d["end_ns"] = o.per_record.end_ns;
  d["per_input_ns"] = o.per_record.per_input_ns;
  d["module_hook_ns"] = o.per_record.module_hook_ns;
  d["grad_hook_ns"] = o.per_record.grad_hook_ns;
  d["records"] = o.records;
  d["estimated_ms"] = static_cast<double>(o.estimated_ns) / 1e6;
  d["removed_ms"] = static_cast<double>(o.removed_ns) / 1e6;
  return d;
}

py::dict GraphSummaryDict(const Graph& g) {
  const GraphSummary s = Summarize(g);
  py::dict d;
  d["num_tasks"] = s.num_tasks;
  d["num_edges"] = s.num_edges;
  d["num_resources"] = s.num_resources;
  d["num_layers"] = s.num_layers;
  d["num_tensors"] = s.num_tensors;
  d["num_iterations"] = s.num_iterations;
  d["tasks_by_kind"] = Pairs(s.tasks_by_kind);
  d["tasks_by_phase"] = Pairs(s.tasks_by_phase);
  d["edges_by_kind"] = Pairs(s.edges_by_kind);
  d["resources_by_kind"] = Pairs(s.resources_by_kind);
  d["total_task_time_ms"] = static_cast<double>(s.total_task_time_ns) / 1e6;
  return d;
}

py::dict TaskDict(const Graph& g, int32_t i) {
  if (i < 0 || static_cast<size_t>(i) >= g.tasks.size()) throw py::index_error("task id out of range");
  const Task& t = g.tasks[static_cast<size_t>(i)];
  py::dict d;
  d["id"] = i;
  d["name"] = std::string(g.Str(t.name));
  d["kind"] = std::string(TaskKindName(t.kind));
  d["phase"] = std::string(PhaseName(t.phase));
  d["resource"] = t.resource;
  d["duration_ns"] = t.duration_ns;
  d["gap_ns"] = t.gap_ns;
  d["recorded_start_ns"] = t.recorded_start_ns;
  d["layer"] = t.layer;
  d["iteration"] = t.iteration;
  d["priority"] = t.priority;
  d["bytes"] = t.bytes;
  d["correlation"] = t.correlation;
  d["trace_event"] = t.trace_event;
  return d;
}

}  // namespace

void InitGraph(py::module_& m) {
  py::class_<LayerView>(m, "Layer", "A model layer (nn.Module) the graph's tasks belong to.")
      .def_readonly("index", &LayerView::index)
      .def_readonly("name", &LayerView::name)
      .def_readonly("parent", &LayerView::parent)
      .def("__repr__", [](const LayerView& l) { return "<daydream.Layer " + l.name + ">"; });

  py::class_<TensorView>(m, "Tensor", "A tensor the graph knows: a gradient, a weight, ...")
      .def_readonly("index", &TensorView::index)
      .def_readonly("name", &TensorView::name)
      .def_readonly("shape", &TensorView::shape)
      .def_readonly("dtype", &TensorView::dtype)
      .def_readonly("bytes", &TensorView::bytes)
      .def_readonly("role", &TensorView::role)
      .def_readonly("producer", &TensorView::producer)
      .def_readonly("layer", &TensorView::layer)
      .def_readonly("producers", &TensorView::producers, "Per iteration: the task after which it is ready (-1: none).")
      .def("__repr__", [](const TensorView& t) {
        return "<daydream.Tensor " + t.name + " " + t.role + " " + std::to_string(t.bytes) + " bytes>";
      });

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph",
                                            "A dependency graph of one rank's training iterations.")
      .def_property_readonly("source", [](const Graph& g) { return g.source; })
      .def_property_readonly("rank", [](const Graph& g) { return g.rank; })
      .def_property_readonly("world_size", [](const Graph& g) { return g.world_size; })
      .def_property_readonly("num_tasks", [](const Graph& g) { return g.tasks.size(); })
      .def_property_readonly("num_edges", [](const Graph& g) { return g.edges.size(); })
      .def_property_readonly("device",
                             [](const Graph& g) {
                               py::dict d;
                               d["name"] = g.device.name;
                               d["compute_capability"] = py::make_tuple(g.device.compute_major, g.device.compute_minor);
                               d["total_memory_bytes"] = g.device.total_memory_bytes;
                               d["num_sms"] = g.device.num_sms;
                               return d;
                             })
      .def_property_readonly("iterations",
                             [](const Graph& g) {
                               py::list out;
                               for (const Iteration& it : g.iterations) {
                                 py::dict d;
                                 d["name"] = std::string(g.Str(it.name));
                                 d["measured_ms"] = static_cast<double>(it.measured_ns) / 1e6;
                                 d["begin_task"] = it.begin_task;
                                 d["end_task"] = it.end_task;
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("warnings",
                             [](const Graph& g) {
                               py::list out;
                               for (const WarningCount& w : g.warnings.items()) {
                                 py::dict d;
                                 d["kind"] = w.kind;
                                 d["count"] = w.count;
                                 d["example"] = w.example;
                                 out.append(d);
                               }
                               return out;
                             })
      .def_property_readonly("profiler_overhead", &OverheadDict,
                             "The profiler's cost removed from the CPU tasks and gaps (daydream.Profiler does it "
                             "for the graphs it captures): per-record costs in ns, records, estimated_ms and "
                             "removed_ms over the whole graph; all zero when none was removed.")
      .def("summary", &GraphSummaryDict,
           "Counts: tasks_by_kind, tasks_by_phase, edges_by_kind, resources_by_kind, ...")
      .def("task", &TaskDict, py::arg("task_id"), "One task as a dict.")
      .def(
          "resources",
          [](const Graph& g) {
            py::list out;
            for (const Resource& r : g.resources) {
              py::dict d;
              d["kind"] = std::string(ResourceKindName(r.kind));
              d["name"] = std::string(g.Str(r.name));
              d["process"] = r.process;
              d["thread"] = r.thread;
              out.append(d);
            }
            return out;
          },
          "The CPU threads, GPU streams and channels tasks run on.")
      .def(
          "layers",
          [](const Graph& g) {
            std::vector<LayerView> out;
            for (size_t i = 0; i < g.layers.size(); ++i) {
              out.push_back(LayerView{static_cast<int32_t>(i), std::string(g.Str(g.layers[i].name)), g.layers[i].parent});
            }
            return out;
          },
          "The layers (nn.Module instances) tasks belong to.")
      .def(
          "tensors",
          [](const Graph& g, std::optional<std::string> role) {
            std::vector<TensorView> out;
            for (size_t i = 0; i < g.tensors.size(); ++i) {
              const Tensor& t = g.tensors[i];
              const std::string r(TensorRoleName(t.role));
              if (role.has_value() && *role != r) continue;
              out.push_back(TensorView{static_cast<int32_t>(i), std::string(g.Str(t.name)), t.shape,
                                       std::string(g.Str(t.dtype)), t.bytes, r, t.producer, t.layer,
                                       t.producers});
            }
            return out;
          },
          py::arg("role") = py::none(), "Tensors, optionally only those with `role` (e.g. \"gradient\").")
      .def(
          "validate", [](const Graph& g) { ThrowIfError(g.Validate()); },
          "Raises DaydreamError when an invariant is broken.")
      .def(
          "save",
          [](const Graph& g, const std::string& path) {
            py::gil_scoped_release release;
            ThrowIfError(SaveGraph(g, path));
          },
          py::arg("path"), "Writes the graph (protobuf) atomically.")
      .def_static(
          "load",
          [](const std::string& path) {
            Graph g;
            {
              py::gil_scoped_release release;
              g = ValueOrThrow(LoadGraph(path));
            }
            return std::make_shared<Graph>(std::move(g));
          },
          py::arg("path"), "Reads a graph written by save().")
      .def(
          "to_bytes",
          [](const Graph& g) { return py::bytes(ValueOrThrow(SerializeGraph(g))); },
          "The graph as protobuf bytes.")
      .def_static(
          "from_bytes",
          [](const py::bytes& data) {
            return std::make_shared<Graph>(ValueOrThrow(DeserializeGraph(std::string(data), "<bytes>")));
          },
          py::arg("data"))
      .def(
          "copy",
          [](const Graph& g) {
            auto copy = std::make_shared<Graph>(g);
            copy->BuildAdjacency();
            return copy;
          },
          "An independent copy.")
      .def("__copy__", [](const Graph& g) {
        auto copy = std::make_shared<Graph>(g);
        copy->BuildAdjacency();
        return copy;
      })
      .def("__deepcopy__", [](const Graph& g, py::dict) {
        auto copy = std::make_shared<Graph>(g);
        copy->BuildAdjacency();
        return copy;
      })
      .def("__repr__", [](const Graph& g) {
        return "<daydream.Graph " + std::to_string(g.tasks.size()) + " tasks, " + std::to_string(g.edges.size()) +
               " edges, " + std::to_string(g.iterations.size()) + " iterations>";
      });

  m.def(
      "remove_profiler_overhead",
      [](const Trace& trace, const py::object& graph_object, int64_t begin_ns, int64_t end_ns,
         int64_t per_input_ns, int64_t module_hook_ns, int64_t grad_hook_ns) {
        Graph& graph = graph_object.cast<Graph&>();
        // Predictions keep each graph's baseline replay (daydream.api): this one changes in place.
        py::module_::import("daydream.api").attr("_forget_baseline")(graph_object);
        ProfilerOverhead per_record;
        per_record.per_input_ns = per_input_ns;
        per_record.begin_ns = begin_ns;
        per_record.end_ns = end_ns;
        per_record.module_hook_ns = module_hook_ns;
        per_record.grad_hook_ns = grad_hook_ns;
        ValueOrThrow(RemoveProfilerOverhead(trace, graph, per_record));
        return OverheadDict(graph);
      },
      py::arg("trace"), py::arg("graph"), py::arg("begin_ns"), py::arg("end_ns"), py::arg("per_input_ns") = 0,
      py::arg("module_hook_ns") = 0,
      py::arg("grad_hook_ns") = 0,
      "Shortens the CPU tasks and gaps of `graph` (fresh from build_graph(trace)) by the profiler's cost per "
      "recorded range; returns graph.profiler_overhead.");
  m.def(
      "build_graph",
      [](const Trace& trace, bool exact_latencies) {
        BuildOptions options;
        options.exact_latencies = exact_latencies;
        Graph g;
        {
          py::gil_scoped_release release;
          g = ValueOrThrow(BuildGraph(trace, options));
        }
        return std::make_shared<Graph>(std::move(g));
      },
      py::arg("trace"), py::arg("exact_latencies") = false, "Builds the dependency graph of a trace.");
}

}  // namespace daydream::python
