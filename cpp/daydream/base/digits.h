// Decimal digits read sixteen at a time, from a padded buffer. A trace's
// numbers are long runs of digits (a Kineto timestamp has 16 before its
// point); read a byte at a time they cost the reader over a fifth of its
// instructions (callgrind, big_1m).
#ifndef DAYDREAM_BASE_DIGITS_H_
#define DAYDREAM_BASE_DIGITS_H_

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace daydream {

// The inverse of 5^n modulo 2^64, for n in 0..16: a multiple x of 10^n
// divided by it is (x >> n) * kInverse5Pow[n] (mod 2^64), exactly, for a
// shift and a multiply where a 64-bit division costs tens of cycles.
inline constexpr uint64_t InverseMod2Pow64(uint64_t odd) {
  uint64_t x = odd;  // correct to 3 bits; each step doubles them
  for (int i = 0; i < 5; ++i) x *= 2 - odd * x;
  return x;
}
inline constexpr uint64_t Pow5(int n) { return n == 0 ? 1 : 5 * Pow5(n - 1); }
inline constexpr uint64_t kInverse5Pow[17] = {
    InverseMod2Pow64(Pow5(0)),  InverseMod2Pow64(Pow5(1)),  InverseMod2Pow64(Pow5(2)),
    InverseMod2Pow64(Pow5(3)),  InverseMod2Pow64(Pow5(4)),  InverseMod2Pow64(Pow5(5)),
    InverseMod2Pow64(Pow5(6)),  InverseMod2Pow64(Pow5(7)),  InverseMod2Pow64(Pow5(8)),
    InverseMod2Pow64(Pow5(9)),  InverseMod2Pow64(Pow5(10)), InverseMod2Pow64(Pow5(11)),
    InverseMod2Pow64(Pow5(12)), InverseMod2Pow64(Pow5(13)), InverseMod2Pow64(Pow5(14)),
    InverseMod2Pow64(Pow5(15)), InverseMod2Pow64(Pow5(16))};
inline constexpr bool InversesHold() {
  for (int n = 0; n <= 16; ++n) {
    if (kInverse5Pow[n] * Pow5(n) != 1) return false;
  }
  return true;
}
static_assert(InversesHold(), "kInverse5Pow[n] must be the inverse of 5^n modulo 2^64");

struct DigitRun {
  int count = 0;       // decimal digits at the start, 0-16
  uint64_t value = 0;  // their value
};

// The decimal digits that start the 16 bytes at `p`, at most 16. All 16
// bytes must be readable (a padded parser buffer); the bytes after the
// first non-digit do not matter.
inline DigitRun LeadingDigits16(const char* p) {
#if defined(__SSE2__)
  const __m128i d = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8('0'));
  // A digit's byte is now 0..9 (unsigned); every other byte is above 9.
  const __m128i nine = _mm_set1_epi8(9);
  const unsigned digit_mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(d, nine), nine)));
  const int count = __builtin_ctz(~digit_mask);  // bit 16 of ~mask is set: at most 16
  if (count == 0) return {};
  // Keep the run's digits, zero the bytes after it: the sixteen bytes read
  // as a number are then value x 10^(16 - count).
  const __m128i index = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m128i digits = _mm_and_si128(d, _mm_cmplt_epi8(index, _mm_set1_epi8(static_cast<char>(count))));
  const __m128i zero = _mm_setzero_si128();
  const __m128i ten_one = _mm_setr_epi16(10, 1, 10, 1, 10, 1, 10, 1);
  // Pairs (0..99), then fours (0..9999), then eights, as 32-bit lanes.
  const __m128i pairs =
      _mm_packs_epi32(_mm_madd_epi16(_mm_unpacklo_epi8(digits, zero), ten_one),
                      _mm_madd_epi16(_mm_unpackhi_epi8(digits, zero), ten_one));
  const __m128i fours = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
  const __m128i packed = _mm_packs_epi32(fours, fours);
  const __m128i eights = _mm_madd_epi16(packed, _mm_setr_epi16(10000, 1, 10000, 1, 10000, 1, 10000, 1));
  const auto high = static_cast<uint64_t>(static_cast<uint32_t>(_mm_cvtsi128_si32(eights)));
  const auto low = static_cast<uint64_t>(static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(eights, 4))));
  const uint64_t all16 = high * 100000000ULL + low;
  // all16 is value x 10^(16 - count): divided exactly, without a division.
  const int zeros = 16 - count;
  return {count, (all16 >> zeros) * kInverse5Pow[zeros]};
#else
  DigitRun run;
  while (run.count < 16 && p[run.count] >= '0' && p[run.count] <= '9') {
    run.value = run.value * 10 + static_cast<uint64_t>(p[run.count] - '0');
    ++run.count;
  }
  return run;
#endif
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_DIGITS_H_
