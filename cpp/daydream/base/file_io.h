// Whole-file reads and crash-safe writes.
#ifndef DAYDREAM_BASE_FILE_IO_H_
#define DAYDREAM_BASE_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

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

// A regular file's first `size` bytes mapped read-only (mmap) and brought
// into this process a range at a time. A read() copies every byte from the
// page cache in the kernel, where nothing overlaps the copy; a mapping lets
// the reader copy the bytes itself while it fetches the next ones ahead
// (big_1m.json, one core: about 30 ms of 190 to a Trace). Only
// Populate()d ranges may be read: there the kernel reports a file that
// shrank, or a failed read, as an error. A file truncated by another
// process after its range was populated still raises SIGBUS on access, as
// in every reader that maps files.
class MappedFile {
 public:
  // Maps `fd`'s first `size` bytes (not 0). Errors name `path`. Fails with
  // Unimplemented where the kernel cannot populate a range (before Linux
  // 5.14, or off Linux): reading the file is then the caller's way.
  static absl::StatusOr<MappedFile> Map(int fd, uint64_t size, const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  bool mapped() const { return data_ != nullptr; }
  std::string_view bytes() const { return std::string_view(data_, size_); }

  // Maps the bytes [from, to) in now, reading those not in the page cache
  // from the file. Errors (naming the path and the offset): the file no
  // longer holds them (it shrank since it was opened), or the read failed.
  absl::Status Populate(uint64_t from, uint64_t to);
  // Asks the kernel to start reading [from, to) from the file: a later
  // Populate of it then waits less.
  void Prefetch(uint64_t from, uint64_t to) const;
  // Drops the whole pages inside [from, to) from this process (not from the
  // page cache), so that a file read from start to end stays out of the
  // resident memory once read. Reading them needs a Populate again.
  void Release(uint64_t from, uint64_t to) const;

 private:
  // madvise over [from, to) clipped to the file; `from` on a page. Returns madvise's result.
  int Advise(uint64_t from, uint64_t to, int advice) const;

  const char* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

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
