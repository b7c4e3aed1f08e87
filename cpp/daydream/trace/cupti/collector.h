// The in-process CUPTI collector: records this process's GPU work with
// CUPTI's Activity API (kernels, copies, memsets, runtime and driver calls,
// synchronization, external correlation) and hands it over as a Trace made
// of the same records the Kineto reader makes of a torch.profiler file. For
// programs that are not PyTorch, and for lower overhead than torch.profiler.
//
// Built only where CUDA's CUPTI headers are found (DAYDREAM_WITH_CUPTI). No
// CUDA or CUPTI type appears here, and neither libcuda nor libcupti is linked:
// Create() loads both at run time, so a program using this library starts on
// any machine and, without a GPU, gets an error instead of a crash.
//
//   DD_ASSIGN_OR_RETURN(auto collector, CuptiCollector::Create());
//   DD_RETURN_IF_ERROR(collector->Start());
//   RunOneIteration();          // then synchronize the device
//   DD_RETURN_IF_ERROR(collector->Stop());
//   DD_ASSIGN_OR_RETURN(Trace trace, collector->TakeTrace());
#ifndef DAYDREAM_TRACE_CUPTI_COLLECTOR_H_
#define DAYDREAM_TRACE_CUPTI_COLLECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daydream/trace/trace.h"

namespace daydream {

struct CuptiOptions {
  // Size of each activity buffer handed to CUPTI, in bytes (at least 64 KiB;
  // rounded up to a multiple of 8, the record alignment CUPTI requires).
  size_t buffer_bytes = size_t{8} << 20;
  // Most buffers allocated at once (CUPTI fills one while earlier ones are
  // decoded). When CUPTI asks for more, it gets none and drops records; the
  // Trace then carries warning "cupti_dropped_records" with the count. Memory
  // held is at most buffer_bytes * max_buffers.
  int32_t max_buffers = 32;
  // Also record driver API calls (cu*). The runtime makes driver calls inside
  // its own, so this roughly doubles the CPU-side records; launches are
  // linked either way.
  bool record_driver_api = true;
  // Where to load the libraries from, for installs the standard search (see
  // CuptiCollector::Create) misses. Empty: the standard search. A path set
  // here is the only one tried.
  std::string driver_library;
  std::string cupti_library;
};

// True when this build has the CUPTI collector (DAYDREAM_WITH_CUPTI); whether
// it can record here is only known from Create(). Bindings built without it
// report false themselves.
bool CuptiAvailable();

// Records CUDA activity of the whole process between Start() and Stop().
//
// CUPTI delivers records through process-wide callbacks, so at most one
// collector records at a time (Start() fails while another one records), and
// none should record while another CUPTI client (torch.profiler, Nsight
// Systems) does. Methods are not thread-safe with respect to each other;
// CUDA calls on other threads during recording are fine.
class CuptiCollector {
 public:
  // Loads the CUDA driver (libcuda.so.1, or options.driver_library) and
  // checks that it sees a device, then loads libcupti (options.cupti_library,
  // else the first of libcupti.so, .so.13, .so.12 on the loader's path, then
  // libcupti.so in $CUDA_HOME/lib64, $CUDA_HOME/extras/CUPTI/lib64,
  // /usr/local/cuda/lib64, /usr/local/cuda/lib and
  // /usr/local/cuda/extras/CUPTI/lib64) and resolves the functions the
  // collector calls.
  // Errors: FailedPrecondition "no CUDA driver/device: <why>" without a usable
  // driver or device; FailedPrecondition "CUPTI not found: <what was tried>";
  // FailedPrecondition naming the missing function for a libcupti too old;
  // InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<CuptiCollector>> Create(const CuptiOptions& options = {});

  // Stops recording if it still is.
  ~CuptiCollector();
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Enables the activity kinds and starts recording. FailedPrecondition when
  // this or another collector is recording; the CUPTI error (e.g. another
  // profiler holds CUPTI) when a kind cannot be enabled, with nothing left
  // enabled.
  absl::Status Start();

  // Disables the activity kinds and flushes every buffer CUPTI holds. Work
  // still running on the GPU is recorded incompletely: synchronize the
  // device first. FailedPrecondition when not recording; otherwise the first
  // CUPTI error met (recording stops regardless).
  absl::Status Stop();

  // The Trace of everything recorded since Create() or the last TakeTrace()
  // (several Start()/Stop() windows accumulate), with the devices the driver
  // reported. Starts over empty. FailedPrecondition while recording or when
  // nothing was recorded; the first error met while reading CUPTI's buffers.
  absl::StatusOr<Trace> TakeTrace();

  bool recording() const;

  // Tags the CUDA calls the calling thread makes from now on, and the GPU
  // work they launch, with `external_id` (the trace's "External id", as
  // torch.profiler tags calls with the id of the operator that made them),
  // until the matching PopExternalId() on the same thread. Ids nest.
  absl::Status PushExternalId(uint64_t external_id);
  absl::Status PopExternalId();

  // The libcupti file loaded, and the CUPTI API version it reports.
  const std::string& cupti_path() const;
  uint32_t cupti_version() const;

  // Opaque; declared here only so that collector.cc's CUPTI callbacks can
  // name it.
  class Impl;

 private:
  explicit CuptiCollector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace daydream

#endif  // DAYDREAM_TRACE_CUPTI_COLLECTOR_H_
