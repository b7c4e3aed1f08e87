// Helpers shared by the C++ tests: small traces written inline, paths to test
// data and to the real traces in ../shared/traces.
#ifndef DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_
#define DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_

#include <string>
#include <vector>

#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/trace.h"

namespace daydream::testing {

// tests/data/<name>
std::string TestDataPath(const std::string& name);

// ../shared/traces/<relative>; fails the calling test (REQUIRE) if missing.
std::string SharedTracePath(const std::string& relative);

// A fresh empty directory under the system temp dir, removed at exit.
std::string TempDir();

// Wraps event objects (JSON text, comma-separated) into a Kineto document:
// {"traceEvents": [<events>]} plus optional extra top-level fields.
std::string KinetoDoc(const std::string& events, const std::string& extra_top_level = "");

// Parses `json` (a whole document) with ParseTraceText and REQUIREs success.
Trace ParseOrDie(const std::string& json);

// Finds the first task named `name`; REQUIREs that it exists.
int32_t TaskNamed(const Graph& graph, const std::string& name);

// True if an edge of `kind` runs from `from` to `to`.
bool HasEdge(const Graph& graph, int32_t from, int32_t to, EdgeKind kind);

// Writes `data` to `path` (plain) or gzip-compressed when `gzip` is true.
void WriteFile(const std::string& path, const std::string& data, bool gzip = false);

// Replays `graph`; REQUIREs success.
Schedule Sim(const Graph& graph);

// The median steady-state step (IterationReplay::step_replayed_ns) of a
// replay of `graph`; REQUIREs success and at least one iteration.
TimeNs MedianStep(const Graph& graph);

// The pass notes of `context`, one per line.
std::string AllNotes(const PassContext& context);

// The graph of the bundled V100 trace (examples/traces, the same file as
// ../shared/traces/hta-v100-1rank), built once.
const Graph& BundledV100();

}  // namespace daydream::testing

#endif  // DAYDREAM_TESTS_CPP_TEST_SUPPORT_H_
