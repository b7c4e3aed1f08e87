// The CUPTI collector and its record decoder: the one file of daydream that
// includes <cupti.h>. libcuda and libcupti are loaded with dlopen and every
// function used is called through a table resolved with dlsym; nothing here
// links against CUDA.
#include "daydream/trace/cupti/collector.h"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"
#include "daydream/trace/cupti/decode.h"

namespace daydream {
namespace {

// --- record layouts ----------------------------------------------------------
// The record structs CUPTI 13 emits (cupti_activity.h keeps only the newest
// layout of each). Older CUPTI versions emit older layouts, which every newer
// one extends without moving a field: the fields decoded here sit at the same
// offsets in the oldest layouts still declared (checked below), so a build
// against CUDA 13 headers reads the records of an older libcupti too, and a
// build against older headers reads through those oldest layouts.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP4;
using MemsetRecord = CUpti_ActivityMemset4;
using SyncRecord = CUpti_ActivitySynchronization2;
using CudaEventRecord = CUpti_ActivityCudaEvent2;
using ContextRecord = CUpti_ActivityContext3;

#define DD_SAME_OFFSET(New, Old, field) \
  static_assert(offsetof(New, field) == offsetof(Old, field), #New "." #field " moved")
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, start);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, end);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, deviceId);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, contextId);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, streamId);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, correlationId);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, name);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, gridX);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, gridY);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, gridZ);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, blockX);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, blockY);
DD_SAME_OFFSET(KernelRecord, CUpti_ActivityKernel4, blockZ);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, copyKind);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, srcKind);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, dstKind);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, bytes);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, start);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, end);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, deviceId);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, contextId);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, streamId);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, correlationId);
DD_SAME_OFFSET(MemcpyRecord, CUpti_ActivityMemcpy, runtimeCorrelationId);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, copyKind);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, bytes);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, start);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, end);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, deviceId);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, contextId);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, streamId);
DD_SAME_OFFSET(MemcpyPtoPRecord, CUpti_ActivityMemcpyPtoP, correlationId);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, bytes);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, start);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, end);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, deviceId);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, contextId);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, streamId);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, correlationId);
DD_SAME_OFFSET(MemsetRecord, CUpti_ActivityMemset, memoryKind);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, type);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, start);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, end);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, correlationId);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, contextId);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, streamId);
DD_SAME_OFFSET(SyncRecord, CUpti_ActivitySynchronization, cudaEventId);
DD_SAME_OFFSET(CudaEventRecord, CUpti_ActivityCudaEvent, correlationId);
DD_SAME_OFFSET(CudaEventRecord, CUpti_ActivityCudaEvent, contextId);
DD_SAME_OFFSET(CudaEventRecord, CUpti_ActivityCudaEvent, streamId);
DD_SAME_OFFSET(CudaEventRecord, CUpti_ActivityCudaEvent, eventId);
DD_SAME_OFFSET(ContextRecord, CUpti_ActivityContext, contextId);
DD_SAME_OFFSET(ContextRecord, CUpti_ActivityContext, deviceId);
#undef DD_SAME_OFFSET
#else
using KernelRecord = CUpti_ActivityKernel4;
using MemcpyRecord = CUpti_ActivityMemcpy;
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP;
using MemsetRecord = CUpti_ActivityMemset;
using SyncRecord = CUpti_ActivitySynchronization;
using CudaEventRecord = CUpti_ActivityCudaEvent;
using ContextRecord = CUpti_ActivityContext;
#endif

constexpr std::string_view kSource = "<cupti>";

// --- names as Kineto writes them -------------------------------------------

std::string_view MemcpyKindName(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "<unknown>";
  }
}

std::string_view MemoryKindName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN: return "Unknown";
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "Managed Static";
    default: return "Unrecognized";
  }
}

// "Memcpy HtoD (Pageable -> Device)".
std::string MemcpyName(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind) {
  return StrCat("Memcpy ", MemcpyKindName(copy_kind), " (", MemoryKindName(src_kind), " -> ",
                MemoryKindName(dst_kind), ")");
}

std::string_view SyncKindName(uint32_t type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "Event Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "Stream Wait Event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "Stream Sync";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "Context Sync";
    default: return "Unknown Sync";
  }
}

// Syncs on a CUDA event: the trace names the stream and the call that
// recorded the event waited on.
bool IsEventSync(uint32_t type) {
  return type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE ||
         type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
}

// Kernel names come mangled; traces show them demangled, as Kineto does.
std::string KernelName(const char* name) {
  if (name == nullptr || *name == '\0') return "<unnamed kernel>";
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && demangled != nullptr) ? std::string(demangled) : std::string(name);
  std::free(demangled);
  return out;
}

// Product of a kernel's grid or block dimensions, as the Kineto reader takes
// it from "grid"/"block": kUnset unless every dimension is positive and the
// product at most 2^40.
int64_t DimsProduct(int32_t x, int32_t y, int32_t z) {
  if (x <= 0 || y <= 0 || z <= 0) return kUnset;
  const int64_t product = int64_t{x} * y * z;
  return product > (int64_t{1} << 40) ? kUnset : product;
}

// Stream and device ids are unsigned in CUPTI; Kineto writes the track id as
// a signed 32-bit value (so "no stream", 0xFFFFFFFF, is tid -1) and the
// "stream" arg unsigned.
int64_t TrackId(uint32_t id) { return static_cast<int32_t>(id); }

}  // namespace

std::string_view ApiNameFromCallbackName(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || v == 0 || v + 2 == name.size()) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

// --- the decoder ---------------------------------------------------------------

class CuptiTraceBuilder::Impl {
 public:
  explicit Impl(const CuptiNameLookup& lookup) : lookup_(lookup) { trace_.path = std::string(kSource); }

  absl::Status Add(const void* record) {
    if (record == nullptr) return absl::InvalidArgumentError("CUPTI activity record is null");
    const auto kind = static_cast<const CUpti_Activity*>(record)->kind;
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        AddKernel(*static_cast<const KernelRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        AddMemcpy(*static_cast<const MemcpyRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        AddMemcpyPtoP(*static_cast<const MemcpyPtoPRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        AddMemset(*static_cast<const MemsetRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
        AddApi(*static_cast<const CUpti_ActivityAPI*>(record), CuptiApiDomain::kRuntime);
        break;
      case CUPTI_ACTIVITY_KIND_DRIVER:
        AddApi(*static_cast<const CUpti_ActivityAPI*>(record), CuptiApiDomain::kDriver);
        break;
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        AddSync(*static_cast<const SyncRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        AddExternalCorrelation(*static_cast<const CUpti_ActivityExternalCorrelation*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
        AddCudaEvent(*static_cast<const CudaEventRecord*>(record));
        break;
      case CUPTI_ACTIVITY_KIND_CONTEXT: {
        const auto& context = *static_cast<const ContextRecord*>(record);
        context_device_[context.contextId] = static_cast<int32_t>(context.deviceId);
        break;
      }
      default:
        trace_.warnings.Add("cupti_unsupported_activity_kind",
                            StrCat(kSource, ": activity record of kind ", static_cast<int>(kind),
                                   " is not decoded by daydream; skipped"));
        break;
    }
    return absl::OkStatus();
  }

  void AddDropped(uint64_t count) { dropped_ += count; }

  int64_t num_events() const { return static_cast<int64_t>(pending_.size()); }

  absl::StatusOr<Trace> Finish() {
    if (pending_.empty()) {
      Reset();
      return absl::FailedPreconditionError(
          StrCat(kSource, ": CUPTI recorded no kernel, copy, memset, synchronization or CUDA API call"));
    }
    ResolveDevices();
    ResolveEventWaits();
    ResolveCorrelations();
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const Pending& a, const Pending& b) { return a.ev.ts_ns < b.ev.ts_ns; });
    BuildTracks();
    if (dropped_ > 0) {
      trace_.warnings.Add("cupti_dropped_records",
                          StrCat(kSource, ": CUPTI dropped ", dropped_,
                                 " activity records for lack of buffer space; raise "
                                 "CuptiOptions.buffer_bytes or max_buffers"));
    }
    Trace out = std::move(trace_);
    Reset();
    return out;
  }

 private:
  // An event before its track and cross-record links are known.
  struct Pending {
    TraceEvent ev;
    TraceEventDetail detail;  // GPU records' (device, stream, ...): stored for them only
    bool gpu = false;     // track (device, stream) rather than (process, thread)
    int64_t pid = 0;      // CPU events
    int64_t tid = 0;
    uint32_t context_id = 0;
    bool needs_device = false;           // sync records: device known only by context
    uint32_t sync_type = 0;
    uint32_t cuda_event_id = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    int64_t runtime_correlation = kUnset;  // memcpy: the runtime call's id as well
  };

  // The CUDA event records a (context, event id) pair went through, as
  // (correlation id of the record call, stream).
  using EventRecords = std::vector<std::pair<uint32_t, uint32_t>>;

  void Reset() {
    trace_ = Trace();
    trace_.path = std::string(kSource);
    pending_.clear();
    api_names_.clear();
    context_device_.clear();
    event_records_.clear();
    external_ids_.clear();
    dropped_ = 0;
  }

  std::string Label(std::string_view what, uint32_t correlation) const {
    return StrCat(kSource, ": ", what, " record (correlation ", correlation, ")");
  }

  // Fills ts/dur from a record's [start, end]; false (counted) when the
  // record cannot be placed in time.
  bool SetTimes(uint64_t start, uint64_t end, TraceEvent& ev, std::string_view what, uint32_t correlation) {
    if (start == 0 && end == 0) {
      trace_.warnings.Add("cupti_record_without_timestamps",
                          StrCat(Label(what, correlation),
                                 " has no timestamps (work still running at Stop()?); skipped"));
      return false;
    }
    const auto max = static_cast<uint64_t>(kMaxTimeNs);
    if (start >= max || end >= max) {
      trace_.warnings.Add("cupti_timestamp_out_of_range",
                          StrCat(Label(what, correlation), " has a timestamp beyond 2^62 ns (", start, ", ",
                                 end, "); skipped"));
      return false;
    }
    ev.ts_ns = static_cast<TimeNs>(start);
    if (end < start) {
      trace_.warnings.Add("cupti_end_before_start",
                          StrCat(Label(what, correlation), " ends before it starts (start ", start, ", end ",
                                 end, "); kept with duration 0"));
      ev.dur_ns = 0;
    } else {
      ev.dur_ns = static_cast<TimeNs>(end - start);
    }
    return true;
  }

  void NoteContext(uint32_t context_id, uint32_t device_id) {
    context_device_.try_emplace(context_id, static_cast<int32_t>(device_id));
  }

  void AddGpu(Pending p, uint32_t device, uint32_t context, uint32_t stream, uint32_t correlation) {
    p.gpu = true;
    p.detail.device = static_cast<int32_t>(device);
    p.detail.stream = stream;
    p.ev.correlation = correlation;
    p.context_id = context;
    NoteContext(context, device);
    pending_.push_back(std::move(p));
  }

  void AddKernel(const KernelRecord& r) {
    Pending p;
    if (!SetTimes(r.start, r.end, p.ev, "kernel", r.correlationId)) return;
    p.ev.kind = EventKind::kKernel;
    p.ev.name = trace_.strings.Intern(KernelName(r.name));
    p.detail.grid_blocks = DimsProduct(r.gridX, r.gridY, r.gridZ);
    p.detail.block_threads = static_cast<int32_t>(std::min<int64_t>(DimsProduct(r.blockX, r.blockY, r.blockZ), INT32_MAX));
    AddGpu(std::move(p), r.deviceId, r.contextId, r.streamId, r.correlationId);
  }

  void AddMemcpy(const MemcpyRecord& r) {
    Pending p;
    if (!SetTimes(r.start, r.end, p.ev, "memcpy", r.correlationId)) return;
    p.ev.kind = EventKind::kMemcpy;
    p.ev.name = trace_.strings.Intern(MemcpyName(r.copyKind, r.srcKind, r.dstKind));
    p.detail.bytes = static_cast<int64_t>(r.bytes);
    if (r.runtimeCorrelationId != 0) p.runtime_correlation = r.runtimeCorrelationId;
    AddGpu(std::move(p), r.deviceId, r.contextId, r.streamId, r.correlationId);
  }

  void AddMemcpyPtoP(const MemcpyPtoPRecord& r) {
    Pending p;
    if (!SetTimes(r.start, r.end, p.ev, "peer memcpy", r.correlationId)) return;
    p.ev.kind = EventKind::kMemcpy;
    p.ev.name = trace_.strings.Intern(MemcpyName(r.copyKind, r.srcKind, r.dstKind));
    p.detail.bytes = static_cast<int64_t>(r.bytes);
    AddGpu(std::move(p), r.deviceId, r.contextId, r.streamId, r.correlationId);
  }

  void AddMemset(const MemsetRecord& r) {
    Pending p;
    if (!SetTimes(r.start, r.end, p.ev, "memset", r.correlationId)) return;
    p.ev.kind = EventKind::kMemset;
    p.ev.name = trace_.strings.Intern(StrCat("Memset (", MemoryKindName(r.memoryKind), ")"));
    p.detail.bytes = static_cast<int64_t>(r.bytes);
    AddGpu(std::move(p), r.deviceId, r.contextId, r.streamId, r.correlationId);
  }

  StringId ApiName(CuptiApiDomain domain, uint32_t cbid) {
    auto [it, inserted] = api_names_.try_emplace({domain == CuptiApiDomain::kDriver, cbid}, 0);
    if (inserted) {
      const std::string name = lookup_.ApiName(domain, cbid);
      it->second = trace_.strings.Intern(
          name.empty() ? StrCat(domain == CuptiApiDomain::kDriver ? "driver" : "runtime", " API call ", cbid)
                       : std::string(ApiNameFromCallbackName(name)));
    }
    return it->second;
  }

  void AddApi(const CUpti_ActivityAPI& r, CuptiApiDomain domain) {
    Pending p;
    const bool driver = domain == CuptiApiDomain::kDriver;
    if (!SetTimes(r.start, r.end, p.ev, driver ? "driver API" : "runtime API", r.correlationId)) return;
    p.ev.kind = driver ? EventKind::kDriver : EventKind::kRuntime;
    p.ev.name = ApiName(domain, r.cbid);
    p.ev.correlation = r.correlationId;
    p.pid = r.processId;
    p.tid = r.threadId;
    pending_.push_back(std::move(p));
  }

  void AddSync(const SyncRecord& r) {
    Pending p;
    if (!SetTimes(r.start, r.end, p.ev, "synchronization", r.correlationId)) return;
    const std::string_view kind = SyncKindName(r.type);
    p.ev.kind = EventKind::kCudaSync;
    p.ev.name = trace_.strings.Intern(kind);
    p.detail.sync_kind = p.ev.name;
    p.ev.correlation = r.correlationId;
    p.detail.stream = r.streamId;
    p.gpu = true;
    p.context_id = r.contextId;
    p.needs_device = true;
    p.sync_type = r.type;
    p.cuda_event_id = r.cudaEventId;
    pending_.push_back(std::move(p));
  }

  void AddExternalCorrelation(const CUpti_ActivityExternalCorrelation& r) {
    // torch.profiler's "External id" is kind CUSTOM0; other kinds (CUSTOM1,
    // OpenACC, ...) stand in where a call has no CUSTOM0 id.
    const bool preferred = r.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    auto [it, inserted] = external_ids_.try_emplace(r.correlationId, static_cast<int64_t>(r.externalId), preferred);
    if (!inserted && preferred && !it->second.second) it->second = {static_cast<int64_t>(r.externalId), true};
  }

  void AddCudaEvent(const CudaEventRecord& r) {
    event_records_[{r.contextId, r.eventId}].emplace_back(r.correlationId, r.streamId);
  }

  // Sync records name a context, not a device.
  void ResolveDevices() {
    absl::flat_hash_set<int32_t> devices;
    for (const auto& [context, device] : context_device_) devices.insert(device);
    for (Pending& p : pending_) {
      if (!p.needs_device) continue;
      auto it = context_device_.find(p.context_id);
      if (it != context_device_.end()) {
        p.detail.device = it->second;
      } else {
        // Kineto's fallback; right whenever a single device was used.
        p.detail.device = devices.size() == 1 ? *devices.begin() : 0;
        if (devices.size() > 1) {
          trace_.warnings.Add("cupti_sync_device_unknown",
                              StrCat(Label("synchronization", static_cast<uint32_t>(p.ev.correlation)),
                                     ": no record tells the device of context ", p.context_id,
                                     "; placed on device 0"));
        }
      }
    }
  }

  // An event sync waited on the last record of its event before it (by
  // correlation id, which CUPTI hands out in call order).
  void ResolveEventWaits() {
    for (auto& [key, records] : event_records_) std::sort(records.begin(), records.end());
    for (Pending& p : pending_) {
      if (p.ev.kind != EventKind::kCudaSync || !IsEventSync(p.sync_type) ||
          p.cuda_event_id == CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
        continue;
      }
      auto it = event_records_.find({p.context_id, p.cuda_event_id});
      if (it == event_records_.end()) continue;
      const EventRecords& records = it->second;
      const auto corr = static_cast<uint32_t>(p.ev.correlation);
      auto after = std::lower_bound(records.begin(), records.end(), corr,
                                    [](const std::pair<uint32_t, uint32_t>& r, uint32_t c) { return r.first < c; });
      if (after == records.begin()) continue;
      const auto& record = *std::prev(after);
      p.detail.wait_on_stream = TrackId(record.second);
      p.detail.wait_on_event_record_correlation = record.first;
    }
  }

  void ResolveCorrelations() {
    absl::flat_hash_set<int64_t> api_correlations;
    for (const Pending& p : pending_) {
      if (!p.gpu && p.ev.correlation != kUnset) api_correlations.insert(p.ev.correlation);
    }
    for (Pending& p : pending_) {
      // A copy names both the driver and the runtime call; link it to one
      // that was recorded.
      if (p.runtime_correlation != kUnset && !api_correlations.contains(p.ev.correlation) &&
          api_correlations.contains(p.runtime_correlation)) {
        p.ev.correlation = p.runtime_correlation;
      }
      if (p.ev.correlation == kUnset) continue;
      auto it = external_ids_.find(static_cast<uint32_t>(p.ev.correlation));
      if (it != external_ids_.end()) p.ev.external_id = it->second.first;
    }
  }

  void BuildTracks() {
    absl::flat_hash_map<std::tuple<bool, int64_t, int64_t>, int32_t> index;
    const std::string process_name = lookup_.ProcessName();
    const StringId process = process_name.empty() ? 0 : trace_.strings.Intern(process_name);
    trace_.events.reserve(pending_.size());
    trace_.details.reserve(pending_.size());
    for (Pending& p : pending_) {
      const int64_t pid = p.gpu ? p.detail.device : p.pid;
      const int64_t tid = p.gpu ? TrackId(static_cast<uint32_t>(p.detail.stream)) : p.tid;
      auto [it, inserted] = index.try_emplace({p.gpu, pid, tid}, 0);
      if (inserted) {
        it->second = static_cast<int32_t>(trace_.tracks.size());
        trace_.tracks.push_back(MakeTrack(p.gpu, pid, tid, process));
      }
      p.ev.track = it->second;
      TraceTrack& track = trace_.tracks[static_cast<size_t>(it->second)];
      ++track.num_events;
      if (IsGpuKind(p.ev.kind)) track.gpu = true;
      trace_.AddEvent(p.ev, p.gpu ? &p.detail : nullptr);
    }
    pending_.clear();
  }

  // Metadata as Kineto writes it: process name and label, thread name, sort
  // index.
  TraceTrack MakeTrack(bool gpu, int64_t pid, int64_t tid, StringId process) {
    TraceTrack t;
    t.pid = pid;
    t.tid = tid;
    t.process_name = process;
    t.sort_index = tid;
    if (gpu) {
      t.process_label = trace_.strings.Intern(StrCat("GPU ", pid));
      // Kineto's stream names end in a space.
      t.thread_name = trace_.strings.Intern(tid < 0 ? StrCat("Device ", pid) : StrCat("stream ", tid, " "));
    } else {
      t.process_label = trace_.strings.Intern("CPU");
      const std::string comm = lookup_.ThreadName(tid);
      t.thread_name =
          trace_.strings.Intern(comm.empty() ? StrCat("thread ", tid) : StrCat("thread ", tid, " (", comm, ")"));
    }
    return t;
  }

  const CuptiNameLookup& lookup_;
  Trace trace_;
  std::vector<Pending> pending_;
  absl::flat_hash_map<std::pair<bool, uint32_t>, StringId> api_names_;
  absl::flat_hash_map<uint32_t, int32_t> context_device_;
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, EventRecords> event_records_;
  // correlation id -> (external id, whether it is of the preferred kind)
  absl::flat_hash_map<uint32_t, std::pair<int64_t, bool>> external_ids_;
  uint64_t dropped_ = 0;
};

CuptiTraceBuilder::CuptiTraceBuilder(const CuptiNameLookup& lookup) : impl_(std::make_unique<Impl>(lookup)) {}
CuptiTraceBuilder::~CuptiTraceBuilder() = default;
absl::Status CuptiTraceBuilder::AddRecord(const void* record) { return impl_->Add(record); }
void CuptiTraceBuilder::AddDroppedRecords(uint64_t count) { impl_->AddDropped(count); }
int64_t CuptiTraceBuilder::num_events() const { return impl_->num_events(); }
absl::StatusOr<Trace> CuptiTraceBuilder::Finish() { return impl_->Finish(); }

// --- loading libcuda and libcupti ------------------------------------------------

namespace {

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out) {
  void* symbol = dlsym(handle, name);
  *out = reinterpret_cast<Fn>(symbol);
  return symbol != nullptr;
}

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? std::string(error) : std::string("unknown error");
}

// The driver functions the collector calls.
struct DriverApi {
  decltype(&cuInit) Init = nullptr;
  decltype(&cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&cuGetErrorName) GetErrorName = nullptr;  // optional
  decltype(&cuDeviceGet) DeviceGet = nullptr;        // optional: device properties
  decltype(&cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&cuDeviceTotalMem_v2) DeviceTotalMem = nullptr;
  decltype(&cuDeviceGetAttribute) DeviceGetAttribute = nullptr;

  std::string ErrorName(CUresult result) const {
    const char* name = nullptr;
    if (GetErrorName != nullptr && GetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
      return StrCat(name, " (", static_cast<int>(result), ")");
    }
    return StrCat("CUDA error ", static_cast<int>(result));
  }
};

absl::Status NoDriver(std::string_view why) {
  return absl::FailedPreconditionError(StrCat("no CUDA driver/device: ", why));
}

// Loads the driver, initializes it and lists its devices.
absl::Status LoadDriver(const std::string& path, DriverApi& api, std::vector<DeviceProperties>& devices) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return NoDriver(StrCat("cannot load the CUDA driver library (", DlError(), ")"));
  // The handle is never closed: the driver must not be unloaded once initialized.
  if (!Resolve(handle, "cuInit", &api.Init) || !Resolve(handle, "cuDeviceGetCount", &api.DeviceGetCount)) {
    return NoDriver(StrCat(path, " lacks cuInit or cuDeviceGetCount"));
  }
  Resolve(handle, "cuGetErrorName", &api.GetErrorName);
  const CUresult init = api.Init(0);
  if (init != CUDA_SUCCESS) return NoDriver(StrCat("cuInit failed: ", api.ErrorName(init)));
  int count = 0;
  const CUresult counted = api.DeviceGetCount(&count);
  if (counted != CUDA_SUCCESS) return NoDriver(StrCat("cuDeviceGetCount failed: ", api.ErrorName(counted)));
  if (count <= 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return NoDriver(StrCat("the CUDA driver sees no device",
                           visible != nullptr ? StrCat(" (CUDA_VISIBLE_DEVICES=", visible, ")") : ""));
  }
  // Device properties are a courtesy: skip them if any function is missing.
  if (!Resolve(handle, "cuDeviceGet", &api.DeviceGet) || !Resolve(handle, "cuDeviceGetName", &api.DeviceGetName) ||
      !Resolve(handle, "cuDeviceTotalMem_v2", &api.DeviceTotalMem) ||
      !Resolve(handle, "cuDeviceGetAttribute", &api.DeviceGetAttribute)) {
    return absl::OkStatus();
  }
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (api.DeviceGet(&device, i) != CUDA_SUCCESS) continue;
    DeviceProperties props;
    props.id = i;
    char name[256] = {};
    if (api.DeviceGetName(name, static_cast<int>(sizeof(name) - 1), device) == CUDA_SUCCESS) props.name = name;
    size_t bytes = 0;
    if (api.DeviceTotalMem(&bytes, device) == CUDA_SUCCESS) props.total_global_mem = static_cast<int64_t>(bytes);
    auto attribute = [&](CUdevice_attribute which) {
      int value = 0;
      return api.DeviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value : 0;
    };
    props.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    props.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    props.num_sms = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    devices.push_back(std::move(props));
  }
  return absl::OkStatus();
}

// The CUPTI functions the collector calls.
struct CuptiApi {
  std::string path;
  uint32_t version = 0;
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) ActivityPushExternalCorrelationId = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) ActivityPopExternalCorrelationId = nullptr;
  decltype(&cuptiSetThreadIdType) SetThreadIdType = nullptr;  // optional

  std::string ResultName(CUptiResult result) const {
    const char* text = nullptr;
    if (GetResultString != nullptr && GetResultString(result, &text) == CUPTI_SUCCESS && text != nullptr) {
      return StrCat(text, " (", static_cast<int>(result), ")");
    }
    return StrCat("CUPTI error ", static_cast<int>(result));
  }

  absl::Status Check(CUptiResult result, std::string_view call) const {
    if (result == CUPTI_SUCCESS) return absl::OkStatus();
    std::string hint;
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      hint = ": another CUPTI client (torch.profiler, Nsight) is active in this process";
    } else if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
      hint = ": the driver restricts profiling to administrators (NVreg_RestrictProfilingToAdminUsers)";
    }
    return absl::InternalError(StrCat(call, " failed: ", ResultName(result), hint));
  }
};

std::vector<std::string> CuptiCandidates() {
  std::vector<std::string> out = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(StrCat(home, "/lib64"));
    dirs.push_back(StrCat(home, "/extras/CUPTI/lib64"));
  }
  for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/extras/CUPTI/lib64"}) {
    dirs.push_back(dir);
  }
  for (const std::string& dir : dirs) out.push_back(StrCat(dir, "/libcupti.so"));
  return out;
}

absl::Status LoadCupti(const std::string& path, CuptiApi& api) {
  void* handle = nullptr;
  std::string tried;
  const std::vector<std::string> candidates = path.empty() ? CuptiCandidates() : std::vector<std::string>{path};
  for (const std::string& candidate : candidates) {
    dlerror();
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      api.path = candidate;
      break;
    }
    StrAppend(&tried, tried.empty() ? "" : "; ", DlError());
  }
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        StrCat("CUPTI not found (install CUDA's CUPTI or set CUDA_HOME): ", tried));
  }
  // The handle is never closed: CUPTI may call back into the process until it exits.
  struct Required {
    const char* name;
    bool ok;
  };
  const Required required[] = {
      {"cuptiGetVersion", Resolve(handle, "cuptiGetVersion", &api.GetVersion)},
      {"cuptiGetResultString", Resolve(handle, "cuptiGetResultString", &api.GetResultString)},
      {"cuptiGetCallbackName", Resolve(handle, "cuptiGetCallbackName", &api.GetCallbackName)},
      {"cuptiActivityRegisterCallbacks",
       Resolve(handle, "cuptiActivityRegisterCallbacks", &api.ActivityRegisterCallbacks)},
      {"cuptiActivityEnable", Resolve(handle, "cuptiActivityEnable", &api.ActivityEnable)},
      {"cuptiActivityDisable", Resolve(handle, "cuptiActivityDisable", &api.ActivityDisable)},
      {"cuptiActivityFlushAll", Resolve(handle, "cuptiActivityFlushAll", &api.ActivityFlushAll)},
      {"cuptiActivityGetNextRecord", Resolve(handle, "cuptiActivityGetNextRecord", &api.ActivityGetNextRecord)},
      {"cuptiActivityGetNumDroppedRecords",
       Resolve(handle, "cuptiActivityGetNumDroppedRecords", &api.ActivityGetNumDroppedRecords)},
      {"cuptiActivityPushExternalCorrelationId",
       Resolve(handle, "cuptiActivityPushExternalCorrelationId", &api.ActivityPushExternalCorrelationId)},
      {"cuptiActivityPopExternalCorrelationId",
       Resolve(handle, "cuptiActivityPopExternalCorrelationId", &api.ActivityPopExternalCorrelationId)},
  };
  for (const Required& r : required) {
    if (!r.ok) {
      return absl::FailedPreconditionError(
          StrCat(api.path, " lacks ", r.name, ": this libcupti is too old for the collector"));
    }
  }
  Resolve(handle, "cuptiSetThreadIdType", &api.SetThreadIdType);
  if (api.GetVersion(&api.version) != CUPTI_SUCCESS) api.version = 0;
  if (Dl_info info; dladdr(reinterpret_cast<void*>(api.GetVersion), &info) != 0 && info.dli_fname != nullptr) {
    api.path = info.dli_fname;
  }
  return absl::OkStatus();
}

std::string ReadComm(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

// Names from libcupti (API callbacks) and /proc (this process and its threads).
class LibraryNames : public CuptiNameLookup {
 public:
  explicit LibraryNames(const CuptiApi& api) : api_(api) {}

  std::string ApiName(CuptiApiDomain domain, uint32_t cbid) const override {
    const char* name = nullptr;
    const CUpti_CallbackDomain d =
        domain == CuptiApiDomain::kDriver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    if (api_.GetCallbackName(d, cbid, &name) != CUPTI_SUCCESS || name == nullptr) return "";
    return name;
  }

  std::string ProcessName() const override { return ReadComm("/proc/self/comm"); }

  std::string ThreadName(int64_t tid) const override { return ReadComm(StrCat("/proc/self/task/", tid, "/comm")); }

 private:
  const CuptiApi& api_;
};

// Every CUPTI record buffer is aligned to this (CUPTI requires 8).
constexpr size_t kBufferAlignment = 8;

// Kinds that must be enabled, and kinds that only help (an older CUPTI may
// not know them).
constexpr CUpti_ActivityKind kRequiredKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,          CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};
constexpr CUpti_ActivityKind kOptionalKinds[] = {
    CUPTI_ACTIVITY_KIND_MEMCPY2,     // peer-to-peer copies
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,  // which stream an event sync waited on
    CUPTI_ACTIVITY_KIND_CONTEXT,     // the device of each context
};

}  // namespace

// --- the collector ----------------------------------------------------------------

class CuptiCollector::Impl {
 public:
  explicit Impl(const CuptiOptions& options) : options_(options), names_(cupti_), builder_(names_) {}

  absl::Status Load() {
    DD_RETURN_IF_ERROR(LoadDriver(options_.driver_library.empty() ? "libcuda.so.1" : options_.driver_library,
                                  driver_, devices_));
    return LoadCupti(options_.cupti_library, cupti_);
  }

  absl::Status Start();
  absl::Status Stop();
  absl::StatusOr<Trace> TakeTrace();

  absl::Status PushExternalId(uint64_t id) {
    return cupti_.Check(cupti_.ActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id),
                        "cuptiActivityPushExternalCorrelationId");
  }
  absl::Status PopExternalId() {
    uint64_t last = 0;
    return cupti_.Check(cupti_.ActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                        "cuptiActivityPopExternalCorrelationId");
  }

  bool recording() const { return recording_; }
  const CuptiApi& cupti() const { return cupti_; }

  // Called by CUPTI's buffer callbacks, with the recording's mutex held.
  size_t buffer_bytes() const { return options_.buffer_bytes; }
  int64_t max_buffers() const { return options_.max_buffers; }
  void DecodeBuffer(uint8_t* buffer, size_t valid_bytes);
  void AddDropped(CUcontext context, uint32_t stream);

 private:
  void DisableAll();

  CuptiOptions options_;
  DriverApi driver_;
  CuptiApi cupti_;
  LibraryNames names_;
  std::vector<DeviceProperties> devices_;
  CuptiTraceBuilder builder_;     // guarded by the recording's mutex while recording
  absl::Status first_error_;      // likewise
  std::vector<CUpti_ActivityKind> enabled_;
  bool recording_ = false;
};

namespace {

// CUPTI's buffer callbacks carry no user pointer: they reach the collector
// that records through this process-wide slot. It is never destroyed, since
// CUPTI may call back while the process exits.
struct Recording {
  std::mutex mu;
  CuptiCollector::Impl* collector = nullptr;  // guarded by mu
  int64_t buffers = 0;                        // allocated and not yet returned; guarded by mu
  // The libcupti our buffer callbacks are registered with (by its
  // registration function); guarded by mu.
  decltype(&cuptiActivityRegisterCallbacks) registered_with = nullptr;
};

Recording& ActiveRecording() {
  static Recording* recording = new Recording;
  return *recording;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  Recording& recording = ActiveRecording();
  std::lock_guard<std::mutex> lock(recording.mu);
  // Without a recording collector, or at the buffer limit, CUPTI gets no
  // buffer and counts the records it drops.
  if (recording.collector == nullptr || recording.buffers >= recording.collector->max_buffers()) return;
  const size_t bytes = recording.collector->buffer_bytes();
  void* memory = std::aligned_alloc(kBufferAlignment, bytes);
  if (memory == nullptr) return;
  ++recording.buffers;
  *buffer = static_cast<uint8_t*>(memory);
  *size = bytes;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  Recording& recording = ActiveRecording();
  std::lock_guard<std::mutex> lock(recording.mu);
  if (recording.collector != nullptr) {
    if (buffer != nullptr) recording.collector->DecodeBuffer(buffer, valid);
    recording.collector->AddDropped(context, stream);
  }
  if (buffer != nullptr) {
    std::free(buffer);
    --recording.buffers;
  }
}

}  // namespace

void CuptiCollector::Impl::DecodeBuffer(uint8_t* buffer, size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  while (true) {
    const CUptiResult result = cupti_.ActivityGetNextRecord(buffer, valid_bytes, &record);
    if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) return;  // end of the buffer
    if (result != CUPTI_SUCCESS) {
      if (first_error_.ok()) first_error_ = cupti_.Check(result, "reading a CUPTI activity buffer");
      return;
    }
    if (absl::Status status = builder_.AddRecord(record); !status.ok() && first_error_.ok()) {
      first_error_ = status;
    }
  }
}

void CuptiCollector::Impl::AddDropped(CUcontext context, uint32_t stream) {
  size_t dropped = 0;
  if (cupti_.ActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    builder_.AddDroppedRecords(dropped);
  }
}

void CuptiCollector::Impl::DisableAll() {
  for (CUpti_ActivityKind kind : enabled_) cupti_.ActivityDisable(kind);
  enabled_.clear();
}

absl::Status CuptiCollector::Impl::Start() {
  if (recording_) return absl::FailedPreconditionError("CuptiCollector::Start: already recording");
  Recording& recording = ActiveRecording();
  {
    std::lock_guard<std::mutex> lock(recording.mu);
    if (recording.collector != nullptr) {
      return absl::FailedPreconditionError(
          "CuptiCollector::Start: another CuptiCollector is recording (CUPTI allows one per process)");
    }
    if (recording.registered_with != cupti_.ActivityRegisterCallbacks) {
      DD_RETURN_IF_ERROR(cupti_.Check(cupti_.ActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                                      "cuptiActivityRegisterCallbacks"));
      recording.registered_with = cupti_.ActivityRegisterCallbacks;
    }
    recording.collector = this;
  }
  // OS thread ids, so that CPU tracks match the process's threads.
  if (cupti_.SetThreadIdType != nullptr) cupti_.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  std::vector<CUpti_ActivityKind> required(std::begin(kRequiredKinds), std::end(kRequiredKinds));
  if (options_.record_driver_api) required.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  absl::Status status;
  for (CUpti_ActivityKind kind : required) {
    status = cupti_.Check(cupti_.ActivityEnable(kind), StrCat("cuptiActivityEnable(kind ", static_cast<int>(kind), ")"));
    if (!status.ok()) break;
    enabled_.push_back(kind);
  }
  if (status.ok()) {
    for (CUpti_ActivityKind kind : kOptionalKinds) {
      if (cupti_.ActivityEnable(kind) == CUPTI_SUCCESS) enabled_.push_back(kind);
    }
    recording_ = true;
    return absl::OkStatus();
  }
  DisableAll();
  std::lock_guard<std::mutex> lock(recording.mu);
  recording.collector = nullptr;
  return status;
}

absl::Status CuptiCollector::Impl::Stop() {
  if (!recording_) return absl::FailedPreconditionError("CuptiCollector::Stop: not recording");
  DisableAll();
  // Delivers every buffer CUPTI holds, through BufferCompleted, on this thread.
  absl::Status status = cupti_.Check(cupti_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  Recording& recording = ActiveRecording();
  std::lock_guard<std::mutex> lock(recording.mu);
  AddDropped(nullptr, 0);
  recording.collector = nullptr;
  recording_ = false;
  return status;
}

absl::StatusOr<Trace> CuptiCollector::Impl::TakeTrace() {
  if (recording_) return absl::FailedPreconditionError("CuptiCollector::TakeTrace: still recording; call Stop() first");
  absl::StatusOr<Trace> trace = builder_.Finish();
  if (!first_error_.ok()) {
    absl::Status error = std::move(first_error_);
    first_error_ = absl::OkStatus();
    return error;
  }
  if (trace.ok()) trace->devices = devices_;
  return trace;
}

bool CuptiAvailable() { return true; }

absl::StatusOr<std::unique_ptr<CuptiCollector>> CuptiCollector::Create(const CuptiOptions& options) {
  constexpr size_t kMinBufferBytes = size_t{64} << 10;
  constexpr size_t kMaxBufferBytes = size_t{1} << 30;
  if (options.buffer_bytes < kMinBufferBytes || options.buffer_bytes > kMaxBufferBytes) {
    return absl::InvalidArgumentError(StrCat("CuptiOptions.buffer_bytes is ", options.buffer_bytes,
                                             "; it must be between 64 KiB and 1 GiB"));
  }
  if (options.max_buffers < 1) {
    return absl::InvalidArgumentError(
        StrCat("CuptiOptions.max_buffers is ", options.max_buffers, "; it must be at least 1"));
  }
  CuptiOptions normalized = options;
  normalized.buffer_bytes = (options.buffer_bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  auto impl = std::make_unique<Impl>(normalized);
  DD_RETURN_IF_ERROR(impl->Load());
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(impl)));
}

CuptiCollector::CuptiCollector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CuptiCollector::~CuptiCollector() {
  if (impl_ != nullptr && impl_->recording()) impl_->Stop().IgnoreError();
}

absl::Status CuptiCollector::Start() { return impl_->Start(); }
absl::Status CuptiCollector::Stop() { return impl_->Stop(); }
absl::StatusOr<Trace> CuptiCollector::TakeTrace() { return impl_->TakeTrace(); }
bool CuptiCollector::recording() const { return impl_->recording(); }
absl::Status CuptiCollector::PushExternalId(uint64_t external_id) { return impl_->PushExternalId(external_id); }
absl::Status CuptiCollector::PopExternalId() { return impl_->PopExternalId(); }
const std::string& CuptiCollector::cupti_path() const { return impl_->cupti().path; }
uint32_t CuptiCollector::cupti_version() const { return impl_->cupti().version; }

}  // namespace daydream
