#include "daydream/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <queue>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/strings.h"

namespace daydream {
namespace {

constexpr TimeNs kNever = std::numeric_limits<TimeNs>::min();

enum class EventType : uint8_t { kReady = 0, kEnd = 1 };

// 16 bytes, so the heap moves less: a task is pushed at most twice (ready,
// end), so the sequence of 2^31 tasks fits 32 bits.
struct SimEvent {
  TimeNs time;
  uint32_t seq;
  uint32_t task_and_type;  // task << 1 | type; whole words (bit-fields stall store forwarding)

  int32_t task() const { return static_cast<int32_t>(task_and_type >> 1); }
  EventType type() const { return static_cast<EventType>(task_and_type & 1); }
};
static_assert(sizeof(SimEvent) == 16);

struct LaterEvent {
  bool operator()(const SimEvent& a, const SimEvent& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

// Ready queue key: higher priority first, then lower id.
struct ReadyEntry {
  int32_t priority;
  int32_t task;
};
struct WorseReady {
  bool operator()(const ReadyEntry& a, const ReadyEntry& b) const {
    return a.priority != b.priority ? a.priority < b.priority : a.task > b.task;
  }
};

}  // namespace

namespace sim_internal {

// One simulation's working state. Run resets it, reusing what its vectors
// (and those of a schedule given back by Recycle) already hold.
class Simulation {
 public:
  absl::StatusOr<Schedule> Run(const Graph& g) {
    g_ = &g;
    seq_ = 0;
    events_.Clear();
    for (auto& q : queues_) q.Clear();
    s_.makespan_ns = 0;
    s_.last_task = -1;
    const size_t n = g_->tasks.size();
    s_.start_ns.assign(n, kNever);
    s_.end_ns.assign(n, kNever);
    s_.binding_task.assign(n, -1);
    s_.binding_kind.assign(n, BindingKind::kNone);
    s_.binding_edge.assign(n, -1);
    s_.busy_ns.assign(g_->resources.size(), 0);
    start_preds_.assign(n, 0);
    end_preds_.assign(n, 0);
    ready_at_.assign(n, 0);
    ready_from_.assign(n, -1);
    ready_edge_.assign(n, -1);
    end_ready_at_.assign(n, kNever);
    end_ready_from_.assign(n, -1);
    end_ready_edge_.assign(n, -1);
    waiting_end_.assign(n, 0);
    free_at_.assign(g_->resources.size(), 0);
    last_on_resource_.assign(g_->resources.size(), -1);
    busy_.assign(g_->resources.size(), 0);
    queues_.resize(g_->resources.size());
    for (const Edge& e : g_->edges) {
      if (ToHeadEnd(e.kind)) ++end_preds_[static_cast<size_t>(e.to)];
      else ++start_preds_[static_cast<size_t>(e.to)];
    }
    for (size_t t = 0; t < n; ++t) {
      if (start_preds_[t] == 0) Push(0, static_cast<int32_t>(t), EventType::kReady);
    }
    // All events of one instant are applied before any resource picks its
    // next task, so tasks that become ready together compete by priority and
    // id, not by which event happened to be handled first.
    size_t finished = 0;
    touched_.clear();
    is_touched_.assign(g_->resources.size(), 0);
    while (!events_.empty()) {
      const TimeNs now = events_.top().time;
      instant_ = now;
      in_instant_ = true;
      while (!events_.empty() && events_.top().time == now) {
        const SimEvent ev = events_.top();
        events_.pop();
        const int32_t t = ev.task();
        if (ev.type() == EventType::kReady) {
          Enqueue(t);
        } else {
          ++finished;
          Finish(t, ev.time);
          Touch(g_->tasks[static_cast<size_t>(t)].resource);
        }
      }
      in_instant_ = false;
      std::sort(touched_.begin(), touched_.end());
      for (int32_t r : touched_) {
        is_touched_[static_cast<size_t>(r)] = 0;
        Dispatch(r, now);
      }
      touched_.clear();
    }
    if (finished != n) {
      for (size_t t = 0; t < n; ++t) {
        if (s_.end_ns[t] == kNever) {
          return absl::FailedPreconditionError(StrCat(
              "simulation deadlocked: ", n - finished, " tasks never finished, first task ", t, " (",
              g_->TaskName(static_cast<int32_t>(t)), ") on ",
              g_->Str(g_->resources[static_cast<size_t>(g_->tasks[t].resource)].name)));
        }
      }
    }
    for (size_t t = 0; t < n; ++t) {
      if (s_.last_task < 0 || s_.end_ns[t] > s_.makespan_ns) {
        s_.makespan_ns = s_.end_ns[t];
        s_.last_task = static_cast<int32_t>(t);
      }
    }
    return std::move(s_);
  }

  void Recycle(Schedule&& schedule) { s_ = std::move(schedule); }

 private:
  // A heap whose storage outlives clearing.
  template <typename T, typename Less>
  struct Heap : std::priority_queue<T, std::vector<T>, Less> {
    void Clear() { this->c.clear(); }
  };

  void Touch(int32_t resource) {
    if (!is_touched_[static_cast<size_t>(resource)]) {
      is_touched_[static_cast<size_t>(resource)] = 1;
      touched_.push_back(resource);
    }
  }

  // A ready task joins its resource's queue; the resource picks after the
  // instant's events.
  void Enqueue(int32_t t) {
    const Task& task = g_->tasks[static_cast<size_t>(t)];
    queues_[static_cast<size_t>(task.resource)].push(ReadyEntry{task.priority, t});
    Touch(task.resource);
  }

  void Push(TimeNs time, int32_t task, EventType type) {
    events_.push(SimEvent{time, seq_++, static_cast<uint32_t>(task) << 1 | static_cast<uint32_t>(type)});
  }

  void Dispatch(int32_t resource, TimeNs now) {
    const auto r = static_cast<size_t>(resource);
    if (busy_[r] || queues_[r].empty()) return;
    const int32_t t = queues_[r].top().task;
    queues_[r].pop();
    const Task& task = g_->tasks[static_cast<size_t>(t)];
    const TimeNs after_resource = free_at_[r] + task.gap_ns;
    const TimeNs ready = ready_at_[static_cast<size_t>(t)];
    TimeNs start = std::max(now, ready);
    int32_t binder = ready_from_[static_cast<size_t>(t)];
    BindingKind binding = binder >= 0 ? BindingKind::kEdge : BindingKind::kNone;
    if (after_resource >= start && last_on_resource_[r] >= 0) {
      binder = last_on_resource_[r];
      binding = BindingKind::kResource;
    }
    start = std::max(start, after_resource);
    busy_[r] = 1;
    s_.start_ns[static_cast<size_t>(t)] = start;
    s_.binding_task[static_cast<size_t>(t)] = binder;
    s_.binding_kind[static_cast<size_t>(t)] = binding;
    s_.binding_edge[static_cast<size_t>(t)] = binding == BindingKind::kEdge ? ready_edge_[static_cast<size_t>(t)] : -1;
    // Edges measured from this task's start release their heads now.
    for (int32_t ei : g_->out_edges(t)) {
      if (FromTailStart(g_->edges[static_cast<size_t>(ei)].kind)) Release(ei, start);
    }
    if (end_preds_[static_cast<size_t>(t)] == 0) {
      ScheduleEnd(t);
    } else {
      waiting_end_[static_cast<size_t>(t)] = 1;
    }
  }

  void ScheduleEnd(int32_t t) {
    const auto i = static_cast<size_t>(t);
    TimeNs end = s_.start_ns[i] + g_->tasks[i].duration_ns;
    if (end_ready_at_[i] > end) {
      end = end_ready_at_[i];
      s_.binding_task[i] = end_ready_from_[i];
      s_.binding_kind[i] = BindingKind::kEndEdge;
      s_.binding_edge[i] = end_ready_edge_[i];
    }
    Push(end, t, EventType::kEnd);
  }

  void Release(int32_t ei, TimeNs anchor) {
    const Edge& e = g_->edges[static_cast<size_t>(ei)];
    const auto h = static_cast<size_t>(e.to);
    const TimeNs when = anchor + e.lag_ns;
    if (ToHeadEnd(e.kind)) {
      if (when > end_ready_at_[h] || end_ready_from_[h] < 0) {
        end_ready_at_[h] = std::max(end_ready_at_[h], when);
        end_ready_from_[h] = e.from;
        end_ready_edge_[h] = ei;
      }
      if (--end_preds_[h] == 0 && waiting_end_[h]) {
        waiting_end_[h] = 0;
        ScheduleEnd(e.to);
      }
      return;
    }
    if (when > ready_at_[h] || ready_from_[h] < 0) {
      ready_at_[h] = std::max(ready_at_[h], when);
      ready_from_[h] = e.from;
      ready_edge_[h] = ei;
    }
    if (--start_preds_[h] == 0) {
      // Ready at the instant whose events are being applied: straight into
      // its queue, as its ready event would go later in this same instant
      // (queue order is by priority and id, and every touched resource picks
      // only after the instant's last event), without the event heap's push
      // and pop. Releases from a task's start come while resources pick, and
      // keep the event.
      if (in_instant_ && ready_at_[h] == instant_) {
        Enqueue(e.to);
      } else {
        Push(ready_at_[h], e.to, EventType::kReady);
      }
    }
  }

  void Finish(int32_t t, TimeNs now) {
    const auto i = static_cast<size_t>(t);
    const Task& task = g_->tasks[i];
    const auto r = static_cast<size_t>(task.resource);
    s_.end_ns[i] = now;
    s_.busy_ns[r] += now - s_.start_ns[i];
    free_at_[r] = now;
    last_on_resource_[r] = t;
    busy_[r] = 0;
    for (int32_t ei : g_->out_edges(t)) {
      if (!FromTailStart(g_->edges[static_cast<size_t>(ei)].kind)) Release(ei, now);
    }
  }

  const Graph* g_ = nullptr;
  Schedule s_;
  std::vector<int32_t> start_preds_, end_preds_;
  std::vector<TimeNs> ready_at_, end_ready_at_;
  std::vector<int32_t> ready_from_, end_ready_from_;
  std::vector<int32_t> ready_edge_, end_ready_edge_;  // the edges behind ready_from_, end_ready_from_
  std::vector<uint8_t> waiting_end_;
  std::vector<TimeNs> free_at_;
  std::vector<int32_t> last_on_resource_;
  std::vector<uint8_t> busy_;
  std::vector<Heap<ReadyEntry, WorseReady>> queues_;
  Heap<SimEvent, LaterEvent> events_;
  uint32_t seq_ = 0;
  std::vector<int32_t> touched_;      // resources that pick after this instant's events
  std::vector<uint8_t> is_touched_;
  TimeNs instant_ = 0;                // the instant whose events are being applied
  bool in_instant_ = false;
};

}  // namespace sim_internal

absl::StatusOr<Schedule> Simulate(const Graph& graph) { return Simulator().Run(graph); }

Simulator::Simulator() : sim_(std::make_unique<sim_internal::Simulation>()) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

absl::StatusOr<Schedule> Simulator::Run(const Graph& graph) {
  if (!graph.has_adjacency()) {
    return absl::FailedPreconditionError("Simulate: the graph's adjacency is stale; call BuildAdjacency()");
  }
  if (sim_ == nullptr) sim_ = std::make_unique<sim_internal::Simulation>();  // moved from
  return sim_->Run(graph);
}

void Simulator::Recycle(Schedule&& schedule) {
  if (sim_ == nullptr) sim_ = std::make_unique<sim_internal::Simulation>();
  sim_->Recycle(std::move(schedule));
}

std::vector<int32_t> CriticalPath(const Schedule& schedule, int32_t last) {
  std::vector<int32_t> path;
  int32_t t = last >= 0 ? last : schedule.last_task;
  std::vector<uint8_t> seen(schedule.start_ns.size(), 0);
  while (t >= 0 && !seen[static_cast<size_t>(t)]) {
    seen[static_cast<size_t>(t)] = 1;
    path.push_back(t);
    t = schedule.binding_task[static_cast<size_t>(t)];
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace daydream
