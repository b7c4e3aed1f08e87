// How many earlier items were still waiting when each item came: for items
// in order of arrival, the count of earlier ones that had not yet started.
// The builder counts the activities a GPU's launch queue held at each launch
// this way (LinkLaunchQueue).
#ifndef DAYDREAM_BASE_WAITING_COUNTS_H_
#define DAYDREAM_BASE_WAITING_COUNTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "daydream/base/time.h"

namespace daydream {

// Lanes beyond which WaitingCounts keeps a heap rather than a cursor each.
inline constexpr int32_t kMaxWaitingLanes = 16;

// For each item j, with arrival times `arrive` non-decreasing in j: the
// number of items i < j with start[i] > arrive[j]. Item j runs in lane
// lane[j] (0 <= lane < lanes).
//
// A lane that starts its items in the order they arrived (a GPU stream
// runs its activities in launch order) has its started items as a prefix
// of its arrivals, counted by a cursor that only moves on: a pass, and a
// look at each lane per item. Where some lane's starts are out of arrival
// order, or there are more than kMaxWaitingLanes lanes, a min-heap of the
// waiting starts gives the same counts at a heap operation per item.
inline std::vector<int32_t> WaitingCounts(const std::vector<TimeNs>& arrive, const std::vector<TimeNs>& start,
                                          const std::vector<int32_t>& lane, int32_t lanes) {
  const size_t n = arrive.size();
  std::vector<int32_t> waiting_at(n, 0);
  bool in_order = lanes <= kMaxWaitingLanes;
  std::vector<std::vector<TimeNs>> starts(in_order ? static_cast<size_t>(lanes) : 0);
  for (size_t j = 0; in_order && j < n; ++j) {
    std::vector<TimeNs>& list = starts[static_cast<size_t>(lane[j])];
    in_order = list.empty() || list.back() <= start[j];
    list.push_back(start[j]);
  }
  if (in_order) {
    std::vector<size_t> started(starts.size(), 0);
    std::vector<size_t> arrived(starts.size(), 0);
    int64_t waiting = 0;
    for (size_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < starts.size(); ++k) {
        size_t& c = started[k];
        while (c < arrived[k] && starts[k][c] <= arrive[j]) {
          ++c;
          --waiting;
        }
      }
      waiting_at[j] = static_cast<int32_t>(waiting);
      ++arrived[static_cast<size_t>(lane[j])];
      ++waiting;
    }
    return waiting_at;
  }
  std::priority_queue<TimeNs, std::vector<TimeNs>, std::greater<TimeNs>> waiting;
  for (size_t j = 0; j < n; ++j) {
    while (!waiting.empty() && waiting.top() <= arrive[j]) waiting.pop();
    waiting_at[j] = static_cast<int32_t>(waiting.size());
    waiting.push(start[j]);
  }
  return waiting_at;
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_WAITING_COUNTS_H_
