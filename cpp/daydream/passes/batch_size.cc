#include "daydream/passes/batch_size.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

bool IsHostToDevice(std::string_view name) { return Contains(name, "HtoD") || Contains(name, "Host -> Device"); }

// How one class of tasks changed, for the note.
struct Tally {
  int64_t count = 0;
  TimeNs before_ns = 0;
  TimeNs after_ns = 0;
};

std::string Describe(const Tally& t, std::string_view what) {
  return StrCat(t.count, " ", what, " ", Fixed(NsToMs(t.before_ns), 3), " -> ", Fixed(NsToMs(t.after_ns), 3), " ms");
}

class BatchSizePass : public Pass {
 public:
  explicit BatchSizePass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "batch_size"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const double factor = o_.Double("factor");
    if (factor <= 0) {
      return absl::InvalidArgumentError(
          StrCat("batch_size: factor (new per-device batch / recorded batch) must be > 0, got ", factor));
    }
    for (const char* k : {"saturation_us", "cpu_saturation_us", "cpu_fixed_us"}) {
      if (o_.Double(k) < 0) return absl::InvalidArgumentError(StrCat("batch_size: ", k, " must be >= 0"));
    }
    const auto gpu_saturation = RoundNs(o_.Double("saturation_us") * 1000.0);
    const auto cpu_saturation = RoundNs(o_.Double("cpu_saturation_us") * 1000.0);
    const auto cpu_fixed = RoundNs(o_.Double("cpu_fixed_us") * 1000.0);
    DD_ASSIGN_OR_RETURN(const EventFactors measured,
                        ParseEventFactors("batch_size", "cpu_op_factors", o_.String("cpu_op_factors")));
    int64_t num_measured = 0;
    if (factor == 1.0) {
      context.Note("batch_size: factor 1 keeps the batch; the graph is unchanged");
      return false;
    }
    // On GPU graphs the CPU ops are the framework's dispatch (allocation,
    // views, launches): fixed cost. Only CPU-only graphs compute on the CPU.
    bool gpu = false;
    for (const Resource& r : graph.resources) gpu = gpu || r.kind == ResourceKind::kGpuStream;
    Tally kernels, cpu_ops, inputs;
    GraphEditor editor(graph);
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const auto t = static_cast<int32_t>(i);
      const Task& task = graph.tasks[i];
      const bool compute_phase = task.phase == Phase::kForward || task.phase == Phase::kBackward;
      Tally* tally = nullptr;
      double f = 1.0;
      if (task.kind == TaskKind::kRuntime || task.kind == TaskKind::kSync) {
        continue;  // launches and waits: fixed cost
      } else if (task.phase == Phase::kData ||
                 (task.kind == TaskKind::kMemcpy && IsHostToDevice(graph.Str(task.name)) &&
                  task.phase != Phase::kOptimizer && task.phase != Phase::kComm)) {
        tally = &inputs;  // the input batch: proportional to its size
        f = factor;
      } else if (compute_phase && task.kind == TaskKind::kKernel) {
        tally = &kernels;
        f = BatchTimeFactor(task.duration_ns, factor, gpu_saturation);
      } else if (compute_phase && task.kind == TaskKind::kCpuOp && !gpu) {
        tally = &cpu_ops;
        if (const double* m = EventFactorOf(measured, task)) {
          f = *m;
          ++num_measured;
        } else {
          f = cpu_fixed > 0 ? FixedCostTimeFactor(task.duration_ns, factor, cpu_fixed)
                            : BatchTimeFactor(task.duration_ns, factor, cpu_saturation);
        }
      } else {
        continue;
      }
      ++tally->count;
      tally->before_ns += task.duration_ns;
      editor.ScaleDuration(t, f);
      tally->after_ns += graph.tasks[i].duration_ns;
    }
    if (kernels.count + cpu_ops.count + inputs.count == 0) {
      return absl::FailedPreconditionError(
          "batch_size: no forward or backward kernel or CPU op and no data-phase task found: the trace carries "
          "no phase annotations (they come from autograd, nn.Module and DataLoader ranges of torch.profiler)");
    }
    if (editor.num_edits() == 0) {
      context.Note("batch_size: every compute task is too short to change at this factor; the graph is unchanged");
      return false;
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    std::string note = StrCat("batch_size: batch x", Fixed(factor, 3), ": ");
    if (gpu) {
      StrAppend(&note, Describe(kernels, "forward/backward kernels"), " (saturation ",
                Fixed(o_.Double("saturation_us"), 1), " us)");
    } else {
      const std::string rest =
          cpu_fixed > 0 ? StrCat(Fixed(o_.Double("cpu_fixed_us"), 2), " us of fixed cost each")
                        : StrCat("saturation ", Fixed(o_.Double("cpu_saturation_us"), 1), " us");
      StrAppend(&note, Describe(cpu_ops, "forward/backward CPU ops"), " (",
                num_measured > 0 ? StrCat(num_measured, " at their measured factors (cpu_op_factors)",
                                          num_measured < cpu_ops.count ? StrCat(", the rest: ", rest) : "")
                                 : rest,
                ")");
    }
    StrAppend(&note, ", ", Describe(inputs, "data-phase tasks and host-to-device copies"), "; ",
              gpu ? "CPU ops, " : "", "launches, optimizer, communication and framework gaps unchanged; memory use "
              "is not modelled");
    if (graph.device.total_memory_bytes > 0) {
      StrAppend(&note, " (check that the batch fits in the device's ",
                Fixed(static_cast<double>(graph.device.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0), 1),
                " GiB)");
    }
    context.Note(std::move(note));
    return true;
  }

 private:
  PassOptions o_;
};

}  // namespace

double BatchTimeFactor(TimeNs duration_ns, double factor, TimeNs saturation_ns) {
  const double utilization =
      saturation_ns <= 0 ? 1.0
                         : std::min(1.0, static_cast<double>(duration_ns) / static_cast<double>(saturation_ns));
  return 1.0 + (factor - 1.0) * utilization;
}

double FixedCostTimeFactor(TimeNs duration_ns, double factor, TimeNs fixed_ns) {
  if (duration_ns <= fixed_ns || duration_ns <= 0) return 1.0;
  return 1.0 + (factor - 1.0) * (1.0 - static_cast<double>(fixed_ns) / static_cast<double>(duration_ns));
}

PassInfo BatchSizePassInfo() {
  PassInfo info;
  info.name = "batch_size";
  info.summary = "a new per-device batch size: compute scales with the work, fixed costs do not";
  info.model =
      "factor = new per-device batch / recorded batch. The compute of the forward and backward phases (GPU "
      "kernels; on CPU-only graphs, CPU ops) scales with the work, but a short task does not fill the device, "
      "so its time is mostly fixed: t' = t * (1 + (factor - 1) * u), u = min(1, t / saturation) with "
      "saturation_us for kernels and cpu_saturation_us for CPU ops; or, with cpu_fixed_us (a CPU op's fixed "
      "cost, which daydream.predict measures on this CPU), t' = c + factor * (t - c) for a CPU op of t > c: "
      "only its work above the fixed cost grows; an op with a factor in cpu_op_factors (by trace event) takes that "
      "factor instead. On GPU graphs the CPU ops are the "
      "framework's dispatch (allocation, views) and stay. Data-phase tasks (loading and preparing the batch) and host-to-device "
      "copies scale by factor. Launch and runtime calls, synchronization, the optimizer step, communication, "
      "device-to-device copies and memsets, and the framework time between CPU ops are unchanged; whether the "
      "larger batch fits in device memory is not checked. Source: Zou et al. and PRIOR_ART's batch-size model "
      "(compute scales with batch until the device saturates; fixed costs do not).";
  info.options = {
      {"factor", OptionType::kDouble, "2", "new per-device batch / recorded batch (> 0; 1: no change)"},
      {"saturation_us", OptionType::kDouble, "20",
       "kernel time in microseconds from which a kernel fills the GPU and scales fully"},
      {"cpu_saturation_us", OptionType::kDouble, "50",
       "CPU op time in microseconds from which an op scales fully"},
      {"cpu_op_factors", OptionType::kString, "",
       "TRACE_EVENT=FACTOR;... measured time factors of forward/backward CPU ops at the new batch, which win over "
       "the models above (daydream.predict measures them with daydream.calibrate.batch_cpu_phase_times when it has "
       "the model)"},
      {"cpu_fixed_us", OptionType::kDouble, "0",
       "fixed cost of a CPU op in microseconds, which does not grow with the batch (daydream.predict measures "
       "it with daydream.calibrate.cpu_op_fixed_us); 0: the cpu_saturation_us model"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new BatchSizePass(o));
  };
  return info;
}

}  // namespace daydream
