// Tests of passes/amp: which kernels count as tensor-core GEMM/convolution,
// memory-bound or already half precision; the factor by compute capability;
// CPU-only graphs; errors; and the bundled V100 trace replayed before and
// after.
#include "daydream/passes/amp.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using namespace daydream::testing;

namespace {

constexpr TimeNs kUs = 1000;

// One iteration on one CPU thread that launches kernels onto one stream, or
// (gpu = false) a CPU thread alone, on a device of compute capability
// major.minor.
struct Fixture : PassTestGraph {
  explicit Fixture(bool gpu = true, int32_t major = 7, int32_t minor = 0) : PassTestGraph(gpu ? 1 : 0) {
    g.device.compute_major = major;
    g.device.compute_minor = minor;
  }

  // A cudaLaunchKernel call and the GPU task it launches; returns the latter.
  int32_t Gpu(const std::string& name, TimeNs duration, Phase phase = Phase::kForward,
              TaskKind kind = TaskKind::kKernel) {
    return Launch(kind, name, duration, phase);
  }

  absl::StatusOr<bool> Run(const OptionMap& options = {}) {
    return RunPass(AmpPassInfo(), g, context, options);
  }
};

const std::string kSgemm = "volta_sgemm_128x64_nn";
const std::string kConv = "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1";
const std::string kAdd =
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, "
    "3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)";
const std::string kBatchNorm =
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, true, 1, true>(cudnnTensorStruct, float const*)";
const std::string kOffsets = "void cask_cudnn_infer::computeOffsetsKernel<false, false>(cask_cudnn_infer::ComputeOffsetsParams)";
const std::string kHalfGemm = "volta_h884gemm_64x64_ldg8_nn";

}  // namespace

TEST_CASE("amp runs fp32 GEMM and convolution kernels at the Volta factor and memory-bound kernels at half",
          "[amp]") {
  Fixture f;
  const int32_t gemm = f.Gpu(kSgemm, 300 * kUs);
  const int32_t conv = f.Gpu(kConv, 600 * kUs);
  const int32_t add = f.Gpu(kAdd, 100 * kUs);
  const int32_t bn = f.Gpu(kBatchNorm, 200 * kUs);
  const int32_t dtod = f.Gpu("Memcpy DtoD (Device -> Device)", 80 * kUs, Phase::kForward, TaskKind::kMemcpy);
  const int32_t htod = f.Gpu("Memcpy HtoD (Pageable -> Device)", 80 * kUs, Phase::kForward, TaskKind::kMemcpy);
  const int32_t memset = f.Gpu("Memset (Device)", 10 * kUs, Phase::kForward, TaskKind::kMemset);
  const int32_t offsets = f.Gpu(kOffsets, 10 * kUs);
  const int32_t half = f.Gpu(kHalfGemm, 300 * kUs);
  const int32_t optimizer = f.Gpu(kAdd, 100 * kUs, Phase::kOptimizer);
  const int32_t cpu = f.CpuOp("aten::addmm", 50 * kUs);
  f.Finish();
  const TimeNs before = Sim(f.g).makespan_ns;
  const size_t tasks = f.g.tasks.size();

  absl::StatusOr<bool> changed = f.Run();
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(f.g.tasks.size() == tasks);  // ids unchanged: only durations move
  CHECK(f.Duration(gemm) == 100 * kUs);
  CHECK(f.Duration(conv) == 200 * kUs);
  CHECK(f.Duration(add) == 50 * kUs);
  CHECK(f.Duration(bn) == 100 * kUs);
  CHECK(f.Duration(dtod) == 40 * kUs);
  CHECK(f.Duration(htod) == 80 * kUs);
  CHECK(f.Duration(memset) == 10 * kUs);
  CHECK(f.Duration(offsets) == 10 * kUs);
  CHECK(f.Duration(half) == 300 * kUs);
  CHECK(f.Duration(optimizer) == 100 * kUs);  // fp32 master weights
  CHECK(f.Duration(cpu) == 50 * kUs);
  CHECK(Sim(f.g).makespan_ns < before);
  const std::string notes = AllNotes(f.context);
  INFO(notes);
  CHECK_THAT(notes, Catch::Contains("2 GEMM/convolution kernels x 0.333"));
  CHECK_THAT(notes, Catch::Contains("3 memory-bound kernels and copies x 0.500"));
  CHECK_THAT(notes, Catch::Contains("1 kernels already in fp16/bf16"));
  CHECK_THAT(notes, Catch::Contains("1 optimizer kernels stay fp32"));
}

TEST_CASE("amp classifies kernels by function name, not by their template arguments", "[amp]") {
  // Matrix math on tensor cores.
  CHECK(ClassifyForAmp(TaskKind::kKernel, "volta_sgemm_64x64_nt") == AmpClass::kTensorCore);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "cudnn_train_volta_scudnn_128x128_stridedB_splitK_medium_nn_v1") ==
        AmpClass::kTensorCore);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
                       "WinogradDataParams<float, float>)") == AmpClass::kTensorCore);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*)") ==
        AmpClass::kTensorCore);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)") ==
        AmpClass::kTensorCore);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16") ==
        AmpClass::kTensorCore);
  // Named like cuDNN/cuBLAS but no matrix math: memory-bound.
  CHECK(ClassifyForAmp(TaskKind::kKernel, kBatchNorm) == AmpClass::kMemoryBound);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, true, false>"
                       "(cublasLt::cublasSplitKParams<float>)") == AmpClass::kMemoryBound);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(void*, void const*)") ==
        AmpClass::kMemoryBound);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*)") ==
        AmpClass::kMemoryBound);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)") ==
        AmpClass::kMemoryBound);
  // "gemm" in the parameter list does not make an elementwise kernel a GEMM.
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void at::native::vectorized_elementwise_kernel<4, Functor>(int, gemm_params, conv_params)") ==
        AmpClass::kMemoryBound);
  // Neither: index set-up and the like stay.
  CHECK(ClassifyForAmp(TaskKind::kKernel, kOffsets) == AmpClass::kUnchanged);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "void multi_tensor_apply_kernel<TensorListMetadata<2> >(int)") ==
        AmpClass::kUnchanged);
  // Already half precision, by tile name or by type.
  CHECK(ClassifyForAmp(TaskKind::kKernel, kHalfGemm) == AmpClass::kAlreadyHalf);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "turing_h1688gemm_128x128_ldg8_nn") == AmpClass::kAlreadyHalf);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "ampere_fp16_s1688gemm_fp16_256x64_ldg8_f2f_tn") == AmpClass::kAlreadyHalf);
  CHECK(ClassifyForAmp(TaskKind::kKernel, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn") == AmpClass::kAlreadyHalf);
  CHECK(ClassifyForAmp(TaskKind::kKernel,
                       "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half> >(int)") ==
        AmpClass::kAlreadyHalf);
  // Copies: device-to-device moves half the bytes; host copies stay.
  CHECK(ClassifyForAmp(TaskKind::kMemcpy, "Memcpy DtoD (Device -> Device)") == AmpClass::kMemoryBound);
  CHECK(ClassifyForAmp(TaskKind::kMemcpy, "Memcpy HtoD (Pinned -> Device)") == AmpClass::kUnchanged);
  CHECK(ClassifyForAmp(TaskKind::kMemset, "Memset (Device)") == AmpClass::kUnchanged);
  CHECK(ClassifyForAmp(TaskKind::kCpuOp, "aten::mm") == AmpClass::kUnchanged);
}

TEST_CASE("amp takes the GEMM factor from the compute capability", "[amp]") {
  CHECK(DefaultGemmFactor(6, 0).factor == Approx(0.5));
  CHECK(DefaultGemmFactor(6, 1).factor == Approx(1.0));  // consumer Pascal: slow fp16
  CHECK(DefaultGemmFactor(5, 2).factor == Approx(1.0));
  CHECK(DefaultGemmFactor(7, 0).factor == Approx(1.0 / 3.0));
  CHECK(DefaultGemmFactor(7, 5).factor == Approx(1.0 / 3.0));
  CHECK(DefaultGemmFactor(8, 0).factor == Approx(0.45));
  CHECK(DefaultGemmFactor(8, 9).factor == Approx(0.45));
  CHECK(DefaultGemmFactor(9, 0).factor == Approx(1.0 / 3.0));
  CHECK(DefaultGemmFactor(10, 0).factor == Approx(1.0 / 3.0));
  CHECK_THAT(DefaultGemmFactor(0, 0).reason, Catch::Contains("unknown"));

  SECTION("an Ampere graph") {
    Fixture f(true, 8, 0);
    const int32_t gemm = f.Gpu(kSgemm, 1000 * kUs);
    f.Finish();
    REQUIRE(f.Run().value());
    CHECK(f.Duration(gemm) == 450 * kUs);
    CHECK_THAT(AllNotes(f.context), Catch::Contains("TF32"));
  }
  SECTION("a graph without deviceProperties: 1/3, and the note says so") {
    Fixture f(true, 0, 0);
    const int32_t gemm = f.Gpu(kSgemm, 900 * kUs);
    f.Finish();
    REQUIRE(f.Run().value());
    CHECK(f.Duration(gemm) == 300 * kUs);
    CHECK_THAT(AllNotes(f.context), Catch::Contains("compute capability unknown"));
  }
  SECTION("gemm_factor overrides the device and mem_factor the bytes") {
    Fixture f(true, 7, 0);
    const int32_t gemm = f.Gpu(kSgemm, 1000 * kUs);
    const int32_t add = f.Gpu(kAdd, 100 * kUs);
    f.Finish();
    REQUIRE(f.Run({{"gemm_factor", "0.6"}, {"mem_factor", "0.25"}}).value());
    CHECK(f.Duration(gemm) == 600 * kUs);
    CHECK(f.Duration(add) == 25 * kUs);
  }
}

TEST_CASE("amp with factors of 1 leaves the graph and its schedule as they were", "[amp]") {
  Fixture f;
  f.Gpu(kSgemm, 300 * kUs);
  f.Gpu(kAdd, 100 * kUs);
  f.Finish();
  const Graph before = f.g;
  const Schedule s0 = Sim(f.g);
  absl::StatusOr<bool> changed = f.Run({{"gemm_factor", "1"}, {"mem_factor", "1"}});
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  REQUIRE(f.g.tasks.size() == before.tasks.size());
  for (size_t i = 0; i < f.g.tasks.size(); ++i) CHECK(f.g.tasks[i].duration_ns == before.tasks[i].duration_ns);
  const Schedule s1 = Sim(f.g);
  CHECK(s1.start_ns == s0.start_ns);
  CHECK(s1.end_ns == s0.end_ns);
  CHECK_THAT(AllNotes(f.context), Catch::Contains("unchanged"));
}

TEST_CASE("amp says what it looked for when no kernel can run in half precision", "[amp]") {
  SECTION("no GEMM, convolution or memory-bound kernel") {
    Fixture f;
    f.Gpu(kOffsets, 10 * kUs);
    f.Gpu("Memset (Device)", 10 * kUs, Phase::kForward, TaskKind::kMemset);
    f.Finish();
    absl::StatusOr<bool> r = f.Run();
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("looked for") && Catch::Contains("gemm"));
  }
  SECTION("every candidate already runs in fp16") {
    Fixture f;
    f.Gpu(kHalfGemm, 100 * kUs);
    f.Finish();
    absl::StatusOr<bool> r = f.Run();
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("1 kernels already run in fp16/bf16"));
  }
  SECTION("bad factors") {
    Fixture f;
    f.Gpu(kSgemm, 100 * kUs);
    f.Finish();
    absl::StatusOr<bool> r = f.Run({{"gemm_factor", "-1"}});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("gemm_factor must be > 0"));
    r = f.Run({{"mem_factor", "0"}});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("mem_factor must be > 0"));
    CHECK(f.Duration(1) == 100 * kUs);  // errors leave the graph alone
  }
}

TEST_CASE("amp on a CPU-only graph scales the ops autocast runs in bf16 by the calibrated ratio", "[amp]") {
  Fixture f(/*gpu=*/false);
  const int32_t addmm = f.CpuOp("aten::addmm", 1000 * kUs);
  const int32_t conv = f.CpuOp("aten::mkldnn_convolution", 2000 * kUs, Phase::kForward);
  const int32_t grad = f.CpuOp("aten::convolution_backward", 3000 * kUs, Phase::kBackward);
  const int32_t relu = f.CpuOp("aten::relu", 100 * kUs);
  const int32_t linear_like = f.CpuOp("aten::linear_backward_helper", 100 * kUs);  // not on the list
  const int32_t step = f.CpuOp("aten::addmm", 100 * kUs, Phase::kOptimizer);
  f.Finish();

  SECTION("with a ratio") {
    REQUIRE(f.Run({{"cpu_gemm_factor", "0.6"}}).value());
    CHECK(f.Duration(addmm) == 600 * kUs);
    CHECK(f.Duration(conv) == 1200 * kUs);
    CHECK(f.Duration(grad) == 1800 * kUs);
    CHECK(f.Duration(relu) == 100 * kUs);
    CHECK(f.Duration(linear_like) == 100 * kUs);
    CHECK(f.Duration(step) == 100 * kUs);
    CHECK_THAT(AllNotes(f.context), Catch::Contains("3 matmul/convolution ops run in bf16, x 0.600"));
  }
  SECTION("uncalibrated (the default 1): unchanged, and the note asks for the ratio") {
    const Schedule s0 = Sim(f.g);
    absl::StatusOr<bool> r = f.Run();
    REQUIRE(r.ok());
    CHECK_FALSE(*r);
    CHECK(f.Duration(addmm) == 1000 * kUs);
    CHECK(Sim(f.g).end_ns == s0.end_ns);
    CHECK_THAT(AllNotes(f.context), Catch::Contains("not calibrated"));
  }
}

TEST_CASE("amp on a CPU-only graph scales each op by the factor measured for its trace event", "[amp]") {
  Fixture f(/*gpu=*/false);
  const int32_t addmm = f.CpuOp("aten::addmm", 1000 * kUs);
  const int32_t conv = f.CpuOp("aten::mkldnn_convolution", 2000 * kUs);
  const int32_t conv_tail = f.CpuOp("aten::mkldnn_convolution", 400 * kUs);  // a self-time stretch, same event
  const int32_t linear = f.CpuOp("aten::linear", 100 * kUs);                 // a wrapper: nothing measured
  const int32_t grad = f.CpuOp("aten::convolution_backward", 3000 * kUs, Phase::kBackward);
  const int32_t step = f.CpuOp("aten::addmm", 100 * kUs, Phase::kOptimizer);
  f.g.tasks[static_cast<size_t>(addmm)].trace_event = 10;
  f.g.tasks[static_cast<size_t>(conv)].trace_event = 11;
  f.g.tasks[static_cast<size_t>(conv_tail)].trace_event = 11;
  f.g.tasks[static_cast<size_t>(linear)].trace_event = 12;
  f.g.tasks[static_cast<size_t>(grad)].trace_event = 13;
  f.g.tasks[static_cast<size_t>(step)].trace_event = 14;
  f.Finish();
  const OptionMap table = {{"cpu_op_factors", "10=2.5; 11=0.5;13=6;14=3"}};

  SECTION("measured factors; the ops without one keep cpu_gemm_factor's default 1") {
    REQUIRE(f.Run(table).value());
    // The optimizer keeps fp32 master weights: its entry is ignored.
    const std::vector<std::pair<int32_t, TimeNs>> expected = {
        {addmm, 2500 * kUs}, {conv, 1000 * kUs}, {conv_tail, 200 * kUs},
        {linear, 100 * kUs}, {grad, 18000 * kUs}, {step, 100 * kUs}};
    for (const auto& [task, duration] : expected) {
      INFO(f.g.TaskName(task));
      CHECK(f.Duration(task) == duration);
    }
    const std::string notes = AllNotes(f.context);
    INFO(notes);
    CHECK_THAT(notes, Catch::Contains("4 ops at their measured bf16/fp32 factors"));
    CHECK_THAT(notes, Catch::Contains("x 0.500-6.000"));
    CHECK_THAT(notes, Catch::Contains("1 matmul/convolution ops without a measured factor"));
  }
  SECTION("with cpu_gemm_factor too: it applies to the listed ops without a measured factor") {
    OptionMap options = table;
    options["cpu_gemm_factor"] = "0.8";
    REQUIRE(f.Run(options).value());
    CHECK(f.Duration(addmm) == 2500 * kUs);
    CHECK(f.Duration(linear) == 80 * kUs);
    CHECK_THAT(AllNotes(f.context), Catch::Contains("1 matmul/convolution ops run in bf16, x 0.800"));
  }
  SECTION("a malformed table is an error that shows the entry and leaves the graph alone") {
    for (const char* bad : {"10", "10=", "=2", "x=2", "10=0", "10=-1", "-3=2", "10=2x", "10=nan", "10=2;11"}) {
      INFO(bad);
      absl::StatusOr<bool> r = f.Run({{"cpu_op_factors", bad}});
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(r.status().message()), Catch::Contains("cpu_op_factors: bad entry"));
      CHECK(f.Duration(addmm) == 1000 * kUs);
    }
  }
}

TEST_CASE("amp on a CPU-only graph without matmul or convolution ops is an error naming them", "[amp]") {
  Fixture f(/*gpu=*/false);
  f.CpuOp("aten::relu", 100 * kUs);
  f.CpuOp("aten::add", 100 * kUs);
  f.Finish();
  absl::StatusOr<bool> r = f.Run({{"cpu_gemm_factor", "0.5"}});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("CPU-only") && Catch::Contains("aten::mm"));
  CHECK(IsCpuAutocastOp("aten::bmm"));
  CHECK(IsCpuAutocastOp("aten::_convolution"));
  CHECK_FALSE(IsCpuAutocastOp("aten::mm_backward"));
  CHECK_FALSE(IsCpuAutocastOp("aten::add"));
}

TEST_CASE("amp on the V100 ResNet trace shortens GEMM/convolution time by 3x and never slows the step", "[amp]") {
  const Graph& baseline = BundledV100();
  REQUIRE(baseline.device.compute_major == 7);
  Graph g = baseline;
  g.BuildAdjacency();
  PassContext context;
  absl::StatusOr<std::unique_ptr<Pass>> pass = AmpPassInfo().create(PassOptions::Parse("amp", AmpPassInfo().options, {}).value());
  REQUIRE(pass.ok());
  absl::StatusOr<bool> changed = (*pass)->Run(g, context);
  REQUIRE(changed.ok());
  CHECK(*changed);
  INFO(AllNotes(context));
  REQUIRE(g.tasks.size() == baseline.tasks.size());
  int64_t tensor_core = 0;
  TimeNs gpu_before = 0, gpu_after = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = baseline.tasks[i];
    if (t.kind != TaskKind::kKernel) continue;
    gpu_before += t.duration_ns;
    gpu_after += g.tasks[i].duration_ns;
    if (ClassifyForAmp(t.kind, baseline.Str(t.name)) == AmpClass::kTensorCore && t.phase != Phase::kOptimizer) {
      ++tensor_core;
      CHECK(g.tasks[i].duration_ns == Approx(static_cast<double>(t.duration_ns) / 3.0).margin(1));
    }
  }
  CHECK(tensor_core > 1000);  // ~266 GEMM/convolution kernels in each of 5 steps
  CHECK(gpu_after < gpu_before / 2);
  // As analysis::Predict compares: median steady-state step of both replays.
  // This trace's steady steps are bound by launches that waited for a full
  // launch queue (recorded CPU time), so the gain is small, but never a loss.
  const TimeNs replayed = MedianStep(baseline);
  const TimeNs predicted = MedianStep(g);
  CHECK(predicted <= replayed);
  CHECK(replayed == Approx(95.7e6).epsilon(0.02));

  SECTION("factors of 1 predict exactly the baseline") {
    Graph same = baseline;
    same.BuildAdjacency();
    PassContext c;
    auto identity = AmpPassInfo().create(
        PassOptions::Parse("amp", AmpPassInfo().options, {{"gemm_factor", "1"}, {"mem_factor", "1"}}).value());
    REQUIRE(identity.ok());
    absl::StatusOr<bool> r = (*identity)->Run(same, c);
    REQUIRE(r.ok());
    CHECK_FALSE(*r);
    CHECK(MedianStep(same) == replayed);
  }
}
