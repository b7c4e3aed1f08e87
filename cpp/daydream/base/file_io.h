// Whole-file reads and crash-safe writes.
#ifndef DAYDREAM_BASE_FILE_IO_H_
#define DAYDREAM_BASE_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace daydream {

// A file opened for reading: its descriptor (the caller closes it) and size.
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
};

// Opens `path`, which must be a regular file. Errors name the path and the OS
// reason (NotFound when it does not exist).
absl::StatusOr<OpenFile> OpenRegularFile(const std::string& path);

// read(2) of up to `n` bytes, retried on EINTR; 0 at the end of the file.
// Errors name `path`.
absl::StatusOr<size_t> ReadSome(int fd, const std::string& path, char* dst, size_t n);

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
