// Tests for daydream/passes/pipeline.h: passes run in order, the graph is
// verified after every pass that changed it, and errors name the pass.
#include "daydream/passes/pipeline.h"

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/base/time.h"
#include "daydream/passes/editor.h"

using namespace daydream;

namespace {

// cpu: a -> b; gpu: k, launched by a.
Graph SmallGraph() {
  Graph g;
  const int32_t cpu = g.AddResource(Resource{ResourceKind::kCpuThread, 1, 1, g.strings.Intern("thread 1")});
  const int32_t gpu = g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  auto add = [&](const char* name, int32_t resource, TaskKind kind) {
    Task t;
    t.name = g.strings.Intern(name);
    t.resource = resource;
    t.kind = kind;
    t.duration_ns = 10;
    return g.AddTask(t);
  };
  const int32_t a = add("a", cpu, TaskKind::kRuntime);
  const int32_t b = add("b", cpu, TaskKind::kCpuOp);
  const int32_t k = add("k", gpu, TaskKind::kKernel);
  g.AddEdge(a, b, EdgeKind::kSequential);
  g.AddEdge(a, k, EdgeKind::kLaunch);
  g.BuildAdjacency();
  return g;
}

// Logs its name (and whether the adjacency was current) and reports `changes`.
class RecordingPass : public Pass {
 public:
  RecordingPass(std::string name, std::vector<std::string>* log, bool changes)
      : name_(std::move(name)), log_(log), changes_(changes) {}
  std::string_view name() const override { return name_; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext& context) override {
    log_->push_back(name_ + (graph.has_adjacency() ? "" : " (stale adjacency)"));
    context.Note(name_ + " ran");
    return changes_;
  }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  bool changes_;
};

class FailingPass : public Pass {
 public:
  explicit FailingPass(std::string message = "no optimizer tasks found") : message_(std::move(message)) {}
  std::string_view name() const override { return "failing"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph&, PassContext&) override { return absl::FailedPreconditionError(message_); }

 private:
  std::string message_;
};

// Adds a task with an edge straight into the graph, leaving the adjacency
// stale; the next pass must still see it current.
class AddTaskPass : public Pass {
 public:
  std::string_view name() const override { return "add_task"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext&) override {
    Task t = graph.tasks[2];
    t.name = graph.strings.Intern("k2");
    const int32_t k2 = graph.AddTask(t);
    graph.AddEdge(2, k2, EdgeKind::kSequential);
    return true;
  }
};

// Breaks the graph the way `how` says and reports a change.
class BreakingPass : public Pass {
 public:
  explicit BreakingPass(std::string how) : how_(std::move(how)) {}
  std::string_view name() const override { return "breaking"; }

 protected:
  absl::StatusOr<bool> RunImpl(Graph& graph, PassContext&) override {
    if (how_ == "cycle") {
      graph.AddEdge(2, 0, EdgeKind::kData);  // k -> a, while a launches k
    } else if (how_ == "fork") {
      Task t = graph.tasks[1];
      t.name = graph.strings.Intern("c");
      graph.AddEdge(0, graph.AddTask(t), EdgeKind::kSequential);  // a gets two successors
    } else if (how_ == "rewired cycle") {
      graph.edges[0] = Edge{2, 0, EdgeKind::kData, 0};  // a -> b becomes k -> a, while a launches k
    } else if (how_ == "moved") {
      graph.tasks[1].resource = graph.tasks[2].resource;  // b leaves a's thread, its sequential edge stays
    } else if (how_ == "negative") {
      graph.tasks[1].duration_ns = -5;
    } else if (how_ == "slower") {
      graph.tasks[1].duration_ns *= 2;
    } else if (how_ == "huge") {
      graph.tasks[1].duration_ns = kMaxTimeNs - 1;
      graph.tasks[2].duration_ns = kMaxTimeNs - 1;
    }
    return true;
  }

 private:
  std::string how_;
};

}  // namespace

TEST_CASE("pipeline runs its passes in order and reports whether any changed the graph", "[pipeline]") {
  Graph g = SmallGraph();
  std::vector<std::string> log;
  PassContext context;
  Pipeline pipeline;
  CHECK(pipeline.size() == 0);
  SECTION("no pass changes anything") {
    pipeline.AddPass<RecordingPass>("first", &log, false);
    pipeline.AddPass(std::make_unique<RecordingPass>("second", &log, false));
    CHECK(pipeline.size() == 2);
    absl::StatusOr<bool> changed = pipeline.Run(g, context);
    REQUIRE(changed.ok());
    CHECK_FALSE(*changed);
    CHECK(log == std::vector<std::string>{"first", "second"});
    CHECK(context.notes == std::vector<std::string>{"first ran", "second ran"});
  }
  SECTION("one pass changes it") {
    pipeline.AddPass<RecordingPass>("first", &log, false);
    pipeline.AddPass<RecordingPass>("second", &log, true);
    pipeline.AddPass<RecordingPass>("third", &log, false);
    absl::StatusOr<bool> changed = pipeline.Run(g, context);
    REQUIRE(changed.ok());
    CHECK(*changed);
    CHECK(log == std::vector<std::string>{"first", "second", "third"});
  }
  SECTION("an empty pipeline changes nothing") {
    absl::StatusOr<bool> changed = pipeline.Run(g, context);
    REQUIRE(changed.ok());
    CHECK_FALSE(*changed);
  }
}

TEST_CASE("pipeline's AddPass<T> builds the pass in place and returns it", "[pipeline]") {
  std::vector<std::string> log;
  Pipeline pipeline;
  RecordingPass& pass = pipeline.AddPass<RecordingPass>("mine", &log, false);
  CHECK(pass.name() == "mine");
  CHECK(pipeline.size() == 1);
}

TEST_CASE("pipeline gives every pass a current adjacency", "[pipeline]") {
  Graph g = SmallGraph();
  g.AddEdge(1, 2, EdgeKind::kData);  // stale before the first pass
  std::vector<std::string> log;
  PassContext context;
  Pipeline pipeline;
  pipeline.AddPass<RecordingPass>("first", &log, false);
  pipeline.AddPass<AddTaskPass>();
  pipeline.AddPass<RecordingPass>("after_add", &log, false);
  absl::StatusOr<bool> changed = pipeline.Run(g, context);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(log == std::vector<std::string>{"first", "after_add"});
  CHECK(g.has_adjacency());
  CHECK(g.tasks.size() == 4);
}

TEST_CASE("pipeline error names the failing pass, keeps its code and stops there", "[pipeline]") {
  Graph g = SmallGraph();
  std::vector<std::string> log;
  PassContext context;
  Pipeline pipeline;
  pipeline.AddPass<RecordingPass>("before", &log, true);
  pipeline.AddPass<FailingPass>();
  pipeline.AddPass<RecordingPass>("after", &log, true);
  absl::StatusOr<bool> changed = pipeline.Run(g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(changed.status().message()) == "failing: no optimizer tasks found");
  CHECK(log == std::vector<std::string>{"before"});
}

TEST_CASE("pipeline does not name a pass twice when its error already does", "[pipeline]") {
  Graph g = SmallGraph();
  PassContext context;
  Pipeline pipeline;
  pipeline.AddPass<FailingPass>("failing: the graph has no GPU streams");
  absl::StatusOr<bool> changed = pipeline.Run(g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK(std::string(changed.status().message()) == "failing: the graph has no GPU streams");
}

TEST_CASE("pipeline blames times out of range on the pass's options, not on a bug", "[pipeline]") {
  Graph g = SmallGraph();
  PassContext context;
  Pipeline pipeline;
  pipeline.AddPass<BreakingPass>("huge");
  absl::StatusOr<bool> changed = pipeline.Run(g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.status().code() == absl::StatusCode::kOutOfRange);
  const std::string message(changed.status().message());
  CHECK_THAT(message, Catch::StartsWith("breaking: "));
  CHECK_THAT(message, Catch::Contains("cannot be simulated"));
}

TEST_CASE("pipeline reports a pass that leaves an invalid graph", "[pipeline]") {
  Graph g = SmallGraph();
  std::vector<std::string> log;
  PassContext context;
  Pipeline pipeline;
  std::string expected;
  SECTION("a cycle") {
    pipeline.AddPass<BreakingPass>("cycle");
    expected = "cycle";
  }
  SECTION("a cycle made by rewiring an edge (same number of tasks and edges)") {
    pipeline.AddPass<BreakingPass>("rewired cycle");
    expected = "cycle";
  }
  SECTION("a resource with two chains") {
    pipeline.AddPass<BreakingPass>("fork");
    expected = "resource order broken";
  }
  SECTION("a task moved off its resource's chain (every edge as it was)") {
    pipeline.AddPass<BreakingPass>("moved");
    expected = "on different resources";
  }
  SECTION("a negative duration") {
    pipeline.AddPass<BreakingPass>("negative");
    expected = "negative duration";
  }
  pipeline.AddPass<RecordingPass>("after", &log, false);
  absl::StatusOr<bool> changed = pipeline.Run(g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.status().code() == absl::StatusCode::kInternal);
  const std::string message(changed.status().message());
  CHECK_THAT(message, Catch::StartsWith("breaking left an invalid graph"));
  CHECK_THAT(message, Catch::Contains(expected));
  CHECK(log.empty());
}

TEST_CASE("pipeline skips the cycle search after a pass that leaves every edge as it was", "[pipeline]") {
  // The graph handed in already has a cycle (BuildGraph and LoadGraph never
  // give one); a pass that only rescales durations cannot have made it, so
  // the check after that pass does not look for cycles, while a pass that
  // adds an edge gets the full check.
  Graph g = SmallGraph();
  g.AddEdge(2, 0, EdgeKind::kData);  // k -> a, while a launches k
  g.BuildAdjacency();
  PassContext context;
  Pipeline durations_only;
  durations_only.AddPass<BreakingPass>("slower");
  absl::StatusOr<bool> changed = durations_only.Run(g, context);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(g.tasks[1].duration_ns == 20);
  Pipeline adds_an_edge;
  adds_an_edge.AddPass<AddTaskPass>();
  changed = adds_an_edge.Run(g, context);
  REQUIRE_FALSE(changed.ok());
  CHECK_THAT(std::string(changed.status().message()), Catch::Contains("cycle"));
}
