// Integer arithmetic on sizes a trace claims: a hostile or broken file can
// claim anything (10^18 elements of 8 bytes), so products saturate instead
// of overflowing (undefined behaviour).
#ifndef DAYDREAM_BASE_MATH_H_
#define DAYDREAM_BASE_MATH_H_

#include <cstdint>
#include <limits>

namespace daydream {

// a * b, saturated at the int64 range.
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) == (b < 0) ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_MATH_H_
