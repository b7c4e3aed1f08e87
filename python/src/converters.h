// Conversions of C++ report structs into Python dicts and lists, shared by
// the binding files.
#ifndef DAYDREAM_PYTHON_SRC_CONVERTERS_H_
#define DAYDREAM_PYTHON_SRC_CONVERTERS_H_

#include <pybind11/pybind11.h>

#include <vector>

#include "daydream/base/time.h"
#include "daydream/sim/replay.h"

namespace daydream::python {

namespace py = pybind11;

inline double Ms(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

inline py::dict Shares(const std::vector<TimeShare>& items) {
  py::dict d;
  for (const TimeShare& s : items) d[py::str(s.name)] = Ms(s.time_ns);
  return d;
}

inline py::dict CriticalPathDict(const CriticalPathSummary& c) {
  py::dict d;
  d["length_ms"] = Ms(c.length_ns);
  d["num_tasks"] = c.num_tasks;
  d["by_kind_ms"] = Shares(c.by_kind);
  d["by_phase_ms"] = Shares(c.by_phase);
  d["by_resource_ms"] = Shares(c.by_resource);
  py::list top;
  for (const TimeShare& s : c.top_tasks) top.append(py::make_tuple(s.name, Ms(s.time_ns)));
  d["top_tasks_ms"] = top;
  return d;
}

inline py::list IterationList(const ReplayReport& r) {
  py::list out;
  for (const IterationReplay& it : r.iterations) {
    py::dict d;
    d["name"] = it.name;
    d["measured_ms"] = Ms(it.measured_ns);
    d["replayed_ms"] = Ms(it.replayed_ns);
    d["error_pct"] = it.error_pct;
    d["begin_ms"] = Ms(it.begin_ns);
    d["end_ms"] = Ms(it.end_ns);
    d["gpu_measured_ms"] = Ms(it.gpu_measured_ns);
    d["gpu_replayed_ms"] = Ms(it.gpu_replayed_ns);
    out.append(d);
  }
  return out;
}

}  // namespace daydream::python

#endif  // DAYDREAM_PYTHON_SRC_CONVERTERS_H_
