// The amp pass: automatic mixed precision. GEMM and convolution kernels run
// on tensor cores (or at the double fp16 rate), memory-bound kernels move half
// the bytes, and on CPU-only graphs the ops autocast runs in bf16 take a
// calibrated ratio. Also the kernel-name classification it rests on, exposed
// so tests can pin which names count as what.
#ifndef DAYDREAM_PASSES_AMP_H_
#define DAYDREAM_PASSES_AMP_H_

#include <string>
#include <string_view>

#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"

namespace daydream {

// How mixed precision changes one GPU task.
enum class AmpClass {
  kUnchanged,     // neither compute-bound GEMM/convolution nor memory-bound
  kTensorCore,    // fp32 GEMM or convolution: runs in half precision
  kMemoryBound,   // elementwise, reduction, normalization, copy: half the bytes
  kAlreadyHalf,   // a GEMM/convolution or memory-bound kernel already in fp16/bf16
};

// Classifies a GPU task by its kind and name ("volta_sgemm_128x64_nn",
// "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, ...>(...)", "Memcpy DtoD
// (Device -> Device)"). Kernels are classified by their function name (the
// name without "void", template arguments and parameters); the precision
// comes from the whole name.
AmpClass ClassifyForAmp(TaskKind kind, std::string_view name);

// True for the CPU ops torch.autocast runs in bf16 on the CPU (its
// lower-precision list: aten::mm, addmm, bmm, matmul, linear, conv*, ...),
// by exact op name.
bool IsCpuAutocastOp(std::string_view name);

// The GEMM/convolution time factor for a device of compute capability
// `major`.`minor` (0.0: unknown), and why, for notes and docs.
struct GemmFactor {
  double factor = 1.0;
  std::string reason;
};
GemmFactor DefaultGemmFactor(int32_t major, int32_t minor);

PassInfo AmpPassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_AMP_H_
