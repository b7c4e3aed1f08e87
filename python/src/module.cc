// daydream._core: the C++ library, translated for Python.
#include <pybind11/pybind11.h>

#include "init.h"
#include "status_casters.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "daydream's C++ core: trace reading, graph building, simulation.";
  m.attr("__version__") = DAYDREAM_VERSION;
  py::register_exception<daydream::python::StatusError>(m, "DaydreamError", PyExc_RuntimeError);
  daydream::python::InitTrace(m);
  daydream::python::InitGraph(m);
  daydream::python::InitSim(m);
  daydream::python::InitPasses(m);
  daydream::python::InitCupti(m);
}
