// The Trace: one rank's recorded events as flat records, normalized from
// whatever produced them (Kineto/Chrome JSON today, CUPTI records later).
//
// A Trace knows nothing of graphs. Times are int64 nanoseconds as recorded
// (no rebasing); strings are interned in the trace's own StringTable; events
// are plain structs in flat vectors (no per-event heap objects).
#ifndef DAYDREAM_TRACE_TRACE_H_
#define DAYDREAM_TRACE_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daydream/base/string_table.h"
#include "daydream/base/time.h"

namespace daydream {

// What an event is, normalized across trace versions (2021 legacy category
// names map onto the same kinds).
enum class EventKind : uint8_t {
  kUnspecified = 0,
  kCpuOp,              // "cpu_op", legacy "Operator"
  kUserAnnotation,     // "user_annotation" (record_function, ProfilerStep#N)
  kGpuUserAnnotation,  // "gpu_user_annotation"
  kRuntime,            // "cuda_runtime", legacy "Runtime" (cuda*/hip* calls)
  kDriver,             // "cuda_driver" (cu* calls)
  kKernel,             // "kernel", legacy "Kernel"
  kMemcpy,             // "gpu_memcpy", legacy "Memcpy"
  kMemset,             // "gpu_memset", legacy "Memset"
  kCudaSync,           // "cuda_sync" (Stream Sync, Context Sync, Event Sync, Stream Wait Event)
  kPythonFunction,     // "python_function"
  kInstant,            // "cpu_instant_event" and other 'i' events ([memory], ...)
  kOverhead,           // "overhead" (profiler's own)
  kOther,              // any other complete event
};

// Lowercase name of `kind` ("cpu_op", "kernel", ...).
std::string_view EventKindName(EventKind kind);

// Maps a trace category string onto an EventKind (kOther when unknown).
EventKind EventKindFromCategory(std::string_view category);

// True for kinds recorded on a GPU timeline (pid = device, tid = stream).
bool IsGpuKind(EventKind kind);

// "No value" for optional integer fields.
inline constexpr int64_t kUnset = -1;

// What only some events carry: GPU activities' stream, device and bytes,
// kernels' launch shape, collectives' sizes, synchronizations' targets,
// autograd's sequence numbers. Kept apart from the TraceEvent (see there).
// Optional integers hold kUnset when absent, strings id 0.
struct TraceEventDetail {
  int64_t bytes = kUnset;            // args "bytes" / "Bytes"
  int64_t stream = kUnset;           // args "stream"
  int64_t sequence_number = kUnset;  // args "Sequence number"
  int64_t in_msg_nelems = kUnset;    // collectives
  int64_t wait_on_stream = kUnset;   // cuda_sync
  int64_t wait_on_event_record_correlation = kUnset;
  int64_t grid_blocks = kUnset;  // kernels: product of "grid" dimensions
  StringId dtype = 0;
  StringId sync_kind = 0;        // "cuda_sync_kind"
  int32_t device = -1;           // args "device"
  int32_t block_threads = -1;    // kernels: product of "block" dimensions
};

// What an event without a detail reads as: every field absent.
inline constexpr TraceEventDetail kNoDetail{};

// One complete ('X') or instant ('i') event: the fields every pass over the
// events reads, in 56 bytes. What only some events carry is in
// Trace::details (`detail` indexes it; -1 for none): in a training trace
// about one event in five has any, and the builder streams every event
// several times, so the events' size is most of its memory traffic (and of
// the reader's writes).
struct TraceEvent {
  TimeNs ts_ns = 0;
  TimeNs dur_ns = 0;
  int64_t correlation = kUnset;
  int64_t external_id = kUnset;
  StringId name = 0;
  int32_t track = -1;            // index into Trace::tracks
  StringId input_dims = 0;       // raw JSON of "Input Dims"
  StringId input_types = 0;      // raw JSON of "Input type" (beside the dims: most ops with one have both)
  int32_t detail = -1;           // index into Trace::details, or -1
  EventKind kind = EventKind::kUnspecified;
  bool instant = false;          // 'i' event: dur_ns is 0 and meaningless

  TimeNs end_ns() const { return ts_ns + dur_ns; }
};
// Args nothing reads, such as "Fwd thread id", "Record function id",
// "Collective name", "Group size" and "Out msg nelems", are not kept.
static_assert(sizeof(TraceEvent) == 56, "TraceEvent grew: every pass over a trace's events streams it");

// A flow endpoint ('s', 't' or 'f' event): ac2g / async / async_cpu_to_gpu /
// fwdbwd arrows.
struct TraceFlow {
  int64_t id = kUnset;
  TimeNs ts_ns = 0;
  StringId category = 0;
  int32_t track = -1;
  char phase = 's';
};

// One (pid, tid) timeline. CPU tracks are OS process/thread ids; GPU tracks
// are (device, stream). Non-numeric pids/tids (e.g. "Spans") are kept by name.
struct TraceTrack {
  int64_t pid = 0;
  int64_t tid = 0;
  bool pid_is_text = false;   // the pid was a non-numeric string (e.g. "Spans")
  bool tid_is_text = false;
  StringId pid_text = 0;      // that string
  StringId tid_text = 0;
  StringId process_name = 0;  // from 'M' process_name
  StringId process_label = 0; // from 'M' process_labels ("CPU", "GPU 0")
  StringId thread_name = 0;   // from 'M' thread_name
  int64_t sort_index = kUnset;
  bool gpu = false;           // holds GPU activities
  int64_t num_events = 0;
};

// One entry of the top-level "deviceProperties" list.
struct DeviceProperties {
  int32_t id = -1;
  std::string name;
  int64_t total_global_mem = 0;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int32_t num_sms = 0;
};

// A problem found while reading or building that did not stop the work:
// counted per kind, with the first example kept for the message.
struct WarningCount {
  std::string kind;     // short stable key, e.g. "kernel_without_launch"
  int64_t count = 0;
  std::string example;  // full first message, naming the file and event
};

class Warnings {
 public:
  // Records one occurrence of `kind`; `example` is kept for the first one.
  void Add(std::string_view kind, std::string example);
  const std::vector<WarningCount>& items() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<WarningCount> items_;
};

struct Trace {
  std::string path;         // file it came from ("<memory>" when parsed from a buffer)
  std::string trace_name;   // top-level "traceName"
  int64_t schema_version = kUnset;
  TimeNs base_time_ns = 0;  // top-level "baseTimeNanoseconds" (0 when absent)
  int32_t rank = -1;        // distributedInfo.rank, else from the file name, else -1
  int32_t world_size = -1;  // distributedInfo.world_size
  std::string backend;      // distributedInfo.backend
  bool rank_from_file_name = false;

  std::vector<DeviceProperties> devices;
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;  // in file order
  std::vector<TraceEventDetail> details;  // by TraceEvent::detail
  std::vector<TraceFlow> flows;
  StringTable strings;
  Warnings warnings;

  std::string_view Str(StringId id) const { return strings.Get(id); }

  // `ev`'s detail (kNoDetail when it has none).
  const TraceEventDetail& Detail(const TraceEvent& ev) const {
    return ev.detail < 0 ? kNoDetail : details[static_cast<size_t>(ev.detail)];
  }
  // Appends `ev`, and `detail` as its detail when not null; returns the
  // event appended. (`ev` is copied whole first and its detail index set
  // after: a copy that read it back just after a store into one field would
  // wait for that store, in the reader's hot loop.)
  TraceEvent& AddEvent(const TraceEvent& ev, const TraceEventDetail* detail) {
    TraceEvent& added = events.emplace_back(ev);
    if (detail != nullptr) {
      added.detail = static_cast<int32_t>(details.size());
      details.push_back(*detail);
    }
    return added;
  }
};

}  // namespace daydream

#endif  // DAYDREAM_TRACE_TRACE_H_
