// Reading a trace file's bytes: plain or gzip (detected by magic bytes, not by
// the file name), as a stream of pieces (TraceByteStream: the reader parses a
// window at a time and never holds the whole text) or whole, into a buffer
// padded for simdjson.
#ifndef DAYDREAM_TRACE_FILE_SOURCE_H_
#define DAYDREAM_TRACE_FILE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daydream/base/file_io.h"

namespace daydream {

struct FileSourceOptions {
  // Refuse to decompress past this many bytes (a guard against gzip bombs).
  uint64_t max_bytes = uint64_t{64} << 30;
  // Read and decompress on a second thread, a few MiB ahead of the reader
  // (TraceByteStream::Open of a gzip file only), so that inflating overlaps
  // parsing. A plain file is mapped (map_min_bytes) or read on the
  // caller's thread, large reads straight into its buffer: the kernel reads
  // ahead of it, and a second copy through a thread cost more than it
  // overlapped (big_1m.json: 203 -> 182 ms to a Trace).
  bool read_ahead = false;
  // A plain file at least this long is mapped (MappedFile) rather than
  // read(): the reader then copies its bytes into each window itself,
  // fetching the next window's while it parses one (ParseTraceJson's way),
  // where read() made the kernel copy them with nothing overlapping.
  // big_1m.json on one core: 144 -> 120 ms to a Trace
  // (BM_ReadTraceFileOneCore, docs/performance.md). The mapping is brought
  // in 2-4 MiB ahead of the reader and dropped behind it, so resident
  // memory holds a few MiB of the text, as a read did. A file truncated by
  // another process while it is read is an error, not a SIGBUS
  // (MappedFile::CopyOut); a file that grows is read to the size it had
  // when opened. Files shorter than this, gzip files, files the kernel
  // will not map, and kernels that cannot populate a mapped range are read.
  uint64_t map_min_bytes = uint64_t{1} << 20;
};

// The bytes of a trace, decompressed as they are read when they are gzip (one
// or more concatenated members; zero padding between members is skipped).
// Errors name the source: a corrupt or truncated gzip stream, a read error,
// more than max_bytes of output.
class TraceByteStream {
 public:
  // Opens the file at `path`.
  static absl::StatusOr<std::unique_ptr<TraceByteStream>> Open(const std::string& path,
                                                               const FileSourceOptions& options = {});
  // Bytes already in memory, not copied (`bytes` must outlive the stream).
  // With `detect_gzip`, bytes starting with gzip's magic are decompressed.
  static std::unique_ptr<TraceByteStream> FromMemory(std::string_view bytes, std::string source,
                                                     bool detect_gzip,
                                                     const FileSourceOptions& options = {});
  ~TraceByteStream();
  TraceByteStream(const TraceByteStream&) = delete;
  TraceByteStream& operator=(const TraceByteStream&) = delete;

  // Reads up to `n` bytes into `dst`; fewer only at the end (0: no more).
  absl::StatusOr<size_t> Read(char* dst, size_t n);

  // The size of the (decompressed) data when known up front: exact for a
  // plain file, the gzip trailer's claim where deflate could have produced it
  // (a hint only), else 0.
  uint64_t size_hint() const { return size_hint_; }
  bool gzip() const;

  // The bytes the next Read would copy, where they already lie in memory
  // (plain bytes given to FromMemory, or a mapped file: see
  // FileSourceOptions::map_min_bytes): empty otherwise.
  std::string_view InMemoryAhead() const {
    if (memory_.data() == nullptr || gzip_ != nullptr) return {};
    return std::string_view(in_, static_cast<size_t>(in_end_ - in_));
  }

 private:
  struct Gzip;
  TraceByteStream(std::string source, const FileSourceOptions& options);
  // Fills the compressed-input window from the file; false at its end.
  absl::StatusOr<bool> RefillInput();
  absl::StatusOr<size_t> ReadRaw(char* dst, size_t n);
  absl::StatusOr<size_t> Inflate(char* dst, size_t n);
  absl::Status StartGzipIfMagic();
  // Reads `bytes` (FromMemory's, or a mapped file's) rather than the file.
  void ReadFromMemory(std::string_view bytes);
  absl::StatusOr<size_t> ReadDirect(char* dst, size_t n);
  // Brings a mapped file's bytes up to input offset `to` (and a step ahead
  // of it) into memory, and drops the whole steps before `from`.
  absl::Status MapThrough(uint64_t from, uint64_t to);
  struct ReadAhead;

  std::string source_;
  FileSourceOptions options_;
  int fd_ = -1;
  std::string_view memory_;        // the input when FromMemory, or the mapped file
  MappedFile map_;                 // a plain file of at least map_min_bytes
  uint64_t map_ready_ = 0;         // map_'s bytes [map_dropped_, map_ready_) are populated
  uint64_t map_dropped_ = 0;
  std::string in_buf_;             // file input, a piece at a time
  const char* in_ = nullptr;       // unread input bytes [in_, in_end_)
  const char* in_end_ = nullptr;
  bool in_eof_ = false;            // no more input after [in_, in_end_)
  uint64_t in_consumed_ = 0;       // gzip input bytes before in_ (for error offsets)
  uint64_t produced_ = 0;          // bytes inflated
  uint64_t size_hint_ = 0;
  std::unique_ptr<Gzip> gzip_;
  std::unique_ptr<ReadAhead> ahead_;  // a gzip file with options.read_ahead
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
