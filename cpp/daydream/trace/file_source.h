// Reading a trace file's bytes: plain or gzip (detected by magic bytes, not by
// the file name), into a buffer padded for simdjson.
#ifndef DAYDREAM_TRACE_FILE_SOURCE_H_
#define DAYDREAM_TRACE_FILE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace daydream {

struct FileSourceOptions {
  // Refuse to decompress past this many bytes (a guard against gzip bombs).
  uint64_t max_bytes = uint64_t{64} << 30;
};

// The bytes of the file, decompressed when gzip. The returned string has at
// least `padding` bytes of spare capacity past its size (zeroed), so that a
// parser may read past the end.
absl::StatusOr<std::string> ReadTraceBytes(const std::string& path, size_t padding,
                                           const FileSourceOptions& options = {});

// Decompresses a gzip buffer (one or more concatenated members). `source`
// names the input in error messages.
absl::StatusOr<std::string> GunzipBuffer(const std::string& compressed, const std::string& source,
                                         size_t padding, const FileSourceOptions& options = {});

}  // namespace daydream

#endif  // DAYDREAM_TRACE_FILE_SOURCE_H_
