#include "daydream/graph/graph.h"

#include <algorithm>
#include <string>
#include <utility>

#include "daydream/base/compressed_rows.h"
#include "daydream/base/huge_pages.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"

namespace daydream {

std::string_view TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kCpuOp: return "cpu_op";
    case TaskKind::kRuntime: return "runtime";
    case TaskKind::kKernel: return "kernel";
    case TaskKind::kMemcpy: return "memcpy";
    case TaskKind::kMemset: return "memset";
    case TaskKind::kCollective: return "collective";
    case TaskKind::kDataLoad: return "data_load";
    case TaskKind::kSync: return "sync";
    case TaskKind::kUnspecified: break;
  }
  return "unspecified";
}

std::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kData: return "data";
    case Phase::kComm: return "comm";
    case Phase::kOther: return "other";
    case Phase::kUnspecified: break;
  }
  return "unspecified";
}

std::string_view EdgeKindName(EdgeKind kind) {
  switch (kind) {
    case EdgeKind::kSequential: return "sequential";
    case EdgeKind::kLaunch: return "launch";
    case EdgeKind::kSync: return "sync";
    case EdgeKind::kStreamWait: return "stream_wait";
    case EdgeKind::kThread: return "thread";
    case EdgeKind::kData: return "data";
    case EdgeKind::kComm: return "comm";
    case EdgeKind::kBlockingLaunch: return "blocking_launch";
    case EdgeKind::kLaunchQueue: return "launch_queue";
    case EdgeKind::kUnspecified: break;
  }
  return "unspecified";
}

std::string_view ResourceKindName(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kCpuThread: return "cpu_thread";
    case ResourceKind::kGpuStream: return "gpu_stream";
    case ResourceKind::kCommChannel: return "comm_channel";
    case ResourceKind::kUnspecified: break;
  }
  return "unspecified";
}

std::string_view TensorRoleName(TensorRole role) {
  switch (role) {
    case TensorRole::kWeight: return "weight";
    case TensorRole::kGradient: return "gradient";
    case TensorRole::kActivation: return "activation";
    case TensorRole::kOptimizerState: return "optimizer_state";
    case TensorRole::kInput: return "input";
    case TensorRole::kOther: return "other";
    case TensorRole::kUnspecified: break;
  }
  return "unspecified";
}

int32_t Graph::AddResource(const Resource& resource) {
  resources.push_back(resource);
  return static_cast<int32_t>(resources.size() - 1);
}

int32_t Graph::AddTask(const Task& task) {
  tasks.push_back(task);
  return static_cast<int32_t>(tasks.size() - 1);
}

void Graph::AddEdge(int32_t from, int32_t to, EdgeKind kind, TimeNs lag_ns) {
  // Written in place: an Edge built on the stack and copied in is read back
  // 16 bytes at a time over its 4- and 1-byte fields just stored, which the
  // core cannot forward from its store buffer (a stall per edge).
  Edge& e = edges.emplace_back();
  e.from = from;
  e.to = to;
  e.kind = kind;
  e.lag_ns = lag_ns;
}

int32_t Graph::AddLayer(const Layer& layer) {
  layers.push_back(layer);
  return static_cast<int32_t>(layers.size() - 1);
}

int32_t Graph::AddTensor(Tensor tensor) {
  tensors.push_back(std::move(tensor));
  return static_cast<int32_t>(tensors.size() - 1);
}

void Graph::BuildAdjacency() {
  const size_t n = tasks.size();
  CompressedRows out(n);
  CompressedRows in(n);
  for (const Edge& e : edges) {
    out.Count(static_cast<size_t>(e.from));
    in.Count(static_cast<size_t>(e.to));
  }
  out_index_ = HugePagesVector<int32_t>(out.Start(), 0);
  in_index_ = HugePagesVector<int32_t>(in.Start(), 0);
  for (size_t i = 0; i < edges.size(); ++i) {
    out_index_[static_cast<size_t>(out.Place(static_cast<size_t>(edges[i].from)))] = static_cast<int32_t>(i);
    in_index_[static_cast<size_t>(in.Place(static_cast<size_t>(edges[i].to)))] = static_cast<int32_t>(i);
  }
  out_offsets_ = std::move(out).TakeOffsets();
  in_offsets_ = std::move(in).TakeOffsets();
  adjacency_edges_ = edges.size();
  adjacency_tasks_ = tasks.size();
}

EdgeRange Graph::out_edges(int32_t task) const {
  const auto t = static_cast<size_t>(task);
  return EdgeRange{out_index_.data() + out_offsets_[t], out_index_.data() + out_offsets_[t + 1]};
}

EdgeRange Graph::in_edges(int32_t task) const {
  const auto t = static_cast<size_t>(task);
  return EdgeRange{in_index_.data() + in_offsets_[t], in_index_.data() + in_offsets_[t + 1]};
}

namespace {

// What every graph pass must keep: on each resource the sequential edges form
// one chain (at most one sequential predecessor and successor per task, both
// on the task's resource). Fed the edges in order, with their ends'
// resources; keeps the first break.
class ChainCheck {
 public:
  explicit ChainCheck(size_t num_tasks) : seen_(num_tasks, 0) {}

  void Edge(size_t i, const daydream::Edge& e, int32_t from_resource, int32_t to_resource) {
    if (broken_ >= 0 || e.kind != EdgeKind::kSequential) return;
    uint8_t& from = seen_[static_cast<size_t>(e.from)];
    uint8_t& to = seen_[static_cast<size_t>(e.to)];
    if (from_resource != to_resource || (from & kOut) != 0 || (to & kIn) != 0) {
      broken_ = static_cast<int64_t>(i);
      return;
    }
    from |= kOut;
    to |= kIn;
  }

  absl::Status Finish(const Graph& g) const {
    if (broken_ < 0) return absl::OkStatus();
    const daydream::Edge& e = g.edges[static_cast<size_t>(broken_)];
    if (g.tasks[static_cast<size_t>(e.from)].resource != g.tasks[static_cast<size_t>(e.to)].resource) {
      return absl::FailedPreconditionError(StrCat("sequential edge ", broken_, " joins tasks ", e.from, " and ", e.to,
                                                  " on different resources"));
    }
    return absl::FailedPreconditionError(
        StrCat("resource order broken at edge ", broken_, " (", e.from, " -> ", e.to,
               "): a task has two sequential successors or predecessors on its resource"));
  }

 private:
  static constexpr uint8_t kOut = 1, kIn = 2;
  std::vector<uint8_t> seen_;  // per task: kOut, kIn
  int64_t broken_ = -1;
};

// Bounds that keep all time arithmetic in int64: every recorded time within
// +-kMaxTimeNs of 0, the recorded span under kMaxTimeNs, and all durations,
// gaps, lags and iteration offsets together at most kMaxTimeNs, which bounds
// any simulated time (a schedule never runs longer than all of them in a row).
// Byte counts likewise: each at most kMaxBytes, the tensors' together too, so
// bucket sums cannot overflow.
//
// Fed task by task and edge by edge from Validate's one pass over each, it
// keeps the first failure instead of returning it: every structural error in
// the graph is reported before a range error, and the messages name tasks,
// whose name ids are checked in that pass.
class RangeCheck {
 public:
  explicit RangeCheck(const Graph& g) : g_(g), lo_(g.origin_ns), hi_(g.recorded_end_ns) {}

  void Task(size_t i, const daydream::Task& t) {
    if (big_task_ < 0 && t.bytes > kMaxBytes) big_task_ = static_cast<int64_t>(i);
    if (failed_ != kNone) return;
    if (!Within(t.recorded_start_ns) || !Within(t.duration_ns) || !Within(t.gap_ns) ||
        !Within(t.recorded_start_ns + t.duration_ns)) {
      return Fail(kTask, i);
    }
    lo_ = std::min(lo_, t.recorded_start_ns);
    hi_ = std::max(hi_, t.recorded_start_ns + t.duration_ns);
    if (!Add(t.duration_ns) || !Add(t.gap_ns)) Fail(kTaskSum, i);
  }

  void Edge(size_t i, const daydream::Edge& e) {
    if (failed_ != kNone) return;
    if (!Within(e.lag_ns)) return Fail(kEdge, i);
    if (!Add(e.lag_ns)) Fail(kEdgeSum, i);
  }

  // Every check ValidateImpl makes of each task and each edge, these ranges
  // included, in one pass over each that only accumulates whether any
  // failed: no message, no early exit, no failure kept (the usual loops,
  // which stop at the first failure and say what it is, run only when
  // something fails). True when nothing fails, and this check then holds
  // what Task and Edge would have left in it; false leaves it as it was.
  // `resource_of` (when not null) gets each task's resource, and `chains`
  // (when not null) each edge whose ends exist.
  bool AllPass(int32_t* resource_of, ChainCheck* chains) {
    const std::vector<daydream::Task>& tasks = g_.tasks;
    const auto n = static_cast<uint64_t>(tasks.size());
    const auto names = static_cast<uint64_t>(g_.strings.size());
    const auto resources = static_cast<uint64_t>(g_.resources.size());
    const auto layers = static_cast<uint64_t>(g_.layers.size());
    const auto iterations = static_cast<uint64_t>(g_.iterations.size());
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    // Not Within, in unsigned arithmetic (no overflow).
    auto outside = [](uint64_t v) { return v + uint64_t{kMaxTimeNs - 1} > uint64_t{2 * (kMaxTimeNs - 1)}; };
    bool bad = false;
    uint64_t total = static_cast<uint64_t>(total_);  // Add's sum: no term is negative where nothing fails
    TimeNs lo = lo_, hi = hi_;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const daydream::Task& t = tasks[i];
      const uint64_t end = u(t.recorded_start_ns) + u(t.duration_ns);
      bad |= u(t.name) >= names || u(t.resource) >= resources || (t.duration_ns | t.gap_ns) < 0 ||
             u(int64_t{t.layer} + 1) > layers || u(int64_t{t.iteration} + 1) > iterations ||
             static_cast<int>(t.kind) >= kNumTaskKinds || static_cast<int>(t.phase) >= kNumPhases ||
             t.bytes > kMaxBytes;
      bad |= outside(u(t.recorded_start_ns)) || outside(u(t.duration_ns)) || outside(u(t.gap_ns)) || outside(end);
      lo = std::min(lo, t.recorded_start_ns);
      hi = std::max(hi, static_cast<TimeNs>(end));
      total += u(t.duration_ns) + u(t.gap_ns);
      bad |= total > uint64_t{kMaxTimeNs};  // stays set if the sum wraps later
      if (resource_of != nullptr) resource_of[i] = t.resource;
    }
    for (size_t i = 0; i < g_.edges.size(); ++i) {
      const daydream::Edge& e = g_.edges[i];
      const bool ends = u(e.from) < n && u(e.to) < n;
      bad |= !ends || e.from == e.to || e.lag_ns < 0 || e.kind == EdgeKind::kUnspecified || outside(u(e.lag_ns));
      total += u(e.lag_ns);
      bad |= total > uint64_t{kMaxTimeNs};
      if (chains != nullptr && ends) {
        chains->Edge(i, e, resource_of[static_cast<size_t>(e.from)], resource_of[static_cast<size_t>(e.to)]);
      }
    }
    if (bad) return false;
    lo_ = lo;
    hi_ = hi;
    total_ = static_cast<TimeNs>(total);
    return true;
  }

  // After the tasks and edges, in ValidateRanges' order: the origin, the
  // first task or edge that failed, the iterations, the span, the sizes.
  absl::Status Finish() {
    if (!Within(g_.origin_ns) || !Within(g_.recorded_end_ns)) return OutOfRange("the graph's recorded origin or end");
    switch (failed_) {
      case kTask: return OutOfRange(StrCat("task ", index_, " (", g_.TaskName(static_cast<int32_t>(index_)), ")"));
      case kTaskSum: return OutOfRange("the tasks' durations and gaps together");
      case kEdge: return OutOfRange(StrCat("edge ", index_, "'s lag"));
      case kEdgeSum: return OutOfRange("the tasks' durations, gaps and edge lags together");
      case kNone: break;
    }
    for (size_t i = 0; i < g_.iterations.size(); ++i) {
      const Iteration& it = g_.iterations[i];
      if (!Within(it.recorded_begin_ns) || !Within(it.measured_ns) || !Within(it.begin_offset_ns) ||
          !Within(it.end_offset_ns) || !Within(it.recorded_begin_ns + it.measured_ns)) {
        return OutOfRange(StrCat("iteration ", i, " (", g_.Str(it.name), ")"));
      }
      lo_ = std::min(lo_, it.recorded_begin_ns);
      hi_ = std::max(hi_, it.recorded_begin_ns + it.measured_ns);
      if (!Add(it.begin_offset_ns) || !Add(it.end_offset_ns)) {
        return OutOfRange("the durations, gaps, lags and iteration offsets together");
      }
    }
    if (hi_ - lo_ >= kMaxTimeNs) return OutOfRange("the recorded span");
    if (big_task_ >= 0) {
      return TooBig(StrCat("task ", big_task_, " (", g_.TaskName(static_cast<int32_t>(big_task_)), ")"));
    }
    int64_t tensor_bytes = 0;  // stays below 2 * kMaxBytes
    for (size_t i = 0; i < g_.tensors.size(); ++i) {
      if (g_.tensors[i].bytes > kMaxBytes) return TooBig(StrCat("tensor ", i, " (", g_.Str(g_.tensors[i].name), ")"));
      tensor_bytes += std::max<int64_t>(0, g_.tensors[i].bytes);
      if (tensor_bytes > kMaxBytes) return TooBig("the tensors together");
    }
    return absl::OkStatus();
  }

 private:
  enum Failure { kNone, kTask, kTaskSum, kEdge, kEdgeSum };

  static bool Within(TimeNs v) { return v > -kMaxTimeNs && v < kMaxTimeNs; }
  static absl::Status OutOfRange(std::string_view what) {
    return absl::OutOfRangeError(StrCat(what, ": times this large cannot be simulated (the limit is ", kMaxTimeNs,
                                        " ns, about 146 years)"));
  }
  static absl::Status TooBig(std::string_view what) {
    return absl::OutOfRangeError(StrCat(what, ": sizes this large cannot be simulated (the limit is ", kMaxBytes,
                                        " bytes)"));
  }
  bool Add(TimeNs v) {  // total stays below 2 * kMaxTimeNs: each term is below kMaxTimeNs
    total_ += v < 0 ? -v : v;
    return total_ <= kMaxTimeNs;
  }
  void Fail(Failure f, size_t i) {
    failed_ = f;
    index_ = i;
  }

  const Graph& g_;
  TimeNs lo_, hi_;
  TimeNs total_ = 0;
  Failure failed_ = kNone;
  size_t index_ = 0;
  int64_t big_task_ = -1;
};

// The event graph the simulator runs: node 2t is task t's start, 2t+1 its
// end. Ordinary edges tie an end to a start, launch edges two starts, sync
// edges two ends; a task's start precedes its end. Any cycle there could
// never finish.
size_t TailNode(const Edge& e) { return 2 * static_cast<size_t>(e.from) + (FromTailStart(e.kind) ? 0 : 1); }
size_t HeadNode(const Edge& e) { return 2 * static_cast<size_t>(e.to) + (ToHeadEnd(e.kind) ? 1 : 0); }

// Arcs between `nodes` nodes, as rows of heads by tail, with each node's
// count of arcs in. `each_arc(f)` calls f(tail, head) for every arc, the
// same arcs in the same order each time (it is called twice).
struct Arcs {
  std::vector<int32_t> indegree;
  std::vector<int32_t> offsets;  // node v's heads: heads[offsets[v] .. offsets[v + 1])
  std::vector<int32_t> heads;
};
template <typename EachArc>
Arcs ArcsOf(size_t nodes, EachArc each_arc) {
  Arcs arcs;
  arcs.indegree = HugePagesVector<int32_t>(nodes, 0);
  CompressedRows rows(nodes);
  each_arc([&](size_t tail, size_t head) {
    rows.Count(tail);
    ++arcs.indegree[head];
  });
  arcs.heads = HugePagesVector<int32_t>(rows.Start(), 0);
  each_arc([&](size_t tail, size_t head) {
    arcs.heads[static_cast<size_t>(rows.Place(tail))] = static_cast<int32_t>(head);
  });
  arcs.offsets = std::move(rows).TakeOffsets();
  return arcs;
}

// Kahn's algorithm: how many nodes are reached in an order that follows
// every arc. `successors(v, f)` calls f(h) for each arc v -> h that
// `indegree` counts; the nodes never reached keep an in-degree above 0.
template <typename Successors>
size_t CountInTopologicalOrder(std::vector<int32_t>& indegree, Successors successors) {
  std::vector<int32_t> stack;
  for (size_t v = 0; v < indegree.size(); ++v) {
    if (indegree[v] == 0) stack.push_back(static_cast<int32_t>(v));
  }
  size_t visited = 0;
  while (!stack.empty()) {
    const auto v = static_cast<size_t>(stack.back());
    stack.pop_back();
    ++visited;
    successors(v, [&](size_t h) {
      if (--indegree[h] == 0) stack.push_back(static_cast<int32_t>(h));
    });
  }
  return visited;
}

// Whether the event graph may hold a cycle, where `back` lists (head, tail)
// of its edges that do not lead to a later node (every other edge, and each
// task's start -> end, does). False is certain; true only means the whole
// graph must be searched.
//
// A cycle leads back to where it started, so from its last node down to
// its first it crosses every position between them on an edge of `back`:
// it lies within one run of positions that edges of `back` span, and its
// edges join nodes of that run. The builder numbers tasks in time order,
// so those edges are few and short (big_1m: 18 k of 609 k edges, runs of at
// most 4 nodes, 4% of the nodes in all), and the search of the runs alone
// costs a fraction of the whole graph's. Where the runs cover over a
// quarter of the nodes (tasks a pass appended, with edges back to the tasks
// before them) this gives up once it has merged them; where such edges are
// many, the caller does not ask.
bool MayHoldCycle(const std::vector<Edge>& edges, size_t nodes, std::vector<std::pair<size_t, size_t>>& back) {
  std::sort(back.begin(), back.end());
  // The runs, merged where they meet or touch, marked in a bitmap; a node's
  // place among the marked ones (its rank) numbers it in the runs' graph.
  const size_t words = nodes / 64 + 1;
  std::vector<uint64_t> marked(words, 0);
  size_t covered = 0;
  for (size_t i = 0; i < back.size();) {
    const size_t lo = back[i].first;
    size_t hi = back[i].second;
    for (++i; i < back.size() && back[i].first <= hi + 1; ++i) hi = std::max(hi, back[i].second);
    covered += hi - lo + 1;
    if (covered > nodes / 4) return true;
    for (size_t v = lo; v <= hi; ++v) marked[v / 64] |= uint64_t{1} << (v % 64);
  }
  std::vector<uint32_t> rank_before(words, 0);  // marked nodes in the words before
  for (size_t w = 1; w < words; ++w) {
    rank_before[w] = rank_before[w - 1] + static_cast<uint32_t>(__builtin_popcountll(marked[w - 1]));
  }
  auto is_marked = [&](size_t v) { return (marked[v / 64] >> (v % 64)) & 1; };
  auto rank = [&](size_t v) {
    const uint64_t below = marked[v / 64] & ((uint64_t{1} << (v % 64)) - 1);
    return static_cast<size_t>(rank_before[v / 64]) + static_cast<size_t>(__builtin_popcountll(below));
  };
  // Every edge between marked nodes: those of one run, and those from one
  // run to a later one (which lead forward, as every edge out of a run does).
  std::vector<std::pair<size_t, size_t>> inner;  // by rank
  for (const Edge& e : edges) {
    const size_t a = TailNode(e), b = HeadNode(e);
    if (is_marked(a) && is_marked(b)) inner.emplace_back(rank(a), rank(b));
  }
  for (size_t w = 0; w < words; ++w) {  // each task's start -> end, both marked
    for (uint64_t bits = marked[w]; bits != 0; bits &= bits - 1) {
      const size_t v = 64 * w + static_cast<size_t>(__builtin_ctzll(bits));
      if (v % 2 == 0 && is_marked(v + 1)) inner.emplace_back(rank(v), rank(v) + 1);
    }
  }
  Arcs arcs = ArcsOf(covered, [&](auto&& f) {
    for (const auto& [a, b] : inner) f(a, b);
  });
  const size_t reached = CountInTopologicalOrder(arcs.indegree, [&](size_t v, auto&& f) {
    for (int32_t k = arcs.offsets[v]; k < arcs.offsets[v + 1]; ++k) {
      f(static_cast<size_t>(arcs.heads[static_cast<size_t>(k)]));
    }
  });
  return reached != covered;
}

}  // namespace

int64_t Graph::FindCycleTask(int64_t* stuck_tasks, std::vector<int64_t>* cycle) const {
  const auto n = static_cast<int64_t>(tasks.size());
  const size_t nodes = 2 * static_cast<size_t>(n);
  std::vector<std::pair<size_t, size_t>> back;  // (head, tail) of edges that do not lead to a later node
  const size_t most_back = nodes / 8;           // past this many, the whole graph is searched
  for (const Edge& e : edges) {
    if (e.from < 0 || e.from >= n || e.to < 0 || e.to >= n) return kDanglingEdge;
    const size_t a = TailNode(e), b = HeadNode(e);
    if (a >= b && back.size() <= most_back) back.emplace_back(b, a);
  }
  if (back.empty()) return -1;  // node order is a topological order
  if (back.size() <= most_back && !MayHoldCycle(edges, nodes, back)) return -1;
  // The whole graph: where the runs may hold a cycle, or are too many or too
  // long to search apart. This also finds the first task on a cycle and the
  // cycle itself, for the report.
  Arcs arcs = ArcsOf(nodes, [&](auto&& f) {
    for (const Edge& e : edges) f(TailNode(e), HeadNode(e));
  });
  std::vector<int32_t>& indegree = arcs.indegree;
  const std::vector<int32_t>& offsets = arcs.offsets;
  const std::vector<int32_t>& heads = arcs.heads;
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) ++indegree[2 * t + 1];  // start -> end
  auto successors = [&](size_t v, auto&& f) {
    if (v % 2 == 0) f(v + 1);  // a task's start precedes its end
    for (int32_t k = offsets[v]; k < offsets[v + 1]; ++k) f(static_cast<size_t>(heads[static_cast<size_t>(k)]));
  };
  const size_t visited = CountInTopologicalOrder(indegree, successors);
  if (visited == nodes) return -1;
  if (stuck_tasks != nullptr) *stuck_tasks = static_cast<int64_t>(nodes - visited + 1) / 2;
  // The unvisited nodes are those on a cycle and those after one. A depth-
  // first walk through them along the edges comes back to a node on its
  // path: that stretch of the path is a cycle.
  std::vector<uint8_t> state(nodes, 0);  // 0 unseen, 1 on the path, 2 done
  for (size_t v = 0; v < nodes; ++v) {
    if (indegree[v] == 0) state[v] = 2;
  }
  for (size_t root = 0; root < nodes; ++root) {
    if (state[root] != 0) continue;
    std::vector<std::pair<size_t, std::vector<size_t>>> path;  // node, its successors left to try
    auto enter = [&](size_t v) {
      state[v] = 1;
      std::vector<size_t> next;
      successors(v, [&](size_t h) {
        if (state[h] != 2) next.push_back(h);
      });
      path.emplace_back(v, std::move(next));
    };
    enter(root);
    while (!path.empty()) {
      if (path.back().second.empty()) {
        state[path.back().first] = 2;
        path.pop_back();
        continue;
      }
      const size_t h = path.back().second.back();
      path.back().second.pop_back();
      if (state[h] == 0) {
        enter(h);
      } else if (state[h] == 1) {
        // Back to `h`: the path from it on is the cycle, as tasks.
        size_t i = path.size();
        while (path[i - 1].first != h) --i;
        std::vector<int64_t> tasks_on;
        for (size_t j = i - 1; j < path.size(); ++j) {
          const auto t = static_cast<int64_t>(path[j].first / 2);
          if (tasks_on.empty() || tasks_on.back() != t) tasks_on.push_back(t);
        }
        if (tasks_on.size() > 1 && tasks_on.front() == tasks_on.back()) tasks_on.pop_back();
        if (cycle != nullptr) *cycle = tasks_on;
        return tasks_on.front();
      }
    }
  }
  for (size_t v = 0; v < nodes; ++v) {  // not reached: the unvisited nodes hold a cycle
    if (indegree[v] > 0) return static_cast<int64_t>(v / 2);
  }
  return -1;
}

absl::Status Graph::Validate() const { return ValidateImpl(/*check_cycles=*/true, /*check_chains=*/false); }

absl::Status Graph::ValidateAllButCycles() const { return ValidateImpl(/*check_cycles=*/false, /*check_chains=*/false); }

absl::Status Graph::ValidateEdited(bool check_cycles) const {
  return ValidateImpl(check_cycles, /*check_chains=*/true);
}

absl::Status Graph::ValidateResourceChains() const {
  const auto n = static_cast<int64_t>(tasks.size());
  ChainCheck chains(tasks.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.from < 0 || e.from >= n || e.to < 0 || e.to >= n) {
      return absl::FailedPreconditionError(StrCat("edge ", i, ": dangling end ", e.from, " -> ", e.to));
    }
    chains.Edge(i, e, tasks[static_cast<size_t>(e.from)].resource, tasks[static_cast<size_t>(e.to)].resource);
  }
  return chains.Finish(*this);
}

// One pass over the tasks and one over the edges, all checks in each (three
// over each before, the chains' included: a seventh of a what-if search's
// variant on big_1m, 434 k tasks), first without a message or an early
// exit per check (RangeCheck::AllPass: 8.1-8.8 -> 6.1-6.3 ms in the build
// of big_1m); the loops that say what failed run only when something did.
absl::Status Graph::ValidateImpl(bool check_cycles, bool check_chains) const {
  const auto n = static_cast<int64_t>(tasks.size());
  const auto num_resources = static_cast<int64_t>(resources.size());
  auto bad = [](std::string msg) { return absl::FailedPreconditionError(std::move(msg)); };
  for (size_t r = 0; r < resources.size(); ++r) {
    const auto kind = static_cast<int>(resources[r].kind);
    if (kind < 0 || kind >= kNumResourceKinds) return bad(StrCat("resource ", r, ": unknown kind ", kind));
    if (resources[r].name < 0 || static_cast<size_t>(resources[r].name) >= strings.size()) {
      return bad(StrCat("resource ", r, ": name id ", resources[r].name, " out of range"));
    }
  }
  RangeCheck ranges(*this);
  // The tasks' resources, dense: the chain check reads two per sequential edge.
  std::vector<int32_t> resource_of = HugePagesVector<int32_t>(check_chains ? tasks.size() : 0, 0);
  const auto num_iterations = static_cast<int64_t>(iterations.size());
  ChainCheck chains(check_chains ? tasks.size() : 0);
  // A graph whose tasks and edges all pass (as built or edited) is read once
  // quickly; else the loops below find the first failure and name it.
  const bool all_pass = ranges.AllPass(check_chains ? resource_of.data() : nullptr, check_chains ? &chains : nullptr);
  if (!all_pass) chains = ChainCheck(check_chains ? tasks.size() : 0);
  for (int64_t i = 0; !all_pass && i < n; ++i) {
    const Task& t = tasks[static_cast<size_t>(i)];
    if (t.name < 0 || static_cast<size_t>(t.name) >= strings.size()) {
      return bad(StrCat("task ", i, ": name id ", t.name, " out of range"));
    }
    if (t.resource < 0 || t.resource >= num_resources) {
      return bad(StrCat("task ", i, " (", Str(t.name), "): resource ", t.resource,
                        " does not exist (", num_resources, " resources)"));
    }
    if (t.duration_ns < 0 || t.gap_ns < 0) {
      return bad(StrCat("task ", i, " (", Str(t.name), "): negative duration or gap"));
    }
    if (t.layer < -1 || t.layer >= static_cast<int64_t>(layers.size())) {
      return bad(StrCat("task ", i, ": layer ", t.layer, " does not exist"));
    }
    if (t.iteration < -1 || t.iteration >= num_iterations) {
      return bad(StrCat("task ", i, ": iteration ", t.iteration, " does not exist (", num_iterations,
                        " iterations)"));
    }
    if (static_cast<int>(t.kind) >= kNumTaskKinds || static_cast<int>(t.phase) >= kNumPhases) {
      return bad(StrCat("task ", i, ": unknown kind or phase"));
    }
    ranges.Task(static_cast<size_t>(i), t);
    if (check_chains) resource_of[static_cast<size_t>(i)] = t.resource;
  }
  for (size_t i = 0; !all_pass && i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.from < 0 || e.from >= n || e.to < 0 || e.to >= n) {
      return bad(StrCat("edge ", i, " (", EdgeKindName(e.kind), "): dangling end ", e.from,
                              " -> ", e.to, " (", n, " tasks)"));
    }
    if (e.from == e.to) return bad(StrCat("edge ", i, ": task ", e.from, " depends on itself"));
    if (e.lag_ns < 0) return bad(StrCat("edge ", i, ": negative lag"));
    if (e.kind == EdgeKind::kUnspecified) return bad(StrCat("edge ", i, ": kind unspecified"));
    ranges.Edge(i, e);
    if (check_chains) {
      chains.Edge(i, e, resource_of[static_cast<size_t>(e.from)], resource_of[static_cast<size_t>(e.to)]);
    }
  }
  int64_t stuck = 0;  // tasks whose start or end is never reached
  std::vector<int64_t> cycle;
  if (const int64_t t = check_cycles ? FindCycleTask(&stuck, &cycle) : -1; t >= 0) {
    // The cycle, task by task (a long one shortened in the middle).
    std::string around = cycle.empty() ? "" : ": ";
    const size_t shown = cycle.size() <= 8 ? cycle.size() : 6;
    for (size_t i = 0; i < shown; ++i) {
      const size_t k = cycle.size() <= 8 || i < 3 ? i : cycle.size() - (shown - i);
      if (cycle.size() > 8 && i == 3) StrAppend(&around, "... (", cycle.size() - 6, " more) -> ");
      StrAppend(&around, cycle[k], " (", Str(tasks[static_cast<size_t>(cycle[k])].name), ") -> ");
    }
    if (!cycle.empty()) StrAppend(&around, cycle[0]);
    return bad(StrCat("the dependency edges form a cycle through task ", t, " (", Str(tasks[static_cast<size_t>(t)].name),
                      ")", around, "; ", stuck, " tasks could never finish"));
  }
  for (size_t i = 0; i < iterations.size(); ++i) {
    const Iteration& it = iterations[i];
    if (it.begin_task < 0 || it.begin_task >= n || it.end_task < 0 || it.end_task >= n) {
      return bad(StrCat("iteration ", i, " (", Str(it.name), "): anchor task out of range"));
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.name < 0 || static_cast<size_t>(t.name) >= strings.size() || t.dtype < 0 ||
        static_cast<size_t>(t.dtype) >= strings.size()) {
      return bad(StrCat("tensor ", i, ": name or dtype id out of range"));
    }
    if (t.producer < -1 || t.producer >= n) {
      return bad(StrCat("tensor ", i, " (", Str(t.name), "): producer ", t.producer, " does not exist"));
    }
    if (t.layer < -1 || t.layer >= static_cast<int64_t>(layers.size())) {
      return bad(StrCat("tensor ", i, " (", Str(t.name), "): layer ", t.layer, " does not exist"));
    }
    if (!t.producers.empty() && t.producers.size() != iterations.size()) {
      return bad(StrCat("tensor ", i, " (", Str(t.name), "): ", t.producers.size(),
                        " per-iteration producers for ", iterations.size(), " iterations"));
    }
    for (int32_t p : t.producers) {
      if (p < -1 || p >= n) return bad(StrCat("tensor ", i, " (", Str(t.name), "): producer ", p, " does not exist"));
    }
  }
  // Last, as each was before: the ranges, then (what passes must keep) the chains.
  DD_RETURN_IF_ERROR(ranges.Finish());
  return check_chains ? chains.Finish(*this) : absl::OkStatus();
}

GraphSummary Summarize(const Graph& graph) {
  GraphSummary s;
  s.num_tasks = static_cast<int64_t>(graph.tasks.size());
  s.num_edges = static_cast<int64_t>(graph.edges.size());
  s.num_resources = static_cast<int64_t>(graph.resources.size());
  s.num_layers = static_cast<int64_t>(graph.layers.size());
  s.num_tensors = static_cast<int64_t>(graph.tensors.size());
  s.num_iterations = static_cast<int64_t>(graph.iterations.size());
  std::vector<int64_t> by_kind(kNumTaskKinds, 0), by_phase(kNumPhases, 0), by_edge(kNumEdgeKinds, 0);
  std::vector<int64_t> by_resource(kNumResourceKinds, 0);
  for (const Task& t : graph.tasks) {
    ++by_kind[static_cast<size_t>(t.kind)];
    ++by_phase[static_cast<size_t>(t.phase)];
    s.total_task_time_ns += t.duration_ns;
  }
  for (const Edge& e : graph.edges) ++by_edge[static_cast<size_t>(e.kind)];
  for (const Resource& r : graph.resources) ++by_resource[static_cast<size_t>(r.kind)];
  for (int k = 1; k < kNumTaskKinds; ++k) {
    s.tasks_by_kind.emplace_back(std::string(TaskKindName(static_cast<TaskKind>(k))), by_kind[static_cast<size_t>(k)]);
  }
  for (int k = 1; k < kNumPhases; ++k) {
    s.tasks_by_phase.emplace_back(std::string(PhaseName(static_cast<Phase>(k))), by_phase[static_cast<size_t>(k)]);
  }
  for (int k = 1; k < kNumEdgeKinds; ++k) {
    s.edges_by_kind.emplace_back(std::string(EdgeKindName(static_cast<EdgeKind>(k))), by_edge[static_cast<size_t>(k)]);
  }
  for (int k = 1; k < kNumResourceKinds; ++k) {
    s.resources_by_kind.emplace_back(std::string(ResourceKindName(static_cast<ResourceKind>(k))),
                                     by_resource[static_cast<size_t>(k)]);
  }
  if (by_kind[0] > 0) s.tasks_by_kind.emplace_back("unspecified", by_kind[0]);
  if (by_phase[0] > 0) s.tasks_by_phase.emplace_back("unspecified", by_phase[0]);
  return s;
}

}  // namespace daydream
