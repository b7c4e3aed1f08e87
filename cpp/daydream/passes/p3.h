// The p3 pass: priority-based parameter propagation (Jayarajan et al.,
// MLSys'19). Gradient all-reduces are sliced, the network sends ready slices
// in the order the next forward pass needs their layers, and each layer's
// forward waits only for its own slices. The model and its options are in
// P3PassInfo().model and p3.cc.
#ifndef DAYDREAM_PASSES_P3_H_
#define DAYDREAM_PASSES_P3_H_

#include "daydream/passes/pass.h"

namespace daydream {

// Pass info for the registry ("p3").
PassInfo P3PassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_P3_H_
