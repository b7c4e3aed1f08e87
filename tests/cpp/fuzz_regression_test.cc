// Replays every input kept in tests/data/fuzz/ (inputs the fuzzers crashed,
// hung or leaked on, and hand-made hostile inputs) through the fuzzers' own
// code: each must end in success or in an error that names its source.
// Under `make test-asan` this also checks them for memory errors and leaks.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fuzz_targets.h"
#include "test_support.h"

namespace daydream {
namespace {

std::vector<std::filesystem::path> Inputs(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(testing::TestDataPath(dir))) {
    if (entry.is_regular_file() && entry.path().filename() != "README.md") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename Run>
void ReplayInputs(const std::string& dir, Run run) {
  const auto files = Inputs(dir);
  REQUIRE(!files.empty());
  for (const auto& file : files) {
    INFO(file.string());
    const absl::Status status = run(Slurp(file));
    if (!status.ok()) CHECK_THAT(std::string(status.message()), Catch::Contains(fuzz::kFuzzSource));
  }
}

TEST_CASE("every kept fuzz input for the trace reader ends cleanly", "[fuzz][errors]") {
  ReplayInputs("fuzz/trace", fuzz::RunTraceInput);
}

TEST_CASE("every kept fuzz input for Graph load ends cleanly", "[fuzz][errors]") {
  ReplayInputs("fuzz/graph", fuzz::RunGraphInput);
}

}  // namespace
}  // namespace daydream
