// Sorting for data that is nearly in order already: trace events per thread
// arrive in start order but for a handful of exceptions, and several sorted
// lists are often concatenated before being ordered as one.
#ifndef DAYDREAM_BASE_SORT_H_
#define DAYDREAM_BASE_SORT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace daydream {

// Whether `runs` maximal runs among `n` elements are too many to merge (more
// than one per 32 elements): SortRuns and MergedOrder then use std::sort.
inline bool TooManyRuns(size_t runs, size_t n) { return runs > n / 32 + 1; }

// Sorts [first, last) by `less` (a strict weak order). Finds the maximal
// non-descending runs and merges them pairwise, so input of R runs costs
// O(n log R): one pass when it is sorted already. Input with many runs (more
// than one per 32 elements) goes to std::sort instead. Not stable: give
// `less` a tie-break where the order of equal elements matters.
template <typename It, typename Less>
void SortRuns(It first, It last, Less less) {
  using Diff = typename std::iterator_traits<It>::difference_type;
  const Diff n = std::distance(first, last);
  if (n < 2) return;
  std::vector<Diff> bounds{0};
  for (Diff i = 1; i < n; ++i) {
    if (less(first[i], first[i - 1])) {
      bounds.push_back(i);
      if (TooManyRuns(bounds.size(), static_cast<size_t>(n))) {
        std::sort(first, last, less);
        return;
      }
    }
  }
  bounds.push_back(n);
  const size_t runs = bounds.size() - 1;
  for (size_t width = 1; width < runs; width *= 2) {
    for (size_t i = 0; i + width < runs; i += 2 * width) {
      const size_t end = std::min(i + 2 * width, runs);
      std::inplace_merge(first + bounds[i], first + bounds[i + width], first + bounds[end], less);
    }
  }
}

template <typename T, typename Less>
void SortRuns(std::vector<T>& v, Less less) {
  SortRuns(v.begin(), v.end(), less);
}

// The order of `v` by `less` (a strict weak order), as indexes into it in
// *order, the elements left where they are: for large elements read once
// in that order, cheaper than moving them. The maximal non-descending runs
// are merged through a heap of their heads, a run's elements taken while
// they come before every other head, so R runs cost O(n log R) and one
// pass over `v`; input with many runs (more than one per 32 elements) is
// ordered with std::sort instead. Not stable, as SortRuns. `v` holds fewer
// than 2^31 elements (the indexes are int32_t, as the graph's ids).
template <typename T, typename Less>
void MergedOrder(const std::vector<T>& v, Less less, std::vector<int32_t>* order) {
  const size_t n = v.size();
  order->clear();
  order->reserve(n);
  std::vector<std::pair<size_t, size_t>> heads;  // a run's next element and its end
  size_t start = 0;
  for (size_t i = 1; i <= n; ++i) {
    if (i == n || less(v[i], v[i - 1])) {
      heads.emplace_back(start, i);
      start = i;
      if (TooManyRuns(heads.size(), n)) {
        order->resize(n);
        for (size_t k = 0; k < n; ++k) (*order)[k] = static_cast<int32_t>(k);
        std::sort(order->begin(), order->end(), [&](int32_t a, int32_t b) {
          return less(v[static_cast<size_t>(a)], v[static_cast<size_t>(b)]);
        });
        return;
      }
    }
  }
  auto later = [&](const std::pair<size_t, size_t>& a, const std::pair<size_t, size_t>& b) {
    return less(v[b.first], v[a.first]);
  };
  std::make_heap(heads.begin(), heads.end(), later);
  while (!heads.empty()) {
    std::pop_heap(heads.begin(), heads.end(), later);
    auto& [at, end] = heads.back();
    const T* next = heads.size() > 1 ? &v[heads.front().first] : nullptr;
    do {
      order->push_back(static_cast<int32_t>(at));
    } while (++at < end && (next == nullptr || !less(*next, v[at])));
    if (at < end) {
      std::push_heap(heads.begin(), heads.end(), later);
    } else {
      heads.pop_back();
    }
  }
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_SORT_H_
