// Benchmarks of daydream's core pipeline on one real (or generated) trace:
//
//   file --gunzip--> JSON --parse--> Trace --build--> Graph --simulate--> Schedule
//                                                    Graph <--serialize/deserialize--> bytes
//
// The trace comes from $DAYDREAM_BENCH_TRACE, else from the largest shared
// trace, relative to the current directory (run from the repository root):
//   ../shared/traces/tracelens-nvidia/h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz
// $DAYDREAM_BENCH_JOB (optional) names a directory of per-rank files for
// BM_LoadJob (benchmarks/make_big_trace.py --ranks K writes one): read one
// file at a time (threads:1) and as LoadJob does by default (threads:0).
// $DAYDREAM_BENCH_WINDOW and $DAYDREAM_BENCH_PAIR_WINDOW (bytes, optional)
// set ReadOptions::window_bytes and parallel_window_bytes for
// BM_ParseTraceJson and BM_ParseTraceJsonOneCore, to compare sizes.
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
//
// BM_OnDemandWalkFloor is not a stage of daydream: it is simdjson On-Demand's
// walk over the same events, reading their fields' raw text, once the floor
// under the parse; the reader now reads plain events from stage 1's index
// itself (ReadOptions::walk_index) and leaves On-Demand the others, so it
// is kept to compare with earlier figures.
//
// BM_PredictLoop is a what-if search: 100 variants, each a copy of the graph,
// the scale pass (gpu factor 0.50 ... 0.99) through a Pipeline, and a
// simulation. BM_PredictSearch is the same search through Predict, as
// daydream.predict_many runs it on one thread: each variant also reported
// on, all sharing the baseline's replay and one PredictScratch.
//
// `daydream_bench --check TRACE...` runs no benchmark: for each trace it prints
// one line of digests (FNV-1a) of everything the stages produce: the Trace;
// the serialized Graph; its warnings (kinds and counts) and, apart, their
// first examples; the Schedule and ReplayReport; three predict-loop variants;
// one Predict. Where a stage fails, the line ends with its error.
// Optimizations must leave these lines unchanged (benchmarks/check_outputs.sh
// compares them with a saved reference).
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <simdjson.h>

#include "daydream/analysis/predict.h"
#include "daydream/base/file_io.h"
#include "daydream/graph/builder.h"
#include "daydream/graph/graph.h"
#include "daydream/graph/serialization.h"
#include "daydream/passes/pass.h"
#include "daydream/passes/pipeline.h"
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
// `one_core`: windows parsed one at a time on this thread, as
// BM_ParseTraceJsonOneCore parses text in memory (a plain file's text is
// copied by read() in the kernel instead of by memcpy).
void ReadTraceFileWith(benchmark::State& state, bool one_core) {
  const std::string& path = In().path;
  size_t json_bytes = 0;
  int64_t records = 0;
  daydream::ReadOptions options;
  options.parallel_windows = !one_core;
  for (auto _ : state) {
    auto trace = daydream::ReadTraceFile(path, options);
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

void BM_ReadTraceFile(benchmark::State& state) { ReadTraceFileWith(state, /*one_core=*/false); }
void BM_ReadTraceFileOneCore(benchmark::State& state) { ReadTraceFileWith(state, /*one_core=*/true); }

// File on disk -> Trace -> Graph in one iteration, the file's windows read
// one at a time: issue 6's per-core target as one figure. Its CPU time
// counts every thread (the build's cycle check runs on a second one), and
// Google Benchmark divides rates by that time, so events/s is records per
// second of CPU: per core.
void BM_ReadAndBuildOneCore(benchmark::State& state) {
  daydream::ReadOptions options;
  options.parallel_windows = false;
  int64_t records = 0;
  for (auto _ : state) {
    auto trace = daydream::ReadTraceFile(In().path, options);
    if (!trace.ok()) {
      state.SkipWithError(std::string(trace.status().message()).c_str());
      return;
    }
    records = Records(*trace);
    auto graph = daydream::BuildGraph(*trace);
    if (!graph.ok()) {
      state.SkipWithError(std::string(graph.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(graph->tasks.data());
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(records), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = benchmark::Counter(static_cast<double>(records));
  SetRssCounter(state);
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
// `one_core`: windows parsed one at a time on this thread, so that the rate
// is per core (the default parses two windows at once, on two threads).
// With `stats`, the windows are counted too (their number, the longest).
// indexed_events: the events read from simdjson's structural index rather
// than through On-Demand (ReadOptions::walk_index).
void ParseTraceJsonWith(benchmark::State& state, const std::string& json, bool one_core,
                        daydream::ReadStats* stats = nullptr) {
  daydream::ReadStats counted;
  const bool report_windows = stats != nullptr;
  if (stats == nullptr) stats = &counted;
  daydream::ReadOptions options;
  options.parallel_windows = !one_core;
  options.stats = stats;
  if (const char* w = std::getenv("DAYDREAM_BENCH_WINDOW")) options.window_bytes = std::strtoull(w, nullptr, 10);
  if (const char* p = std::getenv("DAYDREAM_BENCH_PAIR_WINDOW")) {
    options.parallel_window_bytes = std::strtoull(p, nullptr, 10);
  }
  int64_t records = 0;
  for (auto _ : state) {
    *stats = {};
    auto trace = daydream::ParseTraceJson(json, In().path, options);
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
  state.counters["indexed_events"] = benchmark::Counter(static_cast<double>(stats->indexed_events));
  if (report_windows) {
    state.counters["windows"] = benchmark::Counter(static_cast<double>(stats->windows));
    state.counters["largest_window_KB"] =
        benchmark::Counter(static_cast<double>(stats->largest_window_bytes) / 1024);
  }
  SetRssCounter(state);
}

void BM_ParseTraceJson(benchmark::State& state) { ParseTraceJsonWith(state, Json(), /*one_core=*/false); }
void BM_ParseTraceJsonOneCore(benchmark::State& state) { ParseTraceJsonWith(state, Json(), /*one_core=*/true); }

// BM_ParseTraceJsonOneCore on the same JSON with its line breaks removed, as
// json.dump without indent writes a trace: the reader cuts its windows
// between a '}' and a '{' outside every string instead of at line breaks.
// (Its peak RSS holds that copy of the JSON.)
void BM_ParseTraceJsonOneLine(benchmark::State& state) {
  std::string json = Json();
  json.erase(std::remove(json.begin(), json.end(), '\n'), json.end());
  daydream::ReadStats stats;
  ParseTraceJsonWith(state, json, /*one_core=*/true, &stats);
}

// What was the floor under BM_ParseTraceJsonOneCore while the reader read
// every event through On-Demand (before ReadOptions::walk_index): On-Demand's
// walk over every event of the same JSON, on one core, reading the
// raw tokens of the seven top-level fields daydream reads (ph, name, cat,
// ts, dur, pid, tid) and of every scalar in args, and skipping the rest
// (args' arrays, other fields). No number is converted, no string interned,
// no event stored. The parser is reused, but over the whole document its
// structural index (4 bytes a byte of JSON) does not stay in the cache, as
// the reader's does window by window.
void BM_OnDemandWalkFloor(benchmark::State& state) {
  const std::string& json = Json();
  const simdjson::padded_string_view view(json.data(), json.size(), json.size() + daydream::JsonPadding());
  simdjson::ondemand::parser parser;
  int64_t events = 0;
  size_t token_bytes = 0;
  for (auto _ : state) {
    events = 0;
    simdjson::ondemand::document doc;
    if (parser.iterate(view).get(doc) != simdjson::SUCCESS) {
      state.SkipWithError("simdjson could not start on the JSON");
      return;
    }
    simdjson::ondemand::object top;
    if (doc.get_object().get(top) != simdjson::SUCCESS) {
      state.SkipWithError("the JSON is not an object");
      return;
    }
    for (auto member : top) {
      std::string_view key;
      if (member.unescaped_key().get(key) != simdjson::SUCCESS) break;
      if (key != "traceEvents") continue;
      for (auto item : member.value().get_array()) {
        simdjson::ondemand::object event;
        if (item.get_object().get(event) != simdjson::SUCCESS) continue;
        ++events;
        for (auto field : event) {
          const simdjson::ondemand::raw_json_string k = field.key();
          if (k == "ph" || k == "name" || k == "cat" || k == "ts" || k == "dur" || k == "pid" || k == "tid") {
            std::string_view token;
            if (field.value().raw_json_token().get(token) == simdjson::SUCCESS) token_bytes += token.size();
          } else if (k == "args") {
            simdjson::ondemand::object args;
            if (field.value().get_object().get(args) != simdjson::SUCCESS) continue;
            for (auto arg : args) {
              simdjson::ondemand::json_type type;
              if (arg.value().type().get(type) != simdjson::SUCCESS) break;
              std::string_view token;
              if (type != simdjson::ondemand::json_type::array && type != simdjson::ondemand::json_type::object &&
                  arg.value().raw_json_token().get(token) == simdjson::SUCCESS) {
                token_bytes += token.size();
              }
            }
          }
        }
      }
    }
    benchmark::DoNotOptimize(token_bytes);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["events"] = benchmark::Counter(static_cast<double>(events));
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

// One what-if variant: a copy of `baseline`, scaled by `gpu_factor` on GPU
// kernels, simulated.
absl::StatusOr<daydream::Schedule> ScaledVariant(const daydream::Graph& baseline, double gpu_factor,
                                                 daydream::Graph* variant) {
  auto pass = daydream::CreatePass("scale", {{"gpu", std::to_string(gpu_factor)}});
  if (!pass.ok()) return pass.status();
  daydream::Pipeline pipeline;
  pipeline.AddPass(*std::move(pass));
  *variant = baseline;
  daydream::PassContext context;
  if (auto changed = pipeline.Run(*variant, context); !changed.ok()) return changed.status();
  return daydream::Simulate(*variant);
}

constexpr int kPredictVariants = 100;

// A search loop: kPredictVariants x (copy graph + scale pass + simulate).
void BM_PredictLoop(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  for (auto _ : state) {
    for (int i = 0; i < kPredictVariants; ++i) {
      daydream::Graph variant;
      auto schedule = ScaledVariant(graph, 0.5 + 0.005 * i, &variant);
      if (!schedule.ok()) {
        state.SkipWithError(std::string(schedule.status().message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(schedule->makespan_ns);
    }
  }
  state.counters["variants/s"] = benchmark::Counter(static_cast<double>(kPredictVariants),
                                                    benchmark::Counter::kIsIterationInvariantRate);
  SetTaskCounters(state, graph);
}

// The search as daydream.predict_many runs it on each thread: kPredictVariants
// predictions (pass, replay, reports, breakdowns) sharing the baseline's
// replay and one scratch.
void BM_PredictSearch(benchmark::State& state) {
  const daydream::Graph& graph = GetGraph();
  auto replayed = daydream::ReplayGraph(graph);
  if (!replayed.ok()) {
    state.SkipWithError(std::string(replayed.status().message()).c_str());
    return;
  }
  daydream::PredictScratch scratch;
  for (auto _ : state) {
    for (int i = 0; i < kPredictVariants; ++i) {
      auto p = daydream::Predict(graph, {{"scale", {{"gpu", std::to_string(0.5 + 0.005 * i)}}}}, *replayed, &scratch);
      if (!p.ok()) {
        state.SkipWithError(std::string(p.status().message()).c_str());
        return;
      }
      benchmark::DoNotOptimize(p->predicted_ns);
      scratch.Recycle(*p);
    }
  }
  state.counters["variants/s"] = benchmark::Counter(static_cast<double>(kPredictVariants),
                                                    benchmark::Counter::kIsIterationInvariantRate);
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

// Directory of per-rank files -> Job ($DAYDREAM_BENCH_JOB only), reading
// state.range(0) files at a time (0: LoadJob's default, one per usable CPU).
void BM_LoadJob(benchmark::State& state) {
  const char* dir = std::getenv("DAYDREAM_BENCH_JOB");
  const auto threads = static_cast<int>(state.range(0));
  int64_t records = 0, ranks = 0;
  for (auto _ : state) {
    auto job = daydream::LoadJob(dir, {}, threads);
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
  state.counters["threads"] = benchmark::Counter(threads > 0 ? threads : daydream::DefaultJobThreads());
  SetRssCounter(state);
}

void Register() {
  using benchmark::kMillisecond;
  benchmark::RegisterBenchmark("BM_ReadTraceFile", BM_ReadTraceFile)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_ReadTraceFileOneCore", BM_ReadTraceFileOneCore)
      ->Unit(kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Gunzip", BM_Gunzip)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_ParseTraceJson", BM_ParseTraceJson)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_ParseTraceJsonOneCore", BM_ParseTraceJsonOneCore)
      ->Unit(kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_OnDemandWalkFloor", BM_OnDemandWalkFloor)->Unit(kMillisecond)->UseRealTime();
  // Its CPU column counts every thread's time (the cycle check runs on a second one): a build's cost per core.
  benchmark::RegisterBenchmark("BM_BuildGraph", BM_BuildGraph)
      ->Unit(kMillisecond)
      ->UseRealTime()
      ->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_ReadAndBuildOneCore", BM_ReadAndBuildOneCore)
      ->Unit(kMillisecond)
      ->UseRealTime()
      ->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_Simulate", BM_Simulate)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_Replay", BM_Replay)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PredictLoop", BM_PredictLoop)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PredictSearch", BM_PredictSearch)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_SerializeGraph", BM_SerializeGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_DeserializeGraph", BM_DeserializeGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_SaveGraph", BM_SaveGraph)->Unit(kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_LoadGraph", BM_LoadGraph)->Unit(kMillisecond)->UseRealTime();
  // Last: its copy of the JSON would count in the peak RSS of those after it.
  benchmark::RegisterBenchmark("BM_ParseTraceJsonOneLine", BM_ParseTraceJsonOneLine)
      ->Unit(kMillisecond)
      ->UseRealTime();
  const char* job = std::getenv("DAYDREAM_BENCH_JOB");
  if (job != nullptr && *job != '\0') {
    if (!IsDirectory(job) && !IsRegularFile(job)) {
      Die(std::string("DAYDREAM_BENCH_JOB=") + job + " is neither a directory nor a file");
    }
    benchmark::RegisterBenchmark("BM_LoadJob", BM_LoadJob)
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(0)
        ->Unit(kMillisecond)
        ->UseRealTime();
  }
}

// --- --check: digests of every stage's output ---------------------------------

class Digest {
 public:
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 1099511628211ULL;
  }
  void Str(std::string_view s) {
    Int(static_cast<int64_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  void Int(int64_t v) { Bytes(&v, sizeof(v)); }
  void Real(double v) { Bytes(&v, sizeof(v)); }
  template <typename T>
  void Ints(const std::vector<T>& v) {
    Int(static_cast<int64_t>(v.size()));
    for (const T& x : v) Int(static_cast<int64_t>(x));
  }
  std::string Hex() const {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  uint64_t h_ = 1469598103934665603ULL;
};

// Kinds and counts; the first example of each kind when `examples`.
void DigestWarnings(Digest& d, const daydream::Warnings& w, bool examples) {
  for (const daydream::WarningCount& c : w.items()) {
    d.Str(c.kind);
    d.Int(c.count);
    if (examples) d.Str(c.example);
  }
}

std::string TraceDigest(const daydream::Trace& t) {
  Digest d;
  d.Str(t.path);
  d.Str(t.trace_name);
  d.Int(t.schema_version);
  d.Int(t.base_time_ns);
  d.Int(t.rank);
  d.Int(t.world_size);
  d.Str(t.backend);
  d.Int(t.rank_from_file_name);
  for (const daydream::DeviceProperties& p : t.devices) {
    d.Int(p.id);
    d.Str(p.name);
    d.Int(p.total_global_mem);
    d.Int(p.compute_major);
    d.Int(p.compute_minor);
    d.Int(p.num_sms);
  }
  for (const daydream::TraceTrack& k : t.tracks) {
    for (int64_t v : {k.pid, k.tid, int64_t{k.pid_is_text}, int64_t{k.tid_is_text}, int64_t{k.pid_text},
                      int64_t{k.tid_text}, int64_t{k.process_name}, int64_t{k.process_label},
                      int64_t{k.thread_name}, k.sort_index, int64_t{k.gpu}, k.num_events}) {
      d.Int(v);
    }
  }
  // Each event's fields, its detail's among them (in the order they had
  // when they were one record, so that digests from before still compare).
  for (const daydream::TraceEvent& e : t.events) {
    const daydream::TraceEventDetail& x = t.Detail(e);
    for (int64_t v : {e.ts_ns, e.dur_ns, e.correlation, e.external_id, x.sequence_number, x.stream, x.bytes,
                      x.in_msg_nelems, x.wait_on_stream, x.wait_on_event_record_correlation, int64_t{e.name},
                      int64_t{e.input_dims}, int64_t{e.input_types}, int64_t{x.dtype}, int64_t{x.sync_kind},
                      int64_t{e.track}, int64_t{x.device}, x.grid_blocks,
                      int64_t{x.block_threads}, static_cast<int64_t>(e.kind), int64_t{e.instant}}) {
      d.Int(v);
    }
  }
  for (const daydream::TraceFlow& f : t.flows) {
    for (int64_t v : {f.id, f.ts_ns, int64_t{f.category}, int64_t{f.track}, int64_t{f.phase}}) d.Int(v);
  }
  for (size_t i = 0; i < t.strings.size(); ++i) d.Str(t.strings.Get(static_cast<daydream::StringId>(i)));
  DigestWarnings(d, t.warnings, true);
  return d.Hex();
}

void DigestSchedule(Digest& d, const daydream::Schedule& s) {
  d.Ints(s.start_ns);
  d.Ints(s.end_ns);
  d.Ints(s.binding_task);
  d.Ints(s.binding_kind);
  d.Ints(s.binding_edge);
  d.Ints(s.busy_ns);
  d.Int(s.makespan_ns);
  d.Int(s.last_task);
}

void DigestShares(Digest& d, const std::vector<daydream::TimeShare>& shares) {
  for (const daydream::TimeShare& s : shares) {
    d.Str(s.name);
    d.Int(s.time_ns);
  }
}

void DigestReport(Digest& d, const daydream::ReplayReport& r) {
  for (const daydream::IterationReplay& it : r.iterations) {
    d.Str(it.name);
    for (int64_t v : {it.measured_ns, it.replayed_ns, it.begin_ns, it.end_ns, it.gpu_measured_ns, it.gpu_replayed_ns,
                      it.device_period_measured_ns, it.device_period_replayed_ns, it.launch_wait_replayed_ns,
                      it.step_measured_ns, it.step_replayed_ns}) {
      d.Int(v);
    }
    d.Real(it.error_pct);
  }
  d.Int(r.whole_trace);
  d.Real(r.median_error_pct);
  d.Real(r.mean_error_pct);
  d.Int(r.makespan_ns);
  d.Int(r.gpu_start_error_p50_ns);
  d.Int(r.gpu_start_error_p95_ns);
  const daydream::CriticalPathSummary& c = r.critical_path;
  d.Int(c.length_ns);
  d.Int(c.num_tasks);
  for (const auto* shares : {&c.by_kind, &c.by_phase, &c.by_resource, &c.top_tasks}) DigestShares(d, *shares);
}

// One line for `path`: "<path> trace=... graph=... replay=... variants=... predict=..."
// (each an FNV-1a digest), or the first error.
std::string CheckLine(const std::string& path) {
  std::string line = path;
  auto fail = [&](const char* stage, const absl::Status& s) {
    return line + " " + stage + "_error=" + std::string(s.message());
  };
  auto trace = daydream::ReadTraceFile(path);
  if (!trace.ok()) return fail("read", trace.status());
  line += " records=" + std::to_string(Records(*trace)) + " trace=" + TraceDigest(*trace);
  auto graph = daydream::BuildGraph(*trace);
  if (!graph.ok()) return fail("build", graph.status());
  auto bytes = daydream::SerializeGraph(*graph);
  if (!bytes.ok()) return fail("serialize", bytes.status());
  Digest g, w, x;
  g.Str(*bytes);
  DigestWarnings(w, graph->warnings, false);
  DigestWarnings(x, graph->warnings, true);
  line += " tasks=" + std::to_string(graph->tasks.size()) + " edges=" + std::to_string(graph->edges.size()) +
          " graph=" + g.Hex() + " warnings=" + w.Hex() + " warning_examples=" + x.Hex();
  auto schedule = daydream::Simulate(*graph);
  if (!schedule.ok()) return fail("simulate", schedule.status());
  auto report = daydream::Replay(*graph);
  if (!report.ok()) return fail("replay", report.status());
  Digest r;
  DigestSchedule(r, *schedule);
  DigestReport(r, *report);
  line += " makespan_ns=" + std::to_string(report->makespan_ns) + " replay=" + r.Hex();
  Digest v;
  for (double f : {0.5, 0.75, 1.5}) {
    daydream::Graph variant;
    auto s = ScaledVariant(*graph, f, &variant);
    if (!s.ok()) return fail("variant", s.status());
    auto vb = daydream::SerializeGraph(variant);
    if (!vb.ok()) return fail("variant", vb.status());
    v.Str(*vb);
    DigestSchedule(v, *s);
  }
  line += " variants=" + v.Hex();
  auto p = daydream::Predict(*graph, {{"scale", {{"gpu", "0.5"}, {"cpu", "0.8"}}}});
  if (!p.ok()) return fail("predict", p.status());
  Digest pd;
  for (const std::string& n : p->notes) pd.Str(n);
  for (int64_t x : {p->measured_ns, p->replayed_ns, p->predicted_ns}) pd.Int(x);
  pd.Real(p->speedup);
  for (const daydream::IterationPrediction& it : p->iterations) {
    pd.Str(it.name);
    for (int64_t x : {it.measured_ns, it.replayed_ns, it.predicted_ns}) pd.Int(x);
  }
  for (const auto* b : {&p->before, &p->after}) {
    DigestShares(pd, b->by_phase);
    DigestShares(pd, b->by_resource);
  }
  DigestReport(pd, p->baseline->report);
  DigestReport(pd, p->predicted->report);
  DigestSchedule(pd, p->predicted->schedule);
  line += " predict=" + pd.Hex();
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--check") {
    for (int i = 2; i < argc; ++i) std::printf("%s\n", CheckLine(argv[i]).c_str());
    return 0;
  }
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
