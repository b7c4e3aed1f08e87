// Tests for daydream/graph/profiler_overhead.h: the profiler's per-record cost
// comes out of the spans around each record, never below zero.
#include "daydream/graph/profiler_overhead.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::KinetoDoc;
using daydream::testing::MedianStep;
using daydream::testing::ParseOrDie;
using daydream::testing::TaskNamed;

namespace {

constexpr TimeNs kUs = 1000;

std::string Ev(const std::string& cat, const std::string& name, double ts, double dur, const std::string& args = "") {
  return "{\"ph\":\"X\",\"cat\":\"" + cat + "\",\"name\":\"" + name + "\",\"pid\":1,\"tid\":1,\"ts\":" +
         std::to_string(ts) + ",\"dur\":" + std::to_string(dur) + (args.empty() ? "" : ",\"args\":{" + args + "}") +
         "}";
}
std::string Cpu(const std::string& name, double ts, double dur) { return Ev("cpu_op", name, ts, dur); }
std::string Anno(const std::string& name, double ts, double dur) { return Ev("user_annotation", name, ts, dur); }

// Two iterations of: a module range around aten::linear (t/transpose/
// as_strided, then addmm), a gap, aten::relu, a gradient marker, aten::add_.
std::vector<std::string> TwoSteps() {
  std::vector<std::string> events;
  for (int i = 0; i < 2; ++i) {
    const double o = 100.0 * i;
    events.push_back(Anno("ProfilerStep#" + std::to_string(i + 1), o, 100));
    events.push_back(Anno("daydream.module: fc", o + 2, 40));
    events.push_back(Cpu("aten::linear", o + 4, 36));
    events.push_back(Cpu("aten::t", o + 6, 10));
    events.push_back(Cpu("aten::transpose", o + 8, 6));
    events.push_back(Cpu("aten::as_strided", o + 10, 2));
    events.push_back(Cpu("aten::addmm", o + 20, 18));
    events.push_back(Cpu("aten::relu", o + 50, 10));
    events.push_back(Anno("daydream.grad: fc.weight|float|[4,4]|64", o + 70, 1));
    events.push_back(Cpu("aten::add_", o + 90, 5));
  }
  return events;
}

std::string Join(const std::vector<std::string>& events) {
  std::string out;
  for (const auto& e : events) out += (out.empty() ? "" : ",") + e;
  return out;
}

struct Built {
  Trace trace;
  Graph graph;
};

Built Build(const std::vector<std::string>& events) {
  Built b{ParseOrDie(KinetoDoc(Join(events))), Graph()};
  auto g = BuildGraph(b.trace);
  REQUIRE(g.ok());
  b.graph = std::move(g).value();
  return b;
}

// The n-th task (0-based, in id order) named `name`.
const Task& Nth(const Graph& g, const std::string& name, int n) {
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    if (g.TaskName(static_cast<int32_t>(i)) == name && n-- == 0) return g.tasks[i];
  }
  FAIL("no task " << name);
  return g.tasks.front();
}

TimeNs Total(const Graph& g) {
  TimeNs sum = 0;
  for (const Task& t : g.tasks) sum += t.duration_ns + t.gap_ns;
  return sum;
}

}  // namespace

TEST_CASE("profiler overhead: zero per-record cost leaves the graph unchanged", "[profiler_overhead]") {
  Built b = Build(TwoSteps());
  const Graph before = b.graph;
  auto r = RemoveProfilerOverhead(b.trace, b.graph, ProfilerOverhead{});
  REQUIRE(r.ok());
  CHECK(r->removed_ns == 0);
  CHECK(r->records == 0);
  REQUIRE(b.graph.tasks.size() == before.tasks.size());
  for (size_t i = 0; i < before.tasks.size(); ++i) {
    CHECK(b.graph.tasks[i].duration_ns == before.tasks[i].duration_ns);
    CHECK(b.graph.tasks[i].gap_ns == before.tasks[i].gap_ns);
  }
  CHECK(MedianStep(b.graph) == MedianStep(before));
}

TEST_CASE("profiler overhead: each record's cost comes out of the span before its start and after its end",
          "[profiler_overhead]") {
  Built b = Build(TwoSteps());
  const Graph before = b.graph;
  ProfilerOverhead cost;
  cost.begin_ns = 300;
  cost.end_ns = 200;
  auto r = RemoveProfilerOverhead(b.trace, b.graph, cost);
  REQUIRE(r.ok());
  const Graph& g = b.graph;
  // Leaves keep their own span: their records' costs are outside it.
  CHECK(Nth(g, "aten::as_strided", 0).duration_ns == Nth(before, "aten::as_strided", 0).duration_ns);
  CHECK(Nth(g, "aten::addmm", 1).duration_ns == Nth(before, "aten::addmm", 1).duration_ns);
  // Before addmm: the ends of as_strided, transpose and t, addmm's begin.
  CHECK(Nth(before, "aten::addmm", 0).gap_ns - Nth(g, "aten::addmm", 0).gap_ns == 3 * 200 + 300);
  // Before the second as_strided: the end of add_ and of the first step,
  // the begins of the second step, module, linear, t, transpose, as_strided.
  CHECK(Nth(before, "aten::as_strided", 1).gap_ns - Nth(g, "aten::as_strided", 1).gap_ns == 2 * 200 + 6 * 300);
  // 2 x 10 records. The graph starts at the first as_strided: the begins
  // up to it (step, module, linear, t, transpose, as_strided) lie before
  // it; the ends of the last add_ and of the second step lie after the
  // thread's last task.
  CHECK(r->records == 20);
  CHECK(r->estimated_ns == 20 * 500 - 6 * 300 - 2 * 200);
  CHECK(r->removed_ns == r->estimated_ns);
  CHECK(Total(before) - Total(g) == r->removed_ns);
  CHECK(g.profiler_overhead.removed_ns == r->removed_ns);
  CHECK(MedianStep(g) < MedianStep(before));
  CHECK(g.Validate().ok());
}

TEST_CASE("profiler overhead: hooks add their cost to module and gradient ranges", "[profiler_overhead]") {
  Built plain = Build(TwoSteps());
  Built hooked = Build(TwoSteps());
  ProfilerOverhead cost;
  cost.begin_ns = 100;
  cost.end_ns = 100;
  auto a = RemoveProfilerOverhead(plain.trace, plain.graph, cost);
  cost.module_hook_ns = 1000;
  cost.grad_hook_ns = 400;
  auto b = RemoveProfilerOverhead(hooked.trace, hooked.graph, cost);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // Two module ranges (the first one's begin before the graph starts) and
  // two gradient markers.
  CHECK(b->estimated_ns - a->estimated_ns == 3 * 500 + 2 * 400);
}

TEST_CASE("profiler overhead: never makes a duration or gap negative", "[profiler_overhead]") {
  Built b = Build(TwoSteps());
  ProfilerOverhead cost;
  cost.begin_ns = 50 * kUs;  // far more than any span
  cost.end_ns = 50 * kUs;
  cost.module_hook_ns = 10 * kUs;
  auto r = RemoveProfilerOverhead(b.trace, b.graph, cost);
  REQUIRE(r.ok());
  for (const Task& t : b.graph.tasks) {
    CHECK(t.duration_ns >= 0);
    CHECK(t.gap_ns >= 0);
  }
  CHECK(r->removed_ns < r->estimated_ns);
  CHECK(r->removed_ns > 0);
  CHECK(b.graph.Validate().ok());
}

TEST_CASE("profiler overhead: a record inside a leaf operator shortens that operator", "[profiler_overhead]") {
  Built b = Build({Anno("ProfilerStep#1", 0, 100), Cpu("aten::empty", 10, 20),
                   Anno("record_function inside", 15, 2), Cpu("aten::relu", 50, 10)});
  const TimeNs before = b.graph.tasks[static_cast<size_t>(TaskNamed(b.graph, "aten::empty"))].duration_ns;
  ProfilerOverhead cost;
  cost.begin_ns = 1000;
  cost.end_ns = 500;
  REQUIRE(RemoveProfilerOverhead(b.trace, b.graph, cost).ok());
  CHECK(b.graph.tasks[static_cast<size_t>(TaskNamed(b.graph, "aten::empty"))].duration_ns == before - 1500);
}

TEST_CASE("profiler overhead: rejects negative costs, a second removal and another trace's graph",
          "[profiler_overhead]") {
  Built b = Build(TwoSteps());
  ProfilerOverhead bad;
  bad.begin_ns = -1;
  CHECK(absl::IsInvalidArgument(RemoveProfilerOverhead(b.trace, b.graph, bad).status()));
  ProfilerOverhead cost;
  cost.begin_ns = 100;
  REQUIRE(RemoveProfilerOverhead(b.trace, b.graph, cost).ok());
  CHECK(absl::IsFailedPrecondition(RemoveProfilerOverhead(b.trace, b.graph, cost).status()));
  Built other = Build(TwoSteps());
  const Trace small = ParseOrDie(KinetoDoc(Cpu("aten::relu", 0, 1)));
  CHECK(absl::IsInvalidArgument(RemoveProfilerOverhead(small, other.graph, cost).status()));
}

TEST_CASE("profiler overhead: per_input_ns adds to the begin cost per recorded input type", "[profiler_overhead]") {
  const std::string types = "\"Input type\":[\"float\",\"ScalarList\",\"\"]";
  Built b = Build({Anno("ProfilerStep#1", 0, 100), Cpu("aten::relu", 10, 10),
                   Ev("cpu_op", "aten::as_strided", 40, 5, types), Cpu("aten::add_", 70, 5)});
  ProfilerOverhead cost;
  cost.begin_ns = 100;
  cost.per_input_ns = 1000;
  auto r = RemoveProfilerOverhead(b.trace, b.graph, cost);
  REQUIRE(r.ok());
  // as_strided: 100 + 3 inputs; add_: 100 (no recorded inputs).
  CHECK(r->estimated_ns == 100 + 3 * 1000 + 100);
}
