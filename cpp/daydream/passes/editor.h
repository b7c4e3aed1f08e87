// The primitives passes are built from: select tasks, insert a task with its
// edges, remove a task keeping its dependencies, scale durations, merge tasks,
// set priorities.
//
// A GraphEditor works on a Graph in place: new tasks and edges are appended,
// removed ones are marked dead, and Commit() compacts ids (keeping the order of
// what survives), remaps tensors and iterations, rebuilds the adjacency and
// validates (skipping all of it when only durations, gaps or priorities
// changed). Edits are cheap (no copies of the graph); the original edges are
// read through the graph's CSR adjacency, new ones through small overflow lists.
#ifndef DAYDREAM_PASSES_EDITOR_H_
#define DAYDREAM_PASSES_EDITOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daydream/graph/graph.h"

namespace daydream {

// Which tasks to select. Every set criterion must hold.
struct TaskSelector {
  std::vector<TaskKind> kinds;          // empty: any kind
  std::vector<Phase> phases;            // empty: any phase
  std::string name_regex;               // ECMAScript regex searched in the name; empty: any
  int32_t layer = -2;                   // -2: any; -1: no layer
  int32_t resource = -1;                // -1: any
  ResourceKind resource_kind = ResourceKind::kUnspecified;  // kUnspecified: any
  int32_t iteration = -2;               // -2: any; -1: outside every iteration
};

// Task ids matching `selector`, in id order. Errors: a malformed regex.
absl::StatusOr<std::vector<int32_t>> SelectTasks(const Graph& graph, const TaskSelector& selector);

// A kernel's function name, lowercase: without a leading "void ", template
// arguments, parameters and "(anonymous namespace)" qualifiers, so that the
// types a kernel is instantiated with do not decide what passes think it does
// ("void at::native::vectorized_elementwise_kernel<4, ...>(...)" ->
// "at::native::vectorized_elementwise_kernel").
std::string KernelFunctionName(std::string_view name);

// Work a CPU's speed decides: an operator, runtime call, data load, sync or
// unclassified task on a CPU thread (not a collective, kernel or copy).
bool IsCpuWork(const Graph& graph, const Task& task);

class GraphEditor {
 public:
  // `graph` must outlive the editor. Builds the adjacency if stale.
  explicit GraphEditor(Graph& graph);

  Graph& graph() { return graph_; }
  const Graph& graph() const { return graph_; }
  bool removed(int32_t task) const { return dead_task_[static_cast<size_t>(task)] != 0; }

  // Live edges into / out of `task` (edge indexes into graph().edges).
  std::vector<int32_t> InEdges(int32_t task) const;
  std::vector<int32_t> OutEdges(int32_t task) const;

  // The tasks before / after `task` on its resource (-1 at the ends).
  int32_t SequentialPrev(int32_t task) const;
  int32_t SequentialNext(int32_t task) const;
  // The last live task of `resource` in chain order (-1 when empty).
  int32_t LastOnResource(int32_t resource) const;

  // Adds a task with no edges; returns its id.
  int32_t AddTask(const Task& task);
  // Adds an edge; returns its index.
  int32_t AddEdge(int32_t from, int32_t to, EdgeKind kind, TimeNs lag_ns = 0);
  void RemoveEdge(int32_t edge);

  // Splices `task` into its resource's chain right after `after` (-1: at the
  // front).
  void InsertAfterOnResource(int32_t after, int32_t task);
  // Appends `task` at the end of its resource's chain.
  void AppendToResource(int32_t task);

  // Removes `task`, keeping what it ordered: its resource neighbours are
  // chained, and every predecessor is linked to every successor (lags add up).
  // `keep_gap` moves the task's gap to its successor (the framework time
  // around it stays); otherwise that time goes with the task. Tensors it
  // produced are produced by its resource predecessor; iteration anchors move
  // to its neighbour. Error: removing an already removed task.
  absl::Status RemoveTask(int32_t task, bool keep_gap = false);

  // duration := round(duration * factor); factor >= 0.
  void ScaleDuration(int32_t task, double factor);

  // A faster or slower CPU: a task of CPU work (IsCpuWork) and the framework
  // time before it (its gap) both take `factor` times as long; factor >= 0.
  void ScaleCpuWork(int32_t task, double factor);

  // Replaces `tasks` (all on one resource, at least one) by one task of
  // `duration` named `name` at the place of the first: it keeps the first's
  // gap, and every dependency the group had with the rest of the graph.
  absl::StatusOr<int32_t> MergeTasks(const std::vector<int32_t>& tasks, TimeNs duration, std::string_view name);

  void SetPriority(int32_t task, int32_t priority) { graph_.tasks[static_cast<size_t>(task)].priority = priority; }

  // Compacts the graph, rebuilds the adjacency and validates (including the
  // resource chains). When no task or edge was added or removed, none of that
  // is needed and nothing is checked: ScaleDuration keeps durations
  // non-negative, and whether the new times are within the simulator's range
  // is left to Graph::ValidateEdited (which Pipeline runs after every pass
  // that changed the graph). The editor must not be used afterwards.
  absl::Status Commit();

  // Number of edits made (0: the graph is unchanged).
  int64_t num_edits() const { return edits_; }

 private:
  bool EdgeLive(int32_t e) const { return dead_edge_[static_cast<size_t>(e)] == 0; }
  // True when Commit must compact: a task or edge was added or removed, or an
  // edge is redundant (see Compact).
  bool StructureChanged() const;
  // Drops removed tasks and edges and redundant edges (a task's edge to
  // itself, a lag-free repeat of an earlier edge's ends and kind), renumbers
  // in order, remaps tensors and iterations, rebuilds the adjacency.
  void Compact();
  // A live task of `iteration` other than `task`: the first (or last) by id.
  int32_t OtherTaskOfIteration(int32_t task, int32_t iteration, bool first) const;
  void AppendEdgeIndex(absl::flat_hash_map<int32_t, std::vector<int32_t>>& lists, int32_t task, int32_t edge);
  // Whether `task` is a tensor's producer (Tensor::producer or one of its
  // producers), from an index built on first use and kept by the edits that
  // hand a producer's tensors on. RemoveTask and MergeTasks scan the tensors
  // only for a producer: scanning them on every call was two thirds of a
  // cuda_graphs prediction on a 434 k-task graph (one removal per launch).
  bool Produces(int32_t task);
  void MarkProducer(int32_t task);

  Graph& graph_;
  size_t base_tasks_ = 0;  // tasks covered by the CSR adjacency
  size_t base_edges_ = 0;
  std::vector<uint8_t> dead_task_;
  std::vector<uint8_t> dead_edge_;
  absl::flat_hash_map<int32_t, std::vector<int32_t>> extra_in_;
  absl::flat_hash_map<int32_t, std::vector<int32_t>> extra_out_;
  int64_t edits_ = 0;
  std::vector<uint8_t> produces_;                       // per task, see Produces
  size_t produces_tensors_ = static_cast<size_t>(-1);  // graph_.tensors.size() when indexed
};

}  // namespace daydream

#endif  // DAYDREAM_PASSES_EDITOR_H_
