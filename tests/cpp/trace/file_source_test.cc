// Tests for daydream/trace/file_source.h: plain and gzip bytes, detected by
// magic bytes; multi-member gzip; corrupt, truncated and oversized input.
#include "daydream/trace/file_source.h"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "daydream/trace/kineto_reader.h"
#include "test_support.h"

using namespace daydream;
using daydream::testing::KinetoDoc;
using daydream::testing::ResidentKiB;
using daydream::testing::TempDir;
using daydream::testing::WriteFile;

namespace {

// One gzip member holding `data`.
std::string Gzip(const std::string& data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  REQUIRE(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Text that compresses but not to nothing.
std::string SomeText(size_t bytes) {
  std::string s;
  uint32_t x = 12345;
  while (s.size() < bytes) {
    x = x * 1103515245u + 12345u;
    s += "event " + std::to_string(x % 1000) + ", ";
  }
  s.resize(bytes);
  return s;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// Options for tests of broken data: a bound well above the data's real size,
// so that a bogus size hint in the trailer cannot make the test allocate
// gigabytes (see the proportional-memory test below).
FileSourceOptions Bounded() {
  FileSourceOptions options;
  options.max_bytes = 1 << 20;
  return options;
}

// Peak resident memory of this process, in KiB.
long PeakRssKiB() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

TEST_CASE("ReadTraceBytes returns plain files unchanged with padding capacity", "[file_source]") {
  const std::string path = TempDir() + "/plain.json";
  const std::string text = KinetoDoc("");
  WriteFile(path, text);
  auto bytes = ReadTraceBytes(path, 64);
  REQUIRE(bytes.ok());
  CHECK(*bytes == text);
  CHECK(bytes->capacity() >= text.size() + 64);
}

TEST_CASE("ReadTraceBytes detects gzip by magic bytes, not by the name", "[file_source]") {
  const std::string dir = TempDir();
  const std::string text = SomeText(5000);
  SECTION("a .json name holding gzip data is decompressed") {
    WriteFile(dir + "/trace.json", Gzip(text));
    auto bytes = ReadTraceBytes(dir + "/trace.json", 32);
    REQUIRE(bytes.ok());
    CHECK(*bytes == text);
    CHECK(bytes->capacity() >= text.size() + 32);
  }
  SECTION("a .gz name holding plain text is read as is") {
    WriteFile(dir + "/trace.json.gz", text);
    auto bytes = ReadTraceBytes(dir + "/trace.json.gz", 32);
    REQUIRE(bytes.ok());
    CHECK(*bytes == text);
  }
}

TEST_CASE("ReadTraceFile parses a trace whose name and compression disagree", "[file_source]") {
  const std::string dir = TempDir();
  const std::string doc =
      KinetoDoc(R"j({"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1})j");
  WriteFile(dir + "/gzip_inside.json", doc, /*gzip=*/true);
  WriteFile(dir + "/plain_inside.json.gz", doc);
  for (const char* name : {"/gzip_inside.json", "/plain_inside.json.gz"}) {
    auto trace = ReadTraceFile(dir + name);
    INFO(name);
    REQUIRE(trace.ok());
    CHECK(trace->events.size() == 1);
  }
}

TEST_CASE("GunzipBuffer decompresses concatenated gzip members", "[file_source]") {
  const std::string a = SomeText(3000), b = SomeText(7000) + "tail";
  auto out = GunzipBuffer(Gzip(a) + Gzip(b), "two.gz", 16);
  REQUIRE(out.ok());
  CHECK(*out == a + b);
  // Zero padding after a member (as some writers leave) is skipped.
  auto padded = GunzipBuffer(Gzip(a) + std::string(8, '\0') + Gzip(b) + std::string(4, '\0'), "pad.gz", 16);
  REQUIRE(padded.ok());
  CHECK(*padded == a + b);
}

TEST_CASE("ReadTraceFile reads a trace split over two gzip members", "[file_source]") {
  const std::string doc = KinetoDoc(
      R"j({"ph":"X","cat":"cpu_op","name":"first","pid":1,"tid":1,"ts":1,"dur":1},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"second","pid":1,"tid":1,"ts":3,"dur":1})j");
  const std::string path = TempDir() + "/split.json.gz";
  const size_t half = doc.size() / 2;
  WriteFile(path, Gzip(doc.substr(0, half)) + Gzip(doc.substr(half)));
  auto trace = ReadTraceFile(path);
  REQUIRE(trace.ok());
  REQUIRE(trace->events.size() == 2);
  CHECK(trace->Str(trace->events[1].name) == "second");
}

TEST_CASE("GunzipBuffer reports corrupt gzip data with the source and the offset", "[file_source]") {
  const std::string gz = Gzip(SomeText(20000));
  SECTION("unknown compression method in the header") {
    std::string bad = gz;
    bad[2] = 7;
    auto out = GunzipBuffer(bad, "bad.json.gz", 16, Bounded());
    REQUIRE_FALSE(out.ok());
    CHECK(absl::IsInvalidArgument(out.status()));
    CHECK_THAT(Msg(out.status()), Catch::StartsWith("bad.json.gz: corrupt gzip data at compressed byte "));
  }
  SECTION("checksum mismatch in the trailer") {
    std::string bad = gz;
    bad[bad.size() - 6] = static_cast<char>(bad[bad.size() - 6] ^ 0x5a);  // CRC32 byte
    auto out = GunzipBuffer(bad, "crc.json.gz", 16, Bounded());
    REQUIRE_FALSE(out.ok());
    CHECK_THAT(Msg(out.status()), Catch::Contains("crc.json.gz: corrupt gzip"));
  }
  SECTION("garbage after a complete member") {
    auto out = GunzipBuffer(gz + "this is not gzip", "tail.json.gz", 16, Bounded());
    REQUIRE_FALSE(out.ok());
    CHECK_THAT(Msg(out.status()), Catch::Contains("tail.json.gz: corrupt gzip"));
  }
}

TEST_CASE("ReadTraceFile names the file in a corrupt gzip error", "[file_source]") {
  std::string bad = Gzip(SomeText(20000));
  bad[2] = 7;
  const std::string path = TempDir() + "/corrupt.json.gz";
  WriteFile(path, bad);
  ReadOptions options;
  options.max_bytes = Bounded().max_bytes;
  auto trace = ReadTraceFile(path, options);
  REQUIRE_FALSE(trace.ok());
  CHECK_THAT(Msg(trace.status()), Catch::StartsWith(path + ": corrupt gzip"));
}

TEST_CASE("GunzipBuffer reports truncated gzip data", "[file_source]") {
  const std::string gz = Gzip(SomeText(20000));
  for (size_t keep : {gz.size() - 4, gz.size() / 2, size_t{12}}) {
    INFO("kept " << keep << " of " << gz.size() << " bytes");
    auto out = GunzipBuffer(gz.substr(0, keep), "cut.json.gz", 16, Bounded());
    REQUIRE_FALSE(out.ok());
    CHECK(absl::IsInvalidArgument(out.status()));
    CHECK_THAT(Msg(out.status()), Catch::StartsWith("cut.json.gz: gzip data is truncated"));
  }
}

TEST_CASE("ReadTraceFile reports a truncated gzip file", "[file_source]") {
  const std::string gz = Gzip(KinetoDoc(SomeText(100)));
  const std::string path = TempDir() + "/cut.json.gz";
  WriteFile(path, gz.substr(0, gz.size() - 10));
  ReadOptions options;
  options.max_bytes = Bounded().max_bytes;
  auto trace = ReadTraceFile(path, options);
  REQUIRE_FALSE(trace.ok());
  CHECK_THAT(Msg(trace.status()), Catch::Contains(path) && Catch::Contains("truncated"));
}

TEST_CASE("GunzipBuffer refuses to decompress past max_bytes", "[file_source]") {
  const std::string text(100000, 'z');  // a tiny bomb: 100 KB from ~100 bytes
  const std::string gz = Gzip(text);
  FileSourceOptions options;
  options.max_bytes = 1000;
  auto out = GunzipBuffer(gz, "bomb.gz", 16, options);
  REQUIRE_FALSE(out.ok());
  CHECK(absl::IsResourceExhausted(out.status()));
  CHECK(Msg(out.status()) == "bomb.gz: decompressed data exceeds the limit of 1000 bytes");
  // The limit itself is allowed.
  options.max_bytes = text.size();
  auto exact = GunzipBuffer(gz, "bomb.gz", 16, options);
  REQUIRE(exact.ok());
  CHECK(exact->size() == text.size());
}

TEST_CASE("ReadTraceFile applies ReadOptions.max_bytes to gzip files", "[file_source]") {
  const std::string path = TempDir() + "/big.json.gz";
  WriteFile(path, KinetoDoc(std::string(50000, ' ')), /*gzip=*/true);
  ReadOptions options;
  options.max_bytes = 4096;
  auto trace = ReadTraceFile(path, options);
  REQUIRE_FALSE(trace.ok());
  CHECK_THAT(Msg(trace.status()), Catch::Contains(path) && Catch::Contains("exceeds the limit of 4096 bytes"));
}

TEST_CASE("GunzipBuffer grows past a wrong size hint in the trailer", "[file_source]") {
  // The trailer's ISIZE is only a hint; a lie must not truncate the output.
  const std::string text = SomeText(50000);
  std::string gz = Gzip(text);
  std::string lying = gz;
  lying[lying.size() - 4] = 1;
  lying[lying.size() - 3] = 0;
  lying[lying.size() - 2] = 0;
  lying[lying.size() - 1] = 0;
  auto out = GunzipBuffer(lying, "lie.gz", 16, Bounded());
  // zlib checks ISIZE too, so the lie is reported as corruption, never as a short read.
  if (out.ok()) {
    CHECK(*out == text);
  } else {
    CHECK_THAT(Msg(out.status()), Catch::Contains("corrupt gzip"));
  }
  auto honest = GunzipBuffer(gz, "ok.gz", 16);
  REQUIRE(honest.ok());
  CHECK(*honest == text);
}

TEST_CASE("GunzipBuffer's memory stays proportional to its input, whatever the trailer claims",
          "[file_source]") {
  // GunzipBuffer sizes its output from the last four bytes of the buffer (the
  // gzip ISIZE field) before inflating anything. In a truncated or corrupt
  // file those bytes are arbitrary: 30 bytes can claim 4 GiB, and the buffer
  // is allocated and zero-filled up front. Here they claim 256 MiB.
  const std::string gz = Gzip("{}") + std::string("\x00\x00\x00\x10", 4);
  FileSourceOptions options;
  options.max_bytes = uint64_t{1} << 30;
  const long before = PeakRssKiB();
  auto out = GunzipBuffer(gz, "tiny.gz", 16, options);
  const long grown_kib = PeakRssKiB() - before;
  CHECK_FALSE(out.ok());  // trailing bytes that are no gzip member
  INFO("peak memory grew by " << grown_kib << " KiB for a " << gz.size() << "-byte input");
  CHECK(grown_kib < 32 * 1024);
}

TEST_CASE("ReadTraceBytes of a missing file names the path", "[file_source]") {
  const std::string path = TempDir() + "/absent.json.gz";
  auto bytes = ReadTraceBytes(path, 16);
  REQUIRE_FALSE(bytes.ok());
  CHECK_THAT(Msg(bytes.status()), Catch::Contains(path));
}

// --- streaming -----------------------------------------------------------------

namespace {

// Random bytes compress to more than they are: a member of `bytes` bytes
// takes more than the stream's 1 MiB input piece.
std::string RandomText(size_t bytes, uint32_t seed) {
  std::string s(bytes, ' ');
  for (char& c : s) {
    seed = seed * 1103515245u + 12345u;
    c = static_cast<char>('!' + (seed >> 16) % 90);
  }
  return s;
}

// Everything `stream` yields, read `piece` bytes at a time.
std::string ReadAll(TraceByteStream& stream, size_t piece) {
  std::string out, buf(piece, '\0');
  while (true) {
    auto n = stream.Read(buf.data(), piece);
    REQUIRE(n.ok());
    if (*n == 0) return out;
    out.append(buf.data(), *n);
  }
}

// What `stream` yields, `piece` bytes at a time, up to its first error (OK
// when it ends without one: a test expecting an error then fails).
std::pair<std::string, absl::Status> ReadToError(TraceByteStream& stream, size_t piece) {
  std::string out, buf(piece, '\0');
  while (true) {
    auto n = stream.Read(buf.data(), piece);
    if (!n.ok()) return {out, n.status()};
    if (*n == 0) return {out, absl::OkStatus()};
    out.append(buf.data(), *n);
  }
}

}  // namespace

TEST_CASE("TraceByteStream inflates members across input pieces and small reads", "[file_source]") {
  const std::string a = RandomText(1500000, 1), b = SomeText(300000), c = RandomText(2000, 3);
  const std::string path = TempDir() + "/members.json.gz";
  WriteFile(path, Gzip(a) + std::string(5, '\0') + Gzip(b) + Gzip(c));
  for (bool ahead : {false, true}) {
    FileSourceOptions options;
    options.read_ahead = ahead;
    for (size_t piece : {size_t{7}, size_t{4096}, size_t{3} << 20}) {
      INFO("piece " << piece << ", read ahead " << ahead);
      auto stream = TraceByteStream::Open(path, options);
      REQUIRE(stream.ok());
      CHECK((*stream)->gzip());
      CHECK(ReadAll(**stream, piece) == a + b + c);
    }
    // A stream dropped half-read stops its thread.
    auto stream = TraceByteStream::Open(path, options);
    REQUIRE(stream.ok());
    std::string some(1000, '\0');
    REQUIRE((*stream)->Read(some.data(), some.size()).ok());
  }
  // A plain file streams unchanged, and its size is known up front.
  const std::string plain = TempDir() + "/plain.json";
  WriteFile(plain, a);
  auto stream = TraceByteStream::Open(plain);
  REQUIRE(stream.ok());
  CHECK_FALSE((*stream)->gzip());
  CHECK((*stream)->size_hint() == a.size());
  CHECK(ReadAll(**stream, 5000) == a);
}

TEST_CASE("TraceByteStream shows what its next read copies only where it lies in memory", "[file_source]") {
  // The reader fetches those bytes into the cache while it parses the
  // window before them (KinetoParser::PrefetchInput).
  const std::string text = SomeText(10000);
  auto memory = TraceByteStream::FromMemory(text, "<memory>", /*detect_gzip=*/true);
  CHECK(memory->InMemoryAhead() == text);
  std::string some(3000, '\0');
  REQUIRE(memory->Read(some.data(), some.size()).ok());
  CHECK(memory->InMemoryAhead().data() == text.data() + 3000);
  CHECK(memory->InMemoryAhead().size() == text.size() - 3000);
  REQUIRE(ReadAll(*memory, 4096) == text.substr(3000));
  CHECK(memory->InMemoryAhead().empty());
  // Compressed bytes in memory are not what a read copies; a file's are read from the file.
  const std::string gz = Gzip(text);
  CHECK(TraceByteStream::FromMemory(gz, "<memory>", /*detect_gzip=*/true)->InMemoryAhead().empty());
  CHECK(TraceByteStream::FromMemory(gz, "<memory>", /*detect_gzip=*/false)->InMemoryAhead() == gz);
  const std::string path = TempDir() + "/ahead.json";
  WriteFile(path, text);
  auto file = TraceByteStream::Open(path);
  REQUIRE(file.ok());
  CHECK((*file)->InMemoryAhead().empty());
}

TEST_CASE("TraceByteStream reads ahead through more pieces than it keeps buffers for", "[file_source]") {
  // 30 MB: more 4 MiB pieces than the queue holds, so later pieces are
  // inflated into the buffers of earlier ones; every byte must still come out
  // once and in order, whatever the reads' sizes, and an error past the
  // recycled buffers still comes after the data before it.
  const std::string text = RandomText(30000000, 11);
  const std::string gz = Gzip(text.substr(0, 12000000)) + Gzip(text.substr(12000000));
  const std::string whole = TempDir() + "/long.json.gz", cut = TempDir() + "/long_cut.json.gz";
  WriteFile(whole, gz);
  WriteFile(cut, gz.substr(0, gz.size() - 100));
  FileSourceOptions options;
  options.read_ahead = true;
  for (size_t piece : {size_t{4093}, size_t{5} << 20}) {
    INFO("piece " << piece);
    auto stream = TraceByteStream::Open(whole, options);
    REQUIRE(stream.ok());
    CHECK(ReadAll(**stream, piece) == text);
  }
  auto stream = TraceByteStream::Open(cut, options);
  REQUIRE(stream.ok());
  const auto [read, status] = ReadToError(**stream, 1 << 20);
  CHECK_THAT(Msg(status), Catch::StartsWith(cut + ": ") && Catch::Contains("truncated"));
  CHECK(read.size() > 25000000);
  CHECK(read == text.substr(0, read.size()));
}

TEST_CASE("TraceByteStream reports a gzip file cut past its first input piece", "[file_source]") {
  const std::string gz = Gzip(RandomText(3000000, 7));
  const std::string path = TempDir() + "/cut_late.json.gz";
  WriteFile(path, gz.substr(0, gz.size() - 100));
  for (bool ahead : {false, true}) {
    INFO("read ahead " << ahead);
    FileSourceOptions options;
    options.read_ahead = ahead;
    auto stream = TraceByteStream::Open(path, options);
    REQUIRE(stream.ok());
    const auto [read, status] = ReadToError(**stream, 1 << 16);
    CHECK_THAT(Msg(status), Catch::StartsWith(path + ": ") && Catch::Contains("truncated"));
    CHECK(read.size() > 2000000);  // the data before the cut came first
  }
}

namespace {

// A trace of 20,000 events, more than one 1 MiB window of text.
std::string ManyEventsDoc() {
  std::string events;
  for (int i = 0; i < 20000; ++i) {
    if (i > 0) events += ",\n  ";
    events += R"j({"ph":"X","cat":"cpu_op","name":"op)j" + std::to_string(i % 50) +
              R"j(","pid":1,"tid":1,"ts":)j" + std::to_string(10 * i) + R"j(,"dur":5})j";
  }
  std::string doc = KinetoDoc(events);
  REQUIRE(doc.size() > (size_t{1} << 20));
  return doc;
}

// ReadTraceFile of `path` reads what ParseTraceText reads of `doc`, ManyEventsDoc's text.
void CheckReadsAsText(const std::string& path, const std::string& doc, const ReadOptions& options = {}) {
  auto from_file = ReadTraceFile(path, options);
  auto from_text = ParseTraceText(doc, path, options);
  REQUIRE(from_file.ok());
  REQUIRE(from_text.ok());
  REQUIRE(from_file->events.size() == 20000);
  CHECK(from_file->events.back().ts_ns == from_text->events.back().ts_ns);
  CHECK(from_file->Str(from_file->events[12345].name) == "op45");
  CHECK(from_file->strings.size() == from_text->strings.size());
}

}  // namespace

TEST_CASE("ReadTraceFile streams a gzip trace of many windows to the same Trace as the text", "[file_source]") {
  const std::string doc = ManyEventsDoc();
  const std::string path = TempDir() + "/many.json.gz";
  WriteFile(path, doc, /*gzip=*/true);
  CheckReadsAsText(path, doc);
}

// --- plain files mapped ------------------------------------------------------------

namespace {

FileSourceOptions MapFrom(uint64_t bytes) {
  FileSourceOptions options;
  options.map_min_bytes = bytes;
  return options;
}

}  // namespace

TEST_CASE("TraceByteStream maps a plain file at least map_min_bytes long, and reads it as read() does",
          "[file_source]") {
  const std::string text = RandomText((size_t{5} << 20) + 12345, 21);
  const std::string path = TempDir() + "/mapped.json";
  WriteFile(path, text);
  // Where this kernel cannot populate a mapped range, every file is read.
  auto probe = TraceByteStream::Open(path, MapFrom(0));
  REQUIRE(probe.ok());
  const bool can_map = !(*probe)->InMemoryAhead().empty();
  if (!can_map) WARN("this kernel does not populate mapped ranges: the file is read");
  for (const uint64_t from : {uint64_t{0}, uint64_t{1} << 20, ~uint64_t{0}}) {
    for (size_t piece : {size_t{7}, size_t{65536}, size_t{3} << 20, size_t{16} << 20}) {
      INFO("map_min_bytes " << from << ", piece " << piece);
      auto stream = TraceByteStream::Open(path, MapFrom(from));
      REQUIRE(stream.ok());
      CHECK((*stream)->size_hint() == text.size());
      // Mapped, the bytes ahead are in memory for the reader to fetch.
      const bool mapped = can_map && from != ~uint64_t{0};
      CHECK((*stream)->InMemoryAhead() == (mapped ? std::string_view(text) : std::string_view()));
      CHECK(ReadAll(**stream, piece) == text);
    }
  }
  // Shorter than map_min_bytes: read.
  auto stream = TraceByteStream::Open(path, MapFrom(text.size() + 1));
  REQUIRE(stream.ok());
  CHECK((*stream)->InMemoryAhead().empty());
}

TEST_CASE("TraceByteStream drops a mapped file's pages behind the reader", "[file_source]") {
  // Without the drop, reading 48 MB would leave 48 MB of the file resident.
  const std::string path = TempDir() + "/resident.json";
  WriteFile(path, RandomText(size_t{48} << 20, 5));
  auto stream = TraceByteStream::Open(path, MapFrom(0));
  REQUIRE(stream.ok());
  if ((*stream)->InMemoryAhead().empty()) {
    WARN("this kernel does not populate mapped ranges: the file is read");
    return;
  }
  const long before = ResidentKiB();
  std::string buf(size_t{64} << 10, '\0');
  size_t total = 0;
  long most = 0;
  while (true) {
    auto n = (*stream)->Read(buf.data(), buf.size());
    REQUIRE(n.ok());
    if (*n == 0) break;
    total += *n;
    most = std::max(most, ResidentKiB() - before);
  }
  CHECK(total == (size_t{48} << 20));
  CHECK(most < 16 * 1024);
}

TEST_CASE("TraceByteStream reports a mapped file truncated while it is read, after the bytes before",
          "[file_source]") {
  // Cut beyond what the stream has mapped in (its populate fails), and
  // within it (a load from the mapping raises SIGBUS, which MappedFile
  // catches): an error either way, never a crash.
  const std::string text = RandomText(size_t{6} << 20, 8);
  const std::string path = TempDir() + "/shrinking.json";
  for (const size_t cut : {size_t{9} << 19, size_t{1} << 20}) {
    INFO("cut to " << cut);
    WriteFile(path, text);
    auto stream = TraceByteStream::Open(path, MapFrom(0));
    REQUIRE(stream.ok());
    if ((*stream)->InMemoryAhead().empty()) {
      WARN("this kernel does not populate mapped ranges: the file is read");
      return;
    }
    std::string first(100000, '\0');
    REQUIRE((*stream)->Read(first.data(), first.size()).ok());
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(cut)) == 0);
    const auto [read, status] = ReadToError(**stream, 1 << 16);
    CHECK_THAT(Msg(status), Catch::StartsWith(path + ": ") && Catch::Contains("truncated"));
    CHECK(first + read == text.substr(0, first.size() + read.size()));
    // The error comes with the read (of 64 KiB) that meets the cut, or the
    // first of a 2 MiB step that the file no longer holds whole.
    CHECK(first.size() + read.size() >= std::min(cut, size_t{4} << 20) - (size_t{64} << 10));
  }
}

TEST_CASE("ReadTraceFile maps a plain trace of many windows and reads the same Trace as the text", "[file_source]") {
  const std::string doc = ManyEventsDoc();  // over 1 MiB: mapped (FileSourceOptions::map_min_bytes)
  const std::string path = TempDir() + "/many.json";
  WriteFile(path, doc);
  for (bool parallel : {false, true}) {
    INFO("parallel windows " << parallel);
    ReadOptions options;
    options.parallel_windows = parallel;
    CheckReadsAsText(path, doc, options);
  }
}
