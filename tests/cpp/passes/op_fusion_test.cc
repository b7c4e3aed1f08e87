// Tests of passes/op_fusion: chains of elementwise kernels launched
// back-to-back fused into one kernel (launches removed, intermediates' time
// partly gone), what breaks a chain, max_chain and intermediate_factor edges,
// CPU-only chains, and the bundled V100 trace.
#include "daydream/passes/op_fusion.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/base/strings.h"
#include "daydream/graph/builder.h"
#include "daydream/passes/editor.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using namespace daydream::testing;

namespace {

constexpr TimeNs kUs = 1000;

const std::string kMul =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, Functor, Array)";
const std::string kAdd = "void at::native::elementwise_kernel<128, 2, CUDAFunctor_add<float> >(int, Functor)";
const std::string kTriton = "triton_poi_fused_add_relu_0";
const std::string kGemm = "volta_sgemm_128x64_nn";

// One iteration: a CPU thread launching onto one or two streams (or a CPU
// thread alone).
struct Fixture : PassTestGraph {
  explicit Fixture(int num_streams = 1) : PassTestGraph(num_streams) {}

  // A 5 us cudaLaunchKernel (after 2 us of framework time) and the kernel it
  // launches on `stream`; returns the kernel.
  int32_t Kernel(const std::string& name, TimeNs duration, Phase phase = Phase::kForward, int stream = 0) {
    return Launch(TaskKind::kKernel, name, duration, phase, stream);
  }

  // Runs the pass; a changed graph must keep its resource chains.
  absl::StatusOr<bool> Run(const OptionMap& options = {}) {
    absl::StatusOr<bool> changed = RunPass(OpFusionPassInfo(), g, context, options);
    if (changed.ok() && *changed) RequireResourceChains(g);
    return changed;
  }

  std::vector<int32_t> OnResource(int32_t resource, TaskKind kind) const {
    std::vector<int32_t> out;
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      if (g.tasks[i].resource == resource && g.tasks[i].kind == kind) out.push_back(static_cast<int32_t>(i));
    }
    return out;
  }
  std::vector<int32_t> Kernels(int stream = 0) const {
    return OnResource(streams[static_cast<size_t>(stream)], TaskKind::kKernel);
  }
  std::vector<int32_t> Launches() const { return OnResource(thread, TaskKind::kRuntime); }
  std::string Name(int32_t t) const { return std::string(g.TaskName(t)); }
};

// Checks that `f` is unchanged by the pass: returns false, same tasks, same
// schedule.
void CheckUnchanged(Fixture& f, const OptionMap& options = {}) {
  const Schedule s0 = Sim(f.g);
  const size_t tasks = f.g.tasks.size();
  absl::StatusOr<bool> changed = f.Run(options);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(f.g.tasks.size() == tasks);
  const Schedule s1 = Sim(f.g);
  CHECK(s1.start_ns == s0.start_ns);
  CHECK(s1.end_ns == s0.end_ns);
  CHECK_THAT(AllNotes(f.context), Catch::Contains("no chain of two or more"));
}

}  // namespace

TEST_CASE("op_fusion fuses back-to-back elementwise kernels into one launched by the first call", "[op_fusion]") {
  Fixture f;
  f.Kernel(kGemm, 100 * kUs);
  f.Kernel(kMul, 10 * kUs);
  f.Kernel(kAdd, 20 * kUs);
  f.Kernel(kTriton, 30 * kUs);
  const int32_t after = f.CpuOp("aten::empty", 1 * kUs);
  f.Finish();
  const int32_t first_call = f.Launches()[1];
  const TimeNs cpu_before = Sim(f.g).end_ns[static_cast<size_t>(after)];

  absl::StatusOr<bool> changed = f.Run();
  REQUIRE(changed.ok());
  CHECK(*changed);
  const std::vector<int32_t> kernels = f.Kernels();
  REQUIRE(kernels.size() == 2);
  CHECK(f.Name(kernels[0]) == kGemm);
  const int32_t fused = kernels[1];
  CHECK(f.Name(fused) == "fused pointwise kernel x3");
  // max + (sum - max) * 0.5 = 30 + 30 * 0.5
  CHECK(f.Duration(fused) == 45 * kUs);
  // Two launch calls and their framework time are gone; the first stays and
  // launches the fused kernel.
  const std::vector<int32_t> launches = f.Launches();
  REQUIRE(launches.size() == 2);
  CHECK(launches[1] == first_call);  // ids before the removed ones keep their place
  CHECK(HasEdge(f.g, first_call, fused, EdgeKind::kLaunch));
  int launch_edges = 0;
  for (const Edge& e : f.g.edges) launch_edges += e.to == fused && IsLaunch(e.kind);
  CHECK(launch_edges == 1);
  // The CPU gets 2 x (5 + 2) us back.
  const int32_t after_now = static_cast<int32_t>(f.g.tasks.size()) - 2;  // aten::empty, before the fused kernel
  REQUIRE(f.Name(after_now) == "aten::empty");
  CHECK(Sim(f.g).end_ns[static_cast<size_t>(after_now)] == cpu_before - 14 * kUs);
  const std::string notes = AllNotes(f.context);
  INFO(notes);
  CHECK_THAT(notes, Catch::Contains("1 chains of elementwise kernels fused (3 members"));
  CHECK_THAT(notes, Catch::Contains("2 launch calls removed"));
  CHECK_THAT(notes, Catch::Contains("no other consumer is assumed"));
}

TEST_CASE("op_fusion leaves a graph without two back-to-back elementwise kernels unchanged", "[op_fusion]") {
  SECTION("a GEMM between them on the stream") {
    Fixture f;
    f.Kernel(kMul, 10 * kUs);
    f.Kernel(kGemm, 10 * kUs);
    f.Kernel(kAdd, 10 * kUs);
    f.Finish();
    CheckUnchanged(f);
  }
  SECTION("a launch onto another stream between their launches") {
    Fixture f(2);
    f.Kernel(kMul, 10 * kUs, Phase::kForward, 0);
    f.Kernel(kGemm, 10 * kUs, Phase::kForward, 1);
    f.Kernel(kAdd, 10 * kUs, Phase::kForward, 0);
    f.Finish();
    CheckUnchanged(f);
  }
  SECTION("a synchronizing call between their launches") {
    Fixture f;
    f.Kernel(kMul, 10 * kUs);
    f.Add(f.thread, TaskKind::kSync, "cudaStreamSynchronize", 3 * kUs, Phase::kForward, 1 * kUs);
    f.Kernel(kAdd, 10 * kUs);
    f.Finish();
    CheckUnchanged(f);
  }
  SECTION("another stream waits on the first kernel's result") {
    Fixture f(2);
    const int32_t mul = f.Kernel(kMul, 10 * kUs, Phase::kForward, 0);
    f.Kernel(kAdd, 10 * kUs, Phase::kForward, 0);
    const int32_t other = f.Add(f.streams[1], TaskKind::kKernel, kGemm, 10 * kUs, Phase::kForward, 0);
    f.g.AddEdge(mul, other, EdgeKind::kStreamWait);
    f.Finish();
    CheckUnchanged(f);
  }
  SECTION("forward and backward kernels") {
    Fixture f;
    f.Kernel(kMul, 10 * kUs, Phase::kForward);
    f.Kernel(kAdd, 10 * kUs, Phase::kBackward);
    f.Finish();
    CheckUnchanged(f);
  }
  SECTION("a single elementwise kernel") {
    Fixture f;
    f.Kernel(kGemm, 10 * kUs);
    f.Kernel(kMul, 10 * kUs);
    f.Finish();
    CheckUnchanged(f);
  }
}

TEST_CASE("op_fusion cuts chains at max_chain and rejects max_chain below 2", "[op_fusion]") {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.Kernel(kMul, 10 * kUs);
  f.Finish();

  SECTION("max_chain=2: two pairs and one left alone") {
    REQUIRE(f.Run({{"max_chain", "2"}}).value());
    const std::vector<int32_t> kernels = f.Kernels();
    REQUIRE(kernels.size() == 3);
    std::vector<std::string> names;
    for (int32_t k : kernels) names.push_back(f.Name(k));
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"fused pointwise kernel x2", "fused pointwise kernel x2", kMul});
    CHECK(f.Launches().size() == 3);
  }
  SECTION("max_chain=5: one kernel") {
    REQUIRE(f.Run({{"max_chain", "5"}}).value());
    REQUIRE(f.Kernels().size() == 1);
    CHECK(f.Duration(f.Kernels()[0]) == 30 * kUs);  // 10 + 40 * 0.5
  }
  SECTION("max_chain=1 is an error and the graph stays") {
    absl::StatusOr<bool> r = f.Run({{"max_chain", "1"}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("max_chain must be >= 2 (got 1)"));
    CHECK(f.Kernels().size() == 5);
  }
}

TEST_CASE("op_fusion's intermediate_factor spans launch-only savings to max-only kernels", "[op_fusion]") {
  Fixture f;
  f.Kernel(kMul, 10 * kUs);
  f.Kernel(kAdd, 30 * kUs);
  f.Finish();
  SECTION("0: the fused kernel takes its longest member's time") {
    REQUIRE(f.Run({{"intermediate_factor", "0"}}).value());
    CHECK(f.Duration(f.Kernels()[0]) == 30 * kUs);
  }
  SECTION("1: only the launch goes") {
    REQUIRE(f.Run({{"intermediate_factor", "1"}}).value());
    CHECK(f.Duration(f.Kernels()[0]) == 40 * kUs);
    CHECK(f.Launches().size() == 1);
  }
  SECTION("outside [0, 1]: an error") {
    absl::StatusOr<bool> r = f.Run({{"intermediate_factor", "1.5"}});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("intermediate_factor must be in [0, 1]"));
  }
}

TEST_CASE("op_fusion on a CPU-only graph fuses neighbouring elementwise ops and drops their framework gaps",
          "[op_fusion]") {
  Fixture f(0);
  f.CpuOp("aten::mm", 100 * kUs);
  f.CpuOp("aten::add", 20 * kUs, Phase::kForward, 4 * kUs);
  f.CpuOp("aten::mul_", 10 * kUs, Phase::kForward, 4 * kUs);
  f.CpuOp("aten::relu", 10 * kUs, Phase::kForward, 4 * kUs);
  f.CpuOp("aten::sum", 10 * kUs);
  f.CpuOp("aten::add", 10 * kUs);  // alone: stays
  f.Finish();
  const TimeNs before = Sim(f.g).makespan_ns;

  REQUIRE(f.Run().value());
  std::vector<std::string> names;
  for (size_t i = 0; i < f.g.tasks.size(); ++i) names.push_back(f.Name(static_cast<int32_t>(i)));
  CHECK(names == std::vector<std::string>{"aten::mm", "aten::sum", "aten::add", "fused pointwise op x3"});
  CHECK(f.Duration(static_cast<int32_t>(f.g.tasks.size()) - 1) == 30 * kUs);  // 20 + 20 * 0.5
  CHECK(f.g.tasks.back().gap_ns == 4 * kUs);                                // the first member's gap stays
  // 40 us of op time become 30, and two 4 us gaps go.
  CHECK(Sim(f.g).makespan_ns == before - 10 * kUs - 8 * kUs);
  CHECK_THAT(AllNotes(f.context), Catch::Contains("elementwise CPU ops fused"));
  CHECK(IsElementwiseCpuOpName("aten::threshold_backward"));
  CHECK_FALSE(IsElementwiseCpuOpName("aten::addmm"));
  CHECK_FALSE(IsElementwiseCpuOpName("add"));
}

TEST_CASE("op_fusion on a CPU-only graph names the normalization ops it does not fuse", "[op_fusion]") {
  struct Op {
    std::string name;
    TimeNs duration;
    Phase phase = Phase::kForward;
    int64_t trace_event = -1;  // >= 0: shared by the tasks of one op the builder split
  };
  struct Case {
    std::string what;
    std::vector<Op> ops;
    std::string note;  // "": no such note
  };
  const std::vector<Case> cases = {
      {"with chains fused; an optimizer-phase op is not counted",
       {{"aten::native_batch_norm", 40 * kUs}, {"aten::add", 20 * kUs}, {"aten::relu", 10 * kUs},
        {"aten::native_batch_norm_backward", 60 * kUs, Phase::kBackward},
        {"aten::native_batch_norm", 5 * kUs, Phase::kOptimizer}},
       "not modelled: 2 normalization ops in 1 iteration (batch, layer or group norm; 0.100 ms per iteration)"},
      {"without a chain", {{"aten::native_layer_norm", 30 * kUs}, {"aten::mm", 30 * kUs}},
       "not modelled: 1 normalization op in 1 iteration (batch, layer or group norm; 0.030 ms per iteration)"},
      {"an op split around what it encloses counts once",
       {{"aten::native_batch_norm", 20 * kUs, Phase::kForward, 7}, {"aten::empty", 1 * kUs},
        {"aten::native_batch_norm", 10 * kUs, Phase::kForward, 7}},
       "not modelled: 1 normalization op in 1 iteration (batch, layer or group norm; 0.030 ms per iteration)"},
      {"none", {{"aten::add", 20 * kUs}, {"aten::relu", 10 * kUs}}, ""},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Fixture f(0);
    for (const Op& op : c.ops) {
      const int32_t t = f.CpuOp(op.name, op.duration, op.phase);
      if (op.trace_event >= 0) f.g.tasks[static_cast<size_t>(t)].trace_event = op.trace_event;
    }
    f.Finish();
    REQUIRE(f.Run().ok());
    if (c.note.empty()) {
      CHECK_THAT(AllNotes(f.context), !Catch::Contains("not modelled"));
    } else {
      CHECK_THAT(AllNotes(f.context), Catch::Contains(c.note));
    }
  }
}

TEST_CASE("op_fusion with measured cpu_op_factors scales the forward/backward CPU ops they name, and fuses nothing",
          "[op_fusion]") {
  Fixture f(0);
  const int32_t mm = f.CpuOp("aten::mm", 100 * kUs);
  const int32_t add = f.CpuOp("aten::add", 20 * kUs, Phase::kForward, 4 * kUs);
  const int32_t relu = f.CpuOp("aten::relu", 20 * kUs, Phase::kForward, 4 * kUs);
  const int32_t bwd = f.CpuOp("aten::native_batch_norm_backward", 40 * kUs, Phase::kBackward);
  const int32_t opt = f.CpuOp("aten::add_", 10 * kUs, Phase::kOptimizer);
  for (int32_t t : {mm, add, relu, bwd, opt}) f.g.tasks[static_cast<size_t>(t)].trace_event = 10 + t;
  f.Finish();
  const TimeNs before = Sim(f.g).makespan_ns;

  SECTION("factors by trace event; an op without one and the optimizer stay") {
    const OptionMap options = {{"cpu_op_factors", StrCat(10 + add, "=0.5;", 10 + bwd, "=0.25;", 10 + opt, "=0.1")}};
    REQUIRE(f.Run(options).value());
    CHECK(f.g.tasks.size() == 5);  // nothing merged although add and relu are a chain
    CHECK(f.Duration(mm) == 100 * kUs);
    CHECK(f.Duration(add) == 10 * kUs);
    CHECK(f.Duration(relu) == 20 * kUs);
    CHECK(f.Duration(bwd) == 10 * kUs);
    CHECK(f.Duration(opt) == 10 * kUs);                  // optimizer phase: not compiled
    CHECK(Sim(f.g).makespan_ns == before - 40 * kUs);   // gaps unchanged
    CHECK_THAT(AllNotes(f.context), Catch::Contains("2 forward/backward CPU ops at their measured factors"));
    CHECK_THAT(AllNotes(f.context), !Catch::Contains("fused"));
  }
  SECTION("factors for no op of this graph: an error, the graph unchanged") {
    absl::StatusOr<bool> changed = f.Run({{"cpu_op_factors", "999=0.5"}});
    REQUIRE_FALSE(changed.ok());
    CHECK_THAT(std::string(changed.status().message()), Catch::Contains("none is the trace event"));
    CHECK(Sim(f.g).makespan_ns == before);
  }
  SECTION("a bad entry: an error naming the option") {
    absl::StatusOr<bool> changed = f.Run({{"cpu_op_factors", "3=-1"}});
    REQUIRE_FALSE(changed.ok());
    CHECK_THAT(std::string(changed.status().message()), Catch::Contains("op_fusion: cpu_op_factors: bad entry"));
  }
}

TEST_CASE("op_fusion rejects cpu_op_factors on a GPU graph", "[op_fusion]") {
  Fixture f;
  f.Kernel(kMul, 10 * kUs);
  f.Kernel(kAdd, 10 * kUs);
  f.Finish();
  absl::StatusOr<bool> changed = f.Run({{"cpu_op_factors", "0=0.5"}});
  REQUIRE_FALSE(changed.ok());
  CHECK_THAT(std::string(changed.status().message()), Catch::Contains("for CPU-only graphs"));
}

TEST_CASE("op_fusion knows elementwise kernels by function name", "[op_fusion]") {
  CHECK(IsElementwiseKernelName(kMul));
  CHECK(IsElementwiseKernelName(kAdd));
  CHECK(IsElementwiseKernelName("void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>(int)"));
  CHECK(IsElementwiseKernelName(kTriton));
  CHECK_FALSE(IsElementwiseKernelName("triton_red_fused_sum_0"));
  CHECK_FALSE(IsElementwiseKernelName(kGemm));
  CHECK_FALSE(IsElementwiseKernelName("void at::native::reduce_kernel<512, 1, ReduceOp<elementwise_kernel> >(int)"));
  CHECK_FALSE(IsElementwiseKernelName("fused pointwise kernel x3"));
}

TEST_CASE("op_fusion on the V100 ResNet trace removes launches and shortens GPU time, and a second run finds nothing",
          "[op_fusion]") {
  const Graph& baseline = BundledV100();
  Graph g = baseline;
  g.BuildAdjacency();
  PassContext context;
  const PassInfo info = OpFusionPassInfo();
  auto pass = info.create(PassOptions::Parse(info.name, info.options, {}).value());
  REQUIRE(pass.ok());
  absl::StatusOr<bool> changed = (*pass)->Run(g, context);
  REQUIRE(changed.ok());
  CHECK(*changed);
  INFO(AllNotes(context));
  REQUIRE(g.ValidateResourceChains().ok());
  auto count = [](const Graph& graph, TaskKind kind) {
    int64_t n = 0;
    TimeNs total = 0;
    for (const Task& t : graph.tasks) {
      if (t.kind == kind) {
        ++n;
        total += t.duration_ns;
      }
    }
    return std::pair<int64_t, TimeNs>(n, total);
  };
  const auto [kernels_before, kernel_time_before] = count(baseline, TaskKind::kKernel);
  const auto [kernels_after, kernel_time_after] = count(g, TaskKind::kKernel);
  const auto [calls_before, call_time_before] = count(baseline, TaskKind::kRuntime);
  const auto [calls_after, call_time_after] = count(g, TaskKind::kRuntime);
  CHECK(kernels_after < kernels_before - 500);
  CHECK(kernel_time_after < kernel_time_before);
  // Each fused kernel replaces >= 2: one launch call goes per kernel gone.
  CHECK(calls_before - calls_after == kernels_before - kernels_after);
  CHECK(call_time_after < call_time_before);
  int64_t fused = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.TaskName(static_cast<int32_t>(i)).substr(0, 22) != "fused pointwise kernel") continue;
    ++fused;
    int launches = 0;
    for (int32_t e : g.in_edges(static_cast<int32_t>(i))) launches += IsLaunch(g.edges[static_cast<size_t>(e)].kind);
    CHECK(launches == 1);
  }
  CHECK(fused > 100);
  const TimeNs replayed = MedianStep(baseline);
  const TimeNs predicted = MedianStep(g);
  CHECK(predicted <= replayed);

  PassContext again;
  absl::StatusOr<bool> second = (*pass)->Run(g, again);
  REQUIRE(second.ok());
  CHECK_FALSE(*second);
}
