// Tests of passes/batch_size: the saturation model, which tasks scale and
// which stay, the factor-1 and saturation edges, errors, and the bundled V100
// trace.
#include "daydream/passes/batch_size.h"

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

// One iteration: a CPU thread, one GPU stream (unless gpu = false) and a
// communication channel. Add's gap defaults to 3 us; launch calls take 5 us
// and their kLaunch edges lag 2 us.
struct Fixture : PassTestGraph {
  int32_t channel = -1;

  explicit Fixture(bool gpu = true) : PassTestGraph(gpu ? 1 : 0) {
    channel = g.AddResource(Resource{ResourceKind::kCommChannel, -1, 9, g.strings.Intern("network")});
    launch_timing = {5 * kUs, 3 * kUs, 2 * kUs};
  }

  int32_t Add(int32_t resource, TaskKind kind, const std::string& name, TimeNs duration, Phase phase,
              TimeNs gap = 3 * kUs) {
    return PassTestGraph::Add(resource, kind, name, duration, phase, gap);
  }

  // A launch call and the GPU task it launches; returns the GPU task.
  int32_t Gpu(TaskKind kind, const std::string& name, TimeNs duration, Phase phase) {
    return Launch(kind, name, duration, phase);
  }

  absl::StatusOr<bool> Run(const OptionMap& options) {
    return RunPass(BatchSizePassInfo(), g, context, options);
  }

  TimeNs Gap(int32_t t) const { return g.tasks[static_cast<size_t>(t)].gap_ns; }
};

}  // namespace

TEST_CASE("batch_size time factor grows with the task until it saturates the device", "[batch_size]") {
  CHECK(BatchTimeFactor(40 * kUs, 2.0, 20 * kUs) == 2.0);
  CHECK(BatchTimeFactor(20 * kUs, 2.0, 20 * kUs) == 2.0);  // exactly saturated
  CHECK(BatchTimeFactor(10 * kUs, 2.0, 20 * kUs) == 1.5);
  CHECK(BatchTimeFactor(19 * kUs, 3.0, 20 * kUs) == Approx(2.9));
  CHECK(BatchTimeFactor(0, 4.0, 20 * kUs) == 1.0);
  CHECK(BatchTimeFactor(10 * kUs, 0.5, 20 * kUs) == 0.75);
  CHECK(BatchTimeFactor(1, 2.0, 0) == 2.0);  // saturation 0: everything scales
  CHECK(BatchTimeFactor(40 * kUs, 1.0, 20 * kUs) == 1.0);
}

TEST_CASE("batch_size scales forward and backward kernels and the input, not launches, optimizer or communication",
          "[batch_size]") {
  Fixture f;
  const int32_t load = f.Add(f.thread, TaskKind::kDataLoad, "DataLoader.__next__", 100 * kUs, Phase::kData);
  const int32_t htod = f.Gpu(TaskKind::kMemcpy, "Memcpy HtoD (Pinned -> Device)", 8 * kUs, Phase::kForward);
  const int32_t big = f.Gpu(TaskKind::kKernel, "volta_sgemm_128x64_nn", 40 * kUs, Phase::kForward);
  const int32_t small = f.Gpu(TaskKind::kKernel, "vectorized_elementwise_kernel", 10 * kUs, Phase::kBackward);
  const int32_t dtod = f.Gpu(TaskKind::kMemcpy, "Memcpy DtoD (Device -> Device)", 30 * kUs, Phase::kBackward);
  const int32_t view = f.Add(f.thread, TaskKind::kCpuOp, "aten::empty", 60 * kUs, Phase::kForward);
  const int32_t comm = f.Add(f.channel, TaskKind::kCollective, "all_reduce", 50 * kUs, Phase::kComm, 0);
  const int32_t optimizer = f.Gpu(TaskKind::kKernel, "multi_tensor_apply_kernel", 40 * kUs, Phase::kOptimizer);
  f.Finish();
  const TimeNs before = Sim(f.g).makespan_ns;

  absl::StatusOr<bool> changed = f.Run({{"factor", "2"}});
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(f.Duration(load) == 200 * kUs);
  CHECK(f.Duration(htod) == 16 * kUs);
  CHECK(f.Duration(big) == 80 * kUs);
  CHECK(f.Duration(small) == 15 * kUs);
  CHECK(f.Duration(dtod) == 30 * kUs);
  CHECK(f.Duration(view) == 60 * kUs);  // GPU graph: CPU ops are dispatch
  CHECK(f.Duration(comm) == 50 * kUs);
  CHECK(f.Duration(optimizer) == 40 * kUs);
  for (size_t i = 0; i < f.g.tasks.size(); ++i) {
    if (f.g.tasks[i].kind == TaskKind::kRuntime) CHECK(f.g.tasks[i].duration_ns == 5 * kUs);
  }
  CHECK(f.Gap(view) == 3 * kUs);
  CHECK(Sim(f.g).makespan_ns > before);
  const std::string notes = AllNotes(f.context);
  INFO(notes);
  CHECK_THAT(notes, Catch::Contains("2 forward/backward kernels 0.050 -> 0.095 ms"));
  CHECK_THAT(notes, Catch::Contains("2 data-phase tasks and host-to-device copies 0.108 -> 0.216 ms"));
}

TEST_CASE("batch_size on a CPU-only graph scales the forward and backward ops by their own saturation",
          "[batch_size]") {
  Fixture f(/*gpu=*/false);
  const int32_t mm = f.Add(f.thread, TaskKind::kCpuOp, "aten::mm", 100 * kUs, Phase::kForward);
  const int32_t at_edge = f.Add(f.thread, TaskKind::kCpuOp, "aten::add", 50 * kUs, Phase::kBackward);
  const int32_t tiny = f.Add(f.thread, TaskKind::kCpuOp, "aten::view", 5 * kUs, Phase::kForward);
  const int32_t step = f.Add(f.thread, TaskKind::kCpuOp, "aten::add_", 100 * kUs, Phase::kOptimizer);
  f.Finish();
  REQUIRE(f.Run({{"factor", "4"}}).value());
  CHECK(f.Duration(mm) == 400 * kUs);
  CHECK(f.Duration(at_edge) == 200 * kUs);       // 50 us: exactly cpu_saturation_us
  CHECK(f.Duration(tiny) == 5 * kUs * 13 / 10);  // 1 + 3 * 0.1
  CHECK(f.Duration(step) == 100 * kUs);
  CHECK(f.Gap(mm) == 3 * kUs);

  SECTION("cpu_saturation_us moves the edge") {
    Fixture h(/*gpu=*/false);
    const int32_t op = h.Add(h.thread, TaskKind::kCpuOp, "aten::mm", 50 * kUs, Phase::kForward);
    h.Finish();
    REQUIRE(h.Run({{"factor", "4"}, {"cpu_saturation_us", "100"}}).value());
    CHECK(h.Duration(op) == 125 * kUs);  // 50 * (1 + 3 * 0.5)
  }
}

TEST_CASE("batch_size fixed-cost factor grows only the work above the fixed cost", "[batch_size]") {
  CHECK(FixedCostTimeFactor(10 * kUs, 2.0, 2 * kUs) == Approx(1.8));  // 2 + 2 x 8 = 18 us
  CHECK(FixedCostTimeFactor(2 * kUs, 2.0, 2 * kUs) == 1.0);            // all fixed
  CHECK(FixedCostTimeFactor(1 * kUs, 4.0, 2 * kUs) == 1.0);
  CHECK(FixedCostTimeFactor(10 * kUs, 0.5, 2 * kUs) == Approx(0.6));   // 2 + 0.5 x 8 = 6 us
  CHECK(FixedCostTimeFactor(0, 2.0, 2 * kUs) == 1.0);
}

TEST_CASE("batch_size with cpu_fixed_us scales each CPU op's work above its fixed cost", "[batch_size]") {
  Fixture f(/*gpu=*/false);
  const int32_t mm = f.Add(f.thread, TaskKind::kCpuOp, "aten::mm", 100 * kUs, Phase::kForward);
  const int32_t add = f.Add(f.thread, TaskKind::kCpuOp, "aten::add", 5 * kUs, Phase::kBackward);
  const int32_t view = f.Add(f.thread, TaskKind::kCpuOp, "aten::view", 1 * kUs, Phase::kForward);
  const int32_t step = f.Add(f.thread, TaskKind::kCpuOp, "aten::add_", 100 * kUs, Phase::kOptimizer);
  f.Finish();
  REQUIRE(f.Run({{"factor", "2"}, {"cpu_fixed_us", "2"}}).value());
  CHECK(f.Duration(mm) == 198 * kUs);  // 2 + 2 x 98
  CHECK(f.Duration(add) == 8 * kUs);   // 2 + 2 x 3 (the saturation model: 5 x 1.1)
  CHECK(f.Duration(view) == 1 * kUs);
  CHECK(f.Duration(step) == 100 * kUs);
  REQUIRE(f.context.notes.size() == 1);
  CHECK_THAT(f.context.notes[0], Catch::Contains("2.00 us of fixed cost each"));
  CHECK_FALSE(f.Run({{"cpu_fixed_us", "-1"}}).ok());
}

TEST_CASE("batch_size takes measured cpu_op_factors by trace event over its models", "[batch_size]") {
  Fixture f(/*gpu=*/false);
  const int32_t mm = f.Add(f.thread, TaskKind::kCpuOp, "aten::mm", 100 * kUs, Phase::kForward);
  const int32_t add = f.Add(f.thread, TaskKind::kCpuOp, "aten::add", 10 * kUs, Phase::kBackward);
  const int32_t step = f.Add(f.thread, TaskKind::kCpuOp, "aten::add_", 100 * kUs, Phase::kOptimizer);
  f.g.tasks[static_cast<size_t>(mm)].trace_event = 7;
  f.g.tasks[static_cast<size_t>(step)].trace_event = 9;  // optimizer: never scaled
  f.Finish();
  REQUIRE(f.Run({{"factor", "2"}, {"cpu_fixed_us", "2"}, {"cpu_op_factors", "7=2.25;9=3"}}).value());
  CHECK(f.Duration(mm) == 225 * kUs);   // measured (cache: more than the batch)
  CHECK(f.Duration(add) == 18 * kUs);   // no factor: 2 + 2 x 8
  CHECK(f.Duration(step) == 100 * kUs);
  REQUIRE(f.context.notes.size() == 1);
  CHECK_THAT(f.context.notes[0], Catch::Contains("1 at their measured factors (cpu_op_factors), the rest: 2.00 us"));
  const absl::StatusOr<bool> bad = f.Run({{"cpu_op_factors", "7=-1"}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("batch_size: cpu_op_factors: bad entry '7=-1'"));
}

TEST_CASE("batch_size with factor 1 leaves the graph and its schedule as they were", "[batch_size]") {
  Fixture f;
  f.Gpu(TaskKind::kKernel, "volta_sgemm_128x64_nn", 40 * kUs, Phase::kForward);
  f.Finish();
  const Schedule s0 = Sim(f.g);
  absl::StatusOr<bool> changed = f.Run({{"factor", "1"}});
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(f.Duration(1) == 40 * kUs);
  const Schedule s1 = Sim(f.g);
  CHECK(s1.start_ns == s0.start_ns);
  CHECK(s1.end_ns == s0.end_ns);
  CHECK_THAT(AllNotes(f.context), Catch::Contains("factor 1 keeps the batch"));
}

TEST_CASE("batch_size shrinks saturated kernels with the batch and short ones less", "[batch_size]") {
  Fixture f;
  const int32_t big = f.Gpu(TaskKind::kKernel, "volta_sgemm_128x64_nn", 40 * kUs, Phase::kForward);
  const int32_t edge = f.Gpu(TaskKind::kKernel, "volta_sgemm_128x64_nn", 20 * kUs, Phase::kForward);
  const int32_t small = f.Gpu(TaskKind::kKernel, "elementwise_kernel", 10 * kUs, Phase::kForward);
  f.Finish();
  REQUIRE(f.Run({{"factor", "0.5"}}).value());
  CHECK(f.Duration(big) == 20 * kUs);
  CHECK(f.Duration(edge) == 10 * kUs);
  CHECK(f.Duration(small) == 7500);
}

TEST_CASE("batch_size says why it cannot apply", "[batch_size]") {
  Fixture f;
  f.Gpu(TaskKind::kKernel, "volta_sgemm_128x64_nn", 40 * kUs, Phase::kOther);
  f.Finish();
  SECTION("no phases") {
    absl::StatusOr<bool> r = f.Run({{"factor", "2"}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("no forward or backward kernel"));
  }
  SECTION("bad factors") {
    for (const char* bad : {"0", "-2"}) {
      absl::StatusOr<bool> r = f.Run({{"factor", bad}});
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(std::string(r.status().message()), Catch::Contains("factor (new per-device batch / recorded batch) must be > 0"));
    }
    absl::StatusOr<bool> r = f.Run({{"factor", "2"}, {"saturation_us", "-1"}});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("saturation_us must be >= 0"));
  }
  CHECK(f.Duration(1) == 40 * kUs);
}

TEST_CASE("batch_size on the V100 ResNet trace nearly doubles the GPU-bound step at twice the batch",
          "[batch_size]") {
  const Graph& baseline = BundledV100();
  Graph g = baseline;
  g.BuildAdjacency();
  PassContext context;
  absl::StatusOr<bool> changed = RunPass(BatchSizePassInfo(), g, context, {{"factor", "2"}});
  REQUIRE(changed.ok());
  CHECK(*changed);
  INFO(AllNotes(context));
  TimeNs compute_before = 0, compute_after = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = baseline.tasks[i];
    const bool compute = t.kind == TaskKind::kKernel && (t.phase == Phase::kForward || t.phase == Phase::kBackward);
    if (compute) {
      compute_before += t.duration_ns;
      compute_after += g.tasks[i].duration_ns;
      CHECK(g.tasks[i].duration_ns >= t.duration_ns);
    } else {
      CHECK(g.tasks[i].duration_ns == t.duration_ns);  // optimizer, launches, copies, CPU ops
    }
    CHECK(g.tasks[i].gap_ns == t.gap_ns);
  }
  const double grown = static_cast<double>(compute_after) / static_cast<double>(compute_before);
  CHECK(grown > 1.9);  // ResNet's kernels are mostly long enough to fill a V100
  CHECK(grown < 2.0);
  const TimeNs replayed = MedianStep(baseline);
  const TimeNs predicted = MedianStep(g);
  CHECK(predicted > replayed * 17 / 10);
  CHECK(predicted < replayed * 2);
}
