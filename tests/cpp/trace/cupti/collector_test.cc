// Tests for daydream/trace/cupti: the decoding of CUPTI activity records into
// a Trace (driven with real CUPTI record structs built here, so no GPU is
// needed), its equivalence with what the Kineto reader makes of the same
// activity, the graph the result builds, and the collector itself: on this
// machine's missing driver, and end to end on a fake libcuda/libcupti
// (fake_cupti.cc).
//
// This test includes <cupti.h> to build records; the library keeps it to
// collector.cc.
#include "daydream/trace/cupti/collector.h"

#include <cupti.h>
#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daydream/graph/builder.h"
#include "daydream/sim/replay.h"
#include "daydream/trace/cupti/decode.h"
#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::HasEdge;
using daydream::testing::KinetoDoc;
using daydream::testing::ParseOrDie;
using daydream::testing::TaskNamed;

namespace {

// The layouts the collector decodes (see collector.cc): CUDA 13's records, or
// the oldest layouts with older headers.
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP4;
using MemsetRecord = CUpti_ActivityMemset4;
using SyncRecord = CUpti_ActivitySynchronization2;
using CudaEventRecord = CUpti_ActivityCudaEvent2;
using ContextRecord = CUpti_ActivityContext3;
#else
using KernelRecord = CUpti_ActivityKernel4;
using MemcpyRecord = CUpti_ActivityMemcpy;
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP;
using MemsetRecord = CUpti_ActivityMemset;
using SyncRecord = CUpti_ActivitySynchronization;
using CudaEventRecord = CUpti_ActivityCudaEvent;
using ContextRecord = CUpti_ActivityContext;
#endif

// A realistic clock value (CUPTI timestamps are ns since the epoch).
constexpr uint64_t kT0 = 1'695'835'572'943'613'000;
constexpr uint32_t kPid = 4100;
constexpr uint32_t kTid = 4101;
constexpr uint32_t kNoStream = CUPTI_SYNCHRONIZATION_INVALID_VALUE;

// Names as libcupti and /proc would give them.
class FakeNames : public CuptiNameLookup {
 public:
  std::string ApiName(CuptiApiDomain domain, uint32_t cbid) const override {
    if (domain == CuptiApiDomain::kDriver) {
      if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) return "cuLaunchKernel";
      if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2) return "cuMemcpyHtoD_v2";
      return "";
    }
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000: return "cudaLaunchKernel_v7000";
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020: return "cudaMemcpyAsync_v3020";
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020: return "cudaStreamSynchronize_v3020";
      case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020: return "cudaEventRecord_v3020";
      case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020: return "cudaStreamWaitEvent_v3020";
      case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020: return "cudaDeviceSynchronize_v3020";
      default: return "";
    }
  }
  std::string ProcessName() const override { return "trainer"; }
  std::string ThreadName(int64_t tid) const override { return tid == kTid ? "worker" : ""; }
};

// --- record builders (times are offsets from kT0 in ns) ----------------------

KernelRecord Kernel(const char* name, uint64_t start, uint64_t end, uint32_t correlation, uint32_t stream = 7,
                    uint32_t device = 0, uint32_t context = 1) {
  KernelRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.name = name;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.correlationId = correlation;
  r.streamId = stream;
  r.deviceId = device;
  r.contextId = context;
  r.gridX = r.gridY = r.gridZ = 1;
  r.blockX = 128;
  r.blockY = r.blockZ = 1;
  return r;
}

MemcpyRecord Memcpy(uint8_t copy_kind, uint8_t src, uint8_t dst, uint64_t bytes, uint64_t start, uint64_t end,
                    uint32_t correlation, uint32_t stream = 7) {
  MemcpyRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = copy_kind;
  r.srcKind = src;
  r.dstKind = dst;
  r.bytes = bytes;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.correlationId = correlation;
  r.streamId = stream;
  r.deviceId = 0;
  r.contextId = 1;
  return r;
}

MemsetRecord Memset(uint16_t memory_kind, uint64_t bytes, uint64_t start, uint64_t end, uint32_t correlation,
                    uint32_t stream = 7) {
  MemsetRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  r.memoryKind = memory_kind;
  r.bytes = bytes;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.correlationId = correlation;
  r.streamId = stream;
  r.deviceId = 0;
  r.contextId = 1;
  return r;
}

CUpti_ActivityAPI Api(CUpti_CallbackId cbid, uint64_t start, uint64_t end, uint32_t correlation,
                      CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_RUNTIME, uint32_t tid = kTid) {
  CUpti_ActivityAPI r{};
  r.kind = kind;
  r.cbid = cbid;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.correlationId = correlation;
  r.processId = kPid;
  r.threadId = tid;
  return r;
}

SyncRecord Sync(CUpti_ActivitySynchronizationType type, uint64_t start, uint64_t end, uint32_t correlation,
                uint32_t stream, uint32_t event = kNoStream, uint32_t context = 1) {
  SyncRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.type = type;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.correlationId = correlation;
  r.contextId = context;
  r.streamId = stream;
  r.cudaEventId = event;
  return r;
}

CUpti_ActivityExternalCorrelation External(uint32_t correlation, uint64_t external_id,
                                           CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
  CUpti_ActivityExternalCorrelation r{};
  r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  r.externalKind = kind;
  r.externalId = external_id;
  r.correlationId = correlation;
  return r;
}

CudaEventRecord EventRecorded(uint32_t event, uint32_t stream, uint32_t correlation, uint32_t context = 1) {
  CudaEventRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  r.eventId = event;
  r.streamId = stream;
  r.correlationId = correlation;
  r.contextId = context;
  return r;
}

// Decodes records and builds the Trace.
class Decoder {
 public:
  template <typename Record>
  Decoder& Add(const Record& record) {
    const absl::Status status = builder_.AddRecord(&record);
    INFO(status.message());
    REQUIRE(status.ok());
    return *this;
  }

  Trace Finish() {
    auto trace = builder_.Finish();
    INFO((trace.ok() ? std::string("ok") : std::string(trace.status().message())));
    REQUIRE(trace.ok());
    return std::move(trace).value();
  }

  CuptiTraceBuilder& builder() { return builder_; }

 private:
  FakeNames names_;
  CuptiTraceBuilder builder_{names_};
};

const TraceEvent& OnlyEvent(const Trace& trace) {
  REQUIRE(trace.events.size() == 1);
  return trace.events[0];
}

const TraceTrack& TrackOf(const Trace& trace, const TraceEvent& ev) {
  REQUIRE(ev.track >= 0);
  REQUIRE(static_cast<size_t>(ev.track) < trace.tracks.size());
  return trace.tracks[static_cast<size_t>(ev.track)];
}

const TraceEvent& EventNamed(const Trace& trace, const std::string& name) {
  for (const TraceEvent& ev : trace.events) {
    if (trace.Str(ev.name) == name) return ev;
  }
  INFO("no event named " << name);
  REQUIRE(false);
  return trace.events.front();
}

const WarningCount* FindWarning(const Trace& trace, const std::string& kind) {
  for (const WarningCount& w : trace.warnings.items()) {
    if (w.kind == kind) return &w;
  }
  return nullptr;
}

}  // namespace

// --- API names -------------------------------------------------------------------

TEST_CASE("cupti API names drop CUPTI's version suffix and keep the rest", "[cupti]") {
  CHECK(ApiNameFromCallbackName("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(ApiNameFromCallbackName("cudaGraphLaunch_ptsz_v10000") == "cudaGraphLaunch_ptsz");
  CHECK(ApiNameFromCallbackName("cuMemcpyHtoD_v2") == "cuMemcpyHtoD");
  CHECK(ApiNameFromCallbackName("cuLaunchKernel") == "cuLaunchKernel");
  CHECK(ApiNameFromCallbackName("cudaFoo_vx1") == "cudaFoo_vx1");
  CHECK(ApiNameFromCallbackName("cudaFoo_v") == "cudaFoo_v");
  CHECK(ApiNameFromCallbackName("") == "");
}

// --- kernels, copies, memsets --------------------------------------------------

TEST_CASE("cupti kernel record becomes a kernel event on its (device, stream) track", "[cupti]") {
  const Trace trace = Decoder().Add(Kernel("_Z6addOneIfEvPT_i", 1000, 21'000, 42, /*stream=*/13, /*device=*/2)).Finish();
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kKernel);
  CHECK(trace.Str(ev.name) == "void addOne<float>(float*, int)");
  CHECK(ev.ts_ns == static_cast<TimeNs>(kT0 + 1000));
  CHECK(ev.dur_ns == 20'000);
  CHECK(ev.correlation == 42);
  CHECK(trace.Detail(ev).device == 2);
  CHECK(trace.Detail(ev).stream == 13);
  CHECK(ev.external_id == kUnset);
  CHECK(trace.Detail(ev).grid_blocks == 1);
  CHECK(trace.Detail(ev).block_threads == 128);
  const TraceTrack& track = TrackOf(trace, ev);
  CHECK(track.pid == 2);
  CHECK(track.tid == 13);
  CHECK(track.gpu);
  CHECK(track.num_events == 1);
  CHECK(trace.Str(track.process_label) == "GPU 2");
  CHECK(trace.Str(track.process_name) == "trainer");
  CHECK(trace.Str(track.thread_name) == "stream 13 ");
  CHECK(track.sort_index == 13);
  CHECK(trace.path == "<cupti>");
  CHECK(trace.warnings.empty());
}

TEST_CASE("cupti kernel grid and block sizes are the products of their dimensions", "[cupti]") {
  auto kernel = Kernel("k", 0, 10, 1);
  kernel.gridX = 512;
  kernel.gridY = 3;
  kernel.gridZ = 2;
  kernel.blockX = 32;
  kernel.blockY = 8;
  kernel.blockZ = 1;
  const Trace trace = Decoder().Add(kernel).Finish();
  CHECK(trace.Detail(OnlyEvent(trace)).grid_blocks == 3072);
  CHECK(trace.Detail(OnlyEvent(trace)).block_threads == 256);
  kernel.gridZ = 0;  // not a launch configuration: unknown, as the reader makes it
  kernel.blockY = -1;
  const Trace odd = Decoder().Add(kernel).Finish();
  CHECK(odd.Detail(OnlyEvent(odd)).grid_blocks == kUnset);
  CHECK(odd.Detail(OnlyEvent(odd)).block_threads == -1);
}

TEST_CASE("cupti kernel names that are not mangled are kept as they are", "[cupti]") {
  const Trace trace = Decoder().Add(Kernel("triton_poi_fused_add_0", 0, 10, 1)).Finish();
  CHECK(trace.Str(OnlyEvent(trace).name) == "triton_poi_fused_add_0");
  const Trace unnamed = Decoder().Add(Kernel(nullptr, 0, 10, 1)).Finish();
  CHECK(unnamed.Str(OnlyEvent(unnamed).name) == "<unnamed kernel>");
}

TEST_CASE("cupti memcpy records are named from copy and memory kinds as Kineto names them", "[cupti]") {
  struct Case {
    uint8_t copy, src, dst;
    std::string name;
  };
  const std::vector<Case> cases = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       "Memcpy HtoD (Pageable -> Device)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
       "Memcpy DtoH (Device -> Pinned)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
       "Memcpy DtoD (Device -> Device)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
       "Memcpy HtoH (Pinned -> Pageable)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
       "Memcpy HtoA (Pageable -> Array)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
       "Memcpy DtoD (Managed -> Device Static)"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, 99,
       "Memcpy <unknown> (Unknown -> Unrecognized)"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const Trace trace = Decoder().Add(Memcpy(c.copy, c.src, c.dst, 4096, 100, 600, 9, 20)).Finish();
    const TraceEvent& ev = OnlyEvent(trace);
    CHECK(ev.kind == EventKind::kMemcpy);
    CHECK(trace.Str(ev.name) == c.name);
    CHECK(trace.Detail(ev).bytes == 4096);
    CHECK(ev.dur_ns == 500);
    CHECK(ev.correlation == 9);
    CHECK(trace.Detail(ev).stream == 20);
    CHECK(trace.Detail(ev).device == 0);
    CHECK(TrackOf(trace, ev).tid == 20);
    CHECK(TrackOf(trace, ev).gpu);
  }
}

TEST_CASE("cupti peer-to-peer copy records become memcpy events", "[cupti]") {
  MemcpyPtoPRecord r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  r.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  r.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.bytes = 1 << 20;
  r.start = kT0;
  r.end = kT0 + 3000;
  r.deviceId = 1;
  r.srcDeviceId = 1;
  r.dstDeviceId = 0;
  r.streamId = 30;
  r.correlationId = 77;
  const Trace trace = Decoder().Add(r).Finish();
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kMemcpy);
  CHECK(trace.Str(ev.name) == "Memcpy PtoP (Device -> Device)");
  CHECK(trace.Detail(ev).bytes == (1 << 20));
  CHECK(trace.Detail(ev).device == 1);
  CHECK(TrackOf(trace, ev).pid == 1);
  CHECK(TrackOf(trace, ev).tid == 30);
}

TEST_CASE("cupti memset records become memset events named by memory kind", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Memset(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 6291456, 0, 4960, 5))
                          .Add(Memset(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 64, 10'000, 11'000, 6))
                          .Finish();
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.events[0].kind == EventKind::kMemset);
  CHECK(trace.Str(trace.events[0].name) == "Memset (Device)");
  CHECK(trace.Detail(trace.events[0]).bytes == 6291456);
  CHECK(trace.events[0].dur_ns == 4960);
  CHECK(trace.events[0].correlation == 5);
  CHECK(trace.Str(trace.events[1].name) == "Memset (Managed)");
  CHECK(trace.events[0].track == trace.events[1].track);
}

// --- API calls -------------------------------------------------------------------

TEST_CASE("cupti runtime API record becomes a runtime event on its (process, thread) track", "[cupti]") {
  const Trace trace =
      Decoder().Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 500, 4500, 42)).Finish();
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kRuntime);
  CHECK(trace.Str(ev.name) == "cudaLaunchKernel");
  CHECK(ev.ts_ns == static_cast<TimeNs>(kT0 + 500));
  CHECK(ev.dur_ns == 4000);
  CHECK(ev.correlation == 42);
  CHECK(trace.Detail(ev).device == -1);
  CHECK(trace.Detail(ev).stream == kUnset);
  const TraceTrack& track = TrackOf(trace, ev);
  CHECK(track.pid == kPid);
  CHECK(track.tid == kTid);
  CHECK_FALSE(track.gpu);
  CHECK(trace.Str(track.process_label) == "CPU");
  CHECK(trace.Str(track.process_name) == "trainer");
  CHECK(trace.Str(track.thread_name) == "thread 4101 (worker)");
  CHECK(track.sort_index == kTid);
}

TEST_CASE("cupti thread without a known name is named by its id", "[cupti]") {
  const Trace trace =
      Decoder().Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 10, 1, CUPTI_ACTIVITY_KIND_RUNTIME, 77))
          .Finish();
  CHECK(trace.Str(TrackOf(trace, OnlyEvent(trace)).thread_name) == "thread 77");
}

TEST_CASE("cupti driver API record becomes a driver event", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Api(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 0, 3000, 8, CUPTI_ACTIVITY_KIND_DRIVER))
                          .Add(Api(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 5000, 9000, 9, CUPTI_ACTIVITY_KIND_DRIVER))
                          .Finish();
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.events[0].kind == EventKind::kDriver);
  CHECK(trace.Str(trace.events[0].name) == "cuLaunchKernel");
  CHECK(trace.events[0].correlation == 8);
  CHECK(trace.Str(trace.events[1].name) == "cuMemcpyHtoD");
  CHECK(trace.events[0].track == trace.events[1].track);
}

TEST_CASE("cupti API call with a callback id the lookup does not know is named by domain and id", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Api(9999, 0, 10, 1))
                          .Add(Api(9999, 20, 30, 2, CUPTI_ACTIVITY_KIND_DRIVER))
                          .Finish();
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.Str(trace.events[0].name) == "runtime API call 9999");
  CHECK(trace.Str(trace.events[1].name) == "driver API call 9999");
}

// --- synchronization -------------------------------------------------------------

TEST_CASE("cupti synchronization records become cuda_sync events of each sync kind", "[cupti]") {
  Decoder decoder;
  decoder.Add(Kernel("k", 0, 100, 1, 7, /*device=*/3, /*context=*/5))  // tells context 5 -> device 3
      .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 1000, 2000, 11, 7, kNoStream, 5))
      .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 3000, 4000, 12, kNoStream, kNoStream, 5))
      .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 5000, 6000, 13, kNoStream, 4, 5))
      .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 7000, 7003, 14, 20, 4, 5))
      .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN, 8000, 8001, 15, 7, kNoStream, 5));
  const Trace trace = decoder.Finish();
  REQUIRE(trace.events.size() == 6);

  const TraceEvent& stream_sync = trace.events[1];
  CHECK(stream_sync.kind == EventKind::kCudaSync);
  CHECK(trace.Str(stream_sync.name) == "Stream Sync");
  CHECK(trace.Str(trace.Detail(stream_sync).sync_kind) == "Stream Sync");
  CHECK(stream_sync.correlation == 11);
  CHECK(trace.Detail(stream_sync).stream == 7);
  CHECK(trace.Detail(stream_sync).device == 3);
  CHECK(stream_sync.dur_ns == 1000);
  CHECK(TrackOf(trace, stream_sync).pid == 3);
  CHECK(TrackOf(trace, stream_sync).tid == 7);
  CHECK(stream_sync.track == trace.events[0].track);  // the kernel's stream

  const TraceEvent& context_sync = trace.events[2];
  CHECK(trace.Str(trace.Detail(context_sync).sync_kind) == "Context Sync");
  CHECK(trace.Detail(context_sync).stream == 4294967295);  // as Kineto writes "stream"
  CHECK(TrackOf(trace, context_sync).tid == -1);
  CHECK(trace.Str(TrackOf(trace, context_sync).thread_name) == "Device 3");
  CHECK(TrackOf(trace, context_sync).gpu);

  CHECK(trace.Str(trace.Detail(trace.events[3]).sync_kind) == "Event Sync");
  CHECK(trace.Str(trace.Detail(trace.events[4]).sync_kind) == "Stream Wait Event");
  CHECK(trace.Detail(trace.events[4]).stream == 20);
  CHECK(trace.Str(trace.Detail(trace.events[5]).sync_kind) == "Unknown Sync");
  CHECK(trace.warnings.empty());
}

TEST_CASE("cupti event syncs name the stream and record call of the event they waited on", "[cupti]") {
  // Event 4 is recorded on stream 7 (call 10), waited on by stream 20 (call
  // 14), recorded again on stream 9 (call 20) and synchronized on (call 21).
  // The records arrive out of order.
  const Trace trace = Decoder()
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 9000, 9500, 21, kNoStream, 4))
                          .Add(EventRecorded(4, 9, 20))
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 5000, 5003, 14, 20, 4))
                          .Add(EventRecorded(4, 7, 10))
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 100, 103, 3, 20, 4))
                          .Finish();
  REQUIRE(trace.events.size() == 3);
  const TraceEvent& before_any_record = trace.events[0];
  CHECK(trace.Detail(before_any_record).wait_on_stream == kUnset);
  CHECK(trace.Detail(before_any_record).wait_on_event_record_correlation == kUnset);
  const TraceEvent& wait = trace.events[1];
  CHECK(trace.Str(trace.Detail(wait).sync_kind) == "Stream Wait Event");
  CHECK(trace.Detail(wait).wait_on_stream == 7);
  CHECK(trace.Detail(wait).wait_on_event_record_correlation == 10);
  const TraceEvent& event_sync = trace.events[2];
  CHECK(trace.Str(trace.Detail(event_sync).sync_kind) == "Event Sync");
  CHECK(trace.Detail(event_sync).wait_on_stream == 9);
  CHECK(trace.Detail(event_sync).wait_on_event_record_correlation == 20);
  // CUDA event records are links, not events.
  for (const TraceEvent& ev : trace.events) CHECK(ev.kind == EventKind::kCudaSync);
}

TEST_CASE("cupti sync records take their device from context records", "[cupti]") {
  ContextRecord context{};
  context.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  context.contextId = 9;
  context.deviceId = 6;
  const Trace trace = Decoder()
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 0, 10, 1, 7, kNoStream, 9))
                          .Add(context)
                          .Finish();
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(trace.Detail(ev).device == 6);
  CHECK(TrackOf(trace, ev).pid == 6);
  CHECK(trace.Str(TrackOf(trace, ev).process_label) == "GPU 6");
}

TEST_CASE("cupti sync on a context of unknown device among several is placed on device 0 with a warning",
          "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Kernel("a", 0, 10, 1, 7, 0, 1))
                          .Add(Kernel("b", 0, 10, 2, 7, 1, 2))
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 20, 30, 3, 7, kNoStream, 8))
                          .Finish();
  CHECK(trace.Detail(EventNamed(trace, "Stream Sync")).device == 0);
  const WarningCount* w = FindWarning(trace, "cupti_sync_device_unknown");
  REQUIRE(w != nullptr);
  CHECK(w->count == 1);
}

// --- external correlation --------------------------------------------------------

TEST_CASE("cupti external correlation tags the API call and its GPU work whatever the arrival order", "[cupti]") {
  const auto launch = Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 4000, 42);
  const auto kernel = Kernel("k", 8000, 9000, 42);
  const auto copy_call = Api(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 5000, 6000, 43);
  SECTION("external id before its records") {
    const Trace trace = Decoder().Add(External(42, 1001)).Add(launch).Add(kernel).Add(copy_call).Finish();
    CHECK(EventNamed(trace, "cudaLaunchKernel").external_id == 1001);
    CHECK(EventNamed(trace, "k").external_id == 1001);
    CHECK(EventNamed(trace, "cudaMemcpyAsync").external_id == kUnset);
  }
  SECTION("external id after its records") {
    const Trace trace = Decoder().Add(kernel).Add(launch).Add(copy_call).Add(External(42, 1001)).Finish();
    CHECK(EventNamed(trace, "cudaLaunchKernel").external_id == 1001);
    CHECK(EventNamed(trace, "k").external_id == 1001);
    CHECK(EventNamed(trace, "cudaMemcpyAsync").external_id == kUnset);
  }
}

TEST_CASE("cupti external ids of torch.profiler's kind win over other kinds", "[cupti]") {
  const auto launch = Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 4000, 42);
  const auto custom1 = External(42, 555, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
  const auto custom0 = External(42, 1001, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  CHECK(OnlyEvent(Decoder().Add(launch).Add(custom1).Add(custom0).Finish()).external_id == 1001);
  CHECK(OnlyEvent(Decoder().Add(launch).Add(custom0).Add(custom1).Finish()).external_id == 1001);
  CHECK(OnlyEvent(Decoder().Add(launch).Add(custom1).Finish()).external_id == 555);
}

TEST_CASE("cupti copy is linked to its runtime call when CUPTI names the driver call that was not recorded",
          "[cupti]") {
  auto copy = Memcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                     CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 64, 8000, 9000, /*correlation=*/51);
  copy.runtimeCorrelationId = 50;
  const auto call = Api(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 0, 5000, 50);
  SECTION("only the runtime call recorded") {
    const Trace trace = Decoder().Add(copy).Add(call).Finish();
    CHECK(EventNamed(trace, "Memcpy HtoD (Pinned -> Device)").correlation == 50);
  }
  SECTION("the driver call recorded too") {
    const Trace trace = Decoder()
                            .Add(copy)
                            .Add(call)
                            .Add(Api(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 100, 4000, 51, CUPTI_ACTIVITY_KIND_DRIVER))
                            .Finish();
    CHECK(EventNamed(trace, "Memcpy HtoD (Pinned -> Device)").correlation == 51);
  }
}

// --- odd records -----------------------------------------------------------------

TEST_CASE("cupti records of kinds the decoder does not read are skipped and counted", "[cupti]") {
  CUpti_Activity marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  CUpti_Activity overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  Decoder decoder;
  decoder.Add(marker).Add(Kernel("k", 0, 10, 1)).Add(overhead).Add(marker);
  CHECK(decoder.builder().num_events() == 1);
  const Trace trace = decoder.Finish();
  CHECK(trace.events.size() == 1);
  const WarningCount* w = FindWarning(trace, "cupti_unsupported_activity_kind");
  REQUIRE(w != nullptr);
  CHECK(w->count == 3);
  CHECK(w->example.find(std::to_string(static_cast<int>(CUPTI_ACTIVITY_KIND_MARKER))) != std::string::npos);
}

TEST_CASE("cupti null record is an error", "[cupti]") {
  FakeNames names;
  CuptiTraceBuilder builder(names);
  const absl::Status status = builder.AddRecord(nullptr);
  CHECK(absl::IsInvalidArgument(status));
}

TEST_CASE("cupti zero-duration records are kept as they are", "[cupti]") {
  const Trace trace = Decoder().Add(Kernel("k", 500, 500, 1)).Finish();
  CHECK(OnlyEvent(trace).dur_ns == 0);
  CHECK(OnlyEvent(trace).ts_ns == static_cast<TimeNs>(kT0 + 500));
  CHECK(trace.warnings.empty());
}

TEST_CASE("cupti records that end before they start keep duration 0 and are counted", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Kernel("k", 900, 100, 1))
                          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 50, 40, 1))
                          .Finish();
  REQUIRE(trace.events.size() == 2);
  for (const TraceEvent& ev : trace.events) CHECK(ev.dur_ns == 0);
  CHECK(EventNamed(trace, "k").ts_ns == static_cast<TimeNs>(kT0 + 900));
  const WarningCount* w = FindWarning(trace, "cupti_end_before_start");
  REQUIRE(w != nullptr);
  CHECK(w->count == 2);
}

TEST_CASE("cupti records without timestamps or beyond the time range are skipped and counted", "[cupti]") {
  auto untimed = Kernel("untimed", 0, 0, 1);
  untimed.start = 0;
  untimed.end = 0;
  auto far = Kernel("far", 0, 0, 2);
  far.start = uint64_t{1} << 63;
  far.end = far.start + 10;
  const Trace trace = Decoder().Add(untimed).Add(far).Add(Kernel("kept", 0, 10, 3)).Finish();
  REQUIRE(trace.events.size() == 1);
  CHECK(trace.Str(trace.events[0].name) == "kept");
  REQUIRE(FindWarning(trace, "cupti_record_without_timestamps") != nullptr);
  REQUIRE(FindWarning(trace, "cupti_timestamp_out_of_range") != nullptr);
}

TEST_CASE("cupti events are ordered by start time whatever order the records arrive in", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Kernel("third", 3000, 4000, 3))
                          .Add(Kernel("first", 1000, 2000, 1))
                          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2000, 2500, 2))
                          .Finish();
  REQUIRE(trace.events.size() == 3);
  CHECK(trace.Str(trace.events[0].name) == "first");
  CHECK(trace.Str(trace.events[1].name) == "cudaLaunchKernel");
  CHECK(trace.Str(trace.events[2].name) == "third");
  for (const TraceEvent& ev : trace.events) {
    CHECK(ev.track >= 0);
    CHECK(static_cast<size_t>(ev.track) < trace.tracks.size());
  }
}

TEST_CASE("cupti dropped records are reported as one warning with their total", "[cupti]") {
  Decoder decoder;
  decoder.Add(Kernel("k", 0, 10, 1));
  decoder.builder().AddDroppedRecords(12);
  decoder.builder().AddDroppedRecords(30);
  decoder.builder().AddDroppedRecords(0);
  const Trace trace = decoder.Finish();
  const WarningCount* w = FindWarning(trace, "cupti_dropped_records");
  REQUIRE(w != nullptr);
  CHECK(w->example.find("dropped 42 activity records") != std::string::npos);
}

TEST_CASE("cupti decoder with nothing decoded fails, and Finish starts over", "[cupti]") {
  FakeNames names;
  CuptiTraceBuilder builder(names);
  auto empty = builder.Finish();
  REQUIRE_FALSE(empty.ok());
  CHECK(absl::IsFailedPrecondition(empty.status()));

  const auto kernel = Kernel("k", 0, 10, 1);
  REQUIRE(builder.AddRecord(&kernel).ok());
  auto first = builder.Finish();
  REQUIRE(first.ok());
  CHECK(first->events.size() == 1);
  CHECK(builder.num_events() == 0);
  CHECK_FALSE(builder.Finish().ok());
}

// --- the same records as the Kineto reader makes -------------------------------------

TEST_CASE("cupti records decode into the events the Kineto reader makes of Kineto's JSON for them", "[cupti]") {
  // One activity, recorded by CUPTI ...
  const Trace decoded =
      Decoder()
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1000, 5000, 1))
          .Add(External(1, 7))
          .Add(Kernel("_Z6addOneIfEvPT_i", 8000, 28'000, 1))
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 30'000, 33'000, 2))
          .Add(Memcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                      CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 92928, 34'000, 46'500, 2))
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 47'000, 60'000, 3))
          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 47'100, 59'900, 3, 7))
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, 61'000, 62'000, 4))
          .Add(EventRecorded(1, 7, 4))
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 63'000, 64'000, 5))
          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 63'500, 63'503, 5, 20, 1))
          .Add(Memset(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 20736, 65'000, 69'000, 6, 20))
          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 70'000, 80'000, 7))
          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 70'100, 79'000, 7, kNoStream))
          .Finish();

  // ... and as torch.profiler writes it (ts/dur in microseconds).
  const std::string cpu = R"("pid":4100,"tid":4101)";
  auto us = [](uint64_t offset_ns) {
    const uint64_t t = kT0 + offset_ns;
    std::string frac = std::to_string(t % 1000);
    return std::to_string(t / 1000) + "." + std::string(3 - frac.size(), '0') + frac;
  };
  auto dur = [](uint64_t ns) { return std::to_string(ns / 1000) + "." + std::to_string(ns % 1000 / 100); };
  const std::string json = KinetoDoc(
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel",)" + cpu + R"(,"ts":)" + us(1000) +
      R"(,"dur":4,"args":{"External id":7,"cbid":211,"correlation":1}},)"
      R"j({"ph":"X","cat":"kernel","name":"void addOne<float>(float*, int)","pid":0,"tid":7,"ts":)j" + us(8000) +
      R"(,"dur":20,"args":{"External id":7,"queued":0,"device":0,"context":1,"stream":7,"correlation":1,)"
      R"("registers per thread":0,"shared memory":0,"grid":[1,1,1],"block":[128,1,1]}},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaMemcpyAsync",)" + cpu + R"(,"ts":)" + us(30'000) +
      R"(,"dur":3,"args":{"cbid":41,"correlation":2}},)"
      R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":)j" + us(34'000) +
      R"(,"dur":)" + dur(12'500) +
      R"j(,"args":{"device":0,"context":1,"stream":7,"correlation":2,"bytes":92928,"memory bandwidth (GB/s)":7.4}},)j"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize",)" + cpu + R"(,"ts":)" + us(47'000) +
      R"(,"dur":13,"args":{"cbid":131,"correlation":3}},)"
      R"({"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":)" + us(47'100) + R"(,"dur":)" +
      dur(12'800) + R"(,"args":{"cuda_sync_kind":"Stream Sync","stream":7,"correlation":3,"device":0,"context":1}},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaEventRecord",)" + cpu + R"(,"ts":)" + us(61'000) +
      R"(,"dur":1,"args":{"cbid":135,"correlation":4}},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaStreamWaitEvent",)" + cpu + R"(,"ts":)" + us(63'000) +
      R"(,"dur":1,"args":{"cbid":147,"correlation":5}},)"
      R"({"ph":"X","cat":"cuda_sync","name":"Stream Wait Event","pid":0,"tid":20,"ts":)" + us(63'500) +
      R"(,"dur":0.003,"args":{"cuda_sync_kind":"Stream Wait Event","wait_on_stream":7,)"
      R"("wait_on_cuda_event_record_corr_id":4,"wait_on_cuda_event_id":1,"stream":20,"correlation":5,)"
      R"("device":0,"context":1}},)"
      R"j({"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":20,"ts":)j" + us(65'000) +
      R"(,"dur":4,"args":{"device":0,"context":1,"stream":20,"correlation":6,"bytes":20736}},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaDeviceSynchronize",)" + cpu + R"(,"ts":)" + us(70'000) +
      R"(,"dur":10,"args":{"cbid":165,"correlation":7}},)"
      R"({"ph":"X","cat":"cuda_sync","name":"Context Sync","pid":0,"tid":-1,"ts":)" + us(70'100) + R"(,"dur":)" +
      dur(8900) +
      R"(,"args":{"cuda_sync_kind":"Context Sync","stream":4294967295,"correlation":7,"device":0,"context":1}},)"
      R"({"name":"process_name","ph":"M","pid":4100,"tid":0,"args":{"name":"trainer"}},)"
      R"({"name":"process_labels","ph":"M","pid":4100,"tid":0,"args":{"labels":"CPU"}},)"
      R"({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"trainer"}},)"
      R"({"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}},)"
      R"j({"name":"thread_name","ph":"M","pid":4100,"tid":4101,"args":{"name":"thread 4101 (worker)"}},)j"
      R"({"name":"thread_sort_index","ph":"M","pid":4100,"tid":4101,"args":{"sort_index":4101}},)"
      R"({"name":"thread_name","ph":"M","pid":0,"tid":7,"args":{"name":"stream 7 "}},)"
      R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":7,"args":{"sort_index":7}},)"
      R"({"name":"thread_name","ph":"M","pid":0,"tid":20,"args":{"name":"stream 20 "}},)"
      R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":20,"args":{"sort_index":20}},)"
      R"({"name":"thread_name","ph":"M","pid":0,"tid":-1,"args":{"name":"Device 0"}},)"
      R"({"name":"thread_sort_index","ph":"M","pid":0,"tid":-1,"args":{"sort_index":-1}})");
  const Trace read = ParseOrDie(json);

  REQUIRE(decoded.events.size() == read.events.size());
  for (size_t i = 0; i < read.events.size(); ++i) {
    const TraceEvent& d = decoded.events[i];
    const TraceEvent& r = read.events[i];
    INFO("event " << i << ": " << read.Str(r.name));
    CHECK(d.kind == r.kind);
    CHECK(decoded.Str(d.name) == read.Str(r.name));
    CHECK(d.ts_ns == r.ts_ns);
    CHECK(d.dur_ns == r.dur_ns);
    CHECK(d.correlation == r.correlation);
    CHECK(d.external_id == r.external_id);
    CHECK(decoded.Detail(d).device == read.Detail(r).device);
    CHECK(decoded.Detail(d).stream == read.Detail(r).stream);
    CHECK(decoded.Detail(d).bytes == read.Detail(r).bytes);
    CHECK(decoded.Str(decoded.Detail(d).sync_kind) == read.Str(read.Detail(r).sync_kind));
    CHECK(decoded.Detail(d).wait_on_stream == read.Detail(r).wait_on_stream);
    CHECK(decoded.Detail(d).wait_on_event_record_correlation == read.Detail(r).wait_on_event_record_correlation);
    CHECK(d.instant == r.instant);
    CHECK(decoded.Detail(d).grid_blocks == read.Detail(r).grid_blocks);
    CHECK(decoded.Detail(d).block_threads == read.Detail(r).block_threads);
    const TraceTrack& dt = TrackOf(decoded, d);
    const TraceTrack& rt = TrackOf(read, r);
    CHECK(dt.pid == rt.pid);
    CHECK(dt.tid == rt.tid);
    CHECK(dt.gpu == rt.gpu);
    CHECK(decoded.Str(dt.process_name) == read.Str(rt.process_name));
    CHECK(decoded.Str(dt.process_label) == read.Str(rt.process_label));
    CHECK(decoded.Str(dt.thread_name) == read.Str(rt.thread_name));
    CHECK(dt.sort_index == rt.sort_index);
    CHECK(dt.num_events == rt.num_events);
  }
}

// --- the graph the decoded trace builds ------------------------------------------

TEST_CASE("cupti launch, kernel and stream sync build a graph with a launch edge and a sync edge", "[cupti]") {
  const Trace trace = Decoder()
                          .Add(Kernel("_Z6addOneIfEvPT_i", 8000, 28'000, 1))
                          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 5000, 1))
                          .Add(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 10'500, 29'500, 2, 7))
                          .Add(Api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 10'000, 30'000, 2))
                          .Finish();
  auto graph = BuildGraph(trace);
  INFO((graph.ok() ? std::string("ok") : std::string(graph.status().message())));
  REQUIRE(graph.ok());
  REQUIRE(graph->Validate().ok());
  const int32_t launch = TaskNamed(*graph, "cudaLaunchKernel");
  const int32_t kernel = TaskNamed(*graph, "void addOne<float>(float*, int)");
  const int32_t sync = TaskNamed(*graph, "cudaStreamSynchronize");
  CHECK(graph->tasks[static_cast<size_t>(kernel)].kind == TaskKind::kKernel);
  CHECK(graph->tasks[static_cast<size_t>(sync)].kind == TaskKind::kSync);
  CHECK(HasEdge(*graph, launch, kernel, EdgeKind::kLaunch));
  CHECK(HasEdge(*graph, kernel, sync, EdgeKind::kSync));
  // Waiting is not work: the sync call keeps only its overhead.
  CHECK(graph->tasks[static_cast<size_t>(sync)].duration_ns < 20'000);

  auto report = Replay(*graph);
  INFO((report.ok() ? std::string("ok") : std::string(report.status().message())));
  REQUIRE(report.ok());
  CHECK(report->makespan_ns > 0);
}

// --- the collector ---------------------------------------------------------------

TEST_CASE("cupti collector is compiled in", "[cupti]") { CHECK(CuptiAvailable()); }

TEST_CASE("cupti collector rejects options it cannot work with", "[cupti]") {
  CuptiOptions small;
  small.buffer_bytes = 1024;
  auto too_small = CuptiCollector::Create(small);
  REQUIRE_FALSE(too_small.ok());
  CHECK(absl::IsInvalidArgument(too_small.status()));
  CHECK(std::string(too_small.status().message()).find("buffer_bytes") != std::string::npos);

  CuptiOptions none;
  none.max_buffers = 0;
  auto no_buffers = CuptiCollector::Create(none);
  REQUIRE_FALSE(no_buffers.ok());
  CHECK(absl::IsInvalidArgument(no_buffers.status()));
}

TEST_CASE("cupti collector without a CUDA driver fails to create with 'no CUDA driver/device'", "[cupti]") {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto collector = CuptiCollector::Create();
  if (driver == nullptr) {
    REQUIRE_FALSE(collector.ok());
    CHECK(absl::IsFailedPrecondition(collector.status()));
    const std::string message(collector.status().message());
    INFO(message);
    CHECK(message.find("no CUDA driver/device") != std::string::npos);
    CHECK(message.find("libcuda.so.1") != std::string::npos);
  } else {
    // A machine with a driver: creating either works or says why not.
    if (!collector.ok()) CHECK(absl::IsFailedPrecondition(collector.status()));
  }
}

// --- the collector, end to end on a fake libcuda/libcupti ---------------------------

namespace {

// The fake library (fake_cupti.cc) stands in for both libcuda and libcupti;
// its FakeCuda*/FakeCupti* functions script it.
class Fake {
 public:
  Fake() {
    handle_ = dlopen(DAYDREAM_FAKE_CUPTI_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    INFO(DAYDREAM_FAKE_CUPTI_LIBRARY);
    REQUIRE(handle_ != nullptr);
    Call<void (*)()>("FakeCuptiReset")();
  }

  template <typename Fn>
  Fn Call(const char* name) const {
    void* symbol = dlsym(handle_, name);
    INFO(name);
    REQUIRE(symbol != nullptr);
    return reinterpret_cast<Fn>(symbol);
  }

  static CuptiOptions Options() {
    CuptiOptions options;
    options.driver_library = DAYDREAM_FAKE_CUPTI_LIBRARY;
    options.cupti_library = DAYDREAM_FAKE_CUPTI_LIBRARY;
    return options;
  }

  void SetDevices(int count, int init_result = CUDA_SUCCESS) const {
    Call<void (*)(int, int)>("FakeCudaSetDevices")(count, init_result);
  }
  template <typename Record>
  void Queue(const Record& record) const {
    Call<void (*)(const void*, size_t)>("FakeCuptiQueueRecord")(&record, sizeof(record));
  }
  void RefuseKind(int kind) const { Call<void (*)(int)>("FakeCuptiRefuseKind")(kind); }
  int EnabledCount() const { return Call<int (*)()>("FakeCuptiEnabledCount")(); }
  bool IsEnabled(int kind) const { return Call<int (*)(int)>("FakeCuptiIsEnabled")(kind) != 0; }
  int64_t BuffersOutstanding() const { return Call<int64_t (*)()>("FakeCuptiBuffersOutstanding")(); }
  int64_t MisalignedBuffers() const { return Call<int64_t (*)()>("FakeCuptiMisalignedBuffers")(); }
  int ThreadIdType() const { return Call<int (*)()>("FakeCuptiThreadIdType")(); }
  int ExternalIdDepth() const { return Call<int (*)()>("FakeCuptiExternalIdDepth")(); }

  std::unique_ptr<CuptiCollector> Create(const CuptiOptions& options = Options()) const {
    auto collector = CuptiCollector::Create(options);
    INFO((collector.ok() ? std::string("ok") : std::string(collector.status().message())));
    REQUIRE(collector.ok());
    return std::move(collector).value();
  }

 private:
  void* handle_ = nullptr;
};

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

}  // namespace

TEST_CASE("cupti collector records what CUPTI delivers and hands it over as a trace", "[cupti]") {
  Fake fake;
  auto collector = fake.Create();
  CHECK(collector->cupti_path().find("fake_cupti") != std::string::npos);
  CHECK(collector->cupti_version() == CUPTI_API_VERSION);
  CHECK_FALSE(collector->recording());

  REQUIRE(collector->Start().ok());
  CHECK(collector->recording());
  for (int kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                   CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_MEMCPY2,
                   CUPTI_ACTIVITY_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_CONTEXT}) {
    INFO("kind " << kind);
    CHECK(fake.IsEnabled(kind));
  }
  CHECK_FALSE(fake.IsEnabled(CUPTI_ACTIVITY_KIND_KERNEL));  // serializes kernels
  CHECK(fake.ThreadIdType() == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);

  fake.Queue(Api(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 5000, 1));
  fake.Queue(External(1, 99));
  fake.Queue(Kernel("_Z6addOneIfEvPT_i", 8000, 28'000, 1));
  fake.Queue(Api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 10'000, 30'000, 2));
  fake.Queue(Sync(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 10'500, 29'500, 2, 7));
  REQUIRE(collector->Stop().ok());
  CHECK_FALSE(collector->recording());
  CHECK(fake.EnabledCount() == 0);
  CHECK(fake.BuffersOutstanding() == 0);
  CHECK(fake.MisalignedBuffers() == 0);

  auto trace = collector->TakeTrace();
  INFO((trace.ok() ? std::string("ok") : MessageOf(trace.status())));
  REQUIRE(trace.ok());
  REQUIRE(trace->events.size() == 4);
  CHECK(trace->Str(trace->events[0].name) == "cudaLaunchKernel");
  CHECK(trace->events[0].external_id == 99);
  CHECK(trace->Str(trace->events[1].name) == "void addOne<float>(float*, int)");
  CHECK(trace->events[1].external_id == 99);
  CHECK(trace->Str(trace->events[2].name) == "cudaStreamSynchronize");
  CHECK(trace->Str(trace->Detail(trace->events[3]).sync_kind) == "Stream Sync");
  CHECK(trace->warnings.empty());
  REQUIRE(trace->devices.size() == 1);
  CHECK(trace->devices[0].id == 0);
  CHECK(trace->devices[0].name == "Fake GPU 0");
  CHECK(trace->devices[0].compute_major == 9);
  CHECK(trace->devices[0].num_sms == 132);
  CHECK(trace->devices[0].total_global_mem == (int64_t{80} << 30));
  CHECK(BuildGraph(*trace).ok());

  // Taken: the next trace starts empty.
  auto again = collector->TakeTrace();
  REQUIRE_FALSE(again.ok());
  CHECK(absl::IsFailedPrecondition(again.status()));
}

TEST_CASE("cupti collector accumulates several recording windows into one trace", "[cupti]") {
  Fake fake;
  auto collector = fake.Create();
  REQUIRE(collector->Start().ok());
  fake.Queue(Kernel("first", 0, 10, 1));
  REQUIRE(collector->Stop().ok());
  REQUIRE(collector->Start().ok());
  fake.Queue(Kernel("second", 100, 110, 2));
  REQUIRE(collector->Stop().ok());
  auto trace = collector->TakeTrace();
  REQUIRE(trace.ok());
  CHECK(trace->events.size() == 2);
}

TEST_CASE("cupti collector reports the records CUPTI dropped when it ran out of buffers", "[cupti]") {
  Fake fake;
  CuptiOptions options = Fake::Options();
  options.buffer_bytes = 64 << 10;
  options.max_buffers = 1;
  auto collector = fake.Create(options);
  REQUIRE(collector->Start().ok());
  const int queued = 1000;  // ~200 KiB of kernel records: more than one 64 KiB buffer holds
  for (int i = 0; i < queued; ++i) fake.Queue(Kernel("k", 100 * i, 100 * i + 50, i + 1));
  REQUIRE(collector->Stop().ok());
  CHECK(fake.BuffersOutstanding() == 0);
  auto trace = collector->TakeTrace();
  REQUIRE(trace.ok());
  const int64_t kept = static_cast<int64_t>(trace->events.size());
  CHECK(kept > 0);
  CHECK(kept < queued);
  const WarningCount* w = FindWarning(*trace, "cupti_dropped_records");
  REQUIRE(w != nullptr);
  INFO(w->example);
  CHECK(w->example.find("dropped " + std::to_string(queued - kept) + " activity records") != std::string::npos);
}

TEST_CASE("cupti collector lets one collector record at a time", "[cupti]") {
  Fake fake;
  auto first = fake.Create();
  auto second = fake.Create();
  REQUIRE(first->Start().ok());
  const absl::Status busy = second->Start();
  CHECK(absl::IsFailedPrecondition(busy));
  CHECK(MessageOf(busy).find("another CuptiCollector is recording") != std::string::npos);
  REQUIRE(first->Stop().ok());
  CHECK(second->Start().ok());
  CHECK(second->Stop().ok());
}

TEST_CASE("cupti collector calls out of order are errors, not crashes", "[cupti]") {
  Fake fake;
  auto collector = fake.Create();
  CHECK(absl::IsFailedPrecondition(collector->Stop()));
  REQUIRE(collector->Start().ok());
  CHECK(absl::IsFailedPrecondition(collector->Start()));
  CHECK(absl::IsFailedPrecondition(collector->TakeTrace().status()));
  REQUIRE(collector->Stop().ok());
  CHECK(absl::IsFailedPrecondition(collector->Stop()));
}

TEST_CASE("cupti collector destroyed while recording stops recording", "[cupti]") {
  Fake fake;
  {
    auto collector = fake.Create();
    REQUIRE(collector->Start().ok());
    fake.Queue(Kernel("k", 0, 10, 1));
  }
  CHECK(fake.EnabledCount() == 0);
  CHECK(fake.BuffersOutstanding() == 0);
  auto next = fake.Create();
  CHECK(next->Start().ok());
  CHECK(next->Stop().ok());
}

TEST_CASE("cupti collector that CUPTI refuses a kind says why and leaves nothing enabled", "[cupti]") {
  Fake fake;
  auto collector = fake.Create();
  fake.RefuseKind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  const absl::Status status = collector->Start();
  REQUIRE_FALSE(status.ok());
  INFO(MessageOf(status));
  CHECK(MessageOf(status).find("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") != std::string::npos);
  CHECK(MessageOf(status).find("another CUPTI client") != std::string::npos);
  CHECK_FALSE(collector->recording());
  CHECK(fake.EnabledCount() == 0);
  // Nothing stays claimed: once CUPTI agrees, recording works.
  fake.RefuseKind(-1);
  CHECK(collector->Start().ok());
  CHECK(collector->Stop().ok());
}

TEST_CASE("cupti collector without driver API recording leaves the driver kind off", "[cupti]") {
  Fake fake;
  CuptiOptions options = Fake::Options();
  options.record_driver_api = false;
  auto collector = fake.Create(options);
  REQUIRE(collector->Start().ok());
  CHECK_FALSE(fake.IsEnabled(CUPTI_ACTIVITY_KIND_DRIVER));
  CHECK(fake.IsEnabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK(collector->Stop().ok());
}

TEST_CASE("cupti collector tags calls with external ids that nest", "[cupti]") {
  Fake fake;
  auto collector = fake.Create();
  REQUIRE(collector->PushExternalId(7).ok());
  REQUIRE(collector->PushExternalId(8).ok());
  CHECK(fake.ExternalIdDepth() == 2);
  CHECK(collector->PopExternalId().ok());
  CHECK(collector->PopExternalId().ok());
  CHECK(fake.ExternalIdDepth() == 0);
  CHECK_FALSE(collector->PopExternalId().ok());
}

TEST_CASE("cupti collector whose driver sees no device fails to create with 'no CUDA driver/device'", "[cupti]") {
  Fake fake;
  SECTION("no device") {
    fake.SetDevices(0);
    auto collector = CuptiCollector::Create(Fake::Options());
    REQUIRE_FALSE(collector.ok());
    CHECK(absl::IsFailedPrecondition(collector.status()));
    CHECK(MessageOf(collector.status()).find("no CUDA driver/device: the CUDA driver sees no device") !=
          std::string::npos);
  }
  SECTION("cuInit fails") {
    fake.SetDevices(1, CUDA_ERROR_NO_DEVICE);
    auto collector = CuptiCollector::Create(Fake::Options());
    REQUIRE_FALSE(collector.ok());
    CHECK(absl::IsFailedPrecondition(collector.status()));
    CHECK(MessageOf(collector.status()) == "no CUDA driver/device: cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
  }
}

TEST_CASE("cupti collector without libcupti fails to create with 'CUPTI not found'", "[cupti]") {
  Fake fake;
  CuptiOptions options = Fake::Options();
  options.cupti_library = "/nonexistent/libcupti.so";
  auto collector = CuptiCollector::Create(options);
  REQUIRE_FALSE(collector.ok());
  CHECK(absl::IsFailedPrecondition(collector.status()));
  CHECK(MessageOf(collector.status()).find("CUPTI not found") != std::string::npos);
  CHECK(MessageOf(collector.status()).find("/nonexistent/libcupti.so") != std::string::npos);
}
