// Whole-file reads and crash-safe writes.
#ifndef DAYDREAM_BASE_FILE_IO_H_
#define DAYDREAM_BASE_FILE_IO_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace daydream {

// Reads the whole file at `path`. The string gets `spare_capacity` bytes of
// capacity past its size, so a caller can pad it without copying. Errors name
// the path and the OS reason.
absl::StatusOr<std::string> ReadFile(const std::string& path, size_t spare_capacity = 0);

// Writes `data` to `path` so that readers see either the old file or the
// complete new one: the bytes go to a temporary file in the same directory,
// are flushed, and the temporary is renamed over `path`. On any error the
// temporary is removed and `path` is left untouched.
absl::Status WriteFileAtomically(const std::string& path, std::string_view data);

}  // namespace daydream

#endif  // DAYDREAM_BASE_FILE_IO_H_
