// Tests for daydream/passes/scale.h: per-class and per-pattern duration
// factors, their errors, the no-op case, and the simulator's monotonicity
// under faster work.
#include "daydream/passes/scale.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/passes/pipeline.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"

using namespace daydream;

namespace {

// cpu thread: launch (gap 4) -> op (gap 6) -> sync;  gpu stream: kernel ->
// memcpy -> memset;  network: one collective. Durations are round numbers.
struct Fixture {
  Graph g;
  int32_t launch, op, sync, kernel, memcpy, memset, collective;

  Fixture() {
    const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
    const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
    const int32_t net = g.AddResource(Resource{ResourceKind::kCommChannel, -1, 2, g.strings.Intern("network")});
    auto add = [&](const char* name, int32_t resource, TaskKind kind, TimeNs duration, TimeNs gap) {
      Task t;
      t.name = g.strings.Intern(name);
      t.resource = resource;
      t.kind = kind;
      t.duration_ns = duration;
      t.gap_ns = gap;
      return g.AddTask(t);
    };
    launch = add("cudaLaunchKernel", cpu, TaskKind::kRuntime, 100, 4);
    op = add("aten::add_", cpu, TaskKind::kCpuOp, 200, 6);
    sync = add("cudaDeviceSynchronize", cpu, TaskKind::kSync, 10, 2);
    kernel = add("volta_sgemm_128x64_nn", gpu, TaskKind::kKernel, 1000, 3);
    memcpy = add("Memcpy DtoH (Device -> Pinned)", gpu, TaskKind::kMemcpy, 400, 1);
    memset = add("Memset (Device)", gpu, TaskKind::kMemset, 40, 1);
    collective = add("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", net, TaskKind::kCollective, 800, 0);
    g.AddEdge(launch, op, EdgeKind::kSequential);
    g.AddEdge(op, sync, EdgeKind::kSequential);
    g.AddEdge(kernel, memcpy, EdgeKind::kSequential);
    g.AddEdge(memcpy, memset, EdgeKind::kSequential);
    g.AddEdge(launch, kernel, EdgeKind::kLaunch, 5);
    g.AddEdge(kernel, collective, EdgeKind::kData);
    g.AddEdge(memset, sync, EdgeKind::kSync);
    g.AddEdge(collective, sync, EdgeKind::kSync);
    g.BuildAdjacency();
  }

  TimeNs Duration(int32_t t) const { return g.tasks[static_cast<size_t>(t)].duration_ns; }
  TimeNs Gap(int32_t t) const { return g.tasks[static_cast<size_t>(t)].gap_ns; }
};

absl::StatusOr<bool> RunScale(const OptionMap& options, Graph& g, PassContext* context = nullptr) {
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass("scale", options);
  if (!pass.ok()) return pass.status();
  PassContext local;
  return (*pass)->Run(g, context != nullptr ? *context : local);
}

bool ScaleOk(const OptionMap& options, Graph& g, PassContext* context = nullptr) {
  absl::StatusOr<bool> changed = RunScale(options, g, context);
  INFO((changed.ok() ? std::string() : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  return *changed;
}

TimeNs Makespan(const Graph& g) {
  absl::StatusOr<Schedule> s = Simulate(g);
  INFO((s.ok() ? std::string() : std::string(s.status().message())));
  REQUIRE(s.ok());
  return s->makespan_ns;
}

const Graph& ResNetGraph() {
  static const Graph* const kGraph = [] {
    absl::StatusOr<Trace> trace = ReadTraceFile(std::string(DAYDREAM_TEST_DATA_DIR) +
                                                "/../../examples/traces/resnet-v100-ddp1-rank0.pt.trace.json.gz");
    REQUIRE(trace.ok());
    absl::StatusOr<Graph> g = BuildGraph(*trace);
    REQUIRE(g.ok());
    return new Graph(std::move(g).value());
  }();
  return *kGraph;
}

void CheckSameSchedule(const Graph& a, const Graph& b) {
  absl::StatusOr<Schedule> sa = Simulate(a);
  absl::StatusOr<Schedule> sb = Simulate(b);
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  CHECK(sa->start_ns == sb->start_ns);
  CHECK(sa->end_ns == sb->end_ns);
  CHECK(sa->makespan_ns == sb->makespan_ns);
}

}  // namespace

TEST_CASE("scale by a factor too large for the graph is an out-of-range error naming scale", "[scale]") {
  Fixture f;
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass("scale", {{"gpu", "1e17"}});
  REQUIRE(pass.ok());
  Pipeline pipeline;
  pipeline.AddPass(*std::move(pass));
  PassContext context;
  absl::StatusOr<bool> changed = pipeline.Run(f.g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.status().code() == absl::StatusCode::kOutOfRange);
  CHECK_THAT(std::string(changed.status().message()), Catch::StartsWith("scale: task 3 (volta_sgemm_128x64_nn)"));
  CHECK_THAT(std::string(changed.status().message()), Catch::Contains("cannot be simulated"));
}

TEST_CASE("scale with every factor 1 changes nothing", "[scale]") {
  Fixture f;
  const Graph before = f.g;
  OptionMap options;
  SECTION("defaults") {}
  SECTION("every factor given as 1") {
    options = {{"gpu", "1"}, {"cpu", "1.0"}, {"comm", "1"}, {"copy", "1"}};
  }
  SECTION("a pattern with factor 1") {
    options = {{"pattern", "sgemm"}, {"factor", "1"}};
  }
  PassContext context;
  CHECK_FALSE(ScaleOk(options, f.g, &context));
  CHECK(context.notes.empty());
  REQUIRE(f.g.tasks.size() == before.tasks.size());
  for (size_t t = 0; t < f.g.tasks.size(); ++t) {
    CHECK(f.g.tasks[t].duration_ns == before.tasks[t].duration_ns);
    CHECK(f.g.tasks[t].gap_ns == before.tasks[t].gap_ns);
  }
  CHECK(f.g.edges.size() == before.edges.size());
  CheckSameSchedule(f.g, before);
}

TEST_CASE("scale with every factor 1 leaves the ResNet-50 schedule identical", "[scale]") {
  Graph g = ResNetGraph();
  CHECK_FALSE(ScaleOk({{"gpu", "1"}, {"cpu", "1"}, {"comm", "1"}, {"copy", "1"}}, g));
  CheckSameSchedule(g, ResNetGraph());
}

TEST_CASE("scale applies each class's factor to its tasks only", "[scale]") {
  Fixture f;
  SECTION("gpu: kernels") {
    CHECK(ScaleOk({{"gpu", "0.5"}}, f.g));
    CHECK(f.Duration(f.kernel) == 500);
    CHECK(f.Gap(f.kernel) == 3);  // the launch overhead between kernels stays
    CHECK(f.Duration(f.memcpy) == 400);
    CHECK(f.Duration(f.op) == 200);
    CHECK(f.Duration(f.collective) == 800);
  }
  SECTION("cpu: operators, runtime calls, syncs and the framework time between them") {
    CHECK(ScaleOk({{"cpu", "0.5"}}, f.g));
    CHECK(f.Duration(f.launch) == 50);
    CHECK(f.Duration(f.op) == 100);
    CHECK(f.Duration(f.sync) == 5);
    CHECK(f.Gap(f.launch) == 2);
    CHECK(f.Gap(f.op) == 3);
    CHECK(f.Gap(f.sync) == 1);
    CHECK(f.Duration(f.kernel) == 1000);
    CHECK(f.Gap(f.kernel) == 3);
  }
  SECTION("comm: collectives") {
    CHECK(ScaleOk({{"comm", "0.25"}}, f.g));
    CHECK(f.Duration(f.collective) == 200);
    CHECK(f.Duration(f.kernel) == 1000);
  }
  SECTION("copy: memcpy and memset") {
    CHECK(ScaleOk({{"copy", "2"}}, f.g));
    CHECK(f.Duration(f.memcpy) == 800);
    CHECK(f.Duration(f.memset) == 80);
    CHECK(f.Duration(f.kernel) == 1000);
  }
  SECTION("zero: free") {
    CHECK(ScaleOk({{"gpu", "0"}}, f.g));
    CHECK(f.Duration(f.kernel) == 0);
  }
  CHECK(f.g.has_adjacency());
  CHECK(f.g.Validate().ok());
}

TEST_CASE("scale applies factor to the tasks a pattern matches, instead of their class's", "[scale]") {
  Fixture f;
  PassContext context;
  CHECK(ScaleOk({{"pattern", "^(volta_sgemm|Memset)"}, {"factor", "0.1"}, {"gpu", "0.5"}, {"copy", "3"}}, f.g,
                &context));
  CHECK(f.Duration(f.kernel) == 100);
  CHECK(f.Duration(f.memset) == 4);
  CHECK(f.Duration(f.memcpy) == 1200);  // not matched: its class's factor
  CHECK(f.Duration(f.op) == 200);
  REQUIRE(context.notes.size() == 1);
  CHECK_THAT(context.notes[0], Catch::Contains("3 task durations scaled"));
}

TEST_CASE("scale with a phase scales only that phase's tasks", "[scale]") {
  Fixture f;
  f.g.tasks[static_cast<size_t>(f.op)].phase = Phase::kOptimizer;
  f.g.tasks[static_cast<size_t>(f.launch)].phase = Phase::kBackward;
  CHECK(ScaleOk({{"cpu", "0.5"}, {"phase", "optimizer"}}, f.g));
  CHECK(f.Duration(f.op) == 100);
  CHECK(f.Gap(f.op) == 3);
  CHECK(f.Duration(f.launch) == 100);  // backward
  CHECK(f.Gap(f.launch) == 4);
  CHECK(f.Duration(f.sync) == 10);  // no phase
  const absl::StatusOr<bool> r = RunScale({{"cpu", "0.5"}, {"phase", "warmup"}}, f.g);
  REQUIRE_FALSE(r.ok());
  CHECK(std::string(r.status().message()) ==
        "scale: unknown phase 'warmup' (unspecified, forward, backward, optimizer, data, comm, other)");
}

TEST_CASE("scale refuses a factor without a pattern, a pattern that matches nothing and bad values", "[scale]") {
  Fixture f;
  const Graph before = f.g;
  SECTION("factor without pattern") {
    absl::StatusOr<bool> r = RunScale({{"factor", "0.5"}}, f.g);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("pattern"));
  }
  SECTION("a pattern matching nothing") {
    absl::StatusOr<bool> r = RunScale({{"pattern", "flash_attn"}, {"factor", "0.5"}}, f.g);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("flash_attn"));
  }
  SECTION("a malformed pattern") {
    absl::StatusOr<bool> r = RunScale({{"pattern", "volta_(sgemm"}, {"factor", "0.5"}}, f.g);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("a negative factor") {
    for (const char* option : {"gpu", "cpu", "comm", "copy"}) {
      INFO(option);
      absl::StatusOr<bool> r = RunScale({{option, "-0.5"}}, f.g);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(r.status().message()), Catch::Contains(option));
    }
    absl::StatusOr<bool> r = RunScale({{"pattern", "sgemm"}, {"factor", "-1"}}, f.g);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("factor"));
  }
  // Nothing was touched.
  for (size_t t = 0; t < f.g.tasks.size(); ++t) CHECK(f.g.tasks[t].duration_ns == before.tasks[t].duration_ns);
}

TEST_CASE("smaller gpu and cpu factors never make a chain graph slower", "[scale]") {
  // A CPU thread launching kernels that the CPU then waits for, with work on
  // both sides, in several shapes: CPU-bound, GPU-bound, mixed.
  const std::vector<std::pair<TimeNs, TimeNs>> shapes = {{100, 10}, {10, 100}, {50, 50}, {5, 300}};
  for (const auto& [cpu_ns, gpu_ns] : shapes) {
    Graph g;
    const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
    const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
    int32_t prev_cpu = -1, prev_gpu = -1;
    for (int i = 0; i < 12; ++i) {
      Task call;
      call.name = g.strings.Intern("cudaLaunchKernel");
      call.kind = TaskKind::kRuntime;
      call.resource = cpu;
      call.duration_ns = cpu_ns + 3 * i;
      call.gap_ns = 7;
      const int32_t c = g.AddTask(call);
      Task kernel;
      kernel.name = g.strings.Intern("kernel" + std::to_string(i));
      kernel.kind = TaskKind::kKernel;
      kernel.resource = gpu;
      kernel.duration_ns = gpu_ns * (1 + i % 3);
      kernel.gap_ns = 1;
      const int32_t k = g.AddTask(kernel);
      if (prev_cpu >= 0) g.AddEdge(prev_cpu, c, EdgeKind::kSequential);
      if (prev_gpu >= 0) g.AddEdge(prev_gpu, k, EdgeKind::kSequential);
      g.AddEdge(c, k, EdgeKind::kLaunch, 4);
      prev_cpu = c;
      prev_gpu = k;
      if (i % 4 == 3) {  // the CPU waits for the GPU now and then
        Task sync;
        sync.name = g.strings.Intern("cudaStreamSynchronize");
        sync.kind = TaskKind::kSync;
        sync.resource = cpu;
        sync.duration_ns = 2;
        const int32_t s = g.AddTask(sync);
        g.AddEdge(prev_cpu, s, EdgeKind::kSequential);
        g.AddEdge(k, s, EdgeKind::kSync, 3);
        prev_cpu = s;
      }
    }
    g.BuildAdjacency();
    REQUIRE(g.Validate().ok());
    for (const char* option : {"gpu", "cpu"}) {
      INFO("cpu " << cpu_ns << " ns, gpu " << gpu_ns << " ns, scaling " << option);
      TimeNs previous = Makespan(g);
      for (const char* factor : {"0.9", "0.75", "0.5", "0.3", "0.1", "0"}) {
        INFO("factor " << factor);
        Graph scaled = g;
        ScaleOk({{option, factor}}, scaled);
        const TimeNs now = Makespan(scaled);
        CHECK(now <= previous);
        previous = now;
      }
    }
  }
}
