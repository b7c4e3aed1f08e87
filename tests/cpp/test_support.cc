#include "test_support.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
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
