// The op_fusion pass: chains of elementwise kernels (or, on CPU-only graphs,
// elementwise CPU ops) fused into one, as torch.compile/XLA fuse pointwise
// ops; or, on CPU-only graphs given cpu_op_factors, forward/backward CPU ops
// scaled by factors measured under compilation. Also the name tests that
// decide what counts as elementwise.
#ifndef DAYDREAM_PASSES_OP_FUSION_H_
#define DAYDREAM_PASSES_OP_FUSION_H_

#include <string_view>

#include "daydream/passes/pass.h"

namespace daydream {

// True for elementwise GPU kernels by function name: PyTorch's
// (vectorized_|unrolled_)elementwise_kernel and Triton pointwise kernels
// (triton_poi_*). Template arguments and parameters do not count.
bool IsElementwiseKernelName(std::string_view name);

// True for elementwise CPU ops by exact name: aten::add, add_, mul, mul_, sub,
// div, relu, relu_, gelu, silu, sigmoid, tanh, threshold_backward, ...
bool IsElementwiseCpuOpName(std::string_view name);

PassInfo OpFusionPassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_OP_FUSION_H_
