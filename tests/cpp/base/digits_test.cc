// Tests for daydream/base/digits.h (sixteen digits at a time) and the padded
// form of ParseMicrosToNs that reads through it.
#include "daydream/base/digits.h"

#include <cstdint>
#include <random>
#include <string>

#include <catch2/catch.hpp>

#include "daydream/base/time.h"

using namespace daydream;

namespace {

// What LeadingDigits16 must give, a byte at a time.
DigitRun Reference(const char* p) {
  DigitRun run;
  while (run.count < 16 && p[run.count] >= '0' && p[run.count] <= '9') {
    run.value = run.value * 10 + static_cast<uint64_t>(p[run.count] - '0');
    ++run.count;
  }
  return run;
}

}  // namespace

TEST_CASE("LeadingDigits16 counts and reads the digits that start sixteen bytes", "[digits]") {
  CHECK(LeadingDigits16("1712195499866261.233").count == 16);
  CHECK(LeadingDigits16("1712195499866261.233").value == 1712195499866261ULL);
  CHECK(LeadingDigits16("9999999999999999").value == 9999999999999999ULL);
  CHECK(LeadingDigits16("0000000000000007").value == 7u);
  CHECK(LeadingDigits16("1102, \"tid\": 110").count == 4);
  CHECK(LeadingDigits16("1102, \"tid\": 110").value == 1102u);
  CHECK(LeadingDigits16(".233}           ").count == 0);
  CHECK(LeadingDigits16("7:00000000000000").count == 1);  // ':' is '9' + 1
  CHECK(LeadingDigits16("7/00000000000000").count == 1);  // '/' is '0' - 1
  // Every position of a non-digit, with every byte value there.
  for (int at = 0; at < 16; ++at) {
    for (int b = 0; b < 256; ++b) {
      std::string text = "3141592653589793";
      text[static_cast<size_t>(at)] = static_cast<char>(b);
      const DigitRun want = Reference(text.data());
      const DigitRun got = LeadingDigits16(text.data());
      INFO("byte " << b << " at " << at);
      CHECK(got.count == want.count);
      CHECK(got.value == want.value);
    }
  }
}

TEST_CASE("LeadingDigits16 agrees with a byte-at-a-time read on random bytes", "[digits]") {
  const std::string alphabet = std::string("0123456789/:.-e ,}\"\xfa\xff\x80") + std::string(1, '\0');
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> lead_digits(0, 16);
  for (int i = 0; i < 20000; ++i) {
    char text[16];
    const int lead = lead_digits(rng);
    for (int k = 0; k < 16; ++k) text[k] = k < lead ? static_cast<char>('0' + rng() % 10) : alphabet[pick(rng)];
    const DigitRun want = Reference(text);
    const DigitRun got = LeadingDigits16(text);
    INFO("case " << i << ": " << std::string(text, 16));
    REQUIRE(got.count == want.count);
    REQUIRE(got.value == want.value);
  }
}

TEST_CASE("ParseMicrosToNsPadded reads what ParseMicrosToNs reads, whatever follows the text", "[digits][time]") {
  // The padded form reads past the text: digits there are not the number's.
  // Each text is checked in a buffer that goes on with digits, with a JSON
  // delimiter and with blanks.
  const char* texts[] = {"0", "7", "19", "1.377", "0.5", "123.456", "12345678", "123456789",
                         "1712195499866261.233", "1712195499866261", "1712195499866261.2", "1712195499866261.2345",
                         "17121954998662610", "171219549986626101.5", "-3.25", "-1712195499866261.233", "1.", ".5",
                         "-", "12e3", "12.5e3", "1234567:", "12.3x", "1.000000000001", "99999999.999",
                         "4611686018427387.903", "4611686018427387.904", "4611686018427388", "123 ", "123.5\n",
                         "", "  ", "00012.010", "1.2.3"};
  const char* suffixes[] = {"", "9999999999999999", "}, {", "        ", ".5"};
  for (const char* text : texts) {
    for (const char* suffix : suffixes) {
      const std::string buffer = std::string(text) + suffix + std::string(32, '\0');
      const std::string_view view(buffer.data(), std::string_view(text).size());
      TimeNs plain = -1;
      TimeNs padded = -1;
      const bool plain_ok = ParseMicrosToNs(view, &plain);
      const bool padded_ok = ParseMicrosToNsPadded(view, &padded);
      INFO("text '" << text << "' then '" << suffix << "'");
      CHECK(padded_ok == plain_ok);
      CHECK(padded == plain);
    }
  }
  TimeNs ns = 0;
  const std::string ts = "1712195499866261.233, \"pid\"" + std::string(32, ' ');
  REQUIRE(ParseMicrosToNsPadded(std::string_view(ts.data(), 20), &ns));
  CHECK(ns == TimeNs{1712195499866261233});
}
