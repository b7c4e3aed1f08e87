// Removing the profiler's own cost from a graph built from a trace it
// recorded, so that the graph replays the run as it goes without a profiler.
//
// Every range the profiler records on a CPU thread (an operator, a
// record_function annotation, daydream's module and gradient ranges) costs
// the recorded run time that no unprofiled run spends: the profiler's enter
// callback (input shapes included) runs before the range's start stamp, its
// exit callback after the end stamp. So the cost of a leaf operator's own
// record lands in the gaps around it, and the records nested in an operator
// lengthen that operator's span (an aten::linear with aten::t, transpose,
// as_strided and addmm inside carries four records' cost). The graph's CPU
// tasks are the innermost operators and the stretches of their parents' own
// work; their gaps are the time between. RemoveProfilerOverhead puts each
// record's begin cost on the span (task or gap) just before its start stamp
// and its end cost on the span just after its end stamp, and shortens each
// span by what it got, never below zero.
//
// The per-record costs are measured on the machine that recorded the trace,
// with the same profiler configuration (daydream.calibrate.profiler_overhead):
// a trace from elsewhere, with an unknown configuration, is left as it is.
#ifndef DAYDREAM_GRAPH_PROFILER_OVERHEAD_H_
#define DAYDREAM_GRAPH_PROFILER_OVERHEAD_H_

#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"
#include "daydream/trace/trace.h"

namespace daydream {

// Shortens the CPU tasks and gaps of `graph`, fresh from BuildGraph(trace),
// by the cost `per_record` gives the cpu_op and user_annotation ranges of
// `trace` (per_input_ns more for each input of its "Input type" list; ranges named "daydream.module: ..." add module_hook_ns, ranges
// named "daydream.grad: ..." grad_hook_ns, half before the start, half after
// the end). Costs outside the graph's CPU timelines (before its origin, after
// a thread's last task) are not counted. Records what it did in
// graph.profiler_overhead and returns it; a zero `per_record` changes
// nothing. Errors: negative costs, a graph whose tasks name events the trace
// does not have, a graph whose overhead was already removed.
absl::StatusOr<ProfilerOverheadRemoval> RemoveProfilerOverhead(const Trace& trace, Graph& graph,
                                                               const ProfilerOverhead& per_record);

}  // namespace daydream

#endif  // DAYDREAM_GRAPH_PROFILER_OVERHEAD_H_
