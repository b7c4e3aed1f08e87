// The generic what-if: scale task durations by class (GPU kernels, CPU work,
// communication, copies) or by name pattern.
#ifndef DAYDREAM_PASSES_SCALE_H_
#define DAYDREAM_PASSES_SCALE_H_

#include "daydream/passes/pass.h"

namespace daydream {

PassInfo ScalePassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_SCALE_H_
