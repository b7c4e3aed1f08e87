// Tests for daydream/cost/collectives.h: the alpha-beta formulas, presets,
// parsing, fitting a network to observed collectives, and recognizing
// collectives by their kernel names.
#include "daydream/cost/collectives.h"

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

namespace {

// alpha = 1 us, beta = 1 GB/s: one byte costs one nanosecond, one step 1000 ns.
NetworkModel UnitNet() {
  NetworkModel net;
  net.alpha_s = 1e-6;
  net.beta_bytes_per_s = 1e9;
  net.source = "test";
  return net;
}

constexpr Collective kAllCollectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                          Collective::kReduceScatter, Collective::kAllToAll,
                                          Collective::kBroadcast};

}  // namespace

TEST_CASE("ring all-reduce costs 2(N-1) alpha + 2(N-1)/N bytes/beta", "[cost]") {
  const NetworkModel net = UnitNet();
  // N = 4: 6 steps of 1000 ns + 1.5 * 1'000'000 bytes at 1 ns/byte.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, 1'000'000, 4, net) == 6'000 + 1'500'000);
  // N = 2: 2 steps + 1.0 * bytes.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, 4'000, 2, net) == 2'000 + 4'000);
  // Zero bytes: latency only.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, 0, 8, net) == 14'000);
}

TEST_CASE("tree all-reduce costs 2 log2(N) alpha + 2 bytes/beta", "[cost]") {
  const NetworkModel net = UnitNet();
  // N = 8: 6 steps + 2 * bytes.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kTree, 1'000'000, 8, net) == 6'000 + 2'000'000);
  // N = 2: 2 steps + 2 * bytes.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kTree, 1'000, 2, net) == 2'000 + 2'000);
  // Tree wins on latency at scale, ring on bandwidth.
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kTree, 8, 64, net) <
        CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, 8, 64, net));
  CHECK(CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kTree, 1 << 30, 64, net) >
        CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, 1 << 30, 64, net));
}

TEST_CASE("all-gather, reduce-scatter and all-to-all cost (N-1) alpha + (N-1)/N bytes/beta", "[cost]") {
  const NetworkModel net = UnitNet();
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll}) {
    INFO(CollectiveName(c));
    // N = 4: 3 steps + 0.75 * bytes.
    CHECK(CollectiveTime(c, CollectiveAlgorithm::kRing, 4'000'000, 4, net) == 3'000 + 3'000'000);
    // The algorithm only matters for all-reduce.
    CHECK(CollectiveTime(c, CollectiveAlgorithm::kTree, 4'000'000, 4, net) == 3'000 + 3'000'000);
  }
}

TEST_CASE("broadcast costs log2(N) alpha + bytes/beta", "[cost]") {
  const NetworkModel net = UnitNet();
  CHECK(CollectiveTime(Collective::kBroadcast, CollectiveAlgorithm::kRing, 1'000'000, 8, net) == 3'000 + 1'000'000);
}

TEST_CASE("every collective among one rank costs nothing", "[cost]") {
  const NetworkModel net = UnitNet();
  for (Collective c : kAllCollectives) {
    for (CollectiveAlgorithm a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kTree}) {
      INFO(CollectiveName(c));
      CHECK(CollectiveTime(c, a, 100'000'000, 1, net) == 0);
      CHECK(CollectiveTime(c, a, 100'000'000, 0, net) == 0);
    }
  }
}

TEST_CASE("collective time grows with bytes and shrinks with bandwidth", "[cost]") {
  NetworkModel slow = UnitNet();
  NetworkModel fast = UnitNet();
  fast.beta_bytes_per_s = 10e9;
  for (Collective c : kAllCollectives) {
    INFO(CollectiveName(c));
    const TimeNs small = CollectiveTime(c, CollectiveAlgorithm::kRing, 1 << 20, 8, slow);
    const TimeNs big = CollectiveTime(c, CollectiveAlgorithm::kRing, 1 << 24, 8, slow);
    CHECK(small < big);
    CHECK(CollectiveTime(c, CollectiveAlgorithm::kRing, 1 << 24, 8, fast) < big);
  }
}

TEST_CASE("network presets resolve by name and a miss lists the names", "[cost]") {
  const std::vector<std::string> names = NetworkPresetNames();
  CHECK(names == std::vector<std::string>{"nvlink", "pcie", "ib100", "ethernet10"});
  for (const std::string& name : names) {
    INFO(name);
    absl::StatusOr<NetworkModel> net = NetworkPreset(name);
    REQUIRE(net.ok());
    CHECK(net->source == name);
    CHECK(net->alpha_s > 0);
    CHECK(net->beta_bytes_per_s > 0);
  }
  // The figures the presets promise.
  CHECK(NetworkPreset("nvlink")->beta_bytes_per_s == Approx(150e9));
  CHECK(NetworkPreset("ib100")->beta_bytes_per_s == Approx(12.5e9));
  CHECK(NetworkPreset("ethernet10")->beta_bytes_per_s == Approx(1.25e9));
  CHECK(NetworkPreset("nvlink")->beta_bytes_per_s > NetworkPreset("pcie")->beta_bytes_per_s);

  absl::StatusOr<NetworkModel> bad = NetworkPreset("infiniband");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string message(bad.status().message());
  CHECK_THAT(message, Catch::Contains("infiniband"));
  for (const std::string& name : names) CHECK_THAT(message, Catch::Contains(name));
}

TEST_CASE("collective and algorithm names parse and round-trip", "[cost]") {
  for (Collective c : kAllCollectives) {
    absl::StatusOr<Collective> parsed = ParseCollective(CollectiveName(c));
    REQUIRE(parsed.ok());
    CHECK(*parsed == c);
  }
  CHECK(CollectiveName(Collective::kAllReduce) == "all_reduce");
  CHECK(CollectiveName(Collective::kAllToAll) == "all_to_all");

  absl::StatusOr<Collective> bad = ParseCollective("allreduce");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("allreduce") && Catch::Contains("all_reduce"));

  CHECK(*ParseCollectiveAlgorithm("ring") == CollectiveAlgorithm::kRing);
  CHECK(*ParseCollectiveAlgorithm("tree") == CollectiveAlgorithm::kTree);
  absl::StatusOr<CollectiveAlgorithm> bad_algorithm = ParseCollectiveAlgorithm("butterfly");
  REQUIRE_FALSE(bad_algorithm.ok());
  CHECK(bad_algorithm.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad_algorithm.status().message()),
             Catch::Contains("butterfly") && Catch::Contains("ring") && Catch::Contains("tree"));
}

TEST_CASE("FitNetwork recovers alpha and beta from collectives the model generated", "[cost]") {
  NetworkModel truth;
  truth.alpha_s = 7e-6;
  truth.beta_bytes_per_s = 20e9;
  std::vector<CollectiveSample> samples;
  SECTION("ring all-reduces of one world size") {
    for (int64_t bytes = 1 << 10; bytes <= (int64_t{1} << 28); bytes *= 4) {
      samples.push_back({Collective::kAllReduce, bytes, 8,
                         CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, bytes, 8, truth)});
    }
  }
  SECTION("mixed collectives and world sizes") {
    int world = 2;
    for (int64_t bytes = 1 << 12; bytes <= (int64_t{1} << 27); bytes *= 2) {
      for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kAllToAll}) {
        samples.push_back({c, bytes, world, CollectiveTime(c, CollectiveAlgorithm::kRing, bytes, world, truth)});
      }
      world = world == 16 ? 2 : world * 2;
    }
  }
  absl::StatusOr<NetworkModel> fit = FitNetwork(samples);
  REQUIRE(fit.ok());
  CHECK(fit->alpha_s == Approx(truth.alpha_s).epsilon(1e-4));
  CHECK(fit->beta_bytes_per_s == Approx(truth.beta_bytes_per_s).epsilon(1e-6));
  CHECK(fit->source == "trace fit");
  // The fitted model reproduces every sample (to the nanosecond rounding).
  for (const CollectiveSample& s : samples) {
    CHECK(std::llabs(CollectiveTime(s.collective, CollectiveAlgorithm::kRing, s.bytes, s.world_size, *fit) -
                     s.duration_ns) <= 2);
  }
}

TEST_CASE("FitNetwork needs collectives of two sizes among more than one rank", "[cost]") {
  const NetworkModel net = UnitNet();
  auto sample = [&](int64_t bytes, int world) {
    return CollectiveSample{Collective::kAllReduce, bytes, world,
                            CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, bytes, world, net) +
                                (world <= 1 ? 1000 : 0)};
  };
  std::vector<std::vector<CollectiveSample>> unusable = {
      {},
      {sample(1 << 20, 8)},
      {sample(1 << 20, 8), sample(1 << 20, 8), sample(1 << 20, 4)},  // one size
      {sample(1 << 10, 1), sample(1 << 20, 1)},                       // one rank
      {sample(1 << 10, 8), CollectiveSample{Collective::kAllReduce, 0, 8, 100}},  // no bytes
      {sample(1 << 10, 8), CollectiveSample{Collective::kAllReduce, 1 << 20, 8, 0}},  // no duration
  };
  for (size_t i = 0; i < unusable.size(); ++i) {
    INFO("case " << i);
    absl::StatusOr<NetworkModel> fit = FitNetwork(unusable[i]);
    REQUIRE_FALSE(fit.ok());
    CHECK(fit.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(fit.status().message()), Catch::Contains("two sizes"));
  }
}

TEST_CASE("FitNetwork keeps alpha and beta positive when the data disagree with a term", "[cost]") {
  SECTION("bandwidth only: no latency in the samples") {
    NetworkModel truth;
    truth.alpha_s = 0;
    truth.beta_bytes_per_s = 10e9;
    std::vector<CollectiveSample> samples;
    for (int64_t bytes = 1 << 16; bytes <= (1 << 26); bytes *= 4) {
      samples.push_back({Collective::kAllReduce, bytes, 4,
                         CollectiveTime(Collective::kAllReduce, CollectiveAlgorithm::kRing, bytes, 4, truth)});
    }
    absl::StatusOr<NetworkModel> fit = FitNetwork(samples);
    REQUIRE(fit.ok());
    CHECK(fit->alpha_s > 0);
    CHECK(fit->alpha_s < 1e-7);
    CHECK(fit->beta_bytes_per_s == Approx(10e9).epsilon(1e-3));
  }
  SECTION("larger messages finishing sooner: no bandwidth term") {
    std::vector<CollectiveSample> samples = {
        {Collective::kAllReduce, 1 << 10, 8, 90'000},
        {Collective::kAllReduce, 1 << 20, 8, 60'000},
        {Collective::kAllReduce, 1 << 22, 8, 30'000},
    };
    absl::StatusOr<NetworkModel> fit = FitNetwork(samples);
    REQUIRE(fit.ok());
    CHECK(fit->alpha_s > 0);
    CHECK(fit->beta_bytes_per_s > 0);
    CHECK(std::isfinite(fit->beta_bytes_per_s));
    // Latency alone explains the mean: 14 steps of alpha ~ 60 us.
    CHECK(14 * fit->alpha_s == Approx(60e-6).epsilon(0.01));
  }
  SECTION("any positive samples give a positive, finite model") {
    std::vector<CollectiveSample> samples = {
        {Collective::kAllGather, 1 << 12, 2, 5'000'000},
        {Collective::kAllReduce, 1 << 24, 16, 10},
        {Collective::kAllToAll, 1 << 16, 4, 77'777},
    };
    absl::StatusOr<NetworkModel> fit = FitNetwork(samples);
    REQUIRE(fit.ok());
    CHECK(fit->alpha_s > 0);
    CHECK(fit->beta_bytes_per_s > 0);
    CHECK(std::isfinite(fit->alpha_s));
    CHECK(std::isfinite(fit->beta_bytes_per_s));
  }
}

TEST_CASE("CollectiveOfTaskName reads real NCCL and gloo names", "[cost]") {
  struct Case {
    const char* name;
    Collective collective;
  };
  const Case cases[] = {
      // As recorded in ../shared/traces (hta-a100-2rank-nccl, param-dlrm-v100-8rank, astra-megatron-tp8-a100).
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllReduce},
      {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", Collective::kBroadcast},
      {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllToAll},
      {"ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllReduce},
      // Older and other spellings.
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", Collective::kAllReduce},
      {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllReduce},
      {"ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllGather},
      {"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", Collective::kAllGather},
      {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
       Collective::kReduceScatter},
      {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", Collective::kAllToAll},
      {"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", Collective::kAllToAll},
      {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclWorkElem)", Collective::kBroadcast},
      {"gloo:all_reduce", Collective::kAllReduce},
      {"gloo:all_gather", Collective::kAllGather},
      {"nccl:all_to_all", Collective::kAllToAll},
      {"nccl:_all_gather_base", Collective::kAllGather},
      {"nccl:_reduce_scatter_base", Collective::kReduceScatter},
      {"nccl:broadcast", Collective::kBroadcast},
      {"c10d::allreduce_", Collective::kAllReduce},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    absl::StatusOr<Collective> got = CollectiveOfTaskName(c.name);
    REQUIRE(got.ok());
    CHECK(*got == c.collective);
  }
  for (const char* name : {"volta_sgemm_128x64_nn", "aten::add_", "cudaLaunchKernel", ""}) {
    INFO(name);
    absl::StatusOr<Collective> got = CollectiveOfTaskName(name);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().code() == absl::StatusCode::kNotFound);
  }
}

TEST_CASE("CollectiveSamples takes collective tasks with known bytes", "[cost]") {
  Graph g;
  g.world_size = 4;
  const int32_t stream =
      g.AddResource(Resource{ResourceKind::kGpuStream, 0, 7, g.strings.Intern("stream 7")});
  auto add = [&](const std::string& name, TaskKind kind, int64_t bytes, TimeNs duration) {
    Task t;
    t.name = g.strings.Intern(name);
    t.kind = kind;
    t.resource = stream;
    t.bytes = bytes;
    t.duration_ns = duration;
    return g.AddTask(t);
  };
  add("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", TaskKind::kCollective, 4096, 10'000);
  add("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", TaskKind::kCollective, 8192,
      20'000);
  add("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", TaskKind::kCollective, -1, 30'000);  // no size
  add("my_custom_comm_kernel", TaskKind::kCollective, 4096, 40'000);                              // unknown
  add("allreduce_lookalike_gemm", TaskKind::kKernel, 4096, 50'000);                               // not comm

  std::vector<CollectiveSample> samples = CollectiveSamples(g);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].collective == Collective::kAllReduce);
  CHECK(samples[0].bytes == 4096);
  CHECK(samples[0].world_size == 4);  // the graph's
  CHECK(samples[0].duration_ns == 10'000);
  CHECK(samples[1].collective == Collective::kAllGather);
  CHECK(samples[1].bytes == 8192);
  CHECK(samples[1].duration_ns == 20'000);

  samples = CollectiveSamples(g, 16);
  REQUIRE(samples.size() == 2);
  CHECK(samples[0].world_size == 16);
  CHECK(samples[1].world_size == 16);
}
