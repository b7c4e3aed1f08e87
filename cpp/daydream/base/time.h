// Time in daydream: int64 nanoseconds everywhere, with the one conversion from
// the microsecond decimal strings that Chrome/Kineto traces carry.
#ifndef DAYDREAM_BASE_TIME_H_
#define DAYDREAM_BASE_TIME_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace daydream {

// A point in time or a duration, in nanoseconds.
using TimeNs = int64_t;

// Largest magnitude of a time value daydream accepts (2^62 ns, about 146
// years): the sum of two accepted times cannot overflow int64.
inline constexpr TimeNs kMaxTimeNs = int64_t{1} << 62;

// Parses a JSON number that holds microseconds ("1712195495519695.8", "19",
// "4.5e2") into exact integer nanoseconds. Fractions below one nanosecond are
// rounded to nearest. Decimal forms are parsed digit by digit so no precision
// is lost to double rounding (a double has only 0.25 us resolution at 1.7e15 us).
// Returns false, leaving *ns alone, when the text is not a finite number or
// its magnitude is at least kMaxTimeNs. (An out-parameter rather than an
// optional: GCC returns optional<int64_t> through memory and reads its flag
// back wider than it was written, which stalls store forwarding; the trace
// reader calls this for every 'ts' and 'dur'.)
bool ParseMicrosToNs(std::string_view text, TimeNs* ns);

// The same, for text in a buffer whose 16 bytes from any of the text's
// positions may be read (a JSON parser's padded input): the digits are then
// read sixteen at a time (base/digits.h).
bool ParseMicrosToNsPadded(std::string_view text, TimeNs* ns);

// The same, as an optional.
inline std::optional<TimeNs> ParseMicrosToNs(std::string_view text) {
  TimeNs ns = 0;
  if (!ParseMicrosToNs(text, &ns)) return std::nullopt;
  return ns;
}

// A model's result (a double number of nanoseconds) as TimeNs, rounded to
// nearest and saturated at +-kMaxTimeNs (NaN gives kMaxTimeNs): an absurd
// result then fails Graph::Validate as out of range instead of wrapping
// around or being undefined behaviour.
TimeNs RoundNs(double ns);

// Nanoseconds to milliseconds / microseconds, for reports.
inline double NsToMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }
inline double NsToUs(TimeNs ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace daydream

#endif  // DAYDREAM_BASE_TIME_H_
