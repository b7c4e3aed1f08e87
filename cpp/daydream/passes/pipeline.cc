#include "daydream/passes/pipeline.h"

#include <string>

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/passes/editor.h"

namespace daydream {

absl::StatusOr<bool> Pipeline::Run(Graph& graph, PassContext& context) {
  bool changed = false;
  for (const std::unique_ptr<Pass>& pass : passes_) {
    if (!graph.has_adjacency()) graph.BuildAdjacency();
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
    absl::Status valid = graph.Validate();
    if (valid.ok()) {
      if (!graph.has_adjacency()) graph.BuildAdjacency();
      valid = ValidateResourceChains(graph);
    }
    if (absl::IsOutOfRange(valid)) {
      // Times beyond what can be simulated come from the pass's options (a
      // factor too large for this graph), not from a bug.
      return absl::OutOfRangeError(StrCat(pass->name(), ": ", valid.message()));
    }
    if (!valid.ok()) {
      return absl::InternalError(StrCat(pass->name(), " left an invalid graph (a daydream bug): ", valid.message()));
    }
  }
  return changed;
}

}  // namespace daydream
