// Tests for daydream/graph/builder.h: the dependency rules that turn a trace
// into a graph. Small traces are written by hand (times in microseconds);
// the real traces check invariants at scale.
#include "daydream/graph/builder.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::HasEdge;
using daydream::testing::KinetoDoc;
using daydream::testing::ParseOrDie;
using daydream::testing::SharedTracePath;
using daydream::testing::TaskNamed;

namespace {

constexpr TimeNs kUs = 1000;

// --- trace writing helpers (times in microseconds) ---------------------------

std::string Event(const std::string& cat, const std::string& name, int64_t pid, int64_t tid, double ts, double dur,
                  const std::string& args = "") {
  std::string e = "{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name + "\",\"pid\":" + std::to_string(pid) +
                  ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + std::to_string(ts) +
                  ",\"dur\":" + std::to_string(dur);
  if (!args.empty()) e += ",\"args\":{" + args + "}";
  return e + "}";
}

// A cpu_op on thread `tid` of process 1.
std::string Cpu(const std::string& name, double ts, double dur, const std::string& args = "", int64_t tid = 1,
                int64_t pid = 1) {
  return Event("cpu_op", name, pid, tid, ts, dur, args);
}

std::string Anno(const std::string& name, double ts, double dur, int64_t tid = 1) {
  return Event("user_annotation", name, 1, tid, ts, dur);
}

std::string Py(const std::string& name, double ts, double dur, int64_t tid = 1) {
  return Event("python_function", name, 1, tid, ts, dur);
}

// A runtime call; `corr` < 0 means no correlation arg.
std::string Rt(const std::string& name, double ts, double dur, int64_t corr, int64_t tid = 1,
               const std::string& cat = "cuda_runtime") {
  return Event(cat, name, 1, tid, ts, dur, corr >= 0 ? "\"correlation\":" + std::to_string(corr) : "");
}

// A GPU activity on (device, stream).
std::string Gpu(const std::string& name, double ts, double dur, int64_t corr, int64_t stream = 7, int64_t device = 0,
                const std::string& extra_args = "", const std::string& cat = "kernel") {
  std::string args = "\"device\":" + std::to_string(device) + ",\"stream\":" + std::to_string(stream) +
                     ",\"correlation\":" + std::to_string(corr);
  if (!extra_args.empty()) args += "," + extra_args;
  return Event(cat, name, device, stream, ts, dur, args);
}

std::string Join(const std::vector<std::string>& events) {
  std::string out;
  for (const auto& e : events) {
    if (!out.empty()) out += ",";
    out += e;
  }
  return out;
}

// Builds the graph of `events`; REQUIREs success and a valid graph.
Graph Build(const std::vector<std::string>& events, const BuildOptions& options = {},
            const std::string& top_level = "") {
  const Trace trace = ParseOrDie(KinetoDoc(Join(events), top_level));
  auto graph = BuildGraph(trace, options);
  INFO((graph.ok() ? std::string("ok") : std::string(graph.status().message())));
  REQUIRE(graph.ok());
  const absl::Status valid = graph->Validate();
  INFO(valid.message());
  REQUIRE(valid.ok());
  REQUIRE(graph->has_adjacency());
  return std::move(graph).value();
}

std::set<std::string> TaskNames(const Graph& g) {
  std::set<std::string> names;
  for (size_t i = 0; i < g.tasks.size(); ++i) names.insert(std::string(g.TaskName(static_cast<int32_t>(i))));
  return names;
}

const Task& TaskOf(const Graph& g, const std::string& name) { return g.tasks[static_cast<size_t>(TaskNamed(g, name))]; }

const Edge* FindEdge(const Graph& g, int32_t from, int32_t to, EdgeKind kind) {
  for (const Edge& e : g.edges) {
    if (e.from == from && e.to == to && e.kind == kind) return &e;
  }
  return nullptr;
}

int64_t CountEdges(const Graph& g, EdgeKind kind) {
  return std::count_if(g.edges.begin(), g.edges.end(), [&](const Edge& e) { return e.kind == kind; });
}

const WarningCount* FindWarning(const Graph& g, const std::string& kind) {
  for (const WarningCount& w : g.warnings.items()) {
    if (w.kind == kind) return &w;
  }
  return nullptr;
}

bool IsTraceName(const std::string& name) {
  auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

// Every *.json / *.json.gz file under ../shared/traces/<folder>.
std::vector<std::string> TraceFiles(const std::string& folder) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(SharedTracePath(folder))) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && IsTraceName(name)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

using Span = std::pair<TimeNs, TimeNs>;  // start, duration

// Each task's name and recorded span, in task order.
std::vector<std::pair<std::string, Span>> TaskSpans(const Graph& g) {
  std::vector<std::pair<std::string, Span>> tasks;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    tasks.push_back({std::string(g.TaskName(static_cast<int32_t>(i))), {t.recorded_start_ns, t.duration_ns}});
  }
  return tasks;
}

}  // namespace

// --- rule 1: CPU tasks ---------------------------------------------------------

TEST_CASE("builder makes tasks of innermost CPU events, not of the ranges enclosing them", "[builder]") {
  const Graph g = Build({
      Anno("ProfilerStep#1", 0, 1000),
      Py("nn.Module: fc", 5, 90),
      Cpu("aten::linear", 10, 25),  // own work 2 + 3 us, addmm's 8 + 7 us: under min_self_task_ns
      Cpu("aten::addmm", 12, 20),
      Rt("cudaLaunchKernel", 20, 5, 1),
      Gpu("gemm", 30, 10, 1),
      Cpu("aten::relu", 65, 15),
      Cpu("aten::empty", 82, 5),
      Anno("record_function inside a leaf op", 83, 1),
      Py("model.py(12): helper", 90, 2),  // python_function alone is never a task
  });
  CHECK(TaskNames(g) == std::set<std::string>{"cudaLaunchKernel", "gemm", "aten::relu", "aten::empty"});
  CHECK(g.tasks.size() == 4);
  CHECK(TaskOf(g, "cudaLaunchKernel").kind == TaskKind::kRuntime);
  CHECK(TaskOf(g, "aten::relu").kind == TaskKind::kCpuOp);
  CHECK(TaskOf(g, "gemm").kind == TaskKind::kKernel);
  // Tasks keep their recorded timing.
  CHECK(TaskOf(g, "aten::relu").recorded_start_ns == 65 * kUs);
  CHECK(TaskOf(g, "aten::relu").duration_ns == 15 * kUs);
  CHECK(TaskOf(g, "aten::relu").trace_event == 6);
}

TEST_CASE("builder makes an operator's own long work inside it a task, attributed to the innermost operator",
          "[builder]") {
  const std::vector<std::string> events = {
      Anno("ProfilerStep#1", 0, 1000),
      Cpu("aten::conv2d", 0, 300),                // own work: 10 us before, 50 us after its child
      Cpu("aten::mkldnn_convolution", 10, 240),   // allocates, then computes for 235 us
      Cpu("aten::empty", 12, 3),
      Cpu("autograd::engine::evaluate_function: ConvolutionBackward0", 400, 300),  // a wrapper
      Cpu("aten::convolution_backward", 410, 10),
  };
  const Graph g = Build(events);
  CHECK(TaskSpans(g) == std::vector<std::pair<std::string, Span>>{
                     {"aten::empty", {12 * kUs, 3 * kUs}},
                     {"aten::mkldnn_convolution", {15 * kUs, 235 * kUs}},
                     {"aten::conv2d", {250 * kUs, 50 * kUs}},
                     {"aten::convolution_backward", {410 * kUs, 10 * kUs}},
                 });
  CHECK(TaskOf(g, "aten::mkldnn_convolution").kind == TaskKind::kCpuOp);
  CHECK(TaskOf(g, "aten::mkldnn_convolution").phase == Phase::kForward);
  // The next task's gap no longer holds the convolution.
  CHECK(TaskOf(g, "aten::convolution_backward").gap_ns == 110 * kUs);

  BuildOptions off;
  off.min_self_task_ns = 0;
  CHECK(Build(events, off).tasks.size() == 2);
}

TEST_CASE("builder finds an operator's task descendants through ranges that are no tasks", "[builder]") {
  // aten::outer holds its tasks only inside a record_function range: it is
  // still no leaf, and its own work is what they leave of it (but the 10 us
  // between aten::mid and aten::after, under min_self_task_ns). aten::mid's
  // own work stops at aten::inner, its own child.
  const Graph g = Build({
      Anno("ProfilerStep#1", 0, 1000),
      Cpu("aten::outer", 0, 400),
      Anno("region", 20, 300),
      Cpu("aten::mid", 40, 200),
      Cpu("aten::inner", 100, 50),
      Cpu("aten::after", 250, 30),
  });
  CHECK(TaskSpans(g) == std::vector<std::pair<std::string, Span>>{
                     {"aten::outer", {0, 40 * kUs}},
                     {"aten::mid", {40 * kUs, 60 * kUs}},
                     {"aten::inner", {100 * kUs, 50 * kUs}},
                     {"aten::mid", {150 * kUs, 90 * kUs}},
                     {"aten::after", {250 * kUs, 30 * kUs}},
                     {"aten::outer", {280 * kUs, 120 * kUs}},
                 });
}

TEST_CASE("builder gives each CPU task the idle time since the previous task on its thread", "[builder]") {
  const Graph g = Build({
      Cpu("c", 30, 10),
      Cpu("a", 10, 10),
      Cpu("b", 25, 5),
      Cpu("other_thread", 4, 1, "", /*tid=*/2),
  });
  CHECK(g.origin_ns == 4 * kUs);
  CHECK(TaskOf(g, "a").gap_ns == 6 * kUs);  // first on its thread: since the graph origin
  CHECK(TaskOf(g, "b").gap_ns == 5 * kUs);
  CHECK(TaskOf(g, "c").gap_ns == 0);
  CHECK(TaskOf(g, "other_thread").gap_ns == 0);
}

TEST_CASE("builder chains the tasks of one thread in time order with sequential edges", "[builder]") {
  const Graph g = Build({
      Cpu("c", 30, 10),
      Cpu("a", 10, 10),
      Cpu("b", 25, 5),
      Cpu("x", 12, 5, "", /*tid=*/2),
  });
  const int32_t a = TaskNamed(g, "a"), b = TaskNamed(g, "b"), c = TaskNamed(g, "c"), x = TaskNamed(g, "x");
  CHECK(HasEdge(g, a, b, EdgeKind::kSequential));
  CHECK(HasEdge(g, b, c, EdgeKind::kSequential));
  CHECK_FALSE(HasEdge(g, a, c, EdgeKind::kSequential));
  CHECK(CountEdges(g, EdgeKind::kSequential) == 2);  // nothing links thread 2
  CHECK(g.tasks[static_cast<size_t>(a)].resource == g.tasks[static_cast<size_t>(c)].resource);
  CHECK(g.tasks[static_cast<size_t>(a)].resource != g.tasks[static_cast<size_t>(x)].resource);
  const Resource& r = g.resources[static_cast<size_t>(g.tasks[static_cast<size_t>(a)].resource)];
  CHECK(r.kind == ResourceKind::kCpuThread);
  CHECK(r.process == 1);
  CHECK(r.thread == 1);
  // Task ids follow recorded start.
  CHECK(a < b);
  CHECK(b < c);
}

TEST_CASE("builder names CPU resources after thread_name metadata", "[builder]") {
  const Graph g = Build({
      R"j({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"pt_main_thread"}})j",
      Cpu("a", 10, 10),
      Cpu("b", 10, 10, "", /*tid=*/2),
  });
  CHECK(g.Str(g.resources[static_cast<size_t>(TaskOf(g, "a").resource)].name) == "pt_main_thread");
  CHECK(g.Str(g.resources[static_cast<size_t>(TaskOf(g, "b").resource)].name) == "thread 2");
}

// --- rule 2: GPU streams -----------------------------------------------------------

TEST_CASE("builder chains the activities of one GPU stream and keeps streams apart", "[builder]") {
  const Graph g = Build({
      Gpu("k2", 120, 10, -1, 7),
      Gpu("k1", 100, 10, -1, 7),
      Gpu("k3", 105, 20, -1, 8),
      Gpu("copy", 140, 5, -1, 7, 0, "\"bytes\":4096", "gpu_memcpy"),
      Gpu("set", 150, 5, -1, 7, 0, "\"bytes\":64", "gpu_memset"),
  });
  const int32_t k1 = TaskNamed(g, "k1"), k2 = TaskNamed(g, "k2"), k3 = TaskNamed(g, "k3");
  const int32_t copy = TaskNamed(g, "copy"), set = TaskNamed(g, "set");
  CHECK(HasEdge(g, k1, k2, EdgeKind::kSequential));
  CHECK(HasEdge(g, k2, copy, EdgeKind::kSequential));
  CHECK(HasEdge(g, copy, set, EdgeKind::kSequential));
  CHECK_FALSE(HasEdge(g, k1, k3, EdgeKind::kSequential));
  CHECK_FALSE(HasEdge(g, k3, k2, EdgeKind::kSequential));
  CHECK(g.tasks[static_cast<size_t>(copy)].kind == TaskKind::kMemcpy);
  CHECK(g.tasks[static_cast<size_t>(copy)].bytes == 4096);
  CHECK(g.tasks[static_cast<size_t>(set)].kind == TaskKind::kMemset);
  const Resource& s7 = g.resources[static_cast<size_t>(g.tasks[static_cast<size_t>(k1)].resource)];
  const Resource& s8 = g.resources[static_cast<size_t>(g.tasks[static_cast<size_t>(k3)].resource)];
  CHECK(s7.kind == ResourceKind::kGpuStream);
  CHECK(s7.process == 0);
  CHECK(s7.thread == 7);
  CHECK(s8.thread == 8);
  // Work with no recorded cause keeps its recorded idle time on its stream.
  CHECK(g.tasks[static_cast<size_t>(k2)].gap_ns == 10 * kUs);
}

// --- rule 3: launches ---------------------------------------------------------------

TEST_CASE("builder links a kernel to its launch by correlation id", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 10, 5, 42),
      Rt("cudaLaunchKernel", 16, 5, 43),
      Gpu("k42", 20, 10, 42),
      Gpu("k43", 31, 10, 43, 8),
  });
  const int32_t l42 = TaskNamed(g, "cudaLaunchKernel");
  const int32_t l43 = l42 + 1;
  const int32_t k42 = TaskNamed(g, "k42"), k43 = TaskNamed(g, "k43");
  REQUIRE(g.TaskName(l43) == "cudaLaunchKernel");
  CHECK(HasEdge(g, l42, k42, EdgeKind::kLaunch));
  CHECK(HasEdge(g, l43, k43, EdgeKind::kLaunch));
  CHECK_FALSE(HasEdge(g, l42, k43, EdgeKind::kLaunch));
  CHECK_FALSE(HasEdge(g, k42, l42, EdgeKind::kLaunch));
  CHECK(CountEdges(g, EdgeKind::kLaunch) == 2);
  CHECK(g.tasks[static_cast<size_t>(k42)].correlation == 42);
  CHECK(g.tasks[static_cast<size_t>(l42)].correlation == 42);
  CHECK(FindWarning(g, "kernel_without_launch") == nullptr);
  CHECK(FindWarning(g, "launch_without_kernel") == nullptr);
}

TEST_CASE("builder links launches by correlation ids far from zero and far apart", "[builder]") {
  // Kineto's ids count from the process's first CUDA call (a dense run far
  // from zero); other producers may give ids scattered over int64.
  for (const std::vector<int64_t>& ids : {std::vector<int64_t>{135071, 135072, 135073},
                                          std::vector<int64_t>{3, 9'000'000'000, 40'000'000}}) {
    INFO(ids[1]);
    const Graph g = Build({
        Rt("cudaLaunchKernel", 10, 5, ids[0]),
        Rt("cudaLaunchKernel", 16, 5, ids[1]),
        Rt("cudaLaunchKernel", 22, 5, ids[2]),
        Gpu("k0", 30, 10, ids[0]),
        Gpu("k1", 41, 10, ids[1]),
        Gpu("k2", 52, 10, ids[2]),
        Gpu("orphan", 63, 10, ids[2] + 1),
    });
    const int32_t first = TaskNamed(g, "cudaLaunchKernel");
    CHECK(HasEdge(g, first, TaskNamed(g, "k0"), EdgeKind::kLaunch));
    CHECK(HasEdge(g, first + 1, TaskNamed(g, "k1"), EdgeKind::kLaunch));
    CHECK(HasEdge(g, first + 2, TaskNamed(g, "k2"), EdgeKind::kLaunch));
    CHECK(CountEdges(g, EdgeKind::kLaunch) == 3);
    const WarningCount* w = FindWarning(g, "kernel_without_launch");
    REQUIRE(w != nullptr);
    CHECK(w->count == 1);
  }
}

TEST_CASE("builder links cuda_driver cuLaunchKernel calls to their kernels", "[builder]") {
  const Graph g = Build({
      Rt("cuLaunchKernel", 10, 5, 35, 1, "cuda_driver"),
      Gpu("triton_kernel", 20, 10, 35),
  });
  const int32_t call = TaskNamed(g, "cuLaunchKernel");
  CHECK(g.tasks[static_cast<size_t>(call)].kind == TaskKind::kRuntime);
  CHECK(HasEdge(g, call, TaskNamed(g, "triton_kernel"), EdgeKind::kLaunch));
}

TEST_CASE("builder links HIP launches and synchronizes on HIP calls", "[builder]") {
  const Graph g = Build({
      Rt("hipLaunchKernel", 10, 5, 1),
      Gpu("rocm_kernel", 20, 50, 1),
      Rt("hipDeviceSynchronize", 30, 45, 2),
  });
  const int32_t launch = TaskNamed(g, "hipLaunchKernel"), kernel = TaskNamed(g, "rocm_kernel");
  const int32_t sync = TaskNamed(g, "hipDeviceSynchronize");
  CHECK(HasEdge(g, launch, kernel, EdgeKind::kLaunch));
  CHECK(HasEdge(g, kernel, sync, EdgeKind::kSync));
  CHECK(g.tasks[static_cast<size_t>(sync)].kind == TaskKind::kSync);
  CHECK(g.tasks[static_cast<size_t>(sync)].duration_ns == 5 * kUs);  // 75 - 70: the rest was waiting
}

TEST_CASE("builder links one cudaGraphLaunch to every kernel with its correlation", "[builder]") {
  const Graph g = Build({
      Rt("cudaGraphLaunch", 10, 5, 7),
      Gpu("g1", 20, 10, 7, 7),
      Gpu("g2", 31, 10, 7, 7),
      Gpu("g3", 22, 10, 7, 8),
  });
  const int32_t call = TaskNamed(g, "cudaGraphLaunch");
  for (const char* k : {"g1", "g2", "g3"}) {
    INFO(k);
    CHECK(HasEdge(g, call, TaskNamed(g, k), EdgeKind::kLaunch));
  }
  CHECK(CountEdges(g, EdgeKind::kLaunch) == 3);
  CHECK(HasEdge(g, TaskNamed(g, "g1"), TaskNamed(g, "g2"), EdgeKind::kSequential));
  CHECK(FindWarning(g, "kernel_without_launch") == nullptr);
  CHECK(FindWarning(g, "launch_without_kernel") == nullptr);
}

TEST_CASE("builder warns about a kernel without a launch and adds no launch edge", "[builder]") {
  const Graph g = Build({
      Cpu("aten::add", 10, 5),
      Gpu("orphan", 20, 10, 99),
  });
  const WarningCount* w = FindWarning(g, "kernel_without_launch");
  REQUIRE(w != nullptr);
  CHECK(w->count == 1);
  CHECK_THAT(w->example, Catch::Contains("orphan") && Catch::Contains("correlation 99"));
  CHECK(CountEdges(g, EdgeKind::kLaunch) == 0);
  CHECK(CountEdges(g, EdgeKind::kBlockingLaunch) == 0);
}

TEST_CASE("builder warns about a launch without a kernel", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 10, 5, 5),
      Rt("cudaMemcpyAsync", 20, 5, 6),
      Rt("cudaStreamSynchronize", 30, 5, 7),  // not a launch: no warning for it
      Rt("cudaLaunchKernel", 40, 5, 8),
      Gpu("k", 50, 5, 8),
  });
  const WarningCount* w = FindWarning(g, "launch_without_kernel");
  REQUIRE(w != nullptr);
  CHECK(w->count == 2);
  CHECK_THAT(w->example, Catch::Contains("has no GPU activity in the trace"));
}

// --- rule 4: synchronizing calls ------------------------------------------------------

TEST_CASE("builder makes a blocking cudaMemcpy a sync task with blocking-launch and sync edges", "[builder]") {
  const Graph g = Build({
      Rt("cudaMemcpy", 0, 50, 5),
      Gpu("Memcpy HtoD (Pageable -> Device)", 10, 35, 5, 7, 0, "\"bytes\":1048576", "gpu_memcpy"),
  });
  const int32_t call = TaskNamed(g, "cudaMemcpy");
  const int32_t copy = TaskNamed(g, "Memcpy HtoD (Pageable -> Device)");
  CHECK(HasEdge(g, call, copy, EdgeKind::kBlockingLaunch));
  CHECK_FALSE(HasEdge(g, call, copy, EdgeKind::kLaunch));
  CHECK(HasEdge(g, copy, call, EdgeKind::kSync));
  CHECK(g.tasks[static_cast<size_t>(call)].kind == TaskKind::kSync);
  CHECK(g.tasks[static_cast<size_t>(copy)].kind == TaskKind::kMemcpy);
  CHECK(g.tasks[static_cast<size_t>(copy)].bytes == 1048576);
  // The call keeps only what came after the copy.
  CHECK(g.tasks[static_cast<size_t>(call)].duration_ns == 5 * kUs);
}

TEST_CASE("builder gives a blocking copy the staging delay of its direction and size class", "[builder]") {
  // Launches start their kernels 10 us after the call starts; copies from
  // pageable memory of 4 MB start 580-640 us after theirs (the driver
  // stages them through a pinned buffer first), those of 8 bytes 12 us after.
  const std::string htod = "Memcpy HtoD (Pageable -> Device)";
  const std::string big = "\"bytes\":4194304";
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("k1", 10, 5, 1),
      Rt("cudaLaunchKernel", 20, 5, 2),
      Gpu("k2", 30, 5, 2),
      Rt("cudaLaunchKernel", 40, 5, 3),
      Gpu("k3", 50, 5, 3),
      Rt("cudaMemcpyAsync", 100, 700, 4),
      Gpu(htod, 680, 100, 4, 7, 0, big, "gpu_memcpy"),
      Rt("cudaMemcpyAsync", 1000, 700, 5),
      Gpu(htod, 1600, 90, 5, 7, 0, big, "gpu_memcpy"),
      Rt("cudaMemcpyAsync", 2000, 700, 6),
      Gpu(htod, 2640, 50, 6, 7, 0, big, "gpu_memcpy"),
      Rt("cudaMemcpyAsync", 3000, 20, 7),
      Gpu(htod, 3012, 2, 7, 7, 0, "\"bytes\":8", "gpu_memcpy"),
      // 64 MB, launched while the stream still runs a kernel: no sample of
      // its own; it takes the nearest size class's delay.
      Rt("cudaLaunchKernel", 4000, 5, 8),
      Gpu("k4", 4010, 2000, 8),
      Rt("cudaMemcpyAsync", 4100, 3000, 9),
      Gpu(htod, 6600, 400, 9, 7, 0, "\"bytes\":67108864", "gpu_memcpy"),
      // Device to host, 4 MB: a name of its own, never sampled alone here
      // (the stream is busy), so it keeps the launches' typical delay.
      Rt("cudaLaunchKernel", 8000, 5, 10),
      Gpu("k5", 8010, 300, 10),
      Rt("cudaMemcpyAsync", 8100, 300, 11),
      Gpu("Memcpy DtoH (Device -> Pageable)", 8320, 60, 11, 7, 0, big, "gpu_memcpy"),
  });
  auto task_of = [&](int64_t corr, bool copy) {
    for (size_t t = 0; t < g.tasks.size(); ++t) {
      if (g.tasks[t].correlation == corr && (g.tasks[t].kind == TaskKind::kMemcpy) == copy) {
        return static_cast<int32_t>(t);
      }
    }
    FAIL("no task with correlation " << corr);
    return -1;
  };
  auto lag = [&](int64_t corr) {
    const Edge* e = FindEdge(g, task_of(corr, false), task_of(corr, true), EdgeKind::kBlockingLaunch);
    REQUIRE(e != nullptr);
    return e->lag_ns;
  };
  CHECK(lag(4) == 600 * kUs);  // the median of 580, 600, 640
  CHECK(lag(5) == 600 * kUs);
  CHECK(lag(6) == 600 * kUs);
  CHECK(lag(7) == 12 * kUs);
  CHECK(lag(9) == 600 * kUs);
  CHECK(lag(11) < 100 * kUs);
  // The replay starts each 4 MB copy within 40 us of where it was recorded,
  // not 10 us after its call as a kernel launch would.
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  for (int64_t corr : {4, 5, 6}) {
    const int32_t t = task_of(corr, true);
    const TimeNs recorded = g.tasks[static_cast<size_t>(t)].recorded_start_ns - g.origin_ns;
    CHECK(std::abs(schedule->start_ns[static_cast<size_t>(t)] - recorded) <= 40 * kUs);
  }
}

TEST_CASE("builder takes no staging delay from a copy that started when another stream's work ended",
          "[builder]") {
  // copy_waits starts 893 us after its call, 3 us after a kernel on stream 8
  // ended: it waited for that kernel (legacy default-stream semantics), and
  // its delay is no sample. copy_clean, of the same class, started 15 us
  // after its call.
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 3, 1),
      Gpu("long_s8", 5, 895, 1, 8),
      Rt("cudaMemcpyAsync", 10, 900, 2),
      Gpu("Memcpy DtoH (Device -> Pageable)", 903, 2, 2, 7, 0, "\"bytes\":192", "gpu_memcpy"),
      Rt("cudaMemcpyAsync", 1000, 25, 3),
      Gpu("Memcpy DtoH (Device -> Pageable)", 1015, 2, 3, 7, 0, "\"bytes\":192", "gpu_memcpy"),
  });
  int32_t waits = -1, clean = -1;
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    if (g.tasks[t].kind != TaskKind::kMemcpy) continue;
    (g.tasks[t].correlation == 2 ? waits : clean) = static_cast<int32_t>(t);
  }
  REQUIRE(waits >= 0);
  REQUIRE(clean >= 0);
  for (const Edge& e : g.edges) {
    if (e.kind == EdgeKind::kBlockingLaunch && (e.to == waits || e.to == clean)) CHECK(e.lag_ns == 15 * kUs);
  }
  CHECK(CountEdges(g, EdgeKind::kBlockingLaunch) == 2);
  // The wait itself is a stream wait on the kernel.
  CHECK(HasEdge(g, TaskNamed(g, "long_s8"), waits, EdgeKind::kStreamWait));
}

TEST_CASE("builder gives a blocking copy's return the copy-out time of its direction and size class",
          "[builder]") {
  // Stream syncs return 3 us after their kernel ends. Copies to pageable
  // memory return after their DMA once the data is copied out of the
  // staging buffer: 48-52 us for 8 MB, 5 us for 8 bytes.
  const std::string dtoh = "Memcpy DtoH (Device -> Pageable)";
  const std::string big = "\"bytes\":8388608";
  std::vector<std::string> events;
  int64_t corr = 1;
  double t = 0;
  for (int i = 0; i < 5; ++i, t += 1000) {
    events.push_back(Rt("cudaLaunchKernel", t, 5, corr));
    events.push_back(Gpu("k", t + 10, 100, corr++));
    events.push_back(Rt("cudaStreamSynchronize", t + 20, 93, -1));
  }
  for (double tail : {48.0, 52.0, 50.0}) {
    events.push_back(Rt("cudaMemcpyAsync", t, 10 + 200 + tail, corr));
    events.push_back(Gpu(dtoh, t + 10, 200, corr++, 7, 0, big, "gpu_memcpy"));
    t += 1000;
  }
  events.push_back(Rt("cudaMemcpyAsync", t, 10 + 2 + 5, corr));
  events.push_back(Gpu(dtoh, t + 10, 2, corr++, 7, 0, "\"bytes\":8", "gpu_memcpy"));
  const Graph g = Build(events);
  std::vector<TimeNs> copy_calls, syncs;
  for (const Task& task : g.tasks) {
    const std::string name(g.strings.Get(task.name));
    if (name == "cudaMemcpyAsync") copy_calls.push_back(task.duration_ns);
    if (name == "cudaStreamSynchronize") syncs.push_back(task.duration_ns);
  }
  // A call that waited keeps only its typical time after what it waited for.
  CHECK(copy_calls == std::vector<TimeNs>{50 * kUs, 50 * kUs, 50 * kUs, 5 * kUs});
  CHECK(syncs == std::vector<TimeNs>(5, 3 * kUs));
}

TEST_CASE("builder makes cudaDeviceSynchronize wait on the last activity of every stream", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 2, 1),
      Gpu("early_s7", 3, 5, 1, 7),
      Rt("cudaLaunchKernel", 3, 2, 2),
      Gpu("last_s7", 10, 100, 2, 7),
      Rt("cudaLaunchKernel", 6, 4, 3),
      Gpu("last_s8", 12, 48, 3, 8),
      Rt("cudaDeviceSynchronize", 20, 95, 4),
  });
  const int32_t sync = TaskNamed(g, "cudaDeviceSynchronize");
  CHECK(HasEdge(g, TaskNamed(g, "last_s7"), sync, EdgeKind::kSync));
  CHECK(HasEdge(g, TaskNamed(g, "last_s8"), sync, EdgeKind::kSync));
  CHECK_FALSE(HasEdge(g, TaskNamed(g, "early_s7"), sync, EdgeKind::kSync));
  CHECK(CountEdges(g, EdgeKind::kSync) == 2);
  const Task& t = g.tasks[static_cast<size_t>(sync)];
  CHECK(t.kind == TaskKind::kSync);
  CHECK(t.recorded_start_ns == 20 * kUs);
  CHECK(t.duration_ns == 5 * kUs);  // 115 - 110: its overhead after the last kernel
}

TEST_CASE("builder makes cudaStreamSynchronize wait on the stream whose work ended just before it returned",
          "[builder]") {
  const std::vector<std::string> events = {
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("k_s7", 10, 50, 1, 7),  // ends at 60, inside the call
      Rt("cudaLaunchKernel", 6, 4, 2),
      Gpu("k_s8", 12, 83, 2, 8),  // ends at 95, just before the call returns
      Rt("cudaStreamSynchronize", 50, 50, 3),
  };
  SECTION("inferred from timing") {
    const Graph g = Build(events);
    const int32_t sync = TaskNamed(g, "cudaStreamSynchronize");
    CHECK(HasEdge(g, TaskNamed(g, "k_s8"), sync, EdgeKind::kSync));
    CHECK_FALSE(HasEdge(g, TaskNamed(g, "k_s7"), sync, EdgeKind::kSync));
    CHECK(g.tasks[static_cast<size_t>(sync)].kind == TaskKind::kSync);
    CHECK(g.tasks[static_cast<size_t>(sync)].duration_ns == 5 * kUs);
  }
  SECTION("a cuda_sync Stream Sync record names the stream") {
    std::vector<std::string> with_record = events;
    with_record.push_back(
        Event("cuda_sync", "Stream Sync", 0, 7, 60, 40,
              "\"cuda_sync_kind\":\"Stream Sync\",\"stream\":7,\"correlation\":3,\"device\":0"));
    const Graph g = Build(with_record);
    const int32_t sync = TaskNamed(g, "cudaStreamSynchronize");
    CHECK(HasEdge(g, TaskNamed(g, "k_s7"), sync, EdgeKind::kSync));
    CHECK_FALSE(HasEdge(g, TaskNamed(g, "k_s8"), sync, EdgeKind::kSync));
  }
}

TEST_CASE("builder makes a Context Sync record wait on every stream", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("k_s7", 10, 50, 1, 7),
      Rt("cudaLaunchKernel", 6, 4, 2),
      Gpu("k_s8", 12, 83, 2, 8),
      Rt("cudaStreamSynchronize", 50, 50, 3),
      Event("cuda_sync", "Context Sync", 0, -1, 60, 40,
            "\"cuda_sync_kind\":\"Context Sync\",\"stream\":4294967295,\"correlation\":3,\"device\":0"),
  });
  const int32_t sync = TaskNamed(g, "cudaStreamSynchronize");
  CHECK(HasEdge(g, TaskNamed(g, "k_s7"), sync, EdgeKind::kSync));
  CHECK(HasEdge(g, TaskNamed(g, "k_s8"), sync, EdgeKind::kSync));
}

TEST_CASE("ClassifySyncCall recognizes CUDA, driver and HIP synchronizing calls", "[builder]") {
  CHECK(ClassifySyncCall("cudaDeviceSynchronize") == SyncCall::kDevice);
  CHECK(ClassifySyncCall("cuCtxSynchronize") == SyncCall::kDevice);
  CHECK(ClassifySyncCall("hipDeviceSynchronize") == SyncCall::kDevice);
  CHECK(ClassifySyncCall("cudaStreamSynchronize") == SyncCall::kStream);
  CHECK(ClassifySyncCall("hipStreamSynchronize") == SyncCall::kStream);
  CHECK(ClassifySyncCall("cudaEventSynchronize") == SyncCall::kEvent);
  CHECK(ClassifySyncCall("cudaMemcpy") == SyncCall::kBlockingCopy);
  CHECK(ClassifySyncCall("cudaMemcpy2D") == SyncCall::kBlockingCopy);
  CHECK(ClassifySyncCall("hipMemcpy") == SyncCall::kBlockingCopy);
  CHECK(ClassifySyncCall("cudaMemcpyAsync") == SyncCall::kNone);
  CHECK(ClassifySyncCall("cudaLaunchKernel") == SyncCall::kNone);
  CHECK(ClassifySyncCall("cudaStreamWaitEvent") == SyncCall::kNone);
  CHECK(ClassifySyncCall("aten::copy_") == SyncCall::kNone);
}

// --- rule 5: cross-stream waits --------------------------------------------------------

TEST_CASE("builder links streams through cuda_sync Stream Wait Event records", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("producer", 10, 40, 1, 7),
      Rt("cudaEventRecord", 6, 2, 2),
      Rt("cudaStreamWaitEvent", 9, 2, 3),
      Rt("cudaLaunchKernel", 12, 3, 4),
      Gpu("consumer", 55, 15, 4, 20),
      Event("cuda_sync", "Stream Wait Event", 0, 20, 12, 0,
            "\"cuda_sync_kind\":\"Stream Wait Event\",\"wait_on_stream\":7,"
            "\"wait_on_cuda_event_record_corr_id\":2,\"stream\":20,\"correlation\":3,\"device\":0"),
  });
  const int32_t producer = TaskNamed(g, "producer"), consumer = TaskNamed(g, "consumer");
  CHECK(HasEdge(g, producer, consumer, EdgeKind::kStreamWait));
  CHECK(CountEdges(g, EdgeKind::kStreamWait) == 1);
  CHECK(g.tasks[static_cast<size_t>(producer)].resource != g.tasks[static_cast<size_t>(consumer)].resource);
}

TEST_CASE("builder links streams through cudaEventRecord then cudaStreamWaitEvent", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("producer", 10, 40, 1, 7),
      Rt("cudaEventRecord", 6, 2, 2),
      Rt("cudaStreamWaitEvent", 9, 2, 3),
      Rt("cudaLaunchKernel", 12, 3, 4),
      Gpu("consumer", 55, 15, 4, 20),
  });
  CHECK(HasEdge(g, TaskNamed(g, "producer"), TaskNamed(g, "consumer"), EdgeKind::kStreamWait));
  CHECK(CountEdges(g, EdgeKind::kStreamWait) == 1);
}

TEST_CASE("builder adds no stream wait where the consumer started before the producer ended", "[builder]") {
  const Graph g = Build({
      Rt("cudaLaunchKernel", 0, 5, 1),
      Gpu("producer", 10, 40, 1, 7),
      Rt("cudaEventRecord", 6, 2, 2),
      Rt("cudaStreamWaitEvent", 9, 2, 3),
      Rt("cudaLaunchKernel", 12, 3, 4),
      Gpu("consumer", 20, 15, 4, 20),  // overlaps the producer: it cannot have waited
  });
  CHECK(CountEdges(g, EdgeKind::kStreamWait) == 0);
}

// --- rule 6: cross-thread waits ----------------------------------------------------------

TEST_CASE("builder links a task woken after a long idle gap to the other thread's task that just ended",
          "[builder]") {
  const Graph g = Build({
      Cpu("main_before", 0, 10, "", 1),
      Cpu("worker", 20, 100, "", 2),
      Cpu("main_after", 200, 10, "", 1),
  });
  const int32_t waker = TaskNamed(g, "worker"), woken = TaskNamed(g, "main_after");
  const Edge* e = FindEdge(g, waker, woken, EdgeKind::kThread);
  REQUIRE(e != nullptr);
  CHECK(e->lag_ns == 80 * kUs);
  CHECK(g.tasks[static_cast<size_t>(woken)].gap_ns == 0);
  CHECK(CountEdges(g, EdgeKind::kThread) == 1);
}

TEST_CASE("builder adds no thread edge for short idle gaps, stale wakers or other processes", "[builder]") {
  SECTION("idle gap below min_thread_wait_ns") {
    const Graph g = Build({Cpu("a", 0, 10, "", 1), Cpu("w", 12, 8, "", 2), Cpu("b", 45, 5, "", 1)});
    CHECK(CountEdges(g, EdgeKind::kThread) == 0);
  }
  SECTION("waker ended longer than max_thread_wake_ns before") {
    const Graph g = Build({Cpu("a", 0, 10, "", 1), Cpu("w", 20, 10, "", 2), Cpu("b", 400, 10, "", 1)});
    CHECK(CountEdges(g, EdgeKind::kThread) == 0);
  }
  SECTION("the other thread belongs to another process") {
    const Graph g = Build({Cpu("a", 0, 10, "", 1), Cpu("w", 20, 100, "", 2, /*pid=*/2), Cpu("b", 200, 10, "", 1)});
    CHECK(CountEdges(g, EdgeKind::kThread) == 0);
    CHECK(TaskOf(g, "b").gap_ns == 190 * kUs);
  }
  SECTION("options move the thresholds") {
    BuildOptions options;
    options.min_thread_wait_ns = 20 * kUs;
    const Graph g = Build({Cpu("a", 0, 10, "", 1), Cpu("w", 12, 8, "", 2), Cpu("b", 45, 5, "", 1)}, options);
    CHECK(HasEdge(g, TaskNamed(g, "w"), TaskNamed(g, "b"), EdgeKind::kThread));
  }
}

// --- collectives ---------------------------------------------------------------------------

TEST_CASE("builder makes NCCL kernels collectives in the comm phase with bytes from their args", "[builder]") {
  const Graph g = Build({
      Anno("ProfilerStep#1", 0, 200),
      Rt("cudaLaunchKernel", 1, 4, 1),
      Gpu("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", 10, 40, 1, 20, 0,
          "\"Collective name\":\"allreduce\",\"In msg nelems\":1000,\"Out msg nelems\":1000,\"Group size\":2,"
          "\"dtype\":\"Float\""),
      Rt("cudaLaunchKernel", 6, 3, 2),
      Gpu("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 60, 10, 2, 20, 0,
          "\"In msg nelems\":1000,\"dtype\":\"BFloat16\""),
      Rt("cudaLaunchKernel", 9.5, 0.4, 3),
      Gpu("void at::native::vectorized_elementwise_kernel<4>()", 20, 10, 3, 7),
  });
  const Task& ar = TaskOf(g, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)");
  const Task& ag = TaskOf(g, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
  const Task& ew = TaskOf(g, "void at::native::vectorized_elementwise_kernel<4>()");
  CHECK(ar.kind == TaskKind::kCollective);
  CHECK(ar.phase == Phase::kComm);
  CHECK(ar.bytes == 4000);
  CHECK(ag.kind == TaskKind::kCollective);
  CHECK(ag.phase == Phase::kComm);
  CHECK(ag.bytes == 2000);
  CHECK(ew.kind == TaskKind::kKernel);
  CHECK(ew.phase == Phase::kForward);
  CHECK(ew.bytes == -1);
}

TEST_CASE("IsCollectiveKernelName recognizes NCCL, RCCL and symmetric-memory kernels", "[builder]") {
  CHECK(IsCollectiveKernelName("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"));
  CHECK(IsCollectiveKernelName("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(IsCollectiveKernelName("void ncclKernel_AllGather_RING_LL(ncclWorkElem)"));
  CHECK(IsCollectiveKernelName("void c10d::symmetric_memory::multimem_all_reduce_kernel<float>()"));
  CHECK(IsCollectiveKernelName("rccl_main_kernel"));
  CHECK_FALSE(IsCollectiveKernelName("void at::native::vectorized_elementwise_kernel<4>()"));
  CHECK_FALSE(IsCollectiveKernelName("sm80_xmma_gemm_f16f16_f16f32"));
}

// --- rule 7: phases and layers ---------------------------------------------------------------

TEST_CASE("builder assigns phases from enclosing ranges and GPU work inherits its launch's phase", "[builder]") {
  const Graph g = Build({
      R"j({"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"pt_autograd_0"}})j",
      Anno("ProfilerStep#1", 0, 1000),
      Anno("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 10, 40),
      Cpu("aten::stack", 20, 20),
      Cpu("aten::linear", 60, 40),
      Rt("cudaLaunchKernel", 70, 10, 1),
      Gpu("fwd_kernel", 85, 35, 1),
      Cpu("autograd::engine::evaluate_function: AddmmBackward0", 300, 100),
      Cpu("AddmmBackward0", 310, 80),
      Rt("cudaLaunchKernel", 320, 10, 2),
      Gpu("bwd_kernel", 335, 25, 2),
      Anno("Optimizer.step#SGD.step", 500, 100),
      Cpu("aten::add_", 510, 30),
      Rt("cudaLaunchKernel", 515, 5, 3),
      Gpu("opt_kernel", 540, 10, 3),
      Cpu("aten::zero_", 700, 10),
      Cpu("aten::mul", 990, 5, "", /*tid=*/2),
  });
  CHECK(TaskOf(g, "aten::stack").phase == Phase::kData);
  CHECK(TaskOf(g, "aten::stack").kind == TaskKind::kDataLoad);
  auto launch_of = [&](const std::string& kernel) -> const Task& {
    for (const Edge& e : g.edges) {
      if (e.kind == EdgeKind::kLaunch && e.to == TaskNamed(g, kernel)) return g.tasks[static_cast<size_t>(e.from)];
    }
    FAIL("no launch of " << kernel);
    return g.tasks[0];
  };
  CHECK(launch_of("fwd_kernel").phase == Phase::kForward);  // unnamed, before the backward pass
  CHECK(TaskOf(g, "fwd_kernel").phase == Phase::kForward);
  CHECK(launch_of("bwd_kernel").phase == Phase::kBackward);
  CHECK(TaskOf(g, "bwd_kernel").phase == Phase::kBackward);
  CHECK(launch_of("opt_kernel").phase == Phase::kOptimizer);
  CHECK(TaskOf(g, "opt_kernel").phase == Phase::kOptimizer);
  CHECK(TaskOf(g, "aten::zero_").phase == Phase::kOther);  // unnamed, after the backward pass
  CHECK(TaskOf(g, "aten::mul").phase == Phase::kBackward);  // on the autograd thread
  for (const Task& t : g.tasks) CHECK(t.phase != Phase::kUnspecified);
}

TEST_CASE("builder keeps work inside communication ranges in the comm phase", "[builder]") {
  const Graph g = Build({
      Anno("ProfilerStep#1", 0, 100),
      Cpu("c10d::allreduce_", 10, 50),
      Cpu("aten::empty_like_backward_helper", 20, 10),  // a name that says backward, inside comm
      Cpu("record_param_comms", 70, 10),
  });
  CHECK(TaskOf(g, "aten::empty_like_backward_helper").phase == Phase::kComm);
  CHECK(TaskOf(g, "record_param_comms").phase == Phase::kComm);
}

TEST_CASE("builder maps nn.Module ranges to layers and backward ops to their forward layer", "[builder]") {
  const Graph g = Build({
      Py("nn.Module: Net_0", 0, 500),
      Py("nn.Module: Linear_0", 10, 200),
      Cpu("aten::linear", 20, 170, "\"Sequence number\":7"),
      Cpu("aten::addmm", 30, 70),
      Rt("cudaLaunchKernel", 40, 10, 1),
      Gpu("gemm", 60, 20, 1),
      Py("nn.Module: ReLU_0", 250, 100),
      Cpu("aten::relu", 260, 80, "\"Sequence number\":8"),
      Cpu("autograd::engine::evaluate_function: AddmmBackward0", 600, 100),
      Cpu("AddmmBackward0", 610, 80, "\"Sequence number\":7"),
      Cpu("aten::mm", 620, 60),
      Cpu("autograd::engine::evaluate_function: ReluBackward0", 750, 50),
      Cpu("ReluBackward0", 760, 30, "\"Sequence number\":8"),
      Cpu("aten::unrelated", 900, 10),
  });
  REQUIRE(g.layers.size() == 3);
  auto layer_named = [&](const std::string& name) {
    for (size_t i = 0; i < g.layers.size(); ++i) {
      if (g.Str(g.layers[i].name) == name) return static_cast<int32_t>(i);
    }
    FAIL("no layer " << name);
    return -1;
  };
  const int32_t net = layer_named("Net_0"), linear = layer_named("Linear_0"), relu = layer_named("ReLU_0");
  CHECK(g.layers[static_cast<size_t>(net)].parent == -1);
  CHECK(g.layers[static_cast<size_t>(linear)].parent == net);
  CHECK(g.layers[static_cast<size_t>(relu)].parent == net);
  CHECK(TaskOf(g, "cudaLaunchKernel").layer == linear);
  CHECK(TaskOf(g, "gemm").layer == linear);  // GPU work: its launch's layer
  CHECK(TaskOf(g, "aten::relu").layer == relu);
  CHECK(TaskOf(g, "aten::mm").layer == linear);  // backward, through Sequence number 7
  CHECK(TaskOf(g, "ReluBackward0").layer == relu);
  CHECK(TaskOf(g, "aten::unrelated").layer == -1);
  CHECK(TaskOf(g, "aten::mm").phase == Phase::kBackward);
}

// --- rule 8: iterations -----------------------------------------------------------------------

TEST_CASE("builder takes iterations from ProfilerStep#N ranges", "[builder]") {
  const Graph g = Build({
      Cpu("pre", 100, 50),
      Anno("ProfilerStep#1", 1000, 1000),
      Anno("ProfilerStep#2", 2000, 1000),
      Cpu("a", 1100, 100),
      Rt("cudaLaunchKernel", 1900, 50, 1),
      Gpu("late_kernel", 2100, 100, 1),
      Cpu("b", 2050, 450),
      Cpu("c", 2600, 300),
      Cpu("post", 3500, 100),
  });
  REQUIRE(g.iterations.size() == 2);
  const Iteration& i0 = g.iterations[0];
  const Iteration& i1 = g.iterations[1];
  CHECK(g.Str(i0.name) == "ProfilerStep#1");
  CHECK(g.Str(i1.name) == "ProfilerStep#2");
  CHECK(i0.measured_ns == 1000 * kUs);
  CHECK(i0.recorded_begin_ns == 1000 * kUs);
  CHECK(i0.begin_task == TaskNamed(g, "a"));
  CHECK(i0.end_task == TaskNamed(g, "cudaLaunchKernel"));
  CHECK(i0.begin_offset_ns == 100 * kUs);
  CHECK(i0.end_offset_ns == 50 * kUs);
  CHECK(i1.begin_task == TaskNamed(g, "b"));
  CHECK(i1.end_task == TaskNamed(g, "c"));
  CHECK(i1.begin_offset_ns == 50 * kUs);
  CHECK(i1.end_offset_ns == 100 * kUs);
  CHECK(TaskOf(g, "pre").iteration == -1);
  CHECK(TaskOf(g, "a").iteration == 0);
  CHECK(TaskOf(g, "cudaLaunchKernel").iteration == 0);
  CHECK(TaskOf(g, "late_kernel").iteration == 0);  // runs in step 2, launched in step 1
  CHECK(TaskOf(g, "b").iteration == 1);
  CHECK(TaskOf(g, "c").iteration == 1);
  CHECK(TaskOf(g, "post").iteration == -1);
}

TEST_CASE("builder skips a ProfilerStep that holds no task on its thread and warns", "[builder]") {
  const Graph g = Build({
      Cpu("a", 0, 10),
      Anno("ProfilerStep#1", 20, 100),
      Anno("ProfilerStep#2", 200, 100),
      Cpu("b", 210, 10),
  });
  REQUIRE(g.iterations.size() == 1);
  CHECK(g.Str(g.iterations[0].name) == "ProfilerStep#2");
  const WarningCount* w = FindWarning(g, "empty_iteration");
  REQUIRE(w != nullptr);
  CHECK_THAT(w->example, Catch::Contains("ProfilerStep#1"));
}

TEST_CASE("builder leaves a task between two ProfilerStep windows outside both", "[builder]") {
  // "Each task belongs to the iteration whose window holds its start": the
  // builder looks only at window begins, so a task after step 1 ended and
  // before step 2 began is counted in step 1.
  const Graph g = Build({
      Anno("ProfilerStep#1", 1000, 1000),
      Cpu("a", 1100, 100),
      Cpu("between", 2200, 100),
      Anno("ProfilerStep#2", 2500, 1000),
      Cpu("b", 2600, 100),
  });
  REQUIRE(g.iterations.size() == 2);
  CHECK(TaskOf(g, "a").iteration == 0);
  CHECK(TaskOf(g, "b").iteration == 1);
  CHECK(TaskOf(g, "between").iteration == -1);
}

TEST_CASE("builder reads ProfilerStep#N recorded as cpu_op in older traces", "[builder]") {
  const Graph g = Build({
      Cpu("ProfilerStep#7", 0, 100),
      Cpu("aten::add", 10, 20),
  });
  REQUIRE(g.iterations.size() == 1);
  CHECK(g.Str(g.iterations[0].name) == "ProfilerStep#7");
  CHECK(g.iterations[0].measured_ns == 100 * kUs);
  CHECK(TaskNames(g) == std::set<std::string>{"aten::add"});
}

TEST_CASE("builder takes iterations from Optimizer.step ends when there is no ProfilerStep", "[builder]") {
  const Graph g = Build({
      Cpu("x", 0, 10),
      Anno("Optimizer.step#Adam.step", 20, 30),
      Cpu("aten::add_", 25, 20),
      Cpu("y", 60, 10),
      Anno("Optimizer.step#Adam.step", 80, 20),
      Cpu("aten::mul_", 85, 10),
      Cpu("z", 120, 5),
  });
  REQUIRE(g.iterations.size() == 2);
  const Iteration& i0 = g.iterations[0];
  const Iteration& i1 = g.iterations[1];
  CHECK_THAT(std::string(g.Str(i0.name)), Catch::Contains("Optimizer.step#Adam.step"));
  CHECK(i0.measured_ns == 50 * kUs);
  CHECK(i0.begin_task == TaskNamed(g, "x"));
  CHECK(i0.end_task == TaskNamed(g, "aten::add_"));
  CHECK(i1.measured_ns == 50 * kUs);
  CHECK(i1.recorded_begin_ns == 50 * kUs);
  CHECK(i1.begin_task == TaskNamed(g, "y"));
  CHECK(i1.end_task == TaskNamed(g, "aten::mul_"));
  CHECK(i1.begin_offset_ns == 10 * kUs);
  CHECK(i1.end_offset_ns == 5 * kUs);
  CHECK(TaskOf(g, "z").iteration == -1);
}

TEST_CASE("builder makes no iterations without ProfilerStep or Optimizer.step", "[builder]") {
  const Graph g = Build({Cpu("a", 0, 10), Cpu("b", 20, 10)});
  CHECK(g.iterations.empty());
  for (const Task& t : g.tasks) CHECK(t.iteration == -1);
  CHECK(g.origin_ns == 0);
  CHECK(g.recorded_end_ns == 30 * kUs);
}

// --- device, graph-level fields ----------------------------------------------------------------

TEST_CASE("builder copies the properties of the device that ran the most GPU work", "[builder]") {
  const std::string devices =
      R"j("deviceProperties":[{"id":0,"name":"NVIDIA A100-PG509-200","totalGlobalMem":42297524224,)j"
      R"j("computeMajor":8,"computeMinor":0,"numSms":108},)j"
      R"j({"id":1,"name":"Tesla V100-SXM2-32GB","totalGlobalMem":34089730048,"computeMajor":7,"computeMinor":0,"numSms":80}],)j"
      R"j("distributedInfo":{"rank":1,"world_size":4,"backend":"nccl"})j";
  const Graph g = Build({Gpu("a", 0, 10, -1, 7, 1), Gpu("b", 20, 10, -1, 7, 1), Gpu("c", 0, 10, -1, 7, 0)}, {},
                        devices);
  CHECK(g.device.name == "Tesla V100-SXM2-32GB");
  CHECK(g.device.compute_major == 7);
  CHECK(g.device.compute_minor == 0);
  CHECK(g.device.total_memory_bytes == 34089730048);
  CHECK(g.device.num_sms == 80);
  CHECK(g.rank == 1);
  CHECK(g.world_size == 4);
  CHECK(g.source == "test.json");
}

TEST_CASE("builder refuses a trace with nothing to build a graph from", "[builder]") {
  const Trace trace = ParseOrDie(KinetoDoc(Join({Anno("ProfilerStep#1", 0, 10), Py("f", 1, 2)})));
  auto graph = BuildGraph(trace);
  REQUIRE_FALSE(graph.ok());
  CHECK(std::string(graph.status().message()) ==
        "test.json: no CPU operators, runtime calls or GPU activities to build a graph from");
}

TEST_CASE("builder carries the trace's warnings into the graph", "[builder]") {
  const Graph g = Build({Cpu("a", 0, 10), R"j({"ph":"B","name":"begin","pid":1,"tid":1,"ts":1})j"});
  CHECK(FindWarning(g, "unsupported_phase_B") != nullptr);
}

TEST_CASE("builder clips CPU events that overlap and warns", "[builder]") {
  const Graph g = Build({Cpu("a", 0, 10), Cpu("b", 5, 10, "", 1)});
  // b starts inside a and ends after it: it is clipped to a's end.
  CHECK(FindWarning(g, "overlapping_cpu_events") != nullptr);
  for (const Task& t : g.tasks) CHECK(t.duration_ns >= 0);
}

// --- exact latencies: the bookkeeping invariant ---------------------------------------------------

TEST_CASE("exact latencies replay every iteration of every real trace to within a microsecond",
          "[builder][real]") {
  BuildOptions options;
  options.exact_latencies = true;
  int64_t checked = 0;
  for (const char* folder : {"hta-v100-1rank", "hta-a100-2rank-nccl", "hta-a100-alexnet", "hta-sampled-128rank",
                             "param-dlrm-v100-8rank", "astra-megatron-tp8-a100", "tracelens-nvidia"}) {
    for (const std::string& file : TraceFiles(folder)) {
      INFO(file);
      auto trace = ReadTraceFile(file);
      REQUIRE(trace.ok());
      auto graph = BuildGraph(*trace, options);
      REQUIRE(graph.ok());
      auto report = Replay(*graph);
      REQUIRE(report.ok());
      for (const IterationReplay& it : report->iterations) {
        INFO(it.name << ": measured " << it.measured_ns << " ns, replayed " << it.replayed_ns << " ns");
        CHECK(std::llabs(it.replayed_ns - it.measured_ns) <= 1000);
        ++checked;
      }
    }
  }
  CHECK(checked >= 30);
}

TEST_CASE("builder makes a launch whose kernel started inside the call start-to-start", "[builder]") {
  // The kernel starts at 26 us, 2 us before cudaLaunchKernel returns at 28 us
  // (a full launch queue; integer-microsecond clocks): an end-to-start edge
  // could not hold, so the launch is start-to-start.
  const Graph g = Build({
      Rt("cudaLaunchKernel", 10, 18, 1),
      Gpu("k", 26, 34, 1),
  });
  const int32_t call = TaskNamed(g, "cudaLaunchKernel"), k = TaskNamed(g, "k");
  CHECK(HasEdge(g, call, k, EdgeKind::kBlockingLaunch));
  CHECK_FALSE(HasEdge(g, call, k, EdgeKind::kLaunch));
  // A kernel is not a copy the call waited for: no sync edge, still a runtime call.
  CHECK_FALSE(HasEdge(g, k, call, EdgeKind::kSync));
  CHECK(g.tasks[static_cast<size_t>(call)].kind == TaskKind::kRuntime);
}

TEST_CASE("exact latencies reproduce a kernel that starts before its launch call returns", "[builder]") {
  // This case made the sampled 128-rank traces replay 2-5 us long.
  BuildOptions options;
  options.exact_latencies = true;
  const Graph g = Build(
      {
          Anno("ProfilerStep#1", 0, 100),
          Cpu("aten::add", 1, 5),
          Rt("cudaLaunchKernel", 10, 18, 1),
          Gpu("k", 26, 34, 1),
          Rt("cudaDeviceSynchronize", 30, 32, 2),
          Cpu("aten::item", 70, 5),
      },
      options);
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  const int32_t k = TaskNamed(g, "k");
  CHECK(schedule->start_ns[static_cast<size_t>(k)] == g.tasks[static_cast<size_t>(k)].recorded_start_ns - g.origin_ns);
  const ReplayReport report = MakeReplayReport(g, *schedule);
  REQUIRE(report.iterations.size() == 1);
  CHECK(report.iterations[0].replayed_ns == report.iterations[0].measured_ns);
}

TEST_CASE("exact latencies reproduce a hand-made trace with launches, syncs, copies and threads exactly",
          "[builder]") {
  BuildOptions options;
  options.exact_latencies = true;
  const Graph g = Build(
      {
          Anno("ProfilerStep#1", 0, 400),
          Cpu("aten::add", 2, 5),
          Rt("cudaLaunchKernel", 10, 5, 1),
          Gpu("k1", 22, 40, 1, 7),
          Rt("cudaLaunchKernel", 16, 4, 2),
          Gpu("k2", 63, 20, 2, 7),
          Rt("cudaMemcpy", 30, 70, 3),
          Gpu("Memcpy DtoH (Device -> Pageable)", 85, 10, 3, 7, 0, "", "gpu_memcpy"),
          Cpu("worker_op", 110, 60, "", 2),
          Cpu("aten::mul", 230, 10),
          Rt("cudaLaunchKernel", 245, 5, 4),
          Gpu("k3", 258, 30, 4, 8),
          Rt("cudaDeviceSynchronize", 255, 40, 5),
          Cpu("aten::item", 300, 20),
      },
      options);
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    INFO("task " << t << " " << g.TaskName(static_cast<int32_t>(t)));
    CHECK(schedule->start_ns[t] == g.tasks[t].recorded_start_ns - g.origin_ns);
  }
  const ReplayReport report = MakeReplayReport(g, *schedule);
  REQUIRE(report.iterations.size() == 1);
  CHECK(report.iterations[0].replayed_ns == report.iterations[0].measured_ns);
}

// --- real traces --------------------------------------------------------------------------------

TEST_CASE("builder output on every real trace passes Validate and links launches", "[builder][real]") {
  for (const char* folder : {"hta-v100-1rank", "hta-a100-2rank-nccl", "hta-a100-alexnet", "hta-sampled-128rank",
                             "param-dlrm-v100-8rank", "astra-megatron-tp8-a100", "tracelens-nvidia"}) {
    for (const std::string& file : TraceFiles(folder)) {
      INFO(file);
      auto trace = ReadTraceFile(file);
      REQUIRE(trace.ok());
      auto graph = BuildGraph(*trace);
      REQUIRE(graph.ok());
      CHECK(graph->Validate().ok());
      CHECK(graph->has_adjacency());
      CHECK(CountEdges(*graph, EdgeKind::kLaunch) > 0);
      CHECK(graph->recorded_end_ns > graph->origin_ns);
      for (const Task& t : graph->tasks) {
        REQUIRE(t.phase != Phase::kUnspecified);
        REQUIRE(t.kind != TaskKind::kUnspecified);
      }
    }
  }
}

TEST_CASE("builder finds the collectives of the 2-rank NCCL trace", "[builder][real]") {
  auto trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  int64_t collectives = 0;
  for (const Task& t : graph->tasks) {
    if (t.kind != TaskKind::kCollective) continue;
    ++collectives;
    CHECK(t.phase == Phase::kComm);
    CHECK(t.bytes > 0);
  }
  CHECK(collectives > 0);
  CHECK(graph->iterations.size() == 3);
  CHECK_THAT(graph->device.name, Catch::Contains("A100"));
  CHECK(graph->rank == 0);
  CHECK(graph->world_size == 2);
}

TEST_CASE("builder links cuLaunchKernel driver calls in the Megatron trace", "[builder][real]") {
  auto trace = ReadTraceFile(SharedTracePath("astra-megatron-tp8-a100/megatron_kineto_0.json.gz"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  int64_t driver_launches = 0, nccl_dev = 0;
  for (const Edge& e : graph->edges) {
    if (e.kind == EdgeKind::kLaunch && graph->TaskName(e.from) == "cuLaunchKernel") ++driver_launches;
  }
  for (size_t i = 0; i < graph->tasks.size(); ++i) {
    if (graph->TaskName(static_cast<int32_t>(i)).rfind("ncclDevKernel", 0) == 0) {
      ++nccl_dev;
      CHECK(graph->tasks[i].kind == TaskKind::kCollective);
    }
  }
  CHECK(driver_launches > 0);
  CHECK(nccl_dev > 0);
}

// --- rule 5b: launch-queue back-pressure -------------------------------------------------------

namespace {

// `n` kernels of 100 us back to back on one stream, each launched by a 4 us
// cudaLaunchKernel. With `block`, the host runs ahead until 64 launches are
// pending; from then on each call waits until the kernel 64 launches back
// starts (a full queue), as a GPU-bound training step does.
std::vector<std::string> QueueTrace(int n, bool block) {
  std::vector<std::string> events;
  double t = 0;
  for (int j = 0; j < n; ++j) {
    const double kernel_start = 1000 + 100.0 * j;
    double dur = 4;
    if (block && j >= 64) {
      const double freed = 1000 + 100.0 * (j - 64) + 1;  // just after kernel j-64 started
      dur = std::max(4.0, freed - t);
    }
    events.push_back(Rt("cudaLaunchKernel", t, dur, 100 + j));
    events.push_back(Gpu("k" + std::to_string(j), kernel_start, 100, 100 + j));
    t += dur + (block ? 1 : 20);
  }
  return events;
}

}  // namespace

TEST_CASE("builder links a full launch queue: the call waits for the start of the kernel a queue-depth back",
          "[builder][launch_queue]") {
  const Graph g = Build(QueueTrace(80, true));
  const WarningCount* w = FindWarning(g, "launch_queue_full");
  REQUIRE(w != nullptr);
  CHECK_THAT(w->example, Catch::Contains("launch queue was full (64 launches pending)"));
  // Launch j >= 64 waits for kernel j - 64 to start.
  CHECK(CountEdges(g, EdgeKind::kLaunchQueue) == 16);
  const int32_t call = [&] {
    for (const Edge& e : g.edges) {
      if (e.kind == EdgeKind::kLaunch && e.to == TaskNamed(g, "k70")) return e.from;
    }
    return -1;
  }();
  REQUIRE(call >= 0);
  CHECK(HasEdge(g, TaskNamed(g, "k6"), call, EdgeKind::kLaunchQueue));
  // The wait is not CPU work: the blocked call costs what a free one does.
  CHECK(g.tasks[static_cast<size_t>(call)].duration_ns == 4 * kUs);
  // Replayed, the host is held by the device again, and the kernels keep
  // their recorded spacing.
  auto schedule = Simulate(g);
  REQUIRE(schedule.ok());
  const auto k = static_cast<size_t>(TaskNamed(g, "k6"));
  CHECK(schedule->end_ns[static_cast<size_t>(call)] >= schedule->start_ns[k]);
  CHECK(schedule->binding_kind[static_cast<size_t>(call)] == BindingKind::kEndEdge);
  CHECK(g.edges[static_cast<size_t>(schedule->binding_edge[static_cast<size_t>(call)])].kind ==
        EdgeKind::kLaunchQueue);
}

TEST_CASE("builder keeps a deep default queue where the host never waited for the device",
          "[builder][launch_queue]") {
  const Graph g = Build(QueueTrace(80, false));
  CHECK(FindWarning(g, "launch_queue_full") == nullptr);
  CHECK(CountEdges(g, EdgeKind::kLaunchQueue) == 0);  // 80 launches < the default depth 1024
  BuildOptions shallow;
  shallow.default_launch_queue_depth = 8;
  const Graph s = Build(QueueTrace(80, false), shallow);
  CHECK(FindWarning(s, "launch_queue_full") == nullptr);
  // Up to 70 launches were seen pending (launch 79 at 1896 us, 9 kernels
  // started): the queue holds at least 71, so launches 71..79 get an edge
  // that never binds a call that did not wait.
  CHECK(CountEdges(s, EdgeKind::kLaunchQueue) == 9);
  for (const Edge& e : s.edges) {
    if (e.kind != EdgeKind::kLaunchQueue) continue;
    CHECK(s.tasks[static_cast<size_t>(e.to)].duration_ns == 4 * kUs);  // unblocked calls keep their cost
  }
}

TEST_CASE("a launch-queue edge holds its head's end, not its start", "[builder][launch_queue]") {
  CHECK(FromTailStart(EdgeKind::kLaunchQueue));
  CHECK(ToHeadEnd(EdgeKind::kLaunchQueue));
  CHECK_FALSE(IsStartToStart(EdgeKind::kLaunchQueue));
}

TEST_CASE("BuildGraph refuses a trace whose times are too far apart to simulate, naming the file",
          "[builder][errors]") {
  // Each ts is within the reader's range; together they span ~2^63 ns, and
  // the idle gap before k2 on their stream is what gets refused first.
  const Trace trace = ParseOrDie(KinetoDoc(Join({Gpu("k1", -4.5e15, 1, 1), Gpu("k2", 4.5e15, 1, 2)})));
  auto graph = BuildGraph(trace);
  REQUIRE_FALSE(graph.ok());
  CHECK(absl::IsInvalidArgument(graph.status()));
  CHECK(std::string(graph.status().message()) ==
        trace.path + ": task 1 (k2): times this large cannot be simulated (the limit is "
                     "4611686018427387904 ns, about 146 years)");
}

TEST_CASE("BuildGraph saturates claimed message sizes and refuses them, naming the file", "[builder][errors]") {
  // 4e18 doubles: the byte count overflows int64; it saturates and the graph
  // refuses it instead of wrapping to a negative size.
  const std::string args = "\"In msg nelems\":4000000000000000000,\"dtype\":\"Double\",\"Group size\":2";
  const Trace trace = ParseOrDie(KinetoDoc(Join({Rt("cudaLaunchKernel", 1, 1, 9),
                                                 Gpu("ncclDevKernel_AllReduce_Sum_f64_RING_LL", 2, 3, 9, 7, 0, args)})));
  auto graph = BuildGraph(trace);
  REQUIRE_FALSE(graph.ok());
  CHECK(absl::IsInvalidArgument(graph.status()));
  CHECK_THAT(std::string(graph.status().message()),
             Catch::StartsWith(trace.path + ": task ") &&
                 Catch::EndsWith("sizes this large cannot be simulated (the limit is 4611686018427387904 bytes)"));
}

TEST_CASE("BuildGraph sizes a gradient without shapes from its elementwise kernel's element type",
          "[builder]") {
  // grid x block x 4 elements of the type the kernel's name gives: float
  // (4 bytes) unless it names a half or bfloat16 (2) or double (8) type. A
  // kernel that is not elementwise gives no size.
  const std::string grid = "\"grid\":[3,1,1],\"block\":[128,1,1]";
  struct Case {
    std::string kernel;
    int64_t bytes;
  };
  const Case cases[] = {
      {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float>>()", 3 * 128 * 4 * 4},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::Half>>()", 3 * 128 * 4 * 2},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16>>()",
       3 * 128 * 4 * 2},
      {"void at::native::unrolled_elementwise_kernel<at::native::AddFunctor<double>>()", 3 * 128 * 4 * 8},
      {"void at::native::reduce_kernel<512, 1>()", -1},
  };
  for (const Case& c : cases) {
    INFO(c.kernel);
    // Two AccumulateGrad ops, so that the second launches the same kernel
    // name again (its traits are worked out once, then looked up).
    const Trace trace = ParseOrDie(KinetoDoc(Join({
        Anno("ProfilerStep#1", 0, 100),
        Cpu("torch::autograd::AccumulateGrad", 10, 20),
        Rt("cudaLaunchKernel", 12, 2, 5),
        Gpu(c.kernel, 20, 10, 5, 7, 0, grid),
        Cpu("torch::autograd::AccumulateGrad", 40, 20),
        Rt("cudaLaunchKernel", 42, 2, 6),
        Gpu(c.kernel, 50, 10, 6, 7, 0, grid),
    })));
    auto graph = BuildGraph(trace);
    REQUIRE(graph.ok());
    REQUIRE(graph->tensors.size() == 2);
    for (const Tensor& t : graph->tensors) CHECK(t.bytes == c.bytes);
  }
}

TEST_CASE("BuildGraph saturates a gradient size inferred from a kernel's claimed grid and refuses it",
          "[builder][errors]") {
  // A gradient without recorded shapes takes its size from the elementwise
  // kernel its AccumulateGrad launched: grid x block x 4 elements. The
  // largest grid (2^40) and block (2^31 - 1) the reader keeps overflow int64
  // in that product; it saturates and the graph refuses the size.
  const std::string grid = "\"grid\":[2147483648,512,1],\"block\":[2147483648,1,1]";
  const Trace trace = ParseOrDie(KinetoDoc(Join({
      Anno("ProfilerStep#1", 0, 100),
      Cpu("torch::autograd::AccumulateGrad", 10, 20),
      Rt("cudaLaunchKernel", 12, 2, 5),
      Gpu("void at::native::vectorized_elementwise_kernel<4>()", 20, 10, 5, 7, 0, grid),
  })));
  auto graph = BuildGraph(trace);
  REQUIRE_FALSE(graph.ok());
  CHECK_THAT(std::string(graph.status().message()),
             Catch::StartsWith(trace.path + ": tensor ") &&
                 Catch::EndsWith("sizes this large cannot be simulated (the limit is 4611686018427387904 bytes)"));
}
