#include "daydream/cost/collectives.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "daydream/base/strings.h"
#include "daydream/base/time.h"

namespace daydream {
namespace {

struct Preset {
  const char* name;
  double alpha_s;
  double beta_bytes_per_s;
};

// Per-link figures; collectives' (N-1)/N factors sit in CollectiveTime.
constexpr Preset kPresets[] = {
    {"nvlink", 3e-6, 150e9},      // NVLink 3 (A100): 300 GB/s bidirectional per GPU
    {"pcie", 8e-6, 12e9},         // PCIe 4.0 x16, through the host
    {"ib100", 5e-6, 12.5e9},      // 100 Gb/s InfiniBand
    {"ethernet10", 30e-6, 1.25e9},  // 10 Gb/s Ethernet
};

bool ContainsNoCase(std::string_view haystack, std::string_view needle) {
  return Contains(AsciiLower(haystack), AsciiLower(needle));
}

// The coefficients of alpha and of bytes/beta for one collective.
void Terms(Collective c, CollectiveAlgorithm algorithm, int n, double* steps, double* volume) {
  const double nn = static_cast<double>(n);
  switch (c) {
    case Collective::kAllReduce:
      if (algorithm == CollectiveAlgorithm::kTree) {
        *steps = 2.0 * std::log2(nn);
        *volume = 2.0;
      } else {
        *steps = 2.0 * (nn - 1.0);
        *volume = 2.0 * (nn - 1.0) / nn;
      }
      return;
    case Collective::kBroadcast:
      *steps = std::log2(nn);
      *volume = 1.0;
      return;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      *steps = nn - 1.0;
      *volume = (nn - 1.0) / nn;
      return;
  }
  *steps = 0;
  *volume = 0;
}

}  // namespace

std::string_view CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
  }
  return "all_reduce";
}

absl::StatusOr<Collective> ParseCollective(std::string_view name) {
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kAllToAll, Collective::kBroadcast}) {
    if (name == CollectiveName(c)) return c;
  }
  return absl::InvalidArgumentError(StrCat("unknown collective '", name,
                                           "' (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast)"));
}

absl::StatusOr<CollectiveAlgorithm> ParseCollectiveAlgorithm(std::string_view name) {
  if (name == "ring") return CollectiveAlgorithm::kRing;
  if (name == "tree") return CollectiveAlgorithm::kTree;
  return absl::InvalidArgumentError(StrCat("unknown algorithm '", name, "' (ring, tree)"));
}

std::vector<std::string> NetworkPresetNames() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.emplace_back(p.name);
  return out;
}

absl::StatusOr<NetworkModel> NetworkPreset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return NetworkModel{p.alpha_s, p.beta_bytes_per_s, p.name};
  }
  std::string names;
  for (const Preset& p : kPresets) StrAppend(&names, names.empty() ? "" : ", ", p.name);
  return absl::InvalidArgumentError(StrCat("unknown network preset '", name, "' (", names, ")"));
}

TimeNs CollectiveTime(Collective collective, CollectiveAlgorithm algorithm, int64_t bytes, int world_size,
                      const NetworkModel& net) {
  if (world_size <= 1 || bytes < 0) return 0;
  double steps = 0, volume = 0;
  Terms(collective, algorithm, world_size, &steps, &volume);
  const double seconds = steps * net.alpha_s + volume * static_cast<double>(bytes) / net.beta_bytes_per_s;
  return RoundNs(seconds * 1e9);
}

absl::StatusOr<NetworkModel> FitNetwork(const std::vector<CollectiveSample>& samples) {
  // Least squares of t = a*x + b*y with x = steps, y = volume*bytes
  // (a = alpha, b = 1/beta).
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  int used = 0;
  int64_t min_bytes = INT64_MAX, max_bytes = 0;
  for (const CollectiveSample& s : samples) {
    if (s.world_size <= 1 || s.bytes <= 0 || s.duration_ns <= 0) continue;
    double steps = 0, volume = 0;
    Terms(s.collective, CollectiveAlgorithm::kRing, s.world_size, &steps, &volume);
    const double x = steps, y = volume * static_cast<double>(s.bytes), t = static_cast<double>(s.duration_ns) * 1e-9;
    sxx += x * x, sxy += x * y, syy += y * y, sxt += x * t, syt += y * t;
    ++used;
    min_bytes = std::min(min_bytes, s.bytes);
    max_bytes = std::max(max_bytes, s.bytes);
  }
  if (used < 2 || max_bytes <= min_bytes) {
    return absl::FailedPreconditionError(StrCat(
        "cannot fit the network: need collectives of at least two sizes among more than one rank (found ", used,
        " usable)"));
  }
  const double det = sxx * syy - sxy * sxy;
  double a = 0, b = 0;
  if (std::fabs(det) > 1e-30) {
    a = (sxt * syy - syt * sxy) / det;
    b = (syt * sxx - sxt * sxy) / det;
  }
  // Keep the model physical: a negative term means the data do not support
  // it; refit the other term alone.
  if (a <= 0 || b <= 0) {
    if (b > 0 || (a <= 0 && syy > 0)) {
      a = 0;
      b = syt / syy;
    } else {
      b = 0;
      a = sxt / sxx;
    }
  }
  NetworkModel net;
  net.alpha_s = std::max(a, 1e-9);
  net.beta_bytes_per_s = b > 0 ? 1.0 / b : 1e15;
  net.source = "trace fit";
  return net;
}

absl::StatusOr<Collective> CollectiveOfTaskName(std::string_view name) {
  if (ContainsNoCase(name, "allreduce") || ContainsNoCase(name, "all_reduce")) return Collective::kAllReduce;
  if (ContainsNoCase(name, "allgather") || ContainsNoCase(name, "all_gather")) return Collective::kAllGather;
  if (ContainsNoCase(name, "reducescatter") || ContainsNoCase(name, "reduce_scatter")) {
    return Collective::kReduceScatter;
  }
  if (ContainsNoCase(name, "alltoall") || ContainsNoCase(name, "all_to_all") || ContainsNoCase(name, "sendrecv")) {
    return Collective::kAllToAll;
  }
  if (ContainsNoCase(name, "broadcast")) return Collective::kBroadcast;
  return absl::NotFoundError(StrCat("'", name, "' names no known collective"));
}

std::vector<CollectiveSample> CollectiveSamples(const Graph& graph, int world_size) {
  const int default_world = world_size > 0 ? world_size : graph.world_size;
  std::vector<CollectiveSample> out;
  for (const Task& t : graph.tasks) {
    if (t.kind != TaskKind::kCollective || t.bytes <= 0) continue;
    absl::StatusOr<Collective> c = CollectiveOfTaskName(graph.Str(t.name));
    if (!c.ok()) continue;
    out.push_back(CollectiveSample{*c, t.bytes, default_world, t.duration_ns});
  }
  return out;
}

}  // namespace daydream
