// The registry of passes: one line per pass, in the order `daydream.passes()`
// lists them (the order of the predict issue's table).
#include "daydream/passes/amp.h"
#include "daydream/passes/batch_size.h"
#include "daydream/passes/comm.h"
#include "daydream/passes/cuda_graphs.h"
#include "daydream/passes/fused_optimizer.h"
#include "daydream/passes/op_fusion.h"
#include "daydream/passes/p3.h"
#include "daydream/passes/pass.h"
#include "daydream/passes/scale.h"

namespace daydream {

const std::vector<PassInfo>& RegisteredPasses() {
  static const std::vector<PassInfo>* const kPasses = new std::vector<PassInfo>{
      AmpPassInfo(),          FusedOptimizerPassInfo(), TensorFusionPassInfo(),
      DataParallelPassInfo(), P3PassInfo(),             OpFusionPassInfo(),
      CudaGraphsPassInfo(),   ScalePassInfo(),          BatchSizePassInfo(),
  };
  return *kPasses;
}

}  // namespace daydream
