// Bindings for the trace layer: Trace, load_trace_file, load_job.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daydream/trace/job.h"
#include "daydream/trace/kineto_reader.h"
#include "daydream/trace/trace.h"
#include "init.h"
#include "status_casters.h"

namespace py = pybind11;

namespace daydream::python {
namespace {

py::list WarningsToList(const Warnings& warnings) {
  py::list out;
  for (const WarningCount& w : warnings.items()) {
    py::dict d;
    d["kind"] = w.kind;
    d["count"] = w.count;
    d["example"] = w.example;
    out.append(d);
  }
  return out;
}

py::dict DeviceToDict(const DeviceProperties& p) {
  py::dict d;
  d["id"] = p.id;
  d["name"] = p.name;
  d["total_memory_bytes"] = p.total_global_mem;
  d["compute_capability"] = py::make_tuple(p.compute_major, p.compute_minor);
  d["num_sms"] = p.num_sms;
  return d;
}

std::string TrackName(const Trace& t, const TraceTrack& track) {
  if (track.thread_name != 0) return std::string(t.Str(track.thread_name));
  return (track.gpu ? "stream " : "thread ") + std::to_string(track.tid);
}

// Counts by kind, tracks and devices: what `daydream info` prints.
py::dict TraceSummary(const Trace& t) {
  std::map<std::string, int64_t> by_kind;
  int64_t flows_by_cat = 0;
  for (const TraceEvent& ev : t.events) ++by_kind[std::string(EventKindName(ev.kind))];
  std::map<std::string, int64_t> flows;
  for (const TraceFlow& f : t.flows) ++flows[std::string(t.Str(f.category))];
  flows_by_cat = static_cast<int64_t>(t.flows.size());
  py::list threads, streams;
  for (const TraceTrack& track : t.tracks) {
    // Profiler bookkeeping spans ("Spans", "Traces") are not threads.
    if (track.num_events == 0 || track.pid_is_text || track.tid_is_text) continue;
    py::dict d;
    d["pid"] = track.pid;
    d["tid"] = track.tid;
    d["name"] = TrackName(t, track);
    d["events"] = track.num_events;
    (track.gpu ? streams : threads).append(d);
  }
  py::list devices;
  for (const DeviceProperties& p : t.devices) devices.append(DeviceToDict(p));
  py::dict s;
  s["path"] = t.path;
  s["trace_name"] = t.trace_name;
  s["rank"] = t.rank;
  s["world_size"] = t.world_size;
  s["backend"] = t.backend;
  s["num_events"] = static_cast<int64_t>(t.events.size());
  s["events_by_kind"] = by_kind;
  s["num_flows"] = flows_by_cat;
  s["flows_by_category"] = flows;
  s["threads"] = threads;
  s["streams"] = streams;
  s["devices"] = devices;
  s["base_time_ns"] = t.base_time_ns;
  s["warnings"] = WarningsToList(t.warnings);
  return s;
}

}  // namespace

void InitTrace(py::module_& m) {
  py::class_<Trace, std::shared_ptr<Trace>>(m, "Trace", "One rank's recorded events (see daydream.load_trace).")
      .def_property_readonly("path", [](const Trace& t) { return t.path; })
      .def_property_readonly("trace_name", [](const Trace& t) { return t.trace_name; })
      .def_property_readonly("rank", [](const Trace& t) { return t.rank; })
      .def_property_readonly("world_size", [](const Trace& t) { return t.world_size; })
      .def_property_readonly("num_events", [](const Trace& t) { return t.events.size(); })
      .def_property_readonly("warnings", [](const Trace& t) { return WarningsToList(t.warnings); })
      .def("summary", &TraceSummary, "Counts by event kind, threads, streams, devices, rank.")
      .def("__len__", [](const Trace& t) { return t.events.size(); })
      .def("__repr__", [](const Trace& t) {
        return "<daydream.Trace " + t.path + ": " + std::to_string(t.events.size()) + " events, rank " +
               std::to_string(t.rank) + ">";
      });

  m.def(
      "load_trace_file",
      [](const std::string& path) {
        Trace trace;
        {
          py::gil_scoped_release release;
          trace = ValueOrThrow(ReadTraceFile(path));
        }
        return std::make_shared<Trace>(std::move(trace));
      },
      py::arg("path"), "Reads one Kineto/Chrome-trace JSON file (plain or gzip).");

  m.def(
      "parse_trace_json",
      [](const std::string& text, const std::string& source) {
        Trace trace;
        {
          py::gil_scoped_release release;
          trace = ValueOrThrow(ParseTraceText(text, source));
        }
        return std::make_shared<Trace>(std::move(trace));
      },
      py::arg("text"), py::arg("source") = "<memory>", "Parses trace JSON held in a string.");

  m.def(
      "load_job",
      [](const std::string& path) {
        Job job;
        {
          py::gil_scoped_release release;
          job = ValueOrThrow(LoadJob(path));
        }
        std::vector<std::shared_ptr<Trace>> ranks;
        for (Trace& t : job.ranks) ranks.push_back(std::make_shared<Trace>(std::move(t)));
        return py::make_tuple(ranks, WarningsToList(job.warnings));
      },
      py::arg("path"), "Loads a directory of per-rank traces (or one file): (traces by rank, warnings).");

  m.def("rank_from_file_name", &RankFromFileName, py::arg("file_name"));
}

}  // namespace daydream::python
