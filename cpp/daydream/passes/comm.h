// Communication passes: data_parallel (N-way data parallelism from a
// single-device graph) and tensor_fusion (gradient bucketing), built on one
// mechanism: group each iteration's gradients into buckets in the order they
// become ready, insert one all-reduce per bucket on a network resource, started
// when its last gradient is ready, and make the optimizer step wait for all of
// them. Costs come from cost/collectives.h.
#ifndef DAYDREAM_PASSES_COMM_H_
#define DAYDREAM_PASSES_COMM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daydream/cost/collectives.h"
#include "daydream/graph/graph.h"
#include "daydream/passes/pass.h"

namespace daydream {

// A bucket_cpu_latency curve: (gap us, us) points with increasing gaps, for
// iterations of `buckets` buckets (0: of any count).
struct BucketLatencyCurve {
  int64_t buckets = 0;
  std::vector<std::pair<double, double>> points;
};

// How to communicate gradients.
struct AllReducePlan {
  int world_size = 8;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NetworkModel network;
  double bucket_mb = 25;       // 0: one all-reduce per gradient
  double first_bucket_mb = 1;  // DDP's first bucket is smaller (1 MB) so communication starts early
  // Fraction of each all-reduce's time that it takes from the CPU thread that
  // issued it (0..1): 0 where collectives run beside compute (NCCL on its own
  // stream and links), more where they need the cores that compute (gloo on
  // CPU ranks with no spare core; daydream.calibrate_network measures it).
  double comm_cpu_share = 0;
  // DDP's own CPU work on the issuing thread, in microseconds: per iteration
  // (on its first bucket) and per gradient (on the gradient's bucket), before
  // the bucket's all-reduce (daydream.calibrate_network measures both on gloo).
  double ddp_cpu_us = 0;
  double ddp_cpu_per_gradient_us = 0;
  // The call that issues each bucket's all-reduce (c10d::allreduce_ on the
  // issuing thread), in nanoseconds, with DDP's work before the all-reduce:
  // tensor_fusion takes it from the recorded calls it removes. 0: none.
  TimeNs issue_call_ns = 0;
  // Extra time of an all-reduce after a stretch of compute: (gap us, extra
  // us) points, gaps increasing; linear between them from (0, 0), flat after
  // the last (GapExtraUs). Empty: none.
  std::vector<std::pair<double, double>> gap_latency;
  // Expected wait per iteration for the slowest rank, in microseconds, on
  // the iteration's first all-reduce.
  double straggler_us = 0;
  // Per-step latency, in seconds, of an all-reduce that is ready while the
  // one before it in the iteration still runs (queued behind it: gloo's
  // threads are awake, and the handoff costs less than after an idle
  // stretch); it then pays no gap_latency either. Negative: the network's
  // latency for every all-reduce.
  double queued_alpha_s = -1;
  // Non-empty: every all-reduce's latency is paid by the thread that issues
  // it, before the all-reduce, and the network takes only the bandwidth
  // term (and the first's gap_latency); none is queued. The iteration's
  // first pays the network's latency; each later one its curves' (gap us,
  // us) points (as gap_latency's, but flat before the first) at the compute
  // since the bucket before it was ready, for the iteration's bucket count
  // (BucketLatencyUs). Empty: the latencies on the network.
  std::vector<BucketLatencyCurve> bucket_cpu_latency;

  bool LatencyOnThread() const { return !bucket_cpu_latency.empty(); }
  // Whether the collectives take time from the thread that issues them (a
  // CPU share, or their latencies): else they run beside compute.
  bool TakesThreadTime() const { return comm_cpu_share > 0 || LatencyOnThread(); }
  // An all-reduce's latency term on the plan's network (its time at 0 bytes).
  TimeNs AllReduceLatencyNs() const {
    return CollectiveTime(Collective::kAllReduce, algorithm, 0, world_size, network);
  }
};

// The extra time, in microseconds, `points` (AllReducePlan::gap_latency) give
// a collective that follows `gap_us` of compute.
double GapExtraUs(const std::vector<std::pair<double, double>>& points, double gap_us);

// What a later bucket's all-reduce costs the thread that issues it, in
// microseconds, after `gap_us` of compute in an iteration of `buckets`
// buckets: each curve's points at the gap (held at its first point's value
// below it); between the curves of the bucket counts on either side,
// linear in 1 / (buckets - 1), as a step's extra a + b (buckets - 1) over
// buckets - 1 is; outside them, the nearest curve's.
double BucketLatencyUs(const std::vector<BucketLatencyCurve>& curves, size_t buckets, double gap_us);

// bucket_cpu_latency's text: "GAP_US:US;..." (one curve for every bucket
// count) or "K@GAP_US:US;...|K@..." (a curve per bucket count K >= 2,
// increasing). Error: a bad curve or point.
absl::StatusOr<std::vector<BucketLatencyCurve>> ParseBucketLatency(const std::string& text);

// Gradient buckets of one iteration: lists of tensor ids in ready order,
// bucketed as DDP does (a bucket closes once it holds at least its cap:
// first_bucket_mb for the first, bucket_mb after; bucket_mb 0: one gradient
// per bucket).
std::vector<std::vector<int32_t>> BucketGradients(const Graph& graph, int32_t iteration,
                                                  const std::vector<int32_t>& gradients, double bucket_mb,
                                                  double first_bucket_mb);

// Pass infos for the registry.
PassInfo DataParallelPassInfo();
PassInfo TensorFusionPassInfo();

}  // namespace daydream

#endif  // DAYDREAM_PASSES_COMM_H_
