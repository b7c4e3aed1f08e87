#include "daydream/passes/pipeline.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

// What the cycle check reads of an edge (Graph::FindCycleTask).
struct EdgeEnds {
  int32_t from;
  int32_t to;
  EdgeKind kind;
};

std::vector<EdgeEnds> EdgeEndsOf(const Graph& graph) {
  std::vector<EdgeEnds> ends;
  ends.reserve(graph.edges.size());
  for (const Edge& e : graph.edges) ends.push_back(EdgeEnds{e.from, e.to, e.kind});
  return ends;
}

bool SameEdgeEnds(const Graph& graph, const std::vector<EdgeEnds>& before) {
  if (graph.edges.size() != before.size()) return false;
  for (size_t i = 0; i < before.size(); ++i) {
    const Edge& e = graph.edges[i];
    if (e.from != before[i].from || e.to != before[i].to || e.kind != before[i].kind) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> Pipeline::Run(Graph& graph, PassContext& context) {
  bool changed = false;
  for (const std::unique_ptr<Pass>& pass : passes_) {
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    // A pass that leaves the task count and every edge's ends and kind as
    // they were (one that rescales durations, gaps or lags) cannot have made
    // a cycle, so the check after it skips the cycle search (a third of it,
    // in a search over variants). The graphs passes get come from BuildGraph
    // or LoadGraph, which check for cycles.
    const size_t tasks_before = graph.tasks.size();
    const std::vector<EdgeEnds> ends_before = EdgeEndsOf(graph);
    absl::StatusOr<bool> result = pass->Run(graph, context);
    if (!result.ok()) {
      // Every error names its pass once.
      const std::string prefix = StrCat(pass->name(), ": ");
      const std::string message(result.status().message());
      if (StartsWith(message, prefix)) return result.status();
      return absl::Status(result.status().code(), StrCat(prefix, message));
    }
    if (!*result) continue;
    changed = true;
    // Validate first: building the adjacency trusts the edges' task ids.
    const bool same_edges = graph.tasks.size() == tasks_before && SameEdgeEnds(graph, ends_before);
    const absl::Status valid = graph.ValidateEdited(/*check_cycles=*/!same_edges);
    if (absl::IsOutOfRange(valid)) {
      // Times beyond what can be simulated come from the pass's options (a
      // factor too large for this graph), not from a bug.
      return absl::OutOfRangeError(StrCat(pass->name(), ": ", valid.message()));
    }
    if (!valid.ok()) {
      return absl::InternalError(StrCat(pass->name(), " left an invalid graph (a daydream bug): ", valid.message()));
    }
    if (!graph.has_adjacency()) graph.BuildAdjacency();
  }
  return changed;
}

}  // namespace daydream
