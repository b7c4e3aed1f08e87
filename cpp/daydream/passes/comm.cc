#include "daydream/passes/comm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daydream/base/math.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/graph/builder.h"
#include "daydream/passes/editor.h"
#include "daydream/sim/simulator.h"

namespace daydream {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// "97.6 MB", "22.1 kB", "512 B".
std::string Mb(double bytes) {
  char buf[32];
  if (bytes >= kMiB) std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / kMiB);
  else if (bytes >= 1024) std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1024);
  else std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  return buf;
}

std::vector<OptionSpec> NetworkOptions() {
  return {
      {"algorithm", OptionType::kString, "ring", "all-reduce algorithm: ring or tree"},
      {"network", OptionType::kString, "auto",
       "network preset (nvlink, pcie, ib100, ethernet10), or auto: fitted to the collectives the trace "
       "recorded when it has them, else nvlink for GPU graphs and ethernet10 for CPU-only graphs"},
      {"bandwidth_gbps", OptionType::kDouble, "0", "link bandwidth in GB/s, overriding the network's (0: keep)"},
      {"latency_us", OptionType::kDouble, "-1", "per-step latency in microseconds, overriding the network's (-1: keep)"},
      {"comm_cpu_share", OptionType::kDouble, "0",
       "fraction (0..1) of each collective's time that it takes from the CPU thread that issued it: 0 where "
       "collectives run beside compute (NCCL), up to 1 where they need the cores that compute (gloo on CPU ranks "
       "with no spare core; measured by daydream.calibrate_network)"},
      {"gap_latency", OptionType::kString, "",
       "extra time of a collective that follows a stretch of compute on its rank, as GAP_US:EXTRA_US points "
       "separated by ';' (\"1000:100;4000:1200\"): linear between them, from 0 at no gap, flat after the last. "
       "The gap is the time since the rank's previous bucket was ready, from a replay of the graph before the "
       "pass. Where collectives run on CPU threads that sleep between them (gloo), waking them costs more after "
       "longer compute; daydream.calibrate_network measures it on gloo (empty: none)"},
      {"queued_latency_us", OptionType::kDouble, "-1",
       "per-step latency in microseconds of an all-reduce that is ready while the one before it in the "
       "iteration still runs (from a replay of the graph before the pass): where collectives run on CPU threads "
       "(gloo), queued ones find the threads awake and cost less than the first, and pay no gap_latency "
       "(measured by daydream.calibrate_network on gloo; -1: latency_us for every all-reduce; ignored with "
       "bucket_cpu_latency)"},
      {"bucket_cpu_latency", OptionType::kString, "",
       "where collectives run on threads that share the computing cores (gloo on CPU ranks with no spare core), "
       "every all-reduce's latency is paid by the CPU thread that issues it, before the all-reduce, and the "
       "network takes only the bandwidth term (and the first all-reduce's gap_latency, a wait): the iteration's "
       "first all-reduce's at the network's latency, each later one's as GAP_US:US points (linear between them, "
       "flat before the first and after the last; the gap is the compute since the bucket before it was ready), "
       "and none is priced as queued. Curves for iterations of K buckets, K@GAP_US:US;...|K@... with K "
       "increasing, are read between the two counts on either side of the iteration's, linear in 1/(K-1), and "
       "outside them at the nearest count's. "
       "tensor_fusion takes as much off what the recorded all-reduces overlapped. daydream.calibrate_network "
       "measures the curves on gloo from DDP steps of a Linear stack in one bucket, in four and in one per "
       "layer, at several batch sizes (empty: the latencies on the network)"},
      {"straggler_us", OptionType::kDouble, "0",
       "expected wait per iteration for the slowest rank, in microseconds, added to the iteration's first "
       "all-reduce: the expected maximum of world_size ranks' step times less their mean (daydream.predict sets "
       "it from the step times a daydream.Profiler measured; 0: ranks in lockstep)"},
      {"ddp_cpu_us", OptionType::kDouble, "0",
       "CPU time per iteration of DDP's own work (its forward wrapper, the reducer's per-iteration bookkeeping) on "
       "the thread that issues the all-reduces, in microseconds (daydream.predict measures it on a known CPU model: "
       "daydream.calibrate.ddp_cpu_phase_times; daydream.calibrate_network on small Linear stacks)"},
      {"ddp_cpu_per_gradient_us", OptionType::kDouble, "0",
       "CPU time of DDP's reducer per gradient (its autograd hook, the copy into the bucket), in microseconds, "
       "before the bucket's all-reduce on the thread that produced the bucket's last gradient (measured as "
       "ddp_cpu_us is)"},
  };
}

bool HasGpuWork(const Graph& g) {
  for (const Resource& r : g.resources) {
    if (r.kind == ResourceKind::kGpuStream) return true;
  }
  return false;
}

// "GAP_US:EXTRA_US;..." -> points with increasing gaps. Error: a bad point.
absl::StatusOr<std::vector<std::pair<double, double>>> ParseGapLatency(const std::string& text,
                                                                       std::string_view option = "gap_latency") {
  std::vector<std::pair<double, double>> points;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    double gap = 0;
    double extra = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &gap) || !absl::SimpleAtod(parts[1], &extra) ||
        !std::isfinite(gap) || !std::isfinite(extra) || gap <= 0 || extra < 0 || gap > 1e12 || extra > 1e9 ||
        (!points.empty() && gap <= points.back().first)) {
      return absl::InvalidArgumentError(StrCat(
          option, ": bad point '", std::string(entry),
          "' (expected GAP_US:EXTRA_US, gaps > 0 and increasing, extras >= 0, points separated by ';')"));
    }
    points.emplace_back(gap, extra);
  }
  return points;
}

}  // namespace

absl::StatusOr<std::vector<BucketLatencyCurve>> ParseBucketLatency(const std::string& text) {
  std::vector<BucketLatencyCurve> curves;
  const std::vector<std::string> pieces = absl::StrSplit(text, '|', absl::SkipWhitespace());
  for (const std::string& piece : pieces) {
    BucketLatencyCurve curve;
    std::string_view points = piece;
    const size_t at = piece.find('@');
    if (at != std::string::npos) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(piece.substr(0, at)), &curve.buckets) || curve.buckets < 2 ||
          curve.buckets > 1'000'000 || (!curves.empty() && curve.buckets <= curves.back().buckets)) {
        return absl::InvalidArgumentError(
            StrCat("bucket_cpu_latency: bad bucket count in '", piece,
                   "' (expected K@GAP_US:US;... with K >= 2 and increasing, curves separated by '|')"));
      }
      points = std::string_view(piece).substr(at + 1);
    } else if (pieces.size() > 1) {
      return absl::InvalidArgumentError(StrCat("bucket_cpu_latency: curve '", piece,
                                               "' has no bucket count (K@GAP_US:US;...): with more than one "
                                               "curve, each is for its K buckets"));
    }
    DD_ASSIGN_OR_RETURN(curve.points, ParseGapLatency(std::string(points), "bucket_cpu_latency"));
    if (curve.points.empty()) {
      return absl::InvalidArgumentError(StrCat("bucket_cpu_latency: curve '", piece, "' has no points"));
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

double BucketLatencyUs(const std::vector<BucketLatencyCurve>& curves, size_t buckets, double gap_us) {
  if (curves.empty()) return 0;
  auto at = [gap_us](const BucketLatencyCurve& c) {
    return GapExtraUs(c.points, std::max(gap_us, c.points.front().first));
  };
  const auto k = static_cast<int64_t>(buckets);
  if (curves.size() == 1 || k <= curves.front().buckets) return at(curves.front());
  if (k >= curves.back().buckets) return at(curves.back());
  size_t hi = 1;
  while (curves[hi].buckets < k) ++hi;
  const BucketLatencyCurve& a = curves[hi - 1];
  const BucketLatencyCurve& b = curves[hi];
  auto inverse = [](int64_t n) { return 1.0 / static_cast<double>(n - 1); };
  const double w = (inverse(k) - inverse(b.buckets)) / (inverse(a.buckets) - inverse(b.buckets));
  return w * at(a) + (1 - w) * at(b);
}

namespace {

absl::StatusOr<NetworkModel> ResolveNetwork(const PassOptions& options, const Graph& graph,
                                            const std::vector<CollectiveSample>& recorded) {
  NetworkModel net;
  const std::string& name = options.String("network");
  if (name == "auto") {
    absl::StatusOr<NetworkModel> fit = FitNetwork(recorded);
    if (fit.ok()) {
      net = *fit;
    } else {
      DD_ASSIGN_OR_RETURN(net, NetworkPreset(HasGpuWork(graph) ? "nvlink" : "ethernet10"));
    }
  } else {
    DD_ASSIGN_OR_RETURN(net, NetworkPreset(name));
  }
  const double bw = options.Double("bandwidth_gbps");
  if (bw < 0) return absl::InvalidArgumentError("bandwidth_gbps must be positive");
  if (bw > 0) {
    net.beta_bytes_per_s = bw * 1e9;
    net.source += "+bandwidth";
  }
  const double lat = options.Double("latency_us");
  if (lat >= 0) {
    net.alpha_s = lat * 1e-6;
    net.source += "+latency";
  }
  return net;
}

// Gradient tensors with known sizes. With `gradient_mb` > 0 their total
// becomes gradient_mb: known sizes are scaled to it, unknown ones share it
// evenly.
absl::StatusOr<std::vector<int32_t>> Gradients(Graph& graph, double gradient_mb) {
  std::vector<int32_t> out;
  int64_t unknown = 0;
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    if (graph.tensors[i].role != TensorRole::kGradient) continue;
    out.push_back(static_cast<int32_t>(i));
    if (graph.tensors[i].bytes < 0) ++unknown;
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(
        "the graph has no gradient tensors: record it with daydream.Profiler(model=...), or with "
        "torch.profiler(record_shapes=True) so AccumulateGrad ops carry their sizes");
  }
  if (gradient_mb > 0) {
    double known = 0;
    for (int32_t t : out) known += static_cast<double>(std::max<int64_t>(0, graph.tensors[static_cast<size_t>(t)].bytes));
    const double total = gradient_mb * kMiB;
    // Saturated: a huge gradient_mb must not overflow (the cast is UB there).
    auto bytes = [](double b) { return static_cast<int64_t>(std::min(b, 0x1p62)); };
    for (int32_t t : out) {
      Tensor& tensor = graph.tensors[static_cast<size_t>(t)];
      tensor.bytes = unknown > 0 || known <= 0 ? bytes(total / static_cast<double>(out.size()))
                                               : bytes(static_cast<double>(tensor.bytes) * total / known);
    }
  } else if (unknown > 0) {
    return absl::FailedPreconditionError(StrCat(
        unknown, " of ", out.size(), " gradients have no known size in this trace (recorded without shapes and "
        "without kernels that reveal them): pass gradient_mb=<total MB>"));
  }
  return out;
}

// The task that must wait for iteration `i`'s communication: its first
// optimizer task that started after the first gradient was produced (not a
// zero_grad that ran before backward; tasks are ordered by recorded start)
// on a GPU stream (gradients are consumed on the device), else on the CPU,
// else the task that ends the iteration.
int32_t Consumer(const Graph& g, int32_t iteration, int32_t first_producer) {
  int32_t cpu = -1;
  for (size_t t = static_cast<size_t>(first_producer) + 1; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    if (task.iteration != iteration || task.phase != Phase::kOptimizer) continue;
    if (g.resources[static_cast<size_t>(task.resource)].kind == ResourceKind::kGpuStream) {
      return static_cast<int32_t>(t);
    }
    if (cpu < 0) cpu = static_cast<int32_t>(t);
  }
  return cpu >= 0 ? cpu : g.iterations[static_cast<size_t>(iteration)].end_task;
}

// On a graph whose collectives run on CPU threads (no GPU work): the first
// of an iteration's tasks (`tasks`, in recorded order) on `thread` after the
// iteration's last backward task there. DDP's finalize waits for every
// bucket's all-reduce at the end of backward (autograd's final callback),
// before backward returns, so that task and the framework time before it
// come after the all-reduces, not beside them. -1: none (no backward task
// there: a graph without phases).
int32_t AfterBackward(const Graph& g, const std::vector<int32_t>& tasks, int32_t thread) {
  int32_t after = -1;
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    const Task& x = g.tasks[static_cast<size_t>(*it)];
    if (x.resource != thread) continue;
    if (x.phase == Phase::kBackward) return after;
    after = *it;
  }
  return -1;
}

int32_t ProducerIn(const Tensor& t, int32_t iteration) {
  if (!t.producers.empty()) return t.producers[static_cast<size_t>(iteration)];
  return -1;
}

// Per iteration, when its last gradient was produced (the recorded end of the
// latest producing task; the lowest TimeNs for an iteration without one). A
// task of the iteration that started before it cannot have waited for all of
// the iteration's all-reduces.
std::vector<TimeNs> GradientsProducedBy(const Graph& graph, const std::vector<int32_t>& grads) {
  std::vector<TimeNs> produced_by(graph.iterations.size(), std::numeric_limits<TimeNs>::min());
  for (int32_t g : grads) {
    for (size_t it = 0; it < produced_by.size(); ++it) {
      const int32_t p = ProducerIn(graph.tensors[static_cast<size_t>(g)], static_cast<int32_t>(it));
      if (p < 0) continue;
      const Task& producer = graph.tasks[static_cast<size_t>(p)];
      produced_by[it] = std::max(produced_by[it], producer.recorded_start_ns + producer.duration_ns);
    }
  }
  return produced_by;
}

// A CPU task of the communication phase on the thread of `after`, right
// after it, that `before` waits for; the thread's later work waits for it
// too (that is the contention). Returns its id. Error, naming `option`:
// `after` is not on a CPU thread.
absl::StatusOr<int32_t> InsertOnIssuingThread(GraphEditor& editor, int32_t after, Task task, int32_t before,
                                              std::string_view option) {
  Graph& graph = editor.graph();
  const int32_t thread = graph.tasks[static_cast<size_t>(after)].resource;
  if (graph.resources[static_cast<size_t>(thread)].kind != ResourceKind::kCpuThread) {
    return absl::InvalidArgumentError(StrCat(
        option, " is for collectives issued by CPU threads (gloo on CPU ranks), but gradient producer '",
        graph.TaskName(after), "' runs on ", graph.Str(graph.resources[static_cast<size_t>(thread)].name),
        ": leave ", option, option == "bucket_cpu_latency" ? " empty" : " at 0"));
  }
  task.kind = TaskKind::kCpuOp;
  task.phase = Phase::kComm;
  task.resource = thread;
  const int32_t id = editor.AddTask(task);
  editor.InsertAfterOnResource(after, id);
  editor.AddEdge(id, before, EdgeKind::kData);
  return id;
}

// A task that waited for a recorded gradient all-reduce: through an edge
// (the builder's cross-thread wait, `lag_ns` its wake-up), or, where the wake
// came later than the builder links (a thread can wake a scheduler tick
// late), through its gap: the thread was idle when the all-reduce ended. Its
// wake-up is then the builder's longest (BuildOptions::max_thread_wake_ns) at
// most: a later one is the recording's scheduling noise, not carried over.
struct Waiter {
  int32_t task = -1;
  TimeNs lag_ns = 0;
  TimeNs gap_cut_ns = 0;  // the recorded gap that held the wait and the wake-up: it goes
};

// Per iteration, the tasks that waited for the recorded all-reduces `old`
// (which go, with the calls that issued them: `gone`, all of them, sorted): by
// their edges from them (DDP's
// finalize on the thread that ran backward, a GPU optimizer, the step's
// synchronization), or, behind a collective run by CPU threads (gloo), by an
// idle gap on a CPU thread that holds its end (one on a GPU stream is waited
// for through recorded synchronizations, which are edges). Never the calls
// that issue collectives: they are communication. Ids are those after the
// removal (GraphEditor::Commit keeps the order of what stays: an id moves
// down by the number of removed ids below it).
std::vector<std::vector<Waiter>> WaitersOf(Graph& graph, const std::vector<int32_t>& old,
                                           const std::vector<int32_t>& gone) {
  auto is_gone = [&](int32_t t) { return std::binary_search(gone.begin(), gone.end(), t); };
  if (!graph.has_adjacency()) graph.BuildAdjacency();
  std::vector<std::vector<Waiter>> waiters(graph.iterations.size());
  std::vector<std::vector<TimeNs>> ends(graph.iterations.size());  // CPU-run old all-reduces' recorded ends
  bool cpu_run = false;
  for (int32_t t : old) {
    const Task& c = graph.tasks[static_cast<size_t>(t)];
    if (graph.resources[static_cast<size_t>(c.resource)].kind == ResourceKind::kCpuThread) {
      ends[static_cast<size_t>(c.iteration)].push_back(c.recorded_start_ns + c.duration_ns);
      cpu_run = true;
    }
    for (int32_t e : graph.out_edges(t)) {
      const Edge& edge = graph.edges[static_cast<size_t>(e)];
      if (edge.kind == EdgeKind::kSequential || is_gone(edge.to)) continue;
      const Task& w = graph.tasks[static_cast<size_t>(edge.to)];
      if (w.iteration != c.iteration || w.kind == TaskKind::kCollective || w.phase == Phase::kComm) continue;
      waiters[static_cast<size_t>(c.iteration)].push_back({edge.to, edge.lag_ns, 0});
    }
  }
  for (size_t t = 0; cpu_run && t < graph.tasks.size(); ++t) {
    const Task& w = graph.tasks[t];
    if (w.iteration < 0 || w.gap_ns <= 0 || w.kind == TaskKind::kCollective || w.phase == Phase::kComm ||
        graph.resources[static_cast<size_t>(w.resource)].kind != ResourceKind::kCpuThread ||
        is_gone(static_cast<int32_t>(t))) {
      continue;
    }
    TimeNs woke_by = -1;  // the latest old all-reduce end in the task's idle gap
    for (TimeNs end : ends[static_cast<size_t>(w.iteration)]) {
      if (end >= w.recorded_start_ns - w.gap_ns && end <= w.recorded_start_ns) woke_by = std::max(woke_by, end);
    }
    if (woke_by >= 0) {
      waiters[static_cast<size_t>(w.iteration)].push_back(
          {static_cast<int32_t>(t), std::min(w.recorded_start_ns - woke_by, BuildOptions{}.max_thread_wake_ns),
           w.gap_ns});
    }
  }
  // One entry per task (by an edge rather than a gap), renumbered.
  for (std::vector<Waiter>& list : waiters) {
    std::stable_sort(list.begin(), list.end(), [](const Waiter& a, const Waiter& b) { return a.task < b.task; });
    list.erase(std::unique(list.begin(), list.end(), [](const Waiter& a, const Waiter& b) { return a.task == b.task; }),
               list.end());
    for (Waiter& w : list) {
      w.task -= static_cast<int32_t>(std::lower_bound(gone.begin(), gone.end(), w.task) - gone.begin());
    }
  }
  return waiters;
}

// A stretch of an issuing thread's time in a replay: a task, or the
// framework time (gap) before it; `cut`: how much of it is to go.
struct ThreadPiece {
  TimeNs from, to;
  int32_t task;
  bool gap;
  double cut = 0;
};

// Cuts `per_iteration_ns` from each iteration's pieces between the start of
// its first backward task on their threads (or of its first recorded
// all-reduce, if earlier) and the end of its last recorded all-reduce, in
// proportion to each piece's time in that window; at most all of it.
void SpreadOverBackward(const Graph& graph, const Schedule& replay, const std::vector<int32_t>& old,
                        double per_iteration_ns, std::vector<std::vector<ThreadPiece>>& pieces) {
  const size_t n = graph.iterations.size();
  auto iteration_of = [&](int32_t task) -> int64_t {
    const int32_t it = graph.tasks[static_cast<size_t>(task)].iteration;
    return it >= 0 && static_cast<size_t>(it) < n ? it : -1;
  };
  std::vector<TimeNs> lo(n, std::numeric_limits<TimeNs>::max());
  std::vector<TimeNs> hi(n, std::numeric_limits<TimeNs>::min());
  for (int32_t t : old) {
    const int64_t it = iteration_of(t);
    if (it < 0) continue;
    lo[static_cast<size_t>(it)] = std::min(lo[static_cast<size_t>(it)], replay.start_ns[static_cast<size_t>(t)]);
    hi[static_cast<size_t>(it)] = std::max(hi[static_cast<size_t>(it)], replay.end_ns[static_cast<size_t>(t)]);
  }
  for (const std::vector<ThreadPiece>& list : pieces) {
    for (const ThreadPiece& p : list) {
      const int64_t it = iteration_of(p.task);
      if (it < 0 || graph.tasks[static_cast<size_t>(p.task)].phase != Phase::kBackward) continue;
      lo[static_cast<size_t>(it)] = std::min(lo[static_cast<size_t>(it)], p.from);
    }
  }
  auto in_window = [&](const ThreadPiece& p) -> TimeNs {
    const int64_t it = iteration_of(p.task);
    if (it < 0) return 0;
    const auto i = static_cast<size_t>(it);
    return std::max<TimeNs>(0, std::min(p.to, hi[i]) - std::max(p.from, lo[i]));
  };
  std::vector<double> total(n, 0);
  for (const std::vector<ThreadPiece>& list : pieces) {
    for (const ThreadPiece& p : list) {
      if (const TimeNs o = in_window(p); o > 0) total[static_cast<size_t>(iteration_of(p.task))] += static_cast<double>(o);
    }
  }
  for (std::vector<ThreadPiece>& list : pieces) {
    for (ThreadPiece& p : list) {
      const TimeNs o = in_window(p);
      if (o <= 0) continue;
      const double window = total[static_cast<size_t>(iteration_of(p.task))];
      p.cut += std::min(per_iteration_ns, window) * static_cast<double>(o) / window;
    }
  }
}

// While a recorded all-reduce ran on gloo's threads, they took CPU from the
// thread that computes (they share its core): the thread's work and framework
// time that overlapped the all-reduce hold it, not only the call that issued
// it. With the recorded all-reduce gone, so is what it took. How much: as for
// a new bucket (InsertAllReduces), `comm_cpu_share` of its time on the plan's
// network, and never more than that share of the thread's time it overlapped
// (a span lengthened by waiting for the other rank or for a late wake-up
// takes no more CPU). In a replay of the graph as recorded, it is spread over
// the tasks on the threads that issued the all-reduces, and the framework time
// (gap) before each, in proportion to their overlap with it; a gap in which an
// all-reduce ended is left alone (the thread waited for it: idle time). The
// calls in `issues` go whole; what issuing one costs is what is left of
// them once the all-reduce's share is taken out, or where that is less,
// their time from the start of the all-reduce they issued. `waited_us`, when
// not empty (one per iteration): how long the issuing thread was measured to
// wait for a core in each recorded iteration (Linux schedstat, which
// daydream.Profiler reads): that much of the iteration's overlapped time
// goes instead, at most all of it, shared among its all-reduces by their
// overlap. `unprofiled_wait_us`, when >= 0: how long the thread waited for
// a core per step after the forward, measured without the profiler (the
// Profiler's wait steps); that much of each iteration goes instead of either,
// spread over the issuing thread's time from the iteration's backward to the
// end of its last recorded all-reduce in proportion to its length, not only
// what the all-reduces overlapped (the wait was longer than that: 0.54 ms
// a step against 0.18 ms of overlap in an MLP's small-bucket capture; gloo's
// loop thread can take the core before an all-reduce's span begins, since
// it spins while the other rank's data waits for this rank's receive). The
// recorded waits are the profiled rank's, which the profiler's own work
// makes the slower one: the other rank is ahead of it more often and for
// longer than in a step run without the profiler.
struct RecordedShares {
  TimeNs removed_ns = 0;  // taken off the thread's other work
  TimeNs call_ns = 0;     // the calls' median, less the all-reduce's share or what ran after it began
};
absl::StatusOr<RecordedShares> RemoveRecordedCpuShares(Graph& graph, const std::vector<int32_t>& old,
                                                       const std::vector<int32_t>& issues, const AllReducePlan& plan,
                                                       const std::vector<double>& waited_us = {},
                                                       double unprofiled_wait_us = -1) {
  const double share = plan.comm_cpu_share;
  if (!plan.TakesThreadTime() || old.empty() || issues.empty()) return RecordedShares{};
  if (!graph.has_adjacency()) graph.BuildAdjacency();
  DD_ASSIGN_OR_RETURN(const Schedule replay, Simulate(graph));
  std::vector<TimeNs> ends;
  for (int32_t t : old) ends.push_back(replay.end_ns[static_cast<size_t>(t)]);
  std::sort(ends.begin(), ends.end());
  auto ends_in = [&](TimeNs a, TimeNs b) {  // an all-reduce ended in [a, b]
    auto it = std::lower_bound(ends.begin(), ends.end(), a);
    return it != ends.end() && *it <= b;
  };
  // The issuing threads' time, in replay order: each task and the gap before it.
  using Piece = ThreadPiece;
  std::vector<uint8_t> thread(graph.resources.size(), 0);
  std::vector<uint8_t> issuing(graph.tasks.size(), 0);
  for (int32_t t : issues) {
    thread[static_cast<size_t>(graph.tasks[static_cast<size_t>(t)].resource)] = 1;
    issuing[static_cast<size_t>(t)] = 1;
  }
  std::vector<std::vector<int32_t>> on_thread(graph.resources.size());
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const auto r = static_cast<size_t>(graph.tasks[t].resource);
    if (thread[r]) on_thread[r].push_back(static_cast<int32_t>(t));
  }
  std::vector<std::vector<Piece>> pieces;
  for (std::vector<int32_t>& list : on_thread) {
    if (list.empty()) continue;
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return replay.start_ns[static_cast<size_t>(a)] < replay.start_ns[static_cast<size_t>(b)];
    });
    std::vector<Piece>& out = pieces.emplace_back();
    TimeNs previous_end = std::numeric_limits<TimeNs>::min();
    for (int32_t id : list) {
      const auto t = static_cast<size_t>(id);
      const TimeNs start = replay.start_ns[t];
      const Task& task = graph.tasks[t];
      if (task.gap_ns > 0 && previous_end != std::numeric_limits<TimeNs>::min() && !issuing[t]) {
        const TimeNs gap_end = std::min(start, previous_end + task.gap_ns);
        if (gap_end > previous_end && !ends_in(previous_end, gap_end)) out.push_back({previous_end, gap_end, id, true});
      }
      out.push_back({start, replay.end_ns[t], id, false});
      previous_end = std::max(previous_end, replay.end_ns[t]);
    }
  }
  // Each all-reduce's take, spread over the pieces it overlapped.
  auto for_each_overlap = [&](TimeNs a, TimeNs b, auto&& f) {
    for (std::vector<Piece>& list : pieces) {
      auto it = std::lower_bound(list.begin(), list.end(), a, [](const Piece& p, TimeNs x) { return p.to <= x; });
      for (; it != list.end() && it->from < b; ++it) {
        const TimeNs o = std::min(b, it->to) - std::max(a, it->from);
        if (o > 0) f(*it, o);
      }
    }
  };
  // With the unprofiled wait, that goes over the whole backward instead of
  // what each recorded all-reduce overlapped.
  const bool unprofiled = unprofiled_wait_us >= 0;
  if (unprofiled) SpreadOverBackward(graph, replay, old, unprofiled_wait_us * 1e3, pieces);
  std::vector<TimeNs> overlapped_by(old.size(), 0);
  std::vector<double> iteration_overlap(graph.iterations.size(), 0);
  for (size_t k = 0; k < old.size() && !unprofiled; ++k) {
    const auto t = static_cast<size_t>(old[k]);
    for_each_overlap(replay.start_ns[t], replay.end_ns[t], [&](Piece&, TimeNs o) { overlapped_by[k] += o; });
    const int32_t it = graph.tasks[t].iteration;
    if (it >= 0 && static_cast<size_t>(it) < iteration_overlap.size()) {
      iteration_overlap[static_cast<size_t>(it)] += static_cast<double>(overlapped_by[k]);
    }
  }
  for (size_t k = 0; k < old.size() && !unprofiled; ++k) {
    const int32_t t = old[k];
    const Task& c = graph.tasks[static_cast<size_t>(t)];
    const TimeNs a = replay.start_ns[static_cast<size_t>(t)];
    const TimeNs b = replay.end_ns[static_cast<size_t>(t)];
    const TimeNs overlapped = overlapped_by[k];
    if (overlapped <= 0) continue;
    double take = 0;
    if (!waited_us.empty()) {
      const auto it = static_cast<size_t>(c.iteration);  // every iteration has its entry (checked by the caller)
      take = std::min(waited_us[it] * 1e3, iteration_overlap[it]) * static_cast<double>(overlapped) /
             iteration_overlap[it];
    } else {
      const TimeNs wire = CollectiveTime(Collective::kAllReduce, plan.algorithm, std::max<int64_t>(c.bytes, 0),
                                         plan.world_size, plan.network);
      if (plan.LatencyOnThread()) {  // as the new all-reduces are priced: the latency whole, the share of the rest
        const TimeNs latency = plan.AllReduceLatencyNs();
        take = std::min(static_cast<double>(overlapped),
                        static_cast<double>(latency) + share * static_cast<double>(wire - latency));
      } else {
        take = share * static_cast<double>(std::min(overlapped, wire));
      }
    }
    for_each_overlap(a, b, [&](Piece& p, TimeNs o) {
      p.cut += take * static_cast<double>(o) / static_cast<double>(overlapped);
    });
  }
  // The recorded all-reduces' spans by start. Once the all-reduce a call
  // issued has begun, what is left of the call was that all-reduce's CPU
  // time on the core (gloo's threads preempting the caller) or a wait for
  // it, not the call's own work; the new buckets are priced for that
  // themselves (comm_cpu_share, bucket_cpu_latency).
  std::vector<std::pair<TimeNs, TimeNs>> spans;
  for (int32_t t : old) {
    spans.emplace_back(replay.start_ns[static_cast<size_t>(t)], replay.end_ns[static_cast<size_t>(t)]);
  }
  std::sort(spans.begin(), spans.end());
  auto after_issued = [&](TimeNs a, TimeNs b) {  // the call's time from the first all-reduce begun in it
    auto it = std::lower_bound(spans.begin(), spans.end(), std::make_pair(a, std::numeric_limits<TimeNs>::min()));
    return it != spans.end() && it->first < b ? b - it->first : TimeNs{0};
  };
  RecordedShares result;
  std::vector<TimeNs> call_ns;
  for (const std::vector<Piece>& list : pieces) {
    for (const Piece& p : list) {
      Task& task = graph.tasks[static_cast<size_t>(p.task)];
      TimeNs& field = p.gap ? task.gap_ns : task.duration_ns;
      const TimeNs cut = std::min(field, RoundNs(p.cut));
      if (issuing[static_cast<size_t>(p.task)]) {
        // The call goes whole: nothing is cut; what issuing one costs is
        // what is left of it beside the all-reduces (at least the share).
        call_ns.push_back(task.duration_ns - std::min(task.duration_ns, std::max(cut, after_issued(p.from, p.to))));
        continue;
      }
      field -= cut;
      result.removed_ns += cut;
    }
  }
  result.call_ns = MedianOf(std::move(call_ns));  // issues is not empty
  return result;
}

// The builder links a task to a recorded all-reduce run by another CPU thread
// (a thread edge) when its thread resumed right after the all-reduce ended.
// Before the iteration's last gradient was produced that is not a wait for
// the result (backward never waits for its all-reduces: the thread resumed
// when gloo's threads gave its core back), and it goes with the all-reduce,
// instead of being bridged by the removal to what the all-reduce waited for. Later waiters (DDP's finalize, the
// optimizer) are relinked to the new buckets (WaitersOf). `gone`: as for
// WaitersOf; `produced_by`: GradientsProducedBy of the graph as recorded.
// Returns how many edges were dropped.
size_t DropWaitsBeforeGradients(const Graph& graph, GraphEditor& editor, const std::vector<int32_t>& old,
                                const std::vector<int32_t>& gone, const std::vector<TimeNs>& produced_by) {
  size_t dropped = 0;
  for (int32_t t : old) {
    const Task& c = graph.tasks[static_cast<size_t>(t)];
    if (c.iteration < 0 || static_cast<size_t>(c.iteration) >= produced_by.size()) continue;
    for (int32_t e : editor.OutEdges(t)) {
      const Edge& edge = graph.edges[static_cast<size_t>(e)];
      // A cross-thread resume, not a sync or data dependence.
      if (edge.kind != EdgeKind::kThread || std::binary_search(gone.begin(), gone.end(), edge.to)) continue;
      const Task& w = graph.tasks[static_cast<size_t>(edge.to)];
      if (w.iteration != c.iteration || w.recorded_start_ns >= produced_by[static_cast<size_t>(c.iteration)]) continue;
      editor.RemoveEdge(e);
      ++dropped;
    }
  }
  return dropped;
}

// Inserts the bucketed all-reduces of every iteration. Returns how many.
// `waiters[i]` (may be shorter than the iterations): the tasks of iteration
// i that waited for the gradient all-reduces a recorded graph had (DDP's
// finalize, copying the buckets back into the gradients): each waits for the
// iteration's last new bucket instead, where it started after every bucket's
// gradients were produced (`produced_by`, GradientsProducedBy of the graph as
// recorded: an edit since may have shortened a producer), else it cannot
// have waited for them all.
absl::StatusOr<int64_t> InsertAllReduces(Graph& graph, const AllReducePlan& plan, const std::vector<int32_t>& grads,
                                         PassContext& context, std::string_view pass,
                                         const std::vector<std::vector<Waiter>>& waiters = {},
                                         const std::vector<TimeNs>& produced_by = {}) {
  if (graph.iterations.empty()) {
    return absl::FailedPreconditionError("the graph has no iterations to place communication in");
  }
  // gap_latency's gaps and the queued all-reduces come from a replay before
  // any edit (task ids stay valid while the editor adds tasks, until Commit).
  // With bucket_cpu_latency the issuing thread pays each all-reduce's
  // latency, before the all-reduce, and the network only its bandwidth term;
  // nothing is priced as queued.
  const bool on_thread = plan.LatencyOnThread();
  const bool queueing = plan.queued_alpha_s >= 0 && !on_thread;
  const bool replayed = !plan.gap_latency.empty() || queueing || on_thread;
  NetworkModel network = plan.network;
  if (on_thread) network.alpha_s = 0;
  NetworkModel queued_network = plan.network;
  if (queueing) queued_network.alpha_s = plan.queued_alpha_s;
  Schedule replay;
  if (replayed) {
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    DD_ASSIGN_OR_RETURN(replay, Simulate(graph));
  }
  GraphEditor editor(graph);
  Resource channel;
  channel.kind = ResourceKind::kCommChannel;
  channel.process = -1;
  channel.thread = static_cast<int64_t>(graph.resources.size());
  channel.name = graph.strings.Intern(StrCat("network: all-reduce (", plan.world_size, " ranks, ",
                                             plan.algorithm == CollectiveAlgorithm::kRing ? "ring" : "tree", ")"));
  const int32_t resource = graph.AddResource(channel);
  // Without recorded all-reduces (whose waiters the graph holds) on CPU
  // ranks, what follows backward on its thread waits for them (AfterBackward).
  const bool finalize_waits = waiters.empty() && !HasGpuWork(graph);
  std::vector<std::vector<int32_t>> by_iteration(finalize_waits ? graph.iterations.size() : 0);
  for (size_t t = 0; t < graph.tasks.size() && finalize_waits; ++t) {  // ids in recorded order
    const int32_t i = graph.tasks[t].iteration;
    if (i >= 0 && static_cast<size_t>(i) < by_iteration.size()) by_iteration[static_cast<size_t>(i)].push_back(static_cast<int32_t>(t));
  }
  size_t report_finalize = 0;
  int32_t previous = -1;
  int64_t inserted = 0;
  // For the note: the first iteration that communicates.
  size_t report_buckets = 0;
  int64_t report_bytes = 0;
  TimeNs report_time = 0;
  TimeNs report_cpu_share = 0;
  TimeNs report_thread_latency = 0;
  TimeNs report_reducer = 0;
  TimeNs report_gap_extra = 0;
  TimeNs report_straggler = 0;
  size_t report_queued = 0;
  size_t linked_waiters = 0;
  TimeNs previous_ready = -1;  // replayed: when the previous iteration's last bucket was ready
  for (int32_t it = 0; it < static_cast<int32_t>(graph.iterations.size()); ++it) {
    const std::vector<std::vector<int32_t>> buckets =
        BucketGradients(graph, it, grads, plan.bucket_mb, plan.first_bucket_mb);
    if (buckets.empty()) continue;
    int32_t first_producer = std::numeric_limits<int32_t>::max();
    for (const auto& bucket : buckets) {
      for (int32_t t : bucket) {
        first_producer = std::min(first_producer, ProducerIn(graph.tensors[static_cast<size_t>(t)], it));
      }
    }
    const int32_t consumer = Consumer(graph, it, first_producer);
    int32_t after_backward = -1;
    if (finalize_waits) {
      int32_t last_producer = -1;
      for (const auto& bucket : buckets) {
        for (int32_t t : bucket) last_producer = std::max(last_producer, ProducerIn(graph.tensors[static_cast<size_t>(t)], it));
      }
      if (last_producer >= 0) {
        after_backward = AfterBackward(graph, by_iteration[static_cast<size_t>(it)],
                                       graph.tasks[static_cast<size_t>(last_producer)].resource);
      }
      for (const auto& bucket : buckets) {
        for (int32_t t : bucket) {
          if (ProducerIn(graph.tensors[static_cast<size_t>(t)], it) == after_backward) after_backward = -1;
        }
      }
      if (after_backward >= 0) ++report_finalize;
    }
    const bool report = report_buckets == 0;
    if (report) report_buckets = buckets.size();
    // Replayed ready times, and each bucket's gap: since the bucket before
    // it, or for the first, since the previous iteration's last (in the
    // first iteration: the iteration's length less its buckets' spread).
    std::vector<TimeNs> gap_ns(buckets.size(), 0);
    std::vector<TimeNs> ready(buckets.size(), 0);
    if (replayed) {
      for (size_t b = 0; b < buckets.size(); ++b) {
        for (int32_t t : buckets[b]) {
          const int32_t p = ProducerIn(graph.tensors[static_cast<size_t>(t)], it);
          ready[b] = std::max(ready[b], replay.end_ns[static_cast<size_t>(p)]);
        }
      }
      const Iteration& iteration = graph.iterations[static_cast<size_t>(it)];
      const TimeNs length = replay.end_ns[static_cast<size_t>(iteration.end_task)] -
                            replay.start_ns[static_cast<size_t>(iteration.begin_task)];
      gap_ns[0] = previous_ready >= 0 ? ready[0] - previous_ready : length - (ready.back() - ready[0]);
      for (size_t b = 1; b < buckets.size(); ++b) gap_ns[b] = ready[b] - ready[b - 1];
      previous_ready = ready.back();
    }
    // When the channel is free again, from the replayed ready times and the
    // durations given so far: a bucket ready before it is queued. Each
    // iteration starts with it free (its optimizer waited for the last one).
    TimeNs channel_free = std::numeric_limits<TimeNs>::min();
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t bytes = 0;
      TimeNs ready_order = 0;
      int32_t last_producer = -1;
      for (int32_t t : buckets[b]) {
        bytes += graph.tensors[static_cast<size_t>(t)].bytes;
        const int32_t p = ProducerIn(graph.tensors[static_cast<size_t>(t)], it);
        if (last_producer < 0 || graph.tasks[static_cast<size_t>(p)].recorded_start_ns >= ready_order) {
          last_producer = p;
        }
        ready_order = std::max(ready_order, graph.tasks[static_cast<size_t>(p)].recorded_start_ns);
      }
      Task task;
      task.kind = TaskKind::kCollective;
      task.phase = Phase::kComm;
      task.resource = resource;
      task.iteration = it;
      task.bytes = bytes;
      task.recorded_start_ns = ready_order;
      const double gap_us = static_cast<double>(std::max<TimeNs>(gap_ns[b], 0)) / 1e3;
      const bool queued = queueing && ready[b] < channel_free;
      const TimeNs wire = CollectiveTime(Collective::kAllReduce, plan.algorithm, bytes, plan.world_size,
                                         queued ? queued_network : network);
      const TimeNs gap_extra =
          queued || (on_thread && b > 0) ? 0 : RoundNs(GapExtraUs(plan.gap_latency, gap_us) * 1e3);
      // On the thread: the first all-reduce's latency term (its gap_latency,
      // a wait for the wake-up, stays on the network: waiting takes no CPU),
      // each later one's bucket_cpu_latency at its gap (held at the first
      // point's below it: a bucket right behind another still costs one).
      TimeNs thread_latency = 0;
      if (on_thread) {
        thread_latency = b == 0 ? plan.AllReduceLatencyNs()
                                : RoundNs(BucketLatencyUs(plan.bucket_cpu_latency, buckets.size(), gap_us) * 1e3);
      }
      // The iteration's first all-reduce also waits for the slowest rank.
      const TimeNs straggler = b == 0 ? RoundNs(plan.straggler_us * 1e3) : 0;
      task.duration_ns = wire + gap_extra + straggler;
      if (replayed) channel_free = std::max(ready[b], channel_free) + task.duration_ns;
      task.name = graph.strings.Intern(StrCat("all_reduce bucket ", b, " (", Mb(static_cast<double>(bytes)), ")"));
      if (report) {
        report_bytes += bytes;
        report_time += task.duration_ns + thread_latency;
        report_gap_extra += gap_extra;
        report_straggler += straggler;
        report_queued += queued ? 1 : 0;
      }
      const int32_t id = editor.AddTask(task);
      if (previous >= 0) editor.AddEdge(previous, id, EdgeKind::kSequential);
      previous = id;
      for (int32_t t : buckets[b]) {
        editor.AddEdge(ProducerIn(graph.tensors[static_cast<size_t>(t)], it), id, EdgeKind::kData);
      }
      editor.AddEdge(id, consumer, EdgeKind::kData);
      if (after_backward >= 0) {
        editor.AddEdge(id, after_backward, EdgeKind::kData, graph.tasks[static_cast<size_t>(after_backward)].gap_ns);
      }
      // What runs on the issuing thread, in order after the bucket's last
      // gradient: DDP's reducer work and the latency paid there (the
      // all-reduce waits for them), then the collective's CPU share (the
      // optimizer waits for it).
      int32_t issuer = last_producer;
      const double reducer_us = plan.ddp_cpu_per_gradient_us * static_cast<double>(buckets[b].size()) +
                                (b == 0 ? plan.ddp_cpu_us : 0.0) + static_cast<double>(plan.issue_call_ns) / 1e3;
      if (reducer_us > 0) {
        Task reducer;
        reducer.iteration = it;
        reducer.recorded_start_ns = ready_order;
        reducer.duration_ns = RoundNs(reducer_us * 1e3);
        reducer.name = graph.strings.Intern(StrCat("DDP reducer: bucket ", b, " (", buckets[b].size(), " gradients)"));
        DD_ASSIGN_OR_RETURN(issuer, InsertOnIssuingThread(editor, last_producer, reducer, id,
                                                          plan.ddp_cpu_us > 0              ? "ddp_cpu_us"
                                                          : plan.ddp_cpu_per_gradient_us > 0 ? "ddp_cpu_per_gradient_us"
                                                                                             : "comm_cpu_share"));
        if (report) report_reducer += reducer.duration_ns;
      }
      if (thread_latency > 0) {
        Task latency;
        latency.iteration = it;
        latency.recorded_start_ns = ready_order;
        latency.duration_ns = thread_latency;
        latency.name = graph.strings.Intern(StrCat(graph.Str(task.name), ": latency"));
        DD_ASSIGN_OR_RETURN(issuer, InsertOnIssuingThread(editor, issuer, latency, id, "bucket_cpu_latency"));
        if (report) report_thread_latency += thread_latency;
      }
      if (plan.comm_cpu_share > 0) {
        Task share;
        share.iteration = it;
        share.recorded_start_ns = ready_order;
        share.duration_ns = RoundNs(plan.comm_cpu_share * static_cast<double>(wire));  // waiting takes no CPU
        share.name = graph.strings.Intern(StrCat(graph.Str(task.name), ": CPU share"));
        DD_RETURN_IF_ERROR(InsertOnIssuingThread(editor, issuer, share, consumer, "comm_cpu_share").status());
        if (report) report_cpu_share += share.duration_ns;
      }
      ++inserted;
    }
    if (static_cast<size_t>(it) < waiters.size()) {
      for (const Waiter& w : waiters[static_cast<size_t>(it)]) {
        Task& task = graph.tasks[static_cast<size_t>(w.task)];
        // A producer of the iteration's gradients (a recorded zero-length one
        // ends where it starts) cannot wait for their all-reduces.
        const bool producer = std::any_of(buckets.begin(), buckets.end(), [&](const std::vector<int32_t>& bucket) {
          return std::any_of(bucket.begin(), bucket.end(), [&](int32_t t) {
            return ProducerIn(graph.tensors[static_cast<size_t>(t)], it) == w.task;
          });
        });
        if (producer || static_cast<size_t>(it) >= produced_by.size() ||
            task.recorded_start_ns < produced_by[static_cast<size_t>(it)]) {
          continue;
        }
        editor.AddEdge(previous, w.task, EdgeKind::kData, w.lag_ns);
        task.gap_ns = std::max<TimeNs>(0, task.gap_ns - w.gap_cut_ns);
        ++linked_waiters;
      }
    }
  }
  if (inserted == 0) {
    return absl::FailedPreconditionError("no iteration has gradients with a producing task");
  }
  DD_RETURN_IF_ERROR(editor.Commit());
  context.Note(StrCat(pass, ": ", plan.world_size, " ranks, ",
                      plan.algorithm == CollectiveAlgorithm::kRing ? "ring" : "tree", " all-reduce over ",
                      plan.network.source, " (", plan.network.beta_bytes_per_s / 1e9, " GB/s, ",
                      plan.network.alpha_s * 1e6, " us): ", grads.size(), " gradients (",
                      Mb(static_cast<double>(report_bytes)), ") in ", report_buckets, " buckets per iteration, ",
                      static_cast<double>(report_time) / 1e6, " ms of all-reduce per iteration",
                      plan.comm_cpu_share > 0
                          ? StrCat(", ", static_cast<double>(report_cpu_share) / 1e6, " ms of it on the CPU thread "
                                   "that issues it (comm_cpu_share ", plan.comm_cpu_share, ")")
                          : std::string(),
                      report_thread_latency > 0
                          ? StrCat(", ", static_cast<double>(report_thread_latency) / 1e6,
                                   " ms of it the all-reduces' latencies, paid by the issuing thread before each "
                                   "(bucket_cpu_latency)")
                          : std::string(),
                      report_gap_extra > 0
                          ? StrCat(" (", static_cast<double>(report_gap_extra) / 1e6,
                                   " ms of it for the compute before each all-reduce, gap_latency)")
                          : std::string(),
                      report_straggler > 0
                          ? StrCat(" (", static_cast<double>(report_straggler) / 1e6,
                                   " ms of it waiting for the slowest rank, straggler_us)")
                          : std::string(),
                      report_queued > 0
                          ? StrCat("; ", report_queued, " of the ", report_buckets,
                                   " all-reduces queued behind the one before (queued_latency_us ",
                                   plan.queued_alpha_s * 1e6, ")")
                          : std::string(),
                      report_reducer > 0
                          ? StrCat("; DDP's reducer ", static_cast<double>(report_reducer) / 1e6,
                                   " ms per iteration on that thread before the all-reduces (ddp_cpu_us ",
                                   plan.ddp_cpu_us, ", ddp_cpu_per_gradient_us ", plan.ddp_cpu_per_gradient_us,
                                   plan.issue_call_ns > 0
                                       ? StrCat(", and the recorded calls' median ",
                                                static_cast<double>(plan.issue_call_ns) / 1e3, " us to issue each")
                                       : std::string(),
                                   ")")
                          : std::string(),
                      linked_waiters > 0
                          ? StrCat("; ", linked_waiters, " tasks that waited for the recorded all-reduces (DDP's "
                                   "copy of the buckets into the gradients) wait for each iteration's last bucket")
                          : std::string(),
                      report_finalize > 0
                          ? StrCat("; in ", report_finalize, " iterations the task after backward on its thread, and "
                                   "the framework time before it, wait for the all-reduces (DDP's finalize blocks "
                                   "the CPU rank at the end of backward)")
                          : std::string()));
  return inserted;
}

// The replayed length of each iteration of `graph`.
absl::StatusOr<std::vector<TimeNs>> ReplayedIterationSpans(Graph& graph) {
  if (!graph.has_adjacency()) graph.BuildAdjacency();
  DD_ASSIGN_OR_RETURN(const Schedule replay, Simulate(graph));
  std::vector<TimeNs> spans;
  for (const Iteration& it : graph.iterations) spans.push_back(IterationEndNs(replay, it) - IterationBeginNs(replay, it));
  return spans;
}

// DDP's broadcast_buffers: at the start of every forward, rank 0 broadcasts
// the module's buffers (batch-norm running statistics), and the forward waits
// for it. Per iteration, a broadcast of `bytes` on the plan's network, on the
// CPU thread before its first forward task (which blocks on it), plus
// `extra_us` after a step of the iteration's length (`spans`: as replayed
// before the pass; broadcast_latency). Error: an iteration without a forward
// task on a CPU thread.
absl::Status InsertBufferBroadcasts(Graph& graph, const AllReducePlan& plan, int64_t bytes,
                                    const std::vector<std::pair<double, double>>& extra_us,
                                    const std::vector<TimeNs>& spans, PassContext& context) {
  GraphEditor editor(graph);
  const TimeNs wire = CollectiveTime(Collective::kBroadcast, plan.algorithm, bytes, plan.world_size, plan.network);
  const StringId name = graph.strings.Intern(StrCat("broadcast buffers (", Mb(static_cast<double>(bytes)), ")"));
  std::vector<int32_t> first_forward(graph.iterations.size(), -1);
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const Task& task = graph.tasks[t];
    if (task.iteration >= 0 && task.phase == Phase::kForward &&
        graph.resources[static_cast<size_t>(task.resource)].kind == ResourceKind::kCpuThread &&
        first_forward[static_cast<size_t>(task.iteration)] < 0) {
      first_forward[static_cast<size_t>(task.iteration)] = static_cast<int32_t>(t);
    }
  }
  for (int32_t it = 0; it < static_cast<int32_t>(graph.iterations.size()); ++it) {
    const int32_t forward = first_forward[static_cast<size_t>(it)];
    if (forward < 0) {
      return absl::FailedPreconditionError(StrCat("buffer_bytes: iteration ", it,
                                                  " has no forward task on a CPU thread to broadcast buffers before"));
    }
    Task task;
    task.kind = TaskKind::kCollective;
    task.phase = Phase::kComm;
    task.resource = graph.tasks[static_cast<size_t>(forward)].resource;
    task.iteration = it;
    task.bytes = bytes;
    task.recorded_start_ns = graph.tasks[static_cast<size_t>(forward)].recorded_start_ns;
    task.duration_ns = wire;
    if (!extra_us.empty()) {
      task.duration_ns += RoundNs(GapExtraUs(extra_us, static_cast<double>(spans[static_cast<size_t>(it)]) / 1e3) * 1e3);
    }
    task.name = name;
    const int32_t id = editor.AddTask(task);
    editor.InsertAfterOnResource(editor.SequentialPrev(forward), id);
    Iteration& iteration = graph.iterations[static_cast<size_t>(it)];
    if (iteration.begin_task == forward) iteration.begin_task = id;
  }
  DD_RETURN_IF_ERROR(editor.Commit());
  std::string extra;
  if (!extra_us.empty() && !spans.empty()) {
    const TimeNs median = MedianOf(spans);
    extra = StrCat(", plus broadcast_latency's extra for its iteration's step (",
                   GapExtraUs(extra_us, static_cast<double>(median) / 1e3) / 1e3, " ms for the median step, ",
                   static_cast<double>(median) / 1e6, " ms)");
  }
  context.Note(StrCat("data_parallel: DDP broadcasts ", Mb(static_cast<double>(bytes)),
                      " of module buffers before every forward, blocking: ", static_cast<double>(wire) / 1e6,
                      " ms on the wire", extra));
  return absl::OkStatus();
}

absl::StatusOr<AllReducePlan> PlanFrom(const PassOptions& options, const Graph& graph, int world_size,
                                       const std::vector<CollectiveSample>& recorded) {
  AllReducePlan plan;
  plan.world_size = world_size;
  DD_ASSIGN_OR_RETURN(plan.algorithm, ParseCollectiveAlgorithm(options.String("algorithm")));
  DD_ASSIGN_OR_RETURN(plan.network, ResolveNetwork(options, graph, recorded));
  plan.bucket_mb = options.Double("bucket_mb");
  plan.first_bucket_mb = options.Double("first_bucket_mb");
  if (plan.bucket_mb < 0 || plan.first_bucket_mb < 0) {
    return absl::InvalidArgumentError("bucket_mb and first_bucket_mb must be >= 0");
  }
  plan.comm_cpu_share = options.Double("comm_cpu_share");
  if (!(plan.comm_cpu_share >= 0 && plan.comm_cpu_share <= 1)) {
    return absl::InvalidArgumentError(StrCat("comm_cpu_share must be in [0, 1], got ", plan.comm_cpu_share));
  }
  DD_ASSIGN_OR_RETURN(plan.gap_latency, ParseGapLatency(options.String("gap_latency")));
  DD_ASSIGN_OR_RETURN(plan.bucket_cpu_latency, ParseBucketLatency(options.String("bucket_cpu_latency")));
  plan.ddp_cpu_us = options.Double("ddp_cpu_us");
  plan.ddp_cpu_per_gradient_us = options.Double("ddp_cpu_per_gradient_us");
  plan.straggler_us = options.Double("straggler_us");
  const double queued_latency_us = options.Double("queued_latency_us");
  if (!(queued_latency_us == -1 || (queued_latency_us >= 0 && queued_latency_us <= 1e9))) {
    return absl::InvalidArgumentError(
        StrCat("queued_latency_us must be -1 (the network's latency) or in [0, 1e9] microseconds, got ",
               queued_latency_us));
  }
  plan.queued_alpha_s = queued_latency_us < 0 ? -1 : queued_latency_us * 1e-6;
  for (const auto& [option, value] : {std::pair<const char*, double>{"ddp_cpu_us", plan.ddp_cpu_us},
                                      {"ddp_cpu_per_gradient_us", plan.ddp_cpu_per_gradient_us},
                                      {"straggler_us", plan.straggler_us}}) {
    if (!(value >= 0 && value <= 1e9)) {
      return absl::InvalidArgumentError(StrCat(option, " must be in [0, 1e9] microseconds, got ", value));
    }
  }
  return plan;
}

class DataParallelPass : public Pass {
 public:
  explicit DataParallelPass(PassOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "data_parallel"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const int64_t world = options_.Int("world_size");
    if (world < 1 || world > (int64_t{1} << 24)) return absl::InvalidArgumentError("world_size must be in 1..16777216");
    DD_RETURN_IF_ERROR(PlanFrom(options_, graph, static_cast<int>(world), {}).status());  // check options even if unused
    DD_ASSIGN_OR_RETURN(const auto broadcast_extra,
                        ParseGapLatency(options_.String("broadcast_latency"), "broadcast_latency"));
    const int64_t buffer_bytes = options_.Int("buffer_bytes");
    if (buffer_bytes < 0 || buffer_bytes > (int64_t{1} << 50)) {
      return absl::InvalidArgumentError("buffer_bytes must be in 0..2^50");
    }
    const double cpu_factor = options_.Double("cpu_factor");
    if (!(cpu_factor > 0 && cpu_factor <= 100)) {
      return absl::InvalidArgumentError(StrCat("cpu_factor must be in (0, 100], got ", cpu_factor));
    }
    if (world == 1) {
      context.Note("data_parallel: world_size=1, nothing to communicate; the graph is unchanged");
      return false;
    }
    int64_t recorded = 0;
    for (const Task& t : graph.tasks) recorded += t.kind == TaskKind::kCollective ? 1 : 0;
    if (recorded > 0) {
      return absl::FailedPreconditionError(StrCat(
          "the graph already communicates (", recorded, " collectives): it was recorded data-parallel; "
          "use tensor_fusion to change the buckets, or scale:comm=... to change the network"));
    }
    DD_ASSIGN_OR_RETURN(std::vector<int32_t> grads, Gradients(graph, options_.Double("gradient_mb")));
    DD_ASSIGN_OR_RETURN(AllReducePlan plan, PlanFrom(options_, graph, static_cast<int>(world), {}));
    if (cpu_factor != 1.0) {
      // Before the all-reduces go in: their gaps (gap_latency) and queueing
      // come from a replay of the graph, which must run at the ranks' speed.
      GraphEditor editor(graph);
      int64_t scaled = 0;
      for (size_t t = 0; t < graph.tasks.size(); ++t) {
        if (!IsCpuWork(graph, graph.tasks[t])) continue;
        editor.ScaleCpuWork(static_cast<int32_t>(t), cpu_factor);
        ++scaled;
      }
      DD_RETURN_IF_ERROR(editor.Commit());
      context.Note(StrCat("data_parallel: ", scaled, " CPU tasks and the framework time before them take ",
                          cpu_factor, "x as long (cpu_factor: ranks sharing the host's cores, caches and memory)"));
    }
    // The iterations' lengths before any communication goes in (after
    // cpu_factor: the ranks' own steps), broadcast_latency's steps.
    std::vector<TimeNs> spans;
    if (buffer_bytes > 0 && !broadcast_extra.empty()) {
      DD_ASSIGN_OR_RETURN(spans, ReplayedIterationSpans(graph));
    }
    DD_RETURN_IF_ERROR(InsertAllReduces(graph, plan, grads, context, name()).status());
    if (buffer_bytes > 0) {
      DD_RETURN_IF_ERROR(InsertBufferBroadcasts(graph, plan, buffer_bytes, broadcast_extra, spans, context));
    }
    return true;
  }

 private:
  PassOptions options_;
};

// recorded_cpu_wait_us: "US;US;..." with one value per recorded iteration,
// each in [0, 1e9] (empty: none given). Error: a bad value or count.
absl::StatusOr<std::vector<double>> ParseRecordedWaits(const std::string& text, size_t iterations) {
  std::vector<double> out;
  if (text.empty()) return out;
  for (absl::string_view piece : absl::StrSplit(text, ';')) {
    double v = 0;
    if (!absl::SimpleAtod(piece, &v) || !(v >= 0 && v <= 1e9)) {
      return absl::InvalidArgumentError(StrCat("recorded_cpu_wait_us: '", std::string(piece),
                                               "' is not a time in microseconds in [0, 1e9]"));
    }
    out.push_back(v);
  }
  if (out.size() != iterations) {
    return absl::InvalidArgumentError(StrCat("recorded_cpu_wait_us has ", out.size(), " values; the graph has ",
                                             iterations, " iterations (one value per recorded iteration)"));
  }
  return out;
}

class TensorFusionPass : public Pass {
 public:
  explicit TensorFusionPass(PassOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "tensor_fusion"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const int64_t asked = options_.Int("world_size");
    if (asked < 0 || asked > (int64_t{1} << 24)) return absl::InvalidArgumentError("world_size must be in 0..16777216");
    const int world = asked > 0 ? static_cast<int>(asked) : graph.world_size;
    // The gradient all-reduces the trace recorded: replaced by the new
    // buckets. Also the CPU ops that issued them (c10d::allreduce_ on the
    // thread that computes): their spans hold what the collective took from
    // that thread, which the new buckets' CPU shares model when there is one.
    std::vector<int32_t> old;
    std::vector<int32_t> issues;
    for (size_t t = 0; t < graph.tasks.size(); ++t) {
      const Task& task = graph.tasks[t];
      if (task.iteration < 0 || (task.kind != TaskKind::kCollective && task.phase != Phase::kComm)) continue;
      absl::StatusOr<Collective> c = CollectiveOfTaskName(graph.Str(task.name));
      if (!c.ok() || *c != Collective::kAllReduce) continue;
      if (task.kind == TaskKind::kCollective) {
        old.push_back(static_cast<int32_t>(t));
      } else if (graph.resources[static_cast<size_t>(task.resource)].kind == ResourceKind::kCpuThread) {
        issues.push_back(static_cast<int32_t>(t));
      }
    }
    if (world <= 1) {
      return absl::FailedPreconditionError(
          old.empty() ? "the graph is single-device: pass world_size=N (N >= 2) to fuse its gradients' all-reduces"
                      : "the trace does not say how many ranks it had: pass world_size=N");
    }
    const std::vector<CollectiveSample> samples = CollectiveSamples(graph, world);
    DD_ASSIGN_OR_RETURN(std::vector<int32_t> grads, Gradients(graph, options_.Double("gradient_mb")));
    DD_ASSIGN_OR_RETURN(AllReducePlan plan, PlanFrom(options_, graph, world, samples));
    // Without a CPU share or latencies on the thread the collectives take
    // nothing from it, and the recorded calls stay.
    if (!plan.TakesThreadTime() || old.empty()) issues.clear();
    DD_ASSIGN_OR_RETURN(const std::vector<double> waited_us, ParseRecordedWaits(options_.String("recorded_cpu_wait_us"),
                                                                                graph.iterations.size()));
    const double unprofiled_wait_us = options_.Double("unprofiled_cpu_wait_us");
    if (!(unprofiled_wait_us == -1 || (unprofiled_wait_us >= 0 && unprofiled_wait_us <= 1e9))) {
      return absl::InvalidArgumentError(StrCat("unprofiled_cpu_wait_us must be -1 (none) or a time in microseconds "
                                               "in [0, 1e9], got ", unprofiled_wait_us));
    }
    if (!old.empty() && (plan.ddp_cpu_us > 0 || plan.ddp_cpu_per_gradient_us > 0)) {
      // The recorded graph already holds DDP's reducer work (its hooks stay,
      // one per gradient, whatever the buckets).
      plan.ddp_cpu_us = plan.ddp_cpu_per_gradient_us = 0;
      context.Note("tensor_fusion: ddp_cpu_us and ddp_cpu_per_gradient_us ignored: the recorded graph already "
                   "holds DDP's reducer work");
    }
    // What waited for the recorded all-reduces waits for the new ones: the
    // removal below would link it to what the old ones waited for instead.
    std::vector<std::vector<Waiter>> waiters;
    std::vector<TimeNs> produced_by;
    if (!old.empty()) {
      std::vector<int32_t> gone = old;
      gone.insert(gone.end(), issues.begin(), issues.end());
      std::sort(gone.begin(), gone.end());
      waiters = WaitersOf(graph, old, gone);
      // Before the shares below shorten the producers.
      produced_by = GradientsProducedBy(graph, grads);
      DD_ASSIGN_OR_RETURN(const RecordedShares shares, RemoveRecordedCpuShares(graph, old, issues, plan, waited_us,
                                                                                 unprofiled_wait_us));
      // One call issues each bucket's all-reduce, as the recorded ones did.
      plan.issue_call_ns = shares.call_ns;
      GraphEditor editor(graph);
      const size_t dropped = DropWaitsBeforeGradients(graph, editor, old, gone, produced_by);
      for (int32_t t : old) DD_RETURN_IF_ERROR(editor.RemoveTask(t, /*keep_gap=*/false));
      TimeNs issued = 0;
      for (int32_t t : issues) {
        issued += graph.tasks[static_cast<size_t>(t)].duration_ns;
        // The framework time before the call (DDP's gradient hook) stays.
        DD_RETURN_IF_ERROR(editor.RemoveTask(t, /*keep_gap=*/true));
      }
      DD_RETURN_IF_ERROR(editor.Commit());
      context.Note(StrCat("tensor_fusion: replaced ", old.size(), " recorded gradient all-reduces",
                          issues.empty() ? std::string()
                                         : StrCat(" and the ", issues.size(), " calls that issued them (",
                                                  static_cast<double>(issued) / 1e6, " ms on the issuing thread; "
                                                  "one call of their median and a CPU share per new bucket take "
                                                  "their place)"),
                          shares.removed_ns > 0
                              ? StrCat("; ", static_cast<double>(shares.removed_ns) / 1e6,
                                       " ms of the issuing thread's other work, ",
                                       issues.empty() ? "its comm_cpu_share while the recorded all-reduces ran"
                                       : unprofiled_wait_us >= 0
                                           ? "the time it waited for a core per step after the forward without the "
                                             "profiler (unprofiled_cpu_wait_us), from each iteration's backward to "
                                             "its last recorded all-reduce"
                                       : waited_us.empty()
                                           ? "its comm_cpu_share while the recorded all-reduces ran"
                                           : "the time it waited for a core while the recorded all-reduces ran "
                                             "(recorded_cpu_wait_us)",
                                       ", goes with them")
                              : std::string(),
                          dropped > 0 ? StrCat("; ", dropped, " waits for them by tasks that ran before their "
                                               "iteration's gradients were all produced go too")
                                      : std::string()));
      // Tensor ids are unchanged by the removal; the list stays valid.
    }
    DD_RETURN_IF_ERROR(InsertAllReduces(graph, plan, grads, context, name(), waiters, produced_by).status());
    return true;
  }

 private:
  PassOptions options_;
};

}  // namespace

double GapExtraUs(const std::vector<std::pair<double, double>>& points, double gap_us) {
  double x0 = 0;
  double y0 = 0;
  for (const auto& [x1, y1] : points) {
    if (gap_us <= x1) return y0 + (y1 - y0) * (gap_us - x0) / (x1 - x0);
    x0 = x1;
    y0 = y1;
  }
  return y0;  // flat after the last point (0 without points)
}

std::vector<std::vector<int32_t>> BucketGradients(const Graph& graph, int32_t iteration,
                                                  const std::vector<int32_t>& gradients, double bucket_mb,
                                                  double first_bucket_mb) {
  std::vector<std::pair<int32_t, int32_t>> ready;  // (producer, tensor)
  for (int32_t t : gradients) {
    const int32_t p = ProducerIn(graph.tensors[static_cast<size_t>(t)], iteration);
    if (p >= 0) ready.emplace_back(p, t);
  }
  std::stable_sort(ready.begin(), ready.end());
  // As DDP assigns them (torch.distributed._compute_bucket_assignment_by_size):
  // a gradient joins the open bucket, which closes once it holds at least its
  // cap, so the gradient that crosses the cap stays in it. The first bucket
  // has its own (smaller) cap.
  std::vector<std::vector<int32_t>> buckets;
  double filled = 0;
  bool open = false;
  for (const auto& [producer, t] : ready) {
    if (!open) {
      buckets.emplace_back();
      filled = 0;
      open = true;
    }
    buckets.back().push_back(t);
    filled += static_cast<double>(graph.tensors[static_cast<size_t>(t)].bytes);
    const double cap = (buckets.size() == 1 ? first_bucket_mb : bucket_mb) * kMiB;
    if (bucket_mb <= 0 || filled >= cap) open = false;
  }
  return buckets;
}

PassInfo DataParallelPassInfo() {
  PassInfo info;
  info.name = "data_parallel";
  info.summary = "N-way data parallelism from a single-device graph";
  info.model =
      "Every gradient is all-reduced among world_size ranks on a network resource, in buckets filled in the "
      "order gradients become ready (DDP: bucket_mb, first bucket first_bucket_mb; a bucket closes once it holds "
      "at least its cap); a bucket's all-reduce starts "
      "when its last gradient is ready and runs overlapped with the rest of backward; the optimizer step waits "
      "for all of them, and on a CPU-only graph so does the first task after backward on its thread, after its "
      "framework time (DDP's finalize blocks a CPU rank at the end of backward). Time per all-reduce from the alpha-beta model (ring 2(N-1)a + 2(N-1)/N b/B; tree "
      "2 log2(N) a + 2 b/B), plus gap_latency's extra for the compute since the rank's previous bucket, and "
      "on an iteration's first all-reduce straggler_us (the wait for the slowest rank); with queued_latency_us, "
      "an all-reduce ready while the one before it still runs takes that latency instead, and no gap_latency; "
      "with bucket_cpu_latency, every all-reduce's latency (the first's the network's, each later one's from "
      "those points at its gap) runs on the thread that issues it before the all-reduce, and the network takes "
      "the bandwidth term and the first's gap_latency. "
      "Where "
      "collectives need the cores that compute (gloo on CPU ranks), comm_cpu_share of each all-reduce's wire "
      "time also runs on the thread that issued it, after the bucket's last gradient, and delays what that "
      "thread does next; with ddp_cpu_us and ddp_cpu_per_gradient_us, DDP's own CPU work (per iteration, and per "
      "gradient in the bucket) runs there before each bucket's all-reduce. With buffer_bytes, DDP's buffer "
      "broadcast blocks the CPU thread before every forward (with broadcast_latency's extra for a step of the "
      "iteration's length). With cpu_factor, every rank's CPU work takes that "
      "factor times as long (ranks that share a host). Sources: Daydream (ATC'20) data-parallel model, "
      "PyTorch DDP bucketing and "
      "broadcast_buffers.";
  info.options = {
      {"world_size", OptionType::kInt, "8", "number of data-parallel ranks (1: no change)"},
      {"bucket_mb", OptionType::kDouble, "25", "bucket size in MB (0: one all-reduce per gradient)"},
      {"first_bucket_mb", OptionType::kDouble, "1", "size of the first bucket in MB"},
      {"gradient_mb", OptionType::kDouble, "0",
       "total gradient size in MB, for traces that do not record gradient sizes (0: from the graph)"},
      {"buffer_bytes", OptionType::kInt, "0",
       "bytes of module buffers (batch-norm running statistics) DDP broadcasts from rank 0 before every forward "
       "(broadcast_buffers=True); the graph cannot tell them: daydream.predict sets it from the model (0: none)"},
      {"broadcast_latency", OptionType::kString, "",
       "extra time of the buffer broadcast after a step of the iteration's length (as replayed before the "
       "communication goes in, cpu_factor applied), as STEP_US:EXTRA_US points separated by ';', linear between "
       "them, from 0 at no step, flat after the last: what the "
       "broadcast adds to a DDP step beyond its wire time (on gloo, the wake-ups and the wait for the slower rank "
       "it holds; daydream.calibrate_network measures it on DDP steps; empty: none)"},
      {"cpu_factor", OptionType::kDouble, "1",
       "time factor for the CPU work of each rank (operators, runtime calls, the framework time between them): "
       "ranks that share one host's cores, caches and memory bandwidth run slower than one process alone; "
       "daydream.predict measures it for a known CPU model by running copies of its forward and backward in "
       "world_size processes at once (daydream.calibrate.corun_cpu_factor; 1: ranks on separate hosts)"},
  };
  for (OptionSpec& s : NetworkOptions()) info.options.push_back(s);
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new DataParallelPass(o));
  };
  return info;
}

PassInfo TensorFusionPassInfo() {
  PassInfo info;
  info.name = "tensor_fusion";
  info.summary = "gradient bucketing: one all-reduce per bucket of gradients";
  info.model =
      "Gradients are grouped into buckets of bucket_mb in the order they become ready (the first bucket "
      "first_bucket_mb; as DDP, a bucket closes once it holds at least its cap); one all-reduce per bucket starts "
      "when its last gradient is ready, timed as in data_parallel (queued_latency_us for one queued behind "
      "another, bucket_cpu_latency for latencies paid on the issuing thread); the optimizer step waits for all "
      "of them. On a graph that recorded gradient all-reduces, those are replaced "
      "and the network is fitted to them (alpha-beta, least squares), and what waited for them (DDP's copy of the "
      "buckets into the gradients: by an edge, or by an idle gap holding a CPU-run all-reduce's end) waits for the "
      "iteration's last new bucket; on a single-device graph it acts as "
      "data_parallel with world_size ranks. A CPU task that resumed just after a recorded all-reduce before the "
      "iteration's gradients were all produced no longer waits. With comm_cpu_share, each new all-reduce also runs "
      "that share of its time on the thread that issues it, after one issuing call (the recorded calls' median less "
      "the all-reduce share they hold); the recorded calls are removed, and so is what each recorded all-reduce took "
      "from the issuing thread's other work (the share of its overlap, at most the share of its time on the "
      "network; with recorded_cpu_wait_us, the time the thread was measured to wait for a core instead; with "
      "unprofiled_cpu_wait_us, the wait measured without the profiler, taken from the whole backward up to the "
      "last recorded all-reduce). Sources: Horovod tensor fusion, PyTorch DDP buckets, XLA's all-reduce combiner, DisCo.";
  info.options = {
      {"bucket_mb", OptionType::kDouble, "25", "bucket size in MB (0: one all-reduce per gradient)"},
      {"first_bucket_mb", OptionType::kDouble, "1", "size of the first bucket in MB"},
      {"world_size", OptionType::kInt, "0", "number of ranks (0: the trace's world size)"},
      {"gradient_mb", OptionType::kDouble, "0",
       "total gradient size in MB, for traces that do not record gradient sizes (0: from the graph)"},
      {"recorded_cpu_wait_us", OptionType::kString, "",
       "with comm_cpu_share, per recorded iteration ('US;US;...'), how long the thread that computes and issues "
       "the all-reduces waited for a core (daydream.Profiler reads it from Linux schedstat): that much of its time "
       "overlapped by the recorded all-reduces goes with them, instead of comm_cpu_share of their time (empty: "
       "comm_cpu_share)"},
      {"unprofiled_cpu_wait_us", OptionType::kDouble, "-1",
       "with comm_cpu_share, how long the thread that computes and issues the all-reduces waited for a core per "
       "step after the model's forward, measured without the profiler (daydream.Profiler reads it from Linux "
       "schedstat in its wait steps): that much of each iteration's time on that thread, from its backward to the "
       "end of its last recorded all-reduce, goes with them, instead of recorded_cpu_wait_us (the profiled rank's, "
       "which the profiler makes the slower one) or comm_cpu_share (-1: none)"},
  };
  for (OptionSpec& s : NetworkOptions()) info.options.push_back(s);
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new TensorFusionPass(o));
  };
  return info;
}

}  // namespace daydream
