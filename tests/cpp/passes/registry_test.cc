// Tests for daydream/passes/pass.h: typed options (PassOptions::Parse) and the
// registry (RegisteredPasses, CreatePass).
#include "daydream/passes/pass.h"

#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

namespace {

const std::vector<OptionSpec>& Specs() {
  static const std::vector<OptionSpec> kSpecs = {
      {"ratio", OptionType::kDouble, "0.5", "a number"},
      {"count", OptionType::kInt, "3", "an integer"},
      {"enabled", OptionType::kBool, "false", "a flag"},
      {"mode", OptionType::kString, "ring", "a word"},
      {"label", OptionType::kString, "", "unset by default"},
  };
  return kSpecs;
}

PassOptions ParseOk(const OptionMap& given) {
  absl::StatusOr<PassOptions> o = PassOptions::Parse("demo", Specs(), given);
  INFO((o.ok() ? std::string() : std::string(o.status().message())));
  REQUIRE(o.ok());
  return *o;
}

std::string ParseError(const OptionMap& given) {
  absl::StatusOr<PassOptions> o = PassOptions::Parse("demo", Specs(), given);
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(o.status().message());
}

const PassInfo* FindPass(const std::string& name) {
  for (const PassInfo& info : RegisteredPasses()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace

// --- PassOptions ----------------------------------------------------------------

TEST_CASE("PassOptions takes the defaults of options the caller did not set", "[registry]") {
  const PassOptions o = ParseOk({});
  CHECK(o.Double("ratio") == 0.5);
  CHECK(o.Int("count") == 3);
  CHECK_FALSE(o.Bool("enabled"));
  CHECK(o.String("mode") == "ring");
  CHECK(o.String("label").empty());
  for (const OptionSpec& s : Specs()) CHECK_FALSE(o.IsSet(s.name));
}

TEST_CASE("PassOptions parses given values and marks them set", "[registry]") {
  const PassOptions o = ParseOk({{"ratio", "1e-3"}, {"count", "1e3"}, {"enabled", "TRUE"}, {"mode", "tree"}});
  CHECK(o.Double("ratio") == 1e-3);
  CHECK(o.Int("count") == 1000);
  CHECK(o.Bool("enabled"));
  CHECK(o.String("mode") == "tree");
  CHECK(o.IsSet("ratio"));
  CHECK(o.IsSet("count"));
  CHECK(o.IsSet("enabled"));
  CHECK(o.IsSet("mode"));
  CHECK_FALSE(o.IsSet("label"));
  // Setting an option to its default value still counts as set.
  CHECK(ParseOk({{"ratio", "0.5"}}).IsSet("ratio"));
  CHECK(ParseOk({{"count", "-7"}}).Int("count") == -7);
}

TEST_CASE("PassOptions reads the spellings of a boolean", "[registry]") {
  for (const char* yes : {"true", "True", "1", "yes", "YES"}) {
    INFO(yes);
    CHECK(ParseOk({{"enabled", yes}}).Bool("enabled"));
  }
  for (const char* no : {"false", "FALSE", "0", "no", "No"}) {
    INFO(no);
    CHECK_FALSE(ParseOk({{"enabled", no}}).Bool("enabled"));
  }
}

TEST_CASE("PassOptions rejects unparsable values naming the pass, option and form", "[registry]") {
  std::string m = ParseError({{"ratio", "fast"}});
  CHECK_THAT(m, Catch::Contains("'demo'") && Catch::Contains("'ratio'") && Catch::Contains("a number") &&
                    Catch::Contains("'fast'"));
  for (const char* bad : {"", "1.5x", "nan", "inf", "-inf", "1e999", "0x"}) {
    INFO("'" << bad << "'");
    ParseError({{"ratio", bad}});
  }
  m = ParseError({{"count", "2.5"}});
  CHECK_THAT(m, Catch::Contains("'count'") && Catch::Contains("an integer"));
  ParseError({{"count", "three"}});
  m = ParseError({{"enabled", "maybe"}});
  CHECK_THAT(m, Catch::Contains("'enabled'") && Catch::Contains("true or false"));
}

TEST_CASE("PassOptions rejects an integer option outside the integer range", "[registry]") {
  // Int() casts the stored double to int64_t: 1e300 would be undefined
  // behaviour there, so Parse must refuse it.
  const std::string m = ParseError({{"count", "1e300"}});
  CHECK_THAT(m, Catch::Contains("'count'"));
}

TEST_CASE("PassOptions rejects an unknown option and lists the known ones", "[registry]") {
  const std::string m = ParseError({{"bucket", "25"}});
  CHECK_THAT(m, Catch::Contains("'demo'") && Catch::Contains("'bucket'"));
  for (const OptionSpec& s : Specs()) CHECK_THAT(m, Catch::Contains(s.name));

  absl::StatusOr<PassOptions> none = PassOptions::Parse("plain", {}, {{"x", "1"}});
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("takes none"));
}

TEST_CASE("PassOptions reports a bad default as an error", "[registry]") {
  const std::vector<OptionSpec> specs = {{"ratio", OptionType::kDouble, "half", "broken default"}};
  absl::StatusOr<PassOptions> o = PassOptions::Parse("demo", specs, {});
  REQUIRE_FALSE(o.ok());
  CHECK_THAT(std::string(o.status().message()), Catch::Contains("'half'"));
  // A given value replaces the bad default.
  CHECK(PassOptions::Parse("demo", specs, {{"ratio", "2"}}).ok());
}

// --- the registry ------------------------------------------------------------------

TEST_CASE("registry lists every pass of the predict issue with unique names and docs", "[registry]") {
  const std::vector<PassInfo>& passes = RegisteredPasses();
  CHECK(&passes == &RegisteredPasses());  // one stable list
  CHECK(passes.size() == 9);
  for (const char* name : {"amp", "fused_optimizer", "tensor_fusion", "data_parallel", "p3", "op_fusion",
                           "cuda_graphs", "scale", "batch_size"}) {
    INFO(name);
    CHECK(FindPass(name) != nullptr);
  }
  std::set<std::string> names;
  for (const PassInfo& info : passes) {
    INFO(info.name);
    CHECK(names.insert(info.name).second);
    CHECK_FALSE(info.name.empty());
    CHECK_FALSE(info.summary.empty());
    CHECK(info.summary.find('\n') == std::string::npos);
    CHECK_FALSE(info.model.empty());
    CHECK(info.create != nullptr);
    std::set<std::string> options;
    for (const OptionSpec& s : info.options) {
      INFO(s.name);
      CHECK(options.insert(s.name).second);
      CHECK_FALSE(s.help.empty());
    }
  }
}

TEST_CASE("every registered pass can be created with its defaults", "[registry]") {
  for (const PassInfo& info : RegisteredPasses()) {
    INFO(info.name);
    absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(info.name);
    INFO((pass.ok() ? std::string() : std::string(pass.status().message())));
    REQUIRE(pass.ok());
    REQUIRE(*pass != nullptr);
    CHECK((*pass)->name() == info.name);
  }
}

TEST_CASE("CreatePass names an unknown pass and lists the known ones", "[registry]") {
  absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass("automatic_mixed_precision");
  REQUIRE_FALSE(pass.ok());
  CHECK(pass.status().code() == absl::StatusCode::kNotFound);
  const std::string m(pass.status().message());
  CHECK_THAT(m, Catch::Contains("'automatic_mixed_precision'"));
  for (const PassInfo& info : RegisteredPasses()) CHECK_THAT(m, Catch::Contains(info.name));
}

TEST_CASE("CreatePass checks the options against the pass's specs", "[registry]") {
  absl::StatusOr<std::unique_ptr<Pass>> unknown = CreatePass("data_parallel", {{"ranks", "8"}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("'data_parallel'") && Catch::Contains("'ranks'") && Catch::Contains("world_size"));

  absl::StatusOr<std::unique_ptr<Pass>> bad = CreatePass("data_parallel", {{"world_size", "eight"}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("'world_size'") && Catch::Contains("an integer"));

  absl::StatusOr<std::unique_ptr<Pass>> good =
      CreatePass("data_parallel", {{"world_size", "4"}, {"bucket_mb", "0"}, {"network", "ib100"}});
  REQUIRE(good.ok());
  CHECK((*good)->name() == "data_parallel");
}

TEST_CASE("the communication passes declare the options their docs promise", "[registry]") {
  auto option_names = [](const PassInfo& info) {
    std::set<std::string> out;
    for (const OptionSpec& s : info.options) out.insert(s.name);
    return out;
  };
  const std::set<std::string> comm = {"world_size",     "bucket_mb",  "first_bucket_mb", "gradient_mb",
                                      "algorithm",      "network",    "bandwidth_gbps",  "latency_us",
                                      "comm_cpu_share", "ddp_cpu_us", "ddp_cpu_per_gradient_us",
                                      "gap_latency", "straggler_us", "queued_latency_us", "bucket_cpu_latency"};
  std::set<std::string> data_parallel = comm;
  data_parallel.insert("buffer_bytes");  // DDP's buffer broadcast: only a single-device graph lacks it
  data_parallel.insert("broadcast_latency");  // and what that broadcast adds to a step
  data_parallel.insert("cpu_factor");    // ranks sharing a host: a recorded DDP step already ran among them
  std::set<std::string> tensor_fusion = comm;
  tensor_fusion.insert("recorded_cpu_wait_us");  // what the recorded all-reduces took: only a recorded step has them
  tensor_fusion.insert("unprofiled_cpu_wait_us");  // and the same wait in the steps run without the profiler
  REQUIRE(FindPass("data_parallel") != nullptr);
  REQUIRE(FindPass("tensor_fusion") != nullptr);
  REQUIRE(FindPass("scale") != nullptr);
  CHECK(option_names(*FindPass("data_parallel")) == data_parallel);
  CHECK(option_names(*FindPass("tensor_fusion")) == tensor_fusion);
  CHECK(option_names(*FindPass("scale")) ==
        std::set<std::string>{"gpu", "cpu", "comm", "copy", "pattern", "factor", "phase"});
}
