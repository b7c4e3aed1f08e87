// The batch_size pass: a new per-device batch size. Compute scales with the
// work until the device saturates; launches, the optimizer, communication and
// framework time do not.
#ifndef DAYDREAM_PASSES_BATCH_SIZE_H_
#define DAYDREAM_PASSES_BATCH_SIZE_H_

#include "daydream/base/time.h"
#include "daydream/passes/pass.h"

namespace daydream {

// The time factor of a compute task of `duration_ns` when the batch grows by
// `factor`: 1 + (factor - 1) * min(1, duration / saturation). A task that
// already fills the device (duration >= saturation) scales by the batch
// factor; a short one is mostly fixed cost. saturation_ns <= 0: every task
// scales fully.
double BatchTimeFactor(TimeNs duration_ns, double factor, TimeNs saturation_ns);

// How a CPU op of `duration_ns`, `fixed_ns` of which is fixed cost (dispatch,
// allocation), scales when its work grows by `factor`: only the part above
// the fixed cost grows, t' = fixed + factor * (t - fixed); 1 for t <= fixed.
double FixedCostTimeFactor(TimeNs duration_ns, double factor, TimeNs fixed_ns);

PassInfo BatchSizePassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_BATCH_SIZE_H_
