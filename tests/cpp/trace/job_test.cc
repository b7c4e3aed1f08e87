// Tests for daydream/trace/job.h: loading every rank of a job.
#include "daydream/trace/job.h"

#include <filesystem>
#include <string>

#if defined(__linux__)
#include <sched.h>
#endif

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace daydream;
using daydream::testing::KinetoDoc;
using daydream::testing::SharedTracePath;
using daydream::testing::TempDir;
using daydream::testing::WriteFile;

namespace {

// A one-event trace naming itself, with an optional distributedInfo rank.
std::string RankDoc(const std::string& name, int rank = -1, int world_size = -1) {
  std::string top;
  if (rank >= 0) {
    top = "\"distributedInfo\":{\"rank\":" + std::to_string(rank) + ",\"world_size\":" + std::to_string(world_size) +
          ",\"backend\":\"nccl\"}";
  }
  return KinetoDoc(R"j({"ph":"X","cat":"cpu_op","name":")j" + name + R"j(","pid":1,"tid":1,"ts":1,"dur":1})j", top);
}

std::string FirstName(const Trace& t) { return std::string(t.Str(t.events.at(0).name)); }

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("IsTraceFileName accepts *.json and *.json.gz only", "[job]") {
  CHECK(IsTraceFileName("rank-0.json"));
  CHECK(IsTraceFileName("worker0.123.pt.trace.json.gz"));
  CHECK_FALSE(IsTraceFileName("notes.txt"));
  CHECK_FALSE(IsTraceFileName("trace.json.bak"));
  CHECK_FALSE(IsTraceFileName("trace.gz"));
}

TEST_CASE("LoadJob sorts ranks by distributedInfo rank, not by file name", "[job]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/a.json", RankDoc("from_a", 2, 3));
  WriteFile(dir + "/b.json.gz", RankDoc("from_b", 0, 3), /*gzip=*/true);
  WriteFile(dir + "/c.json", RankDoc("from_c", 1, 3));
  WriteFile(dir + "/README.md", "not a trace");
  auto job = LoadJob(dir);
  REQUIRE(job.ok());
  CHECK(job->path == dir);
  REQUIRE(job->ranks.size() == 3);
  CHECK(FirstName(job->ranks[0]) == "from_b");
  CHECK(FirstName(job->ranks[1]) == "from_c");
  CHECK(FirstName(job->ranks[2]) == "from_a");
  for (int i = 0; i < 3; ++i) {
    CHECK(job->ranks[static_cast<size_t>(i)].rank == i);
    CHECK(job->ranks[static_cast<size_t>(i)].world_size == 3);
  }
  CHECK(job->warnings.empty());
}

TEST_CASE("LoadJob takes ranks from file names when distributedInfo is missing", "[job]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/rank-10.json", RankDoc("ten"));
  WriteFile(dir + "/rank-2.json", RankDoc("two"));
  WriteFile(dir + "/rank-0.json", RankDoc("zero"));
  auto job = LoadJob(dir);
  REQUIRE(job.ok());
  REQUIRE(job->ranks.size() == 3);
  CHECK(job->ranks[0].rank == 0);
  CHECK(job->ranks[1].rank == 2);
  CHECK(job->ranks[2].rank == 10);
  CHECK(FirstName(job->ranks[2]) == "ten");
  CHECK(job->ranks[1].rank_from_file_name);
  CHECK(job->warnings.empty());
}

TEST_CASE("LoadJob of a single file is a job of one rank", "[job]") {
  const std::string dir = TempDir();
  SECTION("rank unknown: rank 0") {
    WriteFile(dir + "/trace.json", RankDoc("only"));
    auto job = LoadJob(dir + "/trace.json");
    REQUIRE(job.ok());
    REQUIRE(job->ranks.size() == 1);
    CHECK(job->ranks[0].rank == 0);
    CHECK(job->path == dir + "/trace.json");
  }
  SECTION("rank known: kept") {
    WriteFile(dir + "/trace.json", RankDoc("only", 5, 8));
    auto job = LoadJob(dir + "/trace.json");
    REQUIRE(job.ok());
    REQUIRE(job->ranks.size() == 1);
    CHECK(job->ranks[0].rank == 5);
  }
}

TEST_CASE("LoadJob of an empty directory is an error", "[job]") {
  const std::string dir = TempDir();
  auto job = LoadJob(dir);
  REQUIRE_FALSE(job.ok());
  CHECK(Msg(job.status()) == dir + ": no trace files (*.json, *.json.gz) in this directory");
  WriteFile(dir + "/notes.txt", "x");
  auto still = LoadJob(dir);
  REQUIRE_FALSE(still.ok());
  CHECK_THAT(Msg(still.status()), Catch::Contains("no trace files"));
}

TEST_CASE("LoadJob of a missing path is NotFound", "[job]") {
  const std::string path = TempDir() + "/nowhere";
  auto job = LoadJob(path);
  REQUIRE_FALSE(job.ok());
  CHECK(absl::IsNotFound(job.status()));
  CHECK(Msg(job.status()) == path + ": no such file or directory");
}

TEST_CASE("LoadJob assigns ranks in file-name order when ranks repeat, with a warning", "[job]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/b.json", RankDoc("second", 0, 2));
  WriteFile(dir + "/a.json", RankDoc("first", 0, 2));
  WriteFile(dir + "/c.json", RankDoc("third"));  // no rank at all
  auto job = LoadJob(dir);
  REQUIRE(job.ok());
  REQUIRE(job->ranks.size() == 3);
  CHECK(FirstName(job->ranks[0]) == "first");
  CHECK(FirstName(job->ranks[1]) == "second");
  CHECK(FirstName(job->ranks[2]) == "third");
  for (int i = 0; i < 3; ++i) CHECK(job->ranks[static_cast<size_t>(i)].rank == i);
  REQUIRE(job->warnings.items().size() == 1);
  CHECK(job->warnings.items()[0].kind == "ranks_from_order");
  CHECK_THAT(job->warnings.items()[0].example, Catch::Contains(dir));
}

TEST_CASE("LoadJob fails on a broken rank file and names it", "[job]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/rank-0.json", RankDoc("ok"));
  WriteFile(dir + "/rank-1.json", "{\"traceEvents\":[");
  auto job = LoadJob(dir);
  REQUIRE_FALSE(job.ok());
  CHECK_THAT(Msg(job.status()), Catch::StartsWith(dir + "/rank-1.json: "));
}

TEST_CASE("LoadJob reads many files at once into the same job as one at a time", "[job]") {
  const std::string dir = TempDir();
  for (int r = 0; r < 12; ++r) {
    // Ranks in the opposite order to the names, so the job's order is the ranks'.
    WriteFile(dir + "/w" + std::to_string(r / 10) + std::to_string(r % 10) + ".json",
              RankDoc("op" + std::to_string(r), 11 - r, 12));
  }
  auto one = LoadJob(dir, {}, 1);
  REQUIRE(one.ok());
  for (int threads : {2, 4, 16, 0}) {
    INFO(threads << " threads");
    auto many = LoadJob(dir, {}, threads);
    REQUIRE(many.ok());
    REQUIRE(many->ranks.size() == 12);
    for (size_t i = 0; i < 12; ++i) {
      CHECK(many->ranks[i].rank == static_cast<int32_t>(i));
      CHECK(many->ranks[i].path == one->ranks[i].path);
      CHECK(FirstName(many->ranks[i]) == "op" + std::to_string(11 - i));
    }
  }
  CHECK(DefaultJobThreads() >= 1);
  // What the reads did is counted per file (threads read at once) and
  // added up: as much as reading each file alone, one window at a time.
  ReadStats alone;
  ReadOptions each;
  each.parallel_windows = false;
  each.stats = &alone;
  for (const Trace& rank : one->ranks) REQUIRE(ReadTraceFile(rank.path, each).ok());
  REQUIRE(alone.windows >= 12);
  for (int threads : {2, 4}) {
    INFO(threads << " threads");
    ReadStats together;
    ReadOptions counted;
    counted.stats = &together;
    REQUIRE(LoadJob(dir, counted, threads).ok());
    CHECK(together.windows == alone.windows);
    CHECK(together.indexed_events == alone.indexed_events);
    CHECK(together.largest_window_bytes == alone.largest_window_bytes);
  }
}

#if defined(__linux__)
TEST_CASE("DefaultJobThreads counts the CPUs this process may run on", "[job]") {
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  CHECK(DefaultJobThreads() == CPU_COUNT(&before));
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  const int narrowed = DefaultJobThreads();
  REQUIRE(sched_setaffinity(0, sizeof(before), &before) == 0);
  CHECK(narrowed == 1);
}
#endif

TEST_CASE("LoadJob with several broken files names the first in name order, however many read at once",
          "[job]") {
  const std::string dir = TempDir();
  for (int r = 0; r < 12; ++r) {
    const std::string name = dir + "/rank-" + std::to_string(r / 10) + std::to_string(r % 10) + ".json";
    WriteFile(name, r == 5 || r == 9 ? std::string("{\"traceEvents\":[") : RankDoc("ok", r, 12));
  }
  for (int threads : {1, 3, 12}) {
    INFO(threads << " threads");
    for (int round = 0; round < 5; ++round) {
      auto job = LoadJob(dir, {}, threads);
      REQUIRE_FALSE(job.ok());
      CHECK_THAT(Msg(job.status()), Catch::StartsWith(dir + "/rank-05.json: "));
    }
  }
}

TEST_CASE("LoadJob reads all 8 ranks of the DLRM job in rank order", "[job][real]") {
  const std::string dir = SharedTracePath("param-dlrm-v100-8rank");
  auto job = LoadJob(dir);
  REQUIRE(job.ok());
  REQUIRE(job->ranks.size() == 8);
  for (int i = 0; i < 8; ++i) {
    const Trace& t = job->ranks[static_cast<size_t>(i)];
    INFO("rank " << i << " from " << t.path);
    CHECK(t.rank == i);
    CHECK(t.world_size == 8);
    CHECK_THAT(std::filesystem::path(t.path).filename().string(), Catch::StartsWith("worker" + std::to_string(i) + "_"));
    CHECK(t.events.size() > 1000);
  }
  CHECK(job->warnings.empty());
}
