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
// (big_1m.json, one core: about 24 ms of 144 to a Trace). A load from the
// mapping raises SIGBUS once another process has truncated the file below
// it: CopyOut catches that, and Populate reports it as an error. The
// catching is a SIGBUS handler installed by the first mapping and put back
// by the last (unless something else took SIGBUS meanwhile). It hands
// every other SIGBUS to the action it replaced: the handler, or the
// default, or nothing for an ignored signal that another process sent.
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

  // Copies the bytes [from, from + n) to `dst`, mapping in what is not. False
  // where the file no longer holds them: another process truncated it since
  // (the SIGBUS that a plain load would raise is caught, for this copy only).
  bool CopyOut(uint64_t from, char* dst, size_t n) const;

  // Maps the bytes [from, to) in now, reading those not in the page cache
  // from the file. Errors (naming the path and the offsets): the file no
  // longer holds them (it shrank since it was opened), or reading them
  // failed (the kernel does not tell the two apart).
  absl::Status Populate(uint64_t from, uint64_t to);
  // Asks the kernel to start reading [from, to) from the file: a later
  // Populate of it then waits less.
  void Prefetch(uint64_t from, uint64_t to) const;
  // Drops the whole pages inside [from, to) from this process (not from the
  // page cache), so that a file read from start to end stays out of the
  // resident memory once read. A later load maps them in again.
  void Release(uint64_t from, uint64_t to) const;

 private:
  // madvise over [from, to) clipped to the file; `from` on a page. Returns madvise's result.
  int Advise(uint64_t from, uint64_t to, int advice) const;
  void Unmap();

  const char* data_ = nullptr;
  bool holds_handler_ = false;  // counted among the mappings SIGBUS's handler is installed for
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
