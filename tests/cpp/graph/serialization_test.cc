// Tests for daydream/graph/serialization.h: exact round trips through the
// protobuf format and clear errors for files that are not graphs.
#include "daydream/graph/serialization.h"

#include <filesystem>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "daydream/base/file_io.h"
#include "daydream/graph/builder.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::SharedTracePath;
using daydream::testing::TempDir;
using daydream::testing::WriteFile;

namespace {

// A graph that sets every serialized field to a non-default value.
Graph HandMadeGraph() {
  Graph g;
  g.source = "/traces/rank-3.json.gz";
  g.origin_ns = 1712195495505543200;
  g.recorded_end_ns = 1712195495605543200;
  g.rank = 3;
  g.world_size = 8;
  g.device = Device{"NVIDIA A100-SXM4-80GB", 8, 0, 85899345920, 108};
  const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1102, 1103, g.strings.Intern("pt_main_thread")});
  const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("GPU 0 stream 7")});
  const int32_t net = g.AddResource(Resource{ResourceKind::kCommChannel, 0, 0, g.strings.Intern("network")});
  const int32_t root = g.AddLayer(Layer{g.strings.Intern("Net_0"), -1});
  const int32_t fc = g.AddLayer(Layer{g.strings.Intern("Linear_0"), root});
  Task launch;
  launch.duration_ns = 4200;
  launch.gap_ns = 311;
  launch.recorded_start_ns = 1712195495505543200;
  launch.trace_event = 17;
  launch.correlation = 135071;
  launch.name = g.strings.Intern("cudaLaunchKernel");
  launch.resource = cpu;
  launch.layer = fc;
  launch.iteration = 0;
  launch.priority = -2;
  launch.kind = TaskKind::kRuntime;
  launch.phase = Phase::kForward;
  const int32_t a = g.AddTask(launch);
  Task kernel = launch;
  kernel.duration_ns = 88000;
  kernel.gap_ns = 0;
  kernel.recorded_start_ns += 9000;
  kernel.trace_event = 18;
  kernel.name = g.strings.Intern("void gemm<float>(\"quoted\", \\n)");
  kernel.resource = gpu;
  kernel.priority = 5;
  kernel.kind = TaskKind::kKernel;
  const int32_t b = g.AddTask(kernel);
  Task allreduce;
  allreduce.duration_ns = 2636669;
  allreduce.recorded_start_ns = kernel.recorded_start_ns + 100000;
  allreduce.bytes = 26550272;
  allreduce.name = g.strings.Intern("ncclKernel_AllReduce_RING_LL_Sum_float");
  allreduce.resource = net;
  allreduce.kind = TaskKind::kCollective;
  allreduce.phase = Phase::kComm;
  const int32_t c = g.AddTask(allreduce);
  g.AddEdge(a, b, EdgeKind::kBlockingLaunch, 7000);
  g.AddEdge(b, c, EdgeKind::kData, 0);
  g.AddEdge(b, a, EdgeKind::kSync, 5000);
  g.AddEdge(a, c, EdgeKind::kComm, 123456789012);
  Tensor grad;
  grad.name = g.strings.Intern("fc.weight.grad");
  grad.dtype = g.strings.Intern("float32");
  grad.bytes = 4 * 1024 * 1024;
  grad.producer = b;
  grad.layer = fc;
  grad.role = TensorRole::kGradient;
  grad.shape = {1024, 1024};
  g.AddTensor(grad);
  Tensor input;
  input.name = g.strings.Intern("input");
  input.role = TensorRole::kInput;
  input.shape = {64, 3, 224, 224};
  g.AddTensor(input);
  g.iterations.push_back(Iteration{g.strings.Intern("ProfilerStep#4"), a, c, 1500, 2500, 222442191, 4458676416788066});
  g.BuildAdjacency();
  return g;
}

// Every serialized field of two graphs is equal.
void RequireSameGraph(const Graph& x, const Graph& y) {
  CHECK(x.source == y.source);
  CHECK(x.origin_ns == y.origin_ns);
  CHECK(x.recorded_end_ns == y.recorded_end_ns);
  CHECK(x.rank == y.rank);
  CHECK(x.world_size == y.world_size);
  CHECK(x.device.name == y.device.name);
  CHECK(x.device.compute_major == y.device.compute_major);
  CHECK(x.device.compute_minor == y.device.compute_minor);
  CHECK(x.device.total_memory_bytes == y.device.total_memory_bytes);
  CHECK(x.device.num_sms == y.device.num_sms);
  REQUIRE(x.strings.size() == y.strings.size());
  for (size_t i = 0; i < x.strings.size(); ++i) {
    REQUIRE(x.strings.Get(static_cast<StringId>(i)) == y.strings.Get(static_cast<StringId>(i)));
  }
  REQUIRE(x.resources.size() == y.resources.size());
  for (size_t i = 0; i < x.resources.size(); ++i) {
    CHECK(x.resources[i].kind == y.resources[i].kind);
    CHECK(x.resources[i].process == y.resources[i].process);
    CHECK(x.resources[i].thread == y.resources[i].thread);
    CHECK(x.resources[i].name == y.resources[i].name);
  }
  REQUIRE(x.tasks.size() == y.tasks.size());
  for (size_t i = 0; i < x.tasks.size(); ++i) {
    const Task& p = x.tasks[i];
    const Task& q = y.tasks[i];
    INFO("task " << i);
    REQUIRE(p.duration_ns == q.duration_ns);
    REQUIRE(p.gap_ns == q.gap_ns);
    REQUIRE(p.recorded_start_ns == q.recorded_start_ns);
    REQUIRE(p.trace_event == q.trace_event);
    REQUIRE(p.correlation == q.correlation);
    REQUIRE(p.bytes == q.bytes);
    REQUIRE(p.name == q.name);
    REQUIRE(p.resource == q.resource);
    REQUIRE(p.layer == q.layer);
    REQUIRE(p.iteration == q.iteration);
    REQUIRE(p.priority == q.priority);
    REQUIRE(p.kind == q.kind);
    REQUIRE(p.phase == q.phase);
  }
  REQUIRE(x.edges.size() == y.edges.size());
  for (size_t i = 0; i < x.edges.size(); ++i) {
    INFO("edge " << i);
    REQUIRE(x.edges[i].from == y.edges[i].from);
    REQUIRE(x.edges[i].to == y.edges[i].to);
    REQUIRE(x.edges[i].kind == y.edges[i].kind);
    REQUIRE(x.edges[i].lag_ns == y.edges[i].lag_ns);
  }
  REQUIRE(x.layers.size() == y.layers.size());
  for (size_t i = 0; i < x.layers.size(); ++i) {
    CHECK(x.layers[i].name == y.layers[i].name);
    CHECK(x.layers[i].parent == y.layers[i].parent);
  }
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    CHECK(x.tensors[i].name == y.tensors[i].name);
    CHECK(x.tensors[i].dtype == y.tensors[i].dtype);
    CHECK(x.tensors[i].bytes == y.tensors[i].bytes);
    CHECK(x.tensors[i].producer == y.tensors[i].producer);
    CHECK(x.tensors[i].layer == y.tensors[i].layer);
    CHECK(x.tensors[i].role == y.tensors[i].role);
    CHECK(x.tensors[i].shape == y.tensors[i].shape);
  }
  REQUIRE(x.iterations.size() == y.iterations.size());
  for (size_t i = 0; i < x.iterations.size(); ++i) {
    CHECK(x.iterations[i].name == y.iterations[i].name);
    CHECK(x.iterations[i].begin_task == y.iterations[i].begin_task);
    CHECK(x.iterations[i].end_task == y.iterations[i].end_task);
    CHECK(x.iterations[i].begin_offset_ns == y.iterations[i].begin_offset_ns);
    CHECK(x.iterations[i].end_offset_ns == y.iterations[i].end_offset_ns);
    CHECK(x.iterations[i].measured_ns == y.iterations[i].measured_ns);
    CHECK(x.iterations[i].recorded_begin_ns == y.iterations[i].recorded_begin_ns);
  }
}

// Protobuf varint.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

TEST_CASE("serialization round-trips a hand-made graph exactly", "[serialization]") {
  const Graph g = HandMadeGraph();
  REQUIRE(g.Validate().ok());
  auto bytes = SerializeGraph(g);
  REQUIRE(bytes.ok());
  auto back = DeserializeGraph(*bytes, "hand");
  INFO((back.ok() ? "" : std::string(back.status().message())));
  REQUIRE(back.ok());
  RequireSameGraph(g, *back);
  CHECK(back->has_adjacency());
  CHECK(back->Validate().ok());
  auto again = SerializeGraph(*back);
  REQUIRE(again.ok());
  CHECK(*again == *bytes);
}

TEST_CASE("serialization round-trips a real trace's graph exactly", "[serialization][real]") {
  auto trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  auto bytes = SerializeGraph(*graph);
  REQUIRE(bytes.ok());
  auto back = DeserializeGraph(*bytes);
  REQUIRE(back.ok());
  RequireSameGraph(*graph, *back);
  auto again = SerializeGraph(*back);
  REQUIRE(again.ok());
  CHECK(*again == *bytes);
}

TEST_CASE("SaveGraph and LoadGraph round-trip through a file", "[serialization]") {
  const std::string path = TempDir() + "/g.ddg";
  const Graph g = HandMadeGraph();
  REQUIRE(SaveGraph(g, path).ok());
  auto loaded = LoadGraph(path);
  REQUIRE(loaded.ok());
  RequireSameGraph(g, *loaded);
  CHECK(*ReadFile(path) == *SerializeGraph(g));
}

TEST_CASE("LoadGraph refuses garbage bytes", "[serialization]") {
  const std::string path = TempDir() + "/garbage.ddg";
  WriteFile(path, std::string("\xff\xff\xff\xff garbage that is no protobuf \x00\x01", 36));
  auto g = LoadGraph(path);
  REQUIRE_FALSE(g.ok());
  CHECK(absl::IsInvalidArgument(g.status()));
  CHECK_THAT(Msg(g.status()), Catch::StartsWith(path + ": not a daydream graph file: "));
}

TEST_CASE("LoadGraph refuses a JSON trace given by mistake", "[serialization]") {
  const std::string path = TempDir() + "/trace.json";
  WriteFile(path, R"j({"traceEvents":[]})j");
  auto g = LoadGraph(path);
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(Msg(g.status()), Catch::StartsWith(path + ": not a daydream graph file"));
}

TEST_CASE("LoadGraph refuses an empty file", "[serialization]") {
  const std::string path = TempDir() + "/empty.ddg";
  WriteFile(path, "");
  auto g = LoadGraph(path);
  REQUIRE_FALSE(g.ok());
  CHECK(Msg(g.status()) == path + ": not a daydream graph file: the file is empty");
}

TEST_CASE("LoadGraph refuses a graph from a newer daydream", "[serialization]") {
  const std::string path = TempDir() + "/future.ddg";
  // Field 1 (schema_version), varint, one past what this version reads.
  WriteFile(path, std::string("\x08") + Varint(kGraphSchemaVersion + 1));
  auto g = LoadGraph(path);
  REQUIRE_FALSE(g.ok());
  CHECK(absl::IsFailedPrecondition(g.status()));
  CHECK_THAT(Msg(g.status()), Catch::StartsWith(path + ": written by a newer daydream (graph schema " +
                                                std::to_string(kGraphSchemaVersion + 1)) &&
                                  Catch::Contains("upgrade daydream"));
}

TEST_CASE("DeserializeGraph refuses a newer schema even when the rest is a valid graph", "[serialization]") {
  auto bytes = SerializeGraph(HandMadeGraph());
  REQUIRE(bytes.ok());
  // A later field 1 overrides the first one in protobuf.
  const std::string future = *bytes + "\x08" + Varint(1000);
  auto g = DeserializeGraph(future, "future");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(Msg(g.status()), Catch::Contains("newer daydream") && Catch::Contains("graph schema 1000"));
}

TEST_CASE("DeserializeGraph refuses bytes without a schema version", "[serialization]") {
  // Field 2 (source) only.
  const std::string bytes = std::string("\x12\x03") + "abc";
  auto g = DeserializeGraph(bytes, "src");
  REQUIRE_FALSE(g.ok());
  CHECK(Msg(g.status()) == "src: not a daydream graph file: no schema version");
}

TEST_CASE("DeserializeGraph refuses a graph that fails validation", "[serialization]") {
  Graph g = HandMadeGraph();
  g.edges.push_back(Edge{0, 42, EdgeKind::kSequential, 0});  // dangling
  auto bytes = SerializeGraph(g);
  REQUIRE(bytes.ok());
  auto back = DeserializeGraph(*bytes, "bad");
  REQUIRE_FALSE(back.ok());
  CHECK_THAT(Msg(back.status()), Catch::StartsWith("bad: not a daydream graph file: ") && Catch::Contains("dangling"));
}

TEST_CASE("DeserializeGraph refuses task columns of different lengths", "[serialization]") {
  auto bytes = SerializeGraph(HandMadeGraph());
  REQUIRE(bytes.ok());
  // Append one more duration to the tasks message (field 10, TaskColumns.duration_ns = field 1).
  const std::string extra_duration = std::string("\x08") + Varint(5);
  const std::string tasks = std::string("\x52") + Varint(extra_duration.size()) + extra_duration;
  auto back = DeserializeGraph(*bytes + tasks, "cols");
  REQUIRE_FALSE(back.ok());
  CHECK(Msg(back.status()) == "cols: not a daydream graph file: task columns have different lengths");
}

TEST_CASE("DeserializeGraph refuses a resource of unknown kind", "[serialization]") {
  // Validate() does not look at resource kinds, and DeserializeGraph passes
  // any integer through; Summarize() then indexes a 4-entry array with it
  // (out-of-bounds write) and every switch on ResourceKind falls through.
  auto bytes = SerializeGraph(HandMadeGraph());
  REQUIRE(bytes.ok());
  // One more resource (field 9) with kind (field 1) = 7.
  const std::string resource = std::string("\x08") + Varint(7);
  const std::string appended = *bytes + "\x4a" + Varint(resource.size()) + resource;
  auto back = DeserializeGraph(appended, "kinds");
  CHECK_FALSE(back.ok());
}

TEST_CASE("SaveGraph into a missing directory fails without leaving files", "[serialization]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/missing/g.ddg";
  const absl::Status s = SaveGraph(HandMadeGraph(), path);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains(path));
  CHECK(ListDir(dir).empty());
}

TEST_CASE("SaveGraph replaces an existing graph file", "[serialization]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/g.ddg";
  WriteFile(path, std::string(100000, 'x'));
  REQUIRE(SaveGraph(HandMadeGraph(), path).ok());
  auto loaded = LoadGraph(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->tasks.size() == 3);
  CHECK(ListDir(dir) == std::set<std::string>{"g.ddg"});
}

TEST_CASE("LoadGraph of a missing file names the path", "[serialization]") {
  const std::string path = TempDir() + "/none.ddg";
  auto g = LoadGraph(path);
  REQUIRE_FALSE(g.ok());
  CHECK(absl::IsNotFound(g.status()));
  CHECK_THAT(Msg(g.status()), Catch::Contains(path));
}
