// A stand-in for libcuda and libcupti that the collector's tests load in
// their place (CuptiOptions::driver_library and cupti_library): it exports
// the driver and CUPTI functions the collector resolves, and the tests script
// it through the FakeCuda*/FakeCupti* functions, so that Create, Start, Stop
// and TakeTrace run end to end on a machine without a GPU.
//
// Records queued with FakeCuptiQueueRecord are delivered at the next
// cuptiActivityFlushAll, packed into buffers obtained from the collector's
// buffer-request callback: each record is preceded by its size (8 bytes) and
// padded to 8 bytes. Like CUPTI, the fake asks for the next buffer before it
// hands back the full one, and counts the records it cannot place as dropped.
// Single-threaded, like the tests that drive it.
#include <cuda.h>
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

struct FakeState {
  int device_count = 1;
  CUresult init_result = CUDA_SUCCESS;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::vector<CUpti_ActivityKind> enabled;
  int refused_kind = -1;
  std::vector<std::vector<uint8_t>> queued;
  size_t dropped = 0;
  int64_t buffers_outstanding = 0;
  int64_t misaligned_buffers = 0;
  int thread_id_type = -1;
  std::vector<uint64_t> external_ids;
};

FakeState& State() {
  static FakeState state;
  return state;
}

constexpr size_t kHeader = 8;

size_t Padded(size_t n) { return (n + 7) / 8 * 8; }

}  // namespace

extern "C" {

// --- controls --------------------------------------------------------------------

// Forgets everything but the registered buffer callbacks.
void FakeCuptiReset() {
  FakeState& s = State();
  auto request = s.request;
  auto complete = s.complete;
  s = FakeState();
  s.request = request;
  s.complete = complete;
}

void FakeCudaSetDevices(int count, int init_result) {
  State().device_count = count;
  State().init_result = static_cast<CUresult>(init_result);
}

void FakeCuptiQueueRecord(const void* record, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(record);
  State().queued.emplace_back(bytes, bytes + size);
}

void FakeCuptiRefuseKind(int kind) { State().refused_kind = kind; }

int FakeCuptiEnabledCount() { return static_cast<int>(State().enabled.size()); }

int FakeCuptiIsEnabled(int kind) {
  const auto& enabled = State().enabled;
  return std::find(enabled.begin(), enabled.end(), static_cast<CUpti_ActivityKind>(kind)) != enabled.end();
}

int64_t FakeCuptiBuffersOutstanding() { return State().buffers_outstanding; }
int64_t FakeCuptiMisalignedBuffers() { return State().misaligned_buffers; }
int FakeCuptiThreadIdType() { return State().thread_id_type; }
int FakeCuptiExternalIdDepth() { return static_cast<int>(State().external_ids.size()); }

// --- the driver ------------------------------------------------------------------

CUresult CUDAAPI cuInit(unsigned int) { return State().init_result; }

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = State().device_count;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** name) {
  *name = error == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice device) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU %d", device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

// --- CUPTI -----------------------------------------------------------------------

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                                                                    : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  *name = nullptr;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) {
    *name = "cudaStreamSynchronize_v3020";
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) {
    *name = "cuLaunchKernel";
  }
  return *name != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  State().request = request;
  State().complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (static_cast<int>(kind) == State().refused_kind) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (!FakeCuptiIsEnabled(kind)) State().enabled.push_back(kind);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  auto& enabled = State().enabled;
  enabled.erase(std::remove(enabled.begin(), enabled.end(), kind), enabled.end());
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  FakeState& s = State();
  if (s.request == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  std::vector<std::vector<uint8_t>> records = std::move(s.queued);
  s.queued.clear();
  size_t next = 0;
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t used = 0;
  auto request = [&]() {
    size_t max_records = 0;
    uint8_t* fresh = nullptr;
    size_t fresh_size = 0;
    s.request(&fresh, &fresh_size, &max_records);
    if (fresh == nullptr) return false;
    ++s.buffers_outstanding;
    if (reinterpret_cast<uintptr_t>(fresh) % 8 != 0) ++s.misaligned_buffers;
    buffer = fresh;
    size = fresh_size;
    used = 0;
    return true;
  };
  auto complete = [&]() {
    uint8_t* full = buffer;
    const size_t full_size = size;
    const size_t valid = used;
    buffer = nullptr;
    --s.buffers_outstanding;
    s.complete(nullptr, 0, full, full_size, valid);
  };
  if (!records.empty() && !request()) {
    s.dropped += records.size();
    return CUPTI_SUCCESS;
  }
  while (next < records.size()) {
    const std::vector<uint8_t>& record = records[next];
    const size_t need = kHeader + Padded(record.size());
    if (used + need > size) {
      // Like CUPTI: a new buffer first, then the full one goes back.
      uint8_t* full = buffer;
      const size_t full_size = size;
      const size_t valid = used;
      const bool more = request();
      --s.buffers_outstanding;
      s.complete(nullptr, 0, full, full_size, valid);
      if (!more) {
        s.dropped += records.size() - next;
        return CUPTI_SUCCESS;
      }
      if (need > size) {
        s.dropped += records.size() - next;
        break;
      }
    }
    const uint64_t bytes = record.size();
    std::memcpy(buffer + used, &bytes, sizeof(bytes));
    std::memcpy(buffer + used + kHeader, record.data(), record.size());
    used += need;
    ++next;
  }
  if (buffer != nullptr) complete();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t bytes = 0;
    std::memcpy(&bytes, current - kHeader, sizeof(bytes));
    offset = static_cast<size_t>(current - buffer) + Padded(bytes);
  }
  if (offset + kHeader > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset + kHeader);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = State().dropped;
  State().dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t id) {
  State().external_ids.push_back(id);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t* last) {
  auto& ids = State().external_ids;
  if (ids.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  *last = ids.back();
  ids.pop_back();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  State().thread_id_type = static_cast<int>(type);
  return CUPTI_SUCCESS;
}

}  // extern "C"
