// Decoding of CUPTI activity records into a Trace: the part of the CUPTI
// collector that needs no GPU, exposed so that tests (and any other source of
// CUPTI records) can drive it with records they build themselves.
//
// Each record becomes the TraceEvent the Kineto reader makes of the event
// torch.profiler would write for it: same kind, name, track, times and args.
// Records may arrive in any order (CUPTI hands buffers over as they fill);
// links between records (external ids, the event a stream waited on, the
// device of a context) are resolved when the Trace is built.
//
// No CUPTI type appears here; the definitions live in collector.cc, the one
// file that includes <cupti.h>.
#ifndef DAYDREAM_TRACE_CUPTI_DECODE_H_
#define DAYDREAM_TRACE_CUPTI_DECODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daydream/trace/trace.h"

namespace daydream {

// Which CUDA API a callback id belongs to.
enum class CuptiApiDomain : uint8_t { kRuntime, kDriver };

// Names that activity records carry only as numbers. The collector answers
// from libcupti and /proc; tests answer from a table.
class CuptiNameLookup {
 public:
  virtual ~CuptiNameLookup() = default;

  // The name CUPTI gives callback `cbid` of `domain`, as cuptiGetCallbackName
  // spells it ("cudaLaunchKernel_v7000", "cuMemcpyHtoD_v2"); empty when
  // unknown.
  virtual std::string ApiName(CuptiApiDomain domain, uint32_t cbid) const = 0;

  // Name of the recorded process ("python3.10"); empty when unknown.
  virtual std::string ProcessName() const = 0;

  // Name of the recorded process's thread `tid` (an OS thread id); empty
  // when unknown.
  virtual std::string ThreadName(int64_t tid) const = 0;
};

// API name as traces spell it: the CUPTI callback name without its version
// suffix ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel",
// "cudaGraphLaunch_ptsz_v10000" -> "cudaGraphLaunch_ptsz", "cuMemcpyHtoD_v2"
// -> "cuMemcpyHtoD"). Other names are returned unchanged.
std::string_view ApiNameFromCallbackName(std::string_view callback_name);

// Accumulates decoded activity records and builds the Trace.
//
// Not thread-safe: the collector serializes calls. `lookup` must outlive the
// builder.
class CuptiTraceBuilder {
 public:
  explicit CuptiTraceBuilder(const CuptiNameLookup& lookup);
  ~CuptiTraceBuilder();
  CuptiTraceBuilder(const CuptiTraceBuilder&) = delete;
  CuptiTraceBuilder& operator=(const CuptiTraceBuilder&) = delete;

  // Decodes one activity record: a pointer to a CUPTI activity record (its
  // first field is the CUpti_ActivityKind), as cuptiActivityGetNextRecord
  // returns it. The record is read, not kept: strings are copied.
  //
  // Kinds decoded into events: CONCURRENT_KERNEL (and KERNEL), MEMCPY,
  // MEMCPY2, MEMSET, RUNTIME, DRIVER, SYNCHRONIZATION. Kinds read for links
  // only: EXTERNAL_CORRELATION, CUDA_EVENT, CONTEXT. Any other kind is
  // skipped and counted as warning "cupti_unsupported_activity_kind".
  // Records without timestamps, or with times beyond kMaxTimeNs, are skipped
  // and counted; a record that ends before it starts is kept with duration 0
  // and counted. Errors (InvalidArgument) only for a null record.
  absl::Status AddRecord(const void* record);

  // Adds `count` records that CUPTI reported dropped (it had no buffer
  // space); reported as warning "cupti_dropped_records".
  void AddDroppedRecords(uint64_t count);

  // Records decoded into events so far.
  int64_t num_events() const;

  // Builds the Trace of everything added since construction or the last
  // Finish(), then starts over empty. Events are ordered by start time (ties
  // keep arrival order); tracks get Kineto's metadata: CPU threads are
  // (process id, thread id) with label "CPU" and name "thread N (comm)", GPU
  // tracks are (device, stream) with label "GPU N" and name "stream N ".
  // FailedPrecondition when no record became an event.
  absl::StatusOr<Trace> Finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace daydream

#endif  // DAYDREAM_TRACE_CUPTI_DECODE_H_
