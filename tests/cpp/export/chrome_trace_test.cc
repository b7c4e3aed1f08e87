// Tests for daydream/export/chrome_trace.h: the timeline JSON must load back
// (through our own reader), keep exact times, and be written atomically.
#include "daydream/export/chrome_trace.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/base/file_io.h"
#include "daydream/graph/builder.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::KinetoDoc;
using daydream::testing::ParseOrDie;
using daydream::testing::SharedTracePath;
using daydream::testing::TempDir;

namespace {

// A small built graph: two threads, launches on two streams, a sync.
Graph SmallBuiltGraph() {
  const std::string events =
      R"j({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":1000,"dur":300},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1001,"dur":5},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1010,"dur":5,"args":{"correlation":1}},)j"
      R"j({"ph":"X","cat":"kernel","name":"void gemm<\"q\">(float*)","pid":0,"tid":7,"ts":1020,"dur":40,"args":{"device":0,"stream":7,"correlation":1}},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaMemcpyAsync","pid":1,"tid":1,"ts":1016,"dur":5,"args":{"correlation":2}},)j"
      R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoH (Device -> Pinned)","pid":0,"tid":8,"ts":1030,"dur":4,"args":{"device":0,"stream":8,"correlation":2,"bytes":64}},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize","pid":1,"tid":1,"ts":1022,"dur":45,"args":{"correlation":3}},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"aten::mul","pid":1,"tid":2,"ts":1100,"dur":20},)j"
      R"j({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"pt_main_thread"}})j";
  const Trace trace = ParseOrDie(KinetoDoc(events));
  auto graph = BuildGraph(trace);
  REQUIRE(graph.ok());
  return std::move(graph).value();
}

Schedule Sim(const Graph& g) {
  auto s = Simulate(g);
  REQUIRE(s.ok());
  return std::move(s).value();
}

int64_t LaunchEdges(const Graph& g) {
  return std::count_if(g.edges.begin(), g.edges.end(), [](const Edge& e) { return IsLaunch(e.kind); });
}

std::vector<const TraceEvent*> CompleteEvents(const Trace& t) {
  std::vector<const TraceEvent*> out;
  for (const TraceEvent& e : t.events) {
    if (!e.instant) out.push_back(&e);
  }
  return out;
}

}  // namespace

TEST_CASE("timeline loads back with one complete event per task, named as in the graph", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  TimelineWriter writer;
  writer.Add(g, s, "replay");
  const Trace back = ParseOrDie(writer.ToJson());
  const std::vector<const TraceEvent*> events = CompleteEvents(back);
  REQUIRE(events.size() == g.tasks.size());
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    INFO("task " << t);
    CHECK(back.Str(events[t]->name) == g.TaskName(static_cast<int32_t>(t)));
    CHECK(events[t]->ts_ns == g.origin_ns + s.start_ns[t]);
    CHECK(events[t]->dur_ns == s.end_ns[t] - s.start_ns[t]);
  }
  // GPU tasks are exported as kernels / copies again.
  const int32_t gemm = daydream::testing::TaskNamed(g, "void gemm<\"q\">(float*)");
  CHECK(events[static_cast<size_t>(gemm)]->kind == EventKind::kKernel);
}

TEST_CASE("timeline names every resource's thread and every process", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  TimelineWriter writer;
  writer.Add(g, s, "replay");
  const Trace back = ParseOrDie(writer.ToJson());
  std::set<std::string> thread_names, process_names;
  for (const TraceTrack& t : back.tracks) {
    if (t.num_events == 0) continue;
    thread_names.insert(std::string(back.Str(t.thread_name)));
    process_names.insert(std::string(back.Str(t.process_name)));
  }
  std::set<std::string> resource_names;
  for (const Resource& r : g.resources) resource_names.insert(std::string(g.Str(r.name)));
  CHECK(thread_names == resource_names);
  CHECK(thread_names.count("pt_main_thread") == 1);
  CHECK(process_names == std::set<std::string>{"replay: CPU (pid 1)", "replay: GPU 0"});
}

TEST_CASE("timeline draws a flow arrow for every launch edge", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  REQUIRE(LaunchEdges(g) == 2);
  TimelineWriter writer;
  writer.Add(g, s, "replay");
  const Trace back = ParseOrDie(writer.ToJson());
  std::map<int64_t, std::vector<const TraceFlow*>> by_id;
  for (const TraceFlow& f : back.flows) by_id[f.id].push_back(&f);
  CHECK(by_id.size() == 2);
  for (const auto& [id, ends] : by_id) {
    INFO("flow " << id);
    REQUIRE(ends.size() == 2);
    CHECK(ends[0]->phase == 's');
    CHECK(ends[1]->phase == 'f');
    CHECK(back.tracks[static_cast<size_t>(ends[0]->track)].tid == 1);  // from the CPU thread
    CHECK(back.Str(back.tracks[static_cast<size_t>(ends[1]->track)].process_name) == "replay: GPU 0");
    CHECK(ends[0]->ts_ns <= ends[1]->ts_ns);
  }
}

TEST_CASE("timeline writes ts and dur as exact microseconds with three decimals", "[chrome_trace]") {
  Graph g;
  g.origin_ns = 1712195495519695800;
  g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("main")});
  Task a;
  a.name = g.strings.Intern("a");
  a.resource = 0;
  a.duration_ns = 1234;
  a.gap_ns = 5;
  a.kind = TaskKind::kCpuOp;
  a.phase = Phase::kForward;
  g.AddTask(a);
  Task b = a;
  b.name = g.strings.Intern("b");
  b.duration_ns = 7;
  b.gap_ns = 0;
  g.AddTask(b);
  g.AddEdge(0, 1, EdgeKind::kSequential);
  g.BuildAdjacency();
  const Schedule s = Sim(g);
  REQUIRE(s.start_ns == std::vector<TimeNs>{5, 1239});
  TimelineWriter writer;
  writer.Add(g, s, "x");
  const std::string json = writer.ToJson();
  CHECK_THAT(json, Catch::Contains("\"ts\":1712195495519695.805,\"dur\":1.234"));
  CHECK_THAT(json, Catch::Contains("\"ts\":1712195495519697.039,\"dur\":0.007"));
  const Trace back = ParseOrDie(json);
  const std::vector<const TraceEvent*> events = CompleteEvents(back);
  REQUIRE(events.size() == 2);
  CHECK(events[0]->ts_ns == 1712195495519695805);
  CHECK(events[1]->ts_ns == 1712195495519697039);
  CHECK(events[1]->dur_ns == 7);
}

TEST_CASE("timeline gives two schedules distinct, labelled processes", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  TimelineWriter writer;
  writer.Add(g, s, "baseline");
  writer.Add(g, s, "predicted: amp");
  const Trace back = ParseOrDie(writer.ToJson());
  REQUIRE(CompleteEvents(back).size() == 2 * g.tasks.size());
  std::map<std::string, std::set<int64_t>> pids_by_label;
  for (const TraceTrack& t : back.tracks) {
    if (t.num_events == 0) continue;
    const std::string name(back.Str(t.process_name));
    const std::string label = name.rfind("baseline: ", 0) == 0 ? "baseline" : name.rfind("predicted: amp: ", 0) == 0 ? "predicted" : "?";
    pids_by_label[label].insert(t.pid);
  }
  REQUIRE(pids_by_label.count("?") == 0);
  REQUIRE(pids_by_label.size() == 2);
  CHECK(pids_by_label["baseline"].size() == 2);   // a CPU and a GPU process
  CHECK(pids_by_label["predicted"].size() == 2);
  for (int64_t pid : pids_by_label["baseline"]) CHECK(pids_by_label["predicted"].count(pid) == 0);
  std::set<int64_t> flow_ids;
  for (const TraceFlow& f : back.flows) flow_ids.insert(f.id);
  CHECK(flow_ids.size() == static_cast<size_t>(2 * LaunchEdges(g)));
}

TEST_CASE("timeline escapes names so that any task name loads back unchanged", "[chrome_trace]") {
  Graph g;
  g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread \"1\"")});
  const std::string nasty = std::string("q\"uote \\back\\slash\nnew\tline \x01 ctrl") + " \xc3\xa9";
  Task t;
  t.name = g.strings.Intern(nasty);
  t.resource = 0;
  t.duration_ns = 10;
  t.kind = TaskKind::kCpuOp;
  t.phase = Phase::kForward;
  g.AddTask(t);
  g.BuildAdjacency();
  TimelineWriter writer;
  writer.Add(g, Sim(g), "replay");
  const Trace back = ParseOrDie(writer.ToJson());
  REQUIRE(CompleteEvents(back).size() == 1);
  CHECK(back.Str(CompleteEvents(back)[0]->name) == nasty);
  CHECK(back.Str(back.tracks[static_cast<size_t>(CompleteEvents(back)[0]->track)].thread_name) == "thread \"1\"");
}

TEST_CASE("timeline Write writes the document and WriteTimeline labels it replay", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  const std::string dir = TempDir();
  TimelineWriter writer;
  writer.Add(g, s, "replay");
  REQUIRE(writer.Write(dir + "/a.json").ok());
  CHECK(*ReadFile(dir + "/a.json") == writer.ToJson());
  REQUIRE(WriteTimeline(g, s, dir + "/b.json").ok());
  CHECK(*ReadFile(dir + "/b.json") == writer.ToJson());
  auto loaded = ReadTraceFile(dir + "/b.json");
  REQUIRE(loaded.ok());
  CHECK(CompleteEvents(*loaded).size() == g.tasks.size());
}

TEST_CASE("timeline Write into a missing directory fails and leaves no partial file", "[chrome_trace]") {
  const Graph g = SmallBuiltGraph();
  const Schedule s = Sim(g);
  const std::string dir = TempDir();
  const std::string path = dir + "/missing/timeline.json";
  const absl::Status status = WriteTimeline(g, s, path);
  REQUIRE_FALSE(status.ok());
  CHECK_THAT(std::string(status.message()), Catch::Contains(path));
  CHECK(std::filesystem::is_empty(dir));
}

TEST_CASE("timeline of a real trace's replay loads back whole", "[chrome_trace][real]") {
  auto trace = ReadTraceFile(SharedTracePath("param-dlrm-v100-8rank/worker0_step_12.1694128201545.pt.trace.json"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  const Schedule s = Sim(*graph);
  TimelineWriter writer;
  writer.Add(*graph, s, "replay");
  const Trace back = ParseOrDie(writer.ToJson());
  const std::vector<const TraceEvent*> events = CompleteEvents(back);
  REQUIRE(events.size() == graph->tasks.size());
  for (size_t t = 0; t < graph->tasks.size(); ++t) {
    REQUIRE(back.Str(events[t]->name) == graph->TaskName(static_cast<int32_t>(t)));
    REQUIRE(events[t]->ts_ns == graph->origin_ns + s.start_ns[t]);
  }
  CHECK(back.flows.size() == static_cast<size_t>(2 * LaunchEdges(*graph)));
}
