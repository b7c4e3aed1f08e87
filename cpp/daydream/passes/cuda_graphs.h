// The cuda_graphs pass: the CPU side of a captured region (forward and
// backward, or the whole iteration) replaced by one cudaGraphLaunch per
// iteration, while the GPU work it launched keeps its time and stream order.
#ifndef DAYDREAM_PASSES_CUDA_GRAPHS_H_
#define DAYDREAM_PASSES_CUDA_GRAPHS_H_

#include "daydream/passes/pass.h"

namespace daydream {

PassInfo CudaGraphsPassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_CUDA_GRAPHS_H_
