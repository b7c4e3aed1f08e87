#include "daydream/base/time.h"

#include <cmath>
#include <cstdlib>
#include <string>

namespace daydream {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Fallback for exponent forms: exact enough, since such values are rare and
// never carry nanosecond fractions in practice.
std::optional<TimeNs> ParseViaDouble(std::string_view text) {
  std::string copy(text);
  char* end = nullptr;
  const double us = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0' || !std::isfinite(us)) return std::nullopt;
  const double ns = std::nearbyint(us * 1000.0);
  if (!(std::fabs(ns) < static_cast<double>(kMaxTimeNs))) return std::nullopt;
  return static_cast<TimeNs>(ns);
}

}  // namespace

TimeNs RoundNs(double ns) {
  const auto max = static_cast<double>(kMaxTimeNs);
  if (!(ns < max)) return kMaxTimeNs;  // also NaN
  if (!(ns > -max)) return -kMaxTimeNs;
  return static_cast<TimeNs>(std::nearbyint(ns));
}

std::optional<TimeNs> ParseMicrosToNs(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' ||
                           text.back() == '\r' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  if (text.empty()) return std::nullopt;
  size_t i = 0;
  bool negative = false;
  if (text[0] == '-') {
    negative = true;
    i = 1;
  }
  // Integer microseconds; more than 16 digits is beyond kMaxTimeNs anyway.
  int64_t micros = 0;
  size_t int_digits = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i) {
    if (++int_digits > 16) return ParseViaDouble(text);
    micros = micros * 10 + (text[i] - '0');
  }
  if (int_digits == 0) return std::nullopt;
  if (micros >= kMaxTimeNs / 1000) return std::nullopt;
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
    if (!any) return std::nullopt;
    for (int d = std::min(frac_digits, 3); d < 3; ++d) frac_ns *= 10;
    if (round_up) ++frac_ns;
  }
  if (i < text.size()) {
    if (text[i] == 'e' || text[i] == 'E') return ParseViaDouble(text);
    return std::nullopt;
  }
  const TimeNs ns = micros * 1000 + frac_ns;
  if (ns >= kMaxTimeNs) return std::nullopt;
  return negative ? -ns : ns;
}

}  // namespace daydream
