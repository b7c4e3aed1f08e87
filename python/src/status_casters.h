// The one place where absl::Status becomes a Python exception
// (daydream.DaydreamError, a RuntimeError subclass).
#ifndef DAYDREAM_PYTHON_SRC_STATUS_CASTERS_H_
#define DAYDREAM_PYTHON_SRC_STATUS_CASTERS_H_

#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace daydream::python {

// Thrown by the helpers below; registered as daydream.DaydreamError.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const absl::Status& status) : std::runtime_error(std::string(status.message())) {}
};

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError(value.status());
  return std::move(value).value();
}

}  // namespace daydream::python

#endif  // DAYDREAM_PYTHON_SRC_STATUS_CASTERS_H_
