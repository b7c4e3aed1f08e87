// Tests for daydream/passes/comm.h: gradient bucketing, data_parallel and
// tensor_fusion on hand-made training graphs (whose every number is known),
// and the two passes on real traces.
#include "daydream/passes/comm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/analysis/predict.h"
#include "daydream/base/strings.h"
#include "daydream/graph/builder.h"
#include "daydream/passes/editor.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::HasEdge;
using daydream::testing::SharedTracePath;

namespace {

constexpr int64_t kMiB = 1024 * 1024;
constexpr TimeNs kUs = 1000;

struct TrainingGraphOptions {
  int iterations = 2;
  std::vector<int64_t> grad_bytes = {2 * kMiB, 3 * kMiB, 1 * kMiB};
  bool gpu_optimizer = true;
  bool cpu_optimizer = true;
  bool gpu = true;  // false: every task on CPU threads
  // optimizer.zero_grad() before forward, zeroing gradients on the GPU (a
  // kernel in an "Optimizer.zero_grad#SGD.zero_grad" range: phase optimizer).
  bool zero_grad_first = false;
  // > 0: the trace was data-parallel among this many ranks, and recorded one
  // NCCL all-reduce per gradient on its own stream, timed by `recorded_net`.
  int recorded_world = 0;
  NetworkModel recorded_net;
  // With recorded_world: after producing each gradient, its thread issues
  // the all-reduce (a 20 us "c10d::allreduce_" op, phase comm), as DDP on gloo.
  bool issue_calls = false;
  // With recorded_world: after backward, DDP's finalize on the thread that
  // ran it (a 10 us "copy_bucket_to_grad" op, phase other), which waited for
  // the last recorded all-reduce (a thread edge, as the builder links a wait
  // across threads).
  bool finalize = false;
  // With finalize: no edge; the finalize's 5 ms gap holds the wait instead
  // (a wake-up later than the builder links across threads).
  bool finalize_gap_wait = false;
  // The CPU optimizer call's gap (framework time before it on its thread).
  TimeNs cpu_opt_gap = 1000;
};

// One rank's training loop, built by hand. Per iteration, in id order:
//   cpu:  step_begin, optimizer.step (phase optimizer, if cpu_optimizer)
//   gpu:  fwd, bwd0..bwdN-1 (each producing gradient i), opt (if gpu_optimizer)
//   nccl: one ncclKernel_AllReduce per gradient (if recorded_world > 0)
//   cpu:  step_end, which synchronizes with the stream.
// Gradient tensors are added in reverse order of production (as autograd
// produces the last layer's first), so tensor ids do not give ready order.
// Recorded times are those of the graph's own replay, so measured == replayed.
struct TrainingGraph {
  Graph g;
  int32_t cpu = -1, gpu = -1, nccl = -1;
  std::vector<std::vector<int32_t>> producers;  // [iteration][gradient]: producing task
  std::vector<int32_t> gpu_opt, cpu_opt, step_end, finalize;
  std::vector<int32_t> tensor_of;               // [gradient] -> tensor id

  explicit TrainingGraph(const TrainingGraphOptions& o = {}) {
    cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1 (main)")});
    const ResourceKind device_kind = o.gpu ? ResourceKind::kGpuStream : ResourceKind::kCpuThread;
    gpu = g.AddResource(Resource{device_kind, o.gpu ? 0 : 1, 7, g.strings.Intern("stream 7")});
    if (o.recorded_world > 0) {
      // On CPU ranks, gloo's worker thread runs them.
      nccl = o.gpu ? g.AddResource(Resource{ResourceKind::kGpuStream, 0, 20, g.strings.Intern("stream 20 (nccl)")})
                   : g.AddResource(Resource{ResourceKind::kCpuThread, 1, 9, g.strings.Intern("thread 9 (gloo)")});
    }
    g.world_size = o.recorded_world > 0 ? o.recorded_world : 1;
    g.rank = 0;
    const size_t n = o.grad_bytes.size();
    std::vector<int32_t> last(g.resources.size(), -1);
    auto add = [&](const std::string& name, int32_t resource, TaskKind kind, Phase phase, TimeNs duration,
                   int32_t iteration, TimeNs gap = 0) {
      Task t;
      t.name = g.strings.Intern(name);
      t.resource = resource;
      t.kind = o.gpu || kind != TaskKind::kKernel ? kind : TaskKind::kCpuOp;
      t.phase = phase;
      t.duration_ns = duration;
      t.gap_ns = gap;
      t.iteration = iteration;
      t.trace_event = static_cast<int64_t>(g.tasks.size());
      const int32_t id = g.AddTask(t);
      if (last[static_cast<size_t>(resource)] >= 0) g.AddEdge(last[static_cast<size_t>(resource)], id, EdgeKind::kSequential);
      last[static_cast<size_t>(resource)] = id;
      return id;
    };
    for (int it = 0; it < o.iterations; ++it) {
      const std::string suffix = "#" + std::to_string(it);
      Iteration iter;
      iter.name = g.strings.Intern("ProfilerStep" + suffix);
      const int32_t begin = add("step_begin" + suffix, cpu, TaskKind::kCpuOp, Phase::kForward, 10 * kUs, it, 2 * kUs);
      if (o.zero_grad_first) add("zero_grad" + suffix, gpu, TaskKind::kKernel, Phase::kOptimizer, 20 * kUs, it);
      const int32_t fwd = add("fwd" + suffix, gpu, TaskKind::kKernel, Phase::kForward, 100 * kUs, it);
      g.AddEdge(begin, fwd, EdgeKind::kLaunch, 5 * kUs);
      producers.emplace_back();
      for (size_t j = 0; j < n; ++j) {
        producers.back().push_back(add("bwd" + std::to_string(j) + suffix, gpu, TaskKind::kKernel, Phase::kBackward,
                                       50 * kUs, it, kUs));
        if (o.recorded_world > 0 && o.issue_calls) {
          add("c10d::allreduce_", gpu, TaskKind::kCpuOp, Phase::kComm, 20 * kUs, it, 2 * kUs);
        }
      }
      int32_t fin = -1;
      if (o.recorded_world > 0 && o.finalize) {
        fin = add("copy_bucket_to_grad" + suffix, gpu, TaskKind::kCpuOp, Phase::kOther, 10 * kUs, it,
                  o.finalize_gap_wait ? 5000 * kUs : kUs);
      }
      finalize.push_back(fin);
      // Created after backward, as the builder orders tasks by recorded start.
      int32_t opt_call = -1;
      if (o.cpu_optimizer) {
        opt_call = add("optimizer.step" + suffix, cpu, TaskKind::kCpuOp, Phase::kOptimizer, 5 * kUs, it,
                       o.cpu_opt_gap);
      }
      cpu_opt.push_back(opt_call);
      int32_t opt = -1;
      if (o.gpu_optimizer) {
        opt = add("opt" + suffix, gpu, TaskKind::kKernel, Phase::kOptimizer, 30 * kUs, it, kUs);
        if (opt_call >= 0) g.AddEdge(opt_call, opt, EdgeKind::kLaunch, 5 * kUs);
      }
      gpu_opt.push_back(opt);
      if (o.recorded_world > 0) {
        for (size_t j = 0; j < n; ++j) {
          const int32_t ar = add("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", nccl,
                                 TaskKind::kCollective, Phase::kComm,
                                 CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, o.grad_bytes[j],
                                                o.recorded_world, o.recorded_net),
                                 it);
          g.tasks[static_cast<size_t>(ar)].bytes = o.grad_bytes[j];
          g.AddEdge(producers.back()[j], ar, EdgeKind::kStreamWait);
          if (opt >= 0) g.AddEdge(ar, opt, EdgeKind::kStreamWait);
          if (fin >= 0 && j + 1 == n && !o.finalize_gap_wait) g.AddEdge(ar, fin, EdgeKind::kThread);
        }
      }
      const int32_t end = add("step_end" + suffix, cpu, TaskKind::kSync, Phase::kOther, 3 * kUs, it, kUs);
      g.AddEdge(last[static_cast<size_t>(gpu)], end, EdgeKind::kSync, 2 * kUs);
      if (nccl >= 0) g.AddEdge(last[static_cast<size_t>(nccl)], end, EdgeKind::kSync, 2 * kUs);
      step_end.push_back(end);
      iter.begin_task = begin;
      iter.end_task = end;
      g.iterations.push_back(iter);
    }
    if (o.recorded_world > 0) {
      // A parameter broadcast at the start: not a gradient all-reduce.
      Task t;
      t.name = g.strings.Intern("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)");
      t.resource = nccl;
      t.kind = TaskKind::kCollective;
      t.phase = Phase::kComm;
      t.bytes = 8 * kMiB;
      t.iteration = -1;
      t.trace_event = static_cast<int64_t>(g.tasks.size());
      t.duration_ns =
          CollectiveTime(Collective::kBroadcast, CollectiveAlgorithm::kRing, t.bytes, o.recorded_world, o.recorded_net);
      const int32_t b = g.AddTask(t);
      // First on the nccl stream.
      int32_t first_nccl = -1;
      for (size_t i = 0; i < g.tasks.size(); ++i) {
        if (g.tasks[i].resource == nccl && static_cast<int32_t>(i) != b) {
          first_nccl = static_cast<int32_t>(i);
          break;
        }
      }
      g.AddEdge(b, first_nccl, EdgeKind::kSequential);
    }
    for (size_t k = n; k-- > 0;) {
      Tensor t;
      t.name = g.strings.Intern("grad" + std::to_string(k));
      t.dtype = g.strings.Intern("float");
      t.bytes = o.grad_bytes[k];
      t.role = TensorRole::kGradient;
      for (int it = 0; it < o.iterations; ++it) t.producers.push_back(producers[static_cast<size_t>(it)][k]);
      t.producer = t.producers.front();
      tensor_of.insert(tensor_of.begin(), g.AddTensor(t));
    }
    Tensor weight;
    weight.name = g.strings.Intern("fc.weight");
    weight.dtype = g.strings.Intern("float");
    weight.bytes = 64 * kMiB;
    weight.role = TensorRole::kWeight;
    g.AddTensor(weight);
    g.BuildAdjacency();
    REQUIRE(g.Validate().ok());
    // Recorded times: the graph's own replay.
    absl::StatusOr<Schedule> s = Simulate(g);
    REQUIRE(s.ok());
    for (size_t t = 0; t < g.tasks.size(); ++t) g.tasks[t].recorded_start_ns = s->start_ns[t];
    for (Iteration& it : g.iterations) {
      it.recorded_begin_ns = s->start_ns[static_cast<size_t>(it.begin_task)];
      it.measured_ns = s->end_ns[static_cast<size_t>(it.end_task)] - it.recorded_begin_ns;
    }
    g.recorded_end_ns = s->makespan_ns;
  }

  std::vector<int32_t> Gradients() const {
    std::vector<int32_t> out;
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      if (g.tensors[t].role == TensorRole::kGradient) out.push_back(static_cast<int32_t>(t));
    }
    return out;
  }
};

// A graph of CPU ranks (gloo): backward and the optimizer on a CPU thread,
// three 4 kB gradients (latency-bound all-reduces, about as long as a
// backward task).
TrainingGraphOptions CpuRanks() {
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  o.grad_bytes = {4096, 4096, 4096};
  return o;
}

// The simulated makespan of `g`; REQUIREs the simulation to succeed.
TimeNs Makespan(const Graph& g) {
  absl::StatusOr<Schedule> s = Simulate(g);
  REQUIRE(s.ok());
  return s->makespan_ns;
}

// Runs pass `name` with `options` on `g`; REQUIREs it to succeed.
bool RunOk(const std::string& name, const OptionMap& options, Graph& g, PassContext* context = nullptr) {
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(name, options);
  INFO((pass.ok() ? std::string() : std::string(pass.status().message())));
  REQUIRE(pass.ok());
  PassContext local;
  absl::StatusOr<bool> changed = (*pass)->Run(g, context != nullptr ? *context : local);
  INFO((changed.ok() ? std::string() : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  return *changed;
}

// The error of running pass `name` on `g`; REQUIREs it to fail.
absl::Status RunError(const std::string& name, const OptionMap& options, Graph& g) {
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(name, options);
  if (!pass.ok()) return pass.status();
  PassContext context;
  absl::StatusOr<bool> changed = (*pass)->Run(g, context);
  REQUIRE_FALSE(changed.ok());
  return changed.status();
}

std::vector<int32_t> TasksOfKind(const Graph& g, TaskKind kind) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    if (g.tasks[t].kind == kind) out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

std::vector<int32_t> Inserted(const Graph& g) {
  std::vector<int32_t> out;
  for (int32_t t : TasksOfKind(g, TaskKind::kCollective)) {
    if (g.TaskName(t).rfind("all_reduce bucket", 0) == 0) out.push_back(t);
  }
  return out;
}

// The tasks of `resource` in chain order.
std::vector<int32_t> ChainOf(const Graph& g, int32_t resource) {
  std::vector<int32_t> next(g.tasks.size(), -1);
  std::vector<uint8_t> has_prev(g.tasks.size(), 0);
  for (const Edge& e : g.edges) {
    if (e.kind != EdgeKind::kSequential) continue;
    next[static_cast<size_t>(e.from)] = e.to;
    has_prev[static_cast<size_t>(e.to)] = 1;
  }
  std::vector<int32_t> out;
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    if (g.tasks[t].resource != resource || has_prev[t]) continue;
    for (int32_t c = static_cast<int32_t>(t); c >= 0 && out.size() <= g.tasks.size(); c = next[static_cast<size_t>(c)]) {
      out.push_back(c);
    }
  }
  return out;
}

void CheckSameGraph(const Graph& a, const Graph& b) {
  REQUIRE(a.tasks.size() == b.tasks.size());
  REQUIRE(a.edges.size() == b.edges.size());
  CHECK(a.resources.size() == b.resources.size());
  for (size_t t = 0; t < a.tasks.size(); ++t) {
    INFO("task " << t << " " << a.TaskName(static_cast<int32_t>(t)));
    CHECK(a.TaskName(static_cast<int32_t>(t)) == b.TaskName(static_cast<int32_t>(t)));
    CHECK(a.tasks[t].duration_ns == b.tasks[t].duration_ns);
    CHECK(a.tasks[t].gap_ns == b.tasks[t].gap_ns);
    CHECK(a.tasks[t].resource == b.tasks[t].resource);
    CHECK(a.tasks[t].bytes == b.tasks[t].bytes);
  }
  for (size_t e = 0; e < a.edges.size(); ++e) {
    INFO("edge " << e);
    CHECK(a.edges[e].from == b.edges[e].from);
    CHECK(a.edges[e].to == b.edges[e].to);
    CHECK(a.edges[e].kind == b.edges[e].kind);
    CHECK(a.edges[e].lag_ns == b.edges[e].lag_ns);
  }
}

// The real traces, loaded once.
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

const Graph& DdpGraph() {
  static const Graph* const kGraph = [] {
    absl::StatusOr<Trace> trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
    REQUIRE(trace.ok());
    absl::StatusOr<Graph> g = BuildGraph(*trace);
    REQUIRE(g.ok());
    return new Graph(std::move(g).value());
  }();
  return *kGraph;
}

}  // namespace

// --- BucketGradients -------------------------------------------------------------------

TEST_CASE("BucketGradients fills buckets in ready order under the first and regular caps", "[comm]") {
  TrainingGraphOptions o;
  // In ready order: 0.5, 0.75, 10, 20, 30 (> a bucket), 1, 1 MiB.
  o.grad_bytes = {kMiB / 2, 3 * kMiB / 4, 10 * kMiB, 20 * kMiB, 30 * kMiB, kMiB, kMiB};
  TrainingGraph t(o);
  const std::vector<int32_t> grads = t.Gradients();
  auto names = [&](const std::vector<std::vector<int32_t>>& buckets) {
    std::vector<std::vector<std::string>> out;
    for (const auto& b : buckets) {
      out.emplace_back();
      for (int32_t tensor : b) out.back().emplace_back(t.g.Str(t.g.tensors[static_cast<size_t>(tensor)].name));
    }
    return out;
  };
  using Names = std::vector<std::vector<std::string>>;
  // The expected buckets are what torch.distributed._compute_bucket_assignment_by_size
  // (torch 2.13) gives for these sizes and caps: a bucket closes once it
  // holds at least its cap, keeping the gradient that crossed it.
  SECTION("DDP's caps: a small first bucket, then 25 MB") {
    CHECK(names(BucketGradients(t.g, 0, grads, 25, 1)) ==
          Names{{"grad0", "grad1"}, {"grad2", "grad3"}, {"grad4"}, {"grad5", "grad6"}});
  }
  SECTION("one cap for every bucket") {
    CHECK(names(BucketGradients(t.g, 1, grads, 25, 25)) ==
          Names{{"grad0", "grad1", "grad2", "grad3"}, {"grad4"}, {"grad5", "grad6"}});
  }
  SECTION("a bucket that reaches its cap exactly closes") {
    CHECK(names(BucketGradients(t.g, 0, grads, 1.25, 1.25)) ==
          Names{{"grad0", "grad1"}, {"grad2"}, {"grad3"}, {"grad4"}, {"grad5", "grad6"}});
  }
  SECTION("bucket_mb = 0: one bucket per gradient") {
    CHECK(names(BucketGradients(t.g, 0, grads, 0, 1)) ==
          Names{{"grad0"}, {"grad1"}, {"grad2"}, {"grad3"}, {"grad4"}, {"grad5"}, {"grad6"}});
  }
  SECTION("a bucket as large as everything") {
    CHECK(names(BucketGradients(t.g, 0, grads, 1000, 1000)) ==
          Names{{"grad0", "grad1", "grad2", "grad3", "grad4", "grad5", "grad6"}});
  }
  SECTION("a gradient with no producer in the iteration is left out") {
    t.g.tensors[static_cast<size_t>(t.tensor_of[2])].producers[1] = -1;
    CHECK(names(BucketGradients(t.g, 1, grads, 0, 1)) ==
          Names{{"grad0"}, {"grad1"}, {"grad3"}, {"grad4"}, {"grad5"}, {"grad6"}});
    CHECK(BucketGradients(t.g, 1, {}, 25, 1).empty());
  }
}

// --- data_parallel ---------------------------------------------------------------------

TEST_CASE("data_parallel with one rank changes nothing", "[comm]") {
  TrainingGraph t;
  const Graph before = t.g;
  PassContext context;
  CHECK_FALSE(RunOk("data_parallel", {{"world_size", "1"}}, t.g, &context));
  CheckSameGraph(before, t.g);
  REQUIRE(context.notes.size() == 1);
  CHECK_THAT(context.notes[0], Catch::Contains("unchanged"));
}

TEST_CASE("data_parallel inserts one chained all-reduce per bucket feeding the GPU optimizer", "[comm]") {
  TrainingGraph t;  // gradients of 2, 3 and 1 MiB; 2 iterations
  const size_t resources_before = t.g.resources.size();
  PassContext context;
  REQUIRE(RunOk("data_parallel", {{"world_size", "4"}, {"bucket_mb", "0"}, {"network", "ib100"}}, t.g, &context));
  const NetworkModel ib100 = *NetworkPreset("ib100");

  REQUIRE(t.g.resources.size() == resources_before + 1);
  const auto channel = static_cast<int32_t>(resources_before);
  CHECK(t.g.resources[static_cast<size_t>(channel)].kind == ResourceKind::kCommChannel);
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 6);  // 3 gradients x 2 iterations
  CHECK(TasksOfKind(t.g, TaskKind::kCollective) == inserted);
  // Chained in ready order across iterations.
  CHECK(ChainOf(t.g, channel) == inserted);
  const int64_t bytes[] = {2 * kMiB, 3 * kMiB, 1 * kMiB};
  for (size_t i = 0; i < inserted.size(); ++i) {
    const int32_t id = inserted[i];
    const Task& task = t.g.tasks[static_cast<size_t>(id)];
    const auto it = static_cast<int32_t>(i / 3);
    const size_t j = i % 3;
    INFO(t.g.TaskName(id));
    CHECK(task.resource == channel);
    CHECK(task.phase == Phase::kComm);
    CHECK(task.iteration == it);
    CHECK(task.bytes == bytes[j]);
    CHECK(task.trace_event == -1);
    CHECK(task.duration_ns == CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, bytes[j], 4, ib100));
    // Fed by the gradient's producer, feeding the GPU optimizer kernel.
    CHECK(HasEdge(t.g, t.producers[static_cast<size_t>(it)][j], id, EdgeKind::kData));
    CHECK(HasEdge(t.g, id, t.gpu_opt[static_cast<size_t>(it)], EdgeKind::kData));
    CHECK_FALSE(HasEdge(t.g, id, t.cpu_opt[static_cast<size_t>(it)], EdgeKind::kData));
  }
  CHECK(t.g.has_adjacency());
  CHECK(t.g.Validate().ok());
  CHECK(t.g.ValidateResourceChains().ok());
  REQUIRE(context.notes.size() == 1);
  CHECK_THAT(context.notes[0], Catch::Contains("4 ranks") && Catch::Contains("ring") && Catch::Contains("ib100") &&
                                   Catch::Contains("3 buckets"));

  // Replayed: an all-reduce starts after its gradient, the optimizer after
  // every all-reduce of its iteration.
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  for (size_t i = 0; i < inserted.size(); ++i) {
    const auto it = static_cast<size_t>(i / 3);
    const auto ar = static_cast<size_t>(inserted[i]);
    CHECK(s->start_ns[ar] >= s->end_ns[static_cast<size_t>(t.producers[it][i % 3])]);
    CHECK(s->start_ns[static_cast<size_t>(t.gpu_opt[it])] >= s->end_ns[ar]);
  }
}

TEST_CASE("data_parallel buckets by bucket_mb with DDP's small first bucket", "[comm]") {
  TrainingGraph t;  // 2, 3, 1 MiB in ready order
  REQUIRE(RunOk("data_parallel", {{"world_size", "8"}, {"network", "nvlink"}}, t.g));  // 25 MB, first 1 MB
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 4);  // {2}, {3, 1} per iteration
  CHECK(t.g.tasks[static_cast<size_t>(inserted[0])].bytes == 2 * kMiB);
  CHECK(t.g.tasks[static_cast<size_t>(inserted[1])].bytes == 4 * kMiB);
  // The bucket waits for both of its gradients.
  CHECK(HasEdge(t.g, t.producers[0][1], inserted[1], EdgeKind::kData));
  CHECK(HasEdge(t.g, t.producers[0][2], inserted[1], EdgeKind::kData));
  CHECK(t.g.TaskName(inserted[1]) == "all_reduce bucket 1 (4.0 MB)");
}

TEST_CASE("data_parallel makes the CPU optimizer or the step's end wait when there is no GPU optimizer", "[comm]") {
  TrainingGraphOptions o;
  o.gpu_optimizer = false;
  SECTION("a CPU optimizer step") {
    TrainingGraph t(o);
    REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}}, t.g));
    for (int32_t ar : Inserted(t.g)) {
      CHECK(HasEdge(t.g, ar, t.cpu_opt[static_cast<size_t>(t.g.tasks[static_cast<size_t>(ar)].iteration)],
                    EdgeKind::kData));
    }
  }
  SECTION("no optimizer at all") {
    o.cpu_optimizer = false;
    TrainingGraph t(o);
    REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}}, t.g));
    for (int32_t ar : Inserted(t.g)) {
      CHECK(HasEdge(t.g, ar, t.step_end[static_cast<size_t>(t.g.tasks[static_cast<size_t>(ar)].iteration)],
                    EdgeKind::kData));
    }
  }
}

TEST_CASE("data_parallel on CPU ranks makes what follows backward on its thread, and the framework time before "
          "it, wait for the all-reduces", "[comm]") {
  // DDP's finalize waits for every bucket's all-reduce at the end of
  // backward, before loss.backward() returns: on a CPU rank (gloo) the
  // thread blocks there, so the task after backward starts its framework
  // time (gap) once the all-reduces have ended, not beside them.
  TrainingGraphOptions o = CpuRanks();
  o.gpu_optimizer = true;   // "opt#N" after backward on the thread that runs it (a CPU op here)
  o.cpu_optimizer = false;
  TrainingGraph t(o);
  for (int32_t opt : t.gpu_opt) t.g.tasks[static_cast<size_t>(opt)].gap_ns = 100 * kUs;
  PassContext context;
  // 1 ms per ring step: each iteration's all-reduces end well after its backward.
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"},
                                  {"latency_us", "1000"}}, t.g, &context));
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  for (size_t it = 0; it < t.gpu_opt.size(); ++it) {
    TimeNs last_end = 0;
    for (int32_t ar : Inserted(t.g)) {
      if (t.g.tasks[static_cast<size_t>(ar)].iteration == static_cast<int32_t>(it)) {
        last_end = std::max(last_end, s->end_ns[static_cast<size_t>(ar)]);
      }
    }
    INFO(it);
    REQUIRE(last_end > s->end_ns[static_cast<size_t>(t.producers[it].back())] + 100 * kUs);
    CHECK(s->start_ns[static_cast<size_t>(t.gpu_opt[it])] == last_end + 100 * kUs);
  }
  CHECK_THAT(context.notes.back(), Catch::Contains("in 2 iterations the task after backward on its thread"));
  // On a GPU graph the rank's CPU does not block (the optimizer's kernels wait on the device): no such wait.
  TrainingGraph gpu;
  PassContext gpu_context;
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}}, gpu.g, &gpu_context));
  CHECK_THAT(gpu_context.notes.back(), !Catch::Contains("the task after backward"));
}

TEST_CASE("data_parallel makes the optimizer step wait, not a zero_grad that ran before backward",
          "[comm]") {
  // The usual loop: zero_grad(); forward; backward; step(). zero_grad's
  // kernel is optimizer work that runs before the gradients exist: making it
  // wait for their all-reduce is a cycle.
  TrainingGraphOptions o;
  o.zero_grad_first = true;
  TrainingGraph t(o);
  PassContext context;
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass("data_parallel", {{"world_size", "4"}, {"bucket_mb", "0"}});
  REQUIRE(pass.ok());
  absl::StatusOr<bool> changed = (*pass)->Run(t.g, context);
  INFO((changed.ok() ? std::string() : std::string(changed.status().message())));
  REQUIRE(changed.ok());
  for (int32_t ar : Inserted(t.g)) {
    const auto it = static_cast<size_t>(t.g.tasks[static_cast<size_t>(ar)].iteration);
    CHECK(HasEdge(t.g, ar, t.gpu_opt[it], EdgeKind::kData));
  }
}

TEST_CASE("data_parallel takes the network's algorithm, bandwidth and latency from its options", "[comm]") {
  TrainingGraph t;
  NetworkModel expected = *NetworkPreset("nvlink");  // auto on a GPU graph without collectives
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  OptionMap options = {{"world_size", "8"}, {"bucket_mb", "0"}};
  SECTION("auto on a GPU graph: nvlink") {}
  SECTION("tree") {
    options["algorithm"] = "tree";
    algorithm = CollectiveAlgorithm::kTree;
  }
  SECTION("bandwidth") {
    options["bandwidth_gbps"] = "40";
    expected.beta_bytes_per_s = 40e9;
  }
  SECTION("latency over a preset") {
    options["network"] = "ethernet10";
    options["latency_us"] = "0";
    expected = *NetworkPreset("ethernet10");
    expected.alpha_s = 0;
  }
  REQUIRE(RunOk("data_parallel", options, t.g));
  for (int32_t ar : Inserted(t.g)) {
    const Task& task = t.g.tasks[static_cast<size_t>(ar)];
    CHECK(task.duration_ns == CollectiveTime(Collective::kAllReduce, algorithm, task.bytes, 8, expected));
  }
}

TEST_CASE("data_parallel picks ethernet for a CPU-only graph", "[comm]") {
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  TrainingGraph t(o);
  REQUIRE(RunOk("data_parallel", {{"world_size", "4"}, {"bucket_mb", "0"}}, t.g));
  const NetworkModel ethernet = *NetworkPreset("ethernet10");
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE_FALSE(inserted.empty());
  for (int32_t ar : inserted) {
    const Task& task = t.g.tasks[static_cast<size_t>(ar)];
    CHECK(task.duration_ns == CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, task.bytes, 4, ethernet));
  }
}

TEST_CASE("data_parallel refuses bad options with clear errors", "[comm]") {
  TrainingGraph t;
  struct Case {
    OptionMap options;
    const char* says;
  };
  const Case cases[] = {
      {{{"world_size", "0"}}, "world_size"},
      {{{"algorithm", "butterfly"}}, "butterfly"},
      {{{"network", "carrier_pigeon"}}, "nvlink"},
      {{{"bandwidth_gbps", "-5"}}, "bandwidth_gbps"},
      {{{"bucket_mb", "-1"}}, "bucket_mb"},
      {{{"first_bucket_mb", "-1"}}, "first_bucket_mb"},
      {{{"comm_cpu_share", "1.5"}}, "comm_cpu_share must be in [0, 1]"},
      {{{"comm_cpu_share", "-0.1"}}, "comm_cpu_share must be in [0, 1]"},
      {{{"buffer_bytes", "-1"}}, "buffer_bytes"},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    const absl::Status s = RunError("data_parallel", c.options, t.g);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains(c.says));
  }
}

TEST_CASE("data_parallel refuses a graph that already communicates", "[comm]") {
  TrainingGraphOptions o;
  o.recorded_world = 4;
  TrainingGraph t(o);
  const absl::Status s = RunError("data_parallel", {{"world_size", "8"}}, t.g);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("already communicates") && Catch::Contains("tensor_fusion"));
}

TEST_CASE("data_parallel needs gradient tensors and says how to get them", "[comm]") {
  TrainingGraph t;
  SECTION("none at all") {
    for (Tensor& tensor : t.g.tensors) tensor.role = TensorRole::kActivation;
    const absl::Status s = RunError("data_parallel", {}, t.g);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("no gradient tensors"));
  }
  SECTION("sizes unknown") {
    for (int32_t g : t.Gradients()) t.g.tensors[static_cast<size_t>(g)].bytes = -1;
    const absl::Status s = RunError("data_parallel", {}, t.g);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("3 of 3") && Catch::Contains("gradient_mb"));
  }
  SECTION("no iterations") {
    t.g.iterations.clear();
    for (Task& task : t.g.tasks) task.iteration = -1;
    for (Tensor& tensor : t.g.tensors) tensor.producers.clear();
    const absl::Status s = RunError("data_parallel", {}, t.g);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("no iterations"));
  }
}

TEST_CASE("data_parallel spreads gradient_mb over gradients of unknown size", "[comm]") {
  TrainingGraph t;
  for (int32_t g : t.Gradients()) t.g.tensors[static_cast<size_t>(g)].bytes = -1;
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}, {"gradient_mb", "6"}}, t.g));
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 6);
  for (int32_t ar : inserted) CHECK(t.g.tasks[static_cast<size_t>(ar)].bytes == 2 * kMiB);
}

TEST_CASE("data_parallel with comm_cpu_share runs that share of each all-reduce on the thread that issued it",
          "[comm]") {
  const TrainingGraphOptions o = CpuRanks();  // gloo: backward runs on CPU thread "stream 7"
  TrainingGraph shared(o), beside(o);
  PassContext context;
  REQUIRE(RunOk("data_parallel",
                {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"}, {"comm_cpu_share", "0.5"}},
                shared.g, &context));
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"}}, beside.g));
  const std::vector<int32_t> inserted = Inserted(shared.g);
  REQUIRE(inserted.size() == 6);
  const std::vector<int32_t> chain = ChainOf(shared.g, shared.gpu);
  for (size_t i = 0; i < inserted.size(); ++i) {
    const Task& ar = shared.g.tasks[static_cast<size_t>(inserted[i])];
    const int32_t producer = shared.producers[i / 3][i % 3];
    INFO(shared.g.TaskName(inserted[i]));
    // Right after the gradient's producer on its thread, feeding the optimizer.
    const auto at = std::find(chain.begin(), chain.end(), producer);
    REQUIRE(at + 1 < chain.end());
    const int32_t cpu = *(at + 1);
    CHECK(shared.g.TaskName(cpu) == std::string(shared.g.TaskName(inserted[i])) + ": CPU share");
    CHECK(shared.g.tasks[static_cast<size_t>(cpu)].kind == TaskKind::kCpuOp);
    CHECK(shared.g.tasks[static_cast<size_t>(cpu)].phase == Phase::kComm);
    CHECK(shared.g.tasks[static_cast<size_t>(cpu)].duration_ns == RoundNs(0.5 * static_cast<double>(ar.duration_ns)));
    CHECK(HasEdge(shared.g, cpu, shared.cpu_opt[i / 3], EdgeKind::kData));
  }
  CHECK(shared.g.ValidateResourceChains().ok());
  REQUIRE(context.notes.size() == 1);
  CHECK_THAT(context.notes[0], Catch::Contains("comm_cpu_share 0.5"));
  // The backward work after a bucket waits for its CPU share: the step is
  // longer than with the all-reduces beside compute.
  CHECK(Makespan(shared.g) > Makespan(beside.g));
}

TEST_CASE("data_parallel refuses comm_cpu_share where gradients are produced on a GPU", "[comm]") {
  TrainingGraph t;
  const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"comm_cpu_share", "0.5"}}, t.g);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("CPU threads") && Catch::Contains("stream 7"));
}

TEST_CASE("data_parallel with ddp_cpu options runs DDP's reducer work on the issuing thread before each all-reduce",
          "[comm]") {
  const TrainingGraphOptions o = CpuRanks();  // gloo: backward runs on CPU thread "stream 7"
  TrainingGraph ddp(o), plain(o);
  PassContext context;
  const OptionMap common = {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"},
                                 {"comm_cpu_share", "0.5"}};
  OptionMap with = common;
  with["ddp_cpu_us"] = "150";
  with["ddp_cpu_per_gradient_us"] = "7";
  REQUIRE(RunOk("data_parallel", with, ddp.g, &context));
  REQUIRE(RunOk("data_parallel", common, plain.g));
  const std::vector<int32_t> inserted = Inserted(ddp.g);
  REQUIRE(inserted.size() == 6);  // one bucket per gradient, 3 gradients, 2 iterations
  const std::vector<int32_t> chain = ChainOf(ddp.g, ddp.gpu);
  for (size_t i = 0; i < inserted.size(); ++i) {
    INFO(ddp.g.TaskName(inserted[i]));
    const int32_t producer = ddp.producers[i / 3][i % 3];
    // producer -> reducer -> the all-reduce's CPU share, on the producer's thread.
    const auto at = std::find(chain.begin(), chain.end(), producer);
    REQUIRE(at + 2 < chain.end());
    const int32_t reducer = *(at + 1);
    const Task& r = ddp.g.tasks[static_cast<size_t>(reducer)];
    CHECK(ddp.g.TaskName(reducer) == StrCat("DDP reducer: bucket ", i % 3, " (1 gradients)"));
    CHECK(r.kind == TaskKind::kCpuOp);
    CHECK(r.phase == Phase::kComm);
    // The per-iteration part on the first bucket, the per-gradient part on each.
    CHECK(r.duration_ns == (i % 3 == 0 ? 157'000 : 7'000));
    CHECK(HasEdge(ddp.g, reducer, inserted[i], EdgeKind::kData));  // the all-reduce waits for it
    CHECK(ddp.g.TaskName(*(at + 2)) == std::string(ddp.g.TaskName(inserted[i])) + ": CPU share");
  }
  CHECK(ddp.g.ValidateResourceChains().ok());
  REQUIRE(!context.notes.empty());
  CHECK_THAT(context.notes[0], Catch::Contains("DDP's reducer 0.171 ms per iteration"));
  CHECK(Makespan(ddp.g) > Makespan(plain.g));
}

TEST_CASE("data_parallel with cpu_factor runs every rank's CPU work that much slower, before the all-reduces",
          "[comm]") {
  const TrainingGraphOptions o = CpuRanks();  // every task on CPU threads
  TrainingGraph slow(o), plain(o);
  const Graph before = slow.g;
  const OptionMap common = {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"}};
  OptionMap with = common;
  with["cpu_factor"] = "1.5";
  PassContext context;
  REQUIRE(RunOk("data_parallel", with, slow.g, &context));
  REQUIRE(RunOk("data_parallel", common, plain.g));
  // Each recorded CPU task and the framework time before it take 1.5x; the
  // inserted all-reduces keep the network's time.
  for (size_t t = 0; t < before.tasks.size(); ++t) {
    INFO(before.TaskName(static_cast<int32_t>(t)));
    CHECK(slow.g.tasks[t].duration_ns == RoundNs(1.5 * static_cast<double>(before.tasks[t].duration_ns)));
    CHECK(slow.g.tasks[t].gap_ns == RoundNs(1.5 * static_cast<double>(before.tasks[t].gap_ns)));
  }
  const std::vector<int32_t> with_factor = Inserted(slow.g), without = Inserted(plain.g);
  REQUIRE(with_factor.size() == without.size());
  for (size_t i = 0; i < with_factor.size(); ++i) {
    CHECK(slow.g.tasks[static_cast<size_t>(with_factor[i])].duration_ns ==
          plain.g.tasks[static_cast<size_t>(without[i])].duration_ns);
  }
  CHECK(Makespan(slow.g) > Makespan(plain.g));
  REQUIRE(!context.notes.empty());
  CHECK_THAT(context.notes[0], Catch::Contains("take 1.5x as long (cpu_factor"));
  SECTION("out of range") {
    for (const char* bad : {"0", "-1", "101"}) {
      INFO(bad);
      TrainingGraph t(o);
      const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"cpu_factor", bad}}, t.g);
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()), Catch::Contains("cpu_factor must be in (0, 100]"));
    }
  }
}

TEST_CASE("GapExtraUs is linear from zero through the points and flat after the last", "[comm]") {
  const std::vector<std::pair<double, double>> points = {{1000, 100}, {4000, 1300}};
  CHECK(GapExtraUs(points, 0) == 0);
  CHECK(GapExtraUs(points, 500) == Approx(50));
  CHECK(GapExtraUs(points, 1000) == Approx(100));
  CHECK(GapExtraUs(points, 2500) == Approx(700));
  CHECK(GapExtraUs(points, 4000) == Approx(1300));
  CHECK(GapExtraUs(points, 1e7) == Approx(1300));
  CHECK(GapExtraUs({}, 5000) == 0);
}

TEST_CASE("bucket_cpu_latency reads a curve per bucket count, between counts linear in 1/(K-1)", "[comm]") {
  // One curve: every count, held at its first point's value below it.
  absl::StatusOr<std::vector<BucketLatencyCurve>> one = ParseBucketLatency("100:200;300:400");
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK(one->front().buckets == 0);
  for (size_t k : {2, 3, 10, 100}) {
    CHECK(BucketLatencyUs(*one, k, 10) == Approx(200));
    CHECK(BucketLatencyUs(*one, k, 200) == Approx(300));
    CHECK(BucketLatencyUs(*one, k, 1e6) == Approx(400));
  }
  // A curve per count: 4 buckets' and 16's.
  absl::StatusOr<std::vector<BucketLatencyCurve>> two = ParseBucketLatency("4@100:600;400:900|16@ 50:300;400:600");
  REQUIRE(two.ok());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].buckets == 4);
  CHECK((*two)[1].buckets == 16);
  CHECK(BucketLatencyUs(*two, 4, 100) == Approx(600));
  CHECK(BucketLatencyUs(*two, 16, 100) == Approx(300 + 300 * 50.0 / 350));
  // Outside the counts: the nearest one's.
  CHECK(BucketLatencyUs(*two, 2, 100) == Approx(600));
  CHECK(BucketLatencyUs(*two, 64, 400) == Approx(600));
  // Between them, linear in 1/(K-1): at 10 buckets, (1/9 - 1/15) / (1/3 - 1/15) = 1/6 of the way to 4's.
  CHECK(BucketLatencyUs(*two, 10, 400) == Approx(900.0 / 6 + 600.0 * 5 / 6));
  CHECK(BucketLatencyUs(*two, 6, 400) == Approx(900 * (0.2 - 1.0 / 15) / (1.0 / 3 - 1.0 / 15) +
                                                600 * (1.0 / 3 - 0.2) / (1.0 / 3 - 1.0 / 15)));
  CHECK(BucketLatencyUs({}, 4, 100) == 0);
  CHECK(ParseBucketLatency("")->empty());
  // Bad curves name what is wrong.
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"4@100:600|100:300", "curve '100:300' has no bucket count"},
           {"16@100:600|4@100:300", "bad bucket count in '4@100:300'"},
           {"1@100:600", "bad bucket count in '1@100:600'"},
           {"x@100:600", "bad bucket count in 'x@100:600'"},
           {"4@", "curve '4@' has no points"},
           {"4@100:600|16@0:5", "bucket_cpu_latency: bad point '0:5'"}}) {
    INFO(text);
    absl::StatusOr<std::vector<BucketLatencyCurve>> bad = ParseBucketLatency(text);
    REQUIRE(!bad.ok());
    CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(bad.status().message()), Catch::Contains(why));
  }
}

TEST_CASE("data_parallel with gap_latency lengthens each all-reduce by its gap's extra, not its CPU share",
          "[comm]") {
  const TrainingGraphOptions o = CpuRanks();
  const OptionMap common = {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"},
                            {"comm_cpu_share", "0.5"}};
  auto durations = [&](const std::string& gap_latency, PassContext* context) {
    TrainingGraph t(o);
    OptionMap options = common;
    if (!gap_latency.empty()) options["gap_latency"] = gap_latency;
    REQUIRE(RunOk("data_parallel", options, t.g, context));
    std::vector<TimeNs> out;
    for (int32_t ar : Inserted(t.g)) out.push_back(t.g.tasks[static_cast<size_t>(ar)].duration_ns);
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      if (EndsWith(t.g.TaskName(static_cast<int32_t>(i)), ": CPU share")) out.push_back(t.g.tasks[i].duration_ns);
    }
    return out;
  };
  const std::vector<TimeNs> plain = durations("", nullptr);
  REQUIRE(plain.size() == 12);  // 6 all-reduces, then their 6 CPU shares
  SECTION("every gap past the first point: the full extra on every all-reduce") {
    PassContext context;
    const std::vector<TimeNs> got = durations("0.001:500", &context);
    REQUIRE(got.size() == plain.size());
    for (size_t i = 0; i < 6; ++i) CHECK(got[i] == plain[i] + 500'000);
    for (size_t i = 6; i < 12; ++i) CHECK(got[i] == plain[i]);  // waking is waiting: the CPU share stays
    CHECK_THAT(context.notes[0], Catch::Contains("1.5 ms of it for the compute before each all-reduce"));
  }
  SECTION("gaps shorter than any in the graph: nothing") {
    CHECK(durations("1e9:0;2e9:1000", nullptr) == plain);
  }
}

TEST_CASE("data_parallel with straggler_us makes each iteration's first all-reduce wait for the slowest rank",
          "[comm]") {
  const TrainingGraphOptions o = CpuRanks();
  const OptionMap common = {{"world_size", "2"}, {"bucket_mb", "0"}, {"network", "ethernet10"}};
  TrainingGraph plain(o), waits(o);
  REQUIRE(RunOk("data_parallel", common, plain.g));
  OptionMap with = common;
  with["straggler_us"] = "300";
  PassContext context;
  REQUIRE(RunOk("data_parallel", with, waits.g, &context));
  const std::vector<int32_t> a = Inserted(plain.g);
  const std::vector<int32_t> b = Inserted(waits.g);
  REQUIRE(a.size() == 6);
  REQUIRE(b.size() == 6);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(waits.g.TaskName(b[i]));
    CHECK(waits.g.tasks[static_cast<size_t>(b[i])].duration_ns ==
          plain.g.tasks[static_cast<size_t>(a[i])].duration_ns + (i % 3 == 0 ? 300'000 : 0));
  }
  CHECK_THAT(context.notes[0], Catch::Contains("0.3 ms of it waiting for the slowest rank"));
  CHECK(Makespan(waits.g) > Makespan(plain.g));
  const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"straggler_us", "-1"}}, plain.g);
  CHECK_THAT(std::string(s.message()), Catch::Contains("straggler_us must be in [0, 1e9]"));
}

TEST_CASE("data_parallel with queued_latency_us gives an all-reduce queued behind another the smaller latency",
          "[comm]") {
  // 4 kB gradients, the bytes negligible at 1e6 GB/s: an all-reduce is 2 x
  // its per-step latency (ring, 2 ranks).
  const TrainingGraphOptions o = CpuRanks();
  const OptionMap common = {{"world_size", "2"}, {"bucket_mb", "0"}, {"bandwidth_gbps", "1e6"},
                            {"gap_latency", "0.001:500"}};
  auto durations = [&](OptionMap options, PassContext* context) {
    TrainingGraph t(o);
    for (const auto& [k, v] : common) options.emplace(k, v);
    REQUIRE(RunOk("data_parallel", options, t.g, context));
    std::vector<TimeNs> out;
    for (int32_t ar : Inserted(t.g)) out.push_back(t.g.tasks[static_cast<size_t>(ar)].duration_ns);
    REQUIRE(out.size() == 6);  // 3 buckets in each of 2 iterations
    return out;
  };
  SECTION("all-reduces far longer than the gaps between gradients: all but each iteration's first are queued") {
    PassContext context;
    const std::vector<TimeNs> got = durations({{"latency_us", "100000"}, {"queued_latency_us", "10"}}, &context);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("all-reduce " << i);
      // The first of an iteration: 2 x 100 ms and gap_latency's 0.5 ms;
      // queued ones 2 x 10 us and no gap_latency (the threads are awake).
      CHECK(got[i] == (i % 3 == 0 ? 200'500'000 : 20'000));
    }
    CHECK_THAT(context.notes[0], Catch::Contains("2 of the 3 all-reduces queued behind the one before "
                                                 "(queued_latency_us 10)"));
    // Without the option every all-reduce pays the full latency.
    for (TimeNs d : durations({{"latency_us", "100000"}}, nullptr)) CHECK(d == 200'500'000);
  }
  SECTION("all-reduces shorter than the gaps between gradients: none is queued") {
    PassContext context;
    for (TimeNs d : durations({{"latency_us", "0.001"}, {"queued_latency_us", "10"}, {"gap_latency", ""}}, &context)) {
      CHECK(d == 2);
    }
    CHECK_THAT(context.notes[0], !Catch::Contains("queued"));
  }
  SECTION("out of range") {
    TrainingGraph t;
    for (const char* bad : {"-2", "-0.5", "1e10"}) {
      INFO(bad);
      const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"queued_latency_us", bad}}, t.g);
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()), Catch::Contains("queued_latency_us must be -1"));
    }
  }
}

TEST_CASE("data_parallel with bucket_cpu_latency puts every all-reduce's latency on the issuing thread", "[comm]") {
  // As above: 3 buckets in each of 2 iterations, the bytes negligible, all
  // far apart in time or queued depending on the latency.
  const TrainingGraphOptions o = CpuRanks();
  const OptionMap common = {{"world_size", "2"},      {"bucket_mb", "0"},           {"bandwidth_gbps", "1e6"},
                            {"latency_us", "100"},    {"gap_latency", "0.001:500"}, {"queued_latency_us", "10"},
                            {"comm_cpu_share", "0"}};
  struct Run {
    std::vector<TimeNs> wire;     // the all-reduces on the network
    std::vector<TimeNs> latency;  // their latencies on the issuing thread
    TimeNs makespan = 0;
    std::string note;
  };
  auto run = [&](const OptionMap& extra) {
    TrainingGraph t(o);
    OptionMap options = common;
    for (const auto& [k, v] : extra) options[k] = v;
    PassContext context;
    REQUIRE(RunOk("data_parallel", options, t.g, &context));
    Run out;
    out.note = context.notes.at(0);
    for (int32_t ar : Inserted(t.g)) {
      out.wire.push_back(t.g.tasks[static_cast<size_t>(ar)].duration_ns);
      // Its latency: a task on a CPU thread that the all-reduce waits for.
      for (const Edge& e : t.g.edges) {
        if (e.to != ar || !EndsWith(t.g.TaskName(e.from), ": latency")) continue;
        const Task& latency = t.g.tasks[static_cast<size_t>(e.from)];
        CHECK(t.g.resources[static_cast<size_t>(latency.resource)].kind == ResourceKind::kCpuThread);
        CHECK(t.g.TaskName(e.from) == StrCat(t.g.TaskName(ar), ": latency"));
        out.latency.push_back(latency.duration_ns);
      }
    }
    out.makespan = Makespan(t.g);
    return out;
  };
  const Run got = run({{"bucket_cpu_latency", "0.001:300"}});
  REQUIRE(got.wire.size() == 6);
  REQUIRE(got.latency.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    INFO("all-reduce " << i);
    // The bandwidth term on the network, and an iteration's first
    // all-reduce's gap_latency (0.5 ms: a wait, not CPU work).
    const TimeNs waited = i % 3 == 0 ? 500'000 : 0;
    CHECK(got.wire[i] >= waited);
    CHECK(got.wire[i] < waited + 10);
    // On the thread: an iteration's first, the ring's 2 x 100 us; each
    // later one 0.3 ms at any gap, none priced as queued.
    CHECK(got.latency[i] == (i % 3 == 0 ? 200'000 : 300'000));
  }
  CHECK_THAT(got.note,
             Catch::Contains("0.8 ms of it the all-reduces' latencies, paid by the issuing thread before each"));
  CHECK_THAT(got.note, !Catch::Contains("queued"));
  // Without it the latencies are on the network, beside the computation,
  // and the later all-reduces queue.
  const Run plain = run({});
  CHECK(plain.latency.empty());
  CHECK(plain.wire[0] == 700'000);
  CHECK_THAT(plain.note, Catch::Contains("queued behind"));
  CHECK(plain.makespan < got.makespan);
  // A later bucket's point is read at its gap (here 1 us and 2 us per us of
  // gap between the first and the last point), the first unchanged...
  const Run one = run({{"bucket_cpu_latency", "1:1;1e8:1e8"}});
  const Run two = run({{"bucket_cpu_latency", "1:2;1e8:2e8"}});
  // ... and held at the first point's value below it.
  const Run held = run({{"bucket_cpu_latency", "1e6:300"}});
  REQUIRE(one.latency.size() == 6);
  REQUIRE(two.latency.size() == 6);
  REQUIRE(held.latency.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    INFO("all-reduce " << i);
    if (i % 3 == 0) {
      CHECK(one.latency[i] == 200'000);
      CHECK(two.latency[i] == 200'000);
    } else {
      CHECK(one.latency[i] > 1'000);  // the gradients lie apart
      CHECK(two.latency[i] == 2 * one.latency[i]);
      CHECK(held.latency[i] == 300'000);
    }
  }
  // With a curve per bucket count, an iteration's 3 buckets read 2's and
  // 4's a quarter and three quarters of the way (linear in 1 / (K - 1)),
  // and a curve for 3 exactly.
  const Run counts = run({{"bucket_cpu_latency", "2@1e6:100|4@1e6:700"}});
  const Run three = run({{"bucket_cpu_latency", "3@1e6:300|8@1e6:900"}});
  REQUIRE(counts.latency.size() == 6);
  REQUIRE(three.latency.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    INFO("all-reduce " << i);
    CHECK(counts.latency[i] == (i % 3 == 0 ? 200'000 : 550'000));
    CHECK(three.latency[i] == (i % 3 == 0 ? 200'000 : 300'000));
  }
  // With a CPU share, the share is of the bandwidth term, after the
  // all-reduce is issued: a task of its own.
  TrainingGraph t(o);
  OptionMap shared = common;
  shared["bucket_cpu_latency"] = "0.001:300";
  shared["comm_cpu_share"] = "0.5";
  shared["bandwidth_gbps"] = "0.001";  // 4 kB: 4 ms on the wire
  REQUIRE(RunOk("data_parallel", shared, t.g));
  const std::vector<int32_t> ars = Inserted(t.g);
  REQUIRE(ars.size() == 6);
  for (size_t i = 0; i < ars.size(); ++i) {
    // The bandwidth term: the network's time less the first's gap_latency.
    const TimeNs wire = t.g.tasks[static_cast<size_t>(ars[i])].duration_ns - (i % 3 == 0 ? 500'000 : 0);
    CHECK(wire > 1'000'000);
    const auto share = std::find_if(t.g.edges.begin(), t.g.edges.end(), [&](const Edge& e) {
      return t.g.TaskName(e.from) == StrCat(t.g.TaskName(ars[i]), ": CPU share");
    });
    REQUIRE(share != t.g.edges.end());
    CHECK(t.g.tasks[static_cast<size_t>(share->from)].duration_ns == wire / 2);
  }
  TrainingGraph bad;
  const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"bucket_cpu_latency", "0:5"}}, bad.g);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("bucket_cpu_latency: bad point '0:5'"));
  // GPU gradients (NCCL): no CPU thread issues the all-reduces to pay them.
  TrainingGraph gpu_graph;
  const absl::Status gpu =
      RunError("data_parallel", {{"world_size", "2"}, {"bucket_cpu_latency", "10:300"}}, gpu_graph.g);
  CHECK(gpu.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(gpu.message()), Catch::Contains("bucket_cpu_latency is for collectives issued by CPU "
                                                         "threads"));
  CHECK_THAT(std::string(gpu.message()), Catch::EndsWith("leave bucket_cpu_latency empty"));
  TrainingGraph fresh;  // a failed pass leaves its graph half edited
  const absl::Status share = RunError("data_parallel", {{"world_size", "2"}, {"comm_cpu_share", "0.5"}}, fresh.g);
  CHECK_THAT(std::string(share.message()), Catch::EndsWith("leave comm_cpu_share at 0"));
}

TEST_CASE("data_parallel checks gap_latency", "[comm]") {
  TrainingGraph t;
  for (const char* bad : {"abc", "0:5", "2000:1;1000:1", "1000:-1", "1000", "1000:5:6", "nan:1"}) {
    INFO(bad);
    const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"gap_latency", bad}}, t.g);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("gap_latency: bad point"));
  }
}

TEST_CASE("data_parallel checks the ddp_cpu options", "[comm]") {
  SECTION("out of range") {
    TrainingGraph t;
    for (const char* option : {"ddp_cpu_us", "ddp_cpu_per_gradient_us"}) {
      const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {option, "-1"}}, t.g);
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()), Catch::Contains(option) && Catch::Contains("[0, 1e9]"));
    }
  }
  SECTION("gradients produced on a GPU") {
    TrainingGraph t;
    const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"ddp_cpu_per_gradient_us", "5"}}, t.g);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("ddp_cpu_per_gradient_us is for collectives issued by CPU"));
  }
}

TEST_CASE("data_parallel with buffer_bytes broadcasts the buffers before every forward, blocking it", "[comm]") {
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  TrainingGraph t(o);
  PassContext context;
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"network", "ethernet10"}, {"buffer_bytes", "4096"}}, t.g,
                &context));
  std::vector<int32_t> broadcasts;
  for (size_t i = 0; i < t.g.tasks.size(); ++i) {
    if (t.g.TaskName(static_cast<int32_t>(i)) == "broadcast buffers (4.0 kB)") broadcasts.push_back(static_cast<int32_t>(i));
  }
  REQUIRE(broadcasts.size() == 2);
  const std::vector<int32_t> chain = ChainOf(t.g, t.cpu);
  for (int32_t it = 0; it < 2; ++it) {
    const Task& b = t.g.tasks[static_cast<size_t>(broadcasts[static_cast<size_t>(it)])];
    CHECK(b.kind == TaskKind::kCollective);
    CHECK(b.resource == t.cpu);
    CHECK(b.iteration == it);
    CHECK(b.bytes == 4096);
    CHECK(b.duration_ns ==
          CollectiveTime(Collective::kBroadcast, CollectiveAlgorithm::kRing, 4096, 2, *NetworkPreset("ethernet10")));
    // It begins the iteration, right before the forward task that began it.
    CHECK(t.g.iterations[static_cast<size_t>(it)].begin_task == broadcasts[static_cast<size_t>(it)]);
    const auto at = std::find(chain.begin(), chain.end(), broadcasts[static_cast<size_t>(it)]);
    REQUIRE(at + 1 < chain.end());
    CHECK(t.g.tasks[static_cast<size_t>(*(at + 1))].phase == Phase::kForward);
  }
  REQUIRE(context.notes.size() == 2);
  CHECK_THAT(context.notes[1], Catch::Contains("4.0 kB of module buffers"));
  // Without buffer_bytes: no broadcast.
  TrainingGraph plain(o);
  REQUIRE(RunOk("data_parallel", {{"world_size", "2"}, {"network", "ethernet10"}}, plain.g));
  for (size_t i = 0; i < plain.g.tasks.size(); ++i) {
    CHECK(plain.g.TaskName(static_cast<int32_t>(i)).find("broadcast") == std::string_view::npos);
  }
}

TEST_CASE("data_parallel with broadcast_latency adds its extra for the iteration's length to each broadcast",
          "[comm]") {
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  auto broadcasts = [&](const std::string& points, PassContext* context) {
    TrainingGraph t(o);
    OptionMap options{{"world_size", "2"}, {"network", "ethernet10"}, {"buffer_bytes", "4096"}};
    if (!points.empty()) options["broadcast_latency"] = points;
    REQUIRE(RunOk("data_parallel", options, t.g, context));
    std::vector<TimeNs> out;
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      if (t.g.TaskName(static_cast<int32_t>(i)).find("broadcast buffers") == 0) out.push_back(t.g.tasks[i].duration_ns);
    }
    return out;
  };
  const TimeNs wire =
      CollectiveTime(Collective::kBroadcast, CollectiveAlgorithm::kRing, 4096, 2, *NetworkPreset("ethernet10"));
  CHECK(broadcasts("", nullptr) == std::vector<TimeNs>{wire, wire});
  // Flat after the last point.
  PassContext context;
  CHECK(broadcasts("0.001:700", &context) == std::vector<TimeNs>{wire + 700'000, wire + 700'000});
  CHECK_THAT(context.notes.back(), Catch::Contains("broadcast_latency"));
  // Linear between points, at the iteration's length before the pass: each
  // iteration of the fixture replays in the same time, so a line from 0 at
  // no step to 1000 us at twice that length gives 500 us.
  TrainingGraph plain(o);
  plain.g.BuildAdjacency();
  const Schedule replay = *Simulate(plain.g);
  const TimeNs span = IterationEndNs(replay, plain.g.iterations[0]) - IterationBeginNs(replay, plain.g.iterations[0]);
  REQUIRE(span > 0);
  const std::vector<TimeNs> mid = broadcasts(StrCat(2 * span / 1000.0, ":1000"), nullptr);
  REQUIRE(mid.size() == 2);
  CHECK(std::abs(mid[0] - (wire + 500'000)) <= 1);
  // A bad point is refused, naming the option.
  TrainingGraph t(o);
  const absl::Status s = RunError("data_parallel", {{"world_size", "2"}, {"buffer_bytes", "4096"},
                                                    {"broadcast_latency", "5:-1"}}, t.g);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("broadcast_latency: bad point '5:-1'"));
  // Checked even where nothing is communicated, as the other options are.
  TrainingGraph one(o);
  const absl::Status alone =
      RunError("data_parallel", {{"world_size", "1"}, {"broadcast_latency", "5:-1"}}, one.g);
  CHECK_THAT(std::string(alone.message()), Catch::Contains("broadcast_latency: bad point"));
}

// --- tensor_fusion ---------------------------------------------------------------------

// What tensor_fusion takes off `thread` for the recorded all-reduces' CPU
// share, found the plain way: in a replay of `recorded`, `share` of each
// task's time (and of its gap, the time after the thread's previous task)
// that some all-reduce's span covers, the calls that issued them aside, and
// no gap in which an all-reduce ended. Per trace event: (duration, gap) cut;
// .first/.second of the result: the totals.
std::pair<TimeNs, TimeNs> ExpectedShareCuts(const Graph& recorded, double share, int32_t thread,
                                            std::map<int64_t, std::pair<TimeNs, TimeNs>>* per_event = nullptr,
                                            std::vector<TimeNs>* calls_less_share = nullptr) {
  absl::StatusOr<Schedule> s = Simulate(recorded);
  REQUIRE(s.ok());
  std::vector<std::pair<TimeNs, TimeNs>> spans;
  for (size_t i = 0; i < recorded.tasks.size(); ++i) {
    const Task& t = recorded.tasks[i];
    if (t.kind == TaskKind::kCollective && t.iteration >= 0) spans.emplace_back(s->start_ns[i], s->end_ns[i]);
  }
  auto covered = [&](TimeNs a, TimeNs b) {  // time of [a, b) under any span, one nanosecond at a time
    TimeNs n = 0;
    for (TimeNs x = a; x < b; ++x) {
      for (const auto& [s0, s1] : spans) {
        if (x >= s0 && x < s1) {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  std::pair<TimeNs, TimeNs> total{0, 0};
  TimeNs previous_end = -1;
  for (size_t i = 0; i < recorded.tasks.size(); ++i) {  // ids in start order on the thread
    const Task& t = recorded.tasks[i];
    if (t.resource != thread) continue;
    if (recorded.Str(t.name) == "c10d::allreduce_") {
      if (calls_less_share != nullptr) {
        calls_less_share->push_back(t.duration_ns -
                                    RoundNs(share * static_cast<double>(covered(s->start_ns[i], s->end_ns[i]))));
      }
    } else {
      const TimeNs cut = RoundNs(share * static_cast<double>(covered(s->start_ns[i], s->end_ns[i])));
      TimeNs gap_cut = 0;
      if (previous_end >= 0 && t.gap_ns > 0) {
        const TimeNs gap_end = std::min(s->start_ns[i], previous_end + t.gap_ns);
        bool waited = false;
        for (const auto& [s0, s1] : spans) waited = waited || (s1 >= previous_end && s1 <= gap_end);
        if (!waited) gap_cut = RoundNs(share * static_cast<double>(covered(previous_end, gap_end)));
      }
      total.first += cut;
      total.second += gap_cut;
      if (per_event != nullptr) (*per_event)[t.trace_event] = {cut, gap_cut};
    }
    previous_end = s->end_ns[i];
  }
  return total;
}

TEST_CASE("tensor_fusion with comm_cpu_share replaces the calls that issued the recorded all-reduces", "[comm]") {
  TrainingGraphOptions o;
  o.gpu = false;  // gloo on CPU ranks: backward and the issuing calls on CPU thread "stream 7"
  o.gpu_optimizer = false;
  o.recorded_world = 2;
  o.issue_calls = true;
  auto issue_calls = [](const Graph& g) {
    std::vector<int32_t> out;
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      if (g.TaskName(static_cast<int32_t>(i)) == "c10d::allreduce_") out.push_back(static_cast<int32_t>(i));
    }
    return out;
  };
  TrainingGraph shared(o);
  REQUIRE(issue_calls(shared.g).size() == 6);  // 3 gradients x 2 iterations
  PassContext context;
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", "0.5"}},
                shared.g, &context));
  CHECK(issue_calls(shared.g).empty());
  // DDP's buckets ({2 MiB}, {3, 1 MiB}), their CPU shares on the thread that computes in their place.
  const std::vector<int32_t> inserted = Inserted(shared.g);
  REQUIRE(inserted.size() == 4);
  for (int32_t ar : inserted) {
    int32_t share = -1;
    for (size_t i = 0; i < shared.g.tasks.size(); ++i) {
      if (shared.g.TaskName(static_cast<int32_t>(i)) == std::string(shared.g.TaskName(ar)) + ": CPU share") {
        share = static_cast<int32_t>(i);
      }
    }
    REQUIRE(share >= 0);
    CHECK(shared.g.tasks[static_cast<size_t>(share)].resource == shared.gpu);
  }
  CHECK(shared.g.ValidateResourceChains().ok());
  CHECK_THAT(context.notes[0], Catch::Contains("replaced 6 recorded gradient all-reduces and the 6 calls"));
  // One call issues each new bucket's all-reduce, as long as the recorded
  // ones (20 us), on the thread, before the all-reduce.
  int calls = 0;
  for (size_t i = 0; i < shared.g.tasks.size(); ++i) {
    if (!StartsWith(shared.g.TaskName(static_cast<int32_t>(i)), "DDP reducer: bucket ")) continue;
    ++calls;
    CHECK(shared.g.tasks[i].duration_ns == 20 * kUs);
    CHECK(shared.g.tasks[i].resource == shared.gpu);
  }
  CHECK(calls == static_cast<int>(inserted.size()));
  CHECK_THAT(context.notes.back(), Catch::Contains("the recorded calls' median 20 us to issue each"));
  // The framework time before each call (DDP's hook) stays on the thread,
  // but for the last call's: nothing follows it there. (Less the recorded
  // all-reduces' CPU share where a gap overlapped one: the next test.)
  const TrainingGraph recorded(o);
  TimeNs gaps_before = 0, gaps_after = 0;
  for (const Task& t : recorded.g.tasks) gaps_before += t.gap_ns;
  for (const Task& t : shared.g.tasks) gaps_after += t.gap_ns;
  CHECK(gaps_after == gaps_before - 2 * kUs - ExpectedShareCuts(recorded.g, 0.5, recorded.gpu).second);
  // Without a CPU share nothing takes their place: they stay.
  TrainingGraph beside(o);
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}}, beside.g));
  CHECK(issue_calls(beside.g).size() == 6);
}

// gloo on CPU ranks with the calls that issued the recorded all-reduces,
// each all-reduce as long as a few backward tasks (64 kB), the 8 MiB
// broadcast before them short.
TrainingGraphOptions GlooRanksWithShortAllReduces() {
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  o.recorded_world = 2;
  o.issue_calls = true;
  o.grad_bytes = {64 * 1024, 64 * 1024, 64 * 1024};
  o.recorded_net.alpha_s = 30e-6;
  o.recorded_net.beta_bytes_per_s = 100e9;
  return o;
}

TEST_CASE("tensor_fusion issues each new bucket with what the recorded calls took before their all-reduce began",
          "[comm]") {
  // Each call issues its gradient's all-reduce 5 us into its 20 us (a
  // start-to-start edge). The rest of the call ran while the all-reduce did:
  // gloo's threads preempting the caller (as SCHED_FIFO ones do at once),
  // which the new buckets' CPU share prices; issuing one costs the 5 us.
  const TrainingGraphOptions o = GlooRanksWithShortAllReduces();
  TrainingGraph t(o);
  for (int it = 0; it < o.iterations; ++it) {
    std::vector<int32_t> calls, ars;
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      const Task& x = t.g.tasks[i];
      if (x.iteration != it) continue;
      if (t.g.Str(x.name) == "c10d::allreduce_") calls.push_back(static_cast<int32_t>(i));
      if (x.kind == TaskKind::kCollective && x.resource == t.nccl) ars.push_back(static_cast<int32_t>(i));
    }
    REQUIRE(calls.size() == 3);
    REQUIRE(ars.size() == 3);
    for (size_t j = 0; j < calls.size(); ++j) t.g.AddEdge(calls[j], ars[j], EdgeKind::kBlockingLaunch, 5 * kUs);
  }
  t.g.BuildAdjacency();
  PassContext context;
  // A small share: what it takes off a call (0.1 of the 15 us it overlapped)
  // is less than the time after its all-reduce began.
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", "0.1"}},
                t.g, &context));
  CHECK_THAT(context.notes.back(), Catch::Contains("the recorded calls' median 5 us to issue each"));
  int reducers = 0;
  for (const Task& x : t.g.tasks) {
    if (!StartsWith(t.g.Str(x.name), "DDP reducer: bucket ")) continue;
    ++reducers;
    CHECK(x.duration_ns == 5 * kUs);
  }
  CHECK(reducers > 0);
}

TEST_CASE("tensor_fusion takes the recorded all-reduces' CPU share off the work they overlapped", "[comm]") {
  // gloo's threads took comm_cpu_share of the core while each recorded
  // all-reduce ran, from whatever the thread that computes ran then: the
  // backward tasks and framework time after each issuing call.
  const TrainingGraphOptions o = GlooRanksWithShortAllReduces();
  const TrainingGraph recorded(o);
  std::map<int64_t, std::pair<TimeNs, TimeNs>> expected;
  std::vector<TimeNs> calls;
  const auto [duration_cut, gap_cut] = ExpectedShareCuts(recorded.g, 0.5, recorded.gpu, &expected, &calls);
  REQUIRE(duration_cut > 10 * kUs);  // the check below would pass on nothing
  // The calls hold the share of the all-reduces they overlap too: what is
  // left of them (their median) issues each new bucket.
  std::sort(calls.begin(), calls.end());
  REQUIRE(calls.size() == 6);
  const TimeNs call_ns = calls[3];
  REQUIRE(call_ns < 20 * kUs);
  TrainingGraph t(o);
  PassContext context;
  // 1 ms per ring step: each all-reduce's time on the network is longer than
  // its recorded span, so what it took is the share of the time it overlapped.
  const OptionMap slow_net = {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", "0.5"}};
  REQUIRE(RunOk("tensor_fusion", slow_net, t.g, &context));
  for (const Task& after : t.g.tasks) {
    auto it = expected.find(after.trace_event);
    if (after.resource != t.gpu || after.trace_event < 0 || it == expected.end()) continue;
    const Task& before = recorded.g.tasks[static_cast<size_t>(after.trace_event)];
    INFO(t.g.Str(after.name));
    CHECK(after.duration_ns == before.duration_ns - it->second.first);
  }
  // Gaps: less their cut, plus the framework time before each removed call
  // (2 us, which moves to the task after it; the last call's has none).
  REQUIRE(gap_cut > 0);
  TimeNs gaps_before = 0, gaps_after = 0;
  for (const Task& x : recorded.g.tasks) gaps_before += x.gap_ns;
  for (const Task& x : t.g.tasks) gaps_after += x.gap_ns;
  CHECK(gaps_after == gaps_before - 2 * kUs - gap_cut);
  CHECK_THAT(context.notes[0], Catch::Contains(StrCat(static_cast<double>(duration_cut + gap_cut) / 1e6,
                                                      " ms of the issuing thread's other work")));
  CHECK_THAT(context.notes.back(), Catch::Contains(StrCat("the recorded calls' median ",
                                                          static_cast<double>(call_ns) / 1e3, " us to issue each")));
  // On a fast network an all-reduce takes no more than the share of its
  // time there, however long its recorded span: here 1 us each (65536 B at
  // 65.536 GB/s, no latency), so at most 0.5 us each is taken.
  TrainingGraph fast(o);
  PassContext fast_context;
  REQUIRE(RunOk("tensor_fusion",
                {{"network", "ethernet10"}, {"latency_us", "0"}, {"bandwidth_gbps", "65.536"}, {"comm_cpu_share", "0.5"}},
                fast.g, &fast_context));
  TimeNs fast_cut = 0;
  for (const Task& after : fast.g.tasks) {
    if (after.resource != fast.gpu || after.trace_event < 0 || expected.count(after.trace_event) == 0) continue;
    fast_cut += recorded.g.tasks[static_cast<size_t>(after.trace_event)].duration_ns - after.duration_ns;
  }
  CHECK(fast_cut > 0);
  CHECK(fast_cut <= 3 * kUs);  // 6 all-reduces
  // Without a share, nothing is taken off.
  TrainingGraph beside(o);
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}}, beside.g));
  TimeNs work_before = 0, work_after = 0;
  for (const Task& x : recorded.g.tasks) work_before += x.resource == recorded.gpu && recorded.g.Str(x.name) != "c10d::allreduce_" ? x.duration_ns : 0;
  for (const Task& x : beside.g.tasks) work_after += x.resource == beside.gpu && beside.g.Str(x.name) != "c10d::allreduce_" ? x.duration_ns : 0;
  CHECK(work_after == work_before);
}

TEST_CASE("tensor_fusion with bucket_cpu_latency takes the recorded all-reduces' latency off the work they "
          "overlapped, with no CPU share", "[comm]") {
  // The new all-reduces' latencies go on the thread; the recorded ones' came
  // off it in the same way: their latency whole (here 2 ms each, longer than
  // any overlap, so all the overlapped time), plus the share of the rest.
  const TrainingGraphOptions o = GlooRanksWithShortAllReduces();
  const TrainingGraph recorded(o);
  std::map<int64_t, std::pair<TimeNs, TimeNs>> expected;
  const auto [duration_cut, gap_cut] = ExpectedShareCuts(recorded.g, 1.0, recorded.gpu, &expected);
  REQUIRE(duration_cut > 10 * kUs);
  TrainingGraph t(o);
  PassContext context;
  REQUIRE(RunOk("tensor_fusion",
                {{"network", "ethernet10"}, {"latency_us", "1000"}, {"bucket_cpu_latency", "1:100"}}, t.g, &context));
  for (const Task& after : t.g.tasks) {
    CHECK(t.g.Str(after.name) != "c10d::allreduce_");  // one call per new bucket issues it instead
    auto it = expected.find(after.trace_event);
    if (after.resource != t.gpu || after.trace_event < 0 || it == expected.end()) continue;
    const Task& before = recorded.g.tasks[static_cast<size_t>(after.trace_event)];
    INFO(t.g.Str(after.name));
    CHECK(after.duration_ns == before.duration_ns - it->second.first);
  }
  CHECK_THAT(context.notes[0], Catch::Contains("replaced 6 recorded gradient all-reduces and the 6 calls"));
  CHECK_THAT(context.notes.back(),
             Catch::Contains("the all-reduces' latencies, paid by the issuing thread before each"));
}

// tensor_fusion (with a CPU share) refuses each of `bad` as `option`'s value,
// naming the option.
void CheckRefusedByName(const TrainingGraphOptions& o, const std::string& option,
                        std::initializer_list<const char*> bad) {
  for (const char* value : bad) {
    INFO(value);
    TrainingGraph t(o);
    const absl::Status s = RunError("tensor_fusion", {{"comm_cpu_share", "0.5"}, {option, value}}, t.g);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains(option));
  }
}

TEST_CASE("tensor_fusion with recorded_cpu_wait_us takes the measured wait for a core off the overlapped work",
          "[comm]") {
  // The thread that computes was measured to wait W us for a core in each
  // recorded iteration: that much of its time overlapped by the recorded
  // all-reduces goes, shared among them by overlap, instead of
  // comm_cpu_share of their time; never more than they overlapped.
  const TrainingGraphOptions o = GlooRanksWithShortAllReduces();
  const TrainingGraph recorded(o);
  // With share 1 on a slow network the share model takes all the overlap:
  // the most a measured wait can take.
  std::vector<TimeNs> calls;
  const auto [all_tasks, all_gaps] = ExpectedShareCuts(recorded.g, 1.0, recorded.gpu, nullptr, &calls);
  const TimeNs overlap = all_tasks + all_gaps;
  REQUIRE(overlap > 40 * kUs);  // 2 iterations: 20 us and more each
  // The calls that issued the all-reduces were waiting too: their part of
  // the wait goes with them (what is left of them issues each new bucket).
  TimeNs calls_overlap = 0;
  for (TimeNs left : calls) calls_overlap += 20 * kUs - left;
  REQUIRE(calls_overlap > 0);
  // The two iterations are alike: of a wait, this fraction is the other work's.
  const double others = static_cast<double>(overlap) / static_cast<double>(overlap + calls_overlap);
  // The thread's work and gaps after the pass (the inserted calls and
  // shares aside); a wait of 0 takes nothing, and is the reference.
  auto work_after = [&](const std::string& waits, const char* share, std::string* note = nullptr) {
    TrainingGraph t(o);
    PassContext context;
    REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", share},
                                    {"recorded_cpu_wait_us", waits}},
                  t.g, &context));
    if (note != nullptr) *note = context.notes[0];
    TimeNs work = 0;
    for (const Task& x : t.g.tasks) {
      if (x.resource == t.gpu && x.phase != Phase::kComm) work += x.duration_ns + x.gap_ns;
    }
    return work;
  };
  const TimeNs untouched = work_after("0;0", "0.5");
  std::string note;
  const auto expected = static_cast<TimeNs>(std::llround(others * 12 * kUs));  // 5 + 7 us
  CHECK(std::llabs(untouched - work_after("5;7", "0.5", &note) - expected) <= 12);  // rounded piece by piece
  CHECK_THAT(note, Catch::Contains("the time it waited for a core while the recorded all-reduces ran "
                                   "(recorded_cpu_wait_us)"));
  // The share does not matter once the wait is given, as long as there is one.
  CHECK(std::llabs(untouched - work_after("5;7", "0.1") - expected) <= 12);
  // A wait longer than the overlap takes the overlap.
  CHECK(std::llabs(untouched - work_after("1000000;1000000", "0.5") - overlap) <= 24);
  // Bad values and counts are refused by name.
  CheckRefusedByName(o, "recorded_cpu_wait_us", {"5", "5;7;9", "5;-1", "5;x"});
}

// The issuing thread's time in each iteration's window for
// unprofiled_cpu_wait_us, in a replay of `recorded`: from its first backward
// task (the framework time before it included) to the end of its last
// recorded all-reduce; a gap in which an all-reduce ended is idle, not work.
// [iteration] -> {the other work's time, the issuing calls'}.
std::vector<std::pair<TimeNs, TimeNs>> BackwardWindowTimes(const Graph& recorded, int32_t thread) {
  absl::StatusOr<Schedule> s = Simulate(recorded);
  REQUIRE(s.ok());
  const size_t n = recorded.iterations.size();
  std::vector<TimeNs> lo(n, std::numeric_limits<TimeNs>::max()), hi(n, 0);
  std::vector<TimeNs> ends;
  for (size_t i = 0; i < recorded.tasks.size(); ++i) {
    const Task& t = recorded.tasks[i];
    if (t.kind != TaskKind::kCollective || t.iteration < 0) continue;
    ends.push_back(s->end_ns[i]);
    hi[static_cast<size_t>(t.iteration)] = std::max(hi[static_cast<size_t>(t.iteration)], s->end_ns[i]);
  }
  struct Stretch {
    TimeNs from, to;
    int32_t iteration;
    bool call;
  };
  std::vector<Stretch> stretches;
  TimeNs previous_end = -1;
  for (size_t i = 0; i < recorded.tasks.size(); ++i) {  // ids in start order on the thread
    const Task& t = recorded.tasks[i];
    if (t.resource != thread) continue;
    const bool call = recorded.Str(t.name) == "c10d::allreduce_";
    if (previous_end >= 0 && t.gap_ns > 0 && !call) {
      const TimeNs gap_end = std::min(s->start_ns[i], previous_end + t.gap_ns);
      bool waited = false;
      for (TimeNs e : ends) waited = waited || (e >= previous_end && e <= gap_end);
      if (!waited) stretches.push_back({previous_end, gap_end, t.iteration, false});
      if (!waited && t.phase == Phase::kBackward) lo[static_cast<size_t>(t.iteration)] = std::min(lo[static_cast<size_t>(t.iteration)], previous_end);
    }
    stretches.push_back({s->start_ns[i], s->end_ns[i], t.iteration, call});
    if (t.phase == Phase::kBackward) lo[static_cast<size_t>(t.iteration)] = std::min(lo[static_cast<size_t>(t.iteration)], s->start_ns[i]);
    previous_end = s->end_ns[i];
  }
  std::vector<std::pair<TimeNs, TimeNs>> out(n, {0, 0});
  for (const Stretch& x : stretches) {
    if (x.iteration < 0) continue;
    const auto it = static_cast<size_t>(x.iteration);
    const TimeNs o = std::max<TimeNs>(0, std::min(x.to, hi[it]) - std::max(x.from, lo[it]));
    (x.call ? out[it].second : out[it].first) += o;
  }
  return out;
}

TEST_CASE("tensor_fusion with unprofiled_cpu_wait_us takes the unprofiled wait for a core off the whole backward",
          "[comm]") {
  // The thread that computes waited W us a step for a core after the
  // forward, measured without the profiler: that much of each iteration's
  // time on it, from its backward to its last recorded all-reduce's end,
  // goes with the all-reduces, in proportion to each stretch's time there,
  // not only what they overlapped (gloo's loop thread takes the core while
  // the other rank's data waits for this rank's all-reduce, before its span
  // begins), instead of recorded_cpu_wait_us.
  const TrainingGraphOptions o = GlooRanksWithShortAllReduces();
  const TrainingGraph recorded(o);
  const TimeNs overlap = [&] {
    const auto [tasks, gaps] = ExpectedShareCuts(recorded.g, 1.0, recorded.gpu);
    return tasks + gaps;
  }();
  const std::vector<std::pair<TimeNs, TimeNs>> window = BackwardWindowTimes(recorded.g, recorded.gpu);
  REQUIRE(window.size() == 2);
  auto work_after = [&](const OptionMap& waits, std::string* note = nullptr) {
    TrainingGraph t(o);
    PassContext context;
    OptionMap options = {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", "0.5"}};
    options.insert(waits.begin(), waits.end());
    REQUIRE(RunOk("tensor_fusion", options, t.g, &context));
    if (note != nullptr) *note = context.notes[0];
    TimeNs work = 0;
    for (const Task& x : t.g.tasks) {
      if (x.resource == t.gpu && x.phase != Phase::kComm) work += x.duration_ns + x.gap_ns;
    }
    return work;
  };
  const TimeNs untouched = work_after({{"unprofiled_cpu_wait_us", "0"}});
  CHECK(untouched == work_after({{"recorded_cpu_wait_us", "0;0"}}));
  // 180 us a step: more than the recorded all-reduces overlapped, less than the window.
  const TimeNs wait = 180 * kUs;
  REQUIRE(overlap < 2 * wait);
  double expected = 0;
  TimeNs others = 0;
  for (const auto& [work, calls] : window) {
    REQUIRE(work + calls > wait);
    expected += static_cast<double>(wait) * static_cast<double>(work) / static_cast<double>(work + calls);
    others += work;
  }
  std::string note;
  const TimeNs taken = untouched - work_after({{"unprofiled_cpu_wait_us", "180"}}, &note);
  CHECK(std::llabs(taken - std::llround(expected)) <= 24);  // rounded piece by piece
  // The same wait as recorded_cpu_wait_us takes at most the overlap.
  const TimeNs capped = untouched - work_after({{"recorded_cpu_wait_us", "180;180"}});
  CHECK(capped <= overlap + 24);
  CHECK(taken > overlap + 24);
  CHECK_THAT(note, Catch::Contains("(unprofiled_cpu_wait_us), from each iteration's backward"));
  // Given both, the unprofiled wait is what goes.
  CHECK(untouched - work_after({{"unprofiled_cpu_wait_us", "180"}, {"recorded_cpu_wait_us", "5;7"}}) == taken);
  // A wait longer than the window takes all of the window's work.
  CHECK(std::llabs(untouched - work_after({{"unprofiled_cpu_wait_us", "1000000"}}) - others) <= 24);
  // Bad values are refused by name.
  CheckRefusedByName(o, "unprofiled_cpu_wait_us", {"-2", "1e10", "nan", "x"});
}

TEST_CASE("tensor_fusion drops a wait for a recorded all-reduce by a task that ran before the gradients were all produced",
          "[comm]") {
  // The builder links a thread that resumed right after an all-reduce ended
  // to it; mid-backward that is gloo's thread giving the core back, not a
  // wait for the result. Here bwd2#0 (the iteration's last gradient) is
  // linked so to the iteration's first recorded all-reduce.
  TrainingGraphOptions o = CpuRanks();
  o.recorded_world = 2;
  o.issue_calls = true;
  TrainingGraph t(o);
  int32_t bwd2 = -1, first_ar = -1;
  for (size_t i = 0; i < t.g.tasks.size(); ++i) {
    if (t.g.TaskName(static_cast<int32_t>(i)) == "bwd2#0") bwd2 = static_cast<int32_t>(i);
    if (first_ar < 0 && t.g.tasks[i].kind == TaskKind::kCollective && t.g.tasks[i].iteration == 0) {
      first_ar = static_cast<int32_t>(i);
    }
  }
  REQUIRE(bwd2 >= 0);
  REQUIRE(first_ar >= 0);
  t.g.AddEdge(first_ar, bwd2, EdgeKind::kThread, 3 * kUs);
  t.g.BuildAdjacency();
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  for (size_t i = 0; i < t.g.tasks.size(); ++i) t.g.tasks[i].recorded_start_ns = s->start_ns[i];
  const int64_t bwd2_event = t.g.tasks[static_cast<size_t>(bwd2)].trace_event;
  PassContext context;
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"comm_cpu_share", "0.5"}}, t.g, &context));
  int32_t after = -1;
  for (size_t i = 0; i < t.g.tasks.size(); ++i) {
    if (t.g.tasks[i].trace_event == bwd2_event) after = static_cast<int32_t>(i);
  }
  REQUIRE(after >= 0);
  t.g.BuildAdjacency();
  for (int32_t e : t.g.in_edges(after)) {
    INFO(t.g.TaskName(t.g.edges[static_cast<size_t>(e)].from));
    CHECK(t.g.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential);  // its thread's order, nothing bridged
  }
  CHECK_THAT(context.notes[0], Catch::Contains("; 1 waits for them by tasks that ran before their iteration's "
                                               "gradients were all produced go too"));
}

TEST_CASE("tensor_fusion never makes a gradient's producer wait for the all-reduce of its gradient", "[comm]") {
  // The builder linked the thread's resume at bwd2#0, the iteration's last
  // gradient, to a recorded all-reduce (as in the test above). Such a wait
  // goes: its task did not start after the gradients were all produced.
  // Whether it did is read from the recorded times, before the recorded
  // all-reduces' CPU share shortens the producer (a share near 1 can take
  // its whole span), and a producer of zero recorded length, which ends
  // where it starts, is never taken for a waiter either. Either mistake made
  // the producer wait for its own gradient's all-reduce: a cycle.
  for (const bool zero_length : {false, true}) {
    for (const char* share : {"0.5", "1"}) {
      INFO("zero_length " << zero_length << ", comm_cpu_share " << share);
      TrainingGraphOptions o = CpuRanks();
      o.recorded_world = 2;
      o.issue_calls = true;
      // Recorded all-reduces long enough that the next one spans bwd2 whole.
      o.recorded_net.alpha_s = 200e-6;
      TrainingGraph t(o);
      std::vector<int32_t> last(2, -1), first_ar(2, -1);
      for (size_t i = 0; i < t.g.tasks.size(); ++i) {
        const Task& task = t.g.tasks[i];
        for (int it = 0; it < 2; ++it) {
          if (t.g.TaskName(static_cast<int32_t>(i)) == StrCat("bwd2#", it)) last[static_cast<size_t>(it)] = static_cast<int32_t>(i);
          if (first_ar[static_cast<size_t>(it)] < 0 && task.kind == TaskKind::kCollective && task.iteration == it) {
            first_ar[static_cast<size_t>(it)] = static_cast<int32_t>(i);
          }
        }
      }
      for (size_t it = 0; it < 2; ++it) {
        REQUIRE(last[it] >= 0);
        REQUIRE(first_ar[it] >= 0);
        if (zero_length) t.g.tasks[static_cast<size_t>(last[it])].duration_ns = 0;
        t.g.AddEdge(first_ar[it], last[it], EdgeKind::kThread, 3 * kUs);
      }
      t.g.BuildAdjacency();
      absl::StatusOr<Schedule> s = Simulate(t.g);
      REQUIRE(s.ok());
      for (size_t i = 0; i < t.g.tasks.size(); ++i) t.g.tasks[i].recorded_start_ns = s->start_ns[i];
      // 1 ms per ring step: every all-reduce is longer on the network than
      // its recorded span, so the share of all it overlapped is taken.
      PassContext context;
      REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "1000"}, {"comm_cpu_share", share}},
                    t.g, &context));
      t.g.BuildAdjacency();
      for (int32_t ar : Inserted(t.g)) {
        for (int32_t e : t.g.out_edges(ar)) {
          INFO(t.g.TaskName(t.g.edges[static_cast<size_t>(e)].to));
          CHECK(!StartsWith(t.g.TaskName(t.g.edges[static_cast<size_t>(e)].to), "bwd"));
        }
      }
    }
  }
}

TEST_CASE("tensor_fusion makes what waited for the recorded all-reduces wait for the new buckets", "[comm]") {
  // DDP's finalize copies the buckets back into the gradients once every
  // all-reduce is done; the CPU optimizer (on another thread) waits for the
  // new buckets anyway, the finalize only through its recorded edge.
  TrainingGraphOptions o = CpuRanks();
  o.recorded_world = 2;
  o.finalize = true;
  TrainingGraph t(o);
  const std::vector<std::string> names = {"copy_bucket_to_grad#0", "copy_bucket_to_grad#1"};
  PassContext context;
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "500"}}, t.g, &context));
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 2);  // one bucket per iteration
  for (size_t it = 0; it < names.size(); ++it) {
    int32_t fin = -1;
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      if (t.g.TaskName(static_cast<int32_t>(i)) == names[it]) fin = static_cast<int32_t>(i);
    }
    REQUIRE(fin >= 0);
    // 1 ms of latency: the finalize would otherwise start right after backward.
    CHECK(s->start_ns[static_cast<size_t>(fin)] >= s->end_ns[static_cast<size_t>(inserted[it])]);
  }
  CHECK_THAT(context.notes.back(), Catch::Contains("2 tasks that waited for the recorded all-reduces"));
}

TEST_CASE("tensor_fusion finds a wait for the recorded all-reduces in a task's gap", "[comm]") {
  TrainingGraphOptions o = CpuRanks();
  o.recorded_world = 2;
  o.finalize = true;
  o.finalize_gap_wait = true;
  TrainingGraph recorded(o);
  // Recorded: each finalize starts 5 ms after backward, its last all-reduce
  // ended in between; `lag` is how long after that end it started.
  absl::StatusOr<Schedule> before = Simulate(recorded.g);
  REQUIRE(before.ok());
  std::vector<TimeNs> lag;
  for (size_t it = 0; it < recorded.finalize.size(); ++it) {
    TimeNs last_end = 0;
    for (int32_t c : TasksOfKind(recorded.g, TaskKind::kCollective)) {
      if (recorded.g.tasks[static_cast<size_t>(c)].iteration == static_cast<int32_t>(it)) {
        last_end = std::max(last_end, before->end_ns[static_cast<size_t>(c)]);
      }
    }
    const TimeNs start = before->start_ns[static_cast<size_t>(recorded.finalize[it])];
    REQUIRE(last_end < start);
    lag.push_back(start - last_end);
  }
  TrainingGraph t(o);
  PassContext context;
  // 10 ms all-reduces: longer than the 5 ms gap.
  REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}, {"latency_us", "5000"}}, t.g, &context));
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 2);
  for (size_t it = 0; it < 2; ++it) {
    int32_t fin = -1;
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      if (t.g.TaskName(static_cast<int32_t>(i)) == "copy_bucket_to_grad#" + std::to_string(it)) {
        fin = static_cast<int32_t>(i);
      }
    }
    REQUIRE(fin >= 0);
    // The gap held the wait: it goes; the wake-up becomes the edge's lag,
    // at most the builder's longest (this one woke milliseconds late).
    CHECK(t.g.tasks[static_cast<size_t>(fin)].gap_ns == 0);
    REQUIRE(lag[it] > BuildOptions{}.max_thread_wake_ns);
    CHECK(s->start_ns[static_cast<size_t>(fin)] ==
          s->end_ns[static_cast<size_t>(inserted[it])] + BuildOptions{}.max_thread_wake_ns);
  }
  CHECK_THAT(context.notes.back(), Catch::Contains("2 tasks that waited for the recorded all-reduces"));
}

TEST_CASE("tensor_fusion reads a wait in a gap only for collectives that CPU threads run", "[comm]") {
  // The CPU thread's optimizer call starts 5 ms after its previous task;
  // the recorded all-reduces end in between. Run by gloo's thread (CPU
  // ranks), that idle time was a wait; run on a GPU stream (NCCL), the
  // thread did not wait for them and its gap stays.
  for (const bool gpu : {false, true}) {
    TrainingGraphOptions o = gpu ? TrainingGraphOptions{} : CpuRanks();
    o.recorded_world = 2;
    o.cpu_opt_gap = 5000 * kUs;
    TrainingGraph t(o);
    REQUIRE(t.cpu_opt[0] >= 0);
    const std::string name(t.g.TaskName(t.cpu_opt[0]));
    REQUIRE(RunOk("tensor_fusion", {{"network", "ethernet10"}}, t.g));
    for (size_t i = 0; i < t.g.tasks.size(); ++i) {
      if (t.g.TaskName(static_cast<int32_t>(i)) == name) {
        CHECK(t.g.tasks[i].gap_ns == (gpu ? 5000 * kUs : 0));
      }
    }
  }
}

TEST_CASE("tensor_fusion leaves DDP's reducer work to the recorded graph, and models it on a single-device one",
          "[comm]") {
  auto reducers = [](const Graph& g) {
    int n = 0;
    for (size_t i = 0; i < g.tasks.size(); ++i) n += StartsWith(g.TaskName(static_cast<int32_t>(i)), "DDP reducer") ? 1 : 0;
    return n;
  };
  TrainingGraphOptions o;
  o.gpu = false;
  o.gpu_optimizer = false;
  const OptionMap options = {{"network", "ethernet10"}, {"ddp_cpu_us", "100"}, {"ddp_cpu_per_gradient_us", "5"}};
  SECTION("recorded data-parallel: already in the trace") {
    o.recorded_world = 2;
    TrainingGraph t(o);
    PassContext context;
    REQUIRE(RunOk("tensor_fusion", options, t.g, &context));
    CHECK(reducers(t.g) == 0);
    bool noted = false;
    for (const std::string& note : context.notes) noted = noted || note.find("ddp_cpu_us and ddp_cpu_per_gradient_us ignored") != std::string::npos;
    CHECK(noted);
  }
  SECTION("single-device, as data_parallel") {
    TrainingGraph t(o);
    OptionMap single = options;
    single["world_size"] = "2";
    REQUIRE(RunOk("tensor_fusion", single, t.g));
    CHECK(reducers(t.g) > 0);
  }
}

TEST_CASE("tensor_fusion on a single-device graph needs world_size", "[comm]") {
  TrainingGraph t;
  const absl::Status s = RunError("tensor_fusion", {}, t.g);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("single-device") && Catch::Contains("world_size"));
}

TEST_CASE("tensor_fusion on a single-device graph acts as data_parallel", "[comm]") {
  const char* bucket_mb = GENERATE("0", "2.5", "25");
  INFO("bucket_mb=" << bucket_mb);
  TrainingGraph a, b;
  REQUIRE(RunOk("tensor_fusion", {{"world_size", "4"}, {"bucket_mb", bucket_mb}}, a.g));
  REQUIRE(RunOk("data_parallel", {{"world_size", "4"}, {"bucket_mb", bucket_mb}}, b.g));
  CheckSameGraph(a.g, b.g);
}

TEST_CASE("tensor_fusion replaces recorded all-reduces and times its own by a network fitted to them", "[comm]") {
  TrainingGraphOptions o;
  o.recorded_world = 4;
  o.recorded_net.alpha_s = 12e-6;
  o.recorded_net.beta_bytes_per_s = 6e9;
  o.grad_bytes = {2 * kMiB, 3 * kMiB, 1 * kMiB, 5 * kMiB};
  TrainingGraph t(o);
  std::vector<TimeNs> recorded;
  for (int32_t c : TasksOfKind(t.g, TaskKind::kCollective)) {
    if (t.g.TaskName(c).find("AllReduce") != std::string::npos) recorded.push_back(t.g.tasks[static_cast<size_t>(c)].duration_ns);
  }
  REQUIRE(recorded.size() == 8);
  PassContext context;
  REQUIRE(RunOk("tensor_fusion", {{"bucket_mb", "0"}}, t.g, &context));  // world size 4 from the graph
  for (int32_t c : TasksOfKind(t.g, TaskKind::kCollective)) {
    CHECK(t.g.TaskName(c).find("AllReduce") == std::string::npos);
  }
  // The broadcast is not a gradient all-reduce: it stays.
  int broadcasts = 0;
  for (int32_t c : TasksOfKind(t.g, TaskKind::kCollective)) broadcasts += t.g.TaskName(c).find("Broadcast") != std::string::npos;
  CHECK(broadcasts == 1);
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == recorded.size());
  // One gradient per bucket, as recorded: the fitted network gives back the
  // recorded times.
  for (size_t i = 0; i < inserted.size(); ++i) {
    INFO(t.g.TaskName(inserted[i]));
    CHECK(std::llabs(t.g.tasks[static_cast<size_t>(inserted[i])].duration_ns - recorded[i]) <= 2);
  }
  CHECK(t.g.Validate().ok());
  CHECK(t.g.ValidateResourceChains().ok());
  REQUIRE(context.notes.size() == 2);
  CHECK_THAT(context.notes[0], Catch::Contains("replaced 8 recorded gradient all-reduces"));
  CHECK_THAT(context.notes[1], Catch::Contains("trace fit") && Catch::Contains("4 ranks"));
  // The optimizer still waits for the (new) communication.
  absl::StatusOr<Schedule> s = Simulate(t.g);
  REQUIRE(s.ok());
  for (int32_t ar : inserted) {
    const auto it = static_cast<size_t>(t.g.tasks[static_cast<size_t>(ar)].iteration);
    const int32_t opt = testing::TaskNamed(t.g, "opt#" + std::to_string(it));
    CHECK(s->start_ns[static_cast<size_t>(opt)] >= s->end_ns[static_cast<size_t>(ar)]);
  }
}

TEST_CASE("tensor_fusion fuses recorded all-reduces into fewer, larger ones", "[comm]") {
  TrainingGraphOptions o;
  o.recorded_world = 4;
  o.grad_bytes = {2 * kMiB, 3 * kMiB, 1 * kMiB, 5 * kMiB};
  TrainingGraph t(o);
  REQUIRE(RunOk("tensor_fusion", {{"bucket_mb", "100"}, {"first_bucket_mb", "100"}}, t.g));
  const std::vector<int32_t> inserted = Inserted(t.g);
  REQUIRE(inserted.size() == 2);  // one per iteration
  CHECK(t.g.tasks[static_cast<size_t>(inserted[0])].bytes == 11 * kMiB);
}

TEST_CASE("tensor_fusion needs the world size of a trace that does not say it", "[comm]") {
  TrainingGraphOptions o;
  o.recorded_world = 4;
  TrainingGraph t(o);
  t.g.world_size = -1;
  const absl::Status s = RunError("tensor_fusion", {}, t.g);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("world_size"));
  TrainingGraph u(o);
  u.g.world_size = -1;
  CHECK(RunOk("tensor_fusion", {{"world_size", "4"}}, u.g));
}

// --- real traces -----------------------------------------------------------------------

TEST_CASE("data_parallel on the ResNet-50 trace all-reduces its 25.6 M parameters", "[comm]") {
  Graph g = ResNetGraph();
  int64_t grad_bytes = 0;
  for (const Tensor& t : g.tensors) grad_bytes += t.role == TensorRole::kGradient ? t.bytes : 0;
  REQUIRE(grad_bytes > 0);
  PassContext context;
  REQUIRE(RunOk("data_parallel", {{"world_size", "8"}}, g, &context));
  const std::vector<int32_t> inserted = Inserted(g);
  REQUIRE_FALSE(inserted.empty());
  // Every iteration all-reduces every gradient byte once.
  std::vector<int64_t> per_iteration(g.iterations.size(), 0);
  for (int32_t ar : inserted) {
    const Task& t = g.tasks[static_cast<size_t>(ar)];
    REQUIRE(t.iteration >= 0);
    per_iteration[static_cast<size_t>(t.iteration)] += t.bytes;
  }
  for (size_t i = 0; i < per_iteration.size(); ++i) {
    INFO("iteration " << i);
    CHECK(per_iteration[i] == grad_bytes);
  }
  CHECK(grad_bytes == Approx(25.56e6 * 4).epsilon(0.01));
  CHECK(g.Validate().ok());
  CHECK(g.ValidateResourceChains().ok());
}

TEST_CASE("tensor_fusion replaces the all-reduces of a real 2-rank DDP trace", "[comm]") {
  Graph g = DdpGraph();
  REQUIRE(g.world_size == 2);
  size_t recorded = 0;
  for (int32_t c : TasksOfKind(g, TaskKind::kCollective)) {
    absl::StatusOr<Collective> kind = CollectiveOfTaskName(g.TaskName(c));
    recorded += kind.ok() && *kind == Collective::kAllReduce && g.tasks[static_cast<size_t>(c)].iteration >= 0;
  }
  REQUIRE(recorded > 0);
  PassContext context;
  REQUIRE(RunOk("tensor_fusion", {}, g, &context));
  for (int32_t c : TasksOfKind(g, TaskKind::kCollective)) {
    absl::StatusOr<Collective> kind = CollectiveOfTaskName(g.TaskName(c));
    if (kind.ok() && *kind == Collective::kAllReduce && g.TaskName(c).rfind("all_reduce bucket", 0) != 0) {
      CHECK(g.tasks[static_cast<size_t>(c)].iteration < 0);  // outside the iterations: left alone
    }
  }
  CHECK_FALSE(Inserted(g).empty());
  REQUIRE_FALSE(context.notes.empty());
  CHECK_THAT(context.notes[0], Catch::Contains("replaced " + std::to_string(recorded)));
  CHECK(g.Validate().ok());
  CHECK(g.ValidateResourceChains().ok());
}

TEST_CASE("data_parallel refuses a real DDP trace: it already communicates", "[comm]") {
  Graph g = DdpGraph();
  const absl::Status s = RunError("data_parallel", {{"world_size", "4"}}, g);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("already communicates"));
}
