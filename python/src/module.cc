// daydream._core: the C++ library, translated for Python.
#include <pybind11/pybind11.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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
  m.def(
      "keep_freed_memory",
      [] {
#if defined(__GLIBC__)
        // Blocks up to 32 MiB (glibc's most) from the heap rather than
        // their own mappings, and a freed heap top kept up to 1 GiB.
        return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
#else
        return false;
#endif
      },
      "For a process that reads one trace and exits (the command line): memory one stage frees is kept "
      "for the next instead of going back to the kernel, whose fresh pages are faulted in and zeroed "
      "again (a tenth of a `daydream replay`). Process-wide; the library never calls it. Returns "
      "whether the allocator (glibc's) took the settings.");
}
