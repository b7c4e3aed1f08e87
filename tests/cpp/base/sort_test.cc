// Tests for daydream/base/sort.h.
#include "daydream/base/sort.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

namespace {

// (key, original position): equal keys stay told apart by the position.
using Item = std::pair<int32_t, int32_t>;

std::vector<Item> Numbered(const std::vector<int32_t>& keys) {
  std::vector<Item> items;
  for (size_t i = 0; i < keys.size(); ++i) items.emplace_back(keys[i], static_cast<int32_t>(i));
  return items;
}

// SortRuns, and the order MergedOrder gives without moving the items.
void CheckSortsLikeStdSort(const std::vector<int32_t>& keys) {
  std::vector<Item> got = Numbered(keys), want = got;
  SortRuns(got, std::less<Item>());
  std::sort(want.begin(), want.end());
  CHECK(got == want);
  const std::vector<Item> items = Numbered(keys);
  std::vector<int32_t> order = {42};  // replaced
  MergedOrder(items, std::less<Item>(), &order);
  std::vector<Item> ordered;
  for (int32_t i : order) ordered.push_back(items[static_cast<size_t>(i)]);
  CHECK(ordered == want);
}

}  // namespace

TEST_CASE("SortRuns and MergedOrder order empty, single and already sorted input", "[sort]") {
  CheckSortsLikeStdSort({});
  CheckSortsLikeStdSort({5});
  CheckSortsLikeStdSort({1, 2, 2, 3, 9});
}

TEST_CASE("SortRuns and MergedOrder merge a few ascending runs, equal keys across runs included", "[sort]") {
  CheckSortsLikeStdSort({1, 4, 7, 2, 5, 8, 0, 3, 6, 9, 4, 4});
  // Concatenated sorted lists of different lengths (an odd number of runs).
  std::vector<int32_t> keys;
  for (int run = 0; run < 7; ++run) {
    for (int i = 0; i < 40 + 13 * run; ++i) keys.push_back(i * (run + 1) % 97);
    std::sort(keys.end() - (40 + 13 * run), keys.end());
  }
  CheckSortsLikeStdSort(keys);
  // Nearly sorted: a handful of events out of place.
  std::vector<int32_t> near(5000);
  for (size_t i = 0; i < near.size(); ++i) near[i] = static_cast<int32_t>(i);
  std::swap(near[10], near[4000]);
  std::swap(near[2500], near[2501]);
  CheckSortsLikeStdSort(near);
}

TEST_CASE("SortRuns and MergedOrder order input of many runs (the std::sort fallback)", "[sort]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> key(0, 50);
  for (int n : {2, 3, 31, 64, 1000}) {
    std::vector<int32_t> keys(static_cast<size_t>(n));
    for (int32_t& k : keys) k = key(rng);
    INFO(n);
    CheckSortsLikeStdSort(keys);
  }
  std::vector<int32_t> descending(300);
  for (size_t i = 0; i < descending.size(); ++i) descending[i] = static_cast<int32_t>(300 - i);
  CheckSortsLikeStdSort(descending);
}

TEST_CASE("MergedOrder takes a run's elements while they come before every other run's head", "[sort]") {
  // Three runs of 40 (few enough runs for the heap merge, not the std::sort
  // fallback) that interleave in bursts and share keys: only the keys are
  // compared, so equal keys come in any run's order, each index once.
  std::vector<int32_t> keys;
  for (int run = 0; run < 3; ++run) {
    for (int i = 0; i < 40; ++i) keys.push_back((i / 4) * 3 + run % 2);  // 0,0,0,0,3,3,...
  }
  std::vector<int32_t> order;
  MergedOrder(keys, std::less<int32_t>(), &order);
  REQUIRE(order.size() == keys.size());
  std::vector<int32_t> ordered, seen = order;
  for (int32_t i : order) ordered.push_back(keys[static_cast<size_t>(i)]);
  std::vector<int32_t> want = keys;
  std::sort(want.begin(), want.end());
  CHECK(ordered == want);
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == static_cast<int32_t>(i));
  // Ties between runs broken by position: the one order there is.
  const std::vector<Item> items = Numbered(keys);
  MergedOrder(items, std::less<Item>(), &order);
  std::vector<int32_t> by_position(keys.size());
  for (size_t i = 0; i < by_position.size(); ++i) by_position[i] = static_cast<int32_t>(i);
  std::stable_sort(by_position.begin(), by_position.end(),
                   [&](int32_t x, int32_t y) { return keys[static_cast<size_t>(x)] < keys[static_cast<size_t>(y)]; });
  CHECK(order == by_position);
}
