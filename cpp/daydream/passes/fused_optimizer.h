// The fused_optimizer pass: what-if the optimizer step ran as one fused
// operation (apex/DeepSpeed FusedAdam, torch.optim's fused=True) instead of
// per-parameter operators. The model, its options and the rule that finds the
// step are in FusedOptimizerPassInfo().model and fused_optimizer.cc.
#ifndef DAYDREAM_PASSES_FUSED_OPTIMIZER_H_
#define DAYDREAM_PASSES_FUSED_OPTIMIZER_H_

#include "daydream/passes/pass.h"

namespace daydream {

// Pass info for the registry ("fused_optimizer").
PassInfo FusedOptimizerPassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_FUSED_OPTIMIZER_H_
