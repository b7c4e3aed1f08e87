#include "daydream/graph/builder.h"

#include <algorithm>
#include <charconv>
#include <future>
#include <optional>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daydream/base/compressed_rows.h"
#include "daydream/base/huge_pages.h"
#include "daydream/base/math.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/sort.h"
#include "daydream/base/strings.h"
#include "daydream/base/waiting_counts.h"

namespace daydream {
namespace {

constexpr int32_t kNone = -1;
constexpr TimeNs kNeverNs = std::numeric_limits<TimeNs>::min();

bool IsCpuRangeKind(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kRuntime ||
         k == EventKind::kDriver || k == EventKind::kPythonFunction;
}

// Kinds that become tasks when innermost; annotations never do.
bool IsTaskEventKind(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kRuntime || k == EventKind::kDriver;
}

bool IsGpuActivityKind(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset;
}

// Sort rank among events with equal start and duration: enclosing kinds first.
int NestRank(EventKind k) {
  switch (k) {
    case EventKind::kUserAnnotation: return 0;
    case EventKind::kPythonFunction: return 1;
    case EventKind::kCpuOp: return 2;
    case EventKind::kRuntime: return 3;
    case EventKind::kDriver: return 4;
    default: return 5;
  }
}

std::string_view StripApiPrefix(std::string_view name) {
  if (StartsWith(name, "cuda")) return name.substr(4);
  if (StartsWith(name, "hip")) return name.substr(3);
  if (StartsWith(name, "cu")) return name.substr(2);
  return std::string_view();
}

TimeNs Median(std::vector<TimeNs>& v, TimeNs fallback) {
  if (v.empty()) return fallback;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Mean of the samples within `spread` times the median (at least `floor`):
// keeps the total of a right-skewed latency (what a replay must reproduce)
// without the waits that only look like latencies.
TimeNs RobustMean(std::vector<TimeNs>& v, TimeNs fallback, TimeNs spread, TimeNs floor) {
  if (v.empty()) return fallback;
  const TimeNs limit = std::max(floor, spread * Median(v, fallback));
  long double sum = 0;
  size_t kept = 0;
  for (TimeNs x : v) {
    if (x > limit) continue;
    sum += static_cast<long double>(x);
    ++kept;
  }
  return kept == 0 ? fallback : static_cast<TimeNs>(sum / static_cast<long double>(kept));
}

// Typical times of blocking copies per copy name (its direction and memory
// kind) and size class (bytes in powers of four): how long a copy from
// pageable memory is staged before its DMA starts, or copied out after it
// ends, depends on its size and the platform. A class without samples takes
// the nearest class of the same name (the two nearest averaged when equally
// near); a name without samples has none.
class CopyClassTable {
 public:
  void Add(StringId name, int64_t bytes, TimeNs value) { samples_.push_back({name, SizeClass(bytes), value}); }

  // Call once, after the last Add and before the first Find.
  void Finish() {
    std::sort(samples_.begin(), samples_.end(), [](const Entry& a, const Entry& b) {
      return a.name != b.name ? a.name < b.name : a.size_class != b.size_class ? a.size_class < b.size_class
                                                                               : a.value < b.value;
    });
    for (size_t i = 0; i < samples_.size();) {
      size_t j = i;
      while (j < samples_.size() && samples_[j].name == samples_[i].name &&
             samples_[j].size_class == samples_[i].size_class) {
        ++j;
      }
      classes_.push_back({samples_[i].name, samples_[i].size_class, samples_[i + (j - i) / 2].value});  // median
      i = j;
    }
    samples_ = {};
  }

  std::optional<TimeNs> Find(StringId name, int64_t bytes) const {
    const int size_class = SizeClass(bytes);
    auto lo = std::lower_bound(classes_.begin(), classes_.end(), name,
                               [](const Entry& c, StringId n) { return c.name < n; });
    if (lo == classes_.end() || lo->name != name) return std::nullopt;
    auto at = std::lower_bound(lo, classes_.end(), size_class,
                               [name](const Entry& c, int sc) { return c.name == name && c.size_class < sc; });
    const bool above = at != classes_.end() && at->name == name;
    if (above && at->size_class == size_class) return at->value;
    if (!above) return std::prev(at)->value;
    if (at == lo) return at->value;
    const auto below = std::prev(at);
    const int d_below = size_class - below->size_class, d_above = at->size_class - size_class;
    return d_below < d_above ? below->value : d_above < d_below ? at->value : (below->value + at->value) / 2;
  }

 private:
  static int SizeClass(int64_t bytes) {
    return bytes <= 0 ? 0 : (64 - __builtin_clzll(static_cast<unsigned long long>(bytes))) / 2;
  }
  struct Entry {
    StringId name;
    int size_class;
    TimeNs value;
  };
  std::vector<Entry> samples_;
  std::vector<Entry> classes_;  // one per (name, size class), sorted, with the median
};

// Phase named by one range or op, or kUnspecified when the name says nothing.
Phase PhaseFromName(std::string_view name) {
  if (StartsWith(name, "ProfilerStep#")) return Phase::kUnspecified;
  if (StartsWith(name, "autograd::engine::evaluate_function")) return Phase::kBackward;
  if (StartsWith(name, "Optimizer.")) return Phase::kOptimizer;
  if (StartsWith(name, "enumerate(DataLoader)") || Contains(name, "DataLoader")) {
    return Phase::kData;
  }
  if (StartsWith(name, "c10d::") || StartsWith(name, "nccl:") ||
      StartsWith(name, "record_param_comms") || StartsWith(name, "gloo:") ||
      Contains(name, "ProcessGroup")) {
    return Phase::kComm;
  }
  // Autograd node names: MulBackward0, CudnnConvolutionBackward, CompiledFunctionBackward.
  std::string_view stem = name;
  while (!stem.empty() && stem.back() >= '0' && stem.back() <= '9') stem.remove_suffix(1);
  if (EndsWith(stem, "Backward")) return Phase::kBackward;
  const std::string lower = AsciiLower(name.substr(0, 256));
  if (Contains(lower, "optimizer")) return Phase::kOptimizer;
  if (Contains(lower, "backward")) return Phase::kBackward;
  if (Contains(lower, "forward") || StartsWith(name, "nn.Module:")) {
    return Phase::kForward;
  }
  return Phase::kUnspecified;
}

// Layer name when the event is an nn.Module range, else empty.
std::string_view ModuleRangeName(std::string_view name) {
  for (std::string_view prefix : {"nn.Module: ", "daydream.module: "}) {
    if (StartsWith(name, prefix)) return name.substr(prefix.size());
  }
  return std::string_view();
}

// A task before its id is known.
struct Pending {
  TimeNs start = 0;
  TimeNs end = 0;
  int32_t event = kNone;
  int32_t resource = kNone;
  bool self_time = false;  // a stretch of an enclosing operator's own work
  bool is_operator = false;  // CPU: IsOperator of its event
};

// An activity launched at `time` (its launch call's start, or its own start
// when no launch was recorded).
struct Launched {
  TimeNs time = 0;
  int32_t task = kNone;
};

// Correlation id -> a value (kNone when absent). Correlations are a counter
// (CUPTI numbers every runtime call, recorded or not), so a trace's launch
// calls hold a dense share of a contiguous range (one id in five in the HTA
// V100 trace) and a direct table over that range serves; sparser ids fall
// back to a hash map.
class CorrelationIndex {
 public:
  // The ids to be inserted lie in [min_id, max_id]; `count` is about how many.
  void Reset(int64_t min_id, int64_t max_id, size_t count) {
    table_.clear();
    map_.clear();
    base_ = std::max<int64_t>(0, min_id);
    dense_ = max_id < base_ || static_cast<uint64_t>(max_id - base_) <= 16 * static_cast<uint64_t>(count) + 4096;
    if (dense_) {
      const size_t size = max_id < base_ ? 0 : static_cast<size_t>(max_id - base_) + 1;
      if (table_.capacity() < size) {
        table_ = std::vector<int32_t>();
        ReserveHugePages(table_, size);  // megabytes for a large trace: faulted 2 MiB at a time
      }
      table_.assign(size, kNone);
    } else {
      map_.reserve(count);
    }
  }
  // Keeps the first value inserted for `id`; false if `id` was there already.
  bool Insert(int64_t id, int32_t value) {
    if (id < 0) return false;
    if (!dense_) return map_.try_emplace(id, value).second;
    int32_t& slot = table_[static_cast<size_t>(id - base_)];
    if (slot != kNone) return false;
    slot = value;
    return true;
  }
  int32_t Find(int64_t id) const {
    if (id < 0) return kNone;
    if (!dense_) {
      auto it = map_.find(id);
      return it == map_.end() ? kNone : it->second;
    }
    if (id < base_ || static_cast<uint64_t>(id - base_) >= table_.size()) return kNone;
    return table_[static_cast<size_t>(id - base_)];
  }

 private:
  bool dense_ = true;
  int64_t base_ = 0;
  std::vector<int32_t> table_;
  absl::flat_hash_map<int64_t, int32_t> map_;
};

class Builder {
 public:
  Builder(const Trace& trace, const BuildOptions& options)
      : trace_(trace), options_(options), name_traits_(trace.strings.size()) {}

  absl::StatusOr<Graph> Run() {
    graph_.source = trace_.path;
    graph_.rank = trace_.rank;
    graph_.world_size = trace_.world_size;
    graph_.warnings = trace_.warnings;
    const size_t n = trace_.events.size();
    parent_ = HugePagesVector(n, kNone);
    task_of_ = HugePagesVector(n, kNone);
    IndexEvents();
    CollectCpuTasks();
    CollectGpuTasks();
    if (pending_.empty()) {
      return absl::InvalidArgumentError(StrCat(
          trace_.path, ": no CPU operators, runtime calls or GPU activities to build a graph from"));
    }
    CreateTasks();
    LinkCpuThreads();
    LinkLaunches();
    EstimateTypicalLatencies();
    FindStreamWaits();
    InferUnrecordedWaits();
    LinkGpuStreams();
    LinkLaunchQueue();
    LinkSyncCalls();
    LinkThreads();
    // The edges are final: the cycle check (a tenth of the build) runs on
    // another core while the rest is assigned, which adds no edges.
    auto find_cycle = [this] { return graph_.FindCycleTask(); };
    std::future<int64_t> cycle;
    try {
      cycle = std::async(std::launch::async, find_cycle);
    } catch (const std::system_error&) {
      cycle = std::async(std::launch::deferred, find_cycle);  // no thread to be had: at the end, on this one
    }
    AssignIterations();
    AssignPhasesAndLayers();
    AssignGradients();
    SetDevice();
    graph_.BuildAdjacency();
    absl::Status s = graph_.ValidateAllButCycles();
    if (cycle.get() != -1) s = graph_.Validate();  // the full check, to report what it reports first
    if (!s.ok()) {
      // Absurd times are the trace's fault; anything else would be ours.
      if (absl::IsOutOfRange(s)) return absl::InvalidArgumentError(StrCat(trace_.path, ": ", s.message()));
      return absl::InternalError(StrCat(trace_.path, ": built an invalid graph (a daydream bug): ",
                                              s.message()));
    }
    return std::move(graph_);
  }

 private:
  const TraceEvent& Ev(int32_t i) const { return trace_.events[static_cast<size_t>(i)]; }
  // Asks for the cache lines of event `i` (one or two: see TraceEvent)
  // ahead of a loop that reaches events out of file order.
  void PrefetchEvent(int32_t i) const {
    const char* p = reinterpret_cast<const char*>(&trace_.events[static_cast<size_t>(i)]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + sizeof(TraceEvent) - 1);
  }
  static constexpr size_t kPrefetchAhead = 16;
  // The same for task `id` (a stream's activities lie far apart among the
  // tasks, each on its own lines).
  void PrefetchTask(int32_t id) const {
    const char* p = reinterpret_cast<const char*>(&graph_.tasks[static_cast<size_t>(id)]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + sizeof(Task) - 1);
  }
  Task& T(int32_t id) { return graph_.tasks[static_cast<size_t>(id)]; }
  TimeNs Start(int32_t id) const { return start_[static_cast<size_t>(id)]; }
  TimeNs End(int32_t id) const { return end_[static_cast<size_t>(id)]; }

  StringId GraphString(StringId trace_id) {
    if (string_map_.empty()) string_map_.assign(trace_.strings.size(), kNone);
    StringId& mapped = string_map_[static_cast<size_t>(trace_id)];
    if (mapped == kNone) mapped = graph_.strings.Intern(trace_.strings.Get(trace_id));
    return mapped;
  }

  void Warn(std::string_view kind, std::string message) { graph_.warnings.Add(kind, std::move(message)); }

  std::string EventLabel(int32_t e) const {
    return StrCat(trace_.path, ": event ", e, " (", trace_.Str(Ev(e).name).substr(0, 80), ")");
  }

  // The events each rule reads, in event order, from one pass over the
  // (large) events instead of one per rule.
  // What is read of an event is read here, while the pass has it in cache.
  void IndexEvents() {
    // Rule 1 nests the ranges of each CPU thread (not those of GPU tracks or
    // of named timelines such as "Spans").
    track_keys_.resize(trace_.tracks.size());
    std::vector<uint8_t> cpu_track(trace_.tracks.size(), 0);
    for (size_t t = 0; t < trace_.tracks.size(); ++t) {
      const TraceTrack& track = trace_.tracks[t];
      cpu_track[t] = !track.gpu && !track.pid_is_text;
      if (cpu_track[t]) ReserveHugePages(track_keys_[t], static_cast<size_t>(track.num_events));
    }
    // Room for every event (address space only: pages never written cost no
    // memory), so that filling them moves nothing and faults 2 MiB at a time.
    ReserveHugePages(gpu_events_, trace_.events.size());
    ReserveHugePages(launchers_, trace_.events.size());
    for (size_t i = 0; i < trace_.events.size(); ++i) {
      const TraceEvent& ev = trace_.events[i];
      const auto e = static_cast<int32_t>(i);
      if (!ev.instant && IsCpuRangeKind(ev.kind) && cpu_track[static_cast<size_t>(ev.track)]) {
        const NameTraits& name = TraitsOfTrace(ev.name);
        track_keys_[static_cast<size_t>(ev.track)].push_back(NestKey{ev.ts_ns, ev.dur_ns, e,
                                                                     static_cast<int8_t>(NestRank(ev.kind)),
                                                                     IsTaskEvent(ev.kind, name),
                                                                     IsOperator(ev.kind, name), name.mark});
        ++num_cpu_ranges_;
      }
      if (!ev.instant && IsGpuActivityKind(ev.kind)) gpu_events_.push_back(e);
      if ((ev.kind == EventKind::kRuntime || ev.kind == EventKind::kDriver) && ev.correlation >= 0) {
        launchers_.push_back(Launcher{ev.correlation, e, TraitsOfTrace(ev.name).launch_call});
      }
      if (ev.kind == EventKind::kCudaSync) sync_events_.push_back(e);
    }
  }

  // --- rule 1: CPU tasks ---------------------------------------------------
  void CollectCpuTasks() {
    std::vector<std::vector<NestKey>>& sorted = track_keys_;
    ReserveHugePages(pending_, num_cpu_ranges_ + gpu_events_.size());  // all but operators' own work
    for (size_t t = 0; t < sorted.size(); ++t) {
      if (sorted[t].empty()) continue;
      std::vector<NestKey>& keys = sorted[t];
      SortRuns(keys, NestLess);
      // Nesting with a stack of open ranges, read from the keys rather than
      // the (much larger, randomly reached) events.
      struct Open {
        size_t key;
        TimeNs end;    // effective (clipped to the enclosing range's)
        int32_t task;  // the innermost task among it and its ancestors: an index in candidates, or kNone
      };
      std::vector<Open> stack;
      std::vector<Pending> candidates;
      // Each candidate's innermost enclosing task (kNone for none), by
      // candidate: the operator whose own work it covers (AddSelfTimeTasks).
      std::vector<int32_t> enclosing_task;
      std::vector<uint8_t> has_task_child;  // by candidate: a task lies inside it
      ReserveHugePages(candidates, keys.size());
      ReserveHugePages(enclosing_task, keys.size());
      ReserveHugePages(has_task_child, keys.size());
      for (size_t k = 0; k < keys.size(); ++k) {
        const NestKey& key = keys[k];
        while (!stack.empty() && stack.back().end <= key.ts &&
               !(stack.back().end == key.ts && key.dur == 0 && keys[stack.back().key].dur == 0 &&
                 keys[stack.back().key].ts == key.ts)) {
          stack.pop_back();
        }
        const int32_t e = key.event;
        TimeNs end = key.ts + key.dur;
        const int32_t outer_task = stack.empty() ? kNone : stack.back().task;
        if (!stack.empty()) {
          const int32_t parent = keys[stack.back().key].event;
          parent_[static_cast<size_t>(e)] = parent;
          if (end > stack.back().end) {
            if (key.task) {
              Warn("overlapping_cpu_events",
                   StrCat(EventLabel(e), " ends after the event enclosing it; clipped"));
            }
            end = stack.back().end;
          }
        }
        int32_t task = outer_task;
        if (key.task) {
          task = static_cast<int32_t>(candidates.size());
          // Written in place: a Pending built apart and copied in is read
          // back 16 bytes at a time over its 4- and 1-byte fields just
          // stored, which the core cannot forward (a stall per task).
          Pending& c = candidates.emplace_back();
          c.start = key.ts;
          c.end = end;
          c.event = e;
          c.is_operator = key.is_operator;
          enclosing_task.push_back(outer_task);
          has_task_child.push_back(0);
          // The innermost task around it encloses a task: it is no leaf.
          if (outer_task != kNone) has_task_child[static_cast<size_t>(outer_task)] = 1;
        }
        stack.push_back(Open{k, end, task});
      }
      int32_t resource = kNone;
      TimeNs prev_end = kNeverNs;
      for (size_t i = 0; i < candidates.size(); ++i) {
        Pending& p = candidates[i];
        if (has_task_child[i]) continue;
        if (resource == kNone) resource = CpuResource(static_cast<int32_t>(t));
        if (p.start < prev_end) {
          Warn("overlapping_cpu_events",
               StrCat(EventLabel(p.event), " overlaps the previous operator on its thread; clipped"));
          p.start = prev_end;
          p.end = std::max(p.end, p.start);
        }
        prev_end = p.end;
        // Its resource set in the copy: p is read whole with no store into it
        // just before (but for the rare clip above).
        pending_.push_back(p);
        pending_.back().resource = resource;
      }
      if (resource != kNone) AddSelfTimeTasks(candidates, enclosing_task, has_task_child, resource);
    }
    // Every thread's ranges in one nesting order: a k-way merge of the
    // threads' sorted keys (a heap of each thread's next key).
    cpu_range_events_.clear();
    ReserveHugePages(cpu_range_events_, num_cpu_ranges_);
    std::vector<std::pair<size_t, size_t>> heads;  // (track, position)
    auto later = [&](const std::pair<size_t, size_t>& a, const std::pair<size_t, size_t>& b) {
      return NestLess(sorted[b.first][b.second], sorted[a.first][a.second]);
    };
    for (size_t t = 0; t < sorted.size(); ++t) {
      if (!sorted[t].empty()) heads.emplace_back(t, 0);
    }
    std::make_heap(heads.begin(), heads.end(), later);
    while (!heads.empty()) {
      std::pop_heap(heads.begin(), heads.end(), later);
      auto& [t, k] = heads.back();
      const std::vector<NestKey>& keys = sorted[t];
      // This thread's keys up to the next thread's first one (threads run in
      // bursts, so mostly many at a time).
      const NestKey* next = heads.size() > 1 ? &sorted[heads.front().first][heads.front().second] : nullptr;
      do {
        const NestKey& key = keys[k];
        cpu_range_events_.push_back(key.event);
        if (key.mark != Mark::kNone) marked_[static_cast<size_t>(key.mark)].push_back(key.event);
      } while (++k < keys.size() && (next == nullptr || NestLess(keys[k], *next)));
      if (k < keys.size()) {
        std::push_heap(heads.begin(), heads.end(), later);
      } else {
        heads.pop_back();
      }
    }
    track_keys_.clear();
    track_keys_.shrink_to_fit();
  }

  // An operator that encloses other tasks can still do most of the work
  // itself: aten::mkldnn_convolution computes after its aten::empty child
  // allocated the output. Each stretch of at least min_self_task_ns inside a
  // CPU operator that none of its task-bearing descendants covers becomes a
  // task named after the operator, so its cost is work the passes see, not a
  // framework gap. Every instant belongs to the innermost operator around it.
  //
  // `enclosing_task[i]` is the innermost task around candidates[i] (an index
  // in candidates, kNone for none): as every range around a task has a task
  // descendant, it is the nearest task-bearing candidate around it, and
  // `has_task_child[i]` says whether candidates[i] is that for any other.
  void AddSelfTimeTasks(const std::vector<Pending>& candidates, const std::vector<int32_t>& enclosing_task,
                        const std::vector<uint8_t>& has_task_child, int32_t resource) {
    if (options_.min_self_task_ns <= 0) return;
    // The spans an operator's nearest task-bearing descendants cover come
    // in start order (candidates are sorted by start, and each follows the
    // operators around it): one pass, with where each operator's uncovered
    // time resumes.
    std::vector<TimeNs>& cursor = self_time_cursor_;
    cursor.resize(candidates.size());
    auto add = [&](const Pending& op, TimeNs from, TimeNs to) {
      if (to - from >= options_.min_self_task_ns) pending_.push_back(Pending{from, to, op.event, resource, true});
    };
    for (size_t i = 0; i < candidates.size(); ++i) {
      cursor[i] = candidates[i].start;
      const int32_t o = enclosing_task[i];
      if (o == kNone) continue;
      const Pending& op = candidates[static_cast<size_t>(o)];
      if (!op.is_operator) continue;
      TimeNs& at = cursor[static_cast<size_t>(o)];
      add(op, at, std::min(candidates[i].start, op.end));
      at = std::max(at, candidates[i].end);
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (has_task_child[i] && candidates[i].is_operator) add(candidates[i], cursor[i], candidates[i].end);
    }
  }

  // CPU ranges some rule looks for by name.
  enum class Mark : uint8_t {
    kNone,
    kProfilerStep,         // "ProfilerStep#N" (rule 8)
    kOptimizerStep,        // "Optimizer.step#..." (rule 8)
    kGradMarker,           // daydream.Profiler's "daydream.grad: ..." (AssignGradients)
    kAccumulateGrad,       // "torch::autograd::AccumulateGrad" (InferGradients)
    kAccumulateGradRange,  // autograd's range around it (AccumulateGradRange)
  };
  static constexpr int kNumMarks = 6;
  static constexpr std::string_view kGradMarkerPrefix = "daydream.grad: ";

  // What the rules read of a name, worked out once per distinct name (names
  // repeat: a million events carry a few thousand).
  struct NameTraits {
    bool known = false;
    bool daydream = false;  // daydream's own ranges ("daydream.module: ...")
    // A gloo collective ("gloo:all_reduce", "gloo:broadcast", ...): a
    // record_function range on the gloo worker thread that communicated.
    bool gloo = false;
    bool operator_name = false;      // see IsOperator
    bool collective_kernel = false;  // IsCollectiveKernelName
    bool launch_call = false;        // a launch, or an asynchronous copy or memset call
    bool event_record = false;       // cudaEventRecord / hipEventRecordWithFlags ...
    bool stream_wait_event = false;  // cudaStreamWaitEvent ...
    bool module_range = false;       // "nn.Module: ..." or "daydream.module: ..." (ModuleRangeName)
    SyncCall sync = SyncCall::kNone;
    Phase phase = Phase::kUnspecified;  // PhaseFromName
    Mark mark = Mark::kNone;
    // An elementwise kernel ("...elementwise_kernel..."): the bytes of one
    // of its elements, from the type in its name (0 for any other name).
    int8_t elementwise_element_bytes = 0;
  };
  // Asked for nearly every event, in several passes: the lookup is inlined,
  // the traits worked out once per string (as a call, it was 8% of the
  // build's instructions).
  const NameTraits& TraitsOfTrace(StringId id) const {
    const NameTraits& t = name_traits_[static_cast<size_t>(id)];
    return t.known ? t : FirstTraitsOfTrace(id);
  }
  [[gnu::noinline]] const NameTraits& FirstTraitsOfTrace(StringId id) const {
    NameTraits& t = name_traits_[static_cast<size_t>(id)];
    const std::string_view name = trace_.Str(id);
    const std::string_view api = StripApiPrefix(name);
    t.known = true;
    t.daydream = StartsWith(name, "daydream.");
    t.gloo = StartsWith(name, "gloo:");
    t.operator_name = Contains(name, "::") && !Contains(name, " ") && !StartsWith(name, "autograd::engine::");
    t.collective_kernel = IsCollectiveKernelName(name);
    t.sync = ClassifySyncCall(name);
    t.launch_call = Contains(name, "Launch") ||
                    ((Contains(name, "Memcpy") || Contains(name, "Memset")) && t.sync == SyncCall::kNone);
    t.event_record = api == "EventRecord" || api == "EventRecordWithFlags";
    t.stream_wait_event = api == "StreamWaitEvent";
    t.module_range = !ModuleRangeName(name).empty();
    t.phase = PhaseFromName(name);
    t.mark = StartsWith(name, "ProfilerStep#")                                ? Mark::kProfilerStep
             : StartsWith(name, "Optimizer.step#")                            ? Mark::kOptimizerStep
             : StartsWith(name, kGradMarkerPrefix)                            ? Mark::kGradMarker
             : name == "torch::autograd::AccumulateGrad"                      ? Mark::kAccumulateGrad
             : StartsWith(name, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
                 ? Mark::kAccumulateGradRange
                 : Mark::kNone;
    if (Contains(name, "elementwise_kernel")) {
      t.elementwise_element_bytes = 4;
      if (Contains(name, "c10::Half") || Contains(name, "c10::BFloat16") || Contains(name, "__half")) {
        t.elementwise_element_bytes = 2;
      } else if (Contains(name, "<double") || Contains(name, " double")) {
        t.elementwise_element_bytes = 8;
      }
    }
    return t;
  }

  // A dispatched operator (aten::mkldnn_convolution, c10d::allreduce_,
  // torch::autograd::AccumulateGrad): a namespaced cpu_op. Not a range
  // recorded as an operator (ProfilerStep#7 in 2021 traces, autograd's
  // evaluate_function wrapper, backward nodes), nor a runtime call (its
  // driver children leave it no work of its own).
  static bool IsOperator(EventKind kind, const NameTraits& name) {
    return kind == EventKind::kCpuOp && name.operator_name;
  }

  static bool IsTaskEvent(EventKind kind, const NameTraits& name) {
    // daydream's own ranges (layers, gradient markers) annotate; they are never
    // work, whatever category the profiler gave them.
    if (name.daydream) return false;
    return IsTaskEventKind(kind) || (kind == EventKind::kUserAnnotation && name.gloo);
  }

  // The traits of task `id`'s name.
  const NameTraits& Traits(int32_t id) const { return TraitsOfTrace(task_trace_name_[static_cast<size_t>(id)]); }

  // An event in nesting order: by start, longer first, enclosing kinds first
  // (NestRank), then by index; with whether it is a task event. Sorting (and
  // nesting) these keys rather than event indexes spares reading two large,
  // randomly placed events per comparison.
  struct NestKey {
    TimeNs ts;
    TimeNs dur;
    int32_t event;
    int8_t rank;
    bool task;
    bool is_operator;  // IsOperator
    Mark mark;
  };
  static bool NestLess(const NestKey& x, const NestKey& y) {
    if (x.ts != y.ts) return x.ts < y.ts;
    if (x.dur != y.dur) return x.dur > y.dur;
    if (x.rank != y.rank) return x.rank < y.rank;
    return x.event < y.event;
  }
  int32_t CpuResource(int32_t track_index) {
    const TraceTrack& track = trace_.tracks[static_cast<size_t>(track_index)];
    Resource r;
    r.kind = ResourceKind::kCpuThread;
    r.process = track.pid;
    r.thread = track.tid;
    r.name = track.thread_name != 0 ? GraphString(track.thread_name)
                                    : graph_.strings.Intern(StrCat("thread ", track.tid));
    const int32_t id = graph_.AddResource(r);
    resource_track_.resize(graph_.resources.size(), kNone);
    resource_track_[static_cast<size_t>(id)] = track_index;
    return id;
  }

  // --- rule 2: GPU tasks ---------------------------------------------------
  void CollectGpuTasks() {
    absl::flat_hash_map<std::pair<int64_t, int64_t>, int32_t> resources;
    std::vector<std::vector<Pending>> per_resource;
    for (int32_t i : gpu_events_) {
      const TraceEvent& ev = Ev(i);
      const auto [device, stream] = DeviceStream(ev);
      auto [it, inserted] = resources.try_emplace({device, stream}, kNone);
      if (inserted) {
        Resource r;
        r.kind = ResourceKind::kGpuStream;
        r.process = device;
        r.thread = stream;
        r.name = graph_.strings.Intern(StrCat("GPU ", device, " stream ", stream));
        it->second = graph_.AddResource(r);
        resource_track_.resize(graph_.resources.size(), kNone);
        gpu_streams_.push_back(it->second);
        per_resource.resize(graph_.resources.size());
      }
      per_resource.resize(graph_.resources.size());
      Pending& p = per_resource[static_cast<size_t>(it->second)].emplace_back();  // in place: see CollectCpuTasks
      p.start = ev.ts_ns;
      p.end = ev.end_ns();
      p.event = i;
      p.resource = it->second;
    }
    for (auto& list : per_resource) {
      SortRuns(list, [](const Pending& a, const Pending& b) {
        return a.start != b.start ? a.start < b.start : a.event < b.event;
      });
      TimeNs prev_end = kNeverNs;
      for (Pending& p : list) {
        if (p.start < prev_end) {
          Warn("overlapping_gpu_activities",
               StrCat(EventLabel(p.event), " starts before the previous activity on its stream ends; "
                                                 "delayed to keep stream order"));
          p.start = prev_end;
          p.end = std::max(p.end, p.start);
        }
        prev_end = p.end;
        pending_.push_back(p);
      }
    }
  }

  // Orders tasks by recorded start (ties by trace order) and creates them.
  void CreateTasks() {
    // The pending tasks are a few runs in start order (each thread's, each
    // stream's): read in merged order rather than moved into it.
    std::vector<int32_t> order;
    MergedOrder(pending_, [](const Pending& a, const Pending& b) {
      if (a.start != b.start) return a.start < b.start;
      // An operator's own work after a zero-length child at its start.
      if (a.self_time != b.self_time) return b.self_time;
      return a.event < b.event;
    }, &order);
    origin_ = pending_[static_cast<size_t>(order.front())].start;
    graph_.origin_ns = origin_;
    ReserveHugePages(graph_.tasks, pending_.size());
    ReserveHugePages(start_, pending_.size());
    ReserveHugePages(end_, pending_.size());
    ReserveHugePages(task_trace_name_, pending_.size());
    ReserveHugePages(task_kind_, pending_.size());
    resource_tasks_.assign(graph_.resources.size(), {});
    {
      std::vector<size_t> per_resource(graph_.resources.size(), 0);
      for (const Pending& p : pending_) ++per_resource[static_cast<size_t>(p.resource)];
      for (size_t r = 0; r < per_resource.size(); ++r) ReserveHugePages(resource_tasks_[r], per_resource[r]);
    }
    // A CPU thread's tasks follow each other: each one's gap after the one
    // before it (or after the origin) is set here, while the task is being
    // written, not by another pass over the (large) tasks.
    std::vector<int32_t> last_on_thread(graph_.resources.size(), kNone);
    for (size_t i = 0; i < order.size(); ++i) {
      // Tasks come in start order, events in file order: fetch ahead.
      if (i + kPrefetchAhead < order.size()) {
        PrefetchEvent(pending_[static_cast<size_t>(order[i + kPrefetchAhead])].event);
      }
      const Pending& p = pending_[static_cast<size_t>(order[i])];
      const TraceEvent& ev = Ev(p.event);
      // Written in place (room is reserved), not built apart and copied in:
      // see CollectCpuTasks.
      const auto id = static_cast<int32_t>(graph_.tasks.size());
      Task& task = graph_.tasks.emplace_back();
      task.recorded_start_ns = p.start;
      task.duration_ns = p.end - p.start;
      task.trace_event = p.event;
      task.correlation = ev.correlation;
      task.name = GraphString(ev.name);
      task.resource = p.resource;
      const NameTraits& traits = TraitsOfTrace(ev.name);
      switch (ev.kind) {
        case EventKind::kCpuOp: task.kind = TaskKind::kCpuOp; break;
        case EventKind::kUserAnnotation: task.kind = TaskKind::kCollective; break;  // gloo ranges
        case EventKind::kRuntime:
        case EventKind::kDriver:
          task.kind = traits.sync != SyncCall::kNone ? TaskKind::kSync : TaskKind::kRuntime;
          break;
        case EventKind::kKernel:
          task.kind = traits.collective_kernel ? TaskKind::kCollective : TaskKind::kKernel;
          break;
        case EventKind::kMemcpy: task.kind = TaskKind::kMemcpy; break;
        case EventKind::kMemset: task.kind = TaskKind::kMemset; break;
        default: task.kind = TaskKind::kCpuOp; break;
      }
      task.bytes = TaskBytes(ev);
      if (const auto r = static_cast<size_t>(p.resource); graph_.resources[r].kind == ResourceKind::kCpuThread) {
        const int32_t prev = last_on_thread[r];
        task.gap_ns = p.start - (prev == kNone ? origin_ : End(prev));
        last_on_thread[r] = id;
      }
      start_.push_back(p.start);
      end_.push_back(p.end);
      task_trace_name_.push_back(ev.name);
      task_kind_.push_back(task.kind);
      graph_.recorded_end_ns = std::max(graph_.recorded_end_ns, p.end);
      if (!p.self_time) task_of_[static_cast<size_t>(p.event)] = id;
      resource_tasks_[static_cast<size_t>(p.resource)].push_back(id);
    }
    pending_.clear();
    pending_.shrink_to_fit();
    // Real traces give 1.2-1.5 edges per task; growing the vector instead
    // would copy it a few times and fault its pages in twice.
    ReserveHugePages(graph_.edges, 2 * graph_.tasks.size());
  }

  // The (device, stream) a GPU event's args name, else its track's (pid, tid).
  std::pair<int64_t, int64_t> DeviceStream(const TraceEvent& ev) const {
    const TraceTrack& track = trace_.tracks[static_cast<size_t>(ev.track)];
    const TraceEventDetail& d = trace_.Detail(ev);
    return {d.device >= 0 ? d.device : track.pid, d.stream != kUnset ? d.stream : track.tid};
  }

  // A synchronization's kind ("Stream Wait Event", "Context Sync", ...):
  // its "cuda_sync_kind" arg, else its name.
  std::string_view SyncKind(const TraceEvent& ev) const {
    const StringId kind = trace_.Detail(ev).sync_kind;
    return trace_.Str(kind != 0 ? kind : ev.name);
  }

  int64_t TaskBytes(const TraceEvent& ev) const {
    const TraceEventDetail& d = trace_.Detail(ev);
    if (d.bytes >= 0) return d.bytes;
    if (d.in_msg_nelems >= 0) return SaturatingMul(d.in_msg_nelems, DtypeBytes(trace_.Str(d.dtype)));
    if (ev.kind == EventKind::kUserAnnotation && ev.input_dims != 0) {
      return FirstInputBytes(ev);
    }
    return -1;
  }

  // Elements of the first tensor in an "Input Dims" array ("[[136714]]",
  // "[[[4, 8]], [], []]"): the product of the first innermost list.
  static int64_t FirstTensorElements(std::string_view dims) {
    const size_t open = dims.find_last_of('[', dims.find(']'));
    const size_t close = dims.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) return 0;
    int64_t product = 1;
    bool any = false;
    for (std::string_view d : Split(dims.substr(open + 1, close - open - 1), ',')) {
      while (!d.empty() && d.front() == ' ') d.remove_prefix(1);
      std::optional<int64_t> v = ParseInt(d);
      if (!v.has_value() || *v < 0) return 0;
      product = SaturatingMul(product, *v);
      any = true;
    }
    return any ? product : 1;
  }

  // The first entry of an "Input type" array ('["float", ...]' -> float).
  static std::string_view FirstType(std::string_view types) {
    const size_t a = types.find('"');
    const size_t b = a == std::string_view::npos ? a : types.find('"', a + 1);
    return b == std::string_view::npos ? std::string_view() : types.substr(a + 1, b - a - 1);
  }

  // Bytes per element of a dtype as traces spell it: NCCL args ("Float",
  // "Half", "BFloat16"), Input type ("float", "c10::Half", "long int").
  static int64_t DtypeBytes(std::string_view dtype) {
    std::string d = AsciiLower(dtype);
    if (StartsWith(d, "c10::")) d = d.substr(5);
    if (d == "double" || d == "long" || d == "long int" || d == "int64" || d == "float64" ||
        d == "complexfloat" || d == "int64_t") {
      return 8;
    }
    if (d == "half" || d == "bfloat16" || d == "short" || d == "short int" || d == "float16" || d == "int16") {
      return 2;
    }
    if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" || d == "unsigned char" ||
        d == "signed char" || StartsWith(d, "float8")) {
      return 1;
    }
    return 4;  // float, int and unknown
  }

  void LinkCpuThreads() {
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      if (graph_.resources[r].kind != ResourceKind::kCpuThread) continue;
      const std::vector<int32_t>& list = resource_tasks_[r];
      // (Their gaps were set as they were created.)
      for (size_t i = 1; i < list.size(); ++i) graph_.AddEdge(list[i - 1], list[i], EdgeKind::kSequential);
    }
  }

  // The latency to put on a constraint whose recorded delay was `observed`:
  // the typical value, or in exact mode the observed delay where the
  // constraint is the one that held (and never more than observed elsewhere,
  // so it cannot hold where it did not).
  TimeNs Latency(TimeNs observed, TimeNs typical, bool binds) const {
    observed = std::max<TimeNs>(0, observed);
    if (!options_.exact_latencies) return typical;
    return binds ? observed : std::min(typical, observed);
  }

  // --- rule 3: launches ----------------------------------------------------
  // The task that stands for CPU event `e` when it launches work: itself if it
  // is a task, else the first task inside it.
  int32_t TaskForCpuEvent(int32_t e) const {
    if (task_of_[static_cast<size_t>(e)] != kNone) return task_of_[static_cast<size_t>(e)];
    const TraceEvent& ev = Ev(e);
    for (int32_t r = 0; r < static_cast<int32_t>(graph_.resources.size()); ++r) {
      if (resource_track_[static_cast<size_t>(r)] != ev.track) continue;
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(r)];
      auto it = std::lower_bound(list.begin(), list.end(), ev.ts_ns,
                                 [&](int32_t id, TimeNs t) { return Start(id) < t; });
      if (it != list.end() && Start(*it) < ev.end_ns()) return *it;
    }
    return kNone;
  }

  void LinkLaunches() {
    // The first call of each correlation launched; later ones are dropped.
    int64_t min_correlation = std::numeric_limits<int64_t>::max(), max_correlation = kUnset;
    for (const Launcher& l : launchers_) {
      min_correlation = std::min(min_correlation, l.correlation);
      max_correlation = std::max(max_correlation, l.correlation);
    }
    correlation_launcher_.Reset(min_correlation, max_correlation, launchers_.size());
    size_t kept = 0;
    for (const Launcher& l : launchers_) {
      if (correlation_launcher_.Insert(l.correlation, static_cast<int32_t>(kept))) launchers_[kept++] = l;
    }
    launchers_.resize(kept);
    launcher_ = HugePagesVector(graph_.tasks.size(), kNone);
    std::vector<uint8_t> launched(launchers_.size(), 0);
    for (int32_t s : gpu_streams_) {
      for (int32_t k : resource_tasks_[static_cast<size_t>(s)]) {
        const Task& task = graph_.tasks[static_cast<size_t>(k)];
        const int32_t e = static_cast<int32_t>(task.trace_event);
        const int32_t index = correlation_launcher_.Find(task.correlation);
        const int32_t l = index == kNone ? kNone : TaskForCpuEvent(launchers_[static_cast<size_t>(index)].event);
        if (l == kNone) {
          Warn("kernel_without_launch",
               StrCat(EventLabel(e), ": no runtime call with correlation ", task.correlation,
                            "; it keeps its recorded idle time on its stream"));
          continue;
        }
        launched[static_cast<size_t>(index)] = 1;
        launcher_[static_cast<size_t>(k)] = l;
        if (task.recorded_start_ns < Start(l)) {
          Warn("activity_before_launch",
               StrCat(EventLabel(e), " starts before the call that launched it (clock skew?)"));
        }
      }
    }
    // In event order, so that the warning's example is the same every run.
    for (size_t i = 0; i < launchers_.size(); ++i) {
      if (launched[i] || !launchers_[i].launch_call) continue;
      Warn("launch_without_kernel", StrCat(EventLabel(launchers_[i].event), ": launch with correlation ",
                                           launchers_[i].correlation, " has no GPU activity in the trace"));
    }
    // Activities launched per stream and per CPU thread, by launch time.
    // Work with no recorded launch was submitted before the trace began.
    stream_launches_.assign(graph_.resources.size(), {});
    thread_launches_.assign(graph_.resources.size(), {});
    for (int32_t s : gpu_streams_) {
      ReserveHugePages(stream_launches_[static_cast<size_t>(s)], resource_tasks_[static_cast<size_t>(s)].size());
    }
    for (int32_t s : gpu_streams_) {
      for (int32_t k : resource_tasks_[static_cast<size_t>(s)]) {
        const int32_t l = launcher_[static_cast<size_t>(k)];
        const TimeNs when = l == kNone ? origin_ - 1 : Start(l);
        // Written in place, as the tasks are (see CollectCpuTasks).
        auto append = [&](std::vector<Launched>& list) {
          Launched& launched = list.emplace_back();
          launched.time = when;
          launched.task = k;
        };
        append(stream_launches_[static_cast<size_t>(s)]);
        if (l != kNone) append(thread_launches_[static_cast<size_t>(T(l).resource)]);
      }
    }
    auto by_time = [](const Launched& a, const Launched& b) {
      return a.time != b.time ? a.time < b.time : a.task < b.task;
    };
    for (auto& v : stream_launches_) SortRuns(v, by_time);
    for (auto& v : thread_launches_) SortRuns(v, by_time);
  }

  // Last activity in `list` launched strictly before `t`, or kNone.
  static int32_t LastLaunchedBefore(const std::vector<Launched>& list, TimeNs t) {
    auto it = std::lower_bound(list.begin(), list.end(), t,
                               [](const Launched& l, TimeNs v) { return l.time < v; });
    return it == list.begin() ? kNone : std::prev(it)->task;
  }

  // First activity in `list` launched at or after `t`, or kNone.
  static int32_t FirstLaunchedAfter(const std::vector<Launched>& list, TimeNs t) {
    auto it = std::lower_bound(list.begin(), list.end(), t,
                               [](const Launched& l, TimeNs v) { return l.time < v; });
    return it == list.end() ? kNone : it->task;
  }

  // Work that started before its call returned was submitted from inside the
  // call: cudaMemcpy; cudaMemcpyAsync from pageable memory, which stages and
  // submits chunk by chunk; a launch that blocked because the launch queue
  // was full.
  bool IsBlockingLaunch(int32_t call, int32_t activity) const {
    if (Traits(call).sync == SyncCall::kBlockingCopy) return true;
    return Start(activity) < End(call);
  }

  // A call that returned only after the copy it submitted had finished waited
  // for it.
  bool WaitedForOwnCopy(int32_t call, int32_t activity) const {
    if (!blocking_[static_cast<size_t>(activity)] || End(activity) > End(call)) return false;
    const TaskKind kind = task_kind_[static_cast<size_t>(activity)];
    return (kind == TaskKind::kMemcpy || kind == TaskKind::kMemset ||
            Traits(call).sync == SyncCall::kBlockingCopy);
  }

  // When the launch of `k` lets it start, with typical latencies: an
  // asynchronous launch submits when the call returns; a blocking call
  // submits soon after it starts.
  TimeNs LaunchReady(int32_t k) const {
    const int32_t l = launcher_[static_cast<size_t>(k)];
    return blocking_[static_cast<size_t>(k)] ? Start(l) + BlockingLatency(k)
                                             : End(l) + launch_latency_;
  }

  // The typical delay from a blocking call's start to its activity's start.
  // A copy takes that of this trace's blocking copies of its class (see
  // CopyClassTable): a copy from pageable memory is staged through a pinned
  // buffer before its DMA starts (0.25 ms from 1 MB up on an A100, 0.58 ms
  // for 38 MB on an MI300, against 10-40 us for a launch). Other blocking
  // launches take the median over every launch.
  TimeNs BlockingLatency(int32_t k) const {
    if (copy_blocking_latency_.empty()) return blocking_latency_;
    auto it = copy_blocking_latency_.find(k);
    return it != copy_blocking_latency_.end() ? it->second : blocking_latency_;
  }

  // The activity on another stream of `stream`'s device that ended last at
  // or before `t`; kNone when none did.
  int32_t LastEndedElsewhere(int32_t stream, TimeNs t) const {
    const int64_t device = graph_.resources[static_cast<size_t>(stream)].process;
    int32_t last = kNone;
    for (int32_t other : gpu_streams_) {
      if (other == stream || graph_.resources[static_cast<size_t>(other)].process != device) continue;
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(other)];
      auto it = std::upper_bound(list.begin(), list.end(), t, [&](TimeNs x, int32_t id) { return x < End(id); });
      if (it == list.begin()) continue;
      const int32_t a = *std::prev(it);
      if (last == kNone || End(a) > End(last)) last = a;
    }
    return last;
  }

  // A copy made by a blocking call: from pageable memory it is staged before
  // its DMA and copied out after it (see CopyClassTable).
  bool BlockingCopy(int32_t k) const {
    return blocking_[static_cast<size_t>(k)] && task_kind_[static_cast<size_t>(k)] == TaskKind::kMemcpy;
  }

  // Launch latencies (call end -> activity start, and call start -> activity
  // start for blocking calls) on an idle stream, and the gap between
  // back-to-back activities, as this trace shows them.
  void EstimateTypicalLatencies() {
    blocking_.assign(graph_.tasks.size(), 0);
    std::vector<TimeNs> end_samples, start_samples, gap_samples;
    std::vector<int32_t> blocking_copies;
    CopyClassTable copy_delays;
    for (int32_t s : gpu_streams_) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      for (size_t i = 0; i < list.size(); ++i) {
        const int32_t k = list[i];
        const int32_t l = launcher_[static_cast<size_t>(k)];
        if (l == kNone) continue;
        blocking_[static_cast<size_t>(k)] = IsBlockingLaunch(l, k) ? 1 : 0;
        const bool copy = BlockingCopy(k);
        if (copy) blocking_copies.push_back(k);
        if (i == 0 || End(list[i - 1]) < Start(l)) {
          if (!blocking_[static_cast<size_t>(k)]) end_samples.push_back(Start(k) - End(l));
          start_samples.push_back(Start(k) - Start(l));
          // A copy that started when work on another stream of its device
          // ended may have waited for it (legacy default-stream semantics, an
          // event wait the trace did not record): its delay is no sample.
          const int32_t other = copy ? LastEndedElsewhere(s, Start(k)) : kNone;
          if (copy && (other == kNone || End(other) < Start(l))) {
            copy_delays.Add(T(k).name, T(k).bytes, std::max<TimeNs>(0, Start(k) - Start(l)));
          }
        }
      }
    }
    launch_latency_ = std::clamp<TimeNs>(Median(end_samples, options_.default_launch_latency_ns), 0, 100'000);
    blocking_latency_ = std::clamp<TimeNs>(Median(start_samples, options_.default_launch_latency_ns), 0, 100'000);
    copy_delays.Finish();
    for (int32_t k : blocking_copies) {
      if (const std::optional<TimeNs> delay = copy_delays.Find(T(k).name, T(k).bytes)) {
        copy_blocking_latency_[k] = *delay;
      }
    }
    for (int32_t s : gpu_streams_) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      for (size_t i = 1; i < list.size(); ++i) {
        if (launcher_[static_cast<size_t>(list[i])] == kNone) continue;
        if (End(list[i - 1]) > LaunchReady(list[i])) {
          gap_samples.push_back(std::max<TimeNs>(0, Start(list[i]) - End(list[i - 1])));
        }
      }
    }
    kernel_gap_ = std::min<TimeNs>(RobustMean(gap_samples, options_.default_kernel_gap_ns, 10, 5'000), 10'000);
  }

  // --- rule 5: cross-stream waits -------------------------------------------
  void AddStreamWait(int32_t src, int32_t dst) {
    if (src == kNone || dst == kNone || src == dst) return;
    if (T(src).resource == T(dst).resource) return;
    // The wait can only have held if the source ended before the waiter began.
    if (End(src) > Start(dst)) return;
    stream_waits_.emplace_back(src, dst);
  }

  void FindStreamWaits() {
    bool have_sync_records = false;
    absl::flat_hash_map<std::pair<int64_t, int64_t>, int32_t> stream_resource;
    for (int32_t s : gpu_streams_) {
      const Resource& r = graph_.resources[static_cast<size_t>(s)];
      stream_resource[{r.process, r.thread}] = s;
    }
    for (int32_t i : sync_events_) {
      const TraceEvent& ev = Ev(i);
      if (SyncKind(ev) != "Stream Wait Event") continue;
      have_sync_records = true;
      const TraceEventDetail& d = trace_.Detail(ev);
      const auto [device, stream] = DeviceStream(ev);
      auto waiting = stream_resource.find({device, stream});
      auto source = stream_resource.find({device, d.wait_on_stream});
      const int32_t record = correlation_launcher_.Find(d.wait_on_event_record_correlation);
      const int32_t wait = correlation_launcher_.Find(ev.correlation);
      if (waiting == stream_resource.end() || source == stream_resource.end() || record == kNone ||
          wait == kNone) {
        continue;
      }
      AddStreamWait(LastLaunchedBefore(stream_launches_[static_cast<size_t>(source->second)],
                                       Ev(launchers_[static_cast<size_t>(record)].event).ts_ns),
                    FirstLaunchedAfter(stream_launches_[static_cast<size_t>(waiting->second)],
                                       Ev(launchers_[static_cast<size_t>(wait)].event).ts_ns));
    }
    if (have_sync_records) return;
    // Without cuda_sync records: a cudaStreamWaitEvent waits for the event its
    // thread recorded last, which holds the work that thread launched before.
    // Where no record precedes it (some traces omit cudaEventRecord), it
    // waits for the latest work launched on another stream.
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      if (graph_.resources[r].kind != ResourceKind::kCpuThread) continue;
      TimeNs last_record = kNeverNs;
      for (int32_t id : resource_tasks_[r]) {
        if (Traits(id).event_record) {
          last_record = Start(id);
        } else if (Traits(id).stream_wait_event) {
          const int32_t dst = FirstLaunchedAfter(thread_launches_[r], Start(id));
          if (dst == kNone) continue;
          if (last_record != kNeverNs) {
            AddStreamWait(LastLaunchedBefore(thread_launches_[r], last_record), dst);
          } else {
            AddStreamWait(LatestLaunchedElsewhere(T(dst).resource, Start(id)), dst);
          }
        }
      }
    }
  }

  // The activity launched last before `t` on any GPU stream but `stream`.
  int32_t LatestLaunchedElsewhere(int32_t stream, TimeNs t) const {
    int32_t best = kNone;
    TimeNs best_time = kNeverNs;
    for (int32_t s : gpu_streams_) {
      if (s == stream) continue;
      const std::vector<Launched>& list = stream_launches_[static_cast<size_t>(s)];
      auto it = std::lower_bound(list.begin(), list.end(), t,
                                 [](const Launched& l, TimeNs v) { return l.time < v; });
      if (it != list.begin() && std::prev(it)->time > best_time) {
        best_time = std::prev(it)->time;
        best = std::prev(it)->task;
      }
    }
    return best;
  }

  // An activity that started long after every constraint the trace recorded
  // for it, at the moment work on another stream of its device ended, waited
  // for that work (an event wait the trace did not record).
  void InferUnrecordedWaits() {
    const TimeNs slack = std::max<TimeNs>(20'000, 10 * (launch_latency_ + kernel_gap_));
    const TimeNs window = std::max<TimeNs>(5'000, 4 * kernel_gap_);
    absl::flat_hash_set<std::pair<int32_t, int32_t>> known(stream_waits_.begin(), stream_waits_.end());
    absl::flat_hash_map<int32_t, TimeNs> latest_dep_end;
    for (const auto& [src, dst] : stream_waits_) {
      auto [it, inserted] = latest_dep_end.try_emplace(dst, End(src));
      if (!inserted) it->second = std::max(it->second, End(src));
    }
    std::vector<std::pair<int32_t, int32_t>> found;
    for (int32_t s : gpu_streams_) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      for (size_t i = 0; i < list.size(); ++i) {
        const int32_t k = list[i];
        if (launcher_[static_cast<size_t>(k)] == kNone) continue;
        TimeNs explained = LaunchReady(k);
        if (i > 0) explained = std::max(explained, End(list[i - 1]) + kernel_gap_);
        if (auto it = latest_dep_end.find(k); it != latest_dep_end.end()) {
          explained = std::max(explained, it->second + kernel_gap_);
        }
        if (Start(k) - explained < slack) continue;
        int32_t cause = LastEndedElsewhere(s, Start(k));
        if (cause != kNone && Start(k) - End(cause) > window) cause = kNone;
        if (cause != kNone && !known.contains({cause, k})) found.emplace_back(cause, k);
      }
    }
    for (const auto& [src, dst] : found) AddStreamWait(src, dst);
    if (!found.empty()) {
      Warn("inferred_stream_waits",
           StrCat(trace_.path, ": ", found.size(), " GPU activities waited for work on another stream "
                  "without a recorded event wait; linked to the work that ended just before them"));
    }
  }

  // Rules 2, 3, 5: stream order, launch and stream-wait edges, with the
  // recorded start of each activity decomposed over its constraints.
  void LinkGpuStreams() {
    std::sort(stream_waits_.begin(), stream_waits_.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second < b.second : a.first < b.first; });
    stream_waits_.erase(std::unique(stream_waits_.begin(), stream_waits_.end()), stream_waits_.end());
    size_t wait_pos = 0;
    std::vector<int32_t> order;
    for (int32_t s : gpu_streams_) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      order.insert(order.end(), list.begin(), list.end());
    }
    SortRuns(order, std::less<int32_t>());
    std::vector<int32_t> prev_on_stream = HugePagesVector(graph_.tasks.size(), kNone);
    for (int32_t s : gpu_streams_) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      for (size_t i = 1; i < list.size(); ++i) prev_on_stream[static_cast<size_t>(list[i])] = list[i - 1];
    }
    std::vector<int32_t> deps;
    for (size_t i = 0; i < order.size(); ++i) {
      if (i + kPrefetchAhead < order.size()) PrefetchTask(order[i + kPrefetchAhead]);
      const int32_t k = order[i];
      deps.clear();
      while (wait_pos < stream_waits_.size() && stream_waits_[wait_pos].second < k) ++wait_pos;
      while (wait_pos < stream_waits_.size() && stream_waits_[wait_pos].second == k) {
        deps.push_back(stream_waits_[wait_pos++].first);
      }
      const TimeNs s = Start(k);
      const int32_t prev = prev_on_stream[static_cast<size_t>(k)];
      const int32_t launch = launcher_[static_cast<size_t>(k)];
      // Natural time each constraint would allow with typical latencies; the
      // latest one is taken to be the one that held.
      enum Binder { kStream, kLaunchBinds, kDep };
      Binder binder = kStream;
      int32_t binding_dep = kNone;
      TimeNs best = kNeverNs;
      if (prev != kNone) best = End(prev) + kernel_gap_;
      else if (launch == kNone) best = origin_;
      if (launch != kNone && LaunchReady(k) >= best) {
        best = LaunchReady(k);
        binder = kLaunchBinds;
      }
      for (int32_t d : deps) {
        if (End(d) + kernel_gap_ > best) {
          best = End(d) + kernel_gap_;
          binder = kDep;
          binding_dep = d;
        }
      }
      auto fit = [&](TimeNs anchor, TimeNs typical, bool binds) { return Latency(s - anchor, typical, binds); };
      Task& task = T(k);
      if (prev != kNone) {
        // Work with no recorded cause keeps its recorded idle time.
        const bool uncaused = launch == kNone && deps.empty();
        task.gap_ns = uncaused ? std::max<TimeNs>(0, s - End(prev)) : fit(End(prev), kernel_gap_, binder == kStream);
        graph_.AddEdge(prev, k, EdgeKind::kSequential);
      } else {
        task.gap_ns = launch == kNone && binder == kStream ? std::max<TimeNs>(0, s - origin_) : 0;
      }
      if (launch != kNone) {
        if (blocking_[static_cast<size_t>(k)]) {
          graph_.AddEdge(launch, k, EdgeKind::kBlockingLaunch,
                         fit(Start(launch), BlockingLatency(k), binder == kLaunchBinds));
        } else {
          graph_.AddEdge(launch, k, EdgeKind::kLaunch, fit(End(launch), launch_latency_, binder == kLaunchBinds));
        }
      }
      for (int32_t d : deps) {
        graph_.AddEdge(d, k, EdgeKind::kStreamWait, fit(End(d), kernel_gap_, d == binding_dep));
      }
    }
  }

  // --- rule 5b: launch-queue back-pressure ----------------------------------
  // An activity launched on a device, as Launched, with which of the
  // device's streams runs it (0, 1, ... in the order the streams were met).
  struct DeviceLaunch {
    TimeNs time = 0;
    int32_t task = kNone;
    int32_t stream = 0;
  };

  void LinkLaunchQueue() {
    absl::flat_hash_map<int64_t, std::vector<DeviceLaunch>> by_device;  // devices with a recorded launch
    absl::flat_hash_map<int64_t, int32_t> streams_of_device;
    for (int32_t s : gpu_streams_) {
      const int64_t device = graph_.resources[static_cast<size_t>(s)].process;
      const int32_t stream = streams_of_device[device]++;
      for (const Launched& l : stream_launches_[static_cast<size_t>(s)]) {
        if (launcher_[static_cast<size_t>(l.task)] != kNone) {
          by_device[device].push_back(DeviceLaunch{l.time, l.task, stream});
        }
      }
    }
    for (auto& [device, launched] : by_device) {
      SortRuns(launched, [](const DeviceLaunch& a, const DeviceLaunch& b) {
        return a.time != b.time ? a.time < b.time : a.task < b.task;
      });
      const size_t n = launched.size();
      // Activities already launched but not started when each launch began
      // (a stream runs its activities in launch order: WaitingCounts' cursor
      // per stream, not a heap of thousands waiting, half of this pass on
      // big_1m).
      std::vector<TimeNs> at(n), start(n);
      std::vector<int32_t> stream(n);
      for (size_t j = 0; j < n; ++j) {
        at[j] = launched[j].time;
        start[j] = Start(launched[j].task);
        stream[j] = launched[j].stream;
      }
      const std::vector<int32_t> pending = WaitingCounts(at, start, stream, streams_of_device[device]);
      int32_t max_pending = 0;
      for (const int32_t p : pending) max_pending = std::max(max_pending, p);
      // Typical cost of each launch API where the queue had room (by name;
      // kUnset for names never seen with room).
      std::vector<StringId> names(n);
      for (size_t j = 0; j < n; ++j) names[j] = T(launcher_[static_cast<size_t>(launched[j].task)]).name;
      std::vector<std::vector<TimeNs>> costs(graph_.strings.size());
      for (size_t j = 0; j < n; ++j) {
        const int32_t l = launcher_[static_cast<size_t>(launched[j].task)];
        if (pending[j] < max_pending) costs[static_cast<size_t>(names[j])].push_back(End(l) - Start(l));
      }
      std::vector<TimeNs> typical(graph_.strings.size(), kUnset);
      for (size_t name = 0; name < costs.size(); ++name) {
        if (!costs[name].empty()) typical[name] = Median(costs[name], 0);
      }
      // The queue filled if launches that found max_pending activities
      // waiting took much longer than their kind usually does.
      int64_t blocked_calls = 0;
      for (size_t j = 0; j < n; ++j) {
        const int32_t l = launcher_[static_cast<size_t>(launched[j].task)];
        const TimeNs usual = std::max<TimeNs>(0, typical[static_cast<size_t>(names[j])]);
        if (pending[j] == max_pending && End(l) - Start(l) > 2 * usual + 5'000) ++blocked_calls;
      }
      const bool saturated = max_pending >= 64 && blocked_calls >= 5;
      const int32_t depth = saturated ? max_pending : std::max(max_pending + 1, options_.default_launch_queue_depth);
      std::vector<TimeNs> tails;
      for (size_t j = static_cast<size_t>(depth); j < n; ++j) {
        const int32_t l = launcher_[static_cast<size_t>(launched[j].task)];
        const int32_t a = launched[j - static_cast<size_t>(depth)].task;
        if (Start(a) > Start(l)) tails.push_back(End(l) - Start(a));
      }
      const TimeNs tail = Median(tails, options_.default_sync_tail_ns);
      int32_t last_launcher = kNone;
      int64_t blocked = 0;
      for (size_t j = static_cast<size_t>(depth); j < n; ++j) {
        const int32_t l = launcher_[static_cast<size_t>(launched[j].task)];
        if (l == last_launcher || Traits(l).sync != SyncCall::kNone) continue;  // blocking copies wait on their own
        last_launcher = l;
        const int32_t a = launched[j - static_cast<size_t>(depth)].task;
        // The queue was full when the call began: the activity a queue-depth
        // back had not started yet. Its time past the usual cost was waiting.
        const bool full = Start(a) > Start(l);
        if (full) {
          ++blocked;
          const TimeNs usual = typical[static_cast<size_t>(names[j])];
          if (usual != kUnset && !options_.exact_latencies) {
            T(l).duration_ns = std::min(T(l).duration_ns, usual);
          } else if (options_.exact_latencies) {
            T(l).duration_ns = std::min(T(l).duration_ns, Latency(End(l) - Start(a), tail, true));
          }
        }
        graph_.AddEdge(a, l, EdgeKind::kLaunchQueue, Latency(End(l) - Start(a), tail, full));
      }
      if (saturated) {
        Warn("launch_queue_full",
             StrCat(trace_.path, ": GPU ", device, "'s launch queue was full (", depth, " launches pending) at ",
                    blocked, " launch calls: the host waited for the device; that wait is not counted as CPU work"));
      }
    }
  }

  // --- rule 4: synchronizing calls -----------------------------------------
  struct SyncWait {
    int32_t task = kNone;
    std::vector<int32_t> awaited;
    // The awaited activity that ended last, after the call began: the one it
    // waited for (kNone when none ended after it began).
    int32_t binding = kNone;
  };

  // The stream a stream/event sync waited on, inferred from which stream's
  // latest work ended closest before the call returned.
  int32_t InferSyncedActivity(int32_t call) const {
    const TimeNs cs = Start(call), ce = End(call);
    int32_t best_waited = kNone, latest_launched = kNone;
    TimeNs latest_launch_time = kNeverNs;
    for (int32_t s : gpu_streams_) {
      const std::vector<Launched>& list = stream_launches_[static_cast<size_t>(s)];
      const int32_t a = LastLaunchedBefore(list, cs);
      if (a == kNone) continue;
      if (End(a) <= ce && End(a) > cs && (best_waited == kNone || End(a) > End(best_waited))) best_waited = a;
      auto it = std::lower_bound(list.begin(), list.end(), cs,
                                 [](const Launched& l, TimeNs v) { return l.time < v; });
      const TimeNs when = std::prev(it)->time;
      if (when > latest_launch_time) {
        latest_launch_time = when;
        latest_launched = a;
      }
    }
    return best_waited != kNone ? best_waited : latest_launched;
  }

  void LinkSyncCalls() {
    absl::flat_hash_map<int64_t, int32_t> sync_records;  // correlation -> cuda_sync event
    for (int32_t i : sync_events_) {
      if (Ev(i).correlation != kUnset) sync_records.try_emplace(Ev(i).correlation, i);
    }
    absl::flat_hash_map<std::pair<int64_t, int64_t>, int32_t> stream_resource;
    for (int32_t s : gpu_streams_) {
      const Resource& r = graph_.resources[static_cast<size_t>(s)];
      stream_resource[{r.process, r.thread}] = s;
    }
    // The activities each call launched, in stream order: launched[first[l]
    // .. first[l + 1]) for call l (compressed rows; calls without any have
    // an empty row).
    CompressedRows rows(graph_.tasks.size());
    for (int32_t s : gpu_streams_) {
      for (int32_t k : resource_tasks_[static_cast<size_t>(s)]) {
        const int32_t l = launcher_[static_cast<size_t>(k)];
        if (l != kNone) rows.Count(static_cast<size_t>(l));
      }
    }
    std::vector<int32_t> launched = HugePagesVector<int32_t>(rows.Start(), 0);
    for (int32_t s : gpu_streams_) {
      for (int32_t k : resource_tasks_[static_cast<size_t>(s)]) {
        const int32_t l = launcher_[static_cast<size_t>(k)];
        if (l != kNone) launched[static_cast<size_t>(rows.Place(static_cast<size_t>(l)))] = k;
      }
    }
    const std::vector<int32_t> first = std::move(rows).TakeOffsets();
    std::vector<SyncWait> waits;
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      if (graph_.resources[r].kind != ResourceKind::kCpuThread) continue;
      for (int32_t id : resource_tasks_[r]) {
        // The kind from its dense copy: most of a thread's tasks are not
        // calls, and are not reached at all.
        const TaskKind kind = task_kind_[static_cast<size_t>(id)];
        if (kind != TaskKind::kSync && kind != TaskKind::kRuntime) continue;
        SyncWait w;
        w.task = id;
        const TimeNs cs = Start(id), ce = End(id);
        const SyncCall call = Traits(id).sync;
        auto record = sync_records.end();
        if (!sync_records.empty()) {
          if (const int64_t correlation = T(id).correlation; correlation != kUnset) record = sync_records.find(correlation);
        }
        int64_t recorded_stream = kUnset;
        bool recorded_all = false;
        if (record != sync_records.end()) {
          const TraceEvent& ev = Ev(record->second);
          const TraceEventDetail& d = trace_.Detail(ev);
          recorded_all = SyncKind(ev) == "Context Sync";
          recorded_stream = d.wait_on_stream != kUnset ? d.wait_on_stream : d.stream;
        }
        if (call == SyncCall::kDevice || recorded_all) {
          for (int32_t s : gpu_streams_) {
            const int32_t a = LastLaunchedBefore(stream_launches_[static_cast<size_t>(s)], cs);
            if (a != kNone) w.awaited.push_back(a);
          }
        } else if (call == SyncCall::kStream || call == SyncCall::kEvent) {
          int32_t a = kNone;
          if (recorded_stream != kUnset) {
            for (int32_t s : gpu_streams_) {
              if (graph_.resources[static_cast<size_t>(s)].thread == recorded_stream) {
                a = LastLaunchedBefore(stream_launches_[static_cast<size_t>(s)], cs);
              }
            }
          } else {
            a = InferSyncedActivity(id);
          }
          if (a != kNone) w.awaited.push_back(a);
        }
        for (int32_t j = first[static_cast<size_t>(id)]; j < first[static_cast<size_t>(id) + 1]; ++j) {
          const int32_t k = launched[static_cast<size_t>(j)];
          if (WaitedForOwnCopy(id, k)) {
            w.awaited.push_back(k);
            T(id).kind = TaskKind::kSync;
            task_kind_[static_cast<size_t>(id)] = TaskKind::kSync;
          }
        }
        // Keep only work that ended before the call returned.
        w.awaited.erase(std::remove_if(w.awaited.begin(), w.awaited.end(),
                                       [&](int32_t a) { return End(a) > ce; }),
                        w.awaited.end());
        std::sort(w.awaited.begin(), w.awaited.end());
        w.awaited.erase(std::unique(w.awaited.begin(), w.awaited.end()), w.awaited.end());
        for (int32_t a : w.awaited) {
          if (End(a) > cs && (w.binding == kNone || End(a) > End(w.binding))) w.binding = a;
        }
        if (!w.awaited.empty()) waits.push_back(std::move(w));
      }
    }
    // A blocking copy the call itself made, from which it returned: from
    // pageable memory, its data is then copied out of the pinned staging
    // buffer, for a time that grows with its size (4-7 us up to 64 kB, 50-66
    // us from 4 MB up for owlv2's device-to-host copies on an H100).
    auto own_copy = [&](const SyncWait& w) {
      return w.binding != kNone && launcher_[static_cast<size_t>(w.binding)] == w.task && BlockingCopy(w.binding);
    };
    std::vector<TimeNs> tails;
    CopyClassTable copy_tails;
    for (const SyncWait& w : waits) {
      if (w.binding == kNone) continue;
      tails.push_back(End(w.task) - End(w.binding));
      if (own_copy(w)) copy_tails.Add(T(w.binding).name, T(w.binding).bytes, End(w.task) - End(w.binding));
    }
    sync_tail_ = Median(tails, options_.default_sync_tail_ns);
    copy_tails.Finish();
    for (const SyncWait& w : waits) {
      const TimeNs cs = Start(w.task), ce = End(w.task);
      const int32_t binding = w.binding;
      TimeNs tail = sync_tail_;
      if (own_copy(w)) tail = copy_tails.Find(T(binding).name, T(binding).bytes).value_or(sync_tail_);
      for (int32_t a : w.awaited) {
        const bool binds = a == binding;
        graph_.AddEdge(a, w.task, EdgeKind::kSync, Latency(ce - End(a), binds ? tail : sync_tail_, binds));
      }
      // Waiting is not work: a call that waited keeps only its own overhead.
      if (binding != kNone) T(w.task).duration_ns = std::min(ce - cs, Latency(ce - End(binding), tail, true));
    }
  }

  // --- rule 6: cross-thread waits ------------------------------------------
  void LinkThreads() {
    std::vector<int32_t> threads;
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      if (graph_.resources[r].kind == ResourceKind::kCpuThread && !resource_tasks_[r].empty()) {
        threads.push_back(static_cast<int32_t>(r));
      }
    }
    if (threads.size() < 2) return;
    for (int32_t r : threads) {
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(r)];
      for (size_t i = 0; i < list.size(); ++i) {
        const int32_t b = list[i];
        const TimeNs sb = Start(b);
        const TimeNs idle_from = i == 0 ? origin_ : End(list[i - 1]);
        if (sb - idle_from < options_.min_thread_wait_ns) continue;
        int32_t waker = kNone;
        for (int32_t other : threads) {
          if (other == r || graph_.resources[static_cast<size_t>(other)].process !=
                                graph_.resources[static_cast<size_t>(r)].process) {
            continue;
          }
          const std::vector<int32_t>& ol = resource_tasks_[static_cast<size_t>(other)];
          // Tasks on a thread do not overlap, so their ends are sorted too.
          auto it = std::upper_bound(ol.begin(), ol.end(), sb,
                                     [&](TimeNs t, int32_t id) { return t < End(id); });
          if (it == ol.begin()) continue;
          const int32_t a = *std::prev(it);
          if (End(a) <= idle_from || sb - End(a) > options_.max_thread_wake_ns) continue;
          if (waker == kNone || End(a) > End(waker)) waker = a;
        }
        if (waker == kNone) continue;
        graph_.AddEdge(waker, b, EdgeKind::kThread, sb - End(waker));
        T(b).gap_ns = 0;
      }
    }
  }

  // --- rule 8: iterations --------------------------------------------------
  int32_t ResourceOfTrack(int32_t track) const {
    for (size_t r = 0; r < resource_track_.size(); ++r) {
      if (resource_track_[r] == track) return static_cast<int32_t>(r);
    }
    return kNone;
  }

  void AddIteration(std::string name, int32_t resource, TimeNs begin, TimeNs end) {
    if (resource == kNone) return;
    const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(resource)];
    auto first = std::lower_bound(list.begin(), list.end(), begin,
                                  [&](int32_t id, TimeNs t) { return Start(id) < t; });
    auto stop = std::upper_bound(list.begin(), list.end(), end,
                                 [&](TimeNs t, int32_t id) { return t < End(id); });
    if (first == list.end() || stop == list.begin() || std::prev(stop) < first) {
      Warn("empty_iteration", StrCat(trace_.path, ": iteration ", name,
                                           " holds no operator on its thread; skipped"));
      return;
    }
    Iteration it;
    it.name = graph_.strings.Intern(name);
    it.begin_task = *first;
    it.end_task = *std::prev(stop);
    it.begin_offset_ns = Start(it.begin_task) - begin;
    it.end_offset_ns = end - End(it.end_task);
    it.measured_ns = end - begin;
    it.recorded_begin_ns = begin;
    graph_.iterations.push_back(it);
  }

  void AssignIterations() {
    std::vector<int32_t> steps, optimizer_steps;
    auto annotation_or_op = [&](int32_t e) {
      return Ev(e).kind == EventKind::kUserAnnotation || Ev(e).kind == EventKind::kCpuOp;
    };
    for (int32_t e : marked_[static_cast<size_t>(Mark::kProfilerStep)]) {
      if (annotation_or_op(e)) steps.push_back(e);
    }
    for (int32_t e : marked_[static_cast<size_t>(Mark::kOptimizerStep)]) {
      if (annotation_or_op(e)) optimizer_steps.push_back(e);
    }
    if (!steps.empty()) {
      for (int32_t e : steps) {
        AddIteration(std::string(trace_.Str(Ev(e).name)), ResourceOfTrack(Ev(e).track), Ev(e).ts_ns,
                     Ev(e).end_ns());
      }
    } else if (!optimizer_steps.empty()) {
      const int32_t resource = ResourceOfTrack(Ev(optimizer_steps.front()).track);
      TimeNs begin = resource == kNone || resource_tasks_[static_cast<size_t>(resource)].empty()
                         ? origin_
                         : Start(resource_tasks_[static_cast<size_t>(resource)].front());
      for (size_t i = 0; i < optimizer_steps.size(); ++i) {
        const TraceEvent& ev = Ev(optimizer_steps[i]);
        if (ResourceOfTrack(ev.track) != resource) continue;
        AddIteration(StrCat("iteration ", i, " (to ", trace_.Str(ev.name), ")"), resource, begin,
                     ev.end_ns());
        begin = ev.end_ns();
      }
    }
    // Each task's iteration is set by AssignPhasesAndLayers, in its passes
    // over the tasks (IterationOf).
  }

  // The iteration task `id` belongs to (-1 for none): the one whose window
  // holds its start; GPU work belongs to the iteration of the call that
  // launched it. A thread's or stream's tasks come in start order and
  // launches lag little: the iteration of the one before (`*hint`) is
  // tried before a search.
  int32_t IterationOf(int32_t id, size_t* hint) const {
    const std::vector<Iteration>& its = graph_.iterations;  // in start order
    if (its.empty()) return -1;
    const int32_t l = launcher_[static_cast<size_t>(id)];
    const TimeNs t = Start(l != kNone ? l : id);
    size_t i = *hint;
    if (!(its[i].recorded_begin_ns <= t && (i + 1 == its.size() || t < its[i + 1].recorded_begin_ns))) {
      auto it = std::upper_bound(its.begin(), its.end(), t,
                                 [](TimeNs x, const Iteration& w) { return x < w.recorded_begin_ns; });
      if (it == its.begin()) return -1;
      i = static_cast<size_t>(std::prev(it) - its.begin());
      *hint = i;
    }
    const Iteration& window = its[i];
    if (t >= window.recorded_begin_ns + window.measured_ns) return -1;  // between windows
    return static_cast<int32_t>(i);
  }

  // --- rule 7: phases and layers -------------------------------------------
  int32_t LayerFor(std::string_view module_name, int32_t parent) {
    const std::string key = StrCat(parent, "/", module_name);
    auto [it, inserted] = layer_index_.try_emplace(key, kNone);
    if (inserted) it->second = graph_.AddLayer(Layer{graph_.strings.Intern(module_name), parent});
    return it->second;
  }

  void AssignPhasesAndLayers() {
    const size_t n = trace_.events.size();
    std::vector<Phase> phase_of = HugePagesVector(n, Phase::kUnspecified);
    std::vector<int32_t> layer_of = HugePagesVector(n, kNone);
    absl::flat_hash_map<int64_t, int32_t> forward_layer_by_seq;
    for (int32_t e : cpu_range_events_) {
      const TraceEvent& ev = Ev(e);
      const int32_t p = parent_[static_cast<size_t>(e)];
      const NameTraits& name = TraitsOfTrace(ev.name);
      const Phase own = name.phase;
      const Phase inherited = p == kNone ? Phase::kUnspecified : phase_of[static_cast<size_t>(p)];
      // The innermost range that names a phase wins, except that nothing
      // inside communication or the optimizer is reclassified.
      Phase phase = own != Phase::kUnspecified ? own : inherited;
      if (inherited == Phase::kComm || inherited == Phase::kOptimizer || inherited == Phase::kData) {
        phase = inherited;
      }
      phase_of[static_cast<size_t>(e)] = phase;
      const int32_t parent_layer = p == kNone ? kNone : layer_of[static_cast<size_t>(p)];
      int32_t layer = parent_layer;
      if (name.module_range) layer = LayerFor(ModuleRangeName(trace_.Str(ev.name)), parent_layer);
      if (const int64_t seq = trace_.Detail(ev).sequence_number; seq != kUnset && ev.kind == EventKind::kCpuOp) {
        if (own == Phase::kBackward) {
          auto it = forward_layer_by_seq.find(seq);
          if (it != forward_layer_by_seq.end() && layer == kNone) layer = it->second;
        } else if (layer != kNone) {
          forward_layer_by_seq.try_emplace(seq, layer);
        }
      }
      layer_of[static_cast<size_t>(e)] = layer;
    }
    // CPU tasks: from their event; threads named for autograd do backward
    // work. Each pass reaches only the tasks it sets, thread by thread and
    // stream by stream (the tasks are large: a pass over all of them reads
    // them all from memory).
    std::vector<TimeNs> first_backward(graph_.iterations.size(), std::numeric_limits<TimeNs>::max());
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      const Resource& resource = graph_.resources[r];
      if (resource.kind != ResourceKind::kCpuThread) continue;
      const bool autograd = Contains(graph_.Str(resource.name), "autograd");
      size_t hint = 0;
      for (int32_t id : resource_tasks_[r]) {
        Task& task = T(id);
        task.iteration = IterationOf(id, &hint);
        const auto e = static_cast<size_t>(task.trace_event);
        task.phase = phase_of[e];
        task.layer = layer_of[e];
        if (task.phase == Phase::kUnspecified && autograd) task.phase = Phase::kBackward;
        if (task.phase == Phase::kBackward && task.iteration >= 0) {
          TimeNs& fb = first_backward[static_cast<size_t>(task.iteration)];
          fb = std::min(fb, task.recorded_start_ns);
        }
      }
    }
    // Unnamed work in an iteration before its backward pass is forward work.
    for (size_t r = 0; r < graph_.resources.size(); ++r) {
      if (graph_.resources[r].kind != ResourceKind::kCpuThread) continue;
      for (int32_t id : resource_tasks_[r]) {
        Task& task = T(id);
        if (task.phase == Phase::kUnspecified) {
          const bool forward = task.iteration >= 0 &&
                               task.recorded_start_ns < first_backward[static_cast<size_t>(task.iteration)];
          task.phase = forward ? Phase::kForward : Phase::kOther;
        }
        if (task.kind == TaskKind::kCpuOp && task.phase == Phase::kData) task.kind = TaskKind::kDataLoad;
      }
    }
    // GPU tasks: communication, else the phase and layer of their launcher.
    for (int32_t s : gpu_streams_) {
      size_t hint = 0;
      const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(s)];
      for (size_t i = 0; i < list.size(); ++i) {
        if (i + kPrefetchAhead < list.size()) {  // the activity and its launch call
          const int32_t ahead = list[i + kPrefetchAhead];
          PrefetchTask(ahead);
          if (const int32_t l = launcher_[static_cast<size_t>(ahead)]; l != kNone) PrefetchTask(l);
        }
        const int32_t id = list[i];
        Task& task = T(id);
        task.iteration = IterationOf(id, &hint);
        const int32_t l = launcher_[static_cast<size_t>(id)];
        task.layer = l == kNone ? kNone : T(l).layer;
        if (task.kind == TaskKind::kCollective) {
          task.phase = Phase::kComm;
        } else {
          task.phase = l == kNone ? Phase::kOther : T(l).phase;
        }
      }
    }
  }

  // The task after which a gradient is ready when its thread reached `when`
  // inside a range that began at `range_begin`: the last GPU activity the
  // thread launched in that range (the gradient lives on the device), else
  // the thread's last task before `when`.
  int32_t GradientProducer(int32_t resource, TimeNs range_begin, TimeNs when) const {
    const std::vector<Launched>& launches = thread_launches_[static_cast<size_t>(resource)];
    auto end = std::upper_bound(launches.begin(), launches.end(), when,
                                [](TimeNs t, const Launched& l) { return t < l.time; });
    int32_t gpu = kNone;
    TimeNs latest = kNeverNs;
    for (auto it = end; it != launches.begin();) {
      --it;
      if (it->time < range_begin) break;
      if (it->time > latest || (it->time == latest && it->task > gpu)) {
        latest = it->time;
        gpu = it->task;
      }
    }
    if (gpu != kNone) return gpu;
    const std::vector<int32_t>& list = resource_tasks_[static_cast<size_t>(resource)];
    auto after = std::upper_bound(list.begin(), list.end(), when, [&](TimeNs t, int32_t id) { return t < Start(id); });
    return after == list.begin() ? kNone : *std::prev(after);
  }

  // The enclosing autograd range of a gradient marker or AccumulateGrad op
  // ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad").
  int32_t AccumulateGradRange(int32_t e) const {
    for (int32_t p = e; p != kNone; p = parent_[static_cast<size_t>(p)]) {
      if (TraitsOfTrace(Ev(p).name).mark == Mark::kAccumulateGradRange) return p;
    }
    return kNone;
  }

  // Gradient tensors from "daydream.grad: <name>|<dtype>|[d0,d1]|<bytes>"
  // ranges (written by daydream.Profiler when a parameter's gradient has
  // been accumulated): one tensor per parameter, produced in each iteration
  // by the work its AccumulateGrad step ran. Traces without markers get
  // their gradients inferred from AccumulateGrad ops (InferGradients).
  void AssignGradients() {
    absl::flat_hash_map<std::string, int32_t> tensor_of;
    absl::flat_hash_map<std::string, int32_t> layer_by_name;
    for (size_t l = 0; l < graph_.layers.size(); ++l) {
      layer_by_name.try_emplace(std::string(graph_.Str(graph_.layers[l].name)), static_cast<int32_t>(l));
    }
    for (int32_t e : marked_[static_cast<size_t>(Mark::kGradMarker)]) {
      const TraceEvent& ev = Ev(e);
      const std::string_view text = trace_.Str(ev.name);
      const std::vector<std::string_view> parts = Split(text.substr(kGradMarkerPrefix.size()), '|');
      std::optional<int64_t> bytes = parts.size() == 4 ? ParseInt(parts[3]) : std::nullopt;
      std::optional<std::vector<int64_t>> shape = parts.size() == 4 ? ParseShape(parts[2]) : std::nullopt;
      if (!bytes.has_value() || !shape.has_value() || parts[0].empty()) {
        Warn("bad_gradient_marker", StrCat(EventLabel(e), ": expected 'daydream.grad: name|dtype|[dims]|bytes'"));
        continue;
      }
      const int32_t resource = ResourceOfTrack(ev.track);
      if (resource == kNone) continue;
      const int32_t range = AccumulateGradRange(e);
      const int32_t producer = GradientProducer(resource, range == kNone ? ev.ts_ns : Ev(range).ts_ns, ev.ts_ns);
      if (producer == kNone) continue;
      const std::string name(parts[0]);
      auto [it, inserted] = tensor_of.try_emplace(name, kNone);
      if (inserted) {
        Tensor t;
        t.name = graph_.strings.Intern(name);
        t.dtype = graph_.strings.Intern(parts[1]);
        t.bytes = *bytes;
        t.shape = *shape;
        t.role = TensorRole::kGradient;
        t.producers.assign(graph_.iterations.size(), kNone);
        // The owning layer: the longest module name that prefixes the parameter's.
        for (std::string_view prefix = name; !prefix.empty();) {
          const size_t dot = prefix.rfind('.');
          if (dot == std::string_view::npos) break;
          prefix = prefix.substr(0, dot);
          if (auto l = layer_by_name.find(std::string(prefix)); l != layer_by_name.end()) {
            t.layer = l->second;
            break;
          }
        }
        it->second = graph_.AddTensor(std::move(t));
      }
      SetProducer(graph_.tensors[static_cast<size_t>(it->second)], producer);
    }
    if (tensor_of.empty()) InferGradients();
  }

  void SetProducer(Tensor& t, int32_t producer) {
    const int32_t iteration = T(producer).iteration;
    if (iteration >= 0 && t.producers[static_cast<size_t>(iteration)] == kNone) {
      t.producers[static_cast<size_t>(iteration)] = producer;
    }
    if (t.producer == kNone) t.producer = producer;
  }

  // Gradients of a trace recorded without daydream's markers: one per
  // torch::autograd::AccumulateGrad op, the k-th of every iteration being the
  // same parameter (autograd runs backward in the same order each time).
  // Size from the op's "Input Dims" when shapes were recorded; else from the
  // elementwise kernel its autograd step launched (DDP's gradient scaling,
  // gradient accumulation): PyTorch's elementwise kernels give each thread 4
  // elements, so elements ~ grid x block x 4 (within one block: on the
  // bundled ResNet-50 trace this gives 25.58 M parameters for 25.56 M).
  void InferGradients() {
    const std::vector<int32_t>& ops = marked_[static_cast<size_t>(Mark::kAccumulateGrad)];
    if (ops.empty() || graph_.iterations.empty()) return;
    std::vector<int32_t> index_in_iteration(graph_.iterations.size(), 0);
    std::vector<int32_t> tensor_of_index;
    int64_t unknown = 0;
    for (int32_t e : ops) {
      const TraceEvent& ev = Ev(e);
      const int32_t resource = ResourceOfTrack(ev.track);
      if (resource == kNone) continue;
      const int32_t range = AccumulateGradRange(e);
      const TimeNs begin = range == kNone ? ev.ts_ns : Ev(range).ts_ns;
      const TimeNs end = range == kNone ? ev.end_ns() : Ev(range).end_ns();
      const int32_t producer = GradientProducer(resource, begin, end);
      if (producer == kNone || T(producer).iteration < 0) continue;
      const int32_t k = index_in_iteration[static_cast<size_t>(T(producer).iteration)]++;
      int64_t bytes = InputBytes(ev);
      if (bytes < 0) bytes = KernelElementBytes(resource, begin, end);
      if (k >= static_cast<int32_t>(tensor_of_index.size())) {
        Tensor t;
        t.name = graph_.strings.Intern(StrCat("grad[", k, "]"));
        t.dtype = graph_.strings.Intern(bytes >= 0 ? "inferred" : "unknown");
        t.bytes = bytes;
        t.role = TensorRole::kGradient;
        t.producers.assign(graph_.iterations.size(), kNone);
        t.layer = T(producer).layer;
        tensor_of_index.push_back(graph_.AddTensor(std::move(t)));
      }
      Tensor& t = graph_.tensors[static_cast<size_t>(tensor_of_index[static_cast<size_t>(k)])];
      if (t.bytes < 0 && bytes >= 0) t.bytes = bytes;
      SetProducer(t, producer);
    }
    for (const Tensor& t : graph_.tensors) unknown += t.bytes < 0 ? 1 : 0;
    if (unknown > 0) {
      Warn("gradient_sizes_unknown",
           StrCat(trace_.path, ": ", unknown, " of ", tensor_of_index.size(),
                  " gradients (from AccumulateGrad ops) have no size: the trace has no shapes and no kernel "
                  "that reveals them"));
    }
  }

  // Bytes of the first tensor of an op with recorded shapes (saturated: the
  // shapes are the trace's claim), or -1.
  int64_t InputBytes(const TraceEvent& ev) const {
    if (ev.input_dims == 0) return -1;
    const int64_t bytes = FirstInputBytes(ev);
    return bytes > 0 ? bytes : -1;
  }

  int64_t FirstInputBytes(const TraceEvent& ev) const {
    return SaturatingMul(FirstTensorElements(trace_.Str(ev.input_dims)), DtypeBytes(FirstType(trace_.Str(ev.input_types))));
  }

  // Bytes an elementwise kernel launched from `resource` within [begin, end]
  // worked on (the largest such kernel), or -1.
  int64_t KernelElementBytes(int32_t resource, TimeNs begin, TimeNs end) const {
    const std::vector<Launched>& launches = thread_launches_[static_cast<size_t>(resource)];
    auto it = std::lower_bound(launches.begin(), launches.end(), begin,
                               [](const Launched& l, TimeNs t) { return l.time < t; });
    int64_t best = -1;
    for (; it != launches.end() && it->time <= end; ++it) {
      const Task& k = graph_.tasks[static_cast<size_t>(it->task)];
      if (k.kind != TaskKind::kKernel || k.trace_event < 0) continue;
      const TraceEvent& ev = Ev(static_cast<int32_t>(k.trace_event));
      const int64_t element_bytes = TraitsOfTrace(ev.name).elementwise_element_bytes;
      const TraceEventDetail& d = trace_.Detail(ev);
      if (element_bytes == 0 || d.grid_blocks <= 0 || d.block_threads <= 0) continue;
      best = std::max(best, SaturatingMul(SaturatingMul(d.grid_blocks, d.block_threads), 4 * element_bytes));
    }
    return best;
  }

  static std::vector<std::string_view> Split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t start = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
      if (i == s.size() || s[i] == sep) {
        out.push_back(s.substr(start, i - start));
        start = i + 1;
      }
    }
    return out;
  }

  static std::optional<int64_t> ParseInt(std::string_view s) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
    return v;
  }

  // "[3,4]" or "[]" -> dims.
  static std::optional<std::vector<int64_t>> ParseShape(std::string_view s) {
    if (s.size() < 2 || s.front() != '[' || s.back() != ']') return std::nullopt;
    std::vector<int64_t> dims;
    s = s.substr(1, s.size() - 2);
    if (s.empty()) return dims;
    for (std::string_view d : Split(s, ',')) {
      while (!d.empty() && d.front() == ' ') d.remove_prefix(1);
      std::optional<int64_t> v = ParseInt(d);
      if (!v.has_value()) return std::nullopt;
      dims.push_back(*v);
    }
    return dims;
  }

  void SetDevice() {
    absl::flat_hash_map<int64_t, int64_t> count;
    for (int32_t s : gpu_streams_) {
      count[graph_.resources[static_cast<size_t>(s)].process] +=
          static_cast<int64_t>(resource_tasks_[static_cast<size_t>(s)].size());
    }
    int64_t device = -1, best = -1;
    for (const auto& [d, c] : count) {
      if (c > best || (c == best && d < device)) {
        best = c;
        device = d;
      }
    }
    for (const DeviceProperties& p : trace_.devices) {
      if (p.id == device || (device < 0 && &p == &trace_.devices.front())) {
        graph_.device.name = p.name;
        graph_.device.compute_major = p.compute_major;
        graph_.device.compute_minor = p.compute_minor;
        graph_.device.total_memory_bytes = p.total_global_mem;
        graph_.device.num_sms = p.num_sms;
        break;
      }
    }
  }

  const Trace& trace_;
  const BuildOptions& options_;
  Graph graph_;
  std::vector<int32_t> parent_;            // per event: enclosing CPU range
  std::vector<int32_t> task_of_;           // per event: its task
  std::vector<int32_t> cpu_range_events_;  // CPU ranges, parents before children
  std::vector<int32_t> marked_[kNumMarks];  // per Mark: the CPU ranges of that name, in the same order
  mutable std::vector<NameTraits> name_traits_;  // TraitsOfTrace's, by trace string
  std::vector<StringId> task_trace_name_;        // per task: its name in the trace
  // Per task: its kind, dense, for the rules that look for kinds (copies,
  // calls) among many tasks; the tasks' own field alone later tells data
  // loading from other CPU work.
  std::vector<TaskKind> task_kind_;
  std::vector<Pending> pending_;
  std::vector<int32_t> resource_track_;    // per resource: trace track (CPU only)
  std::vector<int32_t> gpu_streams_;       // resource ids of GPU streams
  std::vector<std::vector<int32_t>> resource_tasks_;  // per resource, start order
  // Per task: recorded start and end (as in the tasks, but dense: the rules
  // read them for tasks all over the graph).
  std::vector<TimeNs> start_;
  std::vector<TimeNs> end_;
  std::vector<int32_t> launcher_;          // per task: launching CPU task
  std::vector<StringId> string_map_;
  std::vector<std::vector<NestKey>> track_keys_;  // per track: its CPU ranges' nesting keys
  size_t num_cpu_ranges_ = 0;
  std::vector<int32_t> gpu_events_;  // kernels, copies and memsets, in event order
  std::vector<int32_t> sync_events_;  // cuda_sync records, in event order
  // Runtime and driver calls with a correlation, in event order; after
  // LinkLaunches only the first of each correlation.
  struct Launcher {
    int64_t correlation;
    int32_t event;
    bool launch_call;  // NameTraits::launch_call
  };
  std::vector<Launcher> launchers_;
  std::vector<TimeNs> self_time_cursor_;  // AddSelfTimeTasks'
  CorrelationIndex correlation_launcher_;  // correlation -> index in launchers_
  std::vector<std::vector<Launched>> stream_launches_;
  std::vector<std::vector<Launched>> thread_launches_;
  std::vector<std::pair<int32_t, int32_t>> stream_waits_;
  absl::flat_hash_map<std::string, int32_t> layer_index_;
  TimeNs origin_ = 0;
  TimeNs launch_latency_ = 0;    // asynchronous call end -> activity start
  TimeNs blocking_latency_ = 0;  // blocking call start -> activity start
  std::vector<uint8_t> blocking_;  // per task: launched by a blocking call
  absl::flat_hash_map<int32_t, TimeNs> copy_blocking_latency_;  // blocking copy -> its class's delay
  TimeNs kernel_gap_ = 0;
  TimeNs sync_tail_ = 0;
};

}  // namespace

SyncCall ClassifySyncCall(std::string_view name) {
  const std::string_view api = StripApiPrefix(name);
  if (api.empty()) return SyncCall::kNone;
  if (api == "DeviceSynchronize" || api == "CtxSynchronize") return SyncCall::kDevice;
  if (api == "StreamSynchronize") return SyncCall::kStream;
  if (api == "EventSynchronize") return SyncCall::kEvent;
  if (StartsWith(api, "Memcpy") && !Contains(api, "Async")) return SyncCall::kBlockingCopy;
  return SyncCall::kNone;
}

bool IsCollectiveKernelName(std::string_view name) {
  return StartsWith(name, "nccl") || StartsWith(name, "void nccl") ||
         Contains(name, "multimem_all_reduce") || StartsWith(name, "rccl");
}

absl::StatusOr<Graph> BuildGraph(const Trace& trace, const BuildOptions& options) {
  Builder builder(trace, options);
  return builder.Run();
}

}  // namespace daydream
