// Tests for daydream/passes/editor.h: selecting tasks, the resource-chain
// check, and every GraphEditor primitive on small hand-made graphs.
#include "daydream/passes/editor.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/sim/simulator.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::HasEdge;
using daydream::testing::TaskNamed;

namespace {

// A CPU thread (resource 0), a GPU stream (1) and a second CPU thread (2);
// tasks are added by the tests and named as they say.
struct Fixture {
  Graph g;
  int32_t cpu = -1, gpu = -1, cpu2 = -1;

  Fixture() {
    cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
    gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
    cpu2 = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 2, g.strings.Intern("thread 2")});
  }

  int32_t Add(const std::string& name, int32_t resource, TimeNs duration = 10, TimeNs gap = 0) {
    Task t;
    t.name = g.strings.Intern(name);
    t.resource = resource;
    t.duration_ns = duration;
    t.gap_ns = gap;
    t.kind = g.resources[static_cast<size_t>(resource)].kind == ResourceKind::kGpuStream ? TaskKind::kKernel
                                                                                        : TaskKind::kCpuOp;
    return g.AddTask(t);
  }

  // Sequential edges along `tasks`.
  void Chain(const std::vector<int32_t>& tasks) {
    for (size_t i = 1; i < tasks.size(); ++i) g.AddEdge(tasks[i - 1], tasks[i], EdgeKind::kSequential);
  }

  int32_t AddIteration(const std::string& name, int32_t begin, int32_t end) {
    Iteration it;
    it.name = g.strings.Intern(name);
    it.begin_task = begin;
    it.end_task = end;
    g.iterations.push_back(it);
    return static_cast<int32_t>(g.iterations.size() - 1);
  }

  int32_t AddTensor(const std::string& name, int32_t producer) {
    Tensor t;
    t.name = g.strings.Intern(name);
    t.dtype = g.strings.Intern("float");
    t.bytes = 4;
    t.role = TensorRole::kGradient;
    t.producer = producer;
    t.producers.assign(g.iterations.size(), producer);
    return g.AddTensor(std::move(t));
  }

  void Commit(GraphEditor& editor) {
    const absl::Status s = editor.Commit();
    INFO(s.message());
    REQUIRE(s.ok());
  }

  int32_t Named(const std::string& name) const { return TaskNamed(g, name); }
  bool Edge(const std::string& from, const std::string& to, EdgeKind kind) const {
    return HasEdge(g, Named(from), Named(to), kind);
  }
  TimeNs LagOf(const std::string& from, const std::string& to, EdgeKind kind) const {
    for (const daydream::Edge& e : g.edges) {
      if (e.from == Named(from) && e.to == Named(to) && e.kind == kind) return e.lag_ns;
    }
    FAIL("no " << EdgeKindName(kind) << " edge " << from << " -> " << to);
    return -1;
  }
};

// Names of `resource`'s tasks in chain order (following sequential edges).
std::vector<std::string> ChainOf(const Graph& g, int32_t resource) {
  std::vector<int32_t> next(g.tasks.size(), -1);
  std::vector<uint8_t> has_prev(g.tasks.size(), 0);
  for (const Edge& e : g.edges) {
    if (e.kind != EdgeKind::kSequential) continue;
    next[static_cast<size_t>(e.from)] = e.to;
    has_prev[static_cast<size_t>(e.to)] = 1;
  }
  std::vector<std::string> out;
  for (size_t t = 0; t < g.tasks.size(); ++t) {
    if (g.tasks[t].resource != resource || has_prev[t]) continue;
    for (int32_t c = static_cast<int32_t>(t); c >= 0 && out.size() <= g.tasks.size(); c = next[static_cast<size_t>(c)]) {
      out.emplace_back(g.TaskName(c));
    }
  }
  return out;
}

std::vector<std::string> NamesOf(const Graph& g, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t t : ids) out.emplace_back(g.TaskName(t));
  return out;
}

std::vector<int32_t> Select(const Graph& g, const TaskSelector& s) {
  absl::StatusOr<std::vector<int32_t>> got = SelectTasks(g, s);
  INFO((got.ok() ? std::string() : std::string(got.status().message())));
  REQUIRE(got.ok());
  return *got;
}

}  // namespace

// --- SelectTasks ---------------------------------------------------------------

TEST_CASE("SelectTasks filters by every criterion and returns ids in order", "[editor]") {
  Fixture f;
  const int32_t layer0 = f.g.AddLayer(Layer{f.g.strings.Intern("conv1"), -1});
  const int32_t layer1 = f.g.AddLayer(Layer{f.g.strings.Intern("fc"), -1});
  f.AddIteration("ProfilerStep#1", 0, 0);
  auto add = [&](const std::string& name, int32_t resource, TaskKind kind, Phase phase, int32_t layer,
                 int32_t iteration) {
    const int32_t t = f.Add(name, resource);
    Task& task = f.g.tasks[static_cast<size_t>(t)];
    task.kind = kind;
    task.phase = phase;
    task.layer = layer;
    task.iteration = iteration;
    return t;
  };
  const int32_t a = add("aten::conv2d", f.cpu, TaskKind::kCpuOp, Phase::kForward, layer0, 0);
  const int32_t b = add("cudaLaunchKernel", f.cpu, TaskKind::kRuntime, Phase::kForward, layer0, 0);
  const int32_t c = add("volta_scudnn_128x64_relu", f.gpu, TaskKind::kKernel, Phase::kForward, layer0, 0);
  const int32_t d = add("volta_sgemm_128x64_nt", f.gpu, TaskKind::kKernel, Phase::kBackward, layer1, 0);
  const int32_t e = add("Optimizer.step#SGD.step", f.cpu2, TaskKind::kCpuOp, Phase::kOptimizer, -1, -1);
  const int32_t m = add("Memcpy HtoD (Pageable -> Device)", f.gpu, TaskKind::kMemcpy, Phase::kData, -1, -1);

  CHECK(Select(f.g, {}) == std::vector<int32_t>{a, b, c, d, e, m});

  TaskSelector s;
  s.kinds = {TaskKind::kKernel, TaskKind::kMemcpy};
  CHECK(Select(f.g, s) == std::vector<int32_t>{c, d, m});

  s = {};
  s.phases = {Phase::kBackward, Phase::kOptimizer};
  CHECK(Select(f.g, s) == std::vector<int32_t>{d, e});

  s = {};
  s.name_regex = "^volta_s";
  CHECK(Select(f.g, s) == std::vector<int32_t>{c, d});
  s.name_regex = "gemm";  // searched, not matched whole
  CHECK(Select(f.g, s) == std::vector<int32_t>{d});
  s.name_regex = "nothing matches this";
  CHECK(Select(f.g, s).empty());

  s = {};
  s.layer = layer0;
  CHECK(Select(f.g, s) == std::vector<int32_t>{a, b, c});
  s.layer = -1;  // tasks with no layer
  CHECK(Select(f.g, s) == std::vector<int32_t>{e, m});

  s = {};
  s.resource = f.gpu;
  CHECK(Select(f.g, s) == std::vector<int32_t>{c, d, m});

  s = {};
  s.resource_kind = ResourceKind::kCpuThread;
  CHECK(Select(f.g, s) == std::vector<int32_t>{a, b, e});

  s = {};
  s.iteration = 0;
  CHECK(Select(f.g, s) == std::vector<int32_t>{a, b, c, d});
  s.iteration = -1;  // outside every iteration
  CHECK(Select(f.g, s) == std::vector<int32_t>{e, m});

  // Every set criterion must hold.
  s = {};
  s.kinds = {TaskKind::kKernel};
  s.phases = {Phase::kForward};
  s.resource_kind = ResourceKind::kGpuStream;
  s.name_regex = "volta";
  CHECK(Select(f.g, s) == std::vector<int32_t>{c});
  s.resource_kind = ResourceKind::kCommChannel;
  CHECK(Select(f.g, s).empty());
}

TEST_CASE("SelectTasks matches a repeated name the same way every time", "[editor]") {
  Fixture f;
  for (int i = 0; i < 4; ++i) {
    f.Add("aten::add_", f.cpu);
    f.Add("aten::mul", f.cpu);
  }
  TaskSelector s;
  s.name_regex = "add";
  CHECK(NamesOf(f.g, Select(f.g, s)) == std::vector<std::string>(4, "aten::add_"));
}

TEST_CASE("SelectTasks rejects a malformed pattern with an error naming it", "[editor]") {
  Fixture f;
  f.Add("aten::add_", f.cpu);
  TaskSelector s;
  s.name_regex = "volta_(sgemm";
  absl::StatusOr<std::vector<int32_t>> got = SelectTasks(f.g, s);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(got.status().message()), Catch::Contains("volta_(sgemm"));
}

// --- ValidateResourceChains ----------------------------------------------------------

TEST_CASE("ValidateResourceChains accepts one chain per resource and rejects forks and cross links", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t c = f.Add("c", f.cpu);
  const int32_t k = f.Add("k", f.gpu);
  f.Chain({a, b, c});
  f.g.AddEdge(a, k, EdgeKind::kLaunch);  // other kinds cross resources freely
  CHECK(f.g.ValidateResourceChains().ok());

  SECTION("two sequential successors") {
    f.g.AddEdge(a, c, EdgeKind::kSequential);
    const absl::Status s = f.g.ValidateResourceChains();
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("resource order broken"));
  }
  SECTION("two sequential predecessors") {
    const int32_t d = f.Add("d", f.cpu);
    f.g.AddEdge(d, c, EdgeKind::kSequential);
    CHECK(f.g.ValidateResourceChains().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("a sequential edge across resources") {
    f.g.AddEdge(c, k, EdgeKind::kSequential);
    const absl::Status s = f.g.ValidateResourceChains();
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("different resources"));
  }
}

// --- edges and neighbours ---------------------------------------------------------

TEST_CASE("GraphEditor lists live edges, old and new, and resource neighbours", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t c = f.Add("c", f.cpu);
  const int32_t k = f.Add("k", f.gpu);
  f.Chain({a, b, c});
  f.g.AddEdge(b, k, EdgeKind::kLaunch);
  GraphEditor editor(f.g);  // builds the adjacency
  CHECK(f.g.has_adjacency());
  CHECK(editor.num_edits() == 0);

  CHECK(editor.SequentialPrev(a) == -1);
  CHECK(editor.SequentialNext(a) == b);
  CHECK(editor.SequentialPrev(b) == a);
  CHECK(editor.SequentialNext(b) == c);
  CHECK(editor.SequentialNext(c) == -1);
  CHECK(editor.SequentialPrev(k) == -1);
  CHECK(editor.SequentialNext(k) == -1);
  CHECK(editor.LastOnResource(f.cpu) == c);
  CHECK(editor.LastOnResource(f.gpu) == k);
  CHECK(editor.LastOnResource(f.cpu2) == -1);
  CHECK(editor.OutEdges(b).size() == 2);
  CHECK(editor.InEdges(b).size() == 1);

  const int32_t k2 = editor.AddTask([&] {
    Task t = f.g.tasks[static_cast<size_t>(k)];
    t.name = f.g.strings.Intern("k2");
    return t;
  }());
  CHECK(k2 == 4);
  CHECK(!editor.removed(k2));
  CHECK(editor.InEdges(k2).empty());
  const int32_t seq = editor.AddEdge(k, k2, EdgeKind::kSequential);
  const int32_t launch = editor.AddEdge(c, k2, EdgeKind::kLaunch, 250);
  CHECK(f.g.edges[static_cast<size_t>(launch)].lag_ns == 250);
  CHECK(editor.SequentialNext(k) == k2);
  CHECK(editor.SequentialPrev(k2) == k);
  CHECK(editor.LastOnResource(f.gpu) == k2);
  CHECK(editor.InEdges(k2) == std::vector<int32_t>{seq, launch});
  CHECK(editor.OutEdges(c) == std::vector<int32_t>{launch});
  CHECK(editor.num_edits() == 3);

  // Removed edges disappear, whether they were there before or added.
  editor.RemoveEdge(launch);
  const std::vector<int32_t> b_out = editor.OutEdges(b);
  for (int32_t e : b_out) {
    if (f.g.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential) editor.RemoveEdge(e);
  }
  CHECK(editor.InEdges(k2) == std::vector<int32_t>{seq});
  CHECK(editor.OutEdges(c).empty());
  CHECK(editor.SequentialNext(b) == -1);
  CHECK(editor.SequentialPrev(c) == -1);
  CHECK(editor.OutEdges(b).size() == 1);  // the launch
  CHECK(editor.num_edits() == 5);
}

// --- inserting into resource chains ----------------------------------------------------

TEST_CASE("InsertAfterOnResource splices a task into its resource's chain", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  f.Chain({a, b});
  GraphEditor editor(f.g);
  Task x;
  x.resource = f.cpu;
  x.kind = TaskKind::kCpuOp;
  x.duration_ns = 5;
  SECTION("in the middle") {
    x.name = f.g.strings.Intern("x");
    editor.InsertAfterOnResource(a, editor.AddTask(x));
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "x", "b"});
  }
  SECTION("at the front") {
    x.name = f.g.strings.Intern("x");
    editor.InsertAfterOnResource(-1, editor.AddTask(x));
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"x", "a", "b"});
  }
  SECTION("at the end, twice") {
    x.name = f.g.strings.Intern("x");
    const int32_t xi = editor.AddTask(x);
    editor.InsertAfterOnResource(b, xi);
    x.name = f.g.strings.Intern("y");
    editor.InsertAfterOnResource(xi, editor.AddTask(x));
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "b", "x", "y"});
  }
  SECTION("on an empty resource") {
    x.name = f.g.strings.Intern("x");
    x.resource = f.cpu2;
    editor.InsertAfterOnResource(-1, editor.AddTask(x));
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu2) == std::vector<std::string>{"x"});
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "b"});
  }
  // The simulator runs the chain in its new order, whatever the ids say.
  f.g.BuildAdjacency();
  absl::StatusOr<Schedule> s = Simulate(f.g);
  REQUIRE(s.ok());
  const std::vector<std::string> chain = ChainOf(f.g, f.g.tasks[0].resource);
  for (size_t i = 1; i < chain.size(); ++i) {
    CHECK(s->start_ns[static_cast<size_t>(f.Named(chain[i]))] >= s->end_ns[static_cast<size_t>(f.Named(chain[i - 1]))]);
  }
}

TEST_CASE("AppendToResource puts a task after the last one of its resource", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  f.Chain({a, b});
  GraphEditor editor(f.g);
  Task x;
  x.resource = f.gpu;
  x.kind = TaskKind::kKernel;
  x.name = f.g.strings.Intern("x");
  const int32_t xi = editor.AddTask(x);
  editor.AppendToResource(xi);
  x.name = f.g.strings.Intern("y");
  const int32_t yi = editor.AddTask(x);
  editor.AppendToResource(yi);
  CHECK(editor.LastOnResource(f.gpu) == yi);
  x.name = f.g.strings.Intern("z");
  x.resource = f.cpu2;  // empty resource: nothing to link to
  const int32_t zi = editor.AddTask(x);
  editor.AppendToResource(zi);
  CHECK(editor.InEdges(zi).empty());
  f.Commit(editor);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"a", "b", "x", "y"});
  CHECK(ChainOf(f.g, f.cpu2) == std::vector<std::string>{"z"});
}

// --- RemoveTask --------------------------------------------------------------------------

TEST_CASE("RemoveTask chains the neighbours and drops the task's gap", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu, 10, 1);
  const int32_t b = f.Add("b", f.cpu, 20, 7);
  const int32_t c = f.Add("c", f.cpu, 30, 3);
  f.Chain({a, b, c});
  GraphEditor editor(f.g);
  SECTION("without keep_gap the framework time around it goes with it") {
    REQUIRE(editor.RemoveTask(b).ok());
    CHECK(editor.removed(b));
    CHECK(editor.SequentialNext(a) == c);
    CHECK(editor.SequentialPrev(c) == a);
    f.Commit(editor);
    CHECK(f.g.tasks.size() == 2);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "c"});
    CHECK(f.g.tasks[static_cast<size_t>(f.Named("c"))].gap_ns == 3);
  }
  SECTION("keep_gap moves the gap to the successor") {
    REQUIRE(editor.RemoveTask(b, /*keep_gap=*/true).ok());
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "c"});
    CHECK(f.g.tasks[static_cast<size_t>(f.Named("c"))].gap_ns == 10);
  }
  SECTION("the first task's gap is time since the trace began: kept") {
    REQUIRE(editor.RemoveTask(a).ok());
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"b", "c"});
    CHECK(f.g.tasks[static_cast<size_t>(f.Named("b"))].gap_ns == 8);
  }
  SECTION("the last task") {
    REQUIRE(editor.RemoveTask(c).ok());
    f.Commit(editor);
    CHECK(ChainOf(f.g, f.cpu) == std::vector<std::string>{"a", "b"});
    CHECK(f.g.tasks[static_cast<size_t>(f.Named("b"))].gap_ns == 7);
  }
}

TEST_CASE("RemoveTask links every predecessor to every successor, adding lags", "[editor]") {
  Fixture f;
  const int32_t p1 = f.Add("p1", f.cpu);
  const int32_t p2 = f.Add("p2", f.cpu2);
  const int32_t before = f.Add("before", f.gpu);
  const int32_t x = f.Add("x", f.gpu);
  const int32_t after = f.Add("after", f.gpu);
  const int32_t s1 = f.Add("s1", f.cpu, 5);
  const int32_t s2 = f.Add("s2", f.cpu2, 5);
  f.Chain({p1, s1});
  f.Chain({p2, s2});
  f.Chain({before, x, after});
  f.g.AddEdge(p1, x, EdgeKind::kLaunch, 3);
  f.g.AddEdge(p2, x, EdgeKind::kData, 1);
  f.g.AddEdge(x, s1, EdgeKind::kSync, 2);
  f.g.AddEdge(x, s2, EdgeKind::kData, 4);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(x).ok());
  f.Commit(editor);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"before", "after"});
  // An end-to-end successor keeps its kind; the others become data edges.
  CHECK(f.LagOf("p1", "s1", EdgeKind::kSync) == 5);
  CHECK(f.LagOf("p2", "s1", EdgeKind::kSync) == 3);
  CHECK(f.LagOf("p1", "s2", EdgeKind::kData) == 7);
  CHECK(f.LagOf("p2", "s2", EdgeKind::kData) == 5);
  CHECK(f.Edge("before", "after", EdgeKind::kSequential));
  for (const Edge& e : f.g.edges) CHECK(e.from != e.to);
}

TEST_CASE("RemoveTask links its resource neighbours to its other dependencies", "[editor]") {
  // The task before x on its stream is one of x's predecessors too: what
  // waited for x (a sync) must still wait for it. And a cross-stream wait
  // enqueued before x still holds the work after x on its stream.
  Fixture f;
  const int32_t s9 = f.g.AddResource(Resource{ResourceKind::kGpuStream, 0, 9, f.g.strings.Intern("stream 9")});
  const int32_t w = f.Add("w", s9);
  const int32_t before = f.Add("before", f.gpu);
  const int32_t x = f.Add("x", f.gpu);
  const int32_t after = f.Add("after", f.gpu);
  const int32_t sync = f.Add("sync", f.cpu);
  f.Chain({before, x, after});
  f.g.AddEdge(w, x, EdgeKind::kStreamWait, 1);
  f.g.AddEdge(x, sync, EdgeKind::kSync, 2);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(x).ok());
  f.Commit(editor);
  CHECK(f.Edge("before", "sync", EdgeKind::kSync));
  // Of whatever kind, as long as "after" still waits for w.
  CHECK((f.Edge("w", "after", EdgeKind::kStreamWait) || f.Edge("w", "after", EdgeKind::kData)));
}

TEST_CASE("RemoveTask keeps same-kind thread and stream-wait bypasses", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t x = f.Add("x", f.cpu2);
  const int32_t c = f.Add("c", f.cpu);
  const int32_t k1 = f.Add("k1", f.gpu);
  const int32_t k2 = f.Add("k2", f.gpu);
  const int32_t s = f.g.AddResource(Resource{ResourceKind::kGpuStream, 0, 9, f.g.strings.Intern("stream 9")});
  const int32_t w = f.Add("w", s);
  f.Chain({a, c});
  f.Chain({k1, k2});
  f.g.AddEdge(a, x, EdgeKind::kThread);
  f.g.AddEdge(x, c, EdgeKind::kThread);
  f.g.AddEdge(k1, w, EdgeKind::kStreamWait);
  f.g.AddEdge(w, k2, EdgeKind::kStreamWait);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(x).ok());
  REQUIRE(editor.RemoveTask(w).ok());
  f.Commit(editor);
  CHECK(f.Edge("a", "c", EdgeKind::kThread));
  CHECK(f.Edge("k1", "k2", EdgeKind::kStreamWait));
}

TEST_CASE("RemoveTask hands the task's tensors to its resource predecessor", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.gpu);
  f.Chain({a, b, c});
  f.AddIteration("step", a, c);
  const int32_t tb = f.AddTensor("grad_b", b);
  const int32_t ta = f.AddTensor("grad_a", a);
  const int32_t tc = f.AddTensor("grad_c", c);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(b).ok());
  REQUIRE(editor.RemoveTask(a).ok());  // the first: its tensor has no predecessor to go to
  f.Commit(editor);
  REQUIRE(f.g.tasks.size() == 1);
  const Tensor& grad_b = f.g.tensors[static_cast<size_t>(tb)];
  // b's tensor went to a, and with a to nothing.
  CHECK(grad_b.producer == -1);
  CHECK(grad_b.producers == std::vector<int32_t>{-1});
  CHECK(f.g.tensors[static_cast<size_t>(ta)].producer == -1);
  CHECK(f.g.tensors[static_cast<size_t>(tc)].producer == f.Named("c"));
  CHECK(f.g.tensors[static_cast<size_t>(tc)].producers == std::vector<int32_t>{f.Named("c")});
}

TEST_CASE("RemoveTask moves a tensor's producer to the task before it", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.gpu);
  f.Chain({a, b, c});
  f.AddIteration("step", a, c);
  const int32_t tb = f.AddTensor("grad_b", b);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(b).ok());
  f.Commit(editor);
  CHECK(f.g.tensors[static_cast<size_t>(tb)].producer == f.Named("a"));
  CHECK(f.g.tensors[static_cast<size_t>(tb)].producers == std::vector<int32_t>{f.Named("a")});
}

TEST_CASE("A tensor handed on by one edit is handed on again by the next", "[editor]") {
  // The editor scans the tensors only for tasks it knows to produce one; a
  // task that became a producer through an edit, or a tensor added after
  // the editor first looked, must still be followed.
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.gpu);
  const int32_t d = f.Add("d", f.gpu);
  const int32_t e = f.Add("e", f.gpu);
  f.Chain({a, b, c, d, e});
  f.AddIteration("step", a, e);
  const int32_t td = f.AddTensor("grad_d", d);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(d).ok());  // grad_d -> c
  REQUIRE(editor.RemoveTask(c).ok());  // -> b, a producer only through the edit before
  absl::StatusOr<int32_t> merged = editor.MergeTasks({a, b}, 20, "ab");  // -> ab, a task the editor added
  REQUIRE(merged.ok());
  const int32_t late = f.AddTensor("grad_late", e);  // after the editor first indexed the producers
  f.g.tensors[static_cast<size_t>(late)].producers = {e};
  REQUIRE(editor.RemoveTask(e).ok());  // grad_late -> ab
  f.Commit(editor);
  CHECK(f.g.TaskName(f.g.tensors[static_cast<size_t>(td)].producer) == "ab");
  CHECK(f.g.tensors[static_cast<size_t>(td)].producers == std::vector<int32_t>{f.Named("ab")});
  CHECK(f.g.TaskName(f.g.tensors[static_cast<size_t>(late)].producer) == "ab");
  CHECK(f.g.tensors[static_cast<size_t>(late)].producers == std::vector<int32_t>{f.Named("ab")});
}

TEST_CASE("RemoveTask moves iteration anchors to the neighbours", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t c = f.Add("c", f.cpu);
  const int32_t d = f.Add("d", f.cpu);
  f.Chain({a, b, c, d});
  f.AddIteration("step1", a, b);
  f.AddIteration("step2", c, d);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(a).ok());  // begin -> next
  REQUIRE(editor.RemoveTask(d).ok());  // end -> previous
  f.Commit(editor);
  CHECK(f.g.TaskName(f.g.iterations[0].begin_task) == "b");
  CHECK(f.g.TaskName(f.g.iterations[0].end_task) == "b");
  CHECK(f.g.TaskName(f.g.iterations[1].begin_task) == "c");
  CHECK(f.g.TaskName(f.g.iterations[1].end_task) == "c");
}

TEST_CASE("RemoveTask refuses to remove an iteration's only task", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  f.AddIteration("ProfilerStep#3", a, a);
  GraphEditor editor(f.g);
  const absl::Status s = editor.RemoveTask(a);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("only task") && Catch::Contains("ProfilerStep#3"));
}

TEST_CASE("a refused RemoveTask leaves the graph as it was", "[editor]") {
  // The error is recoverable (a Status), so the edit must not half happen:
  // today the task's edges are already dropped and the iteration's anchors
  // set to -1 when the "only task" error is returned.
  Fixture f;
  const int32_t x = f.Add("x", f.cpu2);
  const int32_t a = f.Add("a", f.cpu);
  f.g.AddEdge(x, a, EdgeKind::kData);
  f.AddIteration("ProfilerStep#3", a, a);
  GraphEditor editor(f.g);
  REQUIRE_FALSE(editor.RemoveTask(a).ok());
  CHECK_FALSE(editor.removed(a));
  CHECK(editor.InEdges(a).size() == 1);
  CHECK(f.g.iterations[0].begin_task == a);
  CHECK(f.g.iterations[0].end_task == a);
  CHECK(editor.Commit().ok());
}

TEST_CASE("RemoveTask moves an anchor alone on its resource to another task of its iteration",
          "[editor]") {
  // The iteration has other tasks (on another thread): removing the anchor
  // is not removing the iteration's only task.
  Fixture f;
  const int32_t a = f.Add("a", f.cpu2);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t c = f.Add("c", f.cpu);
  f.Chain({b, c});
  f.g.AddEdge(a, b, EdgeKind::kThread);
  for (int32_t t : {a, b, c}) f.g.tasks[static_cast<size_t>(t)].iteration = 0;
  f.AddIteration("ProfilerStep#1", a, c);
  GraphEditor editor(f.g);
  const absl::Status s = editor.RemoveTask(a);
  INFO(s.message());
  REQUIRE(s.ok());
  f.Commit(editor);
  CHECK(f.g.TaskName(f.g.iterations[0].begin_task) == "b");
}

TEST_CASE("RemoveTask refuses a removed or unknown task", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  f.Chain({a, b});
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(a).ok());
  const int64_t edits = editor.num_edits();
  const absl::Status again = editor.RemoveTask(a);
  CHECK(again.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(again.message()), Catch::Contains("already removed"));
  CHECK(editor.num_edits() == edits);
  CHECK(editor.RemoveTask(7).code() == absl::StatusCode::kInvalidArgument);
  CHECK(editor.RemoveTask(-1).code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("removing the kernel a sync waited for keeps the sync waiting for the stream", "[editor]") {
  // cpu: launch1 -> launch2 -> sync; gpu: k1 -> k2; removing k2 must leave
  // sync waiting on k1 (through the bypass) rather than free.
  Fixture f;
  const int32_t l1 = f.Add("launch1", f.cpu, 5);
  const int32_t l2 = f.Add("launch2", f.cpu, 5);
  const int32_t sync = f.Add("sync", f.cpu, 1);
  const int32_t k1 = f.Add("k1", f.gpu, 100);
  const int32_t k2 = f.Add("k2", f.gpu, 50);
  f.Chain({l1, l2, sync});
  f.Chain({k1, k2});
  f.g.AddEdge(l1, k1, EdgeKind::kLaunch);
  f.g.AddEdge(l2, k2, EdgeKind::kLaunch);
  f.g.AddEdge(k2, sync, EdgeKind::kSync);
  f.g.BuildAdjacency();
  absl::StatusOr<Schedule> before = Simulate(f.g);
  REQUIRE(before.ok());
  CHECK(before->end_ns[static_cast<size_t>(sync)] == 155);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(k2).ok());
  f.Commit(editor);
  absl::StatusOr<Schedule> after = Simulate(f.g);
  REQUIRE(after.ok());
  // A stream sync still waits for the work left on the stream: k1.
  CHECK(after->end_ns[static_cast<size_t>(f.Named("k1"))] == 105);
  CHECK(after->end_ns[static_cast<size_t>(f.Named("sync"))] == 105);
}

// --- ScaleDuration, MergeTasks, SetPriority -------------------------------------------------

TEST_CASE("ScaleDuration rounds, clamps negative factors and counts only real changes", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu, 15);
  GraphEditor editor(f.g);
  editor.ScaleDuration(a, 1.0);
  CHECK(editor.num_edits() == 0);
  editor.ScaleDuration(a, 0.5);  // 7.5 rounds half away from zero
  CHECK(f.g.tasks[static_cast<size_t>(a)].duration_ns == 8);
  CHECK(editor.num_edits() == 1);
  editor.ScaleDuration(a, 3.0);
  CHECK(f.g.tasks[static_cast<size_t>(a)].duration_ns == 24);
  editor.ScaleDuration(a, -2.0);
  CHECK(f.g.tasks[static_cast<size_t>(a)].duration_ns == 0);
  CHECK(editor.num_edits() == 3);
}

TEST_CASE("MergeTasks replaces a group by one task that keeps its external dependencies", "[editor]") {
  Fixture f;
  const int32_t l1 = f.Add("launch1", f.cpu, 5, 2);
  const int32_t l2 = f.Add("launch2", f.cpu, 5);
  const int32_t l3 = f.Add("launch3", f.cpu, 5);
  const int32_t sync = f.Add("sync", f.cpu, 1);
  const int32_t k0 = f.Add("k0", f.gpu, 40, 1);
  const int32_t k1 = f.Add("k1", f.gpu, 10, 4);
  const int32_t k2 = f.Add("k2", f.gpu, 20, 6);
  const int32_t k3 = f.Add("k3", f.gpu, 30, 8);
  f.Chain({l1, l2, l3, sync});
  f.Chain({k0, k1, k2, k3});
  f.g.AddEdge(l1, k1, EdgeKind::kLaunch, 3);
  f.g.AddEdge(l2, k2, EdgeKind::kLaunch, 3);
  f.g.AddEdge(l3, k3, EdgeKind::kLaunch, 3);
  f.g.AddEdge(k2, sync, EdgeKind::kSync, 9);
  f.g.AddEdge(k1, k2, EdgeKind::kData);  // internal: dropped
  f.AddIteration("step", l1, k2);
  const int32_t grad = f.AddTensor("grad", k2);
  GraphEditor editor(f.g);
  absl::StatusOr<int32_t> merged = editor.MergeTasks({k2, k1}, 25, "fused_k1_k2");
  REQUIRE(merged.ok());
  CHECK(editor.removed(k1));
  CHECK(editor.removed(k2));
  f.Commit(editor);
  CHECK(f.g.tasks.size() == 7);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"k0", "fused_k1_k2", "k3"});
  const Task& m = f.g.tasks[static_cast<size_t>(f.Named("fused_k1_k2"))];
  CHECK(m.duration_ns == 25);
  CHECK(m.gap_ns == 4);  // the first's
  CHECK(m.resource == f.gpu);
  CHECK(m.kind == TaskKind::kKernel);
  CHECK(m.trace_event == -1);
  CHECK(f.g.tasks[static_cast<size_t>(f.Named("k3"))].gap_ns == 8);
  CHECK(f.LagOf("launch1", "fused_k1_k2", EdgeKind::kLaunch) == 3);
  CHECK(f.LagOf("launch2", "fused_k1_k2", EdgeKind::kLaunch) == 3);
  CHECK(f.LagOf("fused_k1_k2", "sync", EdgeKind::kSync) == 9);
  CHECK(f.Edge("launch3", "k3", EdgeKind::kLaunch));
  for (const Edge& e : f.g.edges) CHECK(e.from != e.to);
  CHECK(f.g.tensors[static_cast<size_t>(grad)].producer == f.Named("fused_k1_k2"));
  CHECK(f.g.TaskName(f.g.iterations[0].end_task) == "fused_k1_k2");
}

TEST_CASE("MergeTasks at the front of a resource keeps the first task's gap", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu, 10, 100);
  const int32_t b = f.Add("b", f.gpu, 10, 5);
  const int32_t c = f.Add("c", f.gpu, 10, 5);
  f.Chain({a, b, c});
  GraphEditor editor(f.g);
  REQUIRE(editor.MergeTasks({a, b}, 12, "ab").ok());
  f.Commit(editor);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"ab", "c"});
  CHECK(f.g.tasks[static_cast<size_t>(f.Named("ab"))].gap_ns == 100);
  f.g.BuildAdjacency();
  absl::StatusOr<Schedule> s = Simulate(f.g);
  REQUIRE(s.ok());
  CHECK(s->makespan_ns == 100 + 12 + 5 + 10);
}

TEST_CASE("MergeTasks moves an iteration that began at the group to the merged task", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.gpu);
  f.Chain({a, b, c});
  f.AddIteration("step", a, c);
  GraphEditor editor(f.g);
  REQUIRE(editor.MergeTasks({a, b}, 12, "ab").ok());
  f.Commit(editor);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"ab", "c"});
  // The merged task does the iteration's first work: the span starts there.
  CHECK(f.g.TaskName(f.g.iterations[0].begin_task) == "ab");
}

TEST_CASE("MergeTasks makes the merged task produce what a non-adjacent member produced", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.gpu);
  const int32_t d = f.Add("d", f.gpu);
  f.Chain({a, b, c, d});
  const int32_t grad = f.AddTensor("grad", c);
  GraphEditor editor(f.g);
  REQUIRE(editor.MergeTasks({a, c}, 12, "ac").ok());
  f.Commit(editor);
  CHECK(ChainOf(f.g, f.gpu) == std::vector<std::string>{"ac", "b", "d"});
  CHECK(f.g.TaskName(f.g.tensors[static_cast<size_t>(grad)].producer) == "ac");  // not b
}

TEST_CASE("MergeTasks refuses an empty group, mixed resources and removed tasks", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  const int32_t b = f.Add("b", f.gpu);
  const int32_t c = f.Add("c", f.cpu);
  f.Chain({a, b});
  GraphEditor editor(f.g);
  absl::StatusOr<int32_t> empty = editor.MergeTasks({}, 1, "none");
  CHECK(empty.status().code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int32_t> mixed = editor.MergeTasks({a, c}, 1, "mixed");
  CHECK(mixed.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(mixed.status().message()), Catch::Contains("different resources"));
  CHECK(editor.num_edits() == 0);  // nothing was touched
  REQUIRE(editor.RemoveTask(b).ok());
  absl::StatusOr<int32_t> gone = editor.MergeTasks({a, b}, 1, "gone");
  CHECK(gone.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("SetPriority sets the task's priority", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.gpu);
  GraphEditor editor(f.g);
  editor.SetPriority(a, 7);
  CHECK(f.g.tasks[static_cast<size_t>(a)].priority == 7);
}

// --- Commit ----------------------------------------------------------------------------------

TEST_CASE("Commit compacts ids in order and remaps edges, tensors and iterations", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t k = f.Add("k", f.gpu);
  const int32_t c = f.Add("c", f.cpu);
  const int32_t d = f.Add("d", f.cpu);
  f.Chain({a, b, c, d});
  f.g.AddEdge(c, k, EdgeKind::kLaunch, 2);
  f.AddIteration("step", c, d);
  const int32_t t = f.AddTensor("grad", k);
  GraphEditor editor(f.g);
  REQUIRE(editor.RemoveTask(a).ok());
  REQUIRE(editor.RemoveTask(b).ok());
  Task n = f.g.tasks[static_cast<size_t>(k)];
  n.name = f.g.strings.Intern("n");
  const int32_t ni = editor.AddTask(n);
  editor.InsertAfterOnResource(k, ni);
  editor.AddEdge(ni, d, EdgeKind::kSync);
  f.Commit(editor);
  std::vector<std::string> names;
  for (size_t i = 0; i < f.g.tasks.size(); ++i) names.emplace_back(f.g.TaskName(static_cast<int32_t>(i)));
  CHECK(names == std::vector<std::string>{"k", "c", "d", "n"});
  CHECK(f.g.has_adjacency());
  CHECK(f.LagOf("c", "k", EdgeKind::kLaunch) == 2);
  CHECK(f.Edge("c", "d", EdgeKind::kSequential));
  CHECK(f.Edge("k", "n", EdgeKind::kSequential));
  CHECK(f.Edge("n", "d", EdgeKind::kSync));
  CHECK(f.g.edges.size() == 4);
  for (const Edge& e : f.g.edges) {
    CHECK(e.from >= 0);
    CHECK(e.from < 4);
    CHECK(e.to >= 0);
    CHECK(e.to < 4);
  }
  CHECK(f.g.iterations[0].begin_task == 1);
  CHECK(f.g.iterations[0].end_task == 2);
  CHECK(f.g.tensors[static_cast<size_t>(t)].producer == 0);
  CHECK(f.g.tensors[static_cast<size_t>(t)].producers == std::vector<int32_t>{0});
  // The rebuilt adjacency matches the edges.
  const int32_t dd = f.Named("d");
  CHECK(f.g.in_edges(dd).size() == 2);
  for (int32_t e : f.g.in_edges(dd)) CHECK(f.g.edges[static_cast<size_t>(e)].to == dd);
  CHECK(f.g.Validate().ok());
}

TEST_CASE("Commit rejects an edit that leaves the graph invalid", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t k = f.Add("k", f.gpu);
  f.Chain({a, b});
  f.g.AddEdge(a, k, EdgeKind::kLaunch);
  GraphEditor editor(f.g);
  SECTION("a cycle") {
    editor.AddEdge(k, a, EdgeKind::kData);
    const absl::Status s = editor.Commit();
    CHECK_FALSE(s.ok());
    CHECK_THAT(std::string(s.message()), Catch::Contains("cycle"));
  }
  SECTION("a broken resource chain") {
    Task x = f.g.tasks[static_cast<size_t>(b)];
    x.name = f.g.strings.Intern("x");
    editor.AddEdge(a, editor.AddTask(x), EdgeKind::kSequential);  // a now has two successors
    const absl::Status s = editor.Commit();
    CHECK_FALSE(s.ok());
    CHECK_THAT(std::string(s.message()), Catch::Contains("resource order broken"));
  }
}

TEST_CASE("Commit after duration edits only keeps the graph's ids, edges and adjacency", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t b = f.Add("b", f.cpu);
  const int32_t k = f.Add("k", f.gpu, 40);
  f.Chain({a, b});
  f.g.AddEdge(a, k, EdgeKind::kLaunch, 2);
  f.g.AddEdge(a, k, EdgeKind::kLaunch, 3);  // a repeat with a lag: compaction keeps it
  f.g.BuildAdjacency();
  const std::vector<int32_t> in_k(f.g.in_edges(k).begin(), f.g.in_edges(k).end());
  GraphEditor editor(f.g);
  editor.ScaleDuration(k, 0.5);
  editor.SetPriority(b, 3);
  f.Commit(editor);
  CHECK(f.g.tasks.size() == 3);
  CHECK(f.g.tasks[static_cast<size_t>(k)].duration_ns == 20);
  CHECK(f.g.tasks[static_cast<size_t>(b)].priority == 3);
  CHECK(f.g.edges.size() == 3);
  CHECK(f.g.has_adjacency());
  CHECK(std::vector<int32_t>(f.g.in_edges(k).begin(), f.g.in_edges(k).end()) == in_k);
}

TEST_CASE("Commit after duration edits still drops what compaction drops", "[editor]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu);
  const int32_t k = f.Add("k", f.gpu, 40);
  f.g.AddEdge(a, k, EdgeKind::kLaunch, 2);
  SECTION("an edge that repeats an earlier one without a lag") { f.g.AddEdge(a, k, EdgeKind::kLaunch); }
  SECTION("a task's edge to itself") { f.g.AddEdge(k, k, EdgeKind::kData); }
  GraphEditor editor(f.g);
  editor.ScaleDuration(k, 0.5);
  f.Commit(editor);
  REQUIRE(f.g.edges.size() == 1);
  CHECK(f.g.edges[0].lag_ns == 2);
  CHECK(f.g.out_edges(a).size() == 1);
  CHECK(f.g.out_edges(k).size() == 0);
}

TEST_CASE("KernelFunctionName keeps the function, not its types, parameters or anonymous namespaces", "[editor]") {
  CHECK(KernelFunctionName("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                           "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
                           "at::detail::Array<char*, 3>)") == "at::native::vectorized_elementwise_kernel");
  CHECK(KernelFunctionName("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4>(x)") ==
        "at::native::::catarraybatchedcopy");
  CHECK(KernelFunctionName("volta_sgemm_128x64_nn") == "volta_sgemm_128x64_nn");
  CHECK(KernelFunctionName("") == "");
}
