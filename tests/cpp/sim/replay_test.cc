// Tests for daydream/sim/replay.h: measured vs replayed per iteration, the
// critical-path breakdown, and the project's replay accuracy on real traces.
#include "daydream/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::SharedTracePath;

namespace {

// The names the breakdown uses for time between path tasks.
const std::set<std::string>& GapKeys() {
  static const std::set<std::string> keys = {"cpu_gap", "gpu_gap", "latency", "after_last_task"};
  return keys;
}

TimeNs Sum(const std::vector<TimeShare>& rows) {
  TimeNs total = 0;
  for (const TimeShare& r : rows) total += r.time_ns;
  return total;
}

TimeNs Share(const std::vector<TimeShare>& rows, const std::string& name) {
  for (const TimeShare& r : rows) {
    if (r.name == name) return r.time_ns;
  }
  return 0;
}

// The breakdown's rows add up to its window, and the task rows to the phases.
void CheckBreakdownAddsUp(const CriticalPathSummary& cp) {
  CHECK(Sum(cp.by_kind) == cp.length_ns);
  TimeNs task_time = 0;
  for (const TimeShare& r : cp.by_kind) {
    if (GapKeys().count(r.name) == 0) task_time += r.time_ns;
  }
  CHECK(Sum(cp.by_phase) == task_time);
  CHECK(Sum(cp.by_resource) == task_time);
  for (const TimeShare& r : cp.by_kind) CHECK(r.time_ns > 0);
  for (size_t i = 1; i < cp.by_kind.size(); ++i) CHECK(cp.by_kind[i - 1].time_ns >= cp.by_kind[i].time_ns);
}

// A task of `g` recorded `recorded` ns after its origin.
int32_t AddTaskAt(Graph& g, const std::string& name, int32_t resource, TimeNs dur, TaskKind kind, Phase phase,
                  int32_t iter, TimeNs recorded) {
  Task t;
  t.name = g.strings.Intern(name);
  t.resource = resource;
  t.duration_ns = dur;
  t.kind = kind;
  t.phase = phase;
  t.iteration = iter;
  t.recorded_start_ns = g.origin_ns + recorded;
  return g.AddTask(t);
}

// cpu thread r0 runs A, B, C (10 ns each) in a row; A launches kernel K on r1.
Graph ThreeIterationGraph() {
  Graph g;
  const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("main")});
  const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  g.origin_ns = 1000;
  g.recorded_end_ns = 1040;
  auto add = [&](const std::string& name, int32_t resource, TimeNs dur, TaskKind kind, Phase phase, int32_t iter,
                 TimeNs recorded) { return AddTaskAt(g, name, resource, dur, kind, phase, iter, recorded); };
  const int32_t a = add("A", cpu, 10, TaskKind::kRuntime, Phase::kForward, 0, 0);
  const int32_t b = add("B", cpu, 10, TaskKind::kCpuOp, Phase::kBackward, 1, 10);
  const int32_t c = add("C", cpu, 10, TaskKind::kCpuOp, Phase::kOptimizer, 2, 20);
  const int32_t k = add("K", gpu, 5, TaskKind::kKernel, Phase::kForward, 0, 12);
  g.AddEdge(a, b, EdgeKind::kSequential);
  g.AddEdge(b, c, EdgeKind::kSequential);
  g.AddEdge(a, k, EdgeKind::kLaunch, 1);
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#1"), a, a, 2, 3, 20, 998});
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#2"), b, b, 0, 0, 5, 1010});
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#3"), c, c, 0, 0, 10, 1020});
  REQUIRE(g.Validate().ok());
  g.BuildAdjacency();
  return g;
}

bool IsTraceName(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

}  // namespace

TEST_CASE("replay report compares measured and replayed time per iteration", "[replay]") {
  const Graph g = ThreeIterationGraph();
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  const ReplayReport r = MakeReplayReport(g, *schedule);
  CHECK_FALSE(r.whole_trace);
  CHECK(r.makespan_ns == 30);
  REQUIRE(r.iterations.size() == 3);
  const IterationReplay& i0 = r.iterations[0];
  CHECK(i0.name == "ProfilerStep#1");
  CHECK(i0.measured_ns == 20);
  CHECK(i0.begin_ns == -2);  // A starts at 0, 2 ns after the step began
  CHECK(i0.end_ns == 13);    // A ends at 10, the step 3 ns later
  CHECK(i0.replayed_ns == 15);
  CHECK(i0.error_pct == Approx(-25.0));  // faster than measured: negative
  CHECK(r.iterations[1].replayed_ns == 10);
  CHECK(r.iterations[1].error_pct == Approx(100.0));  // slower: positive
  CHECK(r.iterations[2].error_pct == Approx(0.0));
  CHECK(r.median_error_pct == Approx(25.0));  // median of |25|, |100|, |0|
  CHECK(r.mean_error_pct == Approx(125.0 / 3));
}

TEST_CASE("replay report takes the median over an even number of iterations as the mean of the middle two",
          "[replay]") {
  Graph g = ThreeIterationGraph();
  g.iterations.pop_back();  // errors 25 and 100
  g.BuildAdjacency();
  auto r = Replay(g);
  REQUIRE(r.ok());
  CHECK(r->median_error_pct == Approx(62.5));
}

TEST_CASE("replay report measures the GPU span of each iteration and GPU start errors", "[replay]") {
  const Graph g = ThreeIterationGraph();
  auto r = Replay(g);
  REQUIRE(r.ok());
  // K was recorded at 12 for 5 ns; it replays at 11 (A's end + lag 1).
  CHECK(r->iterations[0].gpu_measured_ns == 5);
  CHECK(r->iterations[0].gpu_replayed_ns == 5);
  CHECK(r->iterations[1].gpu_measured_ns == 0);  // no GPU work
  CHECK(r->gpu_start_error_p50_ns == 1);
  CHECK(r->gpu_start_error_p95_ns == 1);
}

TEST_CASE("replay report's GPU start-error percentiles are those of the sorted errors", "[replay]") {
  // 101 kernels, each alone on its stream with no edge: each replays at 0, so
  // its start error is its recorded start. Recorded in a shuffled order.
  Graph g;
  g.origin_ns = 0;
  std::vector<TimeNs> errors;
  for (TimeNs e = 0; e <= 100; ++e) errors.push_back(e * e);  // skewed, as start errors are
  std::vector<TimeNs> order = errors;
  for (size_t i = 0; i < order.size(); ++i) std::swap(order[i], order[(i * 37 + 11) % order.size()]);
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t stream = g.AddResource(Resource{ResourceKind::kGpuStream, 0, static_cast<int64_t>(i),
                                                  g.strings.Intern("stream " + std::to_string(i))});
    AddTaskAt(g, "K" + std::to_string(i), stream, 1, TaskKind::kKernel, Phase::kForward, -1, order[i]);
  }
  g.recorded_end_ns = 100 * 100 + 1;
  REQUIRE(g.Validate().ok());
  g.BuildAdjacency();
  auto r = Replay(g);
  REQUIRE(r.ok());
  CHECK(r->gpu_start_error_p50_ns == errors[50]);  // 2500
  CHECK(r->gpu_start_error_p95_ns == errors[95]);  // 9025
}

namespace {

// Two iterations on one CPU thread; each launches a kernel of `kernel_ns` on
// a stream at its start, then runs a CPU tail: 100 ns in the first (its
// optimizer, say, or a stall), 10 ns in the second.
Graph TailThenKernelGraph(TimeNs kernel_ns) {
  Graph g;
  const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("main")});
  const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  g.origin_ns = 1000;
  auto add = [&](const char* name, int32_t resource, TimeNs dur, TaskKind kind, int32_t iter, TimeNs recorded) {
    return AddTaskAt(g, name, resource, dur, kind, Phase::kForward, iter, recorded);
  };
  const int32_t x0 = add("X0", cpu, 10, TaskKind::kRuntime, 0, 0);
  const int32_t t0 = add("T0", cpu, 100, TaskKind::kCpuOp, 0, 10);
  const int32_t x1 = add("X1", cpu, 10, TaskKind::kRuntime, 1, 110);
  const int32_t t1 = add("T1", cpu, 10, TaskKind::kCpuOp, 1, 120);
  const int32_t k0 = add("K0", gpu, kernel_ns, TaskKind::kKernel, 0, 11);
  const int32_t k1 = add("K1", gpu, kernel_ns, TaskKind::kKernel, 1, std::max<TimeNs>(121, 11 + kernel_ns));
  g.AddEdge(x0, t0, EdgeKind::kSequential);
  g.AddEdge(t0, x1, EdgeKind::kSequential);
  g.AddEdge(x1, t1, EdgeKind::kSequential);
  g.AddEdge(x0, k0, EdgeKind::kLaunch, 1);
  g.AddEdge(x1, k1, EdgeKind::kLaunch, 1);
  g.recorded_end_ns = g.origin_ns + std::max<TimeNs>(130, 11 + 2 * kernel_ns);
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#1"), x0, t0, 0, 0, 110, 1000});
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#2"), x1, t1, 0, 0, 20, 1110});
  REQUIRE(g.Validate().ok());
  g.BuildAdjacency();
  return g;
}

}  // namespace

TEST_CASE("the device period of an iteration does not count the previous iteration's host tail", "[replay]") {
  // The stream finished the first iteration's kernel (ends at 16) long before
  // the second iteration began (110): the 94 ns between are the first
  // iteration's CPU tail, in its own span already. Counted again from the
  // previous kernel's end, the second step would read 110 ns instead of 20.
  auto r = Replay(TailThenKernelGraph(5));
  REQUIRE(r.ok());
  REQUIRE(r->iterations.size() == 2);
  const IterationReplay& second = r->iterations[1];
  CHECK(second.replayed_ns == 20);
  CHECK(second.device_period_replayed_ns == 16);  // from its begin (110) to K1's end (126)
  CHECK(second.device_period_measured_ns == 16);
  CHECK(second.step_replayed_ns == 20);
  CHECK(second.step_measured_ns == 20);
}

TEST_CASE("the device period chains from the previous iteration's device work while the device lags", "[replay]") {
  // 150 ns kernels: the first runs 11-161, past the second iteration's begin
  // (110), and the second queues behind it (161-311). The device sets the
  // pace: 150 ns a step, not the host's 20.
  auto r = Replay(TailThenKernelGraph(150));
  REQUIRE(r.ok());
  const IterationReplay& second = r->iterations[1];
  CHECK(second.device_period_replayed_ns == 150);
  CHECK(second.device_period_measured_ns == 150);
  CHECK(second.step_replayed_ns == 150);
  CHECK(second.step_measured_ns == 150);
}

TEST_CASE("replay report treats a graph without iterations as one whole-trace span", "[replay]") {
  Graph g;
  g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("main")});
  g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  g.origin_ns = 1000;
  g.recorded_end_ns = 1050;
  Task a;
  a.name = g.strings.Intern("a");
  a.resource = 0;
  a.duration_ns = 10;
  a.kind = TaskKind::kCpuOp;
  a.phase = Phase::kOther;
  g.AddTask(a);
  Task k = a;
  k.name = g.strings.Intern("k");
  k.resource = 1;
  k.duration_ns = 30;
  k.kind = TaskKind::kKernel;
  g.AddTask(k);
  g.BuildAdjacency();
  auto r = Replay(g);
  REQUIRE(r.ok());
  CHECK(r->whole_trace);
  REQUIRE(r->iterations.size() == 1);
  CHECK(r->iterations[0].name == "whole trace");
  CHECK(r->iterations[0].measured_ns == 50);
  CHECK(r->iterations[0].replayed_ns == 30);
  CHECK(r->iterations[0].error_pct == Approx(-40.0));
  CHECK(r->median_error_pct == Approx(40.0));
  CHECK(r->critical_path.length_ns == 30);
  CheckBreakdownAddsUp(r->critical_path);
}

TEST_CASE("replay refuses a graph whose adjacency is not built", "[replay]") {
  Graph g;
  g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, 0});
  Task t;
  t.resource = 0;
  g.AddTask(t);
  CHECK_FALSE(Replay(g).ok());
}

TEST_CASE("critical path summary by kind adds up to the replayed window", "[replay]") {
  const Graph g = ThreeIterationGraph();
  auto r = Replay(g);
  REQUIRE(r.ok());
  const CriticalPathSummary& cp = r->critical_path;
  CHECK(cp.length_ns == 32);  // from step 1's begin (-2) to step 3's end (30)
  CHECK(cp.num_tasks == 3);   // A, B, C; the kernel is off the path
  CHECK(Share(cp.by_kind, "cpu_op") == 20);
  CHECK(Share(cp.by_kind, "runtime") == 10);
  CHECK(Share(cp.by_kind, "cpu_gap") == 2);  // before A, inside step 1
  CHECK(Share(cp.by_kind, "kernel") == 0);
  CHECK(Share(cp.by_phase, "forward") == 10);
  CHECK(Share(cp.by_phase, "backward") == 10);
  CHECK(Share(cp.by_phase, "optimizer") == 10);
  CHECK(Share(cp.by_resource, "main") == 30);
  REQUIRE_FALSE(cp.top_tasks.empty());
  CHECK(cp.top_tasks.size() == 3);
  CheckBreakdownAddsUp(cp);
}

TEST_CASE("critical path summary credits a sync call only with its time after the awaited work", "[replay]") {
  // call (5) launches kernel (100, lag 3); sync (2) waits for it (lag 1).
  Graph g;
  const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("main")});
  const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  auto add = [&](const std::string& name, int32_t r, TimeNs d, TaskKind kind) {
    Task t;
    t.name = g.strings.Intern(name);
    t.resource = r;
    t.duration_ns = d;
    t.kind = kind;
    t.phase = Phase::kForward;
    return g.AddTask(t);
  };
  const int32_t call = add("cudaLaunchKernel", cpu, 5, TaskKind::kRuntime);
  const int32_t kernel = add("gemm", gpu, 100, TaskKind::kKernel);
  const int32_t sync = add("cudaDeviceSynchronize", cpu, 2, TaskKind::kSync);
  g.AddEdge(call, kernel, EdgeKind::kLaunch, 3);
  g.AddEdge(call, sync, EdgeKind::kSequential);
  g.AddEdge(kernel, sync, EdgeKind::kSync, 1);
  g.BuildAdjacency();
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  const std::vector<int32_t> path = CriticalPath(*schedule);
  REQUIRE(path == std::vector<int32_t>{call, kernel, sync});
  const CriticalPathSummary cp = SummarizeCriticalPath(g, *schedule, path, 0, schedule->makespan_ns);
  CHECK(cp.length_ns == 109);
  CHECK(Share(cp.by_kind, "runtime") == 5);
  CHECK(Share(cp.by_kind, "kernel") == 100);
  CHECK(Share(cp.by_kind, "sync") == 1);     // 108..109: only its tail is its own
  CHECK(Share(cp.by_kind, "latency") == 3);  // the launch latency
  CheckBreakdownAddsUp(cp);
  // A window cut short keeps adding up.
  const CriticalPathSummary part = SummarizeCriticalPath(g, *schedule, path, 4, 50);
  CHECK(part.length_ns == 46);
  CheckBreakdownAddsUp(part);
}

TEST_CASE("replay of every real trace is within 5% of the measured iterations (median)", "[replay][real]") {
  // The project's accuracy target, with the default BuildOptions. Left out:
  // hta-sampled-128rank (events sampled away) and hta-a100-alexnet (no iterations).
  namespace fs = std::filesystem;
  const std::string root = SharedTracePath("");
  std::vector<std::string> files;
  for (const auto& folder : fs::directory_iterator(root)) {
    if (!folder.is_directory()) continue;
    const std::string name = folder.path().filename().string();
    if (name == "hta-sampled-128rank" || name == "hta-a100-alexnet") continue;
    for (const auto& entry : fs::recursive_directory_iterator(folder.path())) {
      if (entry.is_regular_file() && IsTraceName(entry.path().filename().string())) {
        files.push_back(entry.path().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 28);
  for (const std::string& file : files) {
    INFO(file);
    auto trace = ReadTraceFile(file);
    REQUIRE(trace.ok());
    auto graph = BuildGraph(*trace);
    REQUIRE(graph.ok());
    auto report = Replay(*graph);
    REQUIRE(report.ok());
    CHECK_FALSE(report->whole_trace);
    CHECK(report->median_error_pct <= 5.0);
    for (const IterationReplay& it : report->iterations) {
      INFO(it.name << ": measured " << it.measured_ns << " ns, replayed " << it.replayed_ns << " ns, error "
                   << it.error_pct << "%");
      CHECK(it.measured_ns > 0);
      CHECK(it.replayed_ns > 0);
    }
    CHECK(report->critical_path.length_ns > 0);
    CheckBreakdownAddsUp(report->critical_path);
  }
}

TEST_CASE("replay starts GPU work where traces with staged pageable copies recorded it", "[replay][real]") {
  // Copies between pageable memory and the GPU are staged (before the DMA)
  // or copied out (after it) for a time of their own (docs/accuracy.md).
  // With the median over every launch and every sync instead, the GPU of
  // these traces ran 0.3-0.6 ms ahead of the recording at the median.
  struct Case {
    const char* file;
    double max_p50_us;  // measured when written: 10, 103, 1.3, 36
  };
  for (const Case& c : {
           Case{"hta-a100-alexnet/benchmark_result_2869224_1695835535_trace.json.gz", 50},
           Case{"tracelens-nvidia/h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz", 200},
           Case{"tracelens-nvidia/mi300-counterparts/facebook_timesformer-base-finetuned-k400__1016002.json.gz", 50},
           Case{"tracelens-nvidia/mi300-counterparts/google_owlv2-large-patch14-ensemble__1016001.json.gz", 100},
       }) {
    INFO(c.file);
    auto trace = ReadTraceFile(SharedTracePath(c.file));
    REQUIRE(trace.ok());
    auto graph = BuildGraph(*trace);
    REQUIRE(graph.ok());
    auto report = Replay(*graph);
    REQUIRE(report.ok());
    CHECK(static_cast<double>(report->gpu_start_error_p50_ns) / 1e3 <= c.max_p50_us);
  }
}

TEST_CASE("replay of the AlexNet trace, which has no iterations, reports the whole trace", "[replay][real]") {
  auto trace = ReadTraceFile(SharedTracePath("hta-a100-alexnet/benchmark_result_2869224_1695835535_trace.json.gz"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  REQUIRE(graph->iterations.empty());
  auto report = Replay(*graph);
  REQUIRE(report.ok());
  CHECK(report->whole_trace);
  REQUIRE(report->iterations.size() == 1);
  CHECK(report->iterations[0].measured_ns == graph->recorded_end_ns - graph->origin_ns);
  CHECK(report->iterations[0].replayed_ns == report->makespan_ns);
  CheckBreakdownAddsUp(report->critical_path);
}
