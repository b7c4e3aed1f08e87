// Sorting for data that is nearly in order already: trace events per thread
// arrive in start order but for a handful of exceptions, and several sorted
// lists are often concatenated before being ordered as one.
#ifndef DAYDREAM_BASE_SORT_H_
#define DAYDREAM_BASE_SORT_H_

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace daydream {

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
      if (static_cast<Diff>(bounds.size()) > n / 32 + 1) {
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

}  // namespace daydream

#endif  // DAYDREAM_BASE_SORT_H_
