// Tests for daydream/base/file_io.h: whole-file reads, crash-safe writes.
#include "daydream/base/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace daydream;
using daydream::testing::ResidentKiB;
using daydream::testing::TempDir;
using daydream::testing::WriteFile;

namespace {

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("WriteFileAtomically writes the bytes and ReadFile reads them back", "[file_io]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.bin";
  const std::string data("binary\0data\xff\n", 13);
  REQUIRE(WriteFileAtomically(path, data).ok());
  auto read = ReadFile(path);
  REQUIRE(read.ok());
  CHECK(*read == data);
  CHECK(ListDir(dir) == std::set<std::string>{"out.bin"});
}

TEST_CASE("WriteFileAtomically writes an empty file", "[file_io]") {
  const std::string path = TempDir() + "/empty";
  REQUIRE(WriteFileAtomically(path, "").ok());
  auto read = ReadFile(path);
  REQUIRE(read.ok());
  CHECK(read->empty());
}

TEST_CASE("WriteFileAtomically replaces the old content completely", "[file_io]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/graph.pb";
  WriteFile(path, std::string(10000, 'o'));
  REQUIRE(WriteFileAtomically(path, "new").ok());
  CHECK(*ReadFile(path) == "new");
  REQUIRE(WriteFileAtomically(path, std::string(5000, 'n')).ok());
  CHECK(*ReadFile(path) == std::string(5000, 'n'));
  CHECK(ListDir(dir) == std::set<std::string>{"graph.pb"});
}

TEST_CASE("WriteFileAtomically into a missing directory fails naming the path and writes nothing", "[file_io]") {
  const std::string dir = TempDir();
  const std::string path = dir + "/missing/out.json";
  const absl::Status s = WriteFileAtomically(path, "data");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains(path));
  CHECK(ListDir(dir).empty());
}

TEST_CASE("WriteFileAtomically under a path through a regular file fails and leaves no temporary", "[file_io]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/not_a_dir", "x");
  const absl::Status s = WriteFileAtomically(dir + "/not_a_dir/out.json", "data");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains("not_a_dir/out.json"));
  CHECK(ListDir(dir) == std::set<std::string>{"not_a_dir"});
  CHECK(*ReadFile(dir + "/not_a_dir") == "x");
}

TEST_CASE("WriteFileAtomically in a read-only directory fails and leaves the old file intact", "[file_io]") {
  if (::geteuid() == 0) {
    // root writes through permission bits; the other failure tests cover this path.
    SUCCEED("running as root: permission bits do not stop writes");
    return;
  }
  const std::string dir = TempDir();
  const std::string path = dir + "/trace.json";
  WriteFile(path, "old content");
  REQUIRE(::chmod(dir.c_str(), 0555) == 0);
  const absl::Status s = WriteFileAtomically(path, "new content");
  ::chmod(dir.c_str(), 0755);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains(path));
  CHECK(*ReadFile(path) == "old content");
  CHECK(ListDir(dir) == std::set<std::string>{"trace.json"});
}

TEST_CASE("WriteFileAtomically that cannot create its temporary leaves the old file intact", "[file_io]") {
  // A name so long that "<name>.tmp.XXXXXX" exceeds NAME_MAX: the temporary
  // cannot be created (this fails even for root).
  const std::string dir = TempDir();
  const std::string name(250, 'g');
  const std::string path = dir + "/" + name;
  WriteFile(path, "old content");
  const absl::Status s = WriteFileAtomically(path, "new content");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains("temporary"));
  CHECK(*ReadFile(path) == "old content");
  CHECK(ListDir(dir) == std::set<std::string>{name});
}

TEST_CASE("WriteFileAtomically whose rename fails removes its temporary and keeps the target", "[file_io]") {
  // The target is a non-empty directory: the bytes are written to the
  // temporary, then rename() refuses.
  const std::string dir = TempDir();
  const std::string target = dir + "/target";
  std::filesystem::create_directories(target);
  WriteFile(target + "/inside", "keep me");
  const absl::Status s = WriteFileAtomically(target, "data");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Msg(s), Catch::Contains(target));
  CHECK(ListDir(dir) == std::set<std::string>{"target"});
  CHECK(*ReadFile(target + "/inside") == "keep me");
}

TEST_CASE("ReadFile of a missing file is NotFound and names the path", "[file_io]") {
  const std::string path = TempDir() + "/nope.json";
  auto read = ReadFile(path);
  REQUIRE_FALSE(read.ok());
  CHECK(absl::IsNotFound(read.status()));
  CHECK_THAT(Msg(read.status()), Catch::Contains(path) && Catch::Contains("cannot open"));
}

TEST_CASE("ReadFile of a directory fails and names the path", "[file_io]") {
  const std::string dir = TempDir();
  auto read = ReadFile(dir);
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(Msg(read.status()), Catch::Contains(dir) && Catch::Contains("not a regular file"));
}

TEST_CASE("ReadFile reads an empty file as an empty string", "[file_io]") {
  const std::string path = TempDir() + "/empty.json";
  WriteFile(path, "");
  auto read = ReadFile(path);
  REQUIRE(read.ok());
  CHECK(read->empty());
}

// --- MappedFile ------------------------------------------------------------------

namespace {

std::string Pattern(size_t bytes) {
  std::string s(bytes, '\0');
  uint32_t x = 7;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// The file at `path` mapped; false (with a warning) where this kernel cannot
// populate a mapped range, as before Linux 5.14.
bool MapOrSkip(const std::string& path, OpenFile* file, MappedFile* map) {
  auto opened = OpenRegularFile(path);
  REQUIRE(opened.ok());
  *file = *opened;
  auto mapped = MappedFile::Map(file->fd, file->size, path);
  if (mapped.status().code() == absl::StatusCode::kUnimplemented) {
    WARN("not mapped here: " << mapped.status().message());
    ::close(file->fd);
    return false;
  }
  REQUIRE(mapped.ok());
  *map = *std::move(mapped);
  return true;
}

}  // namespace

TEST_CASE("MappedFile maps a file's bytes, and reads them again after Release", "[file_io]") {
  const std::string data = Pattern((size_t{3} << 20) + 123);
  const std::string path = TempDir() + "/mapped.bin";
  WriteFile(path, data);
  OpenFile file;
  MappedFile map;
  if (!MapOrSkip(path, &file, &map)) return;
  REQUIRE(map.mapped());
  REQUIRE(map.Populate(0, data.size()).ok());
  CHECK(map.bytes() == data);
  // Pages dropped, whole or cut by the range's ends, and the last one, leave
  // this process; the bytes come back from the file.
  const long mapped_in = ResidentKiB();
  map.Release(5, (size_t{1} << 20) + 7);
  map.Release((size_t{2} << 20) + 1, data.size());
  CHECK(mapped_in - ResidentKiB() >= 1500);  // of the 2 MiB dropped, less the pages at the cuts
  REQUIRE(map.Populate(0, data.size()).ok());
  CHECK(map.bytes() == data);
  MappedFile moved = std::move(map);
  CHECK_FALSE(map.mapped());
  CHECK(moved.bytes() == data);
  ::close(file.fd);
}

TEST_CASE("MappedFile reports a file truncated after it was mapped, naming the path", "[file_io]") {
  const std::string path = TempDir() + "/shrinks.bin";
  WriteFile(path, Pattern(size_t{1} << 20));
  OpenFile file;
  MappedFile map;
  if (!MapOrSkip(path, &file, &map)) return;
  REQUIRE(::truncate(path.c_str(), 100000) == 0);
  const absl::Status status = map.Populate(512 << 10, 1 << 20);
  CHECK_THAT(Msg(status), Catch::StartsWith(path + ": ") && Catch::Contains("truncated"));
  CHECK(map.Populate(0, 4096).ok());  // what the file still holds maps in
  ::close(file.fd);
}

TEST_CASE("MappedFile refuses an empty file, naming the path", "[file_io]") {
  const std::string path = TempDir() + "/empty_map.bin";
  WriteFile(path, "");
  auto file = OpenRegularFile(path);
  REQUIRE(file.ok());
  auto map = MappedFile::Map(file->fd, 0, path);
  CHECK_FALSE(map.ok());
  CHECK_THAT(Msg(map.status()), Catch::StartsWith(path + ": "));
  ::close(file->fd);
}

TEST_CASE("MappedFile::CopyOut copies a file's bytes, and reports those a truncation took without a SIGBUS",
          "[file_io]") {
  const std::string data = Pattern(size_t{1} << 20);
  const std::string path = TempDir() + "/copied.bin";
  WriteFile(path, data);
  OpenFile file;
  MappedFile map;
  if (!MapOrSkip(path, &file, &map)) return;
  REQUIRE(map.Populate(0, data.size()).ok());
  std::string out(data.size(), '\0');
  REQUIRE(map.CopyOut(0, out.data(), out.size()));
  CHECK(out == data);
  // Pages mapped in, then taken by a truncation: a load from them raises SIGBUS.
  REQUIRE(::truncate(path.c_str(), 100000) == 0);
  std::string some(4096, '\0');
  CHECK(map.CopyOut(8192, some.data(), some.size()));
  CHECK(some == data.substr(8192, 4096));
  CHECK_FALSE(map.CopyOut(512 << 10, some.data(), some.size()));
  CHECK_FALSE(map.CopyOut(90000, out.data(), 20000));  // across the new end
  // And again: the handler stays, and the signal is not left blocked.
  CHECK_FALSE(map.CopyOut(700000, some.data(), some.size()));
  CHECK(map.CopyOut(0, some.data(), some.size()));
  ::close(file.fd);
}

namespace {
void TestBusHandler(int) {}
}  // namespace

TEST_CASE("MappedFile puts back the SIGBUS handler it found once the last mapping goes", "[file_io]") {
  const std::string path = TempDir() + "/handler.bin";
  WriteFile(path, Pattern(size_t{64} << 10));
  struct sigaction mine {}, found {};
  mine.sa_handler = TestBusHandler;
  sigemptyset(&mine.sa_mask);
  REQUIRE(::sigaction(SIGBUS, &mine, &found) == 0);
  auto current = [] {
    struct sigaction now {};
    ::sigaction(SIGBUS, nullptr, &now);
    return now;
  };
  {
    OpenFile file, other_file;
    MappedFile map, other;
    if (!MapOrSkip(path, &file, &map)) {
      ::sigaction(SIGBUS, &found, nullptr);
      return;
    }
    REQUIRE(MapOrSkip(path, &other_file, &other));
    CHECK((current().sa_flags & SA_SIGINFO) != 0);  // daydream's, while mappings live
    map = MappedFile();                                // one goes: still daydream's
    CHECK((current().sa_flags & SA_SIGINFO) != 0);
    ::close(file.fd);
    ::close(other_file.fd);
  }
  CHECK((current().sa_flags & SA_SIGINFO) == 0);
  CHECK(current().sa_handler == TestBusHandler);
  ::sigaction(SIGBUS, &found, nullptr);
}

namespace {
volatile sig_atomic_t g_bus_seen = 0;
volatile sig_atomic_t g_bus_code = 0;
void RecordBus(int, siginfo_t* info, void*) {
  g_bus_seen = g_bus_seen + 1;
  g_bus_code = info->si_code;
}
// Installs `action` (its mask emptied) for SIGBUS.
bool SetBusAction(struct sigaction action) {
  sigemptyset(&action.sa_mask);
  return ::sigaction(SIGBUS, &action, nullptr) == 0;
}
}  // namespace

TEST_CASE("MappedFile hands a SIGBUS that is no copy's to the action it replaced", "[file_io]") {
  const std::string path = TempDir() + "/passes_on.bin";
  WriteFile(path, Pattern(size_t{64} << 10));
  struct sigaction found {};
  REQUIRE(::sigaction(SIGBUS, nullptr, &found) == 0);
  SECTION("a handler") {
    struct sigaction mine {};
    mine.sa_sigaction = RecordBus;
    mine.sa_flags = SA_SIGINFO;
    REQUIRE(SetBusAction(mine));
    OpenFile file;
    MappedFile map;
    if (MapOrSkip(path, &file, &map)) {
      g_bus_seen = 0;
      ::raise(SIGBUS);  // sent, not a fault: no address to be a copy's
      CHECK(g_bus_seen == 1);
      CHECK(g_bus_code <= 0);
      ::close(file.fd);
    }
  }
  SECTION("ignored") {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(SetBusAction(ignore));
    OpenFile file;
    MappedFile map;
    if (MapOrSkip(path, &file, &map)) {
      ::raise(SIGBUS);  // ignored as before: the test goes on
      SUCCEED("the sent SIGBUS was ignored");
      ::close(file.fd);
    }
  }
  ::sigaction(SIGBUS, &found, nullptr);
}
