#include "daydream/trace/file_source.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/base/file_io.h"
#include "daydream/base/status_macros.h"

namespace daydream {
namespace {

bool IsGzip(const std::string& data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

// Zeroes `padding` bytes past the end (a parser may read them). Callers
// allocate the capacity up front, so this does not copy.
void Pad(std::string& s, size_t padding) {
  const size_t size = s.size();
  s.append(padding, '\0');
  s.resize(size);
}

}  // namespace

absl::StatusOr<std::string> GunzipBuffer(const std::string& compressed, const std::string& source,
                                         size_t padding, const FileSourceOptions& options) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError(StrCat(source, ": zlib initialisation failed"));
  }
  // The gzip trailer holds the uncompressed size modulo 2^32: a good first
  // guess, but only where deflate could have produced it (at most ~1032x the
  // input); a truncated or hostile file can claim anything there.
  uint64_t guess = compressed.size() * 4;
  if (compressed.size() >= 4) {
    const auto* tail = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const uint64_t isize = tail[0] | (tail[1] << 8) | (tail[2] << 16) | (uint64_t{tail[3]} << 24);
    if (isize <= uint64_t{compressed.size()} * 1032) guess = std::max<uint64_t>(guess, isize);
  }
  guess = std::clamp<uint64_t>(guess, 4096, std::max<uint64_t>(options.max_bytes, 1));
  // `out` always holds `padding` bytes more than inflate may fill.
  std::string out;
  out.resize(static_cast<size_t>(guess) + 1 + padding);
  size_t produced = 0;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  bool finished_member = false;
  while (true) {
    if (produced == out.size() - padding) {
      if (produced >= options.max_bytes) {
        inflateEnd(&zs);
        return absl::ResourceExhaustedError(StrCat(
            source, ": decompressed data exceeds the limit of ", options.max_bytes, " bytes"));
      }
      out.resize(std::min<uint64_t>(produced * 2, options.max_bytes) + padding);
    }
    const uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    const uInt out_chunk = static_cast<uInt>(std::min<size_t>(out.size() - padding - produced, 1u << 30));
    zs.avail_in = in_chunk;
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = out_chunk;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    produced += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) {
      finished_member = true;
      // Skip trailing zero padding; start the next member if there is one.
      while (in_left > 0 && *zs.next_in == 0) {
        ++zs.next_in;
        --in_left;
      }
      if (in_left == 0) break;
      if (inflateReset(&zs) != Z_OK) break;
      finished_member = false;
      continue;
    }
    const bool progressed = zs.avail_in != in_chunk || zs.avail_out != out_chunk;
    if (rc == Z_OK && progressed) continue;
    if (rc == Z_OK || rc == Z_BUF_ERROR) {
      if (produced == out.size() - padding) continue;  // output full: grow and go on
      if (in_left == 0) break;               // input ended mid-stream
      if (progressed) continue;
    }
    const size_t at = compressed.size() - in_left;
    const std::string why = zs.msg != nullptr ? zs.msg : "invalid data";
    inflateEnd(&zs);
    return absl::InvalidArgumentError(
        StrCat(source, ": corrupt gzip data at compressed byte ", at, ": ", why));
  }
  inflateEnd(&zs);
  if (!finished_member) {
    return absl::InvalidArgumentError(StrCat(
        source, ": gzip data is truncated (ended after ", compressed.size(),
        " compressed bytes, ", produced, " bytes decompressed)"));
  }
  out.resize(produced);
  Pad(out, padding);
  return out;
}

absl::StatusOr<std::string> ReadTraceBytes(const std::string& path, size_t padding,
                                           const FileSourceOptions& options) {
  DD_ASSIGN_OR_RETURN(std::string data, ReadFile(path, padding));
  if (IsGzip(data)) return GunzipBuffer(data, path, padding, options);
  Pad(data, padding);
  return data;
}

}  // namespace daydream
