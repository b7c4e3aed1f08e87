// Tests of passes/cuda_graphs: the CPU side of the captured region replaced
// by one graph launch per iteration, GPU work kept, regions, synchronization
// and other errors (which leave the graph alone), and the bundled V100 trace.
#include "daydream/passes/cuda_graphs.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

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

// Iterations (BeginIteration) of CPU threads ("thread 100", ...) launching
// onto GPU streams, tasks stamped with their trace order.
struct Fixture : PassTestGraph {
  explicit Fixture(int num_threads = 1, int num_streams = 1) : PassTestGraph(num_threads, 100, num_streams) {
    record_trace_order = true;
    launch_timing = {10 * kUs, 5 * kUs, 2 * kUs};
  }

  int32_t CpuOp(const std::string& name, TimeNs duration, Phase phase, int thread_index = 0) {
    return Add(threads[static_cast<size_t>(thread_index)], TaskKind::kCpuOp, name, duration, phase, 3 * kUs);
  }

  // A 10 us cudaLaunchKernel after 5 us of framework time, and a 20 us kernel.
  // Returns the kernel; the call is kernel's launcher (Call()).
  int32_t Kernel(Phase phase, int thread_index = 0, int stream = 0, TimeNs duration = 20 * kUs) {
    return Launch(TaskKind::kKernel, "kernel", duration, phase, stream, thread_index);
  }

  // Runs the pass; a changed graph must keep its resource chains.
  absl::StatusOr<bool> Run(const OptionMap& options = {}) {
    absl::StatusOr<bool> changed = RunPass(CudaGraphsPassInfo(), g, context, options);
    if (changed.ok() && *changed) RequireResourceChains(g);
    return changed;
  }

  std::vector<int32_t> Named(const std::string& name) const {
    std::vector<int32_t> out;
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      if (g.TaskName(static_cast<int32_t>(i)) == name) out.push_back(static_cast<int32_t>(i));
    }
    return out;
  }
  TimeNs TotalKernelTime() const {
    TimeNs total = 0;
    for (const Task& t : g.tasks) total += t.kind == TaskKind::kKernel ? t.duration_ns : 0;
    return total;
  }
};

// Runs the pass expecting an error containing `message`, and checks the
// graph was left as it was.
void CheckErrorLeavesGraph(Fixture& f, const OptionMap& options, const std::string& message) {
  const size_t tasks = f.g.tasks.size();
  const size_t edges = f.g.edges.size();
  const Schedule s0 = Sim(f.g);
  absl::StatusOr<bool> r = f.Run(options);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(std::string(r.status().message()), Catch::Contains(message));
  CHECK(f.g.tasks.size() == tasks);
  CHECK(f.g.edges.size() == edges);
  CHECK(Sim(f.g).end_ns == s0.end_ns);
}

}  // namespace

TEST_CASE("cuda_graphs replaces the launches of forward and backward by one graph launch", "[cuda_graphs]") {
  Fixture f;
  f.BeginIteration();
  const int32_t data = f.CpuOp("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 50 * kUs, Phase::kData);
  const int32_t k1 = f.Kernel(Phase::kForward);
  const int32_t view = f.CpuOp("aten::view", 2 * kUs, Phase::kForward);
  const int32_t k2 = f.Kernel(Phase::kForward);
  const int32_t k3 = f.Kernel(Phase::kBackward);
  const int32_t k4 = f.Kernel(Phase::kOptimizer);
  f.Finish();
  const TimeNs kernel_time = f.TotalKernelTime();
  const TimeNs cpu_end_before = Sim(f.g).end_ns[static_cast<size_t>(f.g.iterations[0].end_task)];

  absl::StatusOr<bool> changed = f.Run();
  REQUIRE(changed.ok());
  CHECK(*changed);
  const std::vector<int32_t> graph_launches = f.Named("cudaGraphLaunch");
  REQUIRE(graph_launches.size() == 1);
  const int32_t launch = graph_launches[0];
  CHECK(f.g.tasks[static_cast<size_t>(launch)].duration_ns == 20 * kUs);
  CHECK(f.g.tasks[static_cast<size_t>(launch)].kind == TaskKind::kRuntime);
  // Three launch calls went; the optimizer's stays; the CPU ops stay.
  CHECK(f.Named("cudaLaunchKernel").size() == 1);
  CHECK(f.Named("aten::view").size() == 1);
  // Ids of tasks before the first removed one are kept: data, then the
  // graph launch at the first removed call's place.
  CHECK(f.g.TaskName(data) == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  const int32_t k1_now = k1 - 1;  // the call before it went
  CHECK(HasEdge(f.g, data, launch, EdgeKind::kSequential));
  CHECK(HasEdge(f.g, launch, k1_now, EdgeKind::kLaunch));
  // The kernels keep their times and order; only the first is launched.
  CHECK(f.TotalKernelTime() == kernel_time);
  int launched = 0;
  for (const Edge& e : f.g.edges) launched += e.kind == EdgeKind::kLaunch && e.from == launch;
  CHECK(launched == 1);
  (void)view;
  (void)k2;
  (void)k3;
  (void)k4;
  // CPU: 3 x (5 + 10) us of calls replaced by 20 us.
  const Schedule s = Sim(f.g);
  CHECK(s.end_ns[static_cast<size_t>(f.g.iterations[0].end_task)] < cpu_end_before);
  const std::string notes = AllNotes(f.context);
  INFO(notes);
  CHECK_THAT(notes, Catch::Contains("per iteration 3 CPU launch and runtime calls (0.030 ms) and 0.015 ms"));
  CHECK_THAT(notes, Catch::Contains("launching 1 stream"));
}

TEST_CASE("cuda_graphs with region=iteration captures the optimizer too, one launch per iteration",
          "[cuda_graphs]") {
  Fixture f;
  for (int i = 0; i < 2; ++i) {
    f.BeginIteration();
    f.Kernel(Phase::kForward);
    f.Kernel(Phase::kBackward);
    f.Kernel(Phase::kOptimizer);
    f.CpuOp("aten::zeros", 5 * kUs, Phase::kOther);
  }
  f.Finish();
  REQUIRE(f.Run({{"region", "iteration"}}).value());
  CHECK(f.Named("cudaGraphLaunch").size() == 2);
  CHECK(f.Named("cudaLaunchKernel").empty());
  CHECK(f.Named("aten::zeros").size() == 2);
  for (const Iteration& it : f.g.iterations) {
    CHECK(f.g.TaskName(it.begin_task) == "cudaGraphLaunch");
  }
  CHECK_THAT(AllNotes(f.context), Catch::Contains("(2 iterations)"));
}

TEST_CASE("cuda_graphs launches the first captured kernel of every stream and keeps cross-thread order",
          "[cuda_graphs]") {
  Fixture f(2, 2);
  f.BeginIteration();
  const int32_t a = f.Kernel(Phase::kForward, 0, 0);
  const int32_t b = f.Kernel(Phase::kForward, 0, 1);
  // The backward thread waits for the forward's last call.
  const int32_t waiter = f.CpuOp("autograd::engine::evaluate_function: MulBackward0", 4 * kUs, Phase::kBackward, 1);
  f.g.AddEdge(b - 1, waiter, EdgeKind::kThread);
  f.Kernel(Phase::kBackward, 1, 0);
  f.Finish();
  REQUIRE(f.Run().value());
  const std::vector<int32_t> launches = f.Named("cudaGraphLaunch");
  REQUIRE(launches.size() == 1);
  const int32_t launch = launches[0];
  std::vector<std::string> launched_streams;
  for (const Edge& e : f.g.edges) {
    if (e.kind == EdgeKind::kLaunch && e.from == launch) {
      launched_streams.push_back(std::string(f.g.Str(f.g.resources[static_cast<size_t>(f.g.tasks[static_cast<size_t>(e.to)].resource)].name)));
    }
  }
  std::sort(launched_streams.begin(), launched_streams.end());
  CHECK(launched_streams == std::vector<std::string>{"stream 7", "stream 8"});
  const int32_t waiter_now = f.Named("autograd::engine::evaluate_function: MulBackward0")[0];
  CHECK(HasEdge(f.g, launch, waiter_now, EdgeKind::kThread));
  (void)a;
  CHECK_THAT(AllNotes(f.context), Catch::Contains("launching 2 streams"));
}

TEST_CASE("cuda_graphs refuses a region with a synchronizing call and leaves the graph", "[cuda_graphs]") {
  Fixture f;
  f.BeginIteration();
  f.Kernel(Phase::kForward);
  const int32_t k = f.Kernel(Phase::kForward);
  const int32_t sync = f.Add(f.threads[0], TaskKind::kSync, "cudaStreamSynchronize", 2 * kUs, Phase::kBackward, 1 * kUs);
  f.g.AddEdge(k, sync, EdgeKind::kSync);
  f.Kernel(Phase::kBackward);
  f.Finish();
  CheckErrorLeavesGraph(f, {}, "contains the synchronizing call 'cudaStreamSynchronize'");
  CheckErrorLeavesGraph(f, {}, "CUDA graphs cannot capture synchronization");
}

TEST_CASE("cuda_graphs accepts a synchronizing call outside the captured region", "[cuda_graphs]") {
  Fixture f;
  f.BeginIteration();
  f.Kernel(Phase::kForward);
  const int32_t k = f.Kernel(Phase::kOptimizer);
  const int32_t sync = f.Add(f.threads[0], TaskKind::kSync, "aten::item", 2 * kUs, Phase::kOptimizer, 1 * kUs);
  f.g.AddEdge(k, sync, EdgeKind::kSync);
  f.Finish();
  REQUIRE(f.Run().value());
  CHECK(f.Named("aten::item").size() == 1);
  SECTION("but not with region=iteration") {
    Fixture g;
    g.BeginIteration();
    g.Kernel(Phase::kForward);
    const int32_t k2 = g.Kernel(Phase::kOptimizer);
    const int32_t s2 = g.Add(g.threads[0], TaskKind::kSync, "aten::item", 2 * kUs, Phase::kOptimizer, 1 * kUs);
    g.g.AddEdge(k2, s2, EdgeKind::kSync);
    g.Finish();
    CheckErrorLeavesGraph(g, {{"region", "iteration"}}, "'aten::item'");
  }
}

TEST_CASE("cuda_graphs says why it cannot apply", "[cuda_graphs]") {
  SECTION("a CPU-only graph") {
    Fixture f(1, 0);
    f.BeginIteration();
    f.CpuOp("aten::mm", 10 * kUs, Phase::kForward);
    f.Finish();
    CheckErrorLeavesGraph(f, {}, "no GPU streams");
  }
  SECTION("no iterations") {
    Fixture f;
    f.Kernel(Phase::kForward);
    f.Finish();
    CheckErrorLeavesGraph(f, {}, "no iterations");
  }
  SECTION("no forward or backward phase") {
    Fixture f;
    f.BeginIteration();
    f.Kernel(Phase::kOptimizer);
    f.Kernel(Phase::kOther);
    f.Finish();
    CheckErrorLeavesGraph(f, {}, "no CPU task of the forward_backward region launched GPU work");
  }
  SECTION("an unknown region and a negative launch time") {
    Fixture f;
    f.BeginIteration();
    f.Kernel(Phase::kForward);
    f.Finish();
    CheckErrorLeavesGraph(f, {{"region", "step"}}, "region must be forward_backward or iteration, got 'step'");
    CheckErrorLeavesGraph(f, {{"graph_launch_us", "-1"}}, "graph_launch_us must be >= 0");
  }
}

TEST_CASE("cuda_graphs with a free graph launch leaves the CPU only the ops that launched nothing",
          "[cuda_graphs]") {
  Fixture f;
  f.BeginIteration();
  f.Kernel(Phase::kForward);
  f.Kernel(Phase::kForward);
  f.CpuOp("aten::view", 4 * kUs, Phase::kForward);
  f.Finish();
  REQUIRE(f.Run({{"graph_launch_us", "0"}}).value());
  const int32_t launch = f.Named("cudaGraphLaunch")[0];
  CHECK(f.g.tasks[static_cast<size_t>(launch)].duration_ns == 0);
  CHECK(f.g.tasks[static_cast<size_t>(launch)].gap_ns == 5 * kUs);  // the first call's gap: time since the trace began
  const int32_t view = f.Named("aten::view")[0];
  CHECK(Sim(f.g).end_ns[static_cast<size_t>(view)] == 5 * kUs + 3 * kUs + 4 * kUs);
}

TEST_CASE("cuda_graphs on the V100 ResNet trace removes thousands of launches per step without touching the GPU",
          "[cuda_graphs]") {
  const Graph& baseline = BundledV100();
  Graph g = baseline;
  g.BuildAdjacency();
  PassContext context;
  absl::StatusOr<bool> changed = RunPass(CudaGraphsPassInfo(), g, context);
  INFO((changed.ok() ? AllNotes(context) : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  CHECK(*changed);
  REQUIRE(g.ValidateResourceChains().ok());
  int64_t graph_launches = 0, launches_before = 0, launches_after = 0;
  TimeNs gpu_before = 0, gpu_after = 0;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    graph_launches += g.TaskName(static_cast<int32_t>(i)) == "cudaGraphLaunch";
    launches_after += g.TaskName(static_cast<int32_t>(i)) == "cudaLaunchKernel";
    if (g.resources[static_cast<size_t>(g.tasks[i].resource)].kind == ResourceKind::kGpuStream) {
      gpu_after += g.tasks[i].duration_ns;
    }
  }
  for (size_t i = 0; i < baseline.tasks.size(); ++i) {
    launches_before += baseline.TaskName(static_cast<int32_t>(i)) == "cudaLaunchKernel";
    if (baseline.resources[static_cast<size_t>(baseline.tasks[i].resource)].kind == ResourceKind::kGpuStream) {
      gpu_before += baseline.tasks[i].duration_ns;
    }
  }
  CHECK(graph_launches == static_cast<int64_t>(baseline.iterations.size()));
  CHECK(launches_before - launches_after > 4000);  // ~850 per step in forward and backward
  CHECK(gpu_after == gpu_before);
  // The steady steps are GPU-bound: one launch instead of thousands cannot
  // make them longer, nor much shorter.
  const TimeNs replayed = MedianStep(baseline);
  const TimeNs predicted = MedianStep(g);
  CHECK(predicted <= replayed);
  CHECK(predicted > replayed * 95 / 100);
}
