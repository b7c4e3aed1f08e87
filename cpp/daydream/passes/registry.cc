// The registry of passes: one line per pass, in the order `daydream.passes()`
// lists them.
#include "daydream/passes/comm.h"
#include "daydream/passes/pass.h"
#include "daydream/passes/scale.h"

namespace daydream {

const std::vector<PassInfo>& RegisteredPasses() {
  static const std::vector<PassInfo>* const kPasses = new std::vector<PassInfo>{
      DataParallelPassInfo(),
      TensorFusionPassInfo(),
      ScalePassInfo(),
  };
  return *kPasses;
}

}  // namespace daydream
