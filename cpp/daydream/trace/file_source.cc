#include "daydream/trace/file_source.h"

#include <isa-l/igzip_lib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "daydream/base/file_io.h"
#include "daydream/base/huge_pages.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/strings.h"

namespace daydream {
namespace {

constexpr size_t kInputPiece = size_t{1} << 20;  // file bytes read at a time
constexpr size_t kKeep = 16;                      // bytes kept before the unread input
constexpr size_t kDirectRead = size_t{64} << 10;   // plain-file reads this large skip in_buf_
constexpr uint64_t kMapStep = uint64_t{2} << 20;  // a mapped file is populated and dropped this much at a time

bool IsGzipMagic(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

// The gzip trailer holds the uncompressed size modulo 2^32: a good guess, but
// only where deflate could have produced it (at most ~1032x the input); a
// truncated or hostile file can claim anything there.
uint64_t GzipSizeHint(const unsigned char* tail, uint64_t compressed_size) {
  const uint64_t isize = tail[0] | (tail[1] << 8) | (tail[2] << 16) | (uint64_t{tail[3]} << 24);
  return isize <= compressed_size * 1032 ? isize : 0;
}

// Zeroes `padding` bytes past the end (a parser may read them). Callers
// allocate the capacity up front, so this does not copy.
void Pad(std::string& s, size_t padding) {
  const size_t size = s.size();
  s.append(padding, '\0');
  s.resize(size);
}

// Reads all of `stream` into a string with `padding` spare bytes, starting
// from a capacity of `guess`.
absl::StatusOr<std::string> Drain(TraceByteStream& stream, uint64_t guess, size_t padding,
                                  uint64_t max_bytes) {
  std::string out;
  const uint64_t first = std::clamp<uint64_t>(guess, 4096, std::max<uint64_t>(max_bytes, 1)) + 1;
  out.resize(static_cast<size_t>(first) + padding);
  size_t produced = 0;
  while (true) {
    if (produced == out.size() - padding) out.resize(produced * 2 + padding);
    DD_ASSIGN_OR_RETURN(const size_t n, stream.Read(out.data() + produced, out.size() - padding - produced));
    if (n == 0) break;
    produced += n;
  }
  out.resize(produced);
  Pad(out, padding);
  return out;
}

}  // namespace

// Inflated with ISA-L's igzip, member by member (it reads one gzip member
// per reset, header and trailer checked).
struct TraceByteStream::Gzip {
  inflate_state state;
  bool in_member = false;  // inside a member (its end not yet seen)
  absl::Status error;      // met after bytes already handed out
};

namespace {

const char* IsalErrorText(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK: return "invalid deflate block";
    case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "incorrect data check";
    default: return "invalid data";
  }
}

}  // namespace

TraceByteStream::TraceByteStream(std::string source, const FileSourceOptions& options)
    : source_(std::move(source)), options_(options) {}

// A thread that reads pieces ahead of the consumer into a short queue.
// Errors wait in the queue behind the data that preceded them. A piece's
// buffer goes back to a spare list once read, and the next piece reuses it:
// the thread touches a handful of buffers, not fresh pages for the whole
// text (a fresh page costs a fault and zeroing, a third of a fresh process's
// time on a 200 MB trace).
struct TraceByteStream::ReadAhead {
  static constexpr size_t kPiece = size_t{4} << 20;
  static constexpr size_t kMaxQueued = 4;

  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  using Buffer = std::unique_ptr<char, Free>;
  // kPiece bytes on whole huge pages: two faults instead of a thousand.
  // Null when there is no memory for it.
  static Buffer NewBuffer() {
    auto* p = static_cast<char*>(std::aligned_alloc(kHugePageBytes, kPiece));
    if (p != nullptr) AdviseHugePages(p, kPiece);
    return Buffer(p);
  }

  struct Piece {
    Buffer bytes;  // kPiece bytes, the first `size` read
    size_t size = 0;
    size_t used = 0;
    absl::Status status;  // not OK: the error the reader met here
  };

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Piece> queue;
  std::vector<Buffer> spare;  // buffers of pieces already read
  bool stop = false;      // the consumer is gone
  std::thread thread;

  void Produce(TraceByteStream& stream) {
    while (true) {
      Piece piece;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!spare.empty()) {
          piece.bytes = std::move(spare.back());
          spare.pop_back();
        }
      }
      if (piece.bytes == nullptr) piece.bytes = NewBuffer();
      absl::StatusOr<size_t> n =
          piece.bytes != nullptr
              ? stream.ReadDirect(piece.bytes.get(), kPiece)
              : absl::StatusOr<size_t>(absl::ResourceExhaustedError(
                    StrCat(stream.source_, ": no memory for a ", kPiece >> 20, " MiB read-ahead buffer")));
      if (n.ok()) {
        piece.size = *n;
      } else {
        piece.status = n.status();
      }
      const bool last = !n.ok() || *n == 0;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stop || queue.size() < kMaxQueued; });
      if (stop) return;
      queue.push_back(std::move(piece));
      cv.notify_all();
      if (last) return;
    }
  }

  absl::StatusOr<size_t> Consume(char* dst, size_t n) {
    size_t done = 0;
    std::unique_lock<std::mutex> lock(mu);
    while (done < n) {
      cv.wait(lock, [&] { return !queue.empty(); });
      Piece& front = queue.front();
      if (!front.status.ok()) {
        if (done > 0) return done;  // the error comes with the next read
        return front.status;
      }
      if (front.size == 0) return done;  // the end (stays queued)
      const size_t take = std::min(n - done, front.size - front.used);
      std::memcpy(dst + done, front.bytes.get() + front.used, take);
      front.used += take;
      done += take;
      if (front.used == front.size) {
        spare.push_back(std::move(front.bytes));
        queue.pop_front();
        cv.notify_all();
      }
    }
    return done;
  }

  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

TraceByteStream::~TraceByteStream() {
  ahead_.reset();  // joins the thread before the state it reads goes
  if (fd_ >= 0) ::close(fd_);
}

bool TraceByteStream::gzip() const { return gzip_ != nullptr; }

absl::StatusOr<std::unique_ptr<TraceByteStream>> TraceByteStream::Open(const std::string& path,
                                                                       const FileSourceOptions& options) {
  DD_ASSIGN_OR_RETURN(const OpenFile file, OpenRegularFile(path));
  std::unique_ptr<TraceByteStream> s(new TraceByteStream(path, options));
  s->fd_ = file.fd;
  const uint64_t file_size = file.size;
  s->size_hint_ = file_size;
  s->in_buf_.resize(kInputPiece);
  s->in_ = s->in_end_ = s->in_buf_.data();
  DD_RETURN_IF_ERROR(s->StartGzipIfMagic());
  if (s->gzip_ != nullptr) {
    unsigned char tail[4] = {};
    s->size_hint_ = file_size >= 4 && ::pread(s->fd_, tail, 4, static_cast<off_t>(file_size - 4)) == 4
                        ? GzipSizeHint(tail, file_size)
                        : 0;
  }
  if (s->gzip_ == nullptr && file_size > 0 && file_size >= options.map_min_bytes) {
    // Where the file cannot be mapped, it is read.
    absl::StatusOr<MappedFile> map = MappedFile::Map(s->fd_, file_size, path);
    if (map.ok()) {
      s->map_ = *std::move(map);
      s->ReadFromMemory(s->map_.bytes());
      std::string().swap(s->in_buf_);
    }
  }
  if (options.read_ahead && s->gzip_ != nullptr) {
    s->ahead_ = std::make_unique<ReadAhead>();
    TraceByteStream* stream = s.get();
    s->ahead_->thread = std::thread([stream] { stream->ahead_->Produce(*stream); });
  }
  return s;
}

std::unique_ptr<TraceByteStream> TraceByteStream::FromMemory(std::string_view bytes, std::string source,
                                                             bool detect_gzip,
                                                             const FileSourceOptions& options) {
  std::unique_ptr<TraceByteStream> s(new TraceByteStream(std::move(source), options));
  s->ReadFromMemory(bytes);
  s->size_hint_ = bytes.size();
  if (detect_gzip && IsGzipMagic(bytes)) {
    s->gzip_ = std::make_unique<Gzip>();
    s->size_hint_ = bytes.size() >= 4
                        ? GzipSizeHint(reinterpret_cast<const unsigned char*>(bytes.data() + bytes.size() - 4),
                                       bytes.size())
                        : 0;
  }
  return s;
}

void TraceByteStream::ReadFromMemory(std::string_view bytes) {
  memory_ = bytes;
  in_ = bytes.data();
  in_end_ = bytes.data() + bytes.size();
  in_eof_ = true;
}

absl::Status TraceByteStream::StartGzipIfMagic() {
  // Two bytes decide; a file shorter than that is plain.
  while (static_cast<size_t>(in_end_ - in_) < 2) {
    DD_ASSIGN_OR_RETURN(const bool more, RefillInput());
    if (!more) break;
  }
  if (!IsGzipMagic(std::string_view(in_, static_cast<size_t>(in_end_ - in_)))) return absl::OkStatus();
  gzip_ = std::make_unique<Gzip>();
  return absl::OkStatus();
}

absl::StatusOr<bool> TraceByteStream::RefillInput() {
  if (in_eof_) return false;
  // Keep what is unread at the front, after the last kKeep bytes read (the
  // inflater may hand back a few bytes it read ahead past a member's end).
  const size_t keep = std::min(kKeep, static_cast<size_t>(in_ - in_buf_.data()));
  const size_t left = static_cast<size_t>(in_end_ - in_) + keep;
  if (in_ - keep != in_buf_.data()) std::memmove(in_buf_.data(), in_ - keep, left);
  in_consumed_ += static_cast<uint64_t>(in_ - keep - in_buf_.data());
  in_ = in_buf_.data() + keep;
  in_end_ = in_buf_.data() + left;
  DD_ASSIGN_OR_RETURN(const size_t n, ReadSome(fd_, source_, in_buf_.data() + left, in_buf_.size() - left));
  if (n == 0) {
    in_eof_ = true;
    return false;
  }
  in_end_ += n;
  return true;
}

absl::StatusOr<size_t> TraceByteStream::ReadRaw(char* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    if (in_ == in_end_) {
      // Large reads of a plain file go straight to the caller's buffer (the
      // reader asks for what is left of a 1 MiB window: mostly just under a
      // piece, which through in_buf_ cost a second copy of the whole file).
      if (!in_eof_ && memory_.data() == nullptr && n - done >= kDirectRead) {
        DD_ASSIGN_OR_RETURN(const size_t got, ReadSome(fd_, source_, dst + done, n - done));
        if (got == 0) {
          in_eof_ = true;
          break;
        }
        done += got;
        continue;
      }
      DD_ASSIGN_OR_RETURN(const bool more, RefillInput());
      if (!more && in_ == in_end_) break;
    }
    size_t take = std::min(n - done, static_cast<size_t>(in_end_ - in_));
    if (map_.mapped()) {  // a step at a time, so that a long read does not map in the whole file
      take = std::min<size_t>(take, kMapStep);
      const auto at = static_cast<uint64_t>(in_ - memory_.data());
      absl::Status copied = MapThrough(at, at + take);
      if (copied.ok() && !map_.CopyOut(at, dst + done, take)) {
        copied = absl::InvalidArgumentError(
            StrCat(source_, ": read failed: the file was truncated while it was read (at byte ", at, " of the ",
                   memory_.size(), " it held when opened)"));
      }
      if (!copied.ok()) {
        if (done > 0) return done;  // the bytes before the error first; the error with the next read
        return copied;
      }
    } else {
      std::memcpy(dst + done, in_, take);
    }
    in_ += take;
    done += take;
  }
  return done;
}

absl::Status TraceByteStream::MapThrough(uint64_t from, uint64_t to) {
  // A step ahead: the reader fetches the next window's lines into the cache
  // while it parses one (InMemoryAhead), and a page not yet mapped in would
  // drop those fetches.
  // Where a step fails (the file shrank, a read failed), the error waits for
  // a read of its bytes, and a read before them still gets its own: the
  // bytes before the error come first.
  while (map_ready_ < to + kMapStep && map_ready_ < memory_.size()) {
    const uint64_t next = map_ready_ + kMapStep;
    if (!map_.Populate(map_ready_, next).ok()) {
      if (map_ready_ < to) {
        DD_RETURN_IF_ERROR(map_.Populate(map_ready_, to));
        map_ready_ = to;
      }
      break;
    }
    map_.Prefetch(next, next + kMapStep);  // the file read from disk, where it is not cached, meanwhile
    map_ready_ = next;
  }
  // What lies before `from` was copied out and is not read again.
  if (from >= map_dropped_ + kMapStep) {
    const uint64_t drop_to = from / kMapStep * kMapStep;
    map_.Release(map_dropped_, drop_to);
    map_dropped_ = drop_to;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> TraceByteStream::Inflate(char* dst, size_t n) {
  inflate_state& st = gzip_->state;
  const char* const in_start = in_buf_.empty() ? memory_.data() : in_buf_.data();
  auto compressed_at = [&] { return in_consumed_ + static_cast<uint64_t>(in_ - in_start); };
  if (!gzip_->error.ok()) return gzip_->error;
  size_t done = 0;
  // The bytes inflated before an error come first; the error with the next call.
  auto fail = [&](absl::Status status) -> absl::StatusOr<size_t> {
    gzip_->error = std::move(status);
    if (done > 0) return done;
    return gzip_->error;
  };
  while (done < n) {
    if (!gzip_->in_member) {
      // Between members: skip zero padding; more data starts a new member.
      while (true) {
        while (in_ < in_end_ && *in_ == 0) ++in_;
        if (in_ < in_end_) break;
        DD_ASSIGN_OR_RETURN(const bool more, RefillInput());
        if (!more) return done;
      }
      isal_inflate_init(&st);
      st.crc_flag = ISAL_GZIP;
      gzip_->in_member = true;
    }
    if (in_ == in_end_) {
      DD_ASSIGN_OR_RETURN(const bool more, RefillInput());
      if (!more) {
        return fail(absl::InvalidArgumentError(StrCat(source_, ": gzip data is truncated (ended after ",
                                                      compressed_at(), " compressed bytes, ", produced_ + done,
                                                      " bytes decompressed)")));
      }
    }
    const auto in_chunk = static_cast<uint32_t>(std::min<size_t>(static_cast<size_t>(in_end_ - in_), 1u << 30));
    const auto out_chunk = static_cast<uint32_t>(std::min<size_t>(n - done, 1u << 30));
    st.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in_));
    st.avail_in = in_chunk;
    st.next_out = reinterpret_cast<uint8_t*>(dst + done);
    st.avail_out = out_chunk;
    const int rc = isal_inflate(&st);
    in_ += in_chunk - st.avail_in;
    done += out_chunk - st.avail_out;
    if (rc < 0) {
      return fail(absl::InvalidArgumentError(StrCat(source_, ": corrupt gzip data at compressed byte ",
                                                    compressed_at(), ": ", IsalErrorText(rc))));
    }
    if (st.block_state == ISAL_BLOCK_FINISH) {
      // Bytes read ahead into the bit buffer belong to what follows.
      in_ -= std::min<size_t>(static_cast<size_t>(st.read_in_length / 8), static_cast<size_t>(in_ - in_start));
      gzip_->in_member = false;
    }
  }
  return done;
}

absl::StatusOr<size_t> TraceByteStream::Read(char* dst, size_t n) {
  if (ahead_ != nullptr) return ahead_->Consume(dst, n);
  return ReadDirect(dst, n);
}

absl::StatusOr<size_t> TraceByteStream::ReadDirect(char* dst, size_t n) {
  if (gzip_ == nullptr) return ReadRaw(dst, n);
  // The limit guards against gzip bombs. Ask for one byte more than it
  // allows, to tell "exactly at the limit" from "over it".
  const uint64_t room = options_.max_bytes - std::min(produced_, options_.max_bytes) + 1;
  DD_ASSIGN_OR_RETURN(const size_t got, Inflate(dst, static_cast<size_t>(std::min<uint64_t>(n, room))));
  produced_ += got;
  if (produced_ > options_.max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(source_, ": decompressed data exceeds the limit of ", options_.max_bytes, " bytes"));
  }
  return got;
}

absl::StatusOr<std::string> GunzipBuffer(const std::string& compressed, const std::string& source,
                                         size_t padding, const FileSourceOptions& options) {
  auto stream = TraceByteStream::FromMemory(compressed, source, /*detect_gzip=*/true, options);
  if (!stream->gzip()) {
    return absl::InvalidArgumentError(
        StrCat(source, ": corrupt gzip data at compressed byte 0: incorrect header check"));
  }
  return Drain(*stream, std::max<uint64_t>(stream->size_hint(), compressed.size() * 4), padding,
               options.max_bytes);
}

absl::StatusOr<std::string> ReadTraceBytes(const std::string& path, size_t padding,
                                           const FileSourceOptions& options) {
  DD_ASSIGN_OR_RETURN(auto stream, TraceByteStream::Open(path, options));
  const uint64_t guess = stream->gzip() ? std::max<uint64_t>(stream->size_hint(), 4096)
                                        : stream->size_hint();
  return Drain(*stream, guess, padding, options.max_bytes);
}

}  // namespace daydream
