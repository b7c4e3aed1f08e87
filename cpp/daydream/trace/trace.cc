#include "daydream/trace/trace.h"

#include <utility>

namespace daydream {

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kGpuUserAnnotation: return "gpu_user_annotation";
    case EventKind::kRuntime: return "cuda_runtime";
    case EventKind::kDriver: return "cuda_driver";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "gpu_memcpy";
    case EventKind::kMemset: return "gpu_memset";
    case EventKind::kCudaSync: return "cuda_sync";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kInstant: return "instant";
    case EventKind::kOverhead: return "overhead";
    case EventKind::kOther: return "other";
    case EventKind::kUnspecified: break;
  }
  return "unspecified";
}

EventKind EventKindFromCategory(std::string_view c) {
  if (c == "cpu_op" || c == "Operator") return EventKind::kCpuOp;
  if (c == "user_annotation") return EventKind::kUserAnnotation;
  if (c == "gpu_user_annotation") return EventKind::kGpuUserAnnotation;
  if (c == "cuda_runtime" || c == "Runtime") return EventKind::kRuntime;
  if (c == "cuda_driver") return EventKind::kDriver;
  if (c == "kernel" || c == "Kernel") return EventKind::kKernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return EventKind::kMemcpy;
  if (c == "gpu_memset" || c == "Memset") return EventKind::kMemset;
  if (c == "cuda_sync") return EventKind::kCudaSync;
  if (c == "python_function") return EventKind::kPythonFunction;
  if (c == "cpu_instant_event") return EventKind::kInstant;
  if (c == "overhead") return EventKind::kOverhead;
  return EventKind::kOther;
}

bool IsGpuKind(EventKind kind) {
  return kind == EventKind::kKernel || kind == EventKind::kMemcpy ||
         kind == EventKind::kMemset || kind == EventKind::kGpuUserAnnotation ||
         kind == EventKind::kCudaSync;
}

void Warnings::Add(std::string_view kind, std::string example) {
  for (WarningCount& w : items_) {
    if (w.kind == kind) {
      ++w.count;
      return;
    }
  }
  items_.push_back(WarningCount{std::string(kind), 1, std::move(example)});
}

}  // namespace daydream
