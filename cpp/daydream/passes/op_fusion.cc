#include "daydream/passes/op_fusion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

// Name of the fused task. It is not elementwise by IsElementwiseKernelName, so
// running the pass twice does not fuse fused kernels again.
constexpr std::string_view kFusedKernelName = "fused pointwise kernel";
constexpr std::string_view kFusedCpuOpName = "fused pointwise op";


std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Each resource's tasks in chain order (following sequential edges), and
// every task's position in its resource's order.
struct ResourceOrder {
  std::vector<std::vector<int32_t>> tasks;
  std::vector<int32_t> position;
};

ResourceOrder OrderResources(const Graph& g) {
  ResourceOrder order;
  order.tasks.resize(g.resources.size());
  order.position.assign(g.tasks.size(), -1);
  auto seq_next = [&](int32_t t) {
    for (int32_t e : g.out_edges(t)) {
      if (g.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential) return g.edges[static_cast<size_t>(e)].to;
    }
    return -1;
  };
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const auto t = static_cast<int32_t>(i);
    bool head = true;
    for (int32_t e : g.in_edges(t)) head = head && g.edges[static_cast<size_t>(e)].kind != EdgeKind::kSequential;
    if (!head) continue;
    std::vector<int32_t>& list = order.tasks[static_cast<size_t>(g.tasks[i].resource)];
    for (int32_t u = t; u >= 0; u = seq_next(u)) {
      order.position[static_cast<size_t>(u)] = static_cast<int32_t>(list.size());
      list.push_back(u);
    }
  }
  return order;
}

// Whether an edge ties its task to work on another resource. Launch-queue
// edges do not: they only say that a launch call found the queue full.
bool IsDependency(EdgeKind kind) { return kind != EdgeKind::kSequential && kind != EdgeKind::kLaunchQueue; }

// Counts a task's dependencies on / of other resources.
int CrossIn(const Graph& g, int32_t t) {
  int n = 0;
  for (int32_t e : g.in_edges(t)) n += IsDependency(g.edges[static_cast<size_t>(e)].kind);
  return n;
}
int CrossOut(const Graph& g, int32_t t) {
  int n = 0;
  for (int32_t e : g.out_edges(t)) n += IsDependency(g.edges[static_cast<size_t>(e)].kind);
  return n;
}

bool LaunchesGpuWork(const Graph& g, int32_t t) {
  for (int32_t e : g.out_edges(t)) {
    if (IsLaunch(g.edges[static_cast<size_t>(e)].kind)) return true;
  }
  return false;
}

// The CPU-thread call that launched GPU task `k`, or -1.
int32_t Launcher(const Graph& g, int32_t k) {
  int32_t launcher = -1;
  for (int32_t e : g.in_edges(k)) {
    const Edge& edge = g.edges[static_cast<size_t>(e)];
    if (!IsLaunch(edge.kind)) continue;
    if (g.resources[static_cast<size_t>(g.tasks[static_cast<size_t>(edge.from)].resource)].kind !=
        ResourceKind::kCpuThread) {
      continue;
    }
    if (launcher >= 0) return -1;
    launcher = edge.from;
  }
  return launcher;
}

// What the pass does not fuse on a CPU graph, for its note: the forward
// and backward normalization ops (batch, layer and group norm), which
// torch.compile's inductor turns into generated kernels fused with their
// neighbours. "" when there are none.
std::string UnmodelledNorms(const Graph& g) {
  static constexpr std::string_view kNorms[] = {
      "aten::native_batch_norm", "aten::native_batch_norm_backward", "aten::native_layer_norm",
      "aten::native_layer_norm_backward", "aten::native_group_norm", "aten::native_group_norm_backward"};
  // An op the builder split around the tasks it encloses is several tasks of
  // one trace event: count events.
  absl::flat_hash_set<int64_t> ops;
  int64_t count = 0;
  TimeNs total = 0;
  for (const Task& t : g.tasks) {
    if (t.kind != TaskKind::kCpuOp || (t.phase != Phase::kForward && t.phase != Phase::kBackward) ||
        (t.iteration < 0 && !g.iterations.empty())) {
      continue;
    }
    const std::string_view name = g.Str(t.name);
    for (std::string_view norm : kNorms) {
      if (name == norm) {
        if (t.trace_event < 0 || ops.insert(t.trace_event).second) ++count;
        total += t.duration_ns;
        break;
      }
    }
  }
  if (count == 0) return "";
  const size_t iterations = std::max<size_t>(1, g.iterations.size());
  return StrCat("; not modelled: ", count, count == 1 ? " normalization op in " : " normalization ops in ", iterations,
                iterations == 1 ? " iteration" : " iterations", " (batch, layer or group norm; ",
                Fixed(NsToMs(total) / static_cast<double>(iterations), 3),
                " ms per iteration), which torch.compile's inductor turns into generated kernels fused with "
                "their neighbours (daydream.predict of a model times its compiled forward and backward instead: "
                "cpu_op_factors)");
}

// One chain to fuse: its members on one resource in order, and for GPU
// chains the members' launch calls.
struct Chain {
  std::vector<int32_t> members;
  std::vector<int32_t> launches;
};

class OpFusionPass : public Pass {
 public:
  explicit OpFusionPass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "op_fusion"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const int64_t max_chain = o_.Int("max_chain");
    if (max_chain < 2) {
      return absl::InvalidArgumentError(StrCat("op_fusion: max_chain must be >= 2 (got ", max_chain,
                                               "): a chain of one kernel has nothing to fuse"));
    }
    const double factor = o_.Double("intermediate_factor");
    if (factor < 0 || factor > 1) {
      return absl::InvalidArgumentError(
          StrCat("op_fusion: intermediate_factor must be in [0, 1] (got ", factor, ")"));
    }
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    bool gpu = false;
    for (const Resource& r : graph.resources) gpu = gpu || r.kind == ResourceKind::kGpuStream;
    DD_ASSIGN_OR_RETURN(const EventFactors measured,
                        ParseEventFactors("op_fusion", "cpu_op_factors", o_.String("cpu_op_factors")));
    if (!measured.empty()) {
      if (gpu) {
        return absl::InvalidArgumentError(
            "op_fusion: cpu_op_factors is for CPU-only graphs (this one runs kernels on a GPU stream)");
      }
      return ApplyMeasured(graph, measured, context);
    }
    const ResourceOrder order = OrderResources(graph);
    const std::vector<Chain> chains = gpu ? GpuChains(graph, order, max_chain) : CpuChains(graph, order, max_chain);
    const std::string_view what = gpu ? "elementwise kernels" : "elementwise CPU ops";
    const std::string norms = gpu ? std::string() : UnmodelledNorms(graph);
    if (chains.empty()) {
      context.Note(StrCat("op_fusion: no chain of two or more ", what,
                          gpu ? " launched back-to-back from one thread onto one stream"
                              : " back-to-back on one thread",
                          "; the graph is unchanged", norms));
      return false;
    }
    GraphEditor editor(graph);
    int64_t fused_members = 0;
    int64_t removed_calls = 0;
    TimeNs removed_cpu_ns = 0, before_ns = 0, after_ns = 0;
    for (const Chain& c : chains) {
      TimeNs sum = 0, longest = 0;
      for (int32_t t : c.members) {
        sum += graph.tasks[static_cast<size_t>(t)].duration_ns;
        longest = std::max(longest, graph.tasks[static_cast<size_t>(t)].duration_ns);
      }
      const auto fused = longest + RoundNs(static_cast<double>(sum - longest) * factor);
      before_ns += sum;
      after_ns += fused;
      fused_members += static_cast<int64_t>(c.members.size());
      DD_ASSIGN_OR_RETURN(const int32_t merged,
                          editor.MergeTasks(c.members, fused,
                                            StrCat(gpu ? kFusedKernelName : kFusedCpuOpName, " x",
                                                   c.members.size())));
      // The first member's launch call launches the fused kernel; the others
      // go, with the framework time that issued them and their waits for
      // room in the launch queue.
      for (size_t i = 1; i < c.launches.size(); ++i) {
        const int32_t call = c.launches[i];
        for (int32_t e : editor.OutEdges(call)) {
          if (graph.edges[static_cast<size_t>(e)].to == merged) editor.RemoveEdge(e);
        }
        for (int32_t e : editor.InEdges(call)) {
          if (graph.edges[static_cast<size_t>(e)].kind == EdgeKind::kLaunchQueue) editor.RemoveEdge(e);
        }
        removed_cpu_ns += graph.tasks[static_cast<size_t>(call)].duration_ns +
                          graph.tasks[static_cast<size_t>(call)].gap_ns;
        DD_RETURN_IF_ERROR(editor.RemoveTask(call, /*keep_gap=*/false));
        ++removed_calls;
      }
      if (!gpu) {
        // CPU chains: the other members' framework gaps went with them.
        for (size_t i = 1; i < c.members.size(); ++i) {
          removed_cpu_ns += graph.tasks[static_cast<size_t>(c.members[i])].gap_ns;
        }
        removed_cpu_ns += sum - fused;
      }
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    std::string note = StrCat("op_fusion: ", chains.size(), " chains of ", what, " fused (", fused_members,
                              " members, at most ", max_chain, " per chain): ", Fixed(NsToMs(before_ns), 3),
                              " -> ", Fixed(NsToMs(after_ns), 3), " ms with intermediate_factor ",
                              Fixed(factor, 2));
    if (gpu) {
      StrAppend(&note, "; ", removed_calls, " launch calls removed (", Fixed(NsToMs(removed_cpu_ns), 3),
                " ms of CPU time with their framework gaps)");
    } else {
      StrAppend(&note, "; ", Fixed(NsToMs(removed_cpu_ns), 3), " ms of CPU time removed");
    }
    StrAppend(&note, "; that the intermediates have no other consumer is assumed (traces carry no data flow)", norms);
    context.Note(std::move(note));
    return true;
  }

 private:
  // Chains of elementwise kernels consecutive on one stream, launched from
  // one CPU thread with no other GPU launch or sync between their launches.
  static std::vector<Chain> GpuChains(const Graph& g, const ResourceOrder& order, int64_t max_chain) {
    std::vector<Chain> chains;
    for (size_t r = 0; r < g.resources.size(); ++r) {
      if (g.resources[r].kind != ResourceKind::kGpuStream) continue;
      Chain current;
      auto flush = [&]() {
        if (current.members.size() >= 2) chains.push_back(current);
        current = Chain{};
      };
      for (int32_t k : order.tasks[r]) {
        const Task& task = g.tasks[static_cast<size_t>(k)];
        const int32_t call = task.kind == TaskKind::kKernel && IsElementwiseKernelName(g.Str(task.name))
                                 ? Launcher(g, k)
                                 : -1;
        if (call < 0) {
          flush();
          continue;
        }
        if (!current.members.empty() &&
            (static_cast<int64_t>(current.members.size()) >= max_chain || !Joins(g, order, current, k, call))) {
          flush();
        }
        current.members.push_back(k);
        current.launches.push_back(call);
      }
      flush();
    }
    return chains;
  }

  // Whether kernel `k`, launched by `call`, continues `chain`.
  static bool Joins(const Graph& g, const ResourceOrder& order, const Chain& chain, int32_t k, int32_t call) {
    const int32_t head = chain.members.front();
    const int32_t prev = chain.members.back();
    const int32_t prev_call = chain.launches.back();
    const Task& t = g.tasks[static_cast<size_t>(k)];
    if (t.iteration != g.tasks[static_cast<size_t>(head)].iteration ||
        t.phase != g.tasks[static_cast<size_t>(head)].phase) {
      return false;
    }
    // Only its launch edge ties the kernel to other resources; nothing but the
    // next kernel waits for the previous one.
    if (CrossIn(g, k) != 1 || CrossOut(g, prev) != 0) return false;
    // The launch call goes away: it must order nothing but its kernel.
    if (CrossIn(g, call) != 0 || CrossOut(g, call) != 1) return false;
    const int32_t thread = g.tasks[static_cast<size_t>(call)].resource;
    if (thread != g.tasks[static_cast<size_t>(prev_call)].resource) return false;
    const int32_t from = order.position[static_cast<size_t>(prev_call)];
    const int32_t to = order.position[static_cast<size_t>(call)];
    if (to <= from) return false;
    const std::vector<int32_t>& list = order.tasks[static_cast<size_t>(thread)];
    for (int32_t p = from + 1; p < to; ++p) {
      const int32_t between = list[static_cast<size_t>(p)];
      if (g.tasks[static_cast<size_t>(between)].kind == TaskKind::kSync || LaunchesGpuWork(g, between)) return false;
    }
    return true;
  }

  // Chains of elementwise CPU ops next to each other on one thread.
  static std::vector<Chain> CpuChains(const Graph& g, const ResourceOrder& order, int64_t max_chain) {
    std::vector<Chain> chains;
    for (size_t r = 0; r < g.resources.size(); ++r) {
      if (g.resources[r].kind != ResourceKind::kCpuThread) continue;
      Chain current;
      auto flush = [&]() {
        if (current.members.size() >= 2) chains.push_back(current);
        current = Chain{};
      };
      for (int32_t op : order.tasks[r]) {
        const Task& task = g.tasks[static_cast<size_t>(op)];
        if (task.kind != TaskKind::kCpuOp || !IsElementwiseCpuOpName(g.Str(task.name))) {
          flush();
          continue;
        }
        if (!current.members.empty()) {
          const Task& head = g.tasks[static_cast<size_t>(current.members.front())];
          const bool joins = static_cast<int64_t>(current.members.size()) < max_chain &&
                             task.iteration == head.iteration && task.phase == head.phase &&
                             CrossIn(g, op) == 0 && CrossOut(g, current.members.back()) == 0;
          if (!joins) flush();
        }
        current.members.push_back(op);
      }
      flush();
    }
    return chains;
  }

  // cpu_op_factors on a CPU-only graph: each forward/backward CPU op whose
  // trace event has a factor takes it; nothing is merged.
  static absl::StatusOr<bool> ApplyMeasured(Graph& graph, const EventFactors& measured, PassContext& context) {
    GraphEditor editor(graph);
    int64_t count = 0;
    TimeNs before_ns = 0, after_ns = 0;
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const Task& t = graph.tasks[i];
      if (t.kind != TaskKind::kCpuOp || (t.phase != Phase::kForward && t.phase != Phase::kBackward)) continue;
      const double* f = EventFactorOf(measured, t);
      if (f == nullptr) continue;
      ++count;
      before_ns += t.duration_ns;
      editor.ScaleDuration(static_cast<int32_t>(i), *f);
      after_ns += graph.tasks[i].duration_ns;
    }
    if (count == 0) {
      return absl::FailedPreconditionError(
          StrCat("op_fusion: cpu_op_factors has ", measured.size(),
                 " entries but none is the trace event of a forward or backward CPU op of this graph (measured on "
                 "another trace?)"));
    }
    if (editor.num_edits() == 0) {
      context.Note("op_fusion: the measured factors leave every CPU op's time as it was; the graph is unchanged");
      return false;
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    const size_t iterations = std::max<size_t>(1, graph.iterations.size());
    context.Note(StrCat("op_fusion: ", count, " forward/backward CPU ops at their measured factors (cpu_op_factors): ",
                        Fixed(NsToMs(before_ns), 3), " -> ", Fixed(NsToMs(after_ns), 3), " ms in ", iterations,
                        iterations == 1 ? " iteration" : " iterations",
                        "; framework gaps, the optimizer step and everything outside the compiled phases "
                        "unchanged"));
    return true;
  }

  PassOptions o_;
};

}  // namespace

bool IsElementwiseKernelName(std::string_view name) {
  const std::string fn = KernelFunctionName(name);
  return Contains(fn, "elementwise_kernel") || StartsWith(fn, "triton_poi");
}

bool IsElementwiseCpuOpName(std::string_view name) {
  static constexpr std::string_view kOps[] = {
      "add",     "add_",    "sub",     "sub_",    "mul",        "mul_",        "div",       "div_",
      "neg",     "neg_",    "exp",     "exp_",    "log",        "log_",        "sqrt",      "sqrt_",
      "rsqrt",   "rsqrt_",  "pow",     "pow_",    "abs",        "abs_",        "clamp",     "clamp_",
      "relu",    "relu_",   "gelu",    "gelu_",   "silu",       "silu_",       "sigmoid",   "sigmoid_",
      "tanh",    "tanh_",   "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "maximum",   "minimum",
      "where",   "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
      "tanh_backward", "hardtanh_backward", "leaky_relu_backward",
  };
  if (!StartsWith(name, "aten::")) return false;
  name.remove_prefix(6);
  for (std::string_view op : kOps) {
    if (name == op) return true;
  }
  return false;
}

PassInfo OpFusionPassInfo() {
  PassInfo info;
  info.name = "op_fusion";
  info.summary = "fuse chains of elementwise kernels (or CPU ops) into one";
  info.model =
      "Chains of elementwise kernels that run back-to-back on one GPU stream (PyTorch elementwise_kernel, "
      "Triton triton_poi_*), launched from one CPU thread with no other GPU launch or synchronization between "
      "their launches, in one iteration and phase, up to max_chain kernels, become one kernel of duration "
      "max(t_i) + (sum(t_i) - max(t_i)) * intermediate_factor: the longest member still reads its inputs and "
      "writes its output, the others' traffic is mostly intermediates that are no longer written and read "
      "back (0.5: half of it goes). The first member's launch call launches it; the other members' launch "
      "calls are removed from the CPU with their framework gaps (the Python/dispatcher code that issued them). "
      "On CPU-only graphs, chains of elementwise CPU ops next to each other on one thread (aten::add, mul, "
      "relu, gelu, threshold_backward, ...) are fused the same way and the other members' framework gaps go. "
      "Traces carry no data flow, so that an intermediate has no other consumer cannot be checked: a chain is "
      "only cut where another stream or the CPU waits on a member. Normalizations (batch, layer, group norm), "
      "which torch.compile's inductor also fuses on a CPU, are not: the note names how many there are and "
      "their time. With cpu_op_factors (by trace event; daydream.predict measures them on a CPU-only graph when it "
      "has the model, by timing its forward and backward eager and under torch.compile: "
      "daydream.calibrate.compile_cpu_phase_times), each forward/backward CPU op takes its factor instead and no "
      "chain is fused: generated kernels, normalizations and the Python that compilation removes are then in the "
      "measurement. max_chain below 2 is an error. Source: the "
      "first honest model named in PRIOR_ART (op fusion in DisCo, dPRO's XLA pass: launches disappear, "
      "intermediates are not written and re-read).";
  info.options = {
      {"max_chain", OptionType::kInt, "8", "most kernels fused into one (>= 2)"},
      {"intermediate_factor", OptionType::kDouble, "0.5",
       "share of the non-longest members' time that stays after fusion, in [0, 1]"},
      {"cpu_op_factors", OptionType::kString, "",
       "TRACE_EVENT=FACTOR;... measured time factors of forward/backward CPU ops under compilation, which replace "
       "the chain model on a CPU-only graph (daydream.predict measures them with "
       "daydream.calibrate.compile_cpu_phase_times when it has the model)"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new OpFusionPass(o));
  };
  return info;
}

}  // namespace daydream
