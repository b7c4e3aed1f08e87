#include "daydream/passes/scale.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/passes/editor.h"

namespace daydream {
namespace {

class ScalePass : public Pass {
 public:
  explicit ScalePass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "scale"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    for (const char* k : {"gpu", "cpu", "comm", "copy", "factor"}) {
      if (o_.Double(k) < 0) return absl::InvalidArgumentError(StrCat("scale: ", k, " must be >= 0"));
    }
    std::vector<int32_t> by_pattern;
    const std::string& pattern = o_.String("pattern");
    if (!pattern.empty()) {
      TaskSelector selector;
      selector.name_regex = pattern;
      DD_ASSIGN_OR_RETURN(by_pattern, SelectTasks(graph, selector));
      if (by_pattern.empty()) {
        return absl::NotFoundError(StrCat("scale: no task name matches the pattern '", pattern, "'"));
      }
    } else if (o_.IsSet("factor")) {
      return absl::InvalidArgumentError("scale: factor= applies to pattern=; set pattern too");
    }
    std::optional<Phase> only_phase;
    if (const std::string& phase = o_.String("phase"); !phase.empty()) {
      std::string names;
      for (int p = 0; p < kNumPhases; ++p) {
        const std::string_view name = PhaseName(static_cast<Phase>(p));
        if (name == phase) only_phase = static_cast<Phase>(p);
        StrAppend(&names, names.empty() ? "" : ", ", name);
      }
      if (!only_phase) return absl::InvalidArgumentError(StrCat("scale: unknown phase '", phase, "' (", names, ")"));
    }
    GraphEditor editor(graph);
    int64_t scaled = 0;
    auto apply = [&](int32_t t, double f) {
      if (f == 1.0) return;
      editor.ScaleDuration(t, f);
      ++scaled;
    };
    // Looked up once: the loop below visits every task.
    const double gpu = o_.Double("gpu"), cpu = o_.Double("cpu"), comm = o_.Double("comm");
    const double copy = o_.Double("copy"), factor = o_.Double("factor");
    std::vector<uint8_t> in_pattern(graph.tasks.size(), 0);
    for (int32_t t : by_pattern) in_pattern[static_cast<size_t>(t)] = 1;
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const auto t = static_cast<int32_t>(i);
      const Task& task = graph.tasks[i];
      if (only_phase && task.phase != *only_phase) continue;
      if (in_pattern[i]) {
        apply(t, factor);
        continue;
      }
      switch (task.kind) {
        case TaskKind::kKernel: apply(t, gpu); break;
        case TaskKind::kCollective: apply(t, comm); break;
        case TaskKind::kMemcpy:
        case TaskKind::kMemset: apply(t, copy); break;
        default:
          if (cpu != 1.0 && IsCpuWork(graph, task)) {
            // A faster CPU also runs the framework code between ops faster.
            editor.ScaleCpuWork(t, cpu);
            ++scaled;
          }
          break;
      }
    }
    if (scaled == 0) return false;
    DD_RETURN_IF_ERROR(editor.Commit());
    context.Note(StrCat("scale: ", scaled, " task durations scaled"));
    return true;
  }

 private:
  PassOptions o_;
};

}  // namespace

PassInfo ScalePassInfo() {
  PassInfo info;
  info.name = "scale";
  info.summary = "generic what-if: scale GPU kernels, CPU work, communication, copies or named tasks";
  info.model =
      "Multiplies task durations by a factor per class: gpu (kernels), cpu (CPU operators, runtime calls and "
      "the framework time between them), comm (collectives), copy (memcpy/memset); or, with pattern (an "
      "ECMAScript regex on task names), the matching tasks by factor. 0.5 means twice as fast. Dependencies "
      "and latencies are unchanged, so the prediction shows what the critical path makes of the change "
      "(\"if this kernel were 2x faster, what would the step be?\").";
  info.options = {
      {"gpu", OptionType::kDouble, "1", "time factor for GPU kernels"},
      {"cpu", OptionType::kDouble, "1", "time factor for CPU work (operators, runtime calls, framework gaps)"},
      {"comm", OptionType::kDouble, "1", "time factor for collectives"},
      {"copy", OptionType::kDouble, "1", "time factor for GPU copies and memsets"},
      {"pattern", OptionType::kString, "", "regex on task names selecting tasks for factor"},
      {"factor", OptionType::kDouble, "1", "time factor for tasks matching pattern"},
      {"phase", OptionType::kString, "",
       "scale only tasks of this phase (forward, backward, optimizer, ...; empty: every phase)"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new ScalePass(o));
  };
  return info;
}

}  // namespace daydream
