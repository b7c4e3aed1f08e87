#include "test_support.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/passes/editor.h"
#include "daydream/sim/replay.h"
#include "daydream/trace/kineto_reader.h"

namespace daydream::testing {

std::string TestDataPath(const std::string& name) { return std::string(DAYDREAM_TEST_DATA_DIR) + "/" + name; }

std::string SharedTracePath(const std::string& relative) {
  const char* env = std::getenv("DAYDREAM_SHARED_TRACES");
  const std::string root = env != nullptr ? env : DAYDREAM_SHARED_TRACES_DIR;
  const std::string path = root + "/" + relative;
  INFO("shared trace " << path << " (set DAYDREAM_SHARED_TRACES to its folder)");
  REQUIRE(std::filesystem::exists(path));
  return path;
}

namespace {
struct TempRoot {
  std::filesystem::path path;
  TempRoot() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "daydream_test_XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

std::string TempDir() {
  static TempRoot root;
  static int counter = 0;
  const std::filesystem::path dir = root.path / std::to_string(counter++);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string KinetoDoc(const std::string& events, const std::string& extra_top_level) {
  std::string doc = "{";
  if (!extra_top_level.empty()) doc += extra_top_level + ",";
  doc += "\"traceEvents\":[" + events + "]}";
  return doc;
}

Trace ParseOrDie(const std::string& json) {
  auto trace = ParseTraceText(json, "test.json");
  INFO((trace.ok() ? std::string("ok") : std::string(trace.status().message())));
  REQUIRE(trace.ok());
  return std::move(trace).value();
}

int32_t TaskNamed(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.tasks.size(); ++i) {
    if (graph.TaskName(static_cast<int32_t>(i)) == name) return static_cast<int32_t>(i);
  }
  INFO("no task named " << name);
  REQUIRE(false);
  return -1;
}

bool HasEdge(const Graph& graph, int32_t from, int32_t to, EdgeKind kind) {
  for (const Edge& e : graph.edges) {
    if (e.from == from && e.to == to && e.kind == kind) return true;
  }
  return false;
}

long ResidentKiB() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  const int read = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  REQUIRE(read == 2);
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

void WriteFile(const std::string& path, const std::string& data, bool gzip) {
  if (!gzip) {
    std::ofstream out(path, std::ios::binary);
    out << data;
    REQUIRE(out.good());
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Schedule Sim(const Graph& graph) {
  absl::StatusOr<Schedule> s = Simulate(graph);
  INFO((s.ok() ? std::string() : std::string(s.status().message())));
  REQUIRE(s.ok());
  return std::move(s).value();
}

TimeNs MedianStep(const Graph& graph) {
  absl::StatusOr<ReplayReport> r = Replay(graph);
  INFO((r.ok() ? std::string("ok") : std::string(r.status().message())));
  REQUIRE(r.ok());
  std::vector<TimeNs> steps;
  for (const IterationReplay& it : r->iterations) steps.push_back(it.step_replayed_ns);
  REQUIRE(!steps.empty());
  std::sort(steps.begin(), steps.end());
  const size_t m = steps.size() / 2;
  return steps.size() % 2 == 1 ? steps[m] : (steps[m - 1] + steps[m]) / 2;
}

std::string AllNotes(const PassContext& context) {
  std::string out;
  for (const std::string& n : context.notes) out += n + "\n";
  return out;
}

absl::StatusOr<bool> RunPass(const PassInfo& info, Graph& g, PassContext& context, const OptionMap& options) {
  absl::StatusOr<PassOptions> parsed = PassOptions::Parse(info.name, info.options, options);
  REQUIRE(parsed.ok());
  absl::StatusOr<std::unique_ptr<Pass>> pass = info.create(*parsed);
  REQUIRE(pass.ok());
  return (*pass)->Run(g, context);
}

void RequireResourceChains(const Graph& g) {
  const absl::Status chains = g.ValidateResourceChains();
  INFO(chains.message());
  REQUIRE(chains.ok());
}

PassTestGraph::PassTestGraph(int num_streams) : PassTestGraph(1, 1, num_streams) { BeginIteration("ProfilerStep#1"); }

PassTestGraph::PassTestGraph(int num_threads, int64_t first_tid, int num_streams) {
  for (int t = 0; t < num_threads; ++t) {
    const int64_t tid = first_tid + t;
    threads.push_back(
        g.AddResource(Resource{ResourceKind::kCpuThread, 1, tid, g.strings.Intern("thread " + std::to_string(tid))}));
  }
  for (int s = 0; s < num_streams; ++s) {
    streams.push_back(g.AddResource(
        Resource{ResourceKind::kGpuStream, 0, 7 + s, g.strings.Intern("stream " + std::to_string(7 + s))}));
  }
  if (!threads.empty()) thread = threads[0];
}

void PassTestGraph::BeginIteration(std::string name) {
  iteration = static_cast<int32_t>(g.iterations.size());
  if (name.empty()) name = "ProfilerStep#" + std::to_string(iteration);
  g.iterations.push_back(Iteration{g.strings.Intern(name)});
}

int32_t PassTestGraph::Add(int32_t resource, TaskKind kind, const std::string& name, TimeNs duration, Phase phase,
                           TimeNs gap) {
  Task t;
  t.kind = kind;
  t.name = g.strings.Intern(name);
  t.resource = resource;
  t.duration_ns = duration;
  t.gap_ns = gap;
  t.phase = phase;
  t.iteration = iteration;
  if (record_trace_order) t.recorded_start_ns = static_cast<TimeNs>(g.tasks.size()) * 1000;
  const int32_t id = g.AddTask(t);
  last.resize(g.resources.size(), -1);
  int32_t& previous = last[static_cast<size_t>(resource)];
  if (previous >= 0) g.AddEdge(previous, id, EdgeKind::kSequential);
  previous = id;
  if (iteration >= 0) {
    Iteration& it = g.iterations[static_cast<size_t>(iteration)];
    if (it.begin_task < 0) it.begin_task = id;
    if (resource == thread) it.end_task = id;
  }
  return id;
}

int32_t PassTestGraph::CpuOp(const std::string& name, TimeNs duration, Phase phase, TimeNs gap) {
  return Add(thread, TaskKind::kCpuOp, name, duration, phase, gap);
}

int32_t PassTestGraph::Launch(TaskKind kind, const std::string& name, TimeNs duration, Phase phase, int stream,
                              int thread_index) {
  const int32_t call = Add(threads.at(static_cast<size_t>(thread_index)), TaskKind::kRuntime, "cudaLaunchKernel",
                           launch_timing.call_ns, phase, launch_timing.gap_ns);
  const int32_t gpu = Add(streams.at(static_cast<size_t>(stream)), kind, name, duration, phase, 0);
  g.AddEdge(call, gpu, EdgeKind::kLaunch, launch_timing.lag_ns);
  return gpu;
}

void PassTestGraph::Finish() {
  const absl::Status valid = g.Validate();
  INFO(valid.message());
  REQUIRE(valid.ok());
  g.BuildAdjacency();
}

const Graph& BundledV100() {
  static const Graph* graph = [] {
    absl::StatusOr<Trace> trace =
        ReadTraceFile(TestDataPath("../../examples/traces/resnet-v100-ddp1-rank0.pt.trace.json.gz"));
    REQUIRE(trace.ok());
    absl::StatusOr<Graph> g = BuildGraph(*trace);
    REQUIRE(g.ok());
    return new Graph(std::move(g).value());
  }();
  return *graph;
}

}  // namespace daydream::testing
