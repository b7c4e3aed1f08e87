// Bindings for the CUPTI collector: _core.CuptiCollector and
// _core.cupti_built(). Python users reach them through daydream.cupti.
// Without DAYDREAM_WITH_CUPTI (a build that found no CUPTI headers) the class
// still exists and its constructor raises DaydreamError saying so.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "daydream/trace/trace.h"
#include "init.h"
#include "status_casters.h"

#ifdef DAYDREAM_WITH_CUPTI
#include "daydream/trace/cupti/collector.h"
#endif

namespace py = pybind11;

namespace daydream::python {
namespace {

#ifdef DAYDREAM_WITH_CUPTI
using Collector = CuptiCollector;

std::unique_ptr<Collector> MakeCollector(size_t buffer_bytes, int32_t max_buffers, bool record_driver_api,
                                         const std::string& driver_library, const std::string& cupti_library) {
  CuptiOptions options;
  options.buffer_bytes = buffer_bytes;
  options.max_buffers = max_buffers;
  options.record_driver_api = record_driver_api;
  options.driver_library = driver_library;
  options.cupti_library = cupti_library;
  return ValueOrThrow(CuptiCollector::Create(options));
}
constexpr bool kBuilt = true;
#else
// Stands in for CuptiCollector in builds without CUPTI: never constructed.
class Collector {
 public:
  absl::Status Start() { return Unbuilt(); }
  absl::Status Stop() { return Unbuilt(); }
  absl::StatusOr<Trace> TakeTrace() { return Unbuilt(); }
  bool recording() const { return false; }
  absl::Status PushExternalId(uint64_t) { return Unbuilt(); }
  absl::Status PopExternalId() { return Unbuilt(); }
  const std::string& cupti_path() const { return path_; }
  uint32_t cupti_version() const { return 0; }
  static absl::Status Unbuilt() {
    return absl::FailedPreconditionError(
        "this daydream was built without CUPTI (no cupti.h found at build time): install the CUDA toolkit "
        "with CUPTI and reinstall daydream");
  }

 private:
  std::string path_;
};

std::unique_ptr<Collector> MakeCollector(size_t, int32_t, bool, const std::string&, const std::string&) {
  ThrowIfError(Collector::Unbuilt());
  return nullptr;
}
constexpr bool kBuilt = false;
#endif

}  // namespace

void InitCupti(py::module_& m) {
  m.def("cupti_built", [] { return kBuilt; }, "Whether this build has the CUPTI collector.");
  py::class_<Collector>(m, "CuptiCollector",
                        "Records this process's CUDA activity with CUPTI (see daydream.cupti.Collector).")
      .def(py::init(&MakeCollector), py::arg("buffer_bytes") = size_t{8} << 20, py::arg("max_buffers") = 32,
           py::arg("record_driver_api") = true, py::arg("driver_library") = "", py::arg("cupti_library") = "")
      .def("start", [](Collector& c) { ThrowIfError(c.Start()); })
      .def("stop",
           [](Collector& c) {
             absl::Status s;
             {
               py::gil_scoped_release release;  // flushing waits for CUPTI's buffers
               s = c.Stop();
             }
             ThrowIfError(s);
           })
      .def("take_trace",
           [](Collector& c) {
             Trace trace;
             {
               py::gil_scoped_release release;
               trace = ValueOrThrow(c.TakeTrace());
             }
             return std::make_shared<Trace>(std::move(trace));
           })
      .def_property_readonly("recording", &Collector::recording)
      .def("push_external_id", [](Collector& c, uint64_t id) { ThrowIfError(c.PushExternalId(id)); },
           py::arg("external_id"))
      .def("pop_external_id", [](Collector& c) { ThrowIfError(c.PopExternalId()); })
      .def_property_readonly("cupti_path", &Collector::cupti_path)
      .def_property_readonly("cupti_version", &Collector::cupti_version);
}

}  // namespace daydream::python
