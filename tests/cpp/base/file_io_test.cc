// Tests for daydream/base/file_io.h: whole-file reads, crash-safe writes.
#include "daydream/base/file_io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace daydream;
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
