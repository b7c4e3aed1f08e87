#include "daydream/passes/amp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

bool ContainsAny(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) {
    if (Contains(s, p)) return true;
  }
  return false;
}

// GEMM and convolution kernels: cuBLAS/cuBLASLt, CUTLASS, cuDNN convolution
// engines (implicit GEMM, Winograd, FFT, weight/data gradients).
bool IsGemmOrConvolution(std::string_view fn) {
  return ContainsAny(fn, {"gemm", "cutlass", "cublas", "conv", "scudnn", "winograd", "fft", "wgrad", "dgrad",
                          "xmma", "nvjet", "fprop"});
}

// Kernels that match the GEMM/convolution words but do no matrix math:
// normalization, pooling, softmax, elementwise, reductions (split-K, wgrad
// partial sums), layout transforms and conversions, index set-up.
bool IsNotMatrixMath(std::string_view fn) {
  return ContainsAny(fn, {"bn_", "norm", "pool", "softmax", "elementwise", "reduce", "nchwtonhwc", "nhwctonchw",
                          "transpose", "offsets", "convert"});
}

bool IsMemoryBoundKernel(std::string_view fn) {
  return ContainsAny(fn, {"elementwise", "pointwise", "triton_poi", "triton_red", "triton_per", "reduce", "norm",
                          "bn_", "softmax", "dropout", "copy", "cast", "convert", "fill", "transpose", "nchwtonhwc",
                          "nhwctonchw", "scalepacked", "pool", "gather", "scatter", "index", "embedding"});
}

// Precision markers anywhere in a kernel's name, template arguments included:
// fp16/bf16 tensor-core tiles (h884, h1688, s16816) and half types.
bool IsHalfPrecision(std::string_view name) {
  const std::string lower = AsciiLower(name);
  return ContainsAny(lower, {"h884", "h1688", "s16816", "f16", "fp16", "half", "bfloat16"});
}

bool HasGpuStreams(const Graph& graph) {
  for (const Resource& r : graph.resources) {
    if (r.kind == ResourceKind::kGpuStream) return true;
  }
  return false;
}

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

class AmpPass : public Pass {
 public:
  explicit AmpPass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "amp"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    if (o_.Double("gemm_factor") < 0) {
      return absl::InvalidArgumentError("amp: gemm_factor must be > 0 (or 0: by the device's compute capability)");
    }
    for (const char* k : {"mem_factor", "cpu_gemm_factor"}) {
      if (o_.Double(k) <= 0) return absl::InvalidArgumentError(StrCat("amp: ", k, " must be > 0"));
    }
    return HasGpuStreams(graph) ? RunGpu(graph, context) : RunCpu(graph, context);
  }

 private:
  absl::StatusOr<bool> RunGpu(Graph& graph, PassContext& context) {
    GemmFactor gemm{o_.Double("gemm_factor"), "set by the caller"};
    if (gemm.factor == 0) gemm = DefaultGemmFactor(graph.device.compute_major, graph.device.compute_minor);
    const double mem = o_.Double("mem_factor");
    std::vector<int32_t> tensor_core, memory_bound;
    int64_t already_half = 0, optimizer = 0, gpu_tasks = 0;
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const Task& t = graph.tasks[i];
      if (graph.resources[static_cast<size_t>(t.resource)].kind != ResourceKind::kGpuStream) continue;
      ++gpu_tasks;
      const AmpClass c = ClassifyForAmp(t.kind, graph.Str(t.name));
      if (c == AmpClass::kAlreadyHalf) ++already_half;
      if (c != AmpClass::kTensorCore && c != AmpClass::kMemoryBound) continue;
      // AMP keeps fp32 master weights: the optimizer step is unchanged.
      if (t.phase == Phase::kOptimizer) {
        ++optimizer;
        continue;
      }
      (c == AmpClass::kTensorCore ? tensor_core : memory_bound).push_back(static_cast<int32_t>(i));
    }
    if (tensor_core.empty() && memory_bound.empty()) {
      return absl::NotFoundError(StrCat(
          "amp: none of the ", gpu_tasks, " GPU tasks outside the optimizer can run in half precision (looked for "
          "fp32 GEMM/convolution kernels: gemm, cutlass, cublas, conv, cudnn winograd/fft/wgrad/dgrad; and "
          "memory-bound kernels: elementwise, reduce, norm, softmax, dropout, copy, DtoD memcpy)",
          already_half > 0 ? StrCat("; ", already_half, " kernels already run in fp16/bf16") : std::string()));
    }
    TimeNs tc_before = 0, tc_after = 0, mem_before = 0, mem_after = 0;
    GraphEditor editor(graph);
    for (int32_t t : tensor_core) {
      tc_before += graph.tasks[static_cast<size_t>(t)].duration_ns;
      editor.ScaleDuration(t, gemm.factor);
      tc_after += graph.tasks[static_cast<size_t>(t)].duration_ns;
    }
    for (int32_t t : memory_bound) {
      mem_before += graph.tasks[static_cast<size_t>(t)].duration_ns;
      editor.ScaleDuration(t, mem);
      mem_after += graph.tasks[static_cast<size_t>(t)].duration_ns;
    }
    std::string unchanged;
    if (already_half > 0) StrAppend(&unchanged, "; ", already_half, " kernels already in fp16/bf16 unchanged");
    if (optimizer > 0) StrAppend(&unchanged, "; ", optimizer, " optimizer kernels stay fp32 (master weights)");
    if (editor.num_edits() == 0) {
      context.Note(StrCat("amp: gemm_factor ", Fixed(gemm.factor, 3), " and mem_factor ", Fixed(mem, 3),
                          " leave every kernel's time as it was; the graph is unchanged"));
      return false;
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    context.Note(StrCat("amp: ", tensor_core.size(), " GEMM/convolution kernels x ", Fixed(gemm.factor, 3), " (",
                        gemm.reason, "): ", Fixed(NsToMs(tc_before), 2), " -> ", Fixed(NsToMs(tc_after), 2),
                        " ms; ", memory_bound.size(), " memory-bound kernels and copies x ", Fixed(mem, 3),
                        " (half the bytes): ", Fixed(NsToMs(mem_before), 2), " -> ", Fixed(NsToMs(mem_after), 2),
                        " ms", unchanged));
    return true;
  }

  absl::StatusOr<bool> RunCpu(Graph& graph, PassContext& context) {
    const double factor = o_.Double("cpu_gemm_factor");
    DD_ASSIGN_OR_RETURN(const EventFactors measured,
                        ParseEventFactors("amp", "cpu_op_factors", o_.String("cpu_op_factors")));
    // Per task: the factor measured for its trace event (its op at its
    // recorded shapes), else cpu_gemm_factor for ops on autocast's list.
    struct Op {
      int32_t task;
      double factor;
      bool measured;
    };
    std::vector<Op> ops;
    int64_t num_measured = 0;
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const Task& t = graph.tasks[i];
      if (t.kind != TaskKind::kCpuOp || t.phase == Phase::kOptimizer) continue;
      if (const double* f = EventFactorOf(measured, t)) {
        ops.push_back({static_cast<int32_t>(i), *f, true});
        ++num_measured;
      } else if (IsCpuAutocastOp(graph.Str(t.name))) {
        ops.push_back({static_cast<int32_t>(i), factor, false});
      }
    }
    if (ops.empty()) {
      return absl::NotFoundError(
          "amp: CPU-only graph without an op that CPU autocast runs in bf16 (looked for leaf ops aten::mm, addmm, "
          "bmm, baddbmm, matmul, linear, conv*, _convolution, convolution_backward, mkldnn_convolution, ...)");
    }
    if (factor == 1.0 && num_measured == 0) {
      context.Note(StrCat("amp: ", ops.size(), " CPU matmul/convolution ops found, but cpu_gemm_factor is 1 (not "
                          "calibrated) and cpu_op_factors is empty: pass the bf16/fp32 time ratios measured on this "
                          "CPU (daydream.calibrate.amp_cpu_op_factors); the graph is unchanged"));
      return false;
    }
    TimeNs measured_before = 0, measured_after = 0, other_before = 0, other_after = 0;
    double lo = 0, hi = 0;
    GraphEditor editor(graph);
    for (const Op& op : ops) {
      TimeNs& before = op.measured ? measured_before : other_before;
      TimeNs& after = op.measured ? measured_after : other_after;
      before += graph.tasks[static_cast<size_t>(op.task)].duration_ns;
      editor.ScaleDuration(op.task, op.factor);
      after += graph.tasks[static_cast<size_t>(op.task)].duration_ns;
      if (op.measured) {
        lo = lo == 0 ? op.factor : std::min(lo, op.factor);
        hi = std::max(hi, op.factor);
      }
    }
    if (editor.num_edits() == 0) {
      context.Note("amp: the CPU ops are too short for their factors to change them; the graph is unchanged");
      return false;
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    const int64_t num_other = static_cast<int64_t>(ops.size()) - num_measured;
    std::string note = "amp: CPU-only graph";
    if (num_measured > 0) {
      StrAppend(&note, ": ", num_measured, " ops at their measured bf16/fp32 factors (cpu_op_factors, x ",
                Fixed(lo, 3), "-", Fixed(hi, 3), "): ", Fixed(NsToMs(measured_before), 2), " -> ",
                Fixed(NsToMs(measured_after), 2), " ms");
    }
    if (num_other > 0 && factor == 1.0) {
      StrAppend(&note, "; ", num_other, " matmul/convolution ops without a measured factor (wrappers such as "
                "aten::linear, ops not replayed) unchanged: cpu_gemm_factor is 1");
    } else if (num_other > 0) {
      StrAppend(&note, num_measured > 0 ? "; " : ": ", num_other, " matmul/convolution ops run in bf16, x ",
                Fixed(factor, 3), " (cpu_gemm_factor): ", Fixed(NsToMs(other_before), 2), " -> ",
                Fixed(NsToMs(other_after), 2), " ms");
    }
    context.Note(note);
    return true;
  }

  PassOptions o_;
};

}  // namespace

AmpClass ClassifyForAmp(TaskKind kind, std::string_view name) {
  if (kind == TaskKind::kMemcpy) {
    return Contains(name, "DtoD") || Contains(name, "Device -> Device") ? AmpClass::kMemoryBound
                                                                        : AmpClass::kUnchanged;
  }
  if (kind != TaskKind::kKernel) return AmpClass::kUnchanged;
  const std::string fn = KernelFunctionName(name);
  AmpClass c = AmpClass::kUnchanged;
  if (IsGemmOrConvolution(fn) && !IsNotMatrixMath(fn)) {
    c = AmpClass::kTensorCore;
  } else if (IsMemoryBoundKernel(fn)) {
    c = AmpClass::kMemoryBound;
  }
  if (c != AmpClass::kUnchanged && IsHalfPrecision(name)) c = AmpClass::kAlreadyHalf;
  return c;
}

bool IsCpuAutocastOp(std::string_view name) {
  // torch.autocast("cpu") lower-precision list, plus what those ops run as
  // innermost (leaf) ops: _convolution -> mkldnn_convolution, and backward.
  static constexpr std::string_view kOps[] = {
      "aten::mm",          "aten::addmm",         "aten::bmm",
      "aten::baddbmm",     "aten::addbmm",        "aten::matmul",
      "aten::linear",      "aten::conv1d",        "aten::conv2d",
      "aten::conv3d",      "aten::conv_tbc",      "aten::conv_transpose1d",
      "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
      "aten::_convolution", "aten::convolution_backward", "aten::mkldnn_convolution",
      "aten::mkldnn_linear", "aten::_mkldnn_convolution", "aten::mkldnn_rnn_layer",
      "aten::linalg_vecdot", "aten::prelu",         "aten::scaled_dot_product_attention",
      "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_native_multi_head_attention",
  };
  for (std::string_view op : kOps) {
    if (name == op) return true;
  }
  return false;
}

GemmFactor DefaultGemmFactor(int32_t major, int32_t minor) {
  if (major <= 0) {
    return {1.0 / 3.0, "compute capability unknown: assumed tensor cores, Daydream's measured 1/3"};
  }
  if (major < 6) {
    return {1.0, StrCat("compute capability ", major, ".", minor, " has no fast fp16 math: GEMMs unchanged")};
  }
  if (major == 6) {
    if (minor == 1) {
      return {1.0, "compute capability 6.1 (consumer Pascal) runs fp16 math at 1/64 rate: GEMMs unchanged"};
    }
    return {0.5, StrCat("compute capability 6.", minor, " (Pascal): 2x fp16 rate, no tensor cores")};
  }
  if (major == 7) {
    return {1.0 / 3.0, StrCat("compute capability 7.", minor, " (Volta/Turing tensor cores): Daydream's measured 1/3")};
  }
  if (major == 8) {
    return {0.45, StrCat("compute capability 8.", minor,
                         " (Ampere/Ada): fp32 convolutions already use TF32 tensor cores in cuDNN")};
  }
  return {1.0 / 3.0, StrCat("compute capability ", major, ".", minor, " (Hopper or newer tensor cores)")};
}

PassInfo AmpPassInfo() {
  PassInfo info;
  info.name = "amp";
  info.summary = "automatic mixed precision: GEMM/convolution on tensor cores, half the bytes elsewhere";
  info.model =
      "GPU graphs: fp32 GEMM and convolution kernels (cuBLAS/cuBLASLt, CUTLASS, cuDNN implicit-GEMM, "
      "Winograd, FFT, wgrad/dgrad engines; by kernel function name, not batch norm, pooling, softmax or "
      "elementwise) take gemm_factor of their time, by compute capability unless set: 6.0/6.2 Pascal 0.5 "
      "(double fp16 rate, no tensor cores), 6.1 and older 1 (no fast fp16), 7.x Volta/Turing 1/3 (Daydream's "
      "measured tensor-core factor), 8.x Ampere 0.45 (cuDNN already runs fp32 convolutions in TF32), 9.x and "
      "newer 1/3, unknown 1/3. Memory-bound kernels (elementwise, reductions, batch/layer norm, softmax, "
      "dropout, pooling, copy/cast/layout kernels) and device-to-device copies take mem_factor (0.5: half the "
      "bytes). Kernels already in fp16/bf16, optimizer kernels (AMP keeps fp32 master weights), "
      "communication, host copies and CPU work are unchanged; the cast kernels autocast adds and GradScaler's "
      "unscale step are not modelled. CPU-only graphs: an op with a factor in cpu_op_factors (keyed by its "
      "trace event; daydream.calibrate.amp_cpu_op_factors replays each matmul, convolution and attention op "
      "of the forward and backward at its recorded shapes in fp32 and in bf16 on this CPU, the casts of its "
      "weights to bf16 and of their gradients back included) takes that factor; the other leaf ops CPU "
      "autocast runs in bf16 (aten::mm, addmm, bmm, matmul, linear, conv*, _convolution, mkldnn_convolution, "
      "...) take cpu_gemm_factor (1: not calibrated, no change); everything else is unchanged. Source: Daydream (USENIX ATC'20) AMP model "
      "(compute-bound x 1/3, memory-bound x 1/2); PyTorch autocast op lists.";
  info.options = {
      {"gemm_factor", OptionType::kDouble, "0",
       "time factor for fp32 GEMM/convolution kernels (0: by the device's compute capability)"},
      {"mem_factor", OptionType::kDouble, "0.5", "time factor for memory-bound kernels and DtoD copies"},
      {"cpu_gemm_factor", OptionType::kDouble, "1",
       "time factor for bf16-autocast CPU ops on CPU-only graphs without a measured factor (1: not calibrated)"},
      {"cpu_op_factors", OptionType::kString, "",
       "CPU-only graphs: bf16/fp32 time factors measured per op at its recorded shapes, as "
       "TRACE_EVENT=FACTOR;... (daydream.calibrate.amp_cpu_op_factors; \"\": none)"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new AmpPass(o));
  };
  return info;
}

}  // namespace daydream
