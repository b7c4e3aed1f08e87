// Tests of the p3 pass: slicing all-reduces and costing the slices, priorities
// by the next forward's order, per-layer consumers, the threshold where the
// messages stay as they were, its errors, and real traces after
// data_parallel / tensor_fusion.
#include "daydream/passes/p3.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/cost/collectives.h"
#include "daydream/graph/builder.h"
#include "daydream/passes/comm.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::MedianStep;
using daydream::testing::HasEdge;
using daydream::testing::SharedTracePath;

namespace {

constexpr int64_t kMiB = 1024 * 1024;

// A CPU-only data-parallel training graph written by hand: two iterations of
// three layers (forward f0 f1 f2 of 3 ms, backward b2 b1 b0 of 0.2 ms, each
// producing its layer's gradient, then a 50 us optimizer step), and one
// all-reduce per gradient on a network channel as data_parallel inserts them
// (data edges from the producer and to the optimizer, a sequential chain),
// costing 100 us + 1 ns per byte.
struct DataParallelGraph {
  Graph g;
  int32_t cpu = -1, net = -1;
  std::vector<std::vector<int32_t>> forward;     // [iteration][layer], before any pass
  std::vector<int32_t> optimizer;                // [iteration], before any pass
  std::vector<std::vector<int32_t>> all_reduce;  // [iteration][k] in ready order, before any pass
  std::vector<int32_t> gradient;               // [layer]

  DataParallelGraph(const std::vector<int64_t>& layer_bytes, bool with_layers = true, bool with_all_reduces = true) {
    cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
    net = g.AddResource(Resource{ResourceKind::kCommChannel, -1, 2, g.strings.Intern("network")});
    const int layers = static_cast<int>(layer_bytes.size());
    for (int l = 0; l < layers; ++l) g.AddLayer(Layer{g.strings.Intern(std::to_string(l)), -1});
    for (int l = 0; l < layers; ++l) {
      Tensor t;
      t.name = g.strings.Intern("layer" + std::to_string(l) + ".weight");
      t.bytes = layer_bytes[static_cast<size_t>(l)];
      t.role = TensorRole::kGradient;
      t.layer = with_layers ? l : -1;
      t.producers = {-1, -1};
      gradient.push_back(g.AddTensor(t));
    }
    TimeNs clock = 0;
    int32_t last = -1;
    auto add_cpu = [&](const std::string& name, Phase phase, TimeNs duration, int32_t layer, int32_t it) {
      Task t;
      t.name = g.strings.Intern(name);
      t.kind = TaskKind::kCpuOp;
      t.phase = phase;
      t.resource = cpu;
      t.duration_ns = duration;
      t.layer = layer;
      t.iteration = it;
      t.recorded_start_ns = clock;
      clock += duration;
      const int32_t id = g.AddTask(t);
      if (last >= 0) g.AddEdge(last, id, EdgeKind::kSequential);
      last = id;
      return id;
    };
    int32_t last_net = -1;
    for (int32_t it = 0; it < 2; ++it) {
      const TimeNs begin = clock;
      forward.emplace_back();
      all_reduce.emplace_back();
      for (int l = 0; l < layers; ++l) {
        forward.back().push_back(add_cpu("forward" + std::to_string(l), Phase::kForward, 3'000'000, l, it));
      }
      std::vector<int32_t> producers;
      for (int l = layers - 1; l >= 0; --l) {
        const int32_t b = add_cpu("backward" + std::to_string(l), Phase::kBackward, 200'000, l, it);
        g.tensors[static_cast<size_t>(gradient[static_cast<size_t>(l)])].producers[static_cast<size_t>(it)] = b;
        if (it == 0) g.tensors[static_cast<size_t>(gradient[static_cast<size_t>(l)])].producer = b;
        producers.push_back(b);
      }
      optimizer.push_back(add_cpu("optimizer", Phase::kOptimizer, 50'000, -1, it));
      for (size_t k = 0; k < producers.size() && with_all_reduces; ++k) {
        const int l = layers - 1 - static_cast<int>(k);
        const int64_t bytes = layer_bytes[static_cast<size_t>(l)];
        Task ar;
        ar.name = g.strings.Intern("all_reduce bucket " + std::to_string(k));
        ar.kind = TaskKind::kCollective;
        ar.phase = Phase::kComm;
        ar.resource = net;
        ar.iteration = it;
        ar.bytes = bytes;
        ar.duration_ns = 100'000 + bytes;
        ar.recorded_start_ns = g.tasks[static_cast<size_t>(producers[k])].recorded_start_ns;
        const int32_t id = g.AddTask(ar);
        g.AddEdge(producers[k], id, EdgeKind::kData);
        g.AddEdge(id, optimizer.back(), EdgeKind::kData);
        if (last_net >= 0) g.AddEdge(last_net, id, EdgeKind::kSequential);
        last_net = id;
        all_reduce.back().push_back(id);
      }
      Iteration iteration;
      iteration.name = g.strings.Intern("ProfilerStep#" + std::to_string(it));
      iteration.begin_task = forward.back().front();
      iteration.end_task = optimizer.back();
      iteration.recorded_begin_ns = begin;
      iteration.measured_ns = clock - begin;
      g.iterations.push_back(iteration);
    }
    const absl::Status valid = g.Validate();
    INFO(valid.message());
    REQUIRE(valid.ok());
    g.BuildAdjacency();
  }
};

absl::StatusOr<bool> RunPass(const PassInfo& info, Graph& g, PassContext& context, const OptionMap& options = {}) {
  absl::StatusOr<PassOptions> parsed = PassOptions::Parse(info.name, info.options, options);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::unique_ptr<Pass>> pass = info.create(*parsed);
  if (!pass.ok()) return pass.status();
  return (*pass)->Run(g, context);
}

void RunOk(const PassInfo& info, Graph& g, PassContext& context, const OptionMap& options = {}) {
  absl::StatusOr<bool> changed = RunPass(info, g, context, options);
  INFO(info.name << ": " << (changed.ok() ? std::string("ok") : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  REQUIRE(*changed);
}

void RunP3(Graph& g, const OptionMap& options = {}) {
  PassContext context;
  RunOk(P3PassInfo(), g, context, options);
}

std::string P3Error(Graph& g, const OptionMap& options = {}) {
  PassContext context;
  absl::StatusOr<bool> r = RunPass(P3PassInfo(), g, context, options);
  REQUIRE_FALSE(r.ok());
  return std::string(r.status().message());
}

// Collective tasks on communication channels, in id order.
std::vector<int32_t> NetworkTasks(const Graph& g) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.kind == TaskKind::kCollective && g.resources[static_cast<size_t>(t.resource)].kind == ResourceKind::kCommChannel) {
      out.push_back(static_cast<int32_t>(i));
    }
  }
  return out;
}

std::vector<int32_t> NetworkTasksOf(const Graph& g, int32_t iteration) {
  std::vector<int32_t> out;
  for (int32_t t : NetworkTasks(g)) {
    if (g.tasks[static_cast<size_t>(t)].iteration == iteration) out.push_back(t);
  }
  return out;
}

// The slices whose data edge comes from `producer`.
std::vector<int32_t> SlicesFrom(const Graph& g, int32_t producer) {
  std::vector<int32_t> out;
  for (int32_t t : NetworkTasks(g)) {
    if (HasEdge(g, producer, t, EdgeKind::kData)) out.push_back(t);
  }
  return out;
}

Schedule Run(const Graph& g) {
  absl::StatusOr<Schedule> s = Simulate(g);
  INFO((s.ok() ? std::string("ok") : std::string(s.status().message())));
  REQUIRE(s.ok());
  return std::move(s).value();
}

// The task named `name` of `iteration` (ids change when a pass commits).
int32_t TaskOf(const Graph& g, const std::string& name, int32_t iteration) {
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.tasks[i].iteration == iteration && g.TaskName(static_cast<int32_t>(i)) == name) return static_cast<int32_t>(i);
  }
  INFO("no task " << name << " in iteration " << iteration);
  REQUIRE(false);
  return -1;
}

int32_t Forward(const Graph& g, int layer, int32_t iteration) {
  return TaskOf(g, "forward" + std::to_string(layer), iteration);
}

int32_t Optimizer(const Graph& g, int32_t iteration) { return TaskOf(g, "optimizer", iteration); }

int32_t Producer(const DataParallelGraph& d, int layer, int iteration) {
  return d.g.tensors[static_cast<size_t>(d.gradient[static_cast<size_t>(layer)])].producers[static_cast<size_t>(iteration)];
}

}  // namespace

TEST_CASE("p3 slices each all-reduce into slice_mb pieces costed by the fitted network", "[p3]") {
  DataParallelGraph d({3 * kMiB, kMiB, kMiB / 2});
  RunP3(d.g, {{"slice_mb", "1"}});
  CHECK(NetworkTasks(d.g).size() == 2 * (3 + 1 + 1));
  for (int32_t it = 0; it < 2; ++it) {
    const std::vector<int32_t> layer0 = SlicesFrom(d.g, Producer(d, 0, it));
    REQUIRE(layer0.size() == 3);
    for (int32_t s : layer0) {
      CHECK(d.g.tasks[static_cast<size_t>(s)].bytes == kMiB);
      CHECK(d.g.tasks[static_cast<size_t>(s)].duration_ns == 100'000 + kMiB);  // the line through 100 us + 1 ns/byte
    }
    const std::vector<int32_t> layer2 = SlicesFrom(d.g, Producer(d, 2, it));
    REQUIRE(layer2.size() == 1);
    CHECK(d.g.tasks[static_cast<size_t>(layer2[0])].duration_ns == 100'000 + kMiB / 2);
  }
  CHECK(d.g.TaskName(SlicesFrom(d.g, Producer(d, 0, 0))[0]) == "p3 slice 1/3 of all_reduce bucket 2");
}

TEST_CASE("p3 gives front layers' slices the highest priority and drops the network's sequential order", "[p3]") {
  DataParallelGraph d({3 * kMiB, kMiB, kMiB / 2});
  RunP3(d.g, {{"slice_mb", "1"}});
  for (int32_t it = 0; it < 2; ++it) {
    const int32_t p0 = d.g.tasks[static_cast<size_t>(SlicesFrom(d.g, Producer(d, 0, it))[0])].priority;
    const int32_t p1 = d.g.tasks[static_cast<size_t>(SlicesFrom(d.g, Producer(d, 1, it))[0])].priority;
    const int32_t p2 = d.g.tasks[static_cast<size_t>(SlicesFrom(d.g, Producer(d, 2, it))[0])].priority;
    CHECK(p0 > p1);
    CHECK(p1 > p2);
  }
  for (const Edge& e : d.g.edges) {
    const bool on_network = d.g.tasks[static_cast<size_t>(e.to)].resource == d.net;
    CHECK_FALSE((on_network && e.kind == EdgeKind::kSequential));
  }
}

TEST_CASE("p3 feeds each layer's slices to that layer's first forward task of the next iteration", "[p3]") {
  DataParallelGraph d({3 * kMiB, kMiB, kMiB / 2});
  RunP3(d.g, {{"slice_mb", "1"}});
  for (int layer = 0; layer < 3; ++layer) {
    for (int32_t s : SlicesFrom(d.g, Producer(d, layer, 0))) {
      CHECK(HasEdge(d.g, s, Forward(d.g, layer, 1), EdgeKind::kData));
      CHECK_FALSE(HasEdge(d.g, s, Optimizer(d.g, 0), EdgeKind::kData));
    }
    // The last iteration has no next forward: its slices still feed its optimizer step.
    for (int32_t s : SlicesFrom(d.g, Producer(d, layer, 1))) CHECK(HasEdge(d.g, s, Optimizer(d.g, 1), EdgeKind::kData));
  }
}

TEST_CASE("p3 maps gradients to forward tasks by backward order when layers are unknown", "[p3]") {
  DataParallelGraph d({3 * kMiB, kMiB, kMiB / 2}, /*with_layers=*/false);
  PassContext context;
  RunOk(P3PassInfo(), d.g, context, {{"slice_mb", "1"}});
  // Produced last in backward (layer 0) -> first forward task; produced first -> the last.
  for (int layer = 0; layer < 3; ++layer) {
    for (int32_t s : SlicesFrom(d.g, Producer(d, layer, 0))) {
      CHECK(HasEdge(d.g, s, Forward(d.g, layer, 1), EdgeKind::kData));
    }
  }
  REQUIRE(context.notes.size() == 1);
  CHECK(context.notes[0].find("0 gradients feed their layer's first forward task of the next iteration, 3 a "
                              "forward task found by backward order") != std::string::npos);
}

TEST_CASE("p3 sends the front layer ahead of a large queued gradient and shortens the step", "[p3]") {
  // Layer 2's 8 MB gradient is ready first; layers 1 and 0 (1 MB each) come
  // while it is on the wire.
  DataParallelGraph d({kMiB, kMiB, 8 * kMiB});
  const Graph baseline = d.g;
  const Schedule before = Run(baseline);
  RunP3(d.g, {{"slice_mb", "1"}});
  const Schedule after = Run(d.g);
  const int32_t f0_before = Forward(baseline, 0, 1), f0_after = Forward(d.g, 0, 1);
  // Without p3, forward of iteration 1 waits for every all-reduce and the step.
  CHECK(before.start_ns[static_cast<size_t>(f0_before)] >= before.end_ns[static_cast<size_t>(d.all_reduce[0].back())]);
  // With it, layer 0 is sent after one slice of layer 2 and forward starts ~8 ms earlier.
  CHECK(after.start_ns[static_cast<size_t>(f0_after)] + 7'000'000 < before.start_ns[static_cast<size_t>(f0_before)]);
  CHECK(after.makespan_ns < before.makespan_ns);
  CHECK(MedianStep(d.g) < MedianStep(baseline));
}

TEST_CASE("p3 keeps every message when slice_mb is at least the largest all-reduce, and is not slower", "[p3]") {
  const std::vector<int64_t> sizes = {kMiB, kMiB, 8 * kMiB};
  SECTION("slice_mb = the largest all-reduce: one slice each") {
    DataParallelGraph d(sizes);
    const Graph baseline = d.g;
    RunP3(d.g, {{"slice_mb", "8"}});
    const std::vector<int32_t> slices = NetworkTasks(d.g);
    REQUIRE(slices.size() == 6);
    int64_t bytes = 0;
    for (int32_t s : slices) bytes += d.g.tasks[static_cast<size_t>(s)].bytes;
    CHECK(bytes == 2 * 10 * kMiB);
    for (int32_t s : NetworkTasks(baseline)) {
      const Task& original = baseline.tasks[static_cast<size_t>(s)];
      const auto same = std::count_if(slices.begin(), slices.end(), [&](int32_t t) {
        return d.g.tasks[static_cast<size_t>(t)].bytes == original.bytes &&
               d.g.tasks[static_cast<size_t>(t)].duration_ns == original.duration_ns;
      });
      CHECK(same >= 1);
    }
    CHECK(Run(d.g).makespan_ns <= Run(baseline).makespan_ns);
    CHECK(MedianStep(d.g) <= MedianStep(baseline));
  }
  SECTION("just below it: the largest is cut in two") {
    DataParallelGraph d(sizes);
    RunP3(d.g, {{"slice_mb", "7.99"}});
    CHECK(NetworkTasksOf(d.g, 0).size() == 4);
    CHECK(SlicesFrom(d.g, Producer(d, 2, 0)).size() == 2);
  }
}

TEST_CASE("p3 costs slices with a network preset when asked", "[p3]") {
  DataParallelGraph d({3 * kMiB, kMiB, kMiB / 2});
  RunP3(d.g, {{"slice_mb", "1"}, {"network", "ib100"}, {"world_size", "8"}});
  const NetworkModel ib = *NetworkPreset("ib100");
  for (int32_t s : NetworkTasks(d.g)) {
    const Task& t = d.g.tasks[static_cast<size_t>(s)];
    CHECK(t.duration_ns == CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, t.bytes, 8, ib));
  }
}

TEST_CASE("p3 says why it cannot apply and leaves the graph unchanged", "[p3]") {
  SECTION("slice_mb = 0") {
    DataParallelGraph d({kMiB, kMiB});
    CHECK(P3Error(d.g, {{"slice_mb", "0"}}) ==
          "p3: slice_mb must be > 0 (got 0): it is the size of the pieces gradients are sent in");
  }
  SECTION("no communication") {
    DataParallelGraph d({kMiB, kMiB}, /*with_layers=*/true, /*with_all_reduces=*/false);
    const size_t tasks = d.g.tasks.size(), edges = d.g.edges.size();
    CHECK(P3Error(d.g) ==
          "p3: the graph has no gradient communication to schedule: run data_parallel first (single-device graph), "
          "or tensor_fusion");
    CHECK(d.g.tasks.size() == tasks);
    CHECK(d.g.edges.size() == edges);
  }
  SECTION("recorded all-reduces") {
    DataParallelGraph d({kMiB, kMiB}, /*with_layers=*/true, /*with_all_reduces=*/false);
    const int32_t stream = d.g.AddResource(Resource{ResourceKind::kGpuStream, 0, 20, d.g.strings.Intern("stream 20")});
    Task nccl;
    nccl.name = d.g.strings.Intern("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)");
    nccl.kind = TaskKind::kCollective;
    nccl.phase = Phase::kComm;
    nccl.resource = stream;
    nccl.iteration = 0;
    nccl.duration_ns = 1000;
    d.g.AddTask(nccl);
    d.g.BuildAdjacency();
    CHECK(P3Error(d.g) ==
          "p3: the graph's 1 gradient all-reduces were recorded (NCCL/gloo): run tensor_fusion first, which replaces "
          "them by modeled buckets (network fitted to the recorded ones) that p3 can slice");
  }
  SECTION("no gradient tensors") {
    DataParallelGraph d({kMiB, 2 * kMiB});
    d.g.tensors.clear();
    CHECK(P3Error(d.g).find("p3: the graph has no gradient tensors") == 0);
  }
  SECTION("one all-reduce size: the network cannot be fitted") {
    DataParallelGraph d({kMiB, kMiB});
    CHECK(P3Error(d.g) ==
          "p3: cannot reconstruct the network's latency and bandwidth from the all-reduces: all 4 carry 1048576 "
          "bytes; pass network=<preset> (nvlink, pcie, ib100, ethernet10) and world_size=N");
  }
  SECTION("a preset without the number of ranks") {
    DataParallelGraph d({kMiB, 2 * kMiB});
    CHECK(P3Error(d.g, {{"network", "ib100"}}) ==
          "p3: network=ib100 needs the number of ranks: pass world_size=N (N >= 2)");
  }
  SECTION("bandwidth without a preset") {
    DataParallelGraph d({kMiB, 2 * kMiB});
    CHECK(P3Error(d.g, {{"bandwidth_gbps", "10"}}).find("p3: bandwidth_gbps and latency_us refine a network "
                                                        "preset") == 0);
  }
}

namespace {

Graph V100Graph() {
  static const Graph* const kGraph = [] {
    absl::StatusOr<Trace> trace =
        ReadTraceFile(SharedTracePath("hta-v100-1rank/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"));
    REQUIRE(trace.ok());
    absl::StatusOr<Graph> graph = BuildGraph(*trace);
    REQUIRE(graph.ok());
    return new Graph(std::move(graph).value());
  }();
  return *kGraph;
}

int64_t LargestGradient(const Graph& g) {
  int64_t largest = 0;
  for (const Tensor& t : g.tensors) {
    if (t.role == TensorRole::kGradient) largest = std::max(largest, t.bytes);
  }
  return largest;
}

}  // namespace

TEST_CASE("p3 after data_parallel on the V100 trace shortens a communication-bound step", "[p3][real]") {
  Graph g = V100Graph();
  PassContext context;
  RunOk(DataParallelPassInfo(), g, context, {{"network", "ethernet10"}});
  const Graph data_parallel = g;
  const size_t all_reduces = NetworkTasks(g).size();
  RunP3(g);  // 4 MB slices
  CHECK(NetworkTasks(g).size() > all_reduces);
  const TimeNs before = MedianStep(data_parallel);
  const TimeNs after = MedianStep(g);
  CHECK(after < before);
  CHECK(after >= MedianStep(V100Graph()));  // communication still costs something
}

TEST_CASE("p3 on the V100 trace with slice_mb at the largest gradient is never slower", "[p3][real]") {
  // One all-reduce per gradient (bucket_mb=0): P3 as published; with slices
  // as large as the largest gradient no message changes.
  const Graph v100 = V100Graph();
  // The largest gradient in MB, rounded up to the 6 decimals the option text carries.
  char largest_mb[32];
  std::snprintf(largest_mb, sizeof(largest_mb), "%.6f",
                std::ceil(static_cast<double>(LargestGradient(v100)) / static_cast<double>(kMiB) * 1e6) / 1e6);
  for (const char* network : {"nvlink", "ib100", "ethernet10"}) {
    INFO(network);
    Graph g = v100;
    PassContext context;
    RunOk(DataParallelPassInfo(), g, context, {{"network", network}, {"bucket_mb", "0"}});
    const Graph data_parallel = g;
    RunP3(g, {{"slice_mb", largest_mb}});
    CHECK(NetworkTasks(g).size() == NetworkTasks(data_parallel).size());
    CHECK(MedianStep(g) <= MedianStep(data_parallel));
  }
}

TEST_CASE("p3 needs tensor_fusion first on a recorded data-parallel trace, then applies", "[p3][real]") {
  absl::StatusOr<Trace> trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
  REQUIRE(trace.ok());
  absl::StatusOr<Graph> built = BuildGraph(*trace);
  REQUIRE(built.ok());
  Graph g = *built;
  CHECK(P3Error(g).find("p3: the graph's 15 gradient all-reduces were recorded (NCCL/gloo): run tensor_fusion "
                        "first") == 0);
  PassContext context;
  RunOk(TensorFusionPassInfo(), g, context);
  const Graph fused = g;
  // DDP's buckets close once they reach 25 MB, so one can be larger: slices
  // as large as the largest bucket leave every bucket whole.
  int64_t largest = 0;
  for (int32_t t : NetworkTasks(fused)) largest = std::max(largest, fused.tasks[static_cast<size_t>(t)].bytes);
  REQUIRE(largest > 0);
  RunP3(g, {{"slice_mb", std::to_string(largest / (1 << 20) + 1)}});
  CHECK(NetworkTasks(g).size() == NetworkTasks(fused).size());
  CHECK(MedianStep(g) <= MedianStep(fused));
}
