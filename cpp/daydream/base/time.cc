#include "daydream/base/time.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "daydream/base/digits.h"

namespace daydream {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Fallback for exponent forms: exact enough, since such values are rare and
// never carry nanosecond fractions in practice.
bool ParseViaDouble(std::string_view text, TimeNs* ns) {
  std::string copy(text);
  char* end = nullptr;
  const double us = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0' || !std::isfinite(us)) return false;
  const double rounded = std::nearbyint(us * 1000.0);
  if (!(std::fabs(rounded) < static_cast<double>(kMaxTimeNs))) return false;
  *ns = static_cast<TimeNs>(rounded);
  return true;
}

}  // namespace

TimeNs RoundNs(double ns) {
  const auto max = static_cast<double>(kMaxTimeNs);
  if (!(ns < max)) return kMaxTimeNs;  // also NaN
  if (!(ns > -max)) return -kMaxTimeNs;
  return static_cast<TimeNs>(std::nearbyint(ns));
}

namespace {

// ParseMicrosToNs; kPadded: 16 bytes from any position of the text can be read.
template <bool kPadded>
bool ParseMicros(std::string_view text, TimeNs* ns) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' ||
                           text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  if (text.empty()) return false;
  size_t i = 0;
  bool negative = false;
  if (text[0] == '-') {
    negative = true;
    i = 1;
  }
  // Integer microseconds; more than 16 digits is beyond kMaxTimeNs anyway.
  int64_t micros = 0;
  size_t int_digits = 0;
  if constexpr (kPadded) {
    // The integer part at once; then a fraction of up to three digits that
    // ends the text (a whole number of ns, as Kineto writes) at once too.
    // Anything else goes on below, where these digits were read.
    const DigitRun whole = LeadingDigits16(text.data() + i);
    const auto n = static_cast<size_t>(whole.count);
    // (A 16th digit may be followed by a 17th, which goes to ParseViaDouble below.)
    if (n > 0 && n <= text.size() - i && !(n == 16 && i + n < text.size() && IsDigit(text[i + n]))) {
      micros = static_cast<int64_t>(whole.value);
      int_digits = n;
      i += n;
      if (micros >= kMaxTimeNs / 1000) return false;
      const size_t frac_size = text.size() - i - 1;  // after the point, if there is one
      if (i < text.size() && text[i] == '.' && frac_size >= 1 && frac_size <= 3) {
        // Digits the text lacks count as zeros: ".5" is 500 ns.
        const char* f = text.data() + i + 1;
        const unsigned a = static_cast<unsigned>(f[0] - '0');
        const unsigned b = frac_size > 1 ? static_cast<unsigned>(f[1] - '0') : 0;
        const unsigned c = frac_size > 2 ? static_cast<unsigned>(f[2] - '0') : 0;
        if (a < 10 && b < 10 && c < 10) {
          const TimeNs value = micros * 1000 + static_cast<TimeNs>(a * 100 + b * 10 + c);
          if (value >= kMaxTimeNs) return false;
          *ns = negative ? -value : value;
          return true;
        }
      }
    }
  }
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (++int_digits > 16) return ParseViaDouble(text, ns);
    micros = micros * 10 + (text[i] - '0');
  }
  if (int_digits == 0) return false;
  if (micros >= kMaxTimeNs / 1000) return false;
  int64_t frac_ns = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int frac_digits = 0;
    bool round_up = false;
    bool any = false;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      any = true;
      if (frac_digits < 3) {
        frac_ns = frac_ns * 10 + (text[i] - '0');
        ++frac_digits;
      } else if (frac_digits == 3) {
        round_up = text[i] >= '5';
        ++frac_digits;
      }
    }
    if (!any) return false;
    for (int d = std::min(frac_digits, 3); d < 3; ++d) frac_ns *= 10;
    if (round_up) ++frac_ns;
  }
  if (i < text.size()) {
    if (text[i] == 'e' || text[i] == 'E') return ParseViaDouble(text, ns);
    return false;
  }
  const TimeNs value = micros * 1000 + frac_ns;
  if (value >= kMaxTimeNs) return false;
  *ns = negative ? -value : value;
  return true;
}

}  // namespace

bool ParseMicrosToNs(std::string_view text, TimeNs* ns) { return ParseMicros<false>(text, ns); }

bool ParseMicrosToNsPadded(std::string_view text, TimeNs* ns) { return ParseMicros<true>(text, ns); }

}  // namespace daydream
