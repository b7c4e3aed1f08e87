#include "daydream/passes/cuda_graphs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
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

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

bool Before(const Graph& g, int32_t a, int32_t b) {
  const TimeNs sa = g.tasks[static_cast<size_t>(a)].recorded_start_ns;
  const TimeNs sb = g.tasks[static_cast<size_t>(b)].recorded_start_ns;
  return sa != sb ? sa < sb : a < b;
}

class CudaGraphsPass : public Pass {
 public:
  explicit CudaGraphsPass(PassOptions options) : o_(std::move(options)) {}
  std::string_view name() const override { return "cuda_graphs"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    const std::string& region = o_.String("region");
    std::vector<Phase> phases;
    if (region == "forward_backward") {
      phases = {Phase::kForward, Phase::kBackward};
    } else if (region == "iteration") {
      phases = {Phase::kForward, Phase::kBackward, Phase::kOptimizer, Phase::kComm, Phase::kOther,
                Phase::kUnspecified};
    } else {
      return absl::InvalidArgumentError(
          StrCat("cuda_graphs: region must be forward_backward or iteration, got '", region, "'"));
    }
    const double launch_us = o_.Double("graph_launch_us");
    if (launch_us < 0) return absl::InvalidArgumentError("cuda_graphs: graph_launch_us must be >= 0");
    bool gpu = false;
    for (const Resource& r : graph.resources) gpu = gpu || r.kind == ResourceKind::kGpuStream;
    if (!gpu) {
      return absl::FailedPreconditionError(
          "cuda_graphs: the graph has no GPU streams (a CPU-only trace): CUDA graphs capture GPU work");
    }
    if (graph.iterations.empty()) {
      return absl::FailedPreconditionError(
          "cuda_graphs: the graph has no iterations (no ProfilerStep#N or Optimizer.step ranges) to capture");
    }
    if (!graph.has_adjacency()) graph.BuildAdjacency();
    auto in_region = [&](const Task& t) {
      return t.iteration >= 0 && std::find(phases.begin(), phases.end(), t.phase) != phases.end() &&
             graph.resources[static_cast<size_t>(t.resource)].kind == ResourceKind::kCpuThread;
    };
    // Per iteration, the CPU tasks the captured graph replaces.
    std::vector<std::vector<int32_t>> captured(graph.iterations.size());
    absl::flat_hash_set<std::pair<int32_t, int32_t>> launching_threads;  // (iteration, thread)
    for (size_t i = 0; i < graph.tasks.size(); ++i) {
      const auto t = static_cast<int32_t>(i);
      const Task& task = graph.tasks[i];
      if (!in_region(task)) continue;
      // A launch that blocked on a full launch queue (kBlockingLaunch) is not
      // a synchronization; sync calls and blocking copies are kSync tasks.
      bool launches = false;
      bool waits = task.kind == TaskKind::kSync;
      for (int32_t e : graph.out_edges(t)) launches = launches || IsLaunch(graph.edges[static_cast<size_t>(e)].kind);
      for (int32_t e : graph.in_edges(t)) waits = waits || graph.edges[static_cast<size_t>(e)].kind == EdgeKind::kSync;
      if (waits) {
        return absl::FailedPreconditionError(StrCat(
            "cuda_graphs: the ", region, " region of iteration ",
            graph.Str(graph.iterations[static_cast<size_t>(task.iteration)].name), " contains the synchronizing "
            "call '", graph.TaskName(t), "' (task ", t, ", phase ", PhaseName(task.phase), "): CUDA graphs cannot "
            "capture synchronization; remove it (e.g. a .item() or a blocking copy) or choose a region without it"));
      }
      if (launches || task.kind == TaskKind::kRuntime) captured[static_cast<size_t>(task.iteration)].push_back(t);
      if (launches) launching_threads.insert({task.iteration, task.resource});
    }
    // Capture happens on the threads that launch the region's GPU work; a
    // thread that only polls the runtime (cudaEventQuery) is not captured.
    for (size_t it = 0; it < captured.size(); ++it) {
      std::vector<int32_t>& tasks = captured[it];
      tasks.erase(std::remove_if(tasks.begin(), tasks.end(),
                                 [&](int32_t t) {
                                   return !launching_threads.contains(
                                       {static_cast<int32_t>(it), graph.tasks[static_cast<size_t>(t)].resource});
                                 }),
                  tasks.end());
    }
    size_t iterations = 0;
    for (const auto& c : captured) iterations += c.empty() ? 0 : 1;
    if (iterations == 0) {
      return absl::NotFoundError(StrCat("cuda_graphs: no CPU task of the ", region,
                                        " region launched GPU work or called the runtime (are there forward/"
                                        "backward phases? they come from autograd and module ranges)"));
    }
    GraphEditor editor(graph);
    const auto launch_ns = RoundNs(launch_us * 1000.0);
    int64_t removed = 0;
    TimeNs removed_calls_ns = 0, removed_gaps_ns = 0;
    size_t streams_launched = 0;
    for (size_t it = 0; it < captured.size(); ++it) {
      const std::vector<int32_t>& tasks = captured[it];
      if (tasks.empty()) continue;
      const absl::flat_hash_set<int32_t> members(tasks.begin(), tasks.end());
      int32_t first = tasks.front();
      for (int32_t t : tasks) first = Before(graph, t, first) ? t : first;
      // The first GPU task each stream runs for the region, with the lag of
      // the launch that submitted it.
      std::map<int32_t, std::pair<int32_t, TimeNs>> stream_first;
      for (int32_t t : tasks) {
        for (int32_t e : editor.OutEdges(t)) {
          const Edge& edge = graph.edges[static_cast<size_t>(e)];
          if (!IsLaunch(edge.kind)) continue;
          const int32_t stream = graph.tasks[static_cast<size_t>(edge.to)].resource;
          auto found = stream_first.find(stream);
          if (found == stream_first.end() || Before(graph, edge.to, found->second.first)) {
            stream_first[stream] = {edge.to, edge.lag_ns};
          }
        }
      }
      Task launch;
      launch.kind = TaskKind::kRuntime;
      launch.name = graph.strings.Intern("cudaGraphLaunch");
      launch.duration_ns = launch_ns;
      launch.resource = graph.tasks[static_cast<size_t>(first)].resource;
      launch.phase = graph.tasks[static_cast<size_t>(first)].phase;
      launch.iteration = static_cast<int32_t>(it);
      launch.recorded_start_ns = graph.tasks[static_cast<size_t>(first)].recorded_start_ns;
      const int32_t id = editor.AddTask(launch);
      const int32_t prev = editor.SequentialPrev(first);
      editor.InsertAfterOnResource(prev, id);
      if (prev < 0) {
        // The first task's gap is the time since the trace began: it stays.
        graph.tasks[static_cast<size_t>(id)].gap_ns = graph.tasks[static_cast<size_t>(first)].gap_ns;
        graph.tasks[static_cast<size_t>(first)].gap_ns = 0;
      }
      for (const auto& [stream, target] : stream_first) editor.AddEdge(id, target.first, EdgeKind::kLaunch, target.second);
      streams_launched = std::max(streams_launched, stream_first.size());
      Iteration& iteration = graph.iterations[it];
      if (members.contains(iteration.begin_task)) iteration.begin_task = id;
      for (int32_t t : tasks) {
        // Stream order now carries the GPU work; what waited for the removed
        // call waits for the graph launch.
        for (int32_t e : editor.OutEdges(t)) {
          const Edge edge = graph.edges[static_cast<size_t>(e)];
          if (IsLaunch(edge.kind)) {
            editor.RemoveEdge(e);
          } else if (edge.kind != EdgeKind::kSequential && !members.contains(edge.to)) {
            editor.AddEdge(id, edge.to, edge.kind, edge.lag_ns);
          }
        }
        // One graph launch does not wait for room in the launch queue.
        for (int32_t e : editor.InEdges(t)) {
          if (graph.edges[static_cast<size_t>(e)].kind == EdgeKind::kLaunchQueue) editor.RemoveEdge(e);
        }
        removed_calls_ns += graph.tasks[static_cast<size_t>(t)].duration_ns;
        removed_gaps_ns += graph.tasks[static_cast<size_t>(t)].gap_ns;
        DD_RETURN_IF_ERROR(editor.RemoveTask(t, /*keep_gap=*/false));
        ++removed;
      }
    }
    DD_RETURN_IF_ERROR(editor.Commit());
    const auto n = static_cast<double>(iterations);
    context.Note(StrCat("cuda_graphs: region ", region, ", per iteration ", Fixed(static_cast<double>(removed) / n, 0),
                        " CPU launch and runtime calls (", Fixed(NsToMs(removed_calls_ns) / n, 3), " ms) and ",
                        Fixed(NsToMs(removed_gaps_ns) / n, 3),
                        " ms of framework time before them replaced by one cudaGraphLaunch of ", Fixed(launch_us, 1),
                        " us launching ", streams_launched, streams_launched == 1 ? " stream" : " streams", " (",
                        iterations, iterations == 1 ? " iteration)" : " iterations)"));
    return true;
  }

 private:
  PassOptions o_;
};

}  // namespace

PassInfo CudaGraphsPassInfo() {
  PassInfo info;
  info.name = "cuda_graphs";
  info.summary = "capture forward/backward (or the iteration) in a CUDA graph: one launch instead of many";
  info.model =
      "Per iteration, every CPU task of the captured region (region=forward_backward: forward and backward "
      "phases; region=iteration: all but the data phase) that launched GPU work or is a runtime call, on the "
      "threads that launched the region's GPU work, is removed together with its framework gap (the Python and dispatcher time that issued it does not run "
      "when a graph replays), and one cudaGraphLaunch of graph_launch_us takes the place of the first, "
      "launching the region's first GPU task on each stream; the GPU work keeps its durations and stream "
      "order, and what waited for a removed call waits for the graph launch. CPU ops that launched nothing stay. "
      "A synchronizing call in the region is an error (stream capture cannot synchronize); GPU graphs only. "
      "Source: CUDA Graphs (NVIDIA), torch.cuda.graphs / CUDAGraph trees: launch overhead of a captured region "
      "becomes one graph launch.";
  info.options = {
      {"region", OptionType::kString, "forward_backward", "what is captured: forward_backward or iteration"},
      {"graph_launch_us", OptionType::kDouble, "20", "CPU time of one cudaGraphLaunch in microseconds"},
  };
  info.create = [](const PassOptions& o) -> absl::StatusOr<std::unique_ptr<Pass>> {
    return std::unique_ptr<Pass>(new CudaGraphsPass(o));
  };
  return info;
}

}  // namespace daydream
