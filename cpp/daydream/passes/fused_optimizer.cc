#include "daydream/passes/fused_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/math.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Parameter-sized tensors an optimizer step streams through, per parameter:
// fused (each tensor read and written once: Adam reads param, grad, exp_avg,
// exp_avg_sq and writes param, exp_avg, exp_avg_sq) and torch.optim's
// per-parameter step (foreach=False: Adam's lerp_ 3, mul_ 2, addcmul_ 3,
// sqrt 2, div 2, add_ 2, addcdiv_ 4; AdamW adds param.mul_ 2; Adagrad's and
// RMSprop's one state: addcmul_ 3, sqrt 2, add_ 2, addcdiv_ 4; SGD momentum's
// buf.mul_ 2, buf.add_ 3, param.add_ 3).
struct OptimizerModel {
  const char* name;
  double fused_touches;
  double unfused_touches;
};
constexpr OptimizerModel kOptimizers[] = {
    {"adam", 7, 18},
    {"adamw", 7, 20},
    {"adagrad", 5, 11},
    {"sgd_momentum", 5, 8},
    {"sgd", 3, 3},
};
const OptimizerModel& OptimizerNamed(std::string_view name) {
  for (const OptimizerModel& m : kOptimizers) {
    if (name == m.name) return m;
  }
  return kOptimizers[0];
}

// CPU operators that only move scalars and metadata: a CPU step made of
// nothing else runs no per-parameter math of its own (torch's fused CPU step
// does its work inside aten::_fused_adam_, which the graph sees only through
// such children).
bool IsBookkeeping(std::string_view name) {
  for (const char* op : {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::copy_", "aten::to",
                         "aten::_to_copy", "aten::item", "aten::_local_scalar_dense", "aten::detach", "aten::detach_",
                         "aten::view", "aten::as_strided", "aten::slice", "aten::select", "aten::resize_",
                         "aten::result_type", "aten::is_nonzero", "aten::lift_fresh", "aten::alias", "aten::unbind",
                         "aten::size", "aten::stride", "aten::is_complex"}) {
    if (name == op) return true;
  }
  return false;
}

// In-place elementwise operators that stream parameter-sized tensors, with the
// number they touch (reads + writes): where one runs once per parameter, its
// size-dependent time measures the memory bandwidth the unfused step got.
constexpr std::pair<const char*, double> kStreamingOps[] = {
    {"aten::lerp_", 3}, {"aten::addcmul_", 3}, {"aten::addcdiv_", 4}, {"aten::mul_", 2},
    {"aten::add_", 3},  {"aten::sub_", 3},     {"aten::div_", 2},     {"aten::sqrt_", 2},
};

std::string Mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / kMiB);
  return buf;
}

std::string Us(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f us", ns / 1e3);
  return buf;
}

// Names of operators and kernels that are already a fused optimizer step:
// torch's aten::_fused_adam_/_fused_adamw_/_fused_sgd_/_fused_adagrad_ and
// their FusedAdamMathFunctor kernels, apex's and DeepSpeed's multi_tensor_apply
// AdamFunctor / LAMB kernels.
bool LooksFused(std::string_view name) {
  const std::string lower = AsciiLower(name.substr(0, 512));
  for (const char* marker : {"_fused_", "fusedadam", "fused_adam", "adamfunctor", "fusedsgd", "fused_sgd",
                             "lambstage", "fusedlamb"}) {
    if (Contains(lower, marker)) return true;
  }
  return false;
}

bool IsGpuActivity(TaskKind kind) {
  return kind == TaskKind::kKernel || kind == TaskKind::kMemcpy || kind == TaskKind::kMemset;
}

// One iteration's optimizer step.
struct Step {
  int32_t iteration = -1;
  int32_t thread = -1;         // the CPU thread that ran it
  std::vector<int32_t> cpu;    // its tasks on that thread, in chain order
  std::vector<int32_t> gpu;    // the GPU activities they launched
  std::string fused_by;        // set when already fused: the task name that says so
};

class StepFinder {
 public:
  explicit StepFinder(const Graph& g) : g_(g) {}

  // Per iteration: the optimizer-phase tasks on CPU threads that start after
  // the iteration's last backward CPU task (zero_grad, when it runs at the
  // start of the iteration, is excluded by this), on the thread that holds
  // most of them, less a trailing run of zero_grad work (zero_grad called
  // after step(): aten::zero_/fill_/detach_/requires_grad_, memsets, fill
  // kernels). Graphs without iterations count as one.
  std::vector<Step> Find(int64_t* optimizer_tasks) const {
    std::map<int32_t, TimeNs> last_backward;
    std::map<int32_t, std::vector<int32_t>> candidates;
    *optimizer_tasks = 0;
    for (size_t i = 0; i < g_.tasks.size(); ++i) {
      const Task& t = g_.tasks[i];
      if (!OnCpu(static_cast<int32_t>(i))) continue;
      if (t.phase == Phase::kBackward) {
        auto [it, inserted] = last_backward.try_emplace(t.iteration, t.recorded_start_ns);
        if (!inserted) it->second = std::max(it->second, t.recorded_start_ns);
      }
      if (t.phase == Phase::kOptimizer) {
        candidates[t.iteration].push_back(static_cast<int32_t>(i));
        ++*optimizer_tasks;
      }
    }
    std::vector<Step> steps;
    for (auto& [iteration, tasks] : candidates) {
      if (auto lb = last_backward.find(iteration); lb != last_backward.end()) {
        const TimeNs after = lb->second;
        tasks.erase(std::remove_if(tasks.begin(), tasks.end(),
                                   [&](int32_t t) { return g_.tasks[static_cast<size_t>(t)].recorded_start_ns <= after; }),
                    tasks.end());
      }
      if (tasks.empty()) continue;
      std::map<int32_t, int64_t> per_thread;
      for (int32_t t : tasks) ++per_thread[g_.tasks[static_cast<size_t>(t)].resource];
      Step step;
      step.iteration = iteration;
      step.thread = std::max_element(per_thread.begin(), per_thread.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; })
                        ->first;
      for (int32_t t : tasks) {
        if (g_.tasks[static_cast<size_t>(t)].resource == step.thread) step.cpu.push_back(t);
      }
      std::stable_sort(step.cpu.begin(), step.cpu.end(), [&](int32_t a, int32_t b) {
        return g_.tasks[static_cast<size_t>(a)].recorded_start_ns < g_.tasks[static_cast<size_t>(b)].recorded_start_ns;
      });
      while (!step.cpu.empty() && IsZeroGradWork(step.cpu.back())) step.cpu.pop_back();
      if (step.cpu.empty()) continue;
      std::set<int32_t> launched;
      for (int32_t t : step.cpu) {
        for (int32_t a : Launched(t)) launched.insert(a);
      }
      step.gpu.assign(launched.begin(), launched.end());
      for (int32_t t : step.cpu) {
        if (step.fused_by.empty() && LooksFused(g_.TaskName(t))) step.fused_by = std::string(g_.TaskName(t));
      }
      for (int32_t t : step.gpu) {
        if (step.fused_by.empty() && LooksFused(g_.TaskName(t))) step.fused_by = std::string(g_.TaskName(t));
      }
      steps.push_back(std::move(step));
    }
    return steps;
  }

 private:
  bool OnCpu(int32_t t) const {
    return g_.resources[static_cast<size_t>(g_.tasks[static_cast<size_t>(t)].resource)].kind == ResourceKind::kCpuThread;
  }

  std::vector<int32_t> Launched(int32_t t) const {
    std::vector<int32_t> out;
    for (int32_t e : g_.out_edges(t)) {
      const Edge& edge = g_.edges[static_cast<size_t>(e)];
      if (IsLaunch(edge.kind) && IsGpuActivity(g_.tasks[static_cast<size_t>(edge.to)].kind)) out.push_back(edge.to);
    }
    return out;
  }

  bool IsZeroGradWork(int32_t t) const {
    const std::string_view name = g_.TaskName(t);
    for (const char* op : {"aten::zero_", "aten::fill_", "aten::detach_", "aten::requires_grad_", "cudaMemsetAsync",
                           "hipMemsetAsync"}) {
      if (name == op) return true;
    }
    const std::vector<int32_t> launched = Launched(t);
    if (launched.empty()) return false;
    for (int32_t a : launched) {
      const Task& task = g_.tasks[static_cast<size_t>(a)];
      if (task.kind == TaskKind::kMemset) continue;
      if (task.kind == TaskKind::kKernel && Contains(AsciiLower(g_.TaskName(a).substr(0, 512)), "fill")) continue;
      return false;
    }
    return true;
  }

  const Graph& g_;
};

// Which optimizer a CPU step ran, from its operators' names: Adam's moving
// average is lerp_ (torch >= 2.0); addcdiv_ without it is a one-state
// optimizer (Adagrad, RMSprop); mul_ alone is SGD's momentum.
const OptimizerModel& DetectOptimizer(const Graph& g, const std::vector<Step>& steps) {
  bool lerp = false, addcdiv = false, mul = false;
  for (const Step& s : steps) {
    for (int32_t t : s.cpu) {
      const std::string_view name = g.TaskName(t);
      lerp = lerp || Contains(name, "lerp");
      addcdiv = addcdiv || Contains(name, "addcdiv");
      mul = mul || Contains(name, "mul_");
    }
  }
  if (lerp) return OptimizerNamed("adam");
  if (addcdiv) return OptimizerNamed("adagrad");
  return OptimizerNamed(mul ? "sgd_momentum" : "sgd");
}

// The gradients produced in `iteration`: how many, their bytes (-1 when some
// size is unknown), the smallest.
struct Parameters {
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t smallest = 0;
};

Parameters ParametersOf(const Graph& g, int32_t iteration) {
  Parameters p;
  for (const Tensor& t : g.tensors) {
    if (t.role != TensorRole::kGradient) continue;
    const bool produced = iteration >= 0 && static_cast<size_t>(iteration) < t.producers.size()
                              ? t.producers[static_cast<size_t>(iteration)] >= 0
                              : t.producer >= 0;
    if (!produced) continue;
    if (p.bytes >= 0) p.bytes = t.bytes < 0 ? -1 : p.bytes + t.bytes;
    p.smallest = p.count == 0 ? t.bytes : std::min(p.smallest, t.bytes);
    ++p.count;
  }
  return p;
}

// Parameters of a step whose graph has no gradient tensors: the most common
// number of times one operator name occurs in it (each runs once per
// parameter, some twice; ties go to the smaller).
int64_t ParametersFromOperators(const Graph& g, const Step& s) {
  std::map<StringId, int64_t> per_name;
  for (int32_t t : s.cpu) ++per_name[g.tasks[static_cast<size_t>(t)].name];
  std::map<int64_t, int64_t> per_count;
  for (const auto& [name, n] : per_name) ++per_count[n];
  int64_t best = 1, votes = 0;
  for (const auto& [count, v] : per_count) {
    if (v > votes) best = count, votes = v;
  }
  return best;
}

// The CPU time of one fused step on a CPU-only graph (see the pass model).
struct CpuEstimate {
  TimeNs fused_ns = 0;
  TimeNs unfused_ns = 0;
  std::string how;
};

CpuEstimate EstimateCpuStep(const Graph& g, const std::vector<Step>& steps, const OptimizerModel& opt,
                            const PassOptions& o) {
  std::vector<TimeNs> op_costs, step_ns;
  std::vector<int64_t> task_counts, param_counts, param_bytes;
  std::vector<double> bandwidths;  // bytes per ns
  for (const Step& s : steps) {
    TimeNs total = 0;
    for (size_t i = 0; i < s.cpu.size(); ++i) {
      const Task& t = g.tasks[static_cast<size_t>(s.cpu[i])];
      total += t.duration_ns + (i > 0 ? t.gap_ns : 0);
      if (i > 0) op_costs.push_back(t.duration_ns + t.gap_ns);
    }
    step_ns.push_back(total);
    task_counts.push_back(static_cast<int64_t>(s.cpu.size()));
    const Parameters p = ParametersOf(g, s.iteration);
    param_counts.push_back(p.count > 0 ? p.count : ParametersFromOperators(g, s));
    if (p.count == 0 || p.bytes <= 0) continue;
    param_bytes.push_back(p.bytes);
    // Streaming operators that ran once per parameter: their time above the
    // smallest parameter's is the time to move the rest of the bytes.
    std::map<std::string_view, std::vector<TimeNs>> by_name;
    for (int32_t t : s.cpu) by_name[g.TaskName(t)].push_back(g.tasks[static_cast<size_t>(t)].duration_ns);
    double bytes = 0, ns = 0;
    for (const auto& [name, touches] : kStreamingOps) {
      auto it = by_name.find(name);
      if (it == by_name.end() || static_cast<int64_t>(it->second.size()) != p.count) continue;
      const TimeNs least = *std::min_element(it->second.begin(), it->second.end());
      for (TimeNs d : it->second) ns += static_cast<double>(d - least);
      bytes += touches * static_cast<double>(p.bytes - p.count * p.smallest);
    }
    if (bytes > 0 && ns > 0) bandwidths.push_back(bytes / ns);
  }
  CpuEstimate e;
  const TimeNs op_cost = MedianOf(op_costs);
  const int64_t params = MedianOf(param_counts);
  e.unfused_ns = MedianOf(step_ns);
  if (const double factor = o.Double("cpu_step_factor"); factor > 0) {
    e.fused_ns = RoundNs(factor * static_cast<double>(e.unfused_ns));
    e.how = StrCat(Us(static_cast<double>(e.fused_ns)), " = ", factor,
                   " x the unfused step (cpu_step_factor: fused / unfused step time measured on this CPU)");
    return e;
  }
  const double fixed = (1.0 + o.Double("cpu_ops_per_param") * static_cast<double>(params)) * static_cast<double>(op_cost);
  double moving = 0;
  const double user_bw = o.Double("cpu_bandwidth_gbps");
  const double pbytes = static_cast<double>(MedianOf(param_bytes));
  if (!param_bytes.empty() && (user_bw > 0 || !bandwidths.empty())) {
    const double bw = user_bw > 0 ? user_bw : MedianOf(bandwidths);  // GB/s == bytes/ns
    moving = opt.fused_touches * pbytes / bw;
    e.how = StrCat(opt.fused_touches, " x ", Mb(pbytes), " at ", bw, " GB/s",
                   user_bw > 0 ? " (cpu_bandwidth_gbps)" : " (what the unfused in-place operators achieved)");
  } else {
    // Sizes unknown: the unfused step's time above its per-operator cost,
    // scaled by the bytes the fused step touches instead.
    const double size_ns = std::max(0.0, static_cast<double>(e.unfused_ns) -
                                             static_cast<double>(MedianOf(task_counts)) * static_cast<double>(op_cost));
    moving = opt.fused_touches / opt.unfused_touches * size_ns;
    e.how = StrCat(opt.fused_touches, "/", opt.unfused_touches, " of the unfused step's size-dependent ", Us(size_ns),
                   " (parameter sizes unknown)");
  }
  e.fused_ns = std::min(e.unfused_ns, RoundNs(fixed + moving));
  e.how = StrCat(Us(static_cast<double>(e.fused_ns)), " = (1 + ", o.Double("cpu_ops_per_param"), " x ", params,
                 " parameters) x ", Us(static_cast<double>(op_cost)), " per operator + ", e.how);
  return e;
}

class FusedOptimizerPass : public Pass {
 public:
  explicit FusedOptimizerPass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "fused_optimizer"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    for (const char* k : {"kernel_factor", "cpu_ops_per_param", "cpu_bandwidth_gbps", "cpu_step_factor"}) {
      if (o_.Double(k) < 0) return absl::InvalidArgumentError(StrCat("fused_optimizer: ", k, " must be >= 0"));
    }
    const OptimizerModel* chosen = nullptr;
    const std::string& requested = o_.String("optimizer");
    if (requested != "auto") {
      std::string names = "auto";
      for (const OptimizerModel& m : kOptimizers) {
        if (requested == m.name) chosen = &m;
        StrAppend(&names, ", ", m.name);
      }
      if (chosen == nullptr) {
        return absl::InvalidArgumentError(
            StrCat("fused_optimizer: unknown optimizer '", requested, "' (", names, ")"));
      }
    }
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    int64_t optimizer_tasks = 0;
    std::vector<Step> steps = StepFinder(graph).Find(&optimizer_tasks);
    if (steps.empty()) {
      return absl::FailedPreconditionError(
          optimizer_tasks == 0
              ? "fused_optimizer: no optimizer step found: the graph has no optimizer-phase tasks (the builder "
                "finds them under torch.optim's 'Optimizer.step#...' ranges; record with torch.profiler or "
                "daydream.Profiler around optimizer.step())"
              : StrCat("fused_optimizer: no optimizer step found: the graph's ", optimizer_tasks,
                       " optimizer-phase tasks all run before their iteration's backward pass ends (zero_grad), "
                       "none after it"));
    }
    std::vector<Step> todo;
    std::map<std::string, int64_t> skipped;  // why -> iterations
    for (Step& s : steps) {
      if (!s.fused_by.empty()) {
        ++skipped[StrCat("the optimizer step is already fused ('", s.fused_by.substr(0, 80), "')")];
      } else if (s.gpu.empty() && std::all_of(s.cpu.begin(), s.cpu.end(),
                                              [&](int32_t t) { return IsBookkeeping(graph.TaskName(t)); })) {
        ++skipped["the CPU optimizer step runs no per-parameter operators (already fused: aten::_fused_adam_ "
                  "and the like show only their scalar bookkeeping)"];
      } else if (s.gpu.empty() ? s.cpu.size() < 2 : s.gpu.size() < 2) {
        ++skipped[StrCat("the optimizer step is one ", s.gpu.empty() ? "operator" : "GPU activity",
                         " already: nothing to fuse")];
      } else {
        todo.push_back(std::move(s));
      }
    }
    for (const auto& [why, n] : skipped) {
      context.Note(StrCat("fused_optimizer: ", n, " of ", steps.size(), " iterations unchanged: ", why));
    }
    if (todo.empty()) return false;

    std::vector<Step> cpu_steps;
    for (const Step& s : todo) {
      if (s.gpu.empty()) cpu_steps.push_back(s);
    }
    const OptimizerModel& opt = chosen != nullptr ? *chosen : DetectOptimizer(graph, cpu_steps);
    CpuEstimate cpu;
    if (!cpu_steps.empty()) cpu = EstimateCpuStep(graph, cpu_steps, opt, o_);

    GraphEditor editor(graph);
    int64_t removed_tasks = 0, removed_launches = 0, removed_gpu = 0;
    TimeNs kernel_before = 0, kernel_after = 0;
    for (const Step& s : todo) {
      removed_tasks += static_cast<int64_t>(s.cpu.size()) - 1;
      if (s.gpu.empty()) {
        DD_ASSIGN_OR_RETURN(const int32_t fused,
                            editor.MergeTasks(s.cpu, cpu.fused_ns, StrCat("fused ", opt.name, " step (estimated)")));
        graph.tasks[static_cast<size_t>(fused)].kind = TaskKind::kCpuOp;
        continue;
      }
      DD_RETURN_IF_ERROR(FuseGpuStep(editor, s, &removed_launches, &kernel_before, &kernel_after));
      removed_gpu += static_cast<int64_t>(s.gpu.size());
    }
    DD_RETURN_IF_ERROR(editor.Commit());

    const Parameters p = ParametersOf(graph, todo.front().iteration);
    const std::string params =
        p.count > 0 ? StrCat(p.count, " parameters", p.bytes > 0 ? StrCat(" (", Mb(static_cast<double>(p.bytes)), ")") : "")
                    : std::string("parameters of unknown size");
    const auto n = static_cast<double>(todo.size());
    if (!cpu_steps.empty()) {
      context.Note(StrCat("fused_optimizer: ", cpu_steps.size(), " CPU optimizer steps (", opt.name, ", ", params,
                          ") each replaced by one fused operator: ", Us(static_cast<double>(cpu.unfused_ns)),
                          " of operators and framework time -> ", cpu.how));
    }
    if (removed_gpu > 0) {
      context.Note(StrCat("fused_optimizer: ", todo.size() - cpu_steps.size(), " GPU optimizer steps (", params,
                          ") each replaced by one launch and one kernel: ", removed_launches,
                          " launches and ", removed_gpu, " GPU activities removed, ",
                          Us(static_cast<double>(kernel_before) / n), " of kernels per step -> ",
                          Us(static_cast<double>(kernel_after) / n), " (kernel_factor ", o_.Double("kernel_factor"),
                          ")"));
    }
    context.Note(StrCat("fused_optimizer: ", removed_tasks, " CPU tasks and their framework gaps removed"));
    return true;
  }

 private:
  // One launch call on the CPU (the median duration of the step's launches)
  // and, on each stream the step used, one kernel of kernel_factor times the
  // step's kernel time there.
  absl::Status FuseGpuStep(GraphEditor& editor, const Step& s, int64_t* removed_launches, TimeNs* kernel_before,
                           TimeNs* kernel_after) {
    Graph& g = editor.graph();
    const std::set<int32_t> gpu(s.gpu.begin(), s.gpu.end());
    std::vector<TimeNs> launches;
    for (int32_t t : s.cpu) {
      // The fused op does not wait for its own kernels as the step's
      // synchronizing calls did; those edges would also close a cycle.
      for (int32_t e : editor.InEdges(t)) {
        if (gpu.count(g.edges[static_cast<size_t>(e)].from) > 0) editor.RemoveEdge(e);
      }
      for (int32_t e : editor.OutEdges(t)) {
        if (IsLaunch(g.edges[static_cast<size_t>(e)].kind) && gpu.count(g.edges[static_cast<size_t>(e)].to) > 0) {
          launches.push_back(g.tasks[static_cast<size_t>(t)].duration_ns);
          ++*removed_launches;
          break;
        }
      }
    }
    --*removed_launches;  // one launch remains
    DD_ASSIGN_OR_RETURN(const int32_t launch,
                        editor.MergeTasks(s.cpu, MedianOf(launches), "cudaLaunchKernel (fused optimizer step)"));
    g.tasks[static_cast<size_t>(launch)].kind = TaskKind::kRuntime;
    std::map<int32_t, std::vector<int32_t>> per_stream;
    for (int32_t t : s.gpu) per_stream[g.tasks[static_cast<size_t>(t)].resource].push_back(t);
    for (const auto& [stream, tasks] : per_stream) {
      TimeNs kernels = 0;
      for (int32_t t : tasks) {
        if (g.tasks[static_cast<size_t>(t)].kind == TaskKind::kKernel) kernels += g.tasks[static_cast<size_t>(t)].duration_ns;
      }
      const auto fused_ns =
          RoundNs(static_cast<double>(kernels) * o_.Double("kernel_factor"));
      *kernel_before += kernels;
      *kernel_after += fused_ns;
      DD_ASSIGN_OR_RETURN(const int32_t kernel, editor.MergeTasks(tasks, fused_ns, "fused optimizer step kernel"));
      g.tasks[static_cast<size_t>(kernel)].kind = TaskKind::kKernel;
    }
    // The merges carried one launch edge per removed launch; keep one.
    std::set<std::pair<int32_t, EdgeKind>> seen;
    for (int32_t e : editor.OutEdges(launch)) {
      const Edge& edge = g.edges[static_cast<size_t>(e)];
      if (!seen.insert({edge.to, edge.kind}).second) editor.RemoveEdge(e);
    }
    return absl::OkStatus();
  }

  PassOptions o_;
};

}  // namespace

PassInfo FusedOptimizerPassInfo() {
  PassInfo info;
  info.name = "fused_optimizer";
  info.summary = "the optimizer step as one fused operation (FusedAdam, torch.optim fused=True)";
  info.model =
      "Per iteration, the optimizer step is the optimizer-phase work (tasks under torch.optim's "
      "'Optimizer.step#...' and 'Optimizer.zero_grad#...' ranges) on the CPU thread that runs it, after the "
      "iteration's last backward task, less trailing zero_grad work (zero_, fill_, memsets). Its per-parameter "
      "operators, runtime calls and the framework time between them (the Python loop over parameters) are "
      "replaced by one fused operation that keeps the first one's place and lead-in time. GPU graphs: one launch "
      "(the median duration of the removed launches) and one kernel per stream whose time is kernel_factor x the "
      "removed kernels' time: the step is memory bound and a fused kernel touches the same bytes once per "
      "tensor (Daydream, ATC'20: FusedAdam). CPU-only graphs: one operator of (1 + cpu_ops_per_param x N) "
      "operator costs (the median operator-plus-gap of the removed step; torch's fused CPU path still updates "
      "every parameter's step counter) plus the bytes the fused step touches (Adam/AdamW 7, SGD with momentum "
      "5, Adagrad/RMSprop 5, plain SGD 3 times the parameter bytes, from the gradient tensors) at the bandwidth the unfused "
      "in-place operators (lerp_, addcmul_, addcdiv_, mul_, add_) achieved, or at cpu_bandwidth_gbps; without "
      "parameter sizes, 7/18 (Adam) of the unfused step's size-dependent time. With cpu_step_factor (a measured "
      "fused / unfused ratio of whole optimizer steps on this CPU at the same parameter shapes, which "
      "daydream.predict fills in when it has the optimizer) the fused operator is that factor times the unfused "
      "step instead. The optimizer is detected from "
      "its operators (lerp_: Adam; addcdiv_: Adagrad/RMSprop; mul_: SGD with momentum; else SGD) or set with "
      "optimizer. A step that is already fused (aten::_fused_adam_, FusedAdam or multi_tensor_apply "
      "AdamFunctor kernels; on CPU-only graphs, a step whose operators only move scalars, as torch's "
      "aten::_fused_adam_ shows there) is left unchanged with a note; a graph with no optimizer step is an "
      "error.";
  info.options = {
      {"kernel_factor", OptionType::kDouble, "1",
       "fused kernel time / the removed kernels' time (GPU graphs; 1: same bytes, touched once)"},
      {"optimizer", OptionType::kString, "auto",
       "which optimizer the step runs, for the bytes it touches: auto, adam, adamw, adagrad, sgd_momentum, sgd"},
      {"cpu_ops_per_param", OptionType::kDouble, "2",
       "framework operations per parameter the fused CPU step keeps (CPU-only graphs)"},
      {"cpu_bandwidth_gbps", OptionType::kDouble, "0",
       "memory bandwidth of the fused CPU step in GB/s (0: what the unfused in-place operators achieved)"},
      {"cpu_step_factor", OptionType::kDouble, "0",
       "fused / unfused CPU step time, measured (daydream.predict measures it with "
       "daydream.calibrate.fused_optimizer_cpu_factor when it has the optimizer); 0: the operator and bandwidth "
       "model (CPU-only graphs)"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new FusedOptimizerPass(o));
  };
  return info;
}

}  // namespace daydream
