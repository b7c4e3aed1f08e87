// Benchmarks of daydream's core pipeline on one real (or generated) trace:
//
//   file --gunzip--> JSON --parse--> Trace --build--> Graph --simulate--> Schedule
//                                                    Graph <--serialize/deserialize--> bytes
//
// The trace comes from $DAYDREAM_BENCH_TRACE, else from the largest shared
// trace, relative to the current directory (run from the repository root):
//   ../shared/traces/tracelens-nvidia/h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz
// $DAYDREAM_BENCH_JOB (optional) names a directory of per-rank files for
// BM_LoadJob (benchmarks/make_big_trace.py --ranks K writes one).
//
// Inputs are prepared lazily, on first use, so that running one benchmark
// (--benchmark_filter=...) in a fresh process holds only what that stage
// needs; the peak_rss_MB counter (getrusage ru_maxrss: the process's peak
// since it started) then says what the stage costs in memory.
//
// Rates: bytes_per_second counts the decompressed JSON (read/parse), the
// serialized graph (serialize/deserialize/save/load); events/s counts the
// trace records the reader keeps (complete + instant events + flow endpoints);
// tasks/s counts graph tasks.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include "daydream/base/file_io.h"
#include "daydream/graph/builder.h"
#include "daydream/graph/graph.h"
#include "daydream/graph/serialization.h"
#include "daydream/sim/replay.h"
#include "daydream/sim/simulator.h"
#include "daydream/trace/file_source.h"
#include "daydream/trace/job.h"
#include "daydream/trace/kineto_reader.h"
#include "daydream/trace/trace.h"

namespace {

constexpr const char* kDefaultTrace =
    "../shared/traces/tracelens-nvidia/h100-hf-inference/"
    "google_owlv2-large-patch14-ensemble__1016001.json.gz";

std::string TracePath() {
  const char* env = std::getenv("DAYDREAM_BENCH_TRACE");
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(kDefaultTrace);
}

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "daydream_bench: %s\n", what.c_str());
  std::exit(2);
}

double PeakRssMiB() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// --- lazily prepared inputs --------------------------------------------------

struct Inputs {
  std::string path;
  std::string file_bytes;   // the file as stored (gzip or plain)
  bool have_file = false;
  std::string json;         // decompressed, with JsonPadding() spare capacity
  bool have_json = false;
  std::unique_ptr<daydream::Trace> trace;
  std::unique_ptr<daydream::Graph> graph;
  std::string graph_bytes;  // SerializeGraph(graph)
  bool have_graph_bytes = false;
};

Inputs& In() {
  static Inputs inputs;
  return inputs;
}

const std::string& FileBytes() {
  Inputs& in = In();
  if (!in.have_file) {
    auto bytes = daydream::ReadFile(in.path);
    if (!bytes.ok()) Die(std::string(bytes.status().message()));
    in.file_bytes = *std::move(bytes);
    in.have_file = true;
  }
  return in.file_bytes;
}

const std::string& Json() {
  Inputs& in = In();
  if (!in.have_json) {
    auto bytes = daydream::ReadTraceBytes(in.path, daydream::JsonPadding());
    if (!bytes.ok()) Die(std::string(bytes.status().message()));
    in.json = *std::move(bytes);
    in.have_json = true;
  }
  return in.json;
}

const daydream::Trace& GetTrace() {
  Inputs& in = In();
  if (!in.trace) {
    auto trace = daydream::ReadTraceFile(in.path);
    if (!trace.ok()) Die(std::string(trace.status().message()));
    in.trace = std::make_unique<daydream::Trace>(*std::move(trace));
  }
  return *in.trace;
}

const daydream::Graph& GetGraph() {
  Inputs& in = In();
  if (!in.graph) {
    auto graph = daydream::BuildGraph(GetTrace());
    if (!graph.ok()) Die(std::string(graph.status().message()));
    in.graph = std::make_unique<daydream::Graph>(*std::move(graph));
  }
  return *in.graph;
}

const std::string& GraphBytes() {
  Inputs& in = In();
  if (!in.have_graph_bytes) {
    auto bytes = daydream::SerializeGraph(GetGraph());
    if (!bytes.ok()) Die(std::string(bytes.status().message()));
    in.graph_bytes = *std::move(bytes);
    in.have_graph_bytes = true;
  }
  return in.graph_bytes;
}

int64_t Records(const daydream::Trace& t) {
  return static_cast<int64_t>(t.events.size() + t.flows.size());
}

void SetRssCounter(benchmark::State& state) {
  state.counters["peak_rss_MB"] = benchmark::Counter(PeakRssMiB());
}

void SetTaskCounters(benchmark::State& state, const daydream::Graph& g) {
  state.counters["tasks/s"] = benchmark::Counter(static_cast<double>(g.tasks.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tasks"] = benchmark::Counter(static_cast<double>(g.tasks.size()));
  state.counters["edges"] = benchmark::Counter(static_cast<double>(g.edges.size()));
  SetRssCounter(state);
}

// --- benchmarks ---------------------------------------------------------------

// File on disk -> Trace: read, gunzip (when gzip), parse. What users pay.
void BM_ReadTraceFile(benchmark::State& state) {
  const std::string& path = In().path;
  size_t json_bytes = 0;
  int64_t records = 0;
  for (auto _ : state) {
    auto trace = daydream::ReadTraceFile(path);
    if (!trace.ok()) {
      state.SkipWithError(std::string(trace.status().message()).c_str());
      return;
    }
    records = Records(*trace);
    benchmark::DoNotOptimize(trace->events.data());
  }
  SetRssCounter(state);  // before the size probe below allocates
  // Size of the JSON text (decompressed), measured once, after the loop, so
  // that the loop's peak RSS does not include it.
  static size_t json_size = 0;
  if (json_size == 0) {
    auto bytes = daydream::ReadTraceBytes(path, daydream::JsonPadding());
    if (bytes.ok()) json_size = bytes->size();
  }
  json_bytes = json_size;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json_bytes));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = benchmark::Counter(static_cast<double>(records));
  state.counters["json_MB"] = benchmark::Counter(static_cast<double>(json_bytes) / 1e6);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    state.counters["file_MB"] = benchmark::Counter(static_cast<double>(st.st_size) / 1e6);
  }
}

// Compressed bytes in memory -> JSON text (zlib inflate only).
void BM_Gunzip(benchmark::State& state) {
  const std::string& file = FileBytes();
  if (file.size() < 2 || static_cast<unsigned char>(file[0]) != 0x1f ||
      static_cast<unsigned char>(file[1]) != 0x8b) {
    state.SkipWithError("the trace is not gzip-compressed");
    return;
  }
  size_t out_bytes = 0;
  for (auto _ : state) {
    auto json = daydream::GunzipBuffer(file, In().path, daydream::JsonPadding());
    if (!json.ok()) {
      state.SkipWithError(std::string(json.status().message()).c_str());
      return;
    }
    out_bytes = json->size();
    benchmark::DoNotOptimize(json->data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(out_bytes));
  state.counters["gz_MB"] = benchmark::Counter(static_cast<double>(file.size()) / 1e6);
  SetRssCounter(state);
}

// JSON text in memory -> Trace (simdjson On-Demand + interning + records).
void BM_ParseTraceJson(benchmark::State& state) {
  const std::string& json = Json();
  int64_t records = 0;
  for (auto _ : state) {
    auto trace = daydream::ParseTraceJson(json, In().path);
    if (!trace.ok()) {
      state.SkipWithError(std::string(trace.status().message()).c_str());
      return;
    }
    records = Records(*trace);
    benchmark::DoNotOptimize(trace->events.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = benchmark::Counter(static_cast<double>(records));
  state.counters["json_MB"] = benchmark::Counter(static_cast<double>(json.size()) / 1e6);
  SetRssCounter(state);
}

// Trace -> Graph (all dependency rules, adjacency, validation).
void BM_BuildGraph(benchmark::State& state) {
  const daydream::Trace& trace = GetTrace();
  size_t tasks = 0, edges = 0;
  for (auto _ : state) {
    auto graph = daydream::BuildGraph(trace);
    if (!graph.ok()) {
      state.SkipWithError(std::string(graph.status().message()).c_str());
      return;
    }
    tasks = graph->tasks.size();
    edges = graph->edges.size();
    benchmark::DoNotOptimize(graph->tasks.data());
  }
  state.counters["tasks/s"] =
      benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(Records(trace)),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tasks"] = benchmark::Counter(static_cast<double>(tasks));
  state.counters["edges"] = benchmark::Counter(static_cast<double>(edges));
  SetRssCounter(state);
}

// Graph -> Schedule (the event simulator).
void BM_Simulate(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  for (auto _ : state) {
    auto schedule = daydream::Simulate(graph);
    if (!schedule.ok()) {
      state.SkipWithError(std::string(schedule.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(schedule->makespan_ns);
  }
  SetTaskCounters(state, graph);
}

// Graph -> ReplayReport (simulate + per-iteration report + critical path).
void BM_Replay(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  for (auto _ : state) {
    auto report = daydream::Replay(graph);
    if (!report.ok()) {
      state.SkipWithError(std::string(report.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(report->makespan_ns);
  }
  SetTaskCounters(state, graph);
}

void SetGraphBytesCounters(benchmark::State& state, const daydream::Graph& graph, size_t bytes) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["graph_MB"] = benchmark::Counter(static_cast<double>(bytes) / 1e6);
  SetTaskCounters(state, graph);
}

// Graph -> protobuf bytes.
void BM_SerializeGraph(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = daydream::SerializeGraph(graph);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    bytes = out->size();
    benchmark::DoNotOptimize(out->data());
  }
  SetGraphBytesCounters(state, graph, bytes);
}

// protobuf bytes -> Graph (decode, validate, adjacency).
void BM_DeserializeGraph(benchmark::State& state) {
  const std::string& bytes = GraphBytes();
  const daydream::Graph& graph = GetGraph();
  for (auto _ : state) {
    auto g = daydream::DeserializeGraph(bytes);
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(g->tasks.data());
  }
  SetGraphBytesCounters(state, graph, bytes.size());
}

std::string GraphFilePath() {
  const char* dir = std::getenv("TMPDIR");
  const std::string base = (dir != nullptr && *dir != '\0') ? dir : "/tmp";
  return base + "/daydream_bench_" + std::to_string(::getpid()) + ".graph.pb";
}

// Graph -> file (serialize + atomic write + fsync/rename as SaveGraph does it).
void BM_SaveGraph(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  const std::string path = GraphFilePath();
  for (auto _ : state) {
    absl::Status s = daydream::SaveGraph(graph, path);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  struct stat st {};
  const size_t bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
  ::unlink(path.c_str());
  SetGraphBytesCounters(state, graph, bytes);
}

// File -> Graph.
void BM_LoadGraph(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  const std::string path = GraphFilePath();
  if (absl::Status s = daydream::SaveGraph(graph, path); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  struct stat st {};
  const size_t bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
  for (auto _ : state) {
    auto g = daydream::LoadGraph(path);
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(g->tasks.data());
  }
  ::unlink(path.c_str());
  SetGraphBytesCounters(state, graph, bytes);
}

// Directory of per-rank files -> Job ($DAYDREAM_BENCH_JOB only).
void BM_LoadJob(benchmark::State& state) {
  const char* dir = std::getenv("DAYDREAM_BENCH_JOB");
  int64_t records = 0, ranks = 0;
  for (auto _ : state) {
    auto job = daydream::LoadJob(dir);
    if (!job.ok()) {
      state.SkipWithError(std::string(job.status().message()).c_str());
      return;
    }
    records = 0;
    for (const daydream::Trace& t : job->ranks) records += Records(t);
    ranks = static_cast<int64_t>(job->ranks.size());
    benchmark::DoNotOptimize(job->ranks.data());
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["ranks"] = benchmark::Counter(static_cast<double>(ranks));
  SetRssCounter(state);
}

void Register() {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("BM_ReadTraceFile", BM_ReadTraceFile)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_Gunzip", BM_Gunzip)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_ParseTraceJson", BM_ParseTraceJson)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_BuildGraph", BM_BuildGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_Simulate", BM_Simulate)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_Replay", BM_Replay)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_SerializeGraph", BM_SerializeGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_DeserializeGraph", BM_DeserializeGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_SaveGraph", BM_SaveGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_LoadGraph", BM_LoadGraph)->Unit(kMillisecond)->UseRealTime();
  const char* job = std::getenv("DAYDREAM_BENCH_JOB");
  if (job != nullptr && *job != '\0') {
    if (!IsDirectory(job) && !IsRegularFile(job)) {
      Die(std::string("DAYDREAM_BENCH_JOB=") + job + " is neither a directory nor a file");
    }
    benchmark::RegisterBenchmark("BM_LoadJob", BM_LoadJob)->Unit(kMillisecond)->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  In().path = TracePath();
  if (!IsRegularFile(In().path)) {
    char cwd[4096] = "?";
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) cwd[0] = '?';
    Die("trace file not found: '" + In().path + "' (current directory: " + cwd +
        "). Set DAYDREAM_BENCH_TRACE to a Kineto trace (.json or .json.gz), or run from the "
        "repository root so that the default ../shared/traces/... resolves.");
  }
  Register();
  benchmark::AddCustomContext("daydream_trace", In().path);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
