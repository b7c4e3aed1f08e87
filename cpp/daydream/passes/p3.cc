#include "daydream/passes/p3.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/cost/collectives.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string Mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g MB", bytes / kMiB);
  return buf;
}

bool IsGpuActivity(TaskKind kind) {
  return kind == TaskKind::kKernel || kind == TaskKind::kMemcpy || kind == TaskKind::kMemset;
}

bool IsAllReduce(const Graph& g, const Task& t) {
  if (t.kind != TaskKind::kCollective) return false;
  absl::StatusOr<Collective> c = CollectiveOfTaskName(g.Str(t.name));
  return c.ok() && *c == Collective::kAllReduce;
}

// Time of one all-reduce of `bytes`: either a line fitted to the all-reduces
// the graph has (t = fixed + bytes * per_byte: the alpha-beta model for a
// fixed number of ranks and algorithm), or the alpha-beta model of a network.
struct AllReduceCost {
  bool fitted = true;
  double fixed_ns = 0;
  double ns_per_byte = 0;
  int world_size = 0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NetworkModel network;

  TimeNs operator()(int64_t bytes) const {
    if (!fitted) return CollectiveTime(Collective::kAllReduce, algorithm, bytes, world_size, network);
    return RoundNs(fixed_ns + ns_per_byte * static_cast<double>(std::max<int64_t>(0, bytes)));
  }

  std::string Describe() const {
    if (!fitted) {
      return StrCat(network.source, " (", network.beta_bytes_per_s / 1e9, " GB/s, ", network.alpha_s * 1e6, " us), ",
                    world_size, " ranks, ", algorithm == CollectiveAlgorithm::kRing ? "ring" : "tree");
    }
    return StrCat("fitted to the all-reduces: ", fixed_ns / 1e3, " us + bytes at ",
                  ns_per_byte > 0 ? 1.0 / ns_per_byte : 0.0, " GB/s");
  }
};

// Least squares t = a + b x over (bytes, ns); needs two sizes. A negative
// term means the data do not support it: the other is refitted alone.
absl::StatusOr<AllReduceCost> FitCost(const std::vector<std::pair<int64_t, TimeNs>>& samples) {
  std::set<int64_t> sizes;
  double n = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (const auto& [bytes, ns] : samples) {
    if (bytes <= 0 || ns <= 0) continue;
    const auto x = static_cast<double>(bytes), t = static_cast<double>(ns);
    n += 1, sx += x, st += t, sxx += x * x, sxt += x * t;
    sizes.insert(bytes);
  }
  if (sizes.size() < 2) {
    return absl::FailedPreconditionError(StrCat(
        "p3: cannot reconstruct the network's latency and bandwidth from the all-reduces: ",
        sizes.empty() ? std::string("none has a size and a duration")
                      : StrCat("all ", static_cast<int64_t>(n), " carry ", *sizes.begin(), " bytes"),
        "; pass network=<preset> (", [] {
          std::string names;
          for (const std::string& p : NetworkPresetNames()) StrAppend(&names, names.empty() ? "" : ", ", p);
          return names;
        }(), ") and world_size=N"));
  }
  AllReduceCost cost;
  const double var = n * sxx - sx * sx;
  double b = (n * sxt - sx * st) / var;
  double a = (st - b * sx) / n;
  if (a < 0) {
    a = 0;
    b = sxt / sxx;
  }
  if (b < 0) {
    b = 0;
    a = st / n;
  }
  cost.fixed_ns = a;
  cost.ns_per_byte = b;
  return cost;
}

// One all-reduce to slice and the gradients it carries, in ready order.
struct AllReduce {
  int32_t task = -1;
  int32_t iteration = -1;
  int64_t bytes = 0;
  std::vector<int32_t> members;
};

class P3Pass : public Pass {
 public:
  explicit P3Pass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "p3"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const double slice_mb = o_.Double("slice_mb");
    if (!(slice_mb > 0)) {
      return absl::InvalidArgumentError(
          StrCat("p3: slice_mb must be > 0 (got ", slice_mb, "): it is the size of the pieces gradients are sent in"));
    }
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    const Graph& g = graph;
    std::vector<AllReduce> all_reduces;
    int64_t recorded = 0;
    for (size_t i = 0; i < g.tasks.size(); ++i) {
      const Task& t = g.tasks[i];
      if (!IsAllReduce(g, t)) continue;
      if (g.resources[static_cast<size_t>(t.resource)].kind == ResourceKind::kCommChannel) {
        all_reduces.push_back(AllReduce{static_cast<int32_t>(i), t.iteration, std::max<int64_t>(0, t.bytes), {}});
      } else {
        ++recorded;
      }
    }
    if (all_reduces.empty()) {
      return absl::FailedPreconditionError(
          recorded > 0 ? StrCat("p3: the graph's ", recorded, " gradient all-reduces were recorded (NCCL/gloo): run "
                                "tensor_fusion first, which replaces them by modeled buckets (network fitted to the "
                                "recorded ones) that p3 can slice")
                       : std::string("p3: the graph has no gradient communication to schedule: run data_parallel "
                                     "first (single-device graph), or tensor_fusion"));
    }
    std::vector<int32_t> gradients;
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      if (g.tensors[i].role == TensorRole::kGradient) gradients.push_back(static_cast<int32_t>(i));
    }
    if (gradients.empty()) {
      return absl::FailedPreconditionError(
          "p3: the graph has no gradient tensors, so nothing says which layer each all-reduce carries: record it "
          "with daydream.Profiler(model=...), or with torch.profiler(record_shapes=True)");
    }
    DD_ASSIGN_OR_RETURN(const AllReduceCost cost, ResolveCost(graph, all_reduces));

    FindMembers(graph, gradients, all_reduces);
    std::map<int32_t, Urgency> urgency;  // by iteration
    for (const AllReduce& a : all_reduces) {
      if (urgency.count(a.iteration) == 0) urgency[a.iteration] = RankGradients(graph, gradients, a.iteration);
    }

    const auto slice_bytes = std::max<int64_t>(1, static_cast<int64_t>(std::llround(slice_mb * kMiB)));
    GraphEditor editor(graph);
    int64_t slices = 0, by_layer = 0, by_order = 0, no_consumer = 0;
    for (const AllReduce& a : all_reduces) {
      const Urgency& u = urgency[a.iteration];
      DD_ASSIGN_OR_RETURN(const int64_t n, SliceAllReduce(editor, a, u, slice_bytes, cost));
      slices += n;
    }
    for (const auto& [iteration, u] : urgency) {
      by_layer += u.by_layer;
      by_order += u.by_order;
      no_consumer += u.without_consumer;
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    context.Note(StrCat("p3: ", all_reduces.size(), " all-reduces sliced into ", slices, " slices of at most ",
                        Mb(static_cast<double>(slice_bytes)), ", sent by priority (the next forward's order); network: ",
                        cost.Describe(), "; ", by_layer, " gradients feed their layer's first forward task of the next "
                        "iteration, ", by_order, " a forward task found by backward order, ", no_consumer,
                        " (last iteration) the optimizer step"));
    return true;
  }

 private:
  // The slices' cost: fitted to the all-reduces (network=auto), or a preset.
  absl::StatusOr<AllReduceCost> ResolveCost(const Graph& g, const std::vector<AllReduce>& all_reduces) const {
    const std::string& network = o_.String("network");
    const bool overrides = o_.Double("bandwidth_gbps") != 0 || o_.Double("latency_us") >= 0;
    if (network == "auto") {
      if (overrides) {
        return absl::InvalidArgumentError(
            "p3: bandwidth_gbps and latency_us refine a network preset: set network=<preset> too (network=auto "
            "fits the all-reduces in the graph)");
      }
      std::vector<std::pair<int64_t, TimeNs>> samples;
      for (const AllReduce& a : all_reduces) {
        samples.emplace_back(a.bytes, g.tasks[static_cast<size_t>(a.task)].duration_ns);
      }
      return FitCost(samples);
    }
    AllReduceCost cost;
    cost.fitted = false;
    DD_ASSIGN_OR_RETURN(cost.network, NetworkPreset(network));
    DD_ASSIGN_OR_RETURN(cost.algorithm, ParseCollectiveAlgorithm(o_.String("algorithm")));
    cost.world_size = o_.Int("world_size") > 0 ? static_cast<int>(o_.Int("world_size")) : g.world_size;
    if (cost.world_size < 2) {
      return absl::InvalidArgumentError(
          StrCat("p3: network=", network, " needs the number of ranks: pass world_size=N (N >= 2)"));
    }
    const double bw = o_.Double("bandwidth_gbps");
    if (bw < 0) return absl::InvalidArgumentError("p3: bandwidth_gbps must be >= 0");
    if (bw > 0) cost.network.beta_bytes_per_s = bw * 1e9;
    if (o_.Double("latency_us") >= 0) cost.network.alpha_s = o_.Double("latency_us") * 1e-6;
    return cost;
  }

  static int32_t ProducerIn(const Tensor& t, int32_t iteration) {
    if (iteration >= 0 && static_cast<size_t>(iteration) < t.producers.size()) {
      return t.producers[static_cast<size_t>(iteration)];
    }
    return iteration < 0 ? t.producer : -1;
  }

  // Each all-reduce carries the gradients whose producers feed it (a data
  // edge per gradient, as data_parallel and tensor_fusion insert them), in
  // the order they became ready; a gradient goes to the first that claims it.
  static void FindMembers(const Graph& g, const std::vector<int32_t>& gradients, std::vector<AllReduce>& all_reduces) {
    std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_producer;  // (iteration, task) -> tensors
    std::set<int32_t> iterations;
    for (const AllReduce& a : all_reduces) iterations.insert(a.iteration);
    for (int32_t it : iterations) {
      for (int32_t t : gradients) {
        const int32_t p = ProducerIn(g.tensors[static_cast<size_t>(t)], it);
        if (p >= 0) by_producer[{it, p}].push_back(t);
      }
    }
    std::set<std::pair<int32_t, int32_t>> claimed;  // (iteration, tensor)
    for (AllReduce& a : all_reduces) {
      std::vector<std::pair<int32_t, int32_t>> members;  // (producer, tensor)
      for (int32_t e : g.in_edges(a.task)) {
        const Edge& edge = g.edges[static_cast<size_t>(e)];
        if (edge.kind != EdgeKind::kData) continue;
        auto it = by_producer.find({a.iteration, edge.from});
        if (it == by_producer.end()) continue;
        for (int32_t t : it->second) {
          if (claimed.insert({a.iteration, t}).second) members.emplace_back(edge.from, t);
        }
      }
      std::sort(members.begin(), members.end());
      for (const auto& [producer, t] : members) a.members.push_back(t);
    }
  }

  // When the next forward needs each gradient of one iteration.
  struct Urgency {
    std::map<int32_t, int32_t> priority;  // tensor -> priority (higher: needed sooner)
    std::map<int32_t, int32_t> consumer;  // tensor -> the next iteration's task that waits for it
    int64_t by_layer = 0, by_order = 0, without_consumer = 0;
  };

  // Gradients of `iteration` ranked by the task of the next iteration that
  // first uses their layer's parameters: the layer's first forward GPU
  // activity (CPU task on CPU-only graphs) when the tensor's layer is known;
  // otherwise the forward task at the mirror position of the gradient's
  // producer in backward (produced last in backward = needed first), rounded
  // earlier. Without a next iteration: reverse backward order, no consumer.
  static Urgency RankGradients(const Graph& g, const std::vector<int32_t>& gradients, int32_t iteration) {
    Urgency u;
    const auto start = [&](int32_t t) { return g.tasks[static_cast<size_t>(t)].recorded_start_ns; };
    std::vector<int32_t> grads;
    TimeNs first_ready = std::numeric_limits<TimeNs>::max(), last_ready = std::numeric_limits<TimeNs>::min();
    for (int32_t t : gradients) {
      const int32_t p = ProducerIn(g.tensors[static_cast<size_t>(t)], iteration);
      if (p < 0) continue;
      grads.push_back(t);
      first_ready = std::min(first_ready, start(p));
      last_ready = std::max(last_ready, start(p));
    }
    const int32_t next = iteration + 1;
    std::vector<int32_t> forward;
    if (iteration >= 0 && static_cast<size_t>(next) < g.iterations.size()) {
      bool gpu = false;
      for (const Resource& r : g.resources) gpu = gpu || r.kind == ResourceKind::kGpuStream;
      for (int pass = 0; pass < 2 && forward.empty(); ++pass) {
        const bool want_gpu = gpu && pass == 0;
        for (size_t i = 0; i < g.tasks.size(); ++i) {
          const Task& t = g.tasks[i];
          if (t.iteration != next || t.phase != Phase::kForward) continue;
          const bool on_gpu = IsGpuActivity(t.kind);
          const bool on_cpu = g.resources[static_cast<size_t>(t.resource)].kind == ResourceKind::kCpuThread;
          if (want_gpu ? on_gpu : on_cpu) forward.push_back(static_cast<int32_t>(i));
        }
      }
      std::stable_sort(forward.begin(), forward.end(), [&](int32_t a, int32_t b) { return start(a) < start(b); });
    }
    // The first forward task of each layer, counting its sub-layers' tasks.
    std::map<int32_t, int32_t> first_of_layer;
    for (int32_t t : forward) {
      int32_t l = g.tasks[static_cast<size_t>(t)].layer;
      for (int depth = 0; l >= 0 && static_cast<size_t>(l) < g.layers.size() && depth < 256; ++depth) {
        first_of_layer.try_emplace(l, t);
        l = g.layers[static_cast<size_t>(l)].parent;
      }
    }
    for (int32_t t : grads) {
      if (forward.empty()) {
        ++u.without_consumer;
        continue;
      }
      const Tensor& tensor = g.tensors[static_cast<size_t>(t)];
      if (auto it = first_of_layer.find(tensor.layer); tensor.layer >= 0 && it != first_of_layer.end()) {
        u.consumer[t] = it->second;
        ++u.by_layer;
        continue;
      }
      const double f = last_ready > first_ready ? static_cast<double>(start(ProducerIn(tensor, iteration)) - first_ready) /
                                                      static_cast<double>(last_ready - first_ready)
                                                : 0.0;
      const auto target = start(forward.front()) +
                          RoundNs((1.0 - f) * static_cast<double>(start(forward.back()) - start(forward.front())));
      auto it = std::upper_bound(forward.begin(), forward.end(), target,
                                 [&](TimeNs time, int32_t task) { return time < start(task); });
      u.consumer[t] = it == forward.begin() ? forward.front() : *std::prev(it);
      ++u.by_order;
    }
    // Needed first: earliest consumer; then produced last in backward.
    std::vector<int32_t> order = grads;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const auto ca = u.consumer.find(a), cb = u.consumer.find(b);
      const TimeNs ka = ca == u.consumer.end() ? std::numeric_limits<TimeNs>::max() : start(ca->second);
      const TimeNs kb = cb == u.consumer.end() ? std::numeric_limits<TimeNs>::max() : start(cb->second);
      if (ka != kb) return ka < kb;
      return start(ProducerIn(g.tensors[static_cast<size_t>(a)], iteration)) >
             start(ProducerIn(g.tensors[static_cast<size_t>(b)], iteration));
    });
    for (size_t r = 0; r < order.size(); ++r) u.priority[order[r]] = static_cast<int32_t>(order.size() - r);
    return u;
  }

  // Replaces one all-reduce by its slices; returns how many.
  absl::StatusOr<int64_t> SliceAllReduce(GraphEditor& editor, const AllReduce& a, const Urgency& u, int64_t slice_bytes,
                         const AllReduceCost& cost) {
    Graph& g = editor.graph();
    const Task original = g.tasks[static_cast<size_t>(a.task)];
    std::set<int32_t> member_producers;
    for (int32_t t : a.members) member_producers.insert(ProducerIn(g.tensors[static_cast<size_t>(t)], a.iteration));
    std::vector<Edge> other_in, other_out;
    for (int32_t e : editor.InEdges(a.task)) {
      const Edge edge = g.edges[static_cast<size_t>(e)];
      if (edge.kind != EdgeKind::kSequential && member_producers.count(edge.from) == 0) other_in.push_back(edge);
      editor.RemoveEdge(e);
    }
    for (int32_t e : editor.OutEdges(a.task)) {
      const Edge edge = g.edges[static_cast<size_t>(e)];
      if (edge.kind != EdgeKind::kSequential) other_out.push_back(edge);
      editor.RemoveEdge(e);
    }
    // The members laid out in the buffer, scaled to the all-reduce's size.
    int64_t member_bytes = 0;
    for (int32_t t : a.members) member_bytes += std::max<int64_t>(0, g.tensors[static_cast<size_t>(t)].bytes);
    const int64_t total = a.bytes > 0 ? a.bytes : member_bytes;
    const double scale = member_bytes > 0 && total > 0 ? static_cast<double>(total) / static_cast<double>(member_bytes) : 1.0;
    std::vector<std::pair<double, double>> span;  // [begin, end) per member
    double offset = 0;
    for (int32_t t : a.members) {
      const double b = static_cast<double>(std::max<int64_t>(0, g.tensors[static_cast<size_t>(t)].bytes)) * scale;
      span.emplace_back(offset, offset + b);
      offset += b;
    }
    const int64_t n = std::max<int64_t>(1, (total + slice_bytes - 1) / slice_bytes);
    const std::string base(g.Str(original.name));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t lo = j * slice_bytes, hi = std::min(total, (j + 1) * slice_bytes);
      Task slice = original;
      slice.bytes = std::max<int64_t>(0, hi - lo);
      slice.duration_ns = cost(slice.bytes);
      slice.gap_ns = 0;
      slice.trace_event = -1;
      slice.correlation = -1;
      slice.priority = 0;
      slice.name = g.strings.Intern(n == 1 ? StrCat("p3 ", base) : StrCat("p3 slice ", j + 1, "/", n, " of ", base));
      const int32_t id = editor.AddTask(slice);
      bool all_consumed = !a.members.empty();
      std::set<int32_t> sources, consumers;
      for (size_t m = 0; m < a.members.size(); ++m) {
        const auto [b, e] = span[m];
        const bool covered = e > b ? (b < static_cast<double>(hi) && e > static_cast<double>(lo))
                                   : (b >= static_cast<double>(lo) && (b < static_cast<double>(hi) || j == n - 1));
        if (!covered) continue;
        const int32_t t = a.members[m];
        sources.insert(ProducerIn(g.tensors[static_cast<size_t>(t)], a.iteration));
        if (auto p = u.priority.find(t); p != u.priority.end()) {
          g.tasks[static_cast<size_t>(id)].priority = std::max(g.tasks[static_cast<size_t>(id)].priority, p->second);
        }
        if (auto c = u.consumer.find(t); c != u.consumer.end()) {
          consumers.insert(c->second);
        } else {
          all_consumed = false;
        }
      }
      for (int32_t s : sources) editor.AddEdge(s, id, EdgeKind::kData);
      for (const Edge& e : other_in) editor.AddEdge(e.from, id, e.kind, e.lag_ns);
      for (int32_t c : consumers) editor.AddEdge(id, c, EdgeKind::kData);
      if (!all_consumed) {
        for (const Edge& e : other_out) editor.AddEdge(id, e.to, e.kind, e.lag_ns);
      }
    }
    // Its edges are gone: nothing to bypass, no chain to splice.
    DD_RETURN_IF_ERROR(editor.RemoveTask(a.task));
    return n;
  }

  PassOptions o_;
};

}  // namespace

PassInfo P3PassInfo() {
  PassInfo info;
  info.name = "p3";
  info.summary = "priority-based parameter propagation: sliced gradients sent in the order the next forward needs them";
  info.model =
      "P3 (Jayarajan et al., MLSys'19). Needs gradient all-reduces on a network resource (inserted by "
      "data_parallel or tensor_fusion; recorded NCCL/gloo collectives: run tensor_fusion first) and gradient "
      "tensors. Every all-reduce is cut into slices of at most slice_mb of its buffer (its gradients laid out in "
      "ready order); a slice starts when the gradients it carries are ready and costs what the original network "
      "charges for its size: a line t = a + b*bytes fitted to the original all-reduces (the alpha-beta model for "
      "their ranks and algorithm), or a preset (network, world_size, algorithm, bandwidth_gbps, latency_us). The "
      "network's sequential order is removed: among ready slices the one with the highest priority goes first, "
      "at slice grain, where priority ranks a gradient by when the next iteration's forward pass first uses its "
      "layer (front layers first). Per-layer update: a slice feeds, instead of the optimizer step, the first "
      "forward task (GPU activity on GPU graphs) of each layer it carries in the next iteration, found from the "
      "tensor's layer, or, where layers are unknown, at the mirror position in forward of the gradient's "
      "producer in backward (produced last = needed first), rounded earlier; the optimizer step keeps its place "
      "and cost but no longer waits for communication; the last iteration's slices still feed it. With slice_mb "
      "at least the largest all-reduce (with tensor_fusion bucket_mb=0: the largest gradient) the messages are "
      "unchanged and every new dependency is implied by an old one, so the prediction is never slower. To model "
      "P3 as published (no fusion of small gradients), run tensor_fusion with bucket_mb=0 first.";
  info.options = {
      {"slice_mb", OptionType::kDouble, "4", "slice size in MB (> 0)"},
      {"network", OptionType::kString, "auto",
       "auto: fit latency and bandwidth to the graph's all-reduces; or a preset (nvlink, pcie, ib100, ethernet10)"},
      {"world_size", OptionType::kInt, "0", "ranks, with a preset (0: the graph's)"},
      {"algorithm", OptionType::kString, "ring", "all-reduce algorithm with a preset: ring or tree"},
      {"bandwidth_gbps", OptionType::kDouble, "0", "link bandwidth in GB/s overriding the preset's (0: keep)"},
      {"latency_us", OptionType::kDouble, "-1", "per-step latency in microseconds overriding the preset's (-1: keep)"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new P3Pass(o));
  };
  return info;
}

}  // namespace daydream
