// Cost models for collective communication: alpha-beta models of ring and
// tree all-reduce, all-gather, reduce-scatter and all-to-all, network presets,
// and fitting a network's alpha and beta from collectives a trace recorded.
//
// Notation (PRIOR_ART.md): N ranks, message of `bytes`, per-step latency
// alpha (seconds), bandwidth beta (bytes per second).
//   ring all-reduce   2(N-1) alpha + 2 (N-1)/N bytes / beta
//   tree all-reduce   2 log2(N) alpha + 2 bytes / beta   (pipelined, large messages)
//   all-gather, reduce-scatter   (N-1) alpha + (N-1)/N bytes / beta   (bytes = full buffer)
//   all-to-all        (N-1) alpha + (N-1)/N bytes / beta
// With N = 1 every collective costs nothing.
#ifndef DAYDREAM_COST_COLLECTIVES_H_
#define DAYDREAM_COST_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/base/time.h"
#include "daydream/graph/graph.h"

namespace daydream {

enum class Collective : uint8_t { kAllReduce = 0, kAllGather, kReduceScatter, kAllToAll, kBroadcast };
enum class CollectiveAlgorithm : uint8_t { kRing = 0, kTree };

std::string_view CollectiveName(Collective c);
absl::StatusOr<Collective> ParseCollective(std::string_view name);
absl::StatusOr<CollectiveAlgorithm> ParseCollectiveAlgorithm(std::string_view name);

struct NetworkModel {
  double alpha_s = 5e-6;            // latency per algorithm step
  double beta_bytes_per_s = 12.5e9;  // bandwidth per link, one direction
  std::string source = "default";   // preset name, "trace fit", "calibrated", "user"
};

// Named presets: "nvlink" (NVLink 3, ~150 GB/s per direction), "pcie"
// (PCIe 4 x16 through the host, ~12 GB/s), "ib100" (100 Gb/s InfiniBand),
// "ethernet10" (10 Gb/s Ethernet). Error lists the names on a miss.
absl::StatusOr<NetworkModel> NetworkPreset(std::string_view name);
std::vector<std::string> NetworkPresetNames();

// Time of one collective of `bytes` among `world_size` ranks.
TimeNs CollectiveTime(Collective collective, CollectiveAlgorithm algorithm, int64_t bytes, int world_size,
                      const NetworkModel& net);

// One observed collective, as a trace recorded it.
struct CollectiveSample {
  Collective collective = Collective::kAllReduce;
  int64_t bytes = 0;
  int world_size = 0;
  TimeNs duration_ns = 0;
};

// Fits alpha and beta (ring algorithm) to observed collectives by least
// squares on the model's two terms (durations include waiting for peers,
// which the fit absorbs, as dPRO's k*size + b does). Needs at least two
// samples with different sizes; alpha and beta stay positive.
absl::StatusOr<NetworkModel> FitNetwork(const std::vector<CollectiveSample>& samples);

// The collectives a graph recorded (NCCL kernels, gloo ranges) with known
// bytes, as samples among `world_size` ranks (the graph's world size when
// <= 0).
std::vector<CollectiveSample> CollectiveSamples(const Graph& graph, int world_size = 0);

// Which collective a task's name describes ("ncclKernel_AllReduce_...",
// "ncclDevKernel_AllGather_...", "gloo:all_reduce", "SendRecv" -> all-to-all).
absl::StatusOr<Collective> CollectiveOfTaskName(std::string_view name);

}  // namespace daydream

#endif  // DAYDREAM_COST_COLLECTIVES_H_
