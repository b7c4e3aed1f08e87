// Per-area binding entry points called from module.cc.
#ifndef DAYDREAM_PYTHON_SRC_INIT_H_
#define DAYDREAM_PYTHON_SRC_INIT_H_

#include <pybind11/pybind11.h>

namespace daydream::python {

void InitTrace(pybind11::module_& m);
void InitGraph(pybind11::module_& m);
void InitSim(pybind11::module_& m);
void InitPasses(pybind11::module_& m);
void InitCupti(pybind11::module_& m);

}  // namespace daydream::python

#endif  // DAYDREAM_PYTHON_SRC_INIT_H_
