// Integer arithmetic on sizes a trace claims: a hostile or broken file can
// claim anything (10^18 elements of 8 bytes), so products saturate instead
// of overflowing (undefined behaviour).
#ifndef DAYDREAM_BASE_MATH_H_
#define DAYDREAM_BASE_MATH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace daydream {

// a * b, saturated at the int64 range.
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) == (b < 0) ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

// The median of `v` (its upper middle element for an even count; T{} when
// empty).
template <typename T>
T MedianOf(std::vector<T> v) {
  if (v.empty()) return T{};
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_MATH_H_
