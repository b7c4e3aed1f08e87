// Tests for daydream/base/time.h: the microseconds-to-nanoseconds parser.
#include "daydream/base/time.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

using namespace daydream;

namespace {

std::optional<TimeNs> P(const std::string& text) { return ParseMicrosToNs(text); }

}  // namespace

TEST_CASE("ParseMicrosToNs keeps nanosecond fractions of large timestamps exactly", "[time]") {
  // A double holds 1712195495519695.8 only to 0.25 us; the parser must not.
  CHECK(P("1712195495519695.8") == TimeNs{1712195495519695800});
  CHECK(P("1712195495505543.2") == TimeNs{1712195495505543200});
  CHECK(P("4458676416788.066") == TimeNs{4458676416788066});
  CHECK(P("222442.191") == TimeNs{222442191});
  CHECK(P("41.768") == TimeNs{41768});
  CHECK(P("0.001") == TimeNs{1});
}

TEST_CASE("ParseMicrosToNs reads integer microseconds", "[time]") {
  CHECK(P("0") == TimeNs{0});
  CHECK(P("19") == TimeNs{19000});
  CHECK(P("1661203462598738") == TimeNs{1661203462598738000});
  CHECK(P("007") == TimeNs{7000});
}

TEST_CASE("ParseMicrosToNs reads integer parts of every length, the fraction anywhere", "[time]") {
  // Integer parts of 1 to 16 digits, with and without a fraction, and the
  // point at each of the first eight places.
  const std::string digits = "1987654321012345";  // 16 digits stay below kMaxTimeNs
  for (size_t n = 1; n <= 16; ++n) {
    const std::string whole = digits.substr(0, n);
    const TimeNs micros = std::stoll(whole);
    INFO("integer part: " << whole);
    CHECK(P(whole) == micros * 1000);
    CHECK(P(whole + ".5") == micros * 1000 + 500);
    CHECK(P(whole + ".123 ") == micros * 1000 + 123);
    CHECK(P("-" + whole + ".07") == -(micros * 1000 + 70));
  }
  for (size_t at = 0; at < 8; ++at) {
    std::string text = "12345678901";
    text[at] = '.';
    INFO("text: " << text);
    if (at == 0) {
      CHECK_FALSE(P(text).has_value());
    } else {
      const TimeNs micros = std::stoll(text.substr(0, at));
      const std::string frac = text.substr(at + 1, 3);
      TimeNs ns = std::stoll(frac);
      for (size_t d = frac.size(); d < 3; ++d) ns *= 10;
      const bool up = text.size() > at + 4 && text[at + 4] >= '5';
      CHECK(P(text) == micros * 1000 + ns + (up ? 1 : 0));
    }
  }
  CHECK(P("12345678e2") == TimeNs{1234567800000});
  CHECK_FALSE(P("1234567:").has_value());  // ':' is '9' + 1
  CHECK_FALSE(P("1234567/").has_value());  // '/' is '0' - 1
}

TEST_CASE("ParseMicrosToNs rounds a fourth fractional digit to the nearest nanosecond", "[time]") {
  CHECK(P("1.2344") == TimeNs{1234});
  CHECK(P("1.23449999") == TimeNs{1234});
  CHECK(P("1.2345") == TimeNs{1235});
  CHECK(P("1.2349") == TimeNs{1235});
  CHECK(P("0.9995") == TimeNs{1000});  // carries into the microseconds
  CHECK(P("1712195495519695.9996") == TimeNs{1712195495519696000});
}

TEST_CASE("ParseMicrosToNs reads negative values", "[time]") {
  CHECK(P("-4") == TimeNs{-4000});
  CHECK(P("-1.5") == TimeNs{-1500});
  CHECK(P("-0.0006") == TimeNs{-1});
  CHECK(P("-0") == TimeNs{0});
}

TEST_CASE("ParseMicrosToNs reads exponent forms", "[time]") {
  CHECK(P("4.5e2") == TimeNs{450000});
  CHECK(P("1e3") == TimeNs{1000000});
  CHECK(P("1.5E1") == TimeNs{15000});
  CHECK(P("2e-3") == TimeNs{2});
  CHECK(P("-2e0") == TimeNs{-2000});
  CHECK(P("1E+2") == TimeNs{100000});
}

TEST_CASE("ParseMicrosToNs accepts the trailing whitespace of a raw JSON token", "[time]") {
  CHECK(P("19 ") == TimeNs{19000});
  CHECK(P("1.5\n\t ") == TimeNs{1500});
}

TEST_CASE("ParseMicrosToNs rejects text that is not a finite number", "[time]") {
  for (const char* bad : {"", " ", "abc", "NaN", "nan", "inf", "-inf", "Infinity", "-", "1.", ".5", "1.2.3",
                          "1e", "12abc", "--1", "+5", "0x10", "1,5", "\"12\""}) {
    INFO("text: '" << bad << "'");
    CHECK_FALSE(P(bad).has_value());
  }
}

TEST_CASE("ParseMicrosToNs rejects magnitudes of kMaxTimeNs and beyond", "[time]") {
  CHECK_FALSE(P("1e300").has_value());
  CHECK_FALSE(P("-1e300").has_value());
  CHECK_FALSE(P("1e16").has_value());                // 1e19 ns
  CHECK_FALSE(P("12345678901234567").has_value());   // 17 integer digits
  CHECK_FALSE(P("4611686018427387.904").has_value());  // exactly 2^62 ns
  CHECK_FALSE(P("-4611686018427387.904").has_value());
  CHECK_FALSE(P("4611686018427387.903").has_value());  // the integer part alone reaches the limit
  // Just below the limit is still exact.
  CHECK(P("4611686018427386.999") == TimeNs{4611686018427386999});
  CHECK(P("1e15") == TimeNs{1000000000000000000});
}

TEST_CASE("NsToMs and NsToUs convert nanoseconds for reports", "[time]") {
  CHECK(NsToMs(1'500'000) == Approx(1.5));
  CHECK(NsToUs(2'500) == Approx(2.5));
  CHECK(NsToUs(-4'000) == Approx(-4.0));
}

TEST_CASE("RoundNs rounds to nearest and saturates at the time limit", "[time]") {
  CHECK(RoundNs(1.4) == 1);
  CHECK(RoundNs(1.6) == 2);
  CHECK(RoundNs(-2.6) == -3);
  CHECK(RoundNs(1e30) == kMaxTimeNs);
  CHECK(RoundNs(-1e30) == -kMaxTimeNs);
  CHECK(RoundNs(std::numeric_limits<double>::infinity()) == kMaxTimeNs);
  CHECK(RoundNs(std::nan("")) == kMaxTimeNs);
}
