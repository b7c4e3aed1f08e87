// Tests for daydream/sim/simulator.h: the replay semantics on hand-made
// graphs — resource order, gaps, edge kinds, priorities, determinism,
// deadlocks and the critical path.
#include "daydream/sim/simulator.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::SharedTracePath;

namespace {

// A graph with `n` resources named r0..r(n-1); tasks are added by the tests.
struct Fixture {
  Graph g;

  explicit Fixture(int resources = 2) {
    for (int r = 0; r < resources; ++r) {
      g.AddResource(Resource{r == 0 ? ResourceKind::kCpuThread : ResourceKind::kGpuStream, 0, r,
                             g.strings.Intern("r" + std::to_string(r))});
    }
  }

  int32_t Add(int32_t resource, TimeNs duration, TimeNs gap = 0, int32_t priority = 0) {
    Task t;
    t.name = g.strings.Intern("t" + std::to_string(g.tasks.size()));
    t.resource = resource;
    t.duration_ns = duration;
    t.gap_ns = gap;
    t.priority = priority;
    t.kind = resource == 0 ? TaskKind::kCpuOp : TaskKind::kKernel;
    return g.AddTask(t);
  }

  Schedule Run() {
    const absl::Status valid = g.Validate();
    INFO(valid.message());
    REQUIRE(valid.ok());
    g.BuildAdjacency();
    auto s = Simulate(g);
    INFO((s.ok() ? std::string() : std::string(s.status().message())));
    REQUIRE(s.ok());
    return std::move(s).value();
  }
};

TimeNs StartOf(const Schedule& s, int32_t t) { return s.start_ns[static_cast<size_t>(t)]; }
TimeNs EndOf(const Schedule& s, int32_t t) { return s.end_ns[static_cast<size_t>(t)]; }

}  // namespace

TEST_CASE("simulator runs a chain on one resource with gaps", "[simulator]") {
  Fixture f(1);
  const int32_t a = f.Add(0, 10, 5);
  const int32_t b = f.Add(0, 20, 3);
  const int32_t c = f.Add(0, 5, 0);
  f.g.AddEdge(a, b, EdgeKind::kSequential);
  f.g.AddEdge(b, c, EdgeKind::kSequential);
  const Schedule s = f.Run();
  CHECK(StartOf(s, a) == 5);  // the gap applies before the first task too
  CHECK(EndOf(s, a) == 15);
  CHECK(StartOf(s, b) == 18);
  CHECK(EndOf(s, b) == 38);
  CHECK(StartOf(s, c) == 38);
  CHECK(EndOf(s, c) == 43);
  CHECK(s.makespan_ns == 43);
  CHECK(s.last_task == c);
  REQUIRE(s.busy_ns.size() == 1);
  CHECK(s.busy_ns[0] == 35);
  CHECK(s.binding_task[static_cast<size_t>(b)] == a);
  CHECK(s.binding_kind[static_cast<size_t>(b)] == BindingKind::kResource);
}

TEST_CASE("simulator runs one task at a time on a resource even without edges", "[simulator]") {
  Fixture f(1);
  const int32_t a = f.Add(0, 10);
  const int32_t b = f.Add(0, 10);
  const Schedule s = f.Run();
  CHECK(StartOf(s, a) == 0);
  CHECK(StartOf(s, b) == 10);  // trace order (lower id first)
  CHECK(s.makespan_ns == 20);
}

TEST_CASE("simulator runs tasks on two resources in parallel", "[simulator]") {
  Fixture f(2);
  const int32_t a = f.Add(0, 10);
  const int32_t b = f.Add(1, 20);
  const Schedule s = f.Run();
  CHECK(StartOf(s, a) == 0);
  CHECK(StartOf(s, b) == 0);
  CHECK(s.makespan_ns == 20);
  CHECK(s.last_task == b);
  CHECK(s.busy_ns == std::vector<TimeNs>{10, 20});
}

TEST_CASE("simulator starts a task at max(ready, resource free + gap)", "[simulator]") {
  Fixture f(2);
  const int32_t x = f.Add(0, 10);
  SECTION("ready time wins") {
    const int32_t y = f.Add(1, 5, /*gap=*/2);
    f.g.AddEdge(x, y, EdgeKind::kStreamWait, 3);
    const Schedule s = f.Run();
    CHECK(StartOf(s, y) == 13);
    CHECK(s.binding_task[static_cast<size_t>(y)] == x);
    CHECK(s.binding_kind[static_cast<size_t>(y)] == BindingKind::kEdge);
  }
  SECTION("resource free + gap wins") {
    const int32_t w = f.Add(1, 50);
    const int32_t z = f.Add(1, 5, /*gap=*/4);
    f.g.AddEdge(x, z, EdgeKind::kStreamWait, 3);
    f.g.AddEdge(w, z, EdgeKind::kSequential);
    const Schedule s = f.Run();
    CHECK(StartOf(s, z) == 54);
    CHECK(s.binding_task[static_cast<size_t>(z)] == w);
    CHECK(s.binding_kind[static_cast<size_t>(z)] == BindingKind::kResource);
  }
}

TEST_CASE("simulator releases a launch edge's head from the tail's end plus lag", "[simulator]") {
  Fixture f(2);
  const int32_t call = f.Add(0, 10);
  const int32_t kernel = f.Add(1, 5);
  f.g.AddEdge(call, kernel, EdgeKind::kLaunch, 2);
  const Schedule s = f.Run();
  CHECK(StartOf(s, kernel) == 12);
  CHECK(EndOf(s, kernel) == 17);
}

TEST_CASE("simulator releases a blocking launch's head from the tail's start plus lag", "[simulator]") {
  Fixture f(2);
  const int32_t before = f.Add(0, 7);
  const int32_t call = f.Add(0, 10);
  const int32_t copy = f.Add(1, 5);
  f.g.AddEdge(before, call, EdgeKind::kSequential);
  f.g.AddEdge(call, copy, EdgeKind::kBlockingLaunch, 2);
  const Schedule s = f.Run();
  CHECK(StartOf(s, call) == 7);
  CHECK(StartOf(s, copy) == 9);  // start-to-start: 7 + 2, while the call still runs
  CHECK(s.binding_task[static_cast<size_t>(copy)] == call);
}

TEST_CASE("simulator holds a sync edge's head open until the tail ends plus lag", "[simulator]") {
  Fixture f(2);
  const int32_t kernel = f.Add(1, 30);
  SECTION("the wait is longer than the call") {
    const int32_t sync = f.Add(0, 5);
    f.g.AddEdge(kernel, sync, EdgeKind::kSync, 4);
    const Schedule s = f.Run();
    CHECK(StartOf(s, sync) == 0);  // end-to-end: the call starts right away
    CHECK(EndOf(s, sync) == 34);
    CHECK(s.binding_task[static_cast<size_t>(sync)] == kernel);
    CHECK(s.binding_kind[static_cast<size_t>(sync)] == BindingKind::kEndEdge);
  }
  SECTION("the call's own duration is longer") {
    const int32_t sync = f.Add(0, 50);
    f.g.AddEdge(kernel, sync, EdgeKind::kSync, 4);
    const Schedule s = f.Run();
    CHECK(EndOf(s, sync) == 50);
    CHECK(s.binding_kind[static_cast<size_t>(sync)] != BindingKind::kEndEdge);
  }
}

TEST_CASE("simulator replays a blocking copy: launch start-to-start, sync end-to-end", "[simulator]") {
  Fixture f(2);
  const int32_t call = f.Add(0, 3);
  const int32_t copy = f.Add(1, 20);
  const int32_t next = f.Add(0, 1);
  f.g.AddEdge(call, copy, EdgeKind::kBlockingLaunch, 2);
  f.g.AddEdge(copy, call, EdgeKind::kSync, 1);
  f.g.AddEdge(call, next, EdgeKind::kSequential);
  const Schedule s = f.Run();
  CHECK(StartOf(s, copy) == 2);
  CHECK(EndOf(s, copy) == 22);
  CHECK(EndOf(s, call) == 23);
  CHECK(StartOf(s, next) == 23);
}

TEST_CASE("simulator runs the highest-priority ready task first on a busy resource", "[simulator]") {
  // low and high become ready at 5, while the blocker holds the resource.
  Fixture f(2);
  const int32_t blocker = f.Add(0, 10);
  const int32_t gate = f.Add(1, 5);
  const int32_t low = f.Add(0, 5, 0, /*priority=*/0);
  const int32_t high = f.Add(0, 5, 0, /*priority=*/5);
  f.g.AddEdge(gate, low, EdgeKind::kData);
  f.g.AddEdge(gate, high, EdgeKind::kData);
  const Schedule s = f.Run();
  CHECK(StartOf(s, blocker) == 0);
  CHECK(StartOf(s, high) == 10);
  CHECK(StartOf(s, low) == 15);
}

TEST_CASE("simulator breaks ties among ready tasks by task id", "[simulator]") {
  // t3 and t4 become ready at the same time, t4's release first; the
  // resource is busy, so both wait and the lower id must go first.
  Fixture f(3);
  const int32_t blocker = f.Add(0, 10);  // 0, on r0
  const int32_t ra = f.Add(1, 5);        // 1, releases t4
  const int32_t rb = f.Add(2, 5);        // 2, releases t3
  const int32_t t3 = f.Add(0, 2);
  const int32_t t4 = f.Add(0, 2);
  f.g.AddEdge(ra, t4, EdgeKind::kStreamWait);
  f.g.AddEdge(rb, t3, EdgeKind::kStreamWait);
  const Schedule s = f.Run();
  CHECK(StartOf(s, blocker) == 0);
  CHECK(StartOf(s, t3) == 10);
  CHECK(StartOf(s, t4) == 12);
}

TEST_CASE("simulator orders tasks that become ready together on an idle resource by priority then id",
          "[simulator]") {
  // The contract: "Among ready tasks on one resource the higher priority wins,
  // then the lower task id". The simulator dispatches a task as soon as its
  // own ready event is processed, so on an idle resource the first ready
  // event processed wins, before the others due at the same time are queued.
  SECTION("priority") {
    Fixture f(1);
    const int32_t low = f.Add(0, 5, 0, /*priority=*/0);
    const int32_t high = f.Add(0, 5, 0, /*priority=*/5);
    const Schedule s = f.Run();
    CHECK(StartOf(s, high) == 0);
    CHECK(StartOf(s, low) == 5);
  }
  SECTION("task id") {
    Fixture f(3);
    const int32_t ra = f.Add(1, 5);  // releases t3 first
    const int32_t rb = f.Add(2, 5);  // releases t2
    const int32_t t2 = f.Add(0, 2);
    const int32_t t3 = f.Add(0, 2);
    f.g.AddEdge(ra, t3, EdgeKind::kStreamWait);
    f.g.AddEdge(rb, t2, EdgeKind::kStreamWait);
    const Schedule s = f.Run();
    CHECK(StartOf(s, t2) == 5);
    CHECK(StartOf(s, t3) == 7);
  }
}

TEST_CASE("a task released at the current instant waits for the instant's other ready tasks", "[simulator]") {
  // At 5, b's end (processed first: pushed at 0) releases y with no lag, and
  // x's ready event (pushed at 4, when a ended: lag 1) comes after it. y goes
  // straight into r0's queue without an event of its own; r0 must still pick
  // only once x is queued too, by priority, then id.
  auto run = [](int32_t x_priority, int32_t y_priority) {
    Fixture f(3);
    const int32_t a = f.Add(1, 4);
    const int32_t b = f.Add(2, 5);
    const int32_t x = f.Add(0, 2, 0, x_priority);
    const int32_t y = f.Add(0, 2, 0, y_priority);
    f.g.AddEdge(a, x, EdgeKind::kData, 1);
    f.g.AddEdge(b, y, EdgeKind::kData);
    const Schedule s = f.Run();
    return std::make_pair(StartOf(s, x), StartOf(s, y));
  };
  SECTION("the lower id first at equal priority") { CHECK(run(0, 0) == std::make_pair<TimeNs, TimeNs>(5, 7)); }
  SECTION("the higher priority first") {
    CHECK(run(0, 5) == std::make_pair<TimeNs, TimeNs>(7, 5));
    CHECK(run(5, 0) == std::make_pair<TimeNs, TimeNs>(5, 7));
  }
}

TEST_CASE("simulator is deterministic", "[simulator][real]") {
  auto trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
  REQUIRE(trace.ok());
  auto graph = BuildGraph(*trace);
  REQUIRE(graph.ok());
  auto first = Simulate(*graph);
  auto second = Simulate(*graph);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->start_ns == second->start_ns);
  CHECK(first->end_ns == second->end_ns);
  CHECK(first->binding_task == second->binding_task);
  CHECK(first->busy_ns == second->busy_ns);
  CHECK(first->makespan_ns == second->makespan_ns);
  CHECK(first->last_task == second->last_task);
  // Every task ran, and ran for at least its duration after its gap.
  for (size_t t = 0; t < graph->tasks.size(); ++t) {
    REQUIRE(first->end_ns[t] - first->start_ns[t] >= graph->tasks[t].duration_ns);
  }
}

namespace {

void CheckSameSchedule(const Schedule& a, const Schedule& b) {
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.binding_task == b.binding_task);
  CHECK(a.binding_kind == b.binding_kind);
  CHECK(a.binding_edge == b.binding_edge);
  CHECK(a.busy_ns == b.busy_ns);
  CHECK(a.makespan_ns == b.makespan_ns);
  CHECK(a.last_task == b.last_task);
}

}  // namespace

TEST_CASE("a Simulator run after run gives what Simulate gives, also after a deadlock", "[simulator][real]") {
  auto trace = ReadTraceFile(SharedTracePath("hta-a100-2rank-nccl/nccl_data.json.gz"));
  REQUIRE(trace.ok());
  auto big = BuildGraph(*trace);
  REQUIRE(big.ok());
  Fixture small(2);
  const int32_t a = small.Add(0, 5, 1, 0);
  const int32_t b = small.Add(1, 7, 0, 2);
  const int32_t c = small.Add(1, 3, 0, 9);
  small.g.AddEdge(a, b, EdgeKind::kLaunch, 2);
  small.g.AddEdge(a, c, EdgeKind::kLaunch, 2);
  small.g.BuildAdjacency();
  Fixture stuck(2);  // the deadlock of the test below
  const int32_t sync = stuck.Add(0, 5);
  const int32_t launch = stuck.Add(0, 5);
  const int32_t kernel = stuck.Add(1, 10);
  stuck.g.AddEdge(launch, kernel, EdgeKind::kLaunch);
  stuck.g.AddEdge(kernel, sync, EdgeKind::kSync);
  stuck.g.BuildAdjacency();

  auto big_alone = Simulate(*big);
  auto small_alone = Simulate(small.g);
  REQUIRE(big_alone.ok());
  REQUIRE(small_alone.ok());
  Simulator sim;
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    auto s1 = sim.Run(*big);
    REQUIRE(s1.ok());
    CheckSameSchedule(*s1, *big_alone);
    sim.Recycle(std::move(*s1));  // the larger schedule's memory, for the smaller graph
    auto s2 = sim.Run(small.g);
    REQUIRE(s2.ok());
    CheckSameSchedule(*s2, *small_alone);
    auto s3 = sim.Run(stuck.g);  // leaves events and queues behind
    REQUIRE_FALSE(s3.ok());
    CHECK_THAT(std::string(s3.status().message()), Catch::StartsWith("simulation deadlocked"));
  }
  Graph stale = small.g;
  stale.AddEdge(b, c, EdgeKind::kSequential);
  CHECK(absl::IsFailedPrecondition(sim.Run(stale).status()));
}

TEST_CASE("simulator reports a deadlock the validator cannot see", "[simulator]") {
  // A sync call (task 0) takes the thread first and waits for a kernel whose
  // launch (task 1) is queued behind it on the same thread. The event graph
  // has no cycle; only resource order makes it impossible.
  Fixture f(2);
  const int32_t sync = f.Add(0, 5);
  const int32_t launch = f.Add(0, 5);
  const int32_t kernel = f.Add(1, 10);
  f.g.AddEdge(launch, kernel, EdgeKind::kLaunch);
  f.g.AddEdge(kernel, sync, EdgeKind::kSync);
  REQUIRE(f.g.Validate().ok());
  f.g.BuildAdjacency();
  auto s = Simulate(f.g);
  REQUIRE_FALSE(s.ok());
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK(std::string(s.status().message()) == "simulation deadlocked: 3 tasks never finished, first task 0 (t0) on r0");
}

TEST_CASE("simulator refuses a graph whose adjacency is stale", "[simulator]") {
  Fixture f(1);
  const int32_t a = f.Add(0, 1);
  const int32_t b = f.Add(0, 1);
  f.g.BuildAdjacency();
  f.g.AddEdge(a, b, EdgeKind::kSequential);
  auto s = Simulate(f.g);
  REQUIRE_FALSE(s.ok());
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK_THAT(std::string(s.status().message()), Catch::Contains("stale"));
  Graph fresh;
  CHECK_FALSE(Simulate(fresh).ok());  // never built
}

TEST_CASE("simulator handles a graph without tasks", "[simulator]") {
  Graph g;
  g.BuildAdjacency();
  auto s = Simulate(g);
  REQUIRE(s.ok());
  CHECK(s->makespan_ns == 0);
  CHECK(s->last_task == -1);
  CHECK(CriticalPath(*s).empty());
}

TEST_CASE("CriticalPath follows binding predecessors back from the last task", "[simulator]") {
  // cpu: a -> call -> sync; gpu: kernel (launched by call) -> sync.
  Fixture f(2);
  const int32_t a = f.Add(0, 10);
  const int32_t call = f.Add(0, 5);
  const int32_t kernel = f.Add(1, 100);
  const int32_t sync = f.Add(0, 2);
  const int32_t side = f.Add(1, 1);  // finishes early, not on the path
  f.g.AddEdge(a, call, EdgeKind::kSequential);
  f.g.AddEdge(call, kernel, EdgeKind::kLaunch, 3);
  f.g.AddEdge(call, sync, EdgeKind::kSequential);
  f.g.AddEdge(kernel, sync, EdgeKind::kSync, 1);
  const Schedule s = f.Run();
  CHECK(s.last_task == sync);
  CHECK(EndOf(s, sync) == 10 + 5 + 3 + 100 + 1);
  CHECK(CriticalPath(s) == std::vector<int32_t>{a, call, kernel, sync});
  CHECK(CriticalPath(s, call) == std::vector<int32_t>{a, call});
  CHECK(CriticalPath(s, side) == std::vector<int32_t>{side});
}
