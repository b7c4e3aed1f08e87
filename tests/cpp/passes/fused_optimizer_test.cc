// Tests of the fused_optimizer pass: which tasks are the optimizer step, the
// GPU model (one launch, one kernel), the CPU model (operator cost plus bytes
// at the unfused step's bandwidth), the cases it must leave alone, its errors,
// and real traces (the V100 SGD trace; a CPU Adam(foreach=False) trace).
#include "daydream/passes/fused_optimizer.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::MedianStep;
using daydream::testing::SharedTracePath;
using daydream::testing::TestDataPath;

namespace {

// A training graph written by hand: CPU thread 0 and, when asked, GPU stream
// 1. Tasks are appended in time order; each resource is chained.
struct TrainingGraph {
  Graph g;
  int32_t cpu = -1, gpu = -1;
  TimeNs cpu_clock = 0, gpu_clock = 0;
  int32_t last_cpu = -1, last_gpu = -1;

  explicit TrainingGraph(bool with_gpu) {
    cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
    if (with_gpu) gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  }

  int32_t Cpu(const std::string& name, Phase phase, TimeNs duration, TimeNs gap = 1000,
              TaskKind kind = TaskKind::kCpuOp) {
    Task t;
    t.name = g.strings.Intern(name);
    t.kind = kind;
    t.phase = phase;
    t.resource = cpu;
    t.duration_ns = duration;
    t.gap_ns = gap;
    t.iteration = 0;
    t.recorded_start_ns = cpu_clock + gap;
    cpu_clock += gap + duration;
    const int32_t id = g.AddTask(t);
    if (last_cpu >= 0) g.AddEdge(last_cpu, id, EdgeKind::kSequential);
    last_cpu = id;
    return id;
  }

  // A launch call and the GPU activity it launched.
  int32_t Launch(const std::string& kernel, Phase phase, TimeNs kernel_ns, TimeNs call_ns = 5000,
                 TaskKind kind = TaskKind::kKernel, const std::string& call = "cudaLaunchKernel") {
    const int32_t launch = Cpu(call, phase, call_ns, 1000, TaskKind::kRuntime);
    Task k;
    k.name = g.strings.Intern(kernel);
    k.kind = kind;
    k.phase = phase;
    k.resource = gpu;
    k.duration_ns = kernel_ns;
    k.iteration = 0;
    k.recorded_start_ns = std::max(gpu_clock, g.tasks[static_cast<size_t>(launch)].recorded_start_ns + call_ns);
    gpu_clock = k.recorded_start_ns + kernel_ns;
    const int32_t id = g.AddTask(k);
    g.AddEdge(launch, id, EdgeKind::kLaunch, 2000);
    if (last_gpu >= 0) g.AddEdge(last_gpu, id, EdgeKind::kSequential);
    last_gpu = id;
    return id;
  }

  int32_t Gradient(const std::string& name, int64_t bytes, int32_t producer) {
    Tensor t;
    t.name = g.strings.Intern(name);
    t.bytes = bytes;
    t.role = TensorRole::kGradient;
    t.producer = producer;
    t.producers = {producer};
    return g.AddTensor(t);
  }

  // One iteration over everything added; validates and builds the adjacency.
  void Finish() {
    Iteration it;
    it.name = g.strings.Intern("ProfilerStep#1");
    it.begin_task = 0;
    it.end_task = last_cpu;
    it.measured_ns = std::max(cpu_clock, gpu_clock);
    g.iterations.push_back(it);
    const absl::Status valid = g.Validate();
    INFO(valid.message());
    REQUIRE(valid.ok());
    g.BuildAdjacency();
  }
};

absl::StatusOr<bool> RunFused(Graph& g, PassContext& context, const OptionMap& options = {}) {
  const PassInfo info = FusedOptimizerPassInfo();
  absl::StatusOr<PassOptions> parsed = PassOptions::Parse(info.name, info.options, options);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::unique_ptr<Pass>> pass = info.create(*parsed);
  if (!pass.ok()) return pass.status();
  return (*pass)->Run(g, context);
}

bool RunFusedOk(Graph& g, PassContext& context, const OptionMap& options = {}) {
  absl::StatusOr<bool> changed = RunFused(g, context, options);
  INFO((changed.ok() ? std::string("ok") : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  return *changed;
}

std::vector<int32_t> Tasks(const Graph& g, Phase phase, TaskKind kind) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].phase == phase && g.tasks[i].kind == kind) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

int64_t CountNamed(const Graph& g, const std::string& name) {
  int64_t n = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) n += g.TaskName(static_cast<int32_t>(i)) == name ? 1 : 0;
  return n;
}

TimeNs Makespan(const Graph& g) {
  absl::StatusOr<Schedule> s = Simulate(g);
  REQUIRE(s.ok());
  return s->makespan_ns;
}

bool AnyNoteContains(const PassContext& context, const std::string& part) {
  for (const std::string& n : context.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

// Forward, backward and a three-parameter step of per-parameter kernels
// (launches of 4, 5, 6 us; kernels of 2, 4, 6 us: the step is CPU bound),
// each parameter's CPU work preceded by a 2 us operator after a 3 us gap.
TrainingGraph GpuStepGraph(int params = 3) {
  TrainingGraph t(/*with_gpu=*/true);
  t.Launch("gemm", Phase::kForward, 5000);
  const int32_t grad = t.Launch("gemm_backward", Phase::kBackward, 8000);
  for (int p = 0; p < params; ++p) {
    t.Cpu("aten::result_type", Phase::kOptimizer, 2000, /*gap=*/3000);
    t.Launch("multi_tensor_apply_kernel<BinaryOpListAlphaFunctor>", Phase::kOptimizer, 2000 * (p + 1),
             4000 + 1000 * p);
    t.Gradient("grad[" + std::to_string(p) + "]", 4096, grad);
  }
  return t;
}

}  // namespace

TEST_CASE("fused_optimizer replaces a GPU step's launches and kernels by one launch and one kernel",
          "[fused_optimizer]") {
  TrainingGraph t = GpuStepGraph();
  t.Cpu("aten::empty", Phase::kOther, 1000);  // after the step
  t.Finish();
  const TimeNs before = Makespan(t.g);
  const int32_t first_step_task = daydream::testing::TaskNamed(t.g, "aten::result_type");
  const TimeNs first_gap = t.g.tasks[static_cast<size_t>(first_step_task)].gap_ns;
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context));
  const std::vector<int32_t> launches = Tasks(t.g, Phase::kOptimizer, TaskKind::kRuntime);
  const std::vector<int32_t> kernels = Tasks(t.g, Phase::kOptimizer, TaskKind::kKernel);
  REQUIRE(launches.size() == 1);
  REQUIRE(kernels.size() == 1);
  CHECK(Tasks(t.g, Phase::kOptimizer, TaskKind::kCpuOp).empty());
  const Task& launch = t.g.tasks[static_cast<size_t>(launches[0])];
  const Task& kernel = t.g.tasks[static_cast<size_t>(kernels[0])];
  CHECK(launch.duration_ns == 5000);   // median of 4, 5, 6 us
  CHECK(launch.gap_ns == first_gap);   // the step's lead-in stays; the loop's gaps go
  CHECK(kernel.duration_ns == 12'000);  // 2 + 4 + 6 us, kernel_factor 1
  CHECK(daydream::testing::HasEdge(t.g, launches[0], kernels[0], EdgeKind::kLaunch));
  CHECK(Makespan(t.g) < before);
  CHECK(AnyNoteContains(context, "2 launches and 3 GPU activities removed"));
}

TEST_CASE("fused_optimizer times the fused kernel as kernel_factor x the removed kernels", "[fused_optimizer]") {
  TrainingGraph t = GpuStepGraph();
  t.Finish();
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context, {{"kernel_factor", "0.5"}}));
  const std::vector<int32_t> kernels = Tasks(t.g, Phase::kOptimizer, TaskKind::kKernel);
  REQUIRE(kernels.size() == 1);
  CHECK(t.g.tasks[static_cast<size_t>(kernels[0])].duration_ns == 6000);
}

TEST_CASE("fused_optimizer keeps zero_grad before backward and after the step", "[fused_optimizer]") {
  TrainingGraph t(/*with_gpu=*/true);
  t.Cpu("aten::zero_", Phase::kOptimizer, 3000);  // zero_grad at the start of the iteration
  t.Launch("gemm", Phase::kForward, 50'000);
  t.Launch("gemm_backward", Phase::kBackward, 80'000);
  t.Launch("multi_tensor_apply_kernel<A>", Phase::kOptimizer, 10'000);
  t.Launch("multi_tensor_apply_kernel<B>", Phase::kOptimizer, 10'000);
  // zero_grad(set_to_none=False) after step(): a memset and a fill kernel.
  t.Launch("Memset (Device)", Phase::kOptimizer, 2000, 4000, TaskKind::kMemset, "cudaMemsetAsync");
  t.Launch("vectorized_elementwise_kernel<FillFunctor<float>>", Phase::kOptimizer, 2000);
  t.Finish();
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context));
  CHECK(CountNamed(t.g, "aten::zero_") == 1);
  CHECK(CountNamed(t.g, "cudaMemsetAsync") == 1);
  CHECK(CountNamed(t.g, "Memset (Device)") == 1);
  CHECK(CountNamed(t.g, "vectorized_elementwise_kernel<FillFunctor<float>>") == 1);
  CHECK(CountNamed(t.g, "multi_tensor_apply_kernel<A>") == 0);
  CHECK(CountNamed(t.g, "fused optimizer step kernel") == 1);
  CHECK(CountNamed(t.g, "cudaLaunchKernel (fused optimizer step)") == 1);
}

TEST_CASE("fused_optimizer leaves an already fused step unchanged, with a note", "[fused_optimizer]") {
  TrainingGraph t(/*with_gpu=*/true);
  t.Launch("gemm", Phase::kForward, 50'000);
  t.Launch("gemm_backward", Phase::kBackward, 80'000);
  t.Launch("multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", Phase::kOptimizer, 30'000);
  t.Launch("multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", Phase::kOptimizer, 30'000);
  t.Finish();
  const size_t tasks = t.g.tasks.size(), edges = t.g.edges.size();
  PassContext context;
  CHECK_FALSE(RunFusedOk(t.g, context));
  CHECK(t.g.tasks.size() == tasks);
  CHECK(t.g.edges.size() == edges);
  CHECK(AnyNoteContains(context, "1 of 1 iterations unchanged: the optimizer step is already fused"));
}

TEST_CASE("fused_optimizer fuses from two kernels up, not one", "[fused_optimizer]") {
  SECTION("one kernel: nothing to fuse") {
    TrainingGraph t = GpuStepGraph(/*params=*/1);
    t.Finish();
    const size_t tasks = t.g.tasks.size();
    PassContext context;
    CHECK_FALSE(RunFusedOk(t.g, context));
    CHECK(t.g.tasks.size() == tasks);
    CHECK(AnyNoteContains(context, "the optimizer step is one GPU activity already: nothing to fuse"));
  }
  SECTION("two kernels: one") {
    TrainingGraph t = GpuStepGraph(/*params=*/2);
    t.Finish();
    PassContext context;
    CHECK(RunFusedOk(t.g, context));
    CHECK(Tasks(t.g, Phase::kOptimizer, TaskKind::kKernel).size() == 1);
  }
}

TEST_CASE("fused_optimizer says why when there is no optimizer step", "[fused_optimizer]") {
  SECTION("no optimizer-phase tasks") {
    TrainingGraph t(/*with_gpu=*/true);
    t.Launch("gemm", Phase::kForward, 50'000);
    t.Finish();
    PassContext context;
    const absl::StatusOr<bool> r = RunFused(t.g, context);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(r.status().message()),
               Catch::StartsWith("fused_optimizer: no optimizer step found: the graph has no optimizer-phase tasks"));
  }
  SECTION("only zero_grad, before backward") {
    TrainingGraph t(/*with_gpu=*/false);
    t.Cpu("aten::zero_", Phase::kOptimizer, 3000);
    t.Cpu("aten::addmm", Phase::kForward, 3000);
    t.Cpu("AddmmBackward0", Phase::kBackward, 3000);
    t.Finish();
    PassContext context;
    const absl::StatusOr<bool> r = RunFused(t.g, context);
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()) ==
          "fused_optimizer: no optimizer step found: the graph's 1 optimizer-phase tasks all run before their "
          "iteration's backward pass ends (zero_grad), none after it");
  }
}

TEST_CASE("fused_optimizer rejects bad options by name", "[fused_optimizer]") {
  TrainingGraph t = GpuStepGraph();
  t.Finish();
  PassContext context;
  absl::StatusOr<bool> r = RunFused(t.g, context, {{"kernel_factor", "-1"}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) == "fused_optimizer: kernel_factor must be >= 0");
  r = RunFused(t.g, context, {{"optimizer", "lion"}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) ==
        "fused_optimizer: unknown optimizer 'lion' (auto, adam, adamw, adagrad, sgd_momentum, sgd)");
}

namespace {

// A CPU-only Adam step over four parameters of 4e3, 4e4, 4e5 and 4e6 bytes.
// Per parameter: three bookkeeping operators costing 10 us with their gaps,
// and lerp_ / addcdiv_ (3 and 4 tensors touched) at 2 us plus bytes at
// 10 GB/s (10 bytes/ns), each after an 8 us gap.
constexpr int64_t kParamBytes[] = {4000, 40'000, 400'000, 4'000'000};
constexpr int64_t kTotalParamBytes = 4'444'000;

TrainingGraph CpuAdamGraph(bool with_gradients) {
  TrainingGraph t(/*with_gpu=*/false);
  t.Cpu("aten::addmm", Phase::kForward, 20'000);
  const int32_t grad = t.Cpu("AddmmBackward0", Phase::kBackward, 40'000);
  for (int64_t bytes : kParamBytes) {
    t.Cpu("aten::empty_strided", Phase::kOptimizer, 2000, 8000);
    t.Cpu("aten::copy_", Phase::kOptimizer, 1000, 9000);
    t.Cpu("aten::lerp_", Phase::kOptimizer, 2000 + 3 * bytes / 10, 8000);
    t.Cpu("aten::_local_scalar_dense", Phase::kOptimizer, 500, 9500);
    t.Cpu("aten::addcdiv_", Phase::kOptimizer, 2000 + 4 * bytes / 10, 8000);
    if (with_gradients) t.Gradient("p" + std::to_string(bytes), bytes, grad);
  }
  t.Cpu("aten::empty", Phase::kOther, 1000);
  return t;
}

// The unfused step's time: its tasks and the gaps after the first.
TimeNs UnfusedStepNs(const Graph& g) {
  TimeNs total = 0;
  bool first = true;
  for (const Task& t : g.tasks) {
    if (t.phase != Phase::kOptimizer) continue;
    total += t.duration_ns + (first ? 0 : t.gap_ns);
    first = false;
  }
  return total;
}

TimeNs FusedCpuOpNs(const Graph& g) {
  const std::vector<int32_t> ops = Tasks(g, Phase::kOptimizer, TaskKind::kCpuOp);
  REQUIRE(ops.size() == 1);
  return g.tasks[static_cast<size_t>(ops[0])].duration_ns;
}

}  // namespace

TEST_CASE("fused_optimizer times a CPU step as operator cost plus 7x parameter bytes at the unfused bandwidth",
          "[fused_optimizer]") {
  TrainingGraph t = CpuAdamGraph(/*with_gradients=*/true);
  t.Finish();
  const TimeNs unfused = UnfusedStepNs(t.g);
  const TimeNs lead_in = t.g.tasks[static_cast<size_t>(daydream::testing::TaskNamed(t.g, "aten::empty_strided"))].gap_ns;
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context));
  // (1 + 2 ops x 4 parameters) x 10 us + 7 x 4.444 MB / 10 GB/s.
  CHECK(FusedCpuOpNs(t.g) == 9 * 10'000 + 7 * kTotalParamBytes / 10);
  const int32_t fused = Tasks(t.g, Phase::kOptimizer, TaskKind::kCpuOp)[0];
  CHECK(t.g.TaskName(fused) == "fused adam step (estimated)");
  CHECK(t.g.tasks[static_cast<size_t>(fused)].gap_ns == lead_in);
  CHECK(FusedCpuOpNs(t.g) < unfused);
  CHECK(AnyNoteContains(context, "at 10 GB/s (what the unfused in-place operators achieved)"));
}

TEST_CASE("fused_optimizer takes a CPU bandwidth and an optimizer from its options", "[fused_optimizer]") {
  SECTION("cpu_bandwidth_gbps") {
    TrainingGraph t = CpuAdamGraph(/*with_gradients=*/true);
    t.Finish();
    PassContext context;
    REQUIRE(RunFusedOk(t.g, context, {{"cpu_bandwidth_gbps", "20"}}));
    CHECK(FusedCpuOpNs(t.g) == 9 * 10'000 + 7 * kTotalParamBytes / 20);
  }
  SECTION("optimizer=sgd_momentum touches 5x the parameter bytes") {
    TrainingGraph t = CpuAdamGraph(/*with_gradients=*/true);
    t.Finish();
    PassContext context;
    REQUIRE(RunFusedOk(t.g, context, {{"optimizer", "sgd_momentum"}}));
    CHECK(FusedCpuOpNs(t.g) == 9 * 10'000 + 5 * kTotalParamBytes / 10);
  }
}

TEST_CASE("fused_optimizer times a CPU step as cpu_step_factor x the unfused step when it is given",
          "[fused_optimizer]") {
  for (const bool with_gradients : {true, false}) {  // the measured factor needs no parameter sizes
    TrainingGraph t = CpuAdamGraph(with_gradients);
    t.Finish();
    const TimeNs unfused = UnfusedStepNs(t.g);
    PassContext context;
    REQUIRE(RunFusedOk(t.g, context, {{"cpu_step_factor", "0.375"}}));
    CHECK(FusedCpuOpNs(t.g) == static_cast<TimeNs>(std::llround(0.375 * static_cast<double>(unfused))));
    CHECK(AnyNoteContains(context, "= 0.375 x the unfused step (cpu_step_factor"));
  }
  TrainingGraph t = CpuAdamGraph(/*with_gradients=*/true);
  t.Finish();
  PassContext context;
  const absl::StatusOr<bool> r = RunFused(t.g, context, {{"cpu_step_factor", "-0.5"}});
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) == "fused_optimizer: cpu_step_factor must be >= 0");
}

TEST_CASE("fused_optimizer without parameter sizes scales the step's size-dependent time by 7/18",
          "[fused_optimizer]") {
  TrainingGraph t = CpuAdamGraph(/*with_gradients=*/false);
  t.Finish();
  const TimeNs unfused = UnfusedStepNs(t.g);
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context));
  // Four parameters (each operator name occurs 4 times), 20 tasks of 10 us.
  const double size_dependent = static_cast<double>(unfused - 20 * 10'000);
  CHECK(FusedCpuOpNs(t.g) == static_cast<TimeNs>(std::llround(9 * 10'000 + 7.0 / 18.0 * size_dependent)));
  CHECK(AnyNoteContains(context, "(parameter sizes unknown)"));
}

TEST_CASE("fused_optimizer never makes a CPU step slower than it was", "[fused_optimizer]") {
  TrainingGraph t = CpuAdamGraph(/*with_gradients=*/true);
  t.Finish();
  const TimeNs unfused = UnfusedStepNs(t.g);
  PassContext context;
  REQUIRE(RunFusedOk(t.g, context, {{"cpu_ops_per_param", "1000"}}));
  CHECK(FusedCpuOpNs(t.g) == unfused);
}

TEST_CASE("fused_optimizer leaves a CPU step of scalar bookkeeping alone (torch's fused CPU Adam)",
          "[fused_optimizer]") {
  TrainingGraph t(/*with_gpu=*/false);
  t.Cpu("aten::addmm", Phase::kForward, 20'000);
  t.Cpu("AddmmBackward0", Phase::kBackward, 40'000);
  for (int p = 0; p < 3; ++p) {
    t.Cpu("aten::empty_strided", Phase::kOptimizer, 1000);
    t.Cpu("aten::copy_", Phase::kOptimizer, 1000);
  }
  t.Cpu("aten::_local_scalar_dense", Phase::kOptimizer, 500, /*gap=*/300'000);  // inside aten::_fused_adam_
  t.Finish();
  const size_t tasks = t.g.tasks.size();
  PassContext context;
  CHECK_FALSE(RunFusedOk(t.g, context));
  CHECK(t.g.tasks.size() == tasks);
  CHECK(AnyNoteContains(context, "runs no per-parameter operators"));
}

TEST_CASE("fused_optimizer on the V100 SGD trace removes 8 of 9 launches per step and is not slower",
          "[fused_optimizer][real]") {
  absl::StatusOr<Trace> trace =
      ReadTraceFile(SharedTracePath("hta-v100-1rank/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"));
  REQUIRE(trace.ok());
  absl::StatusOr<Graph> built = BuildGraph(*trace);
  REQUIRE(built.ok());
  const Graph& baseline = *built;
  const size_t iterations = baseline.iterations.size();
  REQUIRE(iterations == 5);
  Graph g = baseline;
  PassContext context;
  REQUIRE(RunFusedOk(g, context));
  // foreach SGD with momentum: 3 foreach ops in 3 multi_tensor_apply chunks each.
  CHECK(Tasks(baseline, Phase::kOptimizer, TaskKind::kRuntime).size() == 9 * iterations);
  CHECK(Tasks(g, Phase::kOptimizer, TaskKind::kRuntime).size() == iterations);
  CHECK(Tasks(g, Phase::kOptimizer, TaskKind::kKernel).size() == iterations);
  CHECK(Tasks(g, Phase::kOptimizer, TaskKind::kCpuOp).empty());  // 483 aten::result_type per step
  CHECK(AnyNoteContains(context, "40 launches and 45 GPU activities removed"));
  TimeNs kernels_before = 0, kernels_after = 0;
  for (int32_t k : Tasks(baseline, Phase::kOptimizer, TaskKind::kKernel)) {
    kernels_before += baseline.tasks[static_cast<size_t>(k)].duration_ns;
  }
  for (int32_t k : Tasks(g, Phase::kOptimizer, TaskKind::kKernel)) kernels_after += g.tasks[static_cast<size_t>(k)].duration_ns;
  CHECK(kernels_after == kernels_before);
  const TimeNs replayed = MedianStep(baseline);
  const TimeNs predicted = MedianStep(g);
  CHECK(predicted <= replayed);
  // The GPU-bound step gains little: less than the CPU time removed.
  CHECK(predicted > replayed - 2'000'000);
}

TEST_CASE("fused_optimizer on a CPU Adam(foreach=False) trace replaces each step by one estimated operator",
          "[fused_optimizer][real]") {
  absl::StatusOr<Trace> trace = ReadTraceFile(TestDataPath("passes/cpu_adam_mlp.pt.trace.json.gz"));
  REQUIRE(trace.ok());
  absl::StatusOr<Graph> built = BuildGraph(*trace);
  REQUIRE(built.ok());
  const Graph& baseline = *built;
  REQUIRE(baseline.iterations.size() == 3);
  const TimeNs unfused = UnfusedStepNs(baseline) / 3;
  Graph g = baseline;
  PassContext context;
  REQUIRE(RunFusedOk(g, context));
  CHECK(CountNamed(g, "fused adam step (estimated)") == 3);
  CHECK(Tasks(g, Phase::kOptimizer, TaskKind::kCpuOp).size() == 3);
  TimeNs fused = 0;
  for (int32_t t : Tasks(g, Phase::kOptimizer, TaskKind::kCpuOp)) fused = g.tasks[static_cast<size_t>(t)].duration_ns;
  CHECK(fused > 0);
  CHECK(fused < unfused);
  CHECK(AnyNoteContains(context, "3 CPU optimizer steps (adam, 6 parameters"));
  CHECK(MedianStep(g) < MedianStep(baseline));
}

TEST_CASE("fused_optimizer leaves a CPU Adam(fused=True) trace unchanged", "[fused_optimizer][real]") {
  absl::StatusOr<Trace> trace = ReadTraceFile(TestDataPath("passes/cpu_adam_fused_mlp.pt.trace.json.gz"));
  REQUIRE(trace.ok());
  absl::StatusOr<Graph> built = BuildGraph(*trace);
  REQUIRE(built.ok());
  Graph g = *built;
  PassContext context;
  CHECK_FALSE(RunFusedOk(g, context));
  CHECK(g.tasks.size() == built->tasks.size());
  CHECK(AnyNoteContains(context, "3 of 3 iterations unchanged"));
}
