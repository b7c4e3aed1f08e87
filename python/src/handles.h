// Objects the bindings hand to Python that bundle C++ results with what they
// refer to (a schedule keeps its graph alive).
#ifndef DAYDREAM_PYTHON_SRC_HANDLES_H_
#define DAYDREAM_PYTHON_SRC_HANDLES_H_

#include <memory>

#include "daydream/graph/graph.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"

namespace daydream::python {

struct ScheduleHandle {
  std::shared_ptr<const Graph> graph;
  std::shared_ptr<const ReplayedGraph> replayed;  // of `graph`; a prediction's baseline shares it
  const Schedule& schedule() const { return replayed->schedule; }
  const ReplayReport& report() const { return replayed->report; }
};

}  // namespace daydream::python

#endif  // DAYDREAM_PYTHON_SRC_HANDLES_H_
