#include "daydream/passes/editor.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"

namespace daydream {
namespace {

template <typename T>
bool AnyOf(const std::vector<T>& set, T value) {
  return set.empty() || std::find(set.begin(), set.end(), value) != set.end();
}

// The edge that stands for "pred -> (removed task) -> succ".
EdgeKind BypassKind(EdgeKind into, EdgeKind out) {
  if (ToHeadEnd(out)) return EdgeKind::kSync;
  if (into == EdgeKind::kThread && out == EdgeKind::kThread) return EdgeKind::kThread;
  if (into == EdgeKind::kStreamWait && out == EdgeKind::kStreamWait) return EdgeKind::kStreamWait;
  return EdgeKind::kData;
}

// True when `graph` holds an edge that Commit's compaction drops: a task's
// edge to itself, or one with no lag that repeats the (from, to, kind) of an
// earlier edge. Reads the adjacency, whose out-edges of a task are in
// edge-index order.
bool HasRedundantEdge(const Graph& graph) {
  constexpr size_t kPairwise = 16;  // out-degrees up to this are compared pair by pair
  std::vector<std::pair<std::pair<int32_t, EdgeKind>, int32_t>> sorted;  // ((to, kind), edge)
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const EdgeRange out = graph.out_edges(static_cast<int32_t>(t));
    for (int32_t e : out) {
      if (graph.edges[static_cast<size_t>(e)].to == static_cast<int32_t>(t)) return true;
    }
    if (out.size() < 2) continue;
    if (out.size() <= kPairwise) {
      for (const int32_t* j = out.begin() + 1; j != out.end(); ++j) {
        const Edge& b = graph.edges[static_cast<size_t>(*j)];
        if (b.lag_ns != 0) continue;
        for (const int32_t* i = out.begin(); i != j; ++i) {
          const Edge& a = graph.edges[static_cast<size_t>(*i)];
          if (a.to == b.to && a.kind == b.kind) return true;
        }
      }
      continue;
    }
    sorted.clear();
    for (int32_t e : out) {
      const Edge& edge = graph.edges[static_cast<size_t>(e)];
      sorted.push_back({{edge.to, edge.kind}, e});
    }
    std::sort(sorted.begin(), sorted.end());
    for (size_t k = 1; k < sorted.size(); ++k) {
      if (sorted[k].first == sorted[k - 1].first && graph.edges[static_cast<size_t>(sorted[k].second)].lag_ns == 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool IsCpuWork(const Graph& graph, const Task& task) {
  if (graph.resources[static_cast<size_t>(task.resource)].kind != ResourceKind::kCpuThread) return false;
  switch (task.kind) {
    case TaskKind::kCpuOp:
    case TaskKind::kRuntime:
    case TaskKind::kDataLoad:
    case TaskKind::kSync:
    case TaskKind::kUnspecified: return true;
    case TaskKind::kKernel:
    case TaskKind::kCollective:
    case TaskKind::kMemcpy:
    case TaskKind::kMemset: return false;
  }
  return false;
}

std::string KernelFunctionName(std::string_view name) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  if (StartsWith(name, "void ")) name.remove_prefix(5);
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size() - 1;
      continue;
    }
    if (name[i] == '<' || name[i] == '(') break;
    out.push_back(name[i]);
  }
  return AsciiLower(out);
}

absl::StatusOr<std::vector<int32_t>> SelectTasks(const Graph& graph, const TaskSelector& s) {
  std::regex pattern;
  if (!s.name_regex.empty()) {
    try {
      pattern = std::regex(s.name_regex, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(StrCat("bad task name pattern '", s.name_regex, "': ", e.what()));
    }
  }
  // Names repeat: match each distinct name once.
  std::vector<int8_t> name_match(graph.strings.size(), -1);
  std::vector<int32_t> out;
  for (size_t i = 0; i < graph.tasks.size(); ++i) {
    const Task& t = graph.tasks[i];
    if (!AnyOf(s.kinds, t.kind) || !AnyOf(s.phases, t.phase)) continue;
    if (s.layer != -2 && t.layer != s.layer) continue;
    if (s.resource >= 0 && t.resource != s.resource) continue;
    if (s.resource_kind != ResourceKind::kUnspecified &&
        graph.resources[static_cast<size_t>(t.resource)].kind != s.resource_kind) {
      continue;
    }
    if (s.iteration != -2 && t.iteration != s.iteration) continue;
    if (!s.name_regex.empty()) {
      int8_t& m = name_match[static_cast<size_t>(t.name)];
      if (m < 0) {
        const std::string_view name = graph.Str(t.name);
        m = std::regex_search(name.begin(), name.end(), pattern) ? 1 : 0;
      }
      if (m == 0) continue;
    }
    out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

GraphEditor::GraphEditor(Graph& graph) : graph_(graph) {
  if (!graph_.has_adjacency()) graph_.BuildAdjacency();
  base_tasks_ = graph_.tasks.size();
  base_edges_ = graph_.edges.size();
  dead_task_.assign(base_tasks_, 0);
  dead_edge_.assign(base_edges_, 0);
}

void GraphEditor::AppendEdgeIndex(absl::flat_hash_map<int32_t, std::vector<int32_t>>& lists, int32_t task,
                                  int32_t edge) {
  lists[task].push_back(edge);
}

std::vector<int32_t> GraphEditor::InEdges(int32_t task) const {
  std::vector<int32_t> out;
  if (static_cast<size_t>(task) < base_tasks_) {
    for (int32_t e : graph_.in_edges(task)) {
      if (EdgeLive(e)) out.push_back(e);
    }
  }
  if (auto it = extra_in_.find(task); it != extra_in_.end()) {
    for (int32_t e : it->second) {
      if (EdgeLive(e)) out.push_back(e);
    }
  }
  return out;
}

std::vector<int32_t> GraphEditor::OutEdges(int32_t task) const {
  std::vector<int32_t> out;
  if (static_cast<size_t>(task) < base_tasks_) {
    for (int32_t e : graph_.out_edges(task)) {
      if (EdgeLive(e)) out.push_back(e);
    }
  }
  if (auto it = extra_out_.find(task); it != extra_out_.end()) {
    for (int32_t e : it->second) {
      if (EdgeLive(e)) out.push_back(e);
    }
  }
  return out;
}

int32_t GraphEditor::SequentialPrev(int32_t task) const {
  for (int32_t e : InEdges(task)) {
    if (graph_.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential) return graph_.edges[static_cast<size_t>(e)].from;
  }
  return -1;
}

int32_t GraphEditor::SequentialNext(int32_t task) const {
  for (int32_t e : OutEdges(task)) {
    if (graph_.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential) return graph_.edges[static_cast<size_t>(e)].to;
  }
  return -1;
}

int32_t GraphEditor::LastOnResource(int32_t resource) const {
  // The live task of the resource with no sequential successor; among
  // several (an unchained new task), the highest id.
  int32_t last = -1;
  for (size_t t = 0; t < graph_.tasks.size(); ++t) {
    if (dead_task_[t] || graph_.tasks[t].resource != resource) continue;
    if (SequentialNext(static_cast<int32_t>(t)) < 0) last = static_cast<int32_t>(t);
  }
  return last;
}

int32_t GraphEditor::AddTask(const Task& task) {
  ++edits_;
  dead_task_.push_back(0);
  return graph_.AddTask(task);
}

int32_t GraphEditor::AddEdge(int32_t from, int32_t to, EdgeKind kind, TimeNs lag_ns) {
  ++edits_;
  graph_.edges.push_back(Edge{from, to, kind, std::max<TimeNs>(0, lag_ns)});
  dead_edge_.push_back(0);
  const auto e = static_cast<int32_t>(graph_.edges.size() - 1);
  AppendEdgeIndex(extra_out_, from, e);
  AppendEdgeIndex(extra_in_, to, e);
  return e;
}

void GraphEditor::RemoveEdge(int32_t edge) {
  ++edits_;
  dead_edge_[static_cast<size_t>(edge)] = 1;
}

void GraphEditor::InsertAfterOnResource(int32_t after, int32_t task) {
  const int32_t resource = graph_.tasks[static_cast<size_t>(task)].resource;
  int32_t next = -1;
  if (after >= 0) {
    for (int32_t e : OutEdges(after)) {
      if (graph_.edges[static_cast<size_t>(e)].kind == EdgeKind::kSequential) {
        next = graph_.edges[static_cast<size_t>(e)].to;
        RemoveEdge(e);
      }
    }
    AddEdge(after, task, EdgeKind::kSequential);
  } else {
    // At the front: the first task of the resource.
    for (size_t t = 0; t < graph_.tasks.size(); ++t) {
      const auto id = static_cast<int32_t>(t);
      if (!dead_task_[t] && id != task && graph_.tasks[t].resource == resource && SequentialPrev(id) < 0) {
        next = id;
        break;
      }
    }
  }
  if (next >= 0) AddEdge(task, next, EdgeKind::kSequential);
}

void GraphEditor::AppendToResource(int32_t task) {
  const int32_t resource = graph_.tasks[static_cast<size_t>(task)].resource;
  int32_t last = -1;
  for (size_t t = 0; t < graph_.tasks.size(); ++t) {
    const auto id = static_cast<int32_t>(t);
    if (dead_task_[t] || id == task || graph_.tasks[t].resource != resource) continue;
    if (SequentialNext(id) < 0 && (last < 0 || id > last)) last = id;
  }
  if (last >= 0) AddEdge(last, task, EdgeKind::kSequential);
  else ++edits_;
}

absl::Status GraphEditor::RemoveTask(int32_t task, bool keep_gap) {
  if (task < 0 || static_cast<size_t>(task) >= graph_.tasks.size() || removed(task)) {
    return absl::InvalidArgumentError(StrCat("RemoveTask: task ", task, " does not exist or is already removed"));
  }
  const int32_t prev = SequentialPrev(task);
  const int32_t next = SequentialNext(task);
  // Decide where iteration anchors go before changing anything, so a refused
  // removal leaves the graph as it was.
  std::vector<std::pair<int32_t, int32_t>> anchors;  // per iteration, when `task` anchors one
  for (size_t i = 0; i < graph_.iterations.size(); ++i) {
    const Iteration& it = graph_.iterations[i];
    if (it.begin_task != task && it.end_task != task) continue;
    if (anchors.empty()) anchors.assign(graph_.iterations.size(), {-2, -2});
    int32_t begin = it.begin_task, end = it.end_task;
    if (begin == task) begin = next >= 0 ? next : prev >= 0 ? prev : OtherTaskOfIteration(task, static_cast<int32_t>(i), true);
    if (end == task) end = prev >= 0 ? prev : next >= 0 ? next : OtherTaskOfIteration(task, static_cast<int32_t>(i), false);
    if (begin < 0 || end < 0) {
      return absl::FailedPreconditionError(StrCat("RemoveTask: task ", task, " (", graph_.TaskName(task),
                                                  ") is the only task of iteration ", graph_.Str(it.name)));
    }
    anchors[i] = {begin, end};
  }
  const std::vector<int32_t> in = InEdges(task);
  const std::vector<int32_t> out = OutEdges(task);
  for (int32_t e : in) RemoveEdge(e);
  for (int32_t e : out) RemoveEdge(e);
  Task& t = graph_.tasks[static_cast<size_t>(task)];
  if (next >= 0) {
    Task& n = graph_.tasks[static_cast<size_t>(next)];
    // The first task's gap is time since the trace began, not overhead: keep it.
    if (keep_gap || prev < 0) n.gap_ns += t.gap_ns;
    if (prev >= 0) AddEdge(prev, next, EdgeKind::kSequential);
  }
  // Every predecessor now precedes every successor, the resource neighbours
  // included (a sync that waited for the removed kernel still waits for the
  // stream); only the neighbour-to-neighbour pair is the chain edge above.
  for (int32_t ei : in) {
    const Edge a = graph_.edges[static_cast<size_t>(ei)];
    for (int32_t eo : out) {
      const Edge b = graph_.edges[static_cast<size_t>(eo)];
      if (a.from == b.to) continue;
      if (a.kind == EdgeKind::kSequential && b.kind == EdgeKind::kSequential) continue;
      AddEdge(a.from, b.to, BypassKind(a.kind, b.kind), a.lag_ns + b.lag_ns);
    }
  }
  if (Produces(task)) {
    for (Tensor& tensor : graph_.tensors) {
      if (tensor.producer == task) tensor.producer = prev;
      for (int32_t& p : tensor.producers) {
        if (p == task) p = prev;
      }
    }
    MarkProducer(prev);
  }
  for (size_t i = 0; i < anchors.size(); ++i) {
    if (anchors[i].first == -2) continue;
    graph_.iterations[i].begin_task = anchors[i].first;
    graph_.iterations[i].end_task = anchors[i].second;
  }
  dead_task_[static_cast<size_t>(task)] = 1;
  ++edits_;
  return absl::OkStatus();
}

int32_t GraphEditor::OtherTaskOfIteration(int32_t task, int32_t iteration, bool first) const {
  int32_t found = -1;
  for (size_t t = 0; t < graph_.tasks.size(); ++t) {
    const auto id = static_cast<int32_t>(t);
    if (id == task || dead_task_[t] || graph_.tasks[t].iteration != iteration) continue;
    if (first) return id;
    found = id;
  }
  return found;
}

void GraphEditor::ScaleDuration(int32_t task, double factor) {
  Task& t = graph_.tasks[static_cast<size_t>(task)];
  const TimeNs scaled = RoundNs(static_cast<double>(t.duration_ns) * std::max(0.0, factor));
  if (scaled != t.duration_ns) {
    t.duration_ns = scaled;
    ++edits_;
  }
}

void GraphEditor::ScaleCpuWork(int32_t task, double factor) {
  ScaleDuration(task, factor);
  Task& t = graph_.tasks[static_cast<size_t>(task)];
  const TimeNs gap = RoundNs(static_cast<double>(t.gap_ns) * std::max(0.0, factor));
  if (gap != t.gap_ns) {
    t.gap_ns = gap;
    ++edits_;
  }
}

absl::StatusOr<int32_t> GraphEditor::MergeTasks(const std::vector<int32_t>& tasks, TimeNs duration,
                                                std::string_view name) {
  if (tasks.empty()) return absl::InvalidArgumentError("MergeTasks: no tasks");
  const int32_t first = *std::min_element(tasks.begin(), tasks.end());
  const int32_t resource = graph_.tasks[static_cast<size_t>(first)].resource;
  absl::flat_hash_set<int32_t> group(tasks.begin(), tasks.end());
  // Ids outside [first, last] are not members: most lookups stop there.
  const int32_t last = *std::max_element(tasks.begin(), tasks.end());
  auto member = [&](int32_t t) { return t >= first && t <= last && group.contains(t); };
  for (int32_t t : tasks) {
    if (removed(t)) return absl::InvalidArgumentError(StrCat("MergeTasks: task ", t, " is removed"));
    if (graph_.tasks[static_cast<size_t>(t)].resource != resource) {
      return absl::InvalidArgumentError(StrCat("MergeTasks: tasks ", first, " and ", t, " are on different resources"));
    }
  }
  // The external dependencies of the group, before the members go.
  std::vector<Edge> external;
  for (int32_t t : tasks) {
    for (int32_t e : InEdges(t)) {
      const Edge& edge = graph_.edges[static_cast<size_t>(e)];
      if (!member(edge.from) && edge.kind != EdgeKind::kSequential) external.push_back(edge);
    }
    for (int32_t e : OutEdges(t)) {
      const Edge& edge = graph_.edges[static_cast<size_t>(e)];
      if (!member(edge.to) && edge.kind != EdgeKind::kSequential) external.push_back(edge);
    }
  }
  Task merged = graph_.tasks[static_cast<size_t>(first)];
  merged.duration_ns = std::max<TimeNs>(0, duration);
  merged.name = graph_.strings.Intern(name);
  merged.trace_event = -1;
  merged.correlation = -1;
  const int32_t id = AddTask(merged);
  InsertAfterOnResource(SequentialPrev(first), id);
  // InsertAfterOnResource linked `id` before `first`; the gap moves to `id`.
  graph_.tasks[static_cast<size_t>(first)].gap_ns = 0;
  // What the members anchored or produced, the merged task does.
  for (Iteration& it : graph_.iterations) {
    if (member(it.begin_task)) it.begin_task = id;
    if (member(it.end_task)) it.end_task = id;
  }
  if (std::any_of(tasks.begin(), tasks.end(), [this](int32_t t) { return Produces(t); })) {
    for (Tensor& tensor : graph_.tensors) {
      if (member(tensor.producer)) tensor.producer = id;
      for (int32_t& p : tensor.producers) {
        if (member(p)) p = id;
      }
    }
    MarkProducer(id);
    for (int32_t t : tasks) produces_[static_cast<size_t>(t)] = 0;  // handed on: their removal below need not scan
  }
  for (int32_t t : tasks) {
    // Remove without bypassing: the merged task carries the dependencies.
    for (int32_t e : InEdges(t)) {
      if (graph_.edges[static_cast<size_t>(e)].kind != EdgeKind::kSequential) RemoveEdge(e);
    }
    for (int32_t e : OutEdges(t)) {
      if (graph_.edges[static_cast<size_t>(e)].kind != EdgeKind::kSequential) RemoveEdge(e);
    }
    DD_RETURN_IF_ERROR(RemoveTask(t, /*keep_gap=*/false));
  }
  for (const Edge& e : external) {
    const int32_t from = member(e.from) ? id : e.from;
    const int32_t to = member(e.to) ? id : e.to;
    if (from != to) AddEdge(from, to, e.kind, e.lag_ns);
  }
  return id;
}

bool GraphEditor::Produces(int32_t task) {
  if (produces_tensors_ != graph_.tensors.size()) {
    // (Re)index: first use, or tensors added since.
    produces_.assign(graph_.tasks.size(), 0);
    for (const Tensor& tensor : graph_.tensors) {
      MarkProducer(tensor.producer);
      for (int32_t p : tensor.producers) MarkProducer(p);
    }
    produces_tensors_ = graph_.tensors.size();
  }
  return task >= 0 && static_cast<size_t>(task) < produces_.size() && produces_[static_cast<size_t>(task)] != 0;
}

void GraphEditor::MarkProducer(int32_t task) {
  if (task < 0) return;
  if (static_cast<size_t>(task) >= produces_.size()) produces_.resize(static_cast<size_t>(task) + 1, 0);
  produces_[static_cast<size_t>(task)] = 1;
}

bool GraphEditor::StructureChanged() const {
  return graph_.tasks.size() != base_tasks_ || graph_.edges.size() != base_edges_ ||
         std::find(dead_task_.begin(), dead_task_.end(), 1) != dead_task_.end() ||
         std::find(dead_edge_.begin(), dead_edge_.end(), 1) != dead_edge_.end() || HasRedundantEdge(graph_);
}

absl::Status GraphEditor::Commit() {
  // Edits of durations, gaps or priorities only: compacting would copy the
  // graph unchanged and rebuild the same adjacency, and they change nothing
  // the structural checks look at.
  if (!StructureChanged()) return absl::OkStatus();
  Compact();
  return graph_.ValidateEdited(/*check_cycles=*/true);
}

void GraphEditor::Compact() {
  const size_t n = graph_.tasks.size();
  std::vector<int32_t> remap(n, -1);
  std::vector<Task> tasks;
  tasks.reserve(n);
  for (size_t t = 0; t < n; ++t) {
    if (dead_task_[t]) continue;
    remap[t] = static_cast<int32_t>(tasks.size());
    tasks.push_back(graph_.tasks[t]);
  }
  std::vector<Edge> edges;
  edges.reserve(graph_.edges.size());
  absl::flat_hash_set<std::tuple<int32_t, int32_t, uint8_t>> seen;
  for (size_t e = 0; e < graph_.edges.size(); ++e) {
    if (dead_edge_[e]) continue;
    Edge edge = graph_.edges[e];
    if (remap[static_cast<size_t>(edge.from)] < 0 || remap[static_cast<size_t>(edge.to)] < 0) continue;
    edge.from = remap[static_cast<size_t>(edge.from)];
    edge.to = remap[static_cast<size_t>(edge.to)];
    if (edge.from == edge.to) continue;
    if (!seen.insert({edge.from, edge.to, static_cast<uint8_t>(edge.kind)}).second && edge.lag_ns == 0) continue;
    edges.push_back(edge);
  }
  auto map_task = [&](int32_t t) { return t < 0 ? -1 : remap[static_cast<size_t>(t)]; };
  for (Tensor& tensor : graph_.tensors) {
    tensor.producer = map_task(tensor.producer);
    for (int32_t& p : tensor.producers) p = map_task(p);
  }
  for (Iteration& it : graph_.iterations) {
    it.begin_task = map_task(it.begin_task);
    it.end_task = map_task(it.end_task);
  }
  graph_.tasks = std::move(tasks);
  graph_.edges = std::move(edges);
  graph_.BuildAdjacency();
}

}  // namespace daydream
