// Runs passes in order and verifies the graph after each one that changed it
// (Graph::ValidateEdited: ids and edges valid, no cycle, times in range, one
// chain per resource), as XLA's
// HloPassPipeline runs its verifier.
#ifndef DAYDREAM_PASSES_PIPELINE_H_
#define DAYDREAM_PASSES_PIPELINE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"

namespace daydream {

class Pipeline {
 public:
  void AddPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }

  template <typename T, typename... Args>
  T& AddPass(Args&&... args) {
    auto pass = std::make_unique<T>(std::forward<Args>(args)...);
    T& ref = *pass;
    passes_.push_back(std::move(pass));
    return ref;
  }

  // Runs every pass on `graph`; returns true when any changed it. An error
  // names the pass that failed or left an invalid graph.
  absl::StatusOr<bool> Run(Graph& graph, PassContext& context);

  size_t size() const { return passes_.size(); }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace daydream

#endif  // DAYDREAM_PASSES_PIPELINE_H_
