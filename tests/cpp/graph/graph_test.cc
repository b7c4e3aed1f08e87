// Tests for daydream/graph/graph.h: validation, summaries, CSR adjacency.
#include "daydream/graph/graph.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/base/strings.h"
#include "daydream/base/time.h"

using namespace daydream;

namespace {

// A CPU thread and a GPU stream; tasks are added by the tests.
struct Fixture {
  Graph g;
  int32_t cpu = -1;
  int32_t gpu = -1;

  Fixture() {
    cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 100, 101, g.strings.Intern("thread 101")});
    gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  }

  int32_t Add(const std::string& name, int32_t resource, TimeNs duration, TaskKind kind = TaskKind::kCpuOp,
              Phase phase = Phase::kForward) {
    Task t;
    t.name = g.strings.Intern(name);
    t.resource = resource;
    t.duration_ns = duration;
    t.kind = kind;
    t.phase = phase;
    return g.AddTask(t);
  }
};

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

int64_t Count(const std::vector<std::pair<std::string, int64_t>>& rows, const std::string& key) {
  for (const auto& [name, n] : rows) {
    if (name == key) return n;
  }
  return -1;
}

}  // namespace

TEST_CASE("Validate accepts a well-formed graph", "[graph]") {
  Fixture f;
  const int32_t a = f.Add("cudaLaunchKernel", f.cpu, 10, TaskKind::kRuntime);
  const int32_t b = f.Add("cudaDeviceSynchronize", f.cpu, 5, TaskKind::kSync);
  const int32_t k = f.Add("kernel", f.gpu, 50, TaskKind::kKernel);
  f.g.AddEdge(a, b, EdgeKind::kSequential);
  f.g.AddEdge(a, k, EdgeKind::kLaunch, 3);
  f.g.AddEdge(k, b, EdgeKind::kSync, 2);
  f.g.AddLayer(Layer{f.g.strings.Intern("fc"), -1});
  f.g.tasks[static_cast<size_t>(a)].layer = 0;
  f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), a, b, 0, 0, 100, 0});
  Tensor t;
  t.producer = k;
  f.g.AddTensor(t);
  CHECK(f.g.Validate().ok());
}

TEST_CASE("Validate catches a dangling edge", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("b", f.cpu, 1);
  f.g.AddEdge(0, 5, EdgeKind::kSequential);
  const absl::Status s = f.g.Validate();
  REQUIRE_FALSE(s.ok());
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(Msg(s) == "edge 0 (sequential): dangling end 0 -> 5 (2 tasks)");
  Fixture g2;
  g2.Add("a", g2.cpu, 1);
  g2.g.AddEdge(-1, 0, EdgeKind::kLaunch);
  CHECK_THAT(Msg(g2.g.Validate()), Catch::Contains("dangling end -1 -> 0"));
}

TEST_CASE("Validate refuses times whose arithmetic would overflow", "[graph][errors]") {
  const std::string limit = "times this large cannot be simulated (the limit is 4611686018427387904 ns, about 146 years)";
  SECTION("one duration at the limit") {
    Fixture f;
    f.Add("a", f.cpu, kMaxTimeNs);
    const absl::Status s = f.g.Validate();
    CHECK(absl::IsOutOfRange(s));
    CHECK(Msg(s) == "task 0 (a): " + limit);
  }
  SECTION("durations that only add up past the limit") {
    Fixture f;
    f.Add("a", f.cpu, kMaxTimeNs / 2);
    CHECK(f.g.Validate().ok());
    f.Add("b", f.gpu, kMaxTimeNs / 2 + 1);
    CHECK(Msg(f.g.Validate()) == "the tasks' durations and gaps together: " + limit);
  }
  SECTION("edge lags that push the sum past the limit") {
    Fixture f;
    f.Add("a", f.cpu, kMaxTimeNs / 2);
    f.Add("b", f.gpu, 1);
    f.g.AddEdge(0, 1, EdgeKind::kLaunch, kMaxTimeNs / 2);
    CHECK(Msg(f.g.Validate()) == "the tasks' durations, gaps and edge lags together: " + limit);
  }
  SECTION("recorded starts far apart") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.Add("b", f.cpu, 1);
    f.g.tasks[0].recorded_start_ns = -kMaxTimeNs / 2 - 5;
    f.g.tasks[1].recorded_start_ns = kMaxTimeNs / 2 + 5;
    CHECK(Msg(f.g.Validate()) == "the recorded span: " + limit);
  }
  SECTION("an iteration's recorded span") {
    Fixture f;
    const int32_t a = f.Add("a", f.cpu, 1);
    f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), a, a, 0, 0, kMaxTimeNs, 0});
    CHECK(Msg(f.g.Validate()) == "iteration 0 (ProfilerStep#1): " + limit);
  }
}

TEST_CASE("Validate refuses byte counts whose sums would overflow", "[graph][errors]") {
  const std::string limit = "sizes this large cannot be simulated (the limit is 4611686018427387904 bytes)";
  Fixture f;
  const int32_t a = f.Add("all_reduce", f.gpu, 1, TaskKind::kCollective);
  f.g.tasks[static_cast<size_t>(a)].bytes = kMaxBytes + 1;
  CHECK(absl::IsOutOfRange(f.g.Validate()));
  CHECK(Msg(f.g.Validate()) == "task 0 (all_reduce): " + limit);
  f.g.tasks[static_cast<size_t>(a)].bytes = kMaxBytes;
  CHECK(f.g.Validate().ok());
  Tensor t1, t2;
  t1.name = t2.name = f.g.strings.Intern("grad");
  t1.bytes = kMaxBytes / 2 + 1;
  t2.bytes = kMaxBytes / 2;
  f.g.AddTensor(t1);
  CHECK(f.g.Validate().ok());
  f.g.AddTensor(t2);
  CHECK(Msg(f.g.Validate()) == "the tensors together: " + limit);
}

TEST_CASE("Validate reports a broken invariant anywhere before a time out of range", "[graph][errors]") {
  // One pass over the tasks and one over the edges check everything; a range
  // error found first waits for the structural checks of the whole graph.
  Fixture f;
  const int32_t a = f.Add("a", f.cpu, 1);
  const int32_t b = f.Add("b", f.cpu, 1);
  f.g.AddEdge(a, b, EdgeKind::kSequential);
  f.g.tasks[0].recorded_start_ns = kMaxTimeNs;  // out of range, on the first task
  CHECK(absl::IsOutOfRange(f.g.Validate()));
  CHECK_THAT(Msg(f.g.Validate()), Catch::StartsWith("task 0 (a): times this large"));
  SECTION("a later task's bad resource") {
    f.g.tasks[1].resource = 5;
    CHECK(Msg(f.g.Validate()) == "task 1 (b): resource 5 does not exist (2 resources)");
  }
  SECTION("an edge's negative lag") {
    f.g.edges[0].lag_ns = -1;
    CHECK(Msg(f.g.Validate()) == "edge 0: negative lag");
  }
  SECTION("a tensor's missing producer") {
    Tensor t;
    t.name = f.g.strings.Intern("grad");
    t.producer = 7;
    f.g.AddTensor(t);
    CHECK(Msg(f.g.Validate()) == "tensor 0 (grad): producer 7 does not exist");
  }
  SECTION("the first failure in range order, not the largest") {
    f.g.edges[0].lag_ns = kMaxTimeNs;  // also out of range, after the task
    CHECK_THAT(Msg(f.g.Validate()), Catch::StartsWith("task 0 (a): "));
    f.g.tasks[0].recorded_start_ns = 0;
    CHECK_THAT(Msg(f.g.Validate()), Catch::StartsWith("edge 0's lag: "));
  }
}

TEST_CASE("Validate's quick pass misses no failure of a task or an edge", "[graph][errors]") {
  // A graph that passes is read once without a message or an early exit per
  // check; any one failure must still reach the loops that name it, in
  // every mode.
  using Edit = void (*)(Graph&);
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](Graph& g) { g.tasks[1].name = 99; }, "task 1: name id 99 out of range"},
      {[](Graph& g) { g.tasks[1].name = -1; }, "task 1: name id -1 out of range"},
      {[](Graph& g) { g.tasks[1].name = static_cast<StringId>(g.strings.size()); }, "task 1: name id "},
      {[](Graph& g) { g.tasks[1].resource = 2; }, "task 1 (b): resource 2 does not exist (2 resources)"},
      {[](Graph& g) { g.tasks[1].resource = -1; }, "task 1 (b): resource -1 does not exist (2 resources)"},
      {[](Graph& g) { g.tasks[1].gap_ns = -1; }, "task 1 (b): negative duration or gap"},
      {[](Graph& g) { g.tasks[1].duration_ns = -1; }, "task 1 (b): negative duration or gap"},
      {[](Graph& g) { g.tasks[1].layer = -2; }, "task 1: layer -2 does not exist"},
      {[](Graph& g) { g.tasks[1].layer = 1; }, "task 1: layer 1 does not exist"},
      {[](Graph& g) { g.tasks[1].iteration = 1; }, "task 1: iteration 1 does not exist (1 iterations)"},
      {[](Graph& g) { g.tasks[1].iteration = -2; }, "task 1: iteration -2 does not exist (1 iterations)"},
      {[](Graph& g) { g.tasks[1].kind = static_cast<TaskKind>(kNumTaskKinds); }, "task 1: unknown kind or phase"},
      {[](Graph& g) { g.tasks[1].phase = static_cast<Phase>(kNumPhases); }, "task 1: unknown kind or phase"},
      {[](Graph& g) { g.tasks[1].bytes = kMaxBytes + 1; }, "task 1 (b): sizes this large"},
      {[](Graph& g) { g.tasks[1].gap_ns = kMaxTimeNs; }, "task 1 (b): times this large"},
      {[](Graph& g) { g.tasks[1].recorded_start_ns = -kMaxTimeNs; }, "task 1 (b): times this large"},
      {[](Graph& g) { g.tasks[1].recorded_start_ns = kMaxTimeNs - 1; }, "task 1 (b): times this large"},  // its end
      {[](Graph& g) { g.tasks[1].duration_ns = kMaxTimeNs - 1; }, "the tasks' durations and gaps together"},
      {[](Graph& g) { g.edges[1].to = 3; }, "edge 1 (launch): dangling end 1 -> 3 (3 tasks)"},
      {[](Graph& g) { g.edges[1].from = -1; }, "edge 1 (launch): dangling end -1 -> 2 (3 tasks)"},
      {[](Graph& g) { g.edges[1].from = 3; }, "edge 1 (launch): dangling end 3 -> 2 (3 tasks)"},
      {[](Graph& g) { g.edges[1].to = -1; }, "edge 1 (launch): dangling end 1 -> -1 (3 tasks)"},
      {[](Graph& g) { g.edges[1].to = 1; }, "edge 1: task 1 depends on itself"},
      {[](Graph& g) { g.edges[1].lag_ns = -1; }, "edge 1: negative lag"},
      {[](Graph& g) { g.edges[1].kind = EdgeKind::kUnspecified; }, "edge 1: kind unspecified"},
      {[](Graph& g) { g.edges[1].lag_ns = kMaxTimeNs; }, "edge 1's lag: times this large"},
      {[](Graph& g) { g.edges[1].lag_ns = kMaxTimeNs - 1; }, "the tasks' durations, gaps and edge lags together"},
  };
  for (const auto& [edit, message] : cases) {
    Fixture f;
    const int32_t a = f.Add("a", f.cpu, 10);
    const int32_t b = f.Add("b", f.cpu, 10);
    const int32_t k = f.Add("k", f.gpu, 10, TaskKind::kKernel);
    f.g.AddEdge(a, b, EdgeKind::kSequential);
    f.g.AddEdge(b, k, EdgeKind::kLaunch, 5);
    f.g.AddLayer(Layer{f.g.strings.Intern("fc"), -1});
    f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), a, k, 0, 0, 100, 0});
    REQUIRE(f.g.Validate().ok());
    REQUIRE(f.g.ValidateEdited(true).ok());
    edit(f.g);
    INFO(message);
    CHECK_THAT(Msg(f.g.Validate()), Catch::StartsWith(message));
    CHECK_THAT(Msg(f.g.ValidateAllButCycles()), Catch::StartsWith(message));
    CHECK_THAT(Msg(f.g.ValidateEdited(true)), Catch::StartsWith(message));
  }
  // What the quick pass summed carries over to the iterations' offsets.
  Fixture f;
  const int32_t a = f.Add("a", f.cpu, kMaxTimeNs / 2);
  f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), a, a, 0, kMaxTimeNs / 2, 1, 0});
  CHECK(f.g.Validate().ok());
  f.g.iterations[0].end_offset_ns = kMaxTimeNs / 2 + 1;
  CHECK_THAT(Msg(f.g.Validate()), Catch::StartsWith("the durations, gaps, lags and iteration offsets together"));
}

TEST_CASE("ValidateEdited adds the resource chains, reported after every other error", "[graph][errors]") {
  Fixture f;
  const int32_t a = f.Add("a", f.cpu, 1);
  const int32_t b = f.Add("b", f.cpu, 1);
  const int32_t c = f.Add("c", f.cpu, 1);
  f.g.AddEdge(a, b, EdgeKind::kSequential);
  f.g.AddEdge(a, c, EdgeKind::kSequential);  // a has two successors on its thread
  CHECK(f.g.Validate().ok());                // not Validate's business
  for (const bool cycles : {true, false}) {
    const absl::Status s = f.g.ValidateEdited(cycles);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(Msg(s) == "resource order broken at edge 1 (0 -> 2): a task has two sequential successors or predecessors "
                    "on its resource");
  }
  CHECK(Msg(f.g.ValidateResourceChains()) == Msg(f.g.ValidateEdited(true)));
  f.g.tasks[2].duration_ns = kMaxTimeNs;
  CHECK_THAT(Msg(f.g.ValidateEdited(true)), Catch::StartsWith("task 2 (c): times this large"));
  f.g.tasks[2].duration_ns = 1;
  f.g.edges[1].to = b;
  f.g.tasks[1].resource = f.gpu;
  CHECK(Msg(f.g.ValidateEdited(false)) == "sequential edge 0 joins tasks 0 and 1 on different resources");
}

TEST_CASE("Validate catches a self edge", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("b", f.cpu, 1);
  f.g.AddEdge(0, 1, EdgeKind::kSequential);
  f.g.AddEdge(1, 1, EdgeKind::kThread);
  CHECK(Msg(f.g.Validate()) == "edge 1: task 1 depends on itself");
}

namespace {
// Tasks a, b (CPU) and c (GPU kernel): a -> b sequential, b launches c.
void AddChainOfThree(Fixture& f) {
  f.Add("a", f.cpu, 1);
  f.Add("b", f.cpu, 1);
  f.Add("c", f.gpu, 1, TaskKind::kKernel);
  f.g.AddEdge(0, 1, EdgeKind::kSequential);
  f.g.AddEdge(1, 2, EdgeKind::kLaunch);
}
}  // namespace

TEST_CASE("Validate catches a cycle of ordinary edges", "[graph]") {
  Fixture f;
  AddChainOfThree(f);
  f.g.AddEdge(2, 0, EdgeKind::kStreamWait);
  const absl::Status s = f.g.Validate();
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::StartsWith("the dependency edges form a cycle through task ") &&
                         Catch::Contains("3 tasks could never finish"));
  // The error walks the cycle, so that a pass's author sees which edge closed it.
  CHECK_THAT(Msg(s), Catch::Contains(": 0 (a) -> 1 (b) -> 2 (c) -> 0;"));
}

TEST_CASE("Validate shortens a long cycle in its error, and names its tasks, not those stuck after it", "[graph]") {
  Fixture f;
  // Twelve tasks in a ring after a task that only waits for it.
  const int32_t after = f.Add("after", f.cpu, 1);
  std::vector<int32_t> ring;
  for (int i = 0; i < 12; ++i) ring.push_back(f.Add(StrCat("r", i), f.gpu, 1, TaskKind::kKernel));
  for (int i = 0; i < 12; ++i) f.g.AddEdge(ring[static_cast<size_t>(i)], ring[static_cast<size_t>((i + 1) % 12)], EdgeKind::kStreamWait);
  f.g.AddEdge(ring[5], after, EdgeKind::kStreamWait);
  std::vector<int64_t> cycle;
  int64_t stuck = 0;
  const int64_t t = f.g.FindCycleTask(&stuck, &cycle);
  CHECK(stuck == 13);
  REQUIRE(cycle.size() == 12);
  CHECK(t == cycle[0]);
  CHECK(t != after);  // stuck behind the ring, not on it
  for (size_t i = 0; i < cycle.size(); ++i) {
    CHECK(cycle[(i + 1) % 12] == ring[static_cast<size_t>((cycle[i] - ring[0] + 1) % 12)]);
  }
  const std::string m = Msg(f.g.Validate());
  CHECK_THAT(m, Catch::Contains("... (6 more) -> ") && Catch::Contains("13 tasks could never finish"));
  CHECK_THAT(m, Catch::Contains(StrCat(": ", t, " (r", t - ring[0], ") -> ")));
}

TEST_CASE("FindCycleTask names a task on a cycle, or says there is none or an edge dangles", "[graph]") {
  Fixture f;
  AddChainOfThree(f);
  int64_t stuck = -7;
  CHECK(f.g.FindCycleTask(&stuck) == -1);
  CHECK(stuck == -7);  // untouched without a cycle
  f.g.AddEdge(2, 1, EdgeKind::kStreamWait);  // b and c wait on each other; a does not
  std::vector<int64_t> cycle;
  const int64_t t = f.g.FindCycleTask(&stuck, &cycle);
  CHECK((t == 1 || t == 2));
  CHECK((cycle == std::vector<int64_t>{1, 2} || cycle == std::vector<int64_t>{2, 1}));
  CHECK(cycle[0] == t);
  CHECK(stuck == 2);
  CHECK(f.g.ValidateAllButCycles().ok());  // everything else about the graph is fine
  CHECK_THAT(Msg(f.g.Validate()), Catch::Contains("cycle") && Catch::Contains("2 tasks could never finish"));
  f.g.AddEdge(0, 9, EdgeKind::kThread);
  CHECK(f.g.FindCycleTask() == Graph::kDanglingEdge);
  CHECK_THAT(Msg(f.g.ValidateAllButCycles()), Catch::Contains("dangling end"));
}

TEST_CASE("Validate sees a cycle made by launch and sync semantics", "[graph]") {
  // An asynchronous launch releases the kernel when the call ends, and the
  // sync edge holds the call's end until the kernel ends: neither can finish.
  Fixture f;
  const int32_t call = f.Add("cudaLaunchKernel", f.cpu, 10, TaskKind::kRuntime);
  const int32_t kernel = f.Add("k", f.gpu, 10, TaskKind::kKernel);
  f.g.AddEdge(call, kernel, EdgeKind::kLaunch);
  f.g.AddEdge(kernel, call, EdgeKind::kSync);
  const absl::Status s = f.g.Validate();
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains("cycle"));
}

TEST_CASE("Validate accepts a blocking launch paired with a sync edge", "[graph]") {
  // cudaMemcpy: the copy starts after the call starts (start-to-start) and the
  // call ends after the copy ends (end-to-end). Task edges run both ways, the
  // event graph has no cycle.
  Fixture f;
  const int32_t call = f.Add("cudaMemcpy", f.cpu, 10, TaskKind::kSync);
  const int32_t copy = f.Add("Memcpy HtoD", f.gpu, 10, TaskKind::kMemcpy);
  f.g.AddEdge(call, copy, EdgeKind::kBlockingLaunch, 2);
  f.g.AddEdge(copy, call, EdgeKind::kSync, 1);
  CHECK(f.g.Validate().ok());
  // ... but a sequential edge from the call to the copy closes the loop.
  f.g.AddEdge(call, copy, EdgeKind::kSequential);
  CHECK_THAT(Msg(f.g.Validate()), Catch::Contains("cycle"));
}

// An edge's ends in the event graph (node 2t task t's start, 2t+1 its
// end), from the edge kinds' documented semantics, written apart from the
// graph's own helpers.
std::pair<size_t, size_t> EventNodes(const Edge& e) {
  const bool from_start = e.kind == EdgeKind::kBlockingLaunch || e.kind == EdgeKind::kLaunchQueue;
  const bool to_end = e.kind == EdgeKind::kSync || e.kind == EdgeKind::kLaunchQueue;
  return {2 * static_cast<size_t>(e.from) + (from_start ? 0 : 1), 2 * static_cast<size_t>(e.to) + (to_end ? 1 : 0)};
}

// Whether the event graph has a cycle, by a depth-first search written
// apart from the graph's own check.
bool HasCycleByDepthFirst(const Graph& g) {
  const size_t nodes = 2 * g.tasks.size();
  std::vector<std::vector<size_t>> next(nodes);
  for (size_t t = 0; t < g.tasks.size(); ++t) next[2 * t].push_back(2 * t + 1);
  for (const Edge& e : g.edges) {
    const auto [tail, head] = EventNodes(e);
    next[tail].push_back(head);
  }
  std::vector<int> state(nodes, 0);  // 0 unseen, 1 on the path, 2 done
  for (size_t root = 0; root < nodes; ++root) {
    if (state[root] != 0) continue;
    std::vector<std::pair<size_t, size_t>> path{{root, 0}};  // node, next successor to try
    state[root] = 1;
    while (!path.empty()) {
      auto& [v, i] = path.back();
      if (i == next[v].size()) {
        state[v] = 2;
        path.pop_back();
        continue;
      }
      const size_t h = next[v][i++];
      if (state[h] == 1) return true;
      if (state[h] == 0) {
        state[h] = 1;
        path.emplace_back(h, 0);
      }
    }
  }
  return false;
}

TEST_CASE("FindCycleTask agrees with a depth-first search on graphs with few, short and many edges backwards",
          "[graph]") {
  // Edges from a task to a later one lead forward in the event graph's node
  // order; the check searches only around the edges that do not (few and
  // short in a built graph) unless they are many or span much of the graph.
  // Random graphs of each sort, with and without cycles, against a search
  // that knows nothing of that.
  const EdgeKind kinds[] = {EdgeKind::kSequential, EdgeKind::kLaunch,     EdgeKind::kSync,
                            EdgeKind::kStreamWait, EdgeKind::kThread,     EdgeKind::kData,
                            EdgeKind::kComm,       EdgeKind::kBlockingLaunch, EdgeKind::kLaunchQueue};
  std::mt19937 rng(20261130);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int searched_around = 0, with_cycle_around = 0, longer_cycles_around = 0, whole = 0, with_cycle_whole = 0;
  int none_backwards = 0;
  for (int round = 0; round < 3000; ++round) {
    Fixture f;
    const int n = uniform(2, 80);
    for (int t = 0; t < n; ++t) f.Add("t", t % 2 == 0 ? f.cpu : f.gpu, 10);
    const int sort = round % 3;  // none backwards; a few short ones; many or long ones
    for (int k = uniform(0, 3 * n); k > 0; --k) {
      const int from = uniform(0, n - 2);
      f.g.AddEdge(from, std::min(n - 1, from + uniform(1, 4)), kinds[uniform(0, 8)]);
    }
    const int backwards = sort == 0 ? 0 : sort == 1 ? uniform(1, std::max(1, n / 8)) : uniform(n / 4 + 1, n);
    const int reach = sort == 1 ? 2 : n;
    for (int k = 0; k < backwards; ++k) {
      const int from = uniform(0, n - 1);
      // Mostly to an earlier task; now and then to its own (a self loop for some kinds).
      const int to = uniform(0, 7) == 0 ? from : std::max(0, from - uniform(1, reach));
      f.g.AddEdge(from, to, kinds[uniform(0, 8)]);
    }
    // Which path the check would take, by the rule it follows: edges whose
    // tail node is not before their head node, and how much of the node
    // order they span.
    std::vector<std::pair<size_t, size_t>> back;
    for (const Edge& e : f.g.edges) {
      const auto [a, b] = EventNodes(e);
      if (a >= b) back.emplace_back(b, a);
    }
    std::sort(back.begin(), back.end());
    size_t spanned = 0;
    for (size_t i = 0; i < back.size();) {
      size_t hi = back[i].second;
      const size_t lo = back[i].first;
      for (++i; i < back.size() && back[i].first <= hi + 1; ++i) hi = std::max(hi, back[i].second);
      spanned += hi - lo + 1;
    }
    const size_t nodes = 2 * static_cast<size_t>(n);
    const bool cyclic = HasCycleByDepthFirst(f.g);
    std::vector<int64_t> cycle;
    const int64_t t = f.g.FindCycleTask(nullptr, &cycle);
    if (back.empty()) {
      ++none_backwards;
    } else if (back.size() <= nodes / 8 && spanned <= nodes / 4) {
      ++searched_around;
      with_cycle_around += cyclic;
      longer_cycles_around += cyclic && cycle.size() > 1;
    } else {
      ++whole;
      with_cycle_whole += cyclic;
    }
    INFO("round " << round << ", " << n << " tasks, " << f.g.edges.size() << " edges, " << back.size()
                  << " backwards spanning " << spanned << " nodes");
    REQUIRE((t >= 0) == cyclic);
    if (cyclic) CHECK(cycle.front() == t);
  }
  // Graphs of every sort were met, with and without cycles where there can
  // be one, and cycles through more than one task among those searched around.
  CHECK(none_backwards > 100);
  CHECK(searched_around > 100);
  CHECK(with_cycle_around > 20);
  CHECK(longer_cycles_around > 20);
  CHECK(searched_around - with_cycle_around > 20);
  CHECK(whole > 100);
  CHECK(with_cycle_whole > 20);
}

TEST_CASE("Validate catches a start-to-start loop of blocking launches only when it closes", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("b", f.gpu, 1, TaskKind::kMemcpy);
  f.g.AddEdge(0, 1, EdgeKind::kBlockingLaunch);
  f.g.AddEdge(1, 0, EdgeKind::kBlockingLaunch);  // start(a) <- start(b) <- start(a)
  CHECK_THAT(Msg(f.g.Validate()), Catch::Contains("cycle"));
}

TEST_CASE("Validate catches negative durations, gaps and lags", "[graph]") {
  SECTION("duration") {
    Fixture f;
    f.Add("a", f.cpu, -1);
    CHECK(Msg(f.g.Validate()) == "task 0 (a): negative duration or gap");
  }
  SECTION("gap") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.Add("b", f.cpu, 1);
    f.g.tasks[1].gap_ns = -5;
    CHECK(Msg(f.g.Validate()) == "task 1 (b): negative duration or gap");
  }
  SECTION("lag") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.Add("b", f.cpu, 1);
    f.g.AddEdge(0, 1, EdgeKind::kSequential, -3);
    CHECK(Msg(f.g.Validate()) == "edge 0: negative lag");
  }
}

TEST_CASE("Validate catches a bad resource id", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("b", 2, 1);
  CHECK(Msg(f.g.Validate()) == "task 1 (b): resource 2 does not exist (2 resources)");
  f.g.tasks[1].resource = -1;
  CHECK_THAT(Msg(f.g.Validate()), Catch::Contains("resource -1 does not exist"));
}

TEST_CASE("Validate catches bad layers, edge kinds, iteration anchors and tensor producers", "[graph]") {
  SECTION("layer") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.g.tasks[0].layer = 0;  // no layers
    CHECK(Msg(f.g.Validate()) == "task 0: layer 0 does not exist");
  }
  SECTION("edge kind") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.Add("b", f.cpu, 1);
    f.g.AddEdge(0, 1, EdgeKind::kUnspecified);
    CHECK(Msg(f.g.Validate()) == "edge 0: kind unspecified");
  }
  SECTION("iteration anchor") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), 0, 3, 0, 0, 10, 0});
    CHECK(Msg(f.g.Validate()) == "iteration 0 (ProfilerStep#1): anchor task out of range");
  }
  SECTION("tensor producer") {
    Fixture f;
    f.Add("a", f.cpu, 1);
    Tensor t;
    t.name = f.g.strings.Intern("grad");
    t.producer = 9;
    f.g.AddTensor(t);
    CHECK(Msg(f.g.Validate()) == "tensor 0 (grad): producer 9 does not exist");
  }
}

TEST_CASE("Validate catches a task whose iteration does not exist", "[graph]") {
  // Validate() checks iteration anchors but not Task::iteration, and
  // DeserializeGraph() relies on Validate(); MakeReplayReport() then indexes
  // its per-iteration arrays with the task's iteration (out of bounds).
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("k", f.gpu, 1, TaskKind::kKernel);
  f.g.iterations.push_back(Iteration{f.g.strings.Intern("ProfilerStep#1"), 0, 0, 0, 0, 10, 0});
  f.g.tasks[1].iteration = 5;
  CHECK_FALSE(f.g.Validate().ok());
  f.g.tasks[1].iteration = -2;
  CHECK_FALSE(f.g.Validate().ok());
}

TEST_CASE("Summarize counts tasks by kind and phase, edges and resources by kind", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 10, TaskKind::kCpuOp, Phase::kForward);
  f.Add("b", f.cpu, 20, TaskKind::kRuntime, Phase::kForward);
  f.Add("c", f.cpu, 30, TaskKind::kSync, Phase::kBackward);
  f.Add("k1", f.gpu, 40, TaskKind::kKernel, Phase::kBackward);
  f.Add("k2", f.gpu, 50, TaskKind::kCollective, Phase::kComm);
  f.Add("odd", f.gpu, 60, TaskKind::kUnspecified, Phase::kUnspecified);
  f.g.AddEdge(0, 1, EdgeKind::kSequential);
  f.g.AddEdge(1, 2, EdgeKind::kSequential);
  f.g.AddEdge(1, 3, EdgeKind::kLaunch);
  f.g.AddEdge(3, 2, EdgeKind::kSync);
  f.g.AddLayer(Layer{f.g.strings.Intern("fc"), -1});
  f.g.iterations.push_back(Iteration{0, 0, 2, 0, 0, 100, 0});
  const GraphSummary s = Summarize(f.g);
  CHECK(s.num_tasks == 6);
  CHECK(s.num_edges == 4);
  CHECK(s.num_resources == 2);
  CHECK(s.num_layers == 1);
  CHECK(s.num_tensors == 0);
  CHECK(s.num_iterations == 1);
  CHECK(s.total_task_time_ns == 210);
  CHECK(Count(s.tasks_by_kind, "cpu_op") == 1);
  CHECK(Count(s.tasks_by_kind, "runtime") == 1);
  CHECK(Count(s.tasks_by_kind, "sync") == 1);
  CHECK(Count(s.tasks_by_kind, "kernel") == 1);
  CHECK(Count(s.tasks_by_kind, "collective") == 1);
  CHECK(Count(s.tasks_by_kind, "memcpy") == 0);
  CHECK(Count(s.tasks_by_kind, "data_load") == 0);
  CHECK(Count(s.tasks_by_kind, "unspecified") == 1);
  CHECK(Count(s.tasks_by_phase, "forward") == 2);
  CHECK(Count(s.tasks_by_phase, "backward") == 2);
  CHECK(Count(s.tasks_by_phase, "comm") == 1);
  CHECK(Count(s.tasks_by_phase, "optimizer") == 0);
  CHECK(Count(s.tasks_by_phase, "unspecified") == 1);
  CHECK(Count(s.edges_by_kind, "sequential") == 2);
  CHECK(Count(s.edges_by_kind, "launch") == 1);
  CHECK(Count(s.edges_by_kind, "sync") == 1);
  CHECK(Count(s.edges_by_kind, "blocking_launch") == 0);
  CHECK(Count(s.resources_by_kind, "cpu_thread") == 1);
  CHECK(Count(s.resources_by_kind, "gpu_stream") == 1);
  CHECK(Count(s.resources_by_kind, "comm_channel") == 0);
  // Every kind is listed once, unspecified only when used.
  CHECK(s.tasks_by_kind.size() == static_cast<size_t>(kNumTaskKinds));
  CHECK(s.edges_by_kind.size() == static_cast<size_t>(kNumEdgeKinds - 1));
}

TEST_CASE("Summarize leaves out unspecified rows when nothing is unspecified", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 10);
  const GraphSummary s = Summarize(f.g);
  CHECK(Count(s.tasks_by_kind, "unspecified") == -1);
  CHECK(Count(s.tasks_by_phase, "unspecified") == -1);
  CHECK(s.tasks_by_kind.size() == static_cast<size_t>(kNumTaskKinds - 1));
}

TEST_CASE("BuildAdjacency lists out- and in-edges per task in edge order", "[graph]") {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Add("t" + std::to_string(i), f.cpu, 1);
  f.g.AddEdge(0, 2, EdgeKind::kSequential);  // edge 0
  f.g.AddEdge(1, 2, EdgeKind::kThread);      // edge 1
  f.g.AddEdge(0, 1, EdgeKind::kSequential);  // edge 2
  f.g.AddEdge(2, 3, EdgeKind::kSequential);  // edge 3
  f.g.AddEdge(0, 3, EdgeKind::kData);        // edge 4
  CHECK_FALSE(f.g.has_adjacency());
  f.g.BuildAdjacency();
  REQUIRE(f.g.has_adjacency());
  auto list = [](EdgeRange r) { return std::vector<int32_t>(r.begin(), r.end()); };
  CHECK(list(f.g.out_edges(0)) == std::vector<int32_t>{0, 2, 4});
  CHECK(list(f.g.out_edges(1)) == std::vector<int32_t>{1});
  CHECK(list(f.g.out_edges(2)) == std::vector<int32_t>{3});
  CHECK(f.g.out_edges(3).size() == 0);
  CHECK(f.g.in_edges(0).size() == 0);
  CHECK(list(f.g.in_edges(1)) == std::vector<int32_t>{2});
  CHECK(list(f.g.in_edges(2)) == std::vector<int32_t>{0, 1});
  CHECK(list(f.g.in_edges(3)) == std::vector<int32_t>{3, 4});
}

TEST_CASE("has_adjacency turns false when tasks or edges change", "[graph]") {
  Fixture f;
  f.Add("a", f.cpu, 1);
  f.Add("b", f.cpu, 1);
  f.g.BuildAdjacency();
  REQUIRE(f.g.has_adjacency());
  f.g.AddEdge(0, 1, EdgeKind::kSequential);
  CHECK_FALSE(f.g.has_adjacency());
  f.g.BuildAdjacency();
  CHECK(f.g.has_adjacency());
  CHECK(f.g.out_edges(0).size() == 1);
  f.Add("c", f.cpu, 1);
  CHECK_FALSE(f.g.has_adjacency());
}

TEST_CASE("kind names are the lowercase names used in summaries", "[graph]") {
  CHECK(TaskKindName(TaskKind::kDataLoad) == "data_load");
  CHECK(PhaseName(Phase::kOptimizer) == "optimizer");
  CHECK(EdgeKindName(EdgeKind::kStreamWait) == "stream_wait");
  CHECK(EdgeKindName(EdgeKind::kBlockingLaunch) == "blocking_launch");
  CHECK(ResourceKindName(ResourceKind::kCommChannel) == "comm_channel");
  CHECK(TensorRoleName(TensorRole::kOptimizerState) == "optimizer_state");
  CHECK(IsStartToStart(EdgeKind::kBlockingLaunch));
  CHECK_FALSE(IsStartToStart(EdgeKind::kLaunch));
  CHECK(IsLaunch(EdgeKind::kLaunch));
  CHECK(IsLaunch(EdgeKind::kBlockingLaunch));
  CHECK(IsEndToEnd(EdgeKind::kSync));
  CHECK_FALSE(IsEndToEnd(EdgeKind::kStreamWait));
}
