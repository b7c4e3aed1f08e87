// Tests for daydream/base/waiting_counts.h.
#include "daydream/base/waiting_counts.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

namespace {

// What WaitingCounts must give, by counting.
std::vector<int32_t> Reference(const std::vector<TimeNs>& arrive, const std::vector<TimeNs>& start) {
  std::vector<int32_t> out(arrive.size(), 0);
  for (size_t j = 0; j < arrive.size(); ++j) {
    for (size_t i = 0; i < j; ++i) out[j] += start[i] > arrive[j] ? 1 : 0;
  }
  return out;
}

// `n` items arriving in order over `lanes` lanes; with `in_order`, each
// lane starts its items in arrival order (as a GPU stream does), else in
// any order.
struct Case {
  std::vector<TimeNs> arrive, start;
  std::vector<int32_t> lane;
};
Case RandomCase(std::mt19937& rng, size_t n, int32_t lanes, bool in_order) {
  Case c;
  std::uniform_int_distribution<int32_t> pick_lane(0, lanes - 1);
  std::uniform_int_distribution<TimeNs> step(0, 3), delay(0, 40);
  std::vector<TimeNs> lane_free(static_cast<size_t>(lanes), 0);
  TimeNs t = 0;
  for (size_t j = 0; j < n; ++j) {
    t += step(rng);
    const int32_t l = pick_lane(rng);
    TimeNs s = t + delay(rng);
    if (in_order) s = std::max(s, lane_free[static_cast<size_t>(l)]);
    lane_free[static_cast<size_t>(l)] = s;
    c.arrive.push_back(t);
    c.start.push_back(s);
    c.lane.push_back(l);
  }
  return c;
}

}  // namespace

TEST_CASE("WaitingCounts counts the earlier items not started at each arrival", "[waiting_counts]") {
  // Lane 0 starts its items at 10, 12, 30; lane 1 at 5 and 31.
  const std::vector<TimeNs> arrive = {0, 1, 2, 11, 12, 30};
  const std::vector<TimeNs> start = {10, 5, 12, 30, 31, 40};
  const std::vector<int32_t> lane = {0, 1, 0, 0, 1, 1};
  // At 11: items 0 (10) and 1 (5) started, 2 (12) waits. At 12: 2 started.
  // At 30: 3 (30) started, 4 (31) waits.
  CHECK(WaitingCounts(arrive, start, lane, 2) == std::vector<int32_t>{0, 1, 2, 1, 1, 1});
  CHECK(WaitingCounts({}, {}, {}, 3).empty());
}

TEST_CASE("WaitingCounts agrees with counting, per lane in order, out of order and with many lanes",
          "[waiting_counts]") {
  std::mt19937 rng(5);
  for (const int32_t lanes : {1, 3, 16, 40}) {
    for (const bool in_order : {true, false}) {
      for (int round = 0; round < 20; ++round) {
        const Case c = RandomCase(rng, 300, lanes, in_order);
        INFO(lanes << " lanes, in order " << in_order << ", round " << round);
        REQUIRE(WaitingCounts(c.arrive, c.start, c.lane, lanes) == Reference(c.arrive, c.start));
      }
    }
  }
}
