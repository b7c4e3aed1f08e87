#include "daydream/trace/kineto_reader.h"

#include <simdjson.h>

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "daydream/base/digits.h"
#include "daydream/base/huge_pages.h"
#include "daydream/base/strings.h"
#include "daydream/base/status_macros.h"
#include "daydream/base/time.h"
#include "daydream/base/worker.h"
#include "daydream/trace/file_source.h"

namespace daydream {
namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;

// A pid or tid: numeric in CPU/GPU events, a string in a few profiler spans.
struct IdValue {
  bool present = false;
  bool is_text = false;
  int64_t num = 0;
  StringId text = 0;
};

// Whether a[0, n) and b[0, n) agree, n between sizeof(Word) and twice it:
// a word from each end of each side.
template <typename Word>
bool SameEnds(const char* a, const char* b, size_t n) {
  Word a0, a1, b0, b1;
  std::memcpy(&a0, a, sizeof(Word));
  std::memcpy(&b0, b, sizeof(Word));
  std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
  std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

// memcmp(a, b, n) == 0; from 4 to 16 bytes with two overlapping loads
// per side instead of a call (most names and categories are that short).
bool SameBytes(const char* a, const char* b, size_t n) {
  if (n >= 8 && n <= 16) return SameEnds<uint64_t>(a, b, n);
  if (n >= 4 && n < 8) return SameEnds<uint32_t>(a, b, n);
  return std::memcmp(a, b, n) == 0;
}

// The last integer token read for a field, and its value.
class NumberCache {
 public:
  bool Find(std::string_view token, int64_t* value) const {
    if (token.size() != size_ || size_ == 0 || !SameBytes(token.data(), bytes_, size_)) return false;
    *value = value_;
    return true;
  }
  void Keep(std::string_view token, int64_t value) {
    size_ = token.size() <= sizeof(bytes_) ? token.size() : 0;
    std::memcpy(bytes_, token.data(), size_);
    value_ = value;
  }

 private:
  char bytes_[16] = {};
  size_t size_ = 0;
  int64_t value_ = 0;
};

// ReadDimsProduct of text that is an array of at most 10-digit integers,
// "[512, 1, 1]": each must be in 1..2^31 and the product at most 2^40, else
// it is kUnset. False, with nothing read, for any other text: the array is
// then walked item by item, which checks and words any error.
bool DimsProductOfText(const char* p, int64_t* product) {
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  if (*p++ != '[') return false;
  while (blank(*p)) ++p;
  int64_t result = 1;
  if (*p == ']') {
    *product = result;
    return true;
  }
  while (true) {
    int64_t d = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
      if (++digits > 10) return false;
      d = d * 10 + (*p - '0');
    }
    if (digits == 0) return false;
    if (result != kUnset) {
      result = d > 0 && d <= (int64_t{1} << 31) ? result * d : kUnset;
      if (result > (int64_t{1} << 40)) result = kUnset;
    }
    while (blank(*p)) ++p;
    if (*p == ']') break;
    if (*p++ != ',') return false;
    while (blank(*p)) ++p;
  }
  *product = result;
  return true;
}

// Everything one event may carry, collected before the event is committed
// (JSON objects may list their fields in any order).
struct EventScratch {
  char ph = 0;
  bool has_ph = false;
  bool has_name = false;
  bool has_ts = false;
  bool has_dur = false;
  bool has_id = false;
  StringId category = 0;
  IdValue pid;
  IdValue tid;
  int64_t flow_id = kUnset;
  TraceEvent ev;
  TraceEventDetail detail;
  bool has_detail = false;  // an arg of `detail` was read
  // Metadata ('M') args.
  StringId meta_name = 0;
  StringId meta_labels = 0;
  int64_t meta_sort_index = kUnset;
};

// A flow endpoint's phase: start, step or finish.
constexpr bool IsFlowPhase(char ph) { return ph == 's' || ph == 't' || ph == 'f'; }

std::string Quote(std::string_view s) { return StrCat("'", s, "'"); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Whether the string token `token` (from On-Demand's raw_json_token, in a
// padded document: the byte after it is the next structural character) is
// followed by a ':'. On-Demand takes a string it was not asked to read for a
// key when a ':' follows it: skipping `"a":1}` it passes the ':', the value
// and the '}' that closes the object around them, so that a stray '}' later
// makes such text pass unchecked. A string read from its raw token, or
// passed over, is therefore read or checked the slow way then.
bool TakenForKey(std::string_view token) { return token.data()[token.size()] == ':'; }

// Whether `c` can start a JSON scalar. A value that starts with anything
// else (a ':', a ',' or a closing bracket where a value should be) is
// skipped by On-Demand as structure: it can close the object around it.
// (A table: asked for every field the reader passes over.)
constexpr std::array<bool, 256> kScalarStart = [] {
  std::array<bool, 256> t{};
  for (const char c : std::string_view("\"-0123456789tfn")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();
bool IsScalarStart(char c) { return kScalarStart[static_cast<unsigned char>(c)]; }

// The text between the quotes of a JSON string token (`"abc"` and the blanks
// before the next structural character, as On-Demand's raw_json_token gives
// it), escapes unresolved; a null view when the token is not a string, or
// is followed by a ':' (TakenForKey: the caller reads it through simdjson,
// which then reports the malformed object).
std::string_view RawStringToken(std::string_view token) {
  if (token.empty() || token.front() != '"' || TakenForKey(token)) return {};
  token = Trim(token);
  if (token.size() < 2 || token.back() != '"') return {};
  return token.substr(1, token.size() - 2);  // never a null view: it points into the token
}

bool HasEscape(std::string_view raw) {
  return !raw.empty() && std::memchr(raw.data(), '\\', raw.size()) != nullptr;
}

// How many bytes of [begin, end) equal `c`: sixteen at a time where SSE2 is
// there (every x86-64), one at a time elsewhere.
size_t CountByte(const char* begin, const char* end, char c) {
  size_t n = 0;
  const char* p = begin;
#if defined(__SSE2__)
  const __m128i target = _mm_set1_epi8(c);
  while (end - p >= 16) {
    // Per-lane counts (a match compares as -1) for at most 255 blocks, then
    // summed across the lanes.
    __m128i counts = _mm_setzero_si128();
    for (int block = 0; block < 255 && end - p >= 16; ++block, p += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(bytes, target));
    }
    const __m128i sums = _mm_sad_epu8(counts, _mm_setzero_si128());
    n += static_cast<size_t>(_mm_cvtsi128_si32(sums)) + static_cast<size_t>(_mm_extract_epi16(sums, 4));
  }
#endif
  for (; p < end; ++p) n += *p == c;
  return n;
}

bool IsJsonBlank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

// The end of the JSON string starting at text[i] (its opening quote), past
// its closing quote; npos where it breaks JSON's rules (an unknown escape,
// a bad \u, a raw control character, no closing quote).
size_t JsonStringEnd(std::string_view text, size_t i) {
  static constexpr std::string_view kHex = "0123456789abcdefABCDEF";
  for (++i; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"') return i + 1;
    if (c < 0x20) return std::string_view::npos;
    if (c != '\\') continue;
    if (++i >= text.size()) return std::string_view::npos;
    const char e = text[i];
    if (e == 'u') {
      if (i + 4 >= text.size()) return std::string_view::npos;
      for (size_t k = 1; k <= 4; ++k) {
        if (kHex.find(text[i + k]) == std::string_view::npos) return std::string_view::npos;
      }
      i += 4;
    } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
      return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// The end of the JSON number or literal starting at text[i]; npos where it
// is neither (JSON's number grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?).
size_t JsonScalarEnd(std::string_view text, size_t i) {
  const size_t n = text.size();
  if (i < n && (text[i] == 't' || text[i] == 'f' || text[i] == 'n')) {
    for (std::string_view literal : {"true", "false", "null"}) {
      if (text.substr(i, literal.size()) == literal) return i + literal.size();
    }
    return std::string_view::npos;
  }
  if (i < n && text[i] == '-') ++i;
  if (i >= n || !IsDigitChar(text[i])) return std::string_view::npos;
  if (text[i] == '0') {
    ++i;
  } else {
    while (i < n && IsDigitChar(text[i])) ++i;
  }
  if (i < n && text[i] == '.') {
    if (++i >= n || !IsDigitChar(text[i])) return std::string_view::npos;
    while (i < n && IsDigitChar(text[i])) ++i;
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (i >= n || !IsDigitChar(text[i])) return std::string_view::npos;
    while (i < n && IsDigitChar(text[i])) ++i;
  }
  return i;
}

}  // namespace

// The offset of the first byte where `text` stops being one JSON value
// (blanks around it allowed), npos when it is one. Iterative: nesting costs
// a byte of stack each.
size_t JsonValueErrorAt(std::string_view text) {
  enum class Want { kValue, kValueOrClose, kKeyOrClose, kKey, kColon, kCommaOrClose };
  std::string open;  // '[' or '{' per open container
  Want want = Want::kValue;
  size_t i = 0;
  const auto close = [&] {
    open.pop_back();
    ++i;
    want = Want::kCommaOrClose;
  };
  while (true) {
    while (i < text.size() && IsJsonBlank(text[i])) ++i;
    if (i >= text.size()) return want == Want::kCommaOrClose && open.empty() ? std::string_view::npos : i;
    const char c = text[i];
    switch (want) {
      case Want::kKeyOrClose:
      case Want::kKey:
        if (want == Want::kKeyOrClose && c == '}') {
          close();
          break;
        }
        if (c != '"') return i;
        if (const size_t end = JsonStringEnd(text, i); end != std::string_view::npos) {
          i = end;
        } else {
          return i;
        }
        want = Want::kColon;
        break;
      case Want::kColon:
        if (c != ':') return i;
        ++i;
        want = Want::kValue;
        break;
      case Want::kValueOrClose:
      case Want::kValue:
        if (want == Want::kValueOrClose && c == ']') {
          close();
        } else if (c == '{' || c == '[') {
          open.push_back(c);
          ++i;
          want = c == '{' ? Want::kKeyOrClose : Want::kValueOrClose;
        } else {
          const size_t end = c == '"' ? JsonStringEnd(text, i) : JsonScalarEnd(text, i);
          if (end == std::string_view::npos) return i;
          // A number or literal ends at a blank or a structural character.
          if (c != '"' && end < text.size() && !IsJsonBlank(text[end]) && text[end] != ',' && text[end] != ']' &&
              text[end] != '}') {
            return end;
          }
          i = end;
          want = Want::kCommaOrClose;
        }
        break;
      case Want::kCommaOrClose:
        if (open.empty()) return i;  // text after the value
        if (c == ',') {
          ++i;
          want = open.back() == '{' ? Want::kKey : Want::kValue;
        } else if (c == (open.back() == '{' ? '}' : ']')) {
          close();
        } else {
          return i;
        }
        break;
    }
  }
}

namespace {

// Parses an integer token ("12", "-3", "12.0") into *out; false, leaving
// *out alone, for other text. (Not an optional: see ParseMicrosToNs.)
// kPadded: 16 bytes from any position of the text may be read (a token of
// the parser's padded input), so the digits are read sixteen at a time.
template <bool kPadded = false>
bool ParseIntToken(std::string_view text, int64_t* out) {
  // Most tokens are a few digits followed by nothing or whitespace.
  const char* p = text.data();
  const char* const text_end = p + text.size();
  const bool negative = p < text_end && *p == '-';
  if (negative) ++p;
  if constexpr (kPadded) {
    const DigitRun run = LeadingDigits16(p);
    const char* const after = p + run.count;
    if (run.count > 0 && run.count < 16 && after <= text_end &&
        Trim(std::string_view(after, static_cast<size_t>(text_end - after))).empty()) {
      *out = negative ? -static_cast<int64_t>(run.value) : static_cast<int64_t>(run.value);
      return true;
    }
  }
  const char* const digits = p;
  uint64_t fast = 0;
  while (p < text_end && static_cast<unsigned>(*p - '0') < 10 && p - digits < 18) fast = fast * 10 + (*p++ - '0');
  if (p > digits && Trim(std::string_view(p, static_cast<size_t>(text_end - p))).empty()) {
    *out = negative ? -static_cast<int64_t>(fast) : static_cast<int64_t>(fast);
    return true;
  }
  text = Trim(text);
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc() && ptr == end) {
    *out = value;
    return true;
  }
  // Integral floats ("12.0", "1e3").
  std::string copy(text);
  char* stop = nullptr;
  const double d = std::strtod(copy.c_str(), &stop);
  if (stop == copy.c_str() || *stop != '\0' || !std::isfinite(d) || std::fabs(d) >= 9.0e18 ||
      d != std::floor(d)) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

// Tracks JSON strings and bracket depth over text fed in pieces (no
// validation: simdjson validates what is parsed).
struct BracketScanner {
  int64_t depth = 0;
  bool in_string = false;
  bool escaped = false;

  // Scans text[from, to) and returns the index just past the byte that
  // brings the depth back to 0 (a closing bracket, or a string's closing
  // quote when the scan started at depth 0), or npos.
  size_t ScanToClose(const char* text, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) return i + 1;
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if ((c == '}' || c == ']') && --depth <= 0) {
        return i + 1;
      }
    }
    return std::string_view::npos;
  }
};

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The fields of an event, and of its args, that daydream reads. A key is
// told by its first letter, then one or two comparisons of its raw text
// (escaped keys match nothing, as a comparison of the raw text never did);
// a chain of comparisons cost the reader about 4% of its instructions.
enum class EventField : uint8_t { kOther, kPh, kName, kCat, kTs, kDur, kPid, kTid, kId, kArgs };

[[gnu::always_inline]] inline EventField EventFieldOf(const od::raw_json_string& key) {
  switch (key.raw()[0]) {
    case 'p':
      return key == "ph" ? EventField::kPh : key == "pid" ? EventField::kPid : EventField::kOther;
    case 'n':
      return key == "name" ? EventField::kName : EventField::kOther;
    case 'c':
      return key == "cat" ? EventField::kCat : EventField::kOther;
    case 't':
      return key == "ts" ? EventField::kTs : key == "tid" ? EventField::kTid : EventField::kOther;
    case 'd':
      return key == "dur" ? EventField::kDur : EventField::kOther;
    case 'i':
      return key == "id" ? EventField::kId : EventField::kOther;
    case 'a':
      return key == "args" ? EventField::kArgs : EventField::kOther;
    default:
      return EventField::kOther;
  }
}

enum class ArgField : uint8_t {
  kOther,
  kCorrelation, kExternalId,
  // The int64 fields of TraceEventDetail, read alike (kIntArgFields, in this order).
  kSequenceNumber, kStream, kBytes, kInMsgNelems, kWaitOnStream, kWaitOnEventRecord,
  // The rest, each read its own way.
  kDevice, kInputDims, kInputType, kGrid, kBlock, kDtype, kSyncKind, kName, kLabels, kSortIndex,
};

// Where each int64 detail arg goes, and the name its errors give ("bytes"
// for "Bytes" too), in ArgField's order from kSequenceNumber.
struct IntArgField {
  int64_t TraceEventDetail::*member;
  std::string_view name;
};
constexpr IntArgField kIntArgFields[] = {
    {&TraceEventDetail::sequence_number, "Sequence number"},
    {&TraceEventDetail::stream, "stream"},
    {&TraceEventDetail::bytes, "bytes"},
    {&TraceEventDetail::in_msg_nelems, "In msg nelems"},
    {&TraceEventDetail::wait_on_stream, "wait_on_stream"},
    {&TraceEventDetail::wait_on_event_record_correlation, "wait_on_cuda_event_record_corr_id"},
};
static_assert(std::size(kIntArgFields) ==
                  static_cast<size_t>(ArgField::kWaitOnEventRecord) - static_cast<size_t>(ArgField::kSequenceNumber) + 1,
              "one entry per int64 detail ArgField");

// Where an int64 detail arg goes; nullptr for any other field.
const IntArgField* IntDetailArg(ArgField which) {
  const size_t i = static_cast<size_t>(which) - static_cast<size_t>(ArgField::kSequenceNumber);
  return which >= ArgField::kSequenceNumber && i < std::size(kIntArgFields) ? &kIntArgFields[i] : nullptr;
}

[[gnu::always_inline]] inline ArgField ArgFieldOf(const od::raw_json_string& key) {
  switch (key.raw()[0]) {
    case 'c':
      return key == "correlation"      ? ArgField::kCorrelation
             : key == "cuda_sync_kind" ? ArgField::kSyncKind
                                       : ArgField::kOther;
    case 'E':
      return key == "External id" ? ArgField::kExternalId : ArgField::kOther;
    case 'S':
      return key == "Sequence number" ? ArgField::kSequenceNumber : ArgField::kOther;
    case 'd':
      return key == "device" ? ArgField::kDevice : key == "dtype" ? ArgField::kDtype : ArgField::kOther;
    case 's':
      return key == "stream" ? ArgField::kStream : key == "sort_index" ? ArgField::kSortIndex : ArgField::kOther;
    case 'b':
      return key == "bytes" ? ArgField::kBytes : key == "block" ? ArgField::kBlock : ArgField::kOther;
    case 'B':
      return key == "Bytes" ? ArgField::kBytes : ArgField::kOther;
    case 'I':
      return key == "In msg nelems" ? ArgField::kInMsgNelems
             : key == "Input Dims"  ? ArgField::kInputDims
             : key == "Input type"  ? ArgField::kInputType
                                    : ArgField::kOther;
    case 'w':
      return key == "wait_on_stream"                      ? ArgField::kWaitOnStream
             : key == "wait_on_cuda_event_record_corr_id" ? ArgField::kWaitOnEventRecord
                                                          : ArgField::kOther;
    case 'g':
      return key == "grid" ? ArgField::kGrid : ArgField::kOther;
    case 'n':
      return key == "name" ? ArgField::kName : ArgField::kOther;
    case 'l':
      return key == "labels" ? ArgField::kLabels : ArgField::kOther;
    default:
      return ArgField::kOther;
  }
}

class KinetoParser {
 public:
  KinetoParser(TraceByteStream& in, const std::string& source, const ReadOptions& options)
      : in_(in), source_(source), options_(options) {}

  absl::StatusOr<Trace> Run() {
    trace_.path = source_;
    DD_ASSIGN_OR_RETURN(const int first, PeekNonSpace());
    if (first < 0) {
      return Invalid(total_read_ == 0 ? "the file is empty (0 bytes)" : "the file holds only whitespace");
    }
    if (first != '{' && first != '[') {
      DD_RETURN_IF_ERROR(Fill(16));
      return Invalid(StrCat("not JSON: a trace starts with '{' or '[', this file starts with ",
                            Quote(Printable(Trim(Text(begin_, std::min(end_, begin_ + 16)))))));
    }
    ++begin_;
    if (first == '[') {
      DD_RETURN_IF_ERROR(ParseEventStream(1));
      saw_events_ = true;
    } else {
      DD_RETURN_IF_ERROR(ParseTopLevel());
    }
    DD_ASSIGN_OR_RETURN(const int rest, PeekNonSpace());
    if (rest >= 0) return TrailingText(begin_);
    if (!saw_events_) return Invalid("no \"traceEvents\" array in the top-level object");
    if (trace_.events.empty()) return Invalid("the trace holds no events");
    if (options_.stats != nullptr) options_.stats->indexed_events += indexed_events_;
    Finish();
    return std::move(trace_);
  }

 private:
  static std::string Printable(std::string_view s) {
    std::string out;
    for (char c : s) out.push_back((c >= 32 && c < 127) ? c : '?');
    return out;
  }

  absl::Status Invalid(std::string_view msg) const {
    return absl::InvalidArgumentError(StrCat(source_, ": ", msg));
  }

  absl::Status EventError(int64_t index, std::string_view msg) const {
    return absl::InvalidArgumentError(StrCat(source_, ": event ", index, ": ", msg));
  }

  absl::Status TrailingText(size_t at) const {
    return Invalid(StrCat("unexpected text after the end of the JSON document at byte ", Global(at)));
  }

  // simdjson checks UTF-8 in what it parses; the top level checks the rest.
  absl::Status CheckUtf8(std::string_view text) const {
    if (simdjson::validate_utf8(text.data(), text.size())) return absl::OkStatus();
    return Invalid("the text is not valid UTF-8");
  }

  absl::Status Truncated(std::string_view where = "") const {
    return absl::InvalidArgumentError(StrCat(source_, ": ", where,
                                             "the JSON is truncated: the top-level value is never closed (",
                                             total_read_, " bytes read)"));
  }

  // Warnings wait until their event is parsed whole: an event cut by a
  // window's end is parsed again, with the next window. An event's warning
  // keeps its index apart from its text until then: a detached parser's
  // indexes count from its window's start, and Merge adds the window's.
  struct PendingWarning {
    std::string kind;
    bool event = false;  // the message is "<source>: event <index>" + text
    int64_t index = 0;
    std::string text;
  };
  void Warn(std::string_view kind, std::string example) {
    pending_warnings_.push_back(PendingWarning{std::string(kind), false, 0, std::move(example)});
  }
  void WarnEvent(std::string_view kind, int64_t index, std::string text) {
    pending_warnings_.push_back(PendingWarning{std::string(kind), true, index, std::move(text)});
  }
  void AddWarning(const PendingWarning& w, int64_t index_base) {
    trace_.warnings.Add(w.kind, w.event ? StrCat(source_, ": event ", w.index + index_base, w.text) : w.text);
  }
  void FlushWarnings() {
    for (PendingWarning& w : pending_warnings_) {
      if (detached_) {
        detached_warnings_.push_back(std::move(w));
      } else {
        AddWarning(w, 0);
      }
    }
    pending_warnings_.clear();
  }

  // --- the byte window -------------------------------------------------------
  // buf_ holds the unread text in [begin_, end_), one spare byte before it
  // (a window's '[') and room for a ']' and simdjson's padding after it.

  int64_t Global(size_t i) const { return buf_origin_ + static_cast<int64_t>(i); }
  // ReadOptions::window_bytes, at least 64.
  size_t WindowBytes() const { return std::max<size_t>(options_.window_bytes, 64); }

  // How far a parse one window at a time would have read: a Fill(want) not
  // ahead reads to begin_ + want. The windows are cut within it.
  void NoteSeen(size_t want) {
    seen_end_ = std::max(seen_end_, Global(std::min(end_, begin_ + want)));
  }
  size_t SeenEnd() const {
    return static_cast<size_t>(std::clamp<int64_t>(seen_end_ - buf_origin_, static_cast<int64_t>(begin_),
                                                   static_cast<int64_t>(end_)));
  }
  std::string_view Text(size_t from, size_t to) const { return std::string_view(buf_.data() + from, to - from); }

  // Reads until at least `want` bytes are unread or the input ends. A
  // read `ahead` (ParseTwoWindows' second window) does not count as meeting
  // the input's end: hit_end_ is what a parse one window at a time knows.
  absl::Status Fill(size_t want, bool ahead = false) {
    if (end_ - begin_ >= want) {
      if (!ahead) NoteSeen(want);
      return absl::OkStatus();
    }
    if (eof_) {
      hit_end_ = hit_end_ || !ahead;
      return absl::OkStatus();
    }
    if (begin_ > 1) {  // keep the unread text at the front
      std::memmove(buf_.data() + 1, buf_.data() + begin_, end_ - begin_);
      buf_origin_ += static_cast<int64_t>(begin_ - 1);
      end_ -= begin_ - 1;
      begin_ = 1;
    }
    const size_t reserve_after = 2 + JsonPadding();  // a window's "] " and simdjson's padding
    // Reads stop at a window's worth (or `want`) of unread text.
    const size_t limit = std::max(want, WindowBytes());
    while (end_ - begin_ < want && !eof_) {
      if (end_ + reserve_after >= buf_.size()) {  // grow with the data, not to `limit` at once
        const size_t grown = std::min(std::max<size_t>(2 * buf_.size(), size_t{1} << 16), 1 + limit + reserve_after);
        buf_.resize(std::max(grown, end_ + reserve_after + 1));
      }
      const size_t room = std::min(buf_.size() - reserve_after - end_, limit - (end_ - begin_));
      DD_ASSIGN_OR_RETURN(const size_t n, in_.Read(buf_.data() + end_, room));
      if (n == 0) eof_ = true;
      end_ += n;
      total_read_ += n;
    }
    if (eof_ && !ahead) hit_end_ = true;
    if (!ahead) NoteSeen(want);
    return absl::OkStatus();
  }

  // The next byte that is not whitespace (consuming the whitespace), or -1 at
  // the end of the input.
  absl::StatusOr<int> PeekNonSpace() {
    while (true) {
      while (begin_ < end_ && IsSpace(buf_[begin_])) ++begin_;
      if (begin_ < end_) return static_cast<unsigned char>(buf_[begin_]);
      if (eof_) return -1;
      DD_RETURN_IF_ERROR(Fill(1));
    }
  }

  // Quotes 16 bytes of what was found: read up to them first, so that the
  // quote does not depend on how much a window happened to have read (a
  // parse two windows at a time reads ahead). A read error there leaves
  // the quote shorter: the text is malformed either way.
  absl::Status Malformed(std::string_view expected) {
    Fill(16).IgnoreError();
    return Invalid(StrCat("the JSON is malformed at byte ", Global(begin_), ": expected ", expected,
                          ", found ", Quote(Printable(Text(begin_, std::min(end_, begin_ + 16))))));
  }

  // The end (an index into buf_) of the JSON value starting at begin_,
  // reading more as needed (the value stays whole in the buffer).
  absl::StatusOr<size_t> ValueEnd() {
    const char c = buf_[begin_];
    if (c != '{' && c != '[' && c != '"') {  // a number or a literal
      size_t i = begin_;
      while (true) {
        while (i < end_ && !IsSpace(buf_[i]) && buf_[i] != ',' && buf_[i] != '}' && buf_[i] != ']') ++i;
        if (i < end_ || eof_) return i;
        const size_t offset = i - begin_;
        DD_RETURN_IF_ERROR(Fill(end_ - begin_ + 1));
        i = begin_ + offset;
      }
    }
    BracketScanner scan;
    size_t from = begin_;
    while (true) {
      const size_t close = scan.ScanToClose(buf_.data(), from, end_);
      if (close != std::string_view::npos) return close;
      if (eof_) return Truncated();
      const size_t offset = end_ - begin_;
      DD_RETURN_IF_ERROR(Fill(end_ - begin_ + (size_t{1} << 16)));
      from = begin_ + offset;
    }
  }

  // --- the top level -----------------------------------------------------------

  // The members of the top-level object (its '{' consumed). traceEvents is
  // streamed; the few other members daydream reads are parsed one at a time;
  // the rest are skipped.
  absl::Status ParseTopLevel() {
    DD_ASSIGN_OR_RETURN(int c, PeekNonSpace());
    if (c == '}') {
      ++begin_;
      return absl::OkStatus();
    }
    while (true) {
      if (c < 0) return Truncated();
      if (c != '"') return Malformed("a member name");
      DD_ASSIGN_OR_RETURN(const size_t key_end, ValueEnd());
      const std::string key(Text(begin_, key_end));  // with its quotes
      DD_RETURN_IF_ERROR(CheckUtf8(key));
      begin_ = key_end;
      DD_ASSIGN_OR_RETURN(c, PeekNonSpace());
      if (c < 0) return Truncated();
      if (c != ':') return Malformed("':'");
      ++begin_;
      DD_ASSIGN_OR_RETURN(c, PeekNonSpace());
      if (c < 0) return Truncated();
      if (key == "\"traceEvents\"") {
        if (c != '[') return Invalid("\"traceEvents\" must be an array");
        ++begin_;
        DD_RETURN_IF_ERROR(ParseEventStream(2));
        saw_events_ = true;
      } else {
        DD_ASSIGN_OR_RETURN(const size_t value_end, ValueEnd());
        DD_RETURN_IF_ERROR(CheckUtf8(Text(begin_, value_end)));
        DD_RETURN_IF_ERROR(CheckTopMemberJson(key, value_end));
        if (key == "\"deviceProperties\"" || key == "\"distributedInfo\"" || key == "\"traceName\"" ||
            key == "\"baseTimeNanoseconds\"" || key == "\"schemaVersion\"") {
          DD_RETURN_IF_ERROR(ParseTopMember(key, value_end));
        }  // else skipped
        begin_ = value_end;
      }
      DD_ASSIGN_OR_RETURN(c, PeekNonSpace());
      if (c < 0) return Truncated();
      ++begin_;
      if (c == '}') return absl::OkStatus();
      if (c != ',') {
        --begin_;
        return Malformed("',' or '}'");
      }
      DD_ASSIGN_OR_RETURN(c, PeekNonSpace());
    }
  }

  // The value of a top-level member (buf_[begin_, value_end)) is one JSON
  // value: simdjson parses the few daydream reads on their own, and would
  // not check what their objects hold that daydream does not read.
  absl::Status CheckTopMemberJson(const std::string& key, size_t value_end) const {
    const size_t bad = JsonValueErrorAt(Text(begin_, value_end));
    if (bad == std::string_view::npos) return absl::OkStatus();
    return Invalid(StrCat("the JSON is malformed at byte ", Global(begin_ + bad), " (in the top-level member ",
                          Printable(key.substr(0, 80)), ")"));
  }

  // Parses {key: value} (the value in buf_[begin_, value_end)) on its own.
  absl::Status ParseTopMember(const std::string& key, size_t value_end) {
    std::string doc = StrCat("{", key, ":", Text(begin_, value_end), "}");
    const size_t size = doc.size();
    doc.append(JsonPadding(), '\0');
    const size_t value_at = 2 + key.size();
    loc_base_ = doc.data() + value_at;
    loc_global_ = Global(begin_);
    doc_start_ = doc.data();
    doc_end_ = doc.data() + size;
    if (auto err = parser_.iterate(simdjson::padded_string_view(doc.data(), size, doc.size())).get(doc_);
        err != simdjson::SUCCESS) {
      doc_started_ = false;
      return JsonError(err, -1, "");
    }
    doc_started_ = true;
    od::object top;
    if (auto err = doc_.get_object().get(top); err != simdjson::SUCCESS) return JsonError(err, -1, "");
    DD_RETURN_IF_ERROR(ParseTop(top));
    FlushWarnings();
    doc_started_ = false;
    return absl::OkStatus();
  }

  // --- the events --------------------------------------------------------------

  // Where the current window may end: the index of a ',' that closes a line
  // and is followed, on a later line, by '{' -- between two events, as
  // Kineto and json.dump(indent=...) write them. A raw newline never occurs
  // inside a JSON string, so such a comma is outside every string; if it is
  // inside an event after all (an args array of objects), that event fails
  // to parse in this window and is parsed again, whole, in the next one.
  // Text without such a line break (json.dump without indent, minified
  // traces) is cut by FindInlineCut. npos when there is no cut past the
  // first event's start.
  size_t FindCut(size_t from, size_t to) const {
    const size_t cut = FindLineCut(from, to);
    return cut != std::string_view::npos ? cut : FindInlineCut(from, to);
  }

  size_t FindLineCut(size_t from, size_t to) const {
    const char* base = buf_.data();
    size_t search_end = to;
    while (search_end > from) {
      const void* nl = memrchr(base + from, '\n', search_end - from);
      if (nl == nullptr) return std::string_view::npos;
      const size_t n = static_cast<size_t>(static_cast<const char*>(nl) - base);
      search_end = n;
      size_t next = n + 1;
      while (next < to && IsSpace(buf_[next])) ++next;
      if (next >= to || buf_[next] != '{') continue;
      size_t comma = n;
      while (comma > from && IsSpace(buf_[comma - 1])) --comma;
      if (comma == from || buf_[--comma] != ',') continue;
      size_t before = comma;  // the window must hold an event before the comma
      while (before > from && IsSpace(buf_[before - 1])) --before;
      if (before > from) return comma;
    }
    return std::string_view::npos;
  }

  // A cut in text with no line break between events: the last ',' between a
  // '}' and a '{' (blanks allowed around it) that is outside every string.
  // `from` is outside every string (a window starts after a cut), so a
  // comma is outside them when the quotes before it, less the escaped ones,
  // are even in number. As with a line break, such a comma may still sit
  // inside an event (an args array of objects); that event is then parsed
  // again, whole, in the next window. A few candidates are tried, each a
  // count over the window; past them, npos (a longer window is tried), so
  // text full of "},{" inside strings costs no more than one window.
  size_t FindInlineCut(size_t from, size_t to) const {
    const char* base = buf_.data();
    size_t search_end = to;
    for (int tries = 0; tries < kInlineCutTries && search_end > from;) {
      const void* brace = memrchr(base + from, '{', search_end - from);
      if (brace == nullptr) return std::string_view::npos;
      const auto open = static_cast<size_t>(static_cast<const char*>(brace) - base);
      search_end = open;
      size_t comma = open;
      while (comma > from && IsSpace(buf_[comma - 1])) --comma;
      if (comma == from || buf_[--comma] != ',') continue;
      size_t close = comma;
      while (close > from && IsSpace(buf_[close - 1])) --close;
      if (close <= from + 1 || buf_[close - 1] != '}') continue;  // an event ends before the comma
      ++tries;
      if (QuotesEven(from, comma)) return comma;
    }
    return std::string_view::npos;
  }
  static constexpr int kInlineCutTries = 8;

  // Whether buf_[from, to) holds an even number of unescaped quotes: a
  // quote is escaped when an odd run of backslashes comes right before it.
  bool QuotesEven(size_t from, size_t to) const {
    const char* const begin = buf_.data() + from;
    const char* const end = buf_.data() + to;
    size_t quotes = CountByte(begin, end, '"');
    const char* b = begin;
    while ((b = static_cast<const char*>(std::memchr(b, '\\', static_cast<size_t>(end - b)))) != nullptr) {
      const char* run = b;
      while (b < end && *b == '\\') ++b;
      if (b == end) break;
      if ((b - run) % 2 == 1 && *b == '"') --quotes;
    }
    return quotes % 2 == 0;
  }

  // The elements of a traceEvents array (its '[' consumed), a window at a
  // time; `depth` counts the brackets open around the elements (1 for a bare
  // array, 2 inside the top-level object). Returns with begin_ after the
  // array's ']'.
  // Room for `room` events, details and flows, on huge pages (a vector
  // already that large keeps its storage).
  static void ReserveRecords(Trace& trace, size_t room) {
    ReserveHugePages(trace.events, room);
    ReserveHugePages(trace.details, room);
    ReserveHugePages(trace.flows, room);
  }

  absl::Status ParseEventStream(int64_t depth) {
    // Real traces take 200-450 bytes per event: room for all of them at once
    // (growing would copy the vector); pages never written cost no memory.
    // Likewise the flows (a flow record takes over 100 bytes) and details,
    // on huge pages as the events are: filled a 4 KiB page at a time, their
    // page faults cost big_1m's one-core parse 8% (perf: the stores of
    // Commit's push_back).
    ReserveRecords(trace_, static_cast<size_t>(std::min<uint64_t>(in_.size_hint(), uint64_t{1} << 40) / 128 + 16));
    size_t window = WindowBytes();
    size_t pair_window = std::max<size_t>(options_.parallel_window_bytes, 64);  // each of two at a time
    // A window that holds no whole event (nor a cut) is tried again twice
    // as long, and windows of its kind stay that long after it; of both
    // kinds where the two sizes are equal, so that two at a time still
    // takes the windows one at a time takes.
    auto grow = [&](size_t& longer) {
      const bool equal = window == pair_window;
      longer = 2 * std::max(longer, SeenEnd() - begin_);
      if (equal) window = pair_window = longer;
    };
    while (true) {
      if (options_.parallel_windows) {
        DD_ASSIGN_OR_RETURN(const std::optional<WindowEnd> two, ParseTwoWindows(pair_window));
        if (two.has_value()) {
          if (*two == WindowEnd::kArrayClosed) return absl::OkStatus();
          if (*two == WindowEnd::kNoProgress) grow(pair_window);
          continue;
        }
      }
      DD_RETURN_IF_ERROR(Fill(window));
      // The last window holds the rest of the input, once less than a
      // window is left. A read may have met the end with more left (two at
      // a time reads a window of parallel_window_bytes ahead; a top-level
      // member before the events is read whole, and 64 KiB past it): that
      // much is parsed in windows of window_bytes first, so that the scan
      // of the last one below does not go over a megabyte byte by byte.
      // One at a time and two at a time with equal sizes take the same
      // windows here.
      const bool final = hit_end_ && end_ - begin_ <= window;
      size_t text_end = end_;
      if (!final) {
        text_end = FindCut(begin_, hit_end_ ? begin_ + window : SeenEnd());
        if (text_end == std::string_view::npos) {  // no cut yet: a longer window
          grow(window);
          continue;
        }
      } else {
        // The rest of the input: check up front that it closes the top-level
        // value, and that nothing follows it.
        BracketScanner scan;
        scan.depth = depth;
        const size_t close = scan.ScanToClose(buf_.data(), begin_, end_);
        final_closed_ = close != std::string_view::npos;
        if (final_closed_) {
          size_t i = close;
          while (i < end_ && IsSpace(buf_[i])) ++i;
          if (i < end_) return TrailingText(i);
          // The last window's events up to its last cut are read as a
          // window that is not the last, so that the walk reads them (a
          // trace shorter than a window is all last window); with the walk
          // off too, so that errors come out the same either way (a window's
          // stage 1 finds a malformed string before any event is read). Not
          // where the text never closes: there every failure reads as
          // truncation.
          if (const size_t cut = FindCut(begin_, end_); cut != std::string_view::npos) {
            DD_ASSIGN_OR_RETURN(const WindowEnd head, ParseWindow(cut, /*final=*/false));
            if (head == WindowEnd::kArrayClosed) return absl::OkStatus();
            // Else begin_ is after the cut, or at an event the cut was inside.
          }
        }
      }
      DD_ASSIGN_OR_RETURN(const WindowEnd how, ParseWindow(text_end, final));
      if (how == WindowEnd::kArrayClosed) {
        // The scan above found no close in the rest of the input, yet the
        // array's iteration ended: simdjson skipped a value it did not
        // check (On-Demand validates what it is asked for) up to the
        // window's own ']'. The text never closes: truncated.
        if (final && !final_closed_) return Truncated();
        return absl::OkStatus();
      }
      if (how == WindowEnd::kCutEvent && final) return Truncated();
      if (how == WindowEnd::kNoProgress) grow(window);
    }
  }

  enum class WindowEnd { kConsumed, kCutEvent, kNoProgress, kArrayClosed };

  // --- two windows at once ----------------------------------------------------
  // With two cuts in the buffered text, the second window is parsed on a
  // helper thread by a detached parser (its own strings, tracks and events)
  // while this one parses the first; then it is merged, its strings and
  // tracks interned here in the order it met them, which is the order a
  // sequential parse meets them: the Trace is the same. Its warnings keep
  // their events' window-relative indexes and are added, in order, when it
  // is merged. Anything irregular in the second window (an error, an event
  // its end cut, the array closing in the first, the event limit) drops its
  // result, and the sequential loop parses that text again, so that errors
  // come out as they always do. nullopt when the first window is the last or
  // has no cut (the loop takes it one at a time).
  //
  // The windows are the ones a parse one at a time takes: they are cut
  // within what that parse would have read (SeenEnd), and the read ahead for
  // the second does not count as meeting the input's end (hit_end_), so both
  // meet it in the same window: a failure there reads as truncation, earlier
  // as malformed text.
  //
  // The second window's events are merged on the helper's thread while this
  // one reads the next windows' text (which touches only the buffer and the
  // input, nothing a merge writes); everything after that waits for it.
  absl::StatusOr<std::optional<WindowEnd>> ParseTwoWindows(size_t window) {
    size_t cut_a = std::string_view::npos;
    size_t cut_b = std::string_view::npos;
    const absl::Status read = ReadTwoWindows(window, &cut_a, &cut_b);
    DD_RETURN_IF_ERROR(JoinMerge());
    DD_RETURN_IF_ERROR(read);
    if (cut_a == std::string_view::npos) return std::nullopt;  // the last window, or no cut
    if (cut_b == std::string_view::npos) {  // the second is the last, or has no cut (or no text): the first alone
      DD_ASSIGN_OR_RETURN(const WindowEnd first, ParseWindow(cut_a, /*final=*/false));
      return std::optional<WindowEnd>(first);
    }
    if (helper_ == nullptr) {
      helper_options_ = options_;
      helper_options_.max_events = std::numeric_limits<int64_t>::max();  // checked when merged
      helper_options_.stats = nullptr;  // counted here, on this thread
      helper_ = std::make_unique<KinetoParser>(in_, source_, helper_options_);
      helper_->detached_ = true;
    }
    KinetoParser* const helper = helper_.get();
    // The helper copies its text itself, beside the first window's parse,
    // all but its first byte: that parse writes only within its own window
    // (the brackets of its chunks, WalkWindowChunks) and the ' ' after its
    // ']', on that first byte.
    const char first_byte = buf_[cut_a + 1];
    const std::string_view rest = Text(cut_a + 2, cut_b);
    bool second_ok = false;
    if (!worker_.Start([helper, first_byte, rest, &second_ok] {
          helper->LoadDetached(first_byte, rest);
          second_ok = helper->ParseDetached();
        })) {
      return std::nullopt;  // no thread to be had: one window at a time
    }
    NoteWindow(cut_b - cut_a - 1);
    absl::StatusOr<WindowEnd> first = absl::InternalError("not parsed");
    {
      struct Join {  // the helper's job reads this buffer and second_ok: it ends before they go
        Worker& worker;
        ~Join() { worker.Wait(); }  // a helper that threw left second_ok false: its text is parsed again here
      } join{worker_};
      first = ParseWindow(cut_a, /*final=*/false);
    }
    if (!first.ok()) return first.status();
    if (*first == WindowEnd::kConsumed && begin_ == cut_a + 1 && second_ok &&
        helper->index_ <= options_.max_events - index_) {
      seen_end_ = std::max(seen_end_, Global(cut_a + 1 + window));  // one at a time read the second's window
      begin_ = cut_b + 1;
      if (options_.stats != nullptr) ++options_.stats->helper_windows;
      // Joined by the next call (ParseEventStream calls again after kConsumed).
      merge_pending_ = worker_.Start([this, helper] { Merge(*helper); });
      if (!merge_pending_) Merge(*helper);
    }
    return std::optional<WindowEnd>(*first);
  }

  // Reads the text of the next two windows and finds their cuts: `*cut_a`
  // stays npos at the input's last window or without a cut, `*cut_b` when
  // the second window is the last, has no cut or no text.
  absl::Status ReadTwoWindows(size_t window, size_t* cut_a, size_t* cut_b) {
    DD_RETURN_IF_ERROR(Fill(window));
    if (hit_end_) return absl::OkStatus();  // the last window
    const size_t a = FindCut(begin_, SeenEnd());
    if (a == std::string_view::npos) return absl::OkStatus();
    const size_t first_bytes = a - begin_;
    DD_RETURN_IF_ERROR(Fill(first_bytes + 1 + window, /*ahead=*/true));  // may move the text to the front
    *cut_a = begin_ + first_bytes;
    const bool second_is_last = end_ < *cut_a + 1 + window;  // the input ends within it
    const size_t b = second_is_last ? std::string_view::npos : FindCut(*cut_a + 1, *cut_a + 1 + window);
    if (b != std::string_view::npos && b >= *cut_a + 2) *cut_b = b;
    return absl::OkStatus();
  }

  // Waits for the merge ParseTwoWindows left running, if any.
  absl::Status JoinMerge() {
    if (!merge_pending_) return absl::OkStatus();
    merge_pending_ = false;
    if (!worker_.Wait()) {
      return absl::ResourceExhaustedError(StrCat(source_, ": out of memory merging the events of a window"));
    }
    return absl::OkStatus();
  }

  // A detached parser's text: one window, parsed by ParseDetached: its first
  // byte, then the rest.
  void LoadDetached(char first_byte, std::string_view rest) {
    std::vector<TraceEvent> events = std::move(trace_.events);  // keeps its capacity
    std::vector<TraceEventDetail> details = std::move(trace_.details);
    std::vector<TraceFlow> flows = std::move(trace_.flows);
    events.clear();
    details.clear();
    flows.clear();
    const size_t size = 1 + rest.size();
    trace_ = Trace();
    trace_.events = std::move(events);
    trace_.details = std::move(details);
    trace_.flows = std::move(flows);
    ReserveRecords(trace_, size / 128 + 16);  // as ParseEventStream: no growth, no copies
    track_index_.clear();
    last_track_ = -1;
    prev_track_ = -1;
    kind_of_category_.clear();  // by the string ids of the table just reset
    std::fill(intern_cache_.begin(), intern_cache_.end(), InternSlot{});  // the same
    json_checked_.clear();
    meta_process_names_.clear();
    meta_process_labels_.clear();
    meta_log_.clear();
    pending_warnings_.clear();
    detached_warnings_.clear();
    std::fill(std::begin(phase_interned_), std::end(phase_interned_), false);
    index_ = 0;
    indexed_events_ = 0;
    const size_t need = 1 + size + 2 + JsonPadding();
    if (buf_.size() < need) buf_.resize(need);
    buf_[1] = first_byte;
    std::memcpy(buf_.data() + 2, rest.data(), rest.size());
    begin_ = 1;
    end_ = 1 + size;
    buf_origin_ = 0;
  }

  void NoteWindow(size_t bytes) const {
    if (options_.stats == nullptr) return;
    ++options_.stats->windows;
    options_.stats->largest_window_bytes = std::max(options_.stats->largest_window_bytes, bytes);
  }

  // Whether the window parsed whole.
  bool ParseDetached() {
    const absl::StatusOr<WindowEnd> how = ParseWindow(end_, /*final=*/false);
    return how.ok() && *how == WindowEnd::kConsumed;
  }

  // Appends what a detached parser read, its ids mapped to this trace's.
  void Merge(const KinetoParser& h) {
    const Trace& local = h.trace_;
    std::vector<StringId> strings(local.strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      strings[i] = trace_.strings.Intern(local.strings.Get(static_cast<StringId>(i)));
    }
    auto str = [&](StringId id) { return strings[static_cast<size_t>(id)]; };
    auto id = [&](bool is_text, int64_t num, StringId text) {
      IdValue v;
      v.present = true;
      v.is_text = is_text;
      v.num = num;
      v.text = str(text);
      return v;
    };
    std::vector<int32_t> tracks(local.tracks.size());
    for (size_t i = 0; i < tracks.size(); ++i) {
      const TraceTrack& t = local.tracks[i];
      tracks[i] = TrackFor(id(t.pid_is_text, t.pid, t.pid_text), id(t.tid_is_text, t.tid, t.tid_text));
      TraceTrack& merged = trace_.tracks[static_cast<size_t>(tracks[i])];
      merged.num_events += t.num_events;  // as Commit counted them
      merged.gpu = merged.gpu || t.gpu;
    }
    auto track = [&](int32_t id) { return tracks[static_cast<size_t>(id)]; };
    for (const MetaWrite& w : h.meta_log_) {
      TraceTrack& t = trace_.tracks[static_cast<size_t>(track(w.track))];
      if (w.sort_index) {
        t.sort_index = w.value;
      } else {
        t.thread_name = str(static_cast<StringId>(w.value));
      }
    }
    for (const auto& [t, name] : h.meta_process_names_) meta_process_names_.emplace_back(track(t), str(name));
    for (const auto& [t, label] : h.meta_process_labels_) meta_process_labels_.emplace_back(track(t), str(label));
    // Each record copied whole, then its ids renumbered in place (see Trace::AddEvent).
    for (const TraceEvent& local_ev : local.events) {
      const bool has_detail = local_ev.detail >= 0;
      TraceEvent& ev =
          trace_.AddEvent(local_ev, has_detail ? &local.details[static_cast<size_t>(local_ev.detail)] : nullptr);
      ev.name = str(ev.name);
      ev.input_dims = str(ev.input_dims);
      ev.input_types = str(ev.input_types);
      ev.track = track(ev.track);
      if (has_detail) {
        TraceEventDetail& detail = trace_.details.back();
        detail.dtype = str(detail.dtype);
        detail.sync_kind = str(detail.sync_kind);
      }
    }
    for (const TraceFlow& local_flow : local.flows) {
      TraceFlow& flow = trace_.flows.emplace_back(local_flow);
      flow.category = str(flow.category);
      flow.track = track(flow.track);
    }
    for (size_t c = 0; c < 256; ++c) phase_interned_[c] = phase_interned_[c] || h.phase_interned_[c];
    for (const PendingWarning& w : h.detached_warnings_) AddWarning(w, index_);
    index_ += h.index_;
    indexed_events_ += h.indexed_events_;
  }

  // Closes the text of events ending at `at` as an array in place: a ']'
  // and a space after it (simdjson checks a document for balance, a scan of
  // all of it, when the byte after it is a ']'); the two bytes are put back
  // when it goes.
  class CloseInPlace {
   public:
    explicit CloseInPlace(char* at) : at_(at), saved_{at[0], at[1]} {
      at_[0] = ']';
      at_[1] = ' ';
    }
    ~CloseInPlace() { std::memcpy(at_, saved_, 2); }
    CloseInPlace(const CloseInPlace&) = delete;
    CloseInPlace& operator=(const CloseInPlace&) = delete;

   private:
    char* at_;
    char saved_[2];
  };

  // Parses the events in buf_[begin_, text_end) as the array "[" text "]".
  absl::StatusOr<WindowEnd> ParseWindow(size_t text_end, bool final) {
    char* const data = buf_.data();
    const CloseInPlace close(data + text_end);
    data[begin_ - 1] = '[';
    loc_base_ = data;
    loc_global_ = buf_origin_;
    doc_start_ = data + begin_ - 1;
    doc_end_ = data + text_end + 1;
    size_t size = text_end + 2 - begin_;
    NoteWindow(text_end - begin_);
    const size_t window_start = begin_;
    if (options_.walk_index && !final) {
      const size_t from = WalkWindowChunks(data, text_end);
      if (from == text_end) {
        begin_ = text_end + 1;
        return WindowEnd::kConsumed;
      }
      if (from != window_start) {  // On-Demand reads on from that event
        data[from - 1] = '[';
        begin_ = from;
        doc_start_ = data + from - 1;
        size = text_end + 2 - from;
      }
    }
    doc_started_ = false;
    if (auto err = parser_.iterate(simdjson::padded_string_view(doc_start_, size, size + JsonPadding()))
                       .get(doc_);
        err != simdjson::SUCCESS) {
      return JsonError(err, -1, "");
    }
    doc_started_ = true;
    od::array events;
    if (auto err = doc_.get_array().get(events); err != simdjson::SUCCESS) return JsonError(err, -1, "");
    for (auto item : events) {
      const char* start = nullptr;
      if (doc_.current_location().get(start) != simdjson::SUCCESS) start = doc_end_;
      absl::Status status;
      od::value value;
      if (auto err = std::move(item).get(value); err != simdjson::SUCCESS) {
        status = JsonError(err, index_, "");
      } else if (index_ >= options_.max_events) {
        return Invalid(StrCat("more than ", options_.max_events, " events"));
      } else {
        status = ParseEvent(value, index_);
      }
      if (!status.ok()) {
        const auto at = static_cast<size_t>(start - data);
        if (!final && at < text_end && !EventEndsBefore(at, text_end)) {
          // The window's end cut this event: parse it again in the next.
          pending_warnings_.clear();
          begin_ = at;
          return at == window_start ? WindowEnd::kNoProgress : WindowEnd::kCutEvent;
        }
        if (final && !final_closed_) return Truncated(StrCat("event ", index_, ": "));
        return status;
      }
      FlushWarnings();
      ++index_;
    }
    doc_started_ = false;
    const char* after = nullptr;
    if (doc_.current_location().get(after) == simdjson::SUCCESS && after < data + text_end) {
      begin_ = static_cast<size_t>(after - data);  // the file's ']' closed the array
      return WindowEnd::kArrayClosed;
    }
    // The array ended at the window's end: at the window's own ']' if the
    // text ends with an event, else at the file's ']' just before it.
    size_t last = text_end;
    while (last > begin_ && IsSpace(data[last - 1])) --last;
    if (last > begin_ && data[last - 1] == ']') {
      begin_ = last;
      return WindowEnd::kArrayClosed;
    }
    if (final) return WindowEnd::kCutEvent;  // the file's array never closed
    begin_ = text_end + 1;
    return WindowEnd::kConsumed;
  }

  // Whether the event starting at buf_[at] ends before `limit`.
  bool EventEndsBefore(size_t at, size_t limit) const {
    const char c = buf_[at];
    if (c != '{' && c != '[') return true;  // a scalar cannot span a cut
    BracketScanner scan;
    return scan.ScanToClose(buf_.data(), at, limit) != std::string_view::npos;
  }

  // --- plain events, read from the structural index ------------------------
  // simdjson's stage 1 indexes a window's structure: where each string,
  // scalar and bracket, ':' and ',' starts. Nearly every event of a trace is
  // plain, and is read here straight from that index, which costs less than
  // On-Demand's iteration of the same tokens. The same functions read each
  // value from its raw token as the On-Demand path does (RawStringToken,
  // ParseMicrosToNsPadded, ParseIntToken, DimsProductOfText, Intern,
  // Commit), so the Trace is the same. At the first event that is anything
  // else (malformed JSON, a field that would warn or fail, an escaped
  // string, more events than allowed, anything but the next event after it)
  // nothing of that event is kept and On-Demand reads the rest of the
  // window, so errors and warnings come out as they always do. (Strings
  // interned before such an event was given up are met again, in the same
  // order, by On-Demand.) The index costs 4 bytes a byte of what it indexes
  // at once (a window, or a longer window's chunk: WalkWindowChunks; about
  // 270 KiB for the default window_bytes, per parser).

  // The plain events of the window [begin_, text_end) (its '[' and ']' in
  // place), walked in chunks of about window_bytes cut between events
  // as windows are (FindCut), so that a chunk's text and its index stay in
  // the core's own cache from stage 1 to the walk: begin_ moves to each
  // chunk's start; returns what WalkWindowIndex returns for the window.
  // A chunk is bracketed in place (its '[' over the ',' before it, its ']'
  // and a space over the ',' and the byte after it, those two put back
  // after it): the text On-Demand reads, from where the walk stopped to the
  // window's end, is unchanged; each ',' before a walked chunk stays a '['
  // (before where On-Demand starts, where nothing reads the text again). A
  // cut inside an event (see FindLineCut) leaves the walk there, and
  // On-Demand reads that event whole.
  size_t WalkWindowChunks(char* data, size_t text_end) {
    const size_t chunk = WindowBytes();
    while (true) {
      size_t cut = text_end;
      if (text_end - begin_ > chunk) {
        cut = FindCut(begin_, begin_ + chunk);
        if (cut == std::string_view::npos) cut = text_end;
      }
      if (cut == text_end) return WalkWindowIndex(data, text_end);
      size_t from = 0;
      {
        const CloseInPlace close(data + cut);
        from = WalkWindowIndex(data, cut);
      }
      if (from != cut) return from;
      begin_ = cut + 1;
      data[cut] = '[';
    }
  }

  // A window's structural index.
  struct Structure {
    const char* base;     // the window's '['
    const uint32_t* idx;  // offsets from base, in order
    uint32_t n;
    char Char(uint32_t i) const { return base[idx[i]]; }
    const char* At(uint32_t i) const { return base + idx[i]; }
    // The token at i as On-Demand's raw_json_token gives it: up to the next
    // structural character, the blanks before it included.
    std::string_view Token(uint32_t i) const { return std::string_view(base + idx[i], idx[i + 1] - idx[i]); }
  };

  // The events of the window [begin_, text_end) (its '[' and ']' in place)
  // read from its index, as far as they are plain: returns where On-Demand
  // is to go on (an event's start; begin_ when none was read), or text_end
  // when every event was read.
  size_t WalkWindowIndex(const char* data, size_t text_end) {
    const size_t doc = begin_ - 1;
    const size_t len = text_end + 2 - doc;
    if (options_.stats != nullptr) options_.stats->largest_walk_bytes = std::max(options_.stats->largest_walk_bytes, len);
    if (structure_ == nullptr || structure_capacity_ < len) {
      structure_.reset();
      // For a window's worth (not for a huge window_bytes before a text
      // that long comes), and after that for the longest text met.
      structure_capacity_ = std::max(len, std::min(options_.window_bytes, size_t{4} << 20) + 4096);
      if (simdjson::get_active_implementation()->create_dom_parser_implementation(
              structure_capacity_, simdjson::DEFAULT_MAX_DEPTH, structure_) != simdjson::SUCCESS) {
        structure_.reset();
        structure_capacity_ = 0;
        return begin_;
      }
    }
    if (structure_->stage1(reinterpret_cast<const uint8_t*>(data + doc), len, simdjson::stage1_mode::regular) !=
        simdjson::SUCCESS) {
      return begin_;  // On-Demand's stage 1 finds the same error, and words it
    }
    const Structure w{data + doc, structure_->structural_indexes.get(), structure_->n_structural_indexes};
    if (w.n < 2 || w.Char(0) != '[') return begin_;
    size_t resume = begin_;
    // A detached parser's text was copied for it: nothing of the input is its own to fetch.
    const std::string_view ahead = detached_ ? std::string_view() : in_.InMemoryAhead();
    PrefetchInput(ahead, kPrefetchLead);
    for (uint32_t i = 1; w.Char(i) == '{' && index_ < options_.max_events;) {
      uint32_t end = 0;  // the index after the event's '}'
      EventScratch s;
      if (!WalkEvent(w, i, &end, s) || end >= w.n) break;
      PrefetchInput(ahead, w.idx[end] - w.idx[i]);
      // An event is followed by the window's own ']', or by a ',' and the
      // next event. Where anything else follows (the file's ']' closing the
      // array, a second ',', an item that is no object), On-Demand reads
      // the event before it too, and words what is wrong.
      const bool last = w.Char(end) == ']' && doc + w.idx[end] == text_end;
      if (!last && (w.Char(end) != ',' || end + 1 >= w.n || w.Char(end + 1) != '{')) break;
      if (!s.has_ph || !Commit(s, index_).ok()) {
        pending_warnings_.clear();
        break;
      }
      FlushWarnings();
      ++index_;
      ++indexed_events_;
      if (last) return text_end;
      i = end + 1;
      resume = doc + w.idx[i];
    }
    return resume;
  }

  // Text in memory (ParseTraceJson, or a mapped file) is copied into the
  // window by Fill at the speed of memory, a sixth of a one-core parse. While a window is
  // walked, the next window's lines are fetched into the cache, as many
  // bytes as each event walked, from kPrefetchLead bytes ahead and at most
  // a window ahead, so that the copy finds them there: the fetch overlaps
  // the walk. (`ahead`: the input the next Read copies, when in memory.)
  void PrefetchInput(std::string_view ahead, size_t bytes) {
    if (ahead.empty()) return;
    const uint64_t base = total_read_;  // the input offset of ahead[0]
    prefetched_ = std::max(prefetched_, base);
    const uint64_t stop = base + std::min<uint64_t>(ahead.size(), WindowBytes());
    for (const uint64_t to = std::min<uint64_t>(prefetched_ + bytes, stop); prefetched_ < to; prefetched_ += 64) {
      __builtin_prefetch(ahead.data() + (prefetched_ - base));
    }
  }
  static constexpr size_t kPrefetchLead = 1024;

  // Reads the event whose '{' is at index i into `s`; `*end` is the index
  // after its '}'. False where it is not plain (see above).
  bool WalkEvent(const Structure& w, uint32_t i, uint32_t* end, EventScratch& s) {
    uint32_t j = i + 1;
    while (true) {
      const char* key = nullptr;
      if (!WalkKey(w, j, &key)) return false;
      const uint32_t v = j + 2;
      uint32_t after = v + 1;  // a scalar's
      switch (EventFieldOf(od::raw_json_string(reinterpret_cast<const uint8_t*>(key)))) {
        case EventField::kPh: {
          // One letter (ReadPhase: a new one is interned when first seen).
          const std::string_view raw = RawStringToken(w.Token(v));
          if (raw.size() != 1 || raw[0] == '\\') return false;
          if (bool& seen = phase_interned_[static_cast<unsigned char>(raw[0])]; !seen) {
            if (raw.size() > options_.max_string_bytes) return false;  // (a limit of 0 refuses it)
            trace_.strings.Intern(raw);
            seen = true;
          }
          s.ph = raw[0];
          s.has_ph = true;
          break;
        }
        case EventField::kName: {
          if (s.has_ph && IsFlowPhase(s.ph)) {
            if (!WalkSkipped(w, v, &after)) return false;
            break;
          }
          if (!WalkString(w, v, &s.ev.name)) return false;
          s.has_name = true;
          break;
        }
        case EventField::kCat: {
          if (!WalkString(w, v, &s.category)) return false;
          break;
        }
        case EventField::kTs: {
          if (!WalkTime(w, v, &s.ev.ts_ns)) return false;
          s.has_ts = true;
          break;
        }
        case EventField::kDur: {
          if (!WalkTime(w, v, &s.ev.dur_ns)) return false;
          s.has_dur = true;
          break;
        }
        case EventField::kPid: {
          if (!WalkId(w, v, &s.pid, &pid_cache_)) return false;
          break;
        }
        case EventField::kTid: {
          if (!WalkId(w, v, &s.tid, &tid_cache_)) return false;
          break;
        }
        case EventField::kId: {
          IdValue id;
          if (!WalkId(w, v, &id, nullptr)) return false;
          if (!id.is_text) {
            s.flow_id = id.num;
            s.has_id = true;
          }
          break;
        }
        case EventField::kArgs: {
          if (w.Char(v) != '{' || !WalkArgs(w, v, s, &after)) return false;
          break;
        }
        case EventField::kOther: {
          if (!WalkSkipped(w, v, &after)) return false;
          break;
        }
      }
      if (after >= w.n) return false;
      if (w.Char(after) == '}') {
        *end = after + 1;
        return true;
      }
      if (w.Char(after) != ',') return false;
      j = after + 1;
    }
  }

  // The args object whose '{' is at index `open`, as ParseArgs reads it;
  // `*after` is the index after its '}'.
  bool WalkArgs(const Structure& w, uint32_t open, EventScratch& s, uint32_t* after) {
    TraceEvent& ev = s.ev;
    TraceEventDetail& detail = s.detail;
    uint32_t j = open + 1;
    if (j < w.n && w.Char(j) == '}') {
      *after = j + 1;
      return true;
    }
    while (true) {
      const char* key = nullptr;
      if (!WalkKey(w, j, &key)) return false;
      const uint32_t v = j + 2;
      uint32_t next = v + 1;  // a scalar's
      bool ok = true;
      const ArgField which = ArgFieldOf(od::raw_json_string(reinterpret_cast<const uint8_t*>(key)));
      switch (which) {
        case ArgField::kCorrelation:
          ok = WalkIntArg(w, v, kUnset, &ev.correlation);
          break;
        case ArgField::kExternalId:
          ok = WalkIntArg(w, v, kUnset, &ev.external_id);
          break;
        case ArgField::kDevice: {
          int64_t device = -1;
          ok = WalkIntArg(w, v, -1, &device);
          detail.device = static_cast<int32_t>(device);
          s.has_detail = true;
          break;
        }
        case ArgField::kInputDims:
          ok = WalkRawArray(w, v, &ev.input_dims, &next);
          break;
        case ArgField::kInputType:
          ok = WalkRawArray(w, v, &ev.input_types, &next);
          break;
        case ArgField::kGrid:
          ok = WalkDims(w, v, &detail.grid_blocks, &next);
          s.has_detail = true;
          break;
        case ArgField::kBlock: {
          int64_t threads = 0;
          ok = WalkDims(w, v, &threads, &next);
          detail.block_threads = static_cast<int32_t>(std::min<int64_t>(threads, INT32_MAX));
          s.has_detail = true;
          break;
        }
        case ArgField::kDtype:
          ok = w.Char(v) == '"' && WalkString(w, v, &detail.dtype);  // a non-string warns
          s.has_detail = true;
          break;
        case ArgField::kSyncKind:
          ok = w.Char(v) == '"' && WalkString(w, v, &detail.sync_kind);
          s.has_detail = true;
          break;
        case ArgField::kName:
          ok = w.Char(v) == '"' && WalkString(w, v, &s.meta_name);
          break;
        case ArgField::kLabels:
          ok = w.Char(v) == '"' && WalkString(w, v, &s.meta_labels);
          break;
        case ArgField::kSortIndex:
          ok = WalkIntArg(w, v, kUnset, &s.meta_sort_index);
          break;
        case ArgField::kOther:
          ok = WalkSkipped(w, v, &next);
          break;
        default: {  // the int64 detail args
          const IntArgField* arg = IntDetailArg(which);
          ok = WalkIntArg(w, v, kUnset, &(detail.*arg->member));
          s.has_detail = true;
          break;
        }
      }
      if (!ok || next >= w.n) return false;
      if (w.Char(next) == '}') {
        *after = next + 1;
        return true;
      }
      if (w.Char(next) != ',') return false;
      j = next + 1;
    }
  }

  // A key at index j, followed by its ':' (the value is at j + 2): `*key`
  // after its opening quote, as On-Demand's raw_json_string holds it and
  // checks it (EventFieldOf and ArgFieldOf compare the raw text up to its
  // closing quote: an escaped key matches no field daydream reads).
  static bool WalkKey(const Structure& w, uint32_t j, const char** key) {
    // (The value at j + 2 is followed by another index: the window's ']' is the last.)
    if (j + 3 >= w.n || w.Char(j) != '"' || w.Char(j + 1) != ':') return false;
    *key = w.At(j) + 1;
    return true;
  }

  // ReadString, for a string without escapes.
  bool WalkString(const Structure& w, uint32_t v, StringId* out) {
    const std::string_view raw = RawStringToken(w.Token(v));
    return raw.data() != nullptr && InternPlain(raw, out);
  }

  // ReadTime.
  static bool WalkTime(const Structure& w, uint32_t v, TimeNs* out) {
    const std::string_view token = w.Token(v);
    return (token[0] == '-' || IsDigitChar(token[0])) && ParseMicrosToNsPadded(token, out);
  }

  // ReadId.
  bool WalkId(const Structure& w, uint32_t v, IdValue* id, NumberCache* cache) {
    const std::string_view token = w.Token(v);
    *id = IdValue();
    id->present = true;
    if (token[0] == '-' || IsDigitChar(token[0])) {
      if (cache != nullptr && cache->Find(token, &id->num)) return true;
      if (!ParseIntToken<true>(token, &id->num)) return false;
      if (cache != nullptr) cache->Keep(token, id->num);
      return true;
    }
    StringId text = 0;
    if (token[0] != '"' || !WalkString(w, v, &text)) return false;
    SetTextId(text, id);
    return true;
  }

  // IntArgOr, for an arg that is an integer (or one in a string without
  // escapes) or null.
  static bool WalkIntArg(const Structure& w, uint32_t v, int64_t otherwise, int64_t* out) {
    const std::string_view token = w.Token(v);
    if (token[0] == '-' || IsDigitChar(token[0])) return ParseIntToken<true>(token, out);
    if (token[0] == 'n') {  // null, as On-Demand tells a value's type by its first byte
      *out = otherwise;
      return true;
    }
    const std::string_view raw = RawStringToken(token);
    return token[0] == '"' && raw.data() != nullptr && !HasEscape(raw) && ParseIntToken(raw, out);
  }

  // ReadRawArray.
  bool WalkRawArray(const Structure& w, uint32_t v, StringId* out, uint32_t* after) {
    if (w.Char(v) != '[') {  // not an array: passed over, 0
      *out = 0;
      return WalkSkipped(w, v, after);
    }
    uint32_t close = 0;
    if (!MatchingClose(w, v, &close) || close + 1 >= w.n) return false;
    // As On-Demand's raw_json: up to the next structural character.
    const std::string_view raw(w.At(v), w.idx[close + 1] - w.idx[v]);
    if (raw.size() > options_.max_string_bytes || !InternJsonText(raw, out)) return false;
    *after = close + 1;
    return true;
  }

  // ReadDimsProduct, for a plain array of small integers.
  static bool WalkDims(const Structure& w, uint32_t v, int64_t* out, uint32_t* after) {
    uint32_t close = 0;
    if (!DimsProductOfText(w.At(v), out) || !MatchingClose(w, v, &close)) return false;
    *after = close + 1;
    return true;
  }

  // A value daydream does not read, checked as CheckSkipped checks it;
  // `*after` is the index after it.
  bool WalkSkipped(const Structure& w, uint32_t v, uint32_t* after) {
    const char c = w.Char(v);
    if (c != '[' && c != '{') {
      *after = v + 1;
      return IsScalarStart(c);  // a string is not followed by ':' (WalkEvent and WalkArgs check what follows)
    }
    uint32_t close = 0;
    if (!MatchingClose(w, v, &close) || close + 1 >= w.n) return false;
    *after = close + 1;
    return SkippedTextErrorAt(std::string_view(w.At(v), w.idx[close + 1] - w.idx[v])) == std::string_view::npos;
  }

  // The index of the bracket that closes the one at `open` (brackets of
  // either kind counted alike, as On-Demand skips a value).
  static bool MatchingClose(const Structure& w, uint32_t open, uint32_t* close) {
    int64_t depth = 0;
    for (uint32_t k = open; k < w.n; ++k) {
      const char c = w.Char(k);
      if (c == '[' || c == '{') {
        ++depth;
      } else if ((c == ']' || c == '}') && --depth == 0) {
        *close = k;
        return true;
      }
    }
    return false;
  }

  std::string LocationSuffix() {
    const char* loc = nullptr;
    // A document whose iteration never started has no location to ask for.
    if (doc_started_ && doc_.current_location().get(loc) == simdjson::SUCCESS && loc != nullptr &&
        loc >= doc_start_ && loc < doc_end_) {
      return StrCat(" at byte ", std::max<int64_t>(0, loc_global_ + (loc - loc_base_)));
    }
    return "";
  }

  absl::Status JsonError(error_code err, int64_t index, std::string_view field) {
    std::string what;
    switch (err) {
      case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      case simdjson::TAPE_ERROR:
      case simdjson::UNCLOSED_STRING:
        what = "the JSON is truncated or malformed";
        break;
      case simdjson::DEPTH_ERROR:
        what = "JSON nesting deeper than the parser supports";
        break;
      case simdjson::CAPACITY:
        what = "an event is too large for one JSON document (4 GiB)";
        break;
      case simdjson::INCORRECT_TYPE:
        what = "a value has the wrong JSON type";
        break;
      case simdjson::UTF8_ERROR:
        what = "the text is not valid UTF-8";
        break;
      default:
        what = StrCat("invalid JSON (", simdjson::error_message(err), ")");
        break;
    }
    std::string where = index >= 0 ? StrCat("event ", index, ": ") : "";
    if (!field.empty()) StrAppend(&where, Quote(field), ": ");
    if (err != simdjson::INCORRECT_TYPE && !final_closed_) return Truncated(where);
    return absl::InvalidArgumentError(StrCat(source_, ": ", where, what, LocationSuffix()));
  }

  absl::StatusOr<StringId> ReadString(od::value& v, int64_t index, std::string_view field) {
    // The string as it stands in the text first (InternPlain); simdjson
    // unescapes the others.
    StringId id = 0;
    const std::string_view raw = RawStringToken(v.raw_json_token());
    if (raw.data() != nullptr && InternPlain(raw, &id)) return id;
    DD_ASSIGN_OR_RETURN(std::string_view s, ReadStringView(v, index, field));  // unescaped, or the error
    return Intern(s);
  }

  // A string's text between its quotes, interned into `*id`; false when it
  // has an escape or is longer than the limit (ReadStringView words that). A
  // cached string is one without a backslash, so the same bytes are the
  // same string, and the check for escapes is only needed on a miss.
  bool InternPlain(std::string_view raw, StringId* id) {
    if (const StringId* cached = FindCached(raw)) {
      *id = *cached;
      return true;
    }
    if (HasEscape(raw) || raw.size() > options_.max_string_bytes) return false;
    *id = Intern(raw);
    return true;
  }

  // The string, unescaped, valid until the next string is read.
  absl::StatusOr<std::string_view> ReadStringView(od::value& v, int64_t index, std::string_view field) {
    std::string_view s = RawStringToken(v.raw_json_token());
    if (s.data() != nullptr && !HasEscape(s)) {
      if (s.size() > options_.max_string_bytes) return StringTooLong(index, field, s.size());
      return s;
    }
    if (auto err = v.get_string().get(s); err != simdjson::SUCCESS) {
      if (err == simdjson::INCORRECT_TYPE) {
        return EventError(index, StrCat(Quote(field), " must be a string"));
      }
      return JsonError(err, index, field);
    }
    if (s.size() > options_.max_string_bytes) return StringTooLong(index, field, s.size());
    return s;
  }

  absl::Status StringTooLong(int64_t index, std::string_view field, size_t size) {
    return EventError(index, StrCat(Quote(field), " is ", size, " bytes long (the limit is ",
                                    options_.max_string_bytes, ")"));
  }

  // Reads 'ph', one letter. Each distinct value is interned once, when first
  // seen (the table holds the same strings as when every 'ph' was interned).
  absl::StatusOr<char> ReadPhase(od::value& v, int64_t index) {
    // A letter seen before, as it stands in the text (no escape to resolve).
    if (const std::string_view raw = RawStringToken(v.raw_json_token());
        raw.size() == 1 && raw[0] != '\\' && phase_interned_[static_cast<unsigned char>(raw[0])]) {
      return raw[0];
    }
    DD_ASSIGN_OR_RETURN(std::string_view text, ReadStringView(v, index, "ph"));
    if (text.size() == 1 && phase_interned_[static_cast<unsigned char>(text[0])]) return text[0];
    trace_.strings.Intern(text);
    if (text.size() != 1) {
      return EventError(index, StrCat("'ph' is ", Quote(Printable(text.substr(0, 20))), ", not one letter"));
    }
    phase_interned_[static_cast<unsigned char>(text[0])] = true;
    return text[0];
  }

  // Reads a time field (microseconds) into ns. Errors name the field.
  absl::StatusOr<TimeNs> ReadTime(od::value& v, int64_t index, std::string_view field) {
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (t != od::json_type::number) {
      return EventError(index, StrCat(Quote(field), " must be a number of microseconds"));
    }
    const std::string_view raw = v.raw_json_token();
    TimeNs ns = 0;
    if (!ParseMicrosToNsPadded(raw, &ns)) {
      return EventError(index, StrCat(Quote(field), " is out of range (",
                                            Printable(Trim(raw).substr(0, 40)), " us)"));
    }
    return ns;
  }

  // Reads an optional integer arg into *out; false when it is null or not an
  // integer (wrong types are counted, not fatal; malformed JSON is).
  absl::StatusOr<bool> ReadIntArg(od::value& v, int64_t index, std::string_view field, int64_t* out) {
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    bool ok = false;
    if (t == od::json_type::number) {
      const std::string_view token = v.raw_json_token();
      ok = ParseIntToken<true>(token, out);
      if (!ok) DD_RETURN_IF_ERROR(CheckJsonText(token, index, field));  // "1x" is no number at all
    } else if (t == od::json_type::string) {
      std::string_view s;
      if (auto err = v.get_string().get(s); err != simdjson::SUCCESS) return JsonError(err, index, field);
      ok = ParseIntToken(s, out);
    } else if (t == od::json_type::null) {
      return false;
    } else {
      DD_RETURN_IF_ERROR(CheckSkipped(v, index, field));
    }
    if (!ok) WarnEvent("bad_arg_type", index, StrCat(": arg ", Quote(field), " is not an integer; ignored"));
    return ok;
  }

  // The integer arg, or `otherwise`.
  absl::StatusOr<int64_t> IntArgOr(od::value& v, int64_t index, std::string_view field, int64_t otherwise) {
    int64_t n = 0;
    DD_ASSIGN_OR_RETURN(const bool read, ReadIntArg(v, index, field, &n));
    return read ? n : otherwise;
  }

  // A value daydream does not read, which simdjson's On-Demand parser would
  // skip unchecked, counting brackets: malformed JSON in an array or object
  // there is an error as anywhere else (scalars: see SkippedValueError).
  absl::Status CheckSkipped(od::value& v, int64_t index, std::string_view field) {
    error_code err = simdjson::SUCCESS;
    const char* const bad = SkippedValueError(v, &err);
    if (err != simdjson::SUCCESS) return JsonError(err, index, field);
    return bad == nullptr ? absl::OkStatus() : MalformedAt(bad, index, field);
  }
  // Whether CheckSkipped has anything to check in `v` (see
  // SkippedValueError): an array, an object, a string followed by a ':', or
  // no value at all.
  static bool NeedsSkipCheck(od::value& v) {
    const char* at = nullptr;
    if (v.current_location().get(at) != simdjson::SUCCESS || at == nullptr) return true;  // CheckSkipped says why
    if (*at == '"') return TakenForKey(v.raw_json_token());
    return !IsScalarStart(*at);  // a container, or no value at all
  }
  [[gnu::noinline]] absl::Status CheckSkipped(od::value& v, int64_t index, const od::raw_json_string& key) {
    error_code err = simdjson::SUCCESS;
    const char* const bad = SkippedValueError(v, &err);
    if (err == simdjson::SUCCESS && bad == nullptr) return absl::OkStatus();
    // The key's text up to its closing quote, for the message only.
    const char* const raw = key.raw();
    size_t n = 0;
    while (n < 80 && raw[n] != '"' && raw[n] != '\0') n += raw[n] == '\\' ? 2 : 1;
    const std::string field = Printable(std::string_view(raw, n));
    return err != simdjson::SUCCESS ? JsonError(err, index, field) : MalformedAt(bad, index, field);
  }

  // Where the array or object `v` stops being JSON, nullptr when it is JSON
  // (or simdjson's error in *err). On-Demand skips a value by counting
  // brackets, so a malformed one could run on over the events after it; its
  // text is checked whole, once per distinct text (the same shapes and
  // argument lists recur; kept in a string table of its own, across
  // windows). A string is checked not to be followed by a ':' (TakenForKey),
  // and a value that starts like no JSON value (a ':', a ',', a closing
  // bracket) is an error at its first byte.
  // Other scalars are not checked: skipping one passes one token, which
  // hides nothing else, and checking the million of them a trace holds cost
  // 7% of the parse.
  const char* SkippedValueError(od::value& v, error_code* err) {
    const std::string_view token = v.raw_json_token();
    const char first = token.empty() ? '\0' : token.front();
    std::string_view text;
    if (first == '"') {
      return TakenForKey(token) ? token.data() + token.size() : nullptr;
    } else if (!IsScalarStart(first) && first != '[' && first != '{') {
      return token.data();  // no value where one should be
    } else if (first == '[') {
      od::array array;
      if ((*err = v.get_array().get(array)) != simdjson::SUCCESS) return nullptr;
      if ((*err = array.raw_json().get(text)) != simdjson::SUCCESS) return nullptr;
    } else if (first == '{') {
      od::object object;
      if ((*err = v.get_object().get(object)) != simdjson::SUCCESS) return nullptr;
      if ((*err = object.raw_json().get(text)) != simdjson::SUCCESS) return nullptr;
    } else {
      return nullptr;
    }
    const size_t bad = SkippedTextErrorAt(text);
    return bad == std::string_view::npos ? nullptr : text.data() + bad;
  }

  // Where the text of a skipped array or object stops being JSON, npos when
  // it is JSON (a text found well-formed is remembered: see SkippedValueError).
  size_t SkippedTextErrorAt(std::string_view text) {
    if (checked_texts_.Find(text) >= 0) return std::string_view::npos;
    const size_t bad = JsonValueErrorAt(text);
    if (bad == std::string_view::npos && text.size() <= kMaxRememberedText &&
        checked_texts_.arena_bytes() < kMaxRememberedBytes) {
      checked_texts_.Intern(text);
    }
    return bad;
  }

  absl::Status MalformedAt(const char* bad, int64_t index, std::string_view field) const {
    std::string where = index >= 0 ? StrCat("event ", index, ": ") : "";
    return absl::InvalidArgumentError(StrCat(source_, ": ", where, Quote(field), ": the JSON is malformed at byte ",
                                             loc_global_ + (bad - loc_base_)));
  }

  // `text` (in the document being parsed) is one JSON value.
  absl::Status CheckJsonText(std::string_view text, int64_t index, std::string_view field) const {
    const size_t bad = JsonValueErrorAt(text);
    return bad == std::string_view::npos ? absl::OkStatus() : MalformedAt(text.data() + bad, index, field);
  }

  // Into `*id` (fields written in place: a returned IdValue read back whole
  // stalled store forwarding, two thirds of this function's time).
  // `cache`, when given, holds the last numeric token read for this field:
  // a thread's pid and tid repeat event after event, and comparing their
  // text costs less than parsing it again.
  absl::Status ReadId(od::value& v, int64_t index, std::string_view field, IdValue* id,
                      NumberCache* cache = nullptr) {
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    *id = IdValue();
    id->present = true;
    if (t == od::json_type::number) {
      const std::string_view token = v.raw_json_token();
      if (cache != nullptr && cache->Find(token, &id->num)) return absl::OkStatus();
      if (!ParseIntToken<true>(token, &id->num)) {
        return EventError(index, StrCat(Quote(field), " must be an integer or a string"));
      }
      if (cache != nullptr) cache->Keep(token, id->num);
      return absl::OkStatus();
    }
    if (t == od::json_type::string) {
      DD_ASSIGN_OR_RETURN(const StringId s, ReadString(v, index, field));
      SetTextId(s, id);
      return absl::OkStatus();
    }
    return EventError(index, StrCat(Quote(field), " must be an integer or a string"));
  }

  // An id written as a string: its number when it is one ("12"), else the text.
  void SetTextId(StringId s, IdValue* id) const {
    int64_t n = 0;
    if (ParseIntToken(trace_.strings.Get(s), &n) && !trace_.strings.Get(s).empty()) {
      id->num = n;
    } else {
      id->is_text = true;
      id->text = s;
    }
  }

  absl::Status ParseTop(od::object& top) {
    for (auto field_result : top) {
      od::field field;
      if (auto err = std::move(field_result).get(field); err != simdjson::SUCCESS) return JsonError(err, -1, "");
      const od::raw_json_string key = field.key();
      od::value value = field.value();
      if (key == "deviceProperties") {
        od::array devices;
        if (value.get_array().get(devices) != simdjson::SUCCESS) {
          Warn("bad_device_properties",
                              StrCat(source_, ": \"deviceProperties\" is not an array; ignored"));
          continue;
        }
        DD_RETURN_IF_ERROR(ParseDevices(devices));
      } else if (key == "distributedInfo") {
        od::object info;
        if (value.get_object().get(info) != simdjson::SUCCESS) {
          Warn("bad_distributed_info",
                              StrCat(source_, ": \"distributedInfo\" is not an object; ignored"));
          continue;
        }
        DD_RETURN_IF_ERROR(ParseDistributedInfo(info));
      } else if (key == "traceName") {
        std::string_view s;
        if (value.get_string().get(s) == simdjson::SUCCESS) trace_.trace_name = std::string(s);
      } else if (key == "baseTimeNanoseconds") {
        int64_t n = 0;
        DD_ASSIGN_OR_RETURN(const bool read, ReadIntArg(value, -1, "baseTimeNanoseconds", &n));
        if (read) trace_.base_time_ns = n;
      } else if (key == "schemaVersion") {
        int64_t n = 0;
        DD_ASSIGN_OR_RETURN(const bool read, ReadIntArg(value, -1, "schemaVersion", &n));
        if (read) trace_.schema_version = n;
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseDevices(od::array& devices) {
    for (auto item : devices) {
      od::object obj;
      if (auto err = item.get_object().get(obj); err != simdjson::SUCCESS) {
        if (err != simdjson::INCORRECT_TYPE) return JsonError(err, -1, "deviceProperties");
        continue;
      }
      DeviceProperties dev;
      for (auto field_result : obj) {
        od::field field;
        if (auto err = std::move(field_result).get(field); err != simdjson::SUCCESS) {
          return JsonError(err, -1, "deviceProperties");
        }
        const od::raw_json_string key = field.key();
        od::value value = field.value();
        if (key == "name") {
          std::string_view s;
          if (value.get_string().get(s) == simdjson::SUCCESS) dev.name = std::string(s);
        } else if (key == "id") {
          DD_ASSIGN_OR_RETURN(const int64_t id, IntArgOr(value, -1, "id", -1));
          dev.id = static_cast<int32_t>(id);
        } else if (key == "totalGlobalMem") {
          DD_ASSIGN_OR_RETURN(dev.total_global_mem, IntArgOr(value, -1, "totalGlobalMem", 0));
        } else if (key == "computeMajor") {
          DD_ASSIGN_OR_RETURN(const int64_t major, IntArgOr(value, -1, "computeMajor", 0));
          dev.compute_major = static_cast<int32_t>(major);
        } else if (key == "computeMinor") {
          DD_ASSIGN_OR_RETURN(const int64_t minor, IntArgOr(value, -1, "computeMinor", 0));
          dev.compute_minor = static_cast<int32_t>(minor);
        } else if (key == "numSms") {
          DD_ASSIGN_OR_RETURN(const int64_t sms, IntArgOr(value, -1, "numSms", 0));
          dev.num_sms = static_cast<int32_t>(sms);
        }
      }
      trace_.devices.push_back(std::move(dev));
    }
    return absl::OkStatus();
  }

  absl::Status ParseDistributedInfo(od::object& info) {
    for (auto field_result : info) {
      od::field field;
      if (auto err = std::move(field_result).get(field); err != simdjson::SUCCESS) {
        return JsonError(err, -1, "distributedInfo");
      }
      const od::raw_json_string key = field.key();
      od::value value = field.value();
      if (key == "rank") {
        int64_t n = 0;
        DD_ASSIGN_OR_RETURN(const bool read, ReadIntArg(value, -1, "distributedInfo.rank", &n));
        if (read) trace_.rank = static_cast<int32_t>(n);
      } else if (key == "world_size") {
        int64_t n = 0;
        DD_ASSIGN_OR_RETURN(const bool read, ReadIntArg(value, -1, "distributedInfo.world_size", &n));
        if (read) trace_.world_size = static_cast<int32_t>(n);
      } else if (key == "backend") {
        std::string_view s;
        if (value.get_string().get(s) == simdjson::SUCCESS) trace_.backend = std::string(s);
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseArgs(od::value& value, EventScratch& s, int64_t index) {
    od::object args;
    if (auto err = value.get_object().get(args); err != simdjson::SUCCESS) {
      if (err == simdjson::INCORRECT_TYPE) {
        if (NeedsSkipCheck(value)) DD_RETURN_IF_ERROR(CheckSkipped(value, index, "args"));
        WarnEvent("bad_args", index, ": 'args' is not an object; ignored");
        return absl::OkStatus();
      }
      return JsonError(err, index, "args");
    }
    TraceEvent& ev = s.ev;
    TraceEventDetail& detail = s.detail;
    for (auto field_result : args) {
      if (auto err = field_result.error(); err != simdjson::SUCCESS) return JsonError(err, index, "args");
      od::field& field = field_result.value_unsafe();  // by reference: see ParseEvent
      const od::raw_json_string key = field.key();
      od::value& v = field.value();
      const ArgField which = ArgFieldOf(key);
      if (const IntArgField* arg = IntDetailArg(which)) {
        DD_ASSIGN_OR_RETURN(detail.*arg->member, IntArgOr(v, index, arg->name, kUnset));
        s.has_detail = true;
        continue;
      }
      switch (which) {
        case ArgField::kCorrelation: {
          DD_ASSIGN_OR_RETURN(ev.correlation, IntArgOr(v, index, "correlation", kUnset));
          break;
        }
        case ArgField::kExternalId: {
          DD_ASSIGN_OR_RETURN(ev.external_id, IntArgOr(v, index, "External id", kUnset));
          break;
        }
        case ArgField::kDevice: {
          DD_ASSIGN_OR_RETURN(const int64_t device, IntArgOr(v, index, "device", -1));
          detail.device = static_cast<int32_t>(device);
          s.has_detail = true;
          break;
        }
        case ArgField::kInputDims: {
          DD_ASSIGN_OR_RETURN(ev.input_dims, ReadRawArray(v, index, "Input Dims"));
          break;
        }
        case ArgField::kInputType: {
          DD_ASSIGN_OR_RETURN(ev.input_types, ReadRawArray(v, index, "Input type"));
          break;
        }
        case ArgField::kGrid: {
          DD_ASSIGN_OR_RETURN(detail.grid_blocks, ReadDimsProduct(v, index, "grid"));
          s.has_detail = true;
          break;
        }
        case ArgField::kBlock: {
          DD_ASSIGN_OR_RETURN(const int64_t threads, ReadDimsProduct(v, index, "block"));
          detail.block_threads = static_cast<int32_t>(std::min<int64_t>(threads, INT32_MAX));
          s.has_detail = true;
          break;
        }
        case ArgField::kDtype: {
          DD_ASSIGN_OR_RETURN(detail.dtype, ReadArgString(v, index, "dtype"));
          s.has_detail = true;
          break;
        }
        case ArgField::kSyncKind: {
          DD_ASSIGN_OR_RETURN(detail.sync_kind, ReadArgString(v, index, "cuda_sync_kind"));
          s.has_detail = true;
          break;
        }
        case ArgField::kName: {  // metadata events
          DD_ASSIGN_OR_RETURN(s.meta_name, ReadArgString(v, index, "name"));
          break;
        }
        case ArgField::kLabels: {
          DD_ASSIGN_OR_RETURN(s.meta_labels, ReadArgString(v, index, "labels"));
          break;
        }
        case ArgField::kSortIndex: {
          DD_ASSIGN_OR_RETURN(s.meta_sort_index, IntArgOr(v, index, "sort_index", kUnset));
          break;
        }
        case ArgField::kOther: {
          if (NeedsSkipCheck(v)) DD_RETURN_IF_ERROR(CheckSkipped(v, index, key));
          break;
        }
        default:  // the int64 detail args, read above
          break;
      }
    }
    return absl::OkStatus();
  }

  // The product of a small array of dimensions ([512, 1, 1] -> 512);
  // kUnset when it is not an array of positive integers.
  absl::StatusOr<int64_t> ReadDimsProduct(od::value& v, int64_t index, std::string_view field) {
    // A kernel's grid and block, as Kineto writes them: the text read as it
    // stands, then the array passed over whole (On-Demand's walk of each
    // item cost 500 instructions an array).
    if (int64_t product = 0; DimsProductOfText(v.raw_json_token().data(), &product)) {
      od::array array;
      std::string_view raw;
      if (auto err = v.get_array().get(array); err != simdjson::SUCCESS) return JsonError(err, index, field);
      if (auto err = array.raw_json().get(raw); err != simdjson::SUCCESS) return JsonError(err, index, field);
      return product;
    }
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (t != od::json_type::array) {
      DD_RETURN_IF_ERROR(CheckSkipped(v, index, field));
      return kUnset;
    }
    od::array array;
    if (auto err = v.get_array().get(array); err != simdjson::SUCCESS) return JsonError(err, index, field);
    int64_t product = 1;
    for (auto item_result : array) {  // every item, so that the array is checked to its end
      if (auto err = item_result.error(); err != simdjson::SUCCESS) return JsonError(err, index, field);
      od::value& item = item_result.value_unsafe();
      if (auto err = item.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
      if (t != od::json_type::number) {
        product = kUnset;
        DD_RETURN_IF_ERROR(CheckSkipped(item, index, field));
        continue;
      }
      const std::string_view token = Trim(item.raw_json_token());
      int64_t d = 0;
      const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
      if (ec != std::errc() || end != token.data() + token.size()) {  // not an integer, or no number at all
        product = kUnset;
        DD_RETURN_IF_ERROR(CheckJsonText(token, index, field));
      } else if (product != kUnset) {
        product = d > 0 && d <= (int64_t{1} << 31) ? product * d : kUnset;
        if (product > (int64_t{1} << 40)) product = kUnset;
      }
    }
    return product;
  }

  // The raw JSON text of an array arg, interned; 0 when it is not an array
  // or is longer than the string limit.
  absl::StatusOr<StringId> ReadRawArray(od::value& v, int64_t index, std::string_view field) {
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (t != od::json_type::array) {
      DD_RETURN_IF_ERROR(CheckSkipped(v, index, field));
      return 0;
    }
    od::array array;
    std::string_view raw;
    if (auto err = v.get_array().get(array); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (auto err = array.raw_json().get(raw); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (raw.size() > options_.max_string_bytes) {
      DD_RETURN_IF_ERROR(CheckJsonText(raw, index, field));
      return 0;
    }
    StringId id = 0;
    if (!InternJsonText(raw, &id)) DD_RETURN_IF_ERROR(CheckJsonText(raw, index, field));  // worded
    return id;
  }

  // Interns the raw text of an args array into `*id`; false when it is not
  // JSON (checked the first time the table meets the text).
  bool InternJsonText(std::string_view raw, StringId* id) {
    *id = Intern(raw);
    const auto i = static_cast<size_t>(*id);
    if (i >= json_checked_.size()) json_checked_.resize(i + 1, false);
    if (json_checked_[i]) return true;
    if (JsonValueErrorAt(raw) != std::string_view::npos) return false;
    json_checked_[i] = true;
    return true;
  }

  // Optional string arg: non-strings are counted and ignored.
  absl::StatusOr<StringId> ReadArgString(od::value& v, int64_t index, std::string_view field) {
    od::json_type t;
    if (auto err = v.type().get(t); err != simdjson::SUCCESS) return JsonError(err, index, field);
    if (t != od::json_type::string) {
      WarnEvent("bad_arg_type", index, StrCat(": arg ", Quote(field), " is not a string; ignored"));
      return 0;
    }
    return ReadString(v, index, field);
  }

  absl::Status ParseEvent(od::value& value, int64_t index) {
    od::object obj;
    if (auto err = value.get_object().get(obj); err != simdjson::SUCCESS) {
      if (err == simdjson::INCORRECT_TYPE) return EventError(index, "not a JSON object");
      return JsonError(err, index, "");
    }
    EventScratch s;
    for (auto field_result : obj) {
      if (auto err = field_result.error(); err != simdjson::SUCCESS) return JsonError(err, index, "");
      // The field and its value by reference: copying simdjson's iterators
      // field by field stalled store forwarding (a third of this loop's time).
      od::field& field = field_result.value_unsafe();
      const od::raw_json_string key = field.key();
      od::value& v = field.value();
      switch (EventFieldOf(key)) {
        case EventField::kPh: {
          DD_ASSIGN_OR_RETURN(s.ph, ReadPhase(v, index));
          s.has_ph = true;
          break;
        }
        case EventField::kName: {
          // A flow keeps no name (Kineto gives it its category's): once 'ph'
          // says it is one, the name is passed over like any scalar.
          if (s.has_ph && IsFlowPhase(s.ph)) {
            if (NeedsSkipCheck(v)) DD_RETURN_IF_ERROR(CheckSkipped(v, index, "name"));
            break;
          }
          DD_ASSIGN_OR_RETURN(s.ev.name, ReadString(v, index, "name"));
          s.has_name = true;
          break;
        }
        case EventField::kCat: {
          DD_ASSIGN_OR_RETURN(s.category, ReadString(v, index, "cat"));
          break;
        }
        case EventField::kTs: {
          DD_ASSIGN_OR_RETURN(s.ev.ts_ns, ReadTime(v, index, "ts"));
          s.has_ts = true;
          break;
        }
        case EventField::kDur: {
          DD_ASSIGN_OR_RETURN(s.ev.dur_ns, ReadTime(v, index, "dur"));
          s.has_dur = true;
          break;
        }
        case EventField::kPid: {
          DD_RETURN_IF_ERROR(ReadId(v, index, "pid", &s.pid, &pid_cache_));
          break;
        }
        case EventField::kTid: {
          DD_RETURN_IF_ERROR(ReadId(v, index, "tid", &s.tid, &tid_cache_));
          break;
        }
        case EventField::kId: {
          IdValue id;
          DD_RETURN_IF_ERROR(ReadId(v, index, "id", &id));
          if (!id.is_text) {
            s.flow_id = id.num;
            s.has_id = true;
          }
          break;
        }
        case EventField::kArgs: {
          DD_RETURN_IF_ERROR(ParseArgs(v, s, index));
          break;
        }
        case EventField::kOther: {
          if (NeedsSkipCheck(v)) DD_RETURN_IF_ERROR(CheckSkipped(v, index, key));
          break;
        }
      }
    }
    if (!s.has_ph) return EventError(index, "no 'ph' (event phase)");
    return Commit(s, index);
  }

  // EventKindFromCategory, once per distinct category string.
  EventKind KindOfCategory(StringId category) {
    const auto i = static_cast<size_t>(category);
    if (i >= kind_of_category_.size()) kind_of_category_.resize(trace_.strings.size(), EventKind::kUnspecified);
    EventKind& kind = kind_of_category_[i];
    if (kind == EventKind::kUnspecified) kind = EventKindFromCategory(trace_.strings.Get(category));
    return kind;
  }

  int32_t TrackFor(const IdValue& pid, const IdValue& tid) {
    const auto key = std::make_tuple(pid.is_text ? 0 : pid.num, tid.is_text ? 0 : tid.num,
                                     pid.is_text ? pid.text : -1, tid.is_text ? tid.text : -1);
    // Events come in runs of one thread's: the last track first.
    if (last_track_ >= 0 && key == last_track_key_) return last_track_;
    // Flows and launches alternate between a thread and a stream: the one
    // before the last next.
    if (prev_track_ >= 0 && key == prev_track_key_) {
      std::swap(last_track_key_, prev_track_key_);
      std::swap(last_track_, prev_track_);
      return last_track_;
    }
    auto it = track_index_.find(key);
    if (it != track_index_.end()) {
      prev_track_key_ = last_track_key_;
      prev_track_ = last_track_;
      last_track_key_ = key;
      last_track_ = it->second;
      return it->second;
    }
    TraceTrack track;
    track.pid = pid.is_text ? 0 : pid.num;
    track.tid = tid.is_text ? 0 : tid.num;
    track.pid_is_text = pid.is_text;
    track.tid_is_text = tid.is_text;
    track.pid_text = pid.is_text ? pid.text : 0;
    track.tid_text = tid.is_text ? tid.text : 0;
    const auto id = static_cast<int32_t>(trace_.tracks.size());
    trace_.tracks.push_back(track);
    track_index_.emplace(key, id);
    return id;
  }

  absl::Status Commit(EventScratch& s, int64_t index) {
    switch (s.ph) {
      case 'X':
      case 'i':
      case 'I':
        break;
      case 's':
      case 't':
      case 'f': {
        if (!s.has_id || !s.has_ts) {
          WarnEvent("bad_flow", index, ": flow event without 'id' or 'ts'; ignored");
          return absl::OkStatus();
        }
        // Written in place, field by field: see AddEvent.
        const int32_t track = TrackFor(s.pid, s.tid);
        TraceFlow& flow = trace_.flows.emplace_back();
        flow.id = s.flow_id;
        flow.ts_ns = s.ev.ts_ns;
        flow.category = s.category;
        flow.phase = s.ph;
        flow.track = track;
        return absl::OkStatus();
      }
      case 'M':
        CommitMetadata(s);
        return absl::OkStatus();
      default:
        WarnEvent(StrCat("unsupported_phase_", std::string(1, s.ph)), index,
                  StrCat(": phase ", Quote(std::string(1, s.ph)), " is not read by daydream; ignored"));
        return absl::OkStatus();
    }
    if (!s.has_ts) return EventError(index, "no 'ts'");
    if (!s.has_name) return EventError(index, "no 'name'");
    const bool complete = s.ph == 'X';
    if (complete) {
      if (!s.has_dur) return EventError(index, "complete event ('ph': 'X') has no 'dur'");
      if (s.ev.dur_ns < 0) {
        return EventError(index, StrCat("'dur' is negative (", NsToUs(s.ev.dur_ns), " us)"));
      }
    }
    const EventKind kind = complete ? KindOfCategory(s.category) : EventKind::kInstant;
    const int32_t track_index = TrackFor(s.pid, s.tid);
    // What is set here goes into the event appended, not into s.ev before
    // it is copied: see AddEvent.
    TraceEvent& ev = trace_.AddEvent(s.ev, s.has_detail ? &s.detail : nullptr);
    ev.kind = kind;
    ev.track = track_index;
    if (!complete) {
      ev.instant = true;
      ev.dur_ns = 0;
    }
    // Counted here, while the event is at hand, not in another pass over
    // all of them.
    TraceTrack& track = trace_.tracks[static_cast<size_t>(track_index)];
    ++track.num_events;
    track.gpu = track.gpu || IsGpuKind(kind);
    return absl::OkStatus();
  }

  void CommitMetadata(const EventScratch& s) {
    const std::string_view name = trace_.strings.Get(s.ev.name);
    const int32_t track = TrackFor(s.pid, s.tid);
    TraceTrack& t = trace_.tracks[static_cast<size_t>(track)];
    if (name == "process_name") {
      meta_process_names_.emplace_back(track, s.meta_name);
    } else if (name == "process_labels") {
      meta_process_labels_.emplace_back(track, s.meta_labels);
    } else if (name == "thread_name") {
      t.thread_name = s.meta_name;
      if (detached_) meta_log_.push_back(MetaWrite{track, false, s.meta_name});
    } else if (name == "thread_sort_index") {
      t.sort_index = s.meta_sort_index;
      if (detached_) meta_log_.push_back(MetaWrite{track, true, s.meta_sort_index});
    }
  }

  void Finish() {
    // Process-level metadata applies to every track of that pid.
    auto apply = [&](const std::vector<std::pair<int32_t, StringId>>& items, bool label) {
      for (const auto& [meta_track, value] : items) {
        const TraceTrack& m = trace_.tracks[static_cast<size_t>(meta_track)];
        for (TraceTrack& t : trace_.tracks) {
          if (t.pid == m.pid && t.pid_is_text == m.pid_is_text && t.pid_text == m.pid_text) {
            (label ? t.process_label : t.process_name) = value;
          }
        }
      }
    };
    apply(meta_process_names_, false);
    apply(meta_process_labels_, true);
  }

  TraceByteStream& in_;
  const std::string& source_;
  const ReadOptions& options_;
  od::parser parser_;
  od::document doc_;
  Trace trace_;
  bool saw_events_ = false;
  bool phase_interned_[256] = {};  // by the phase's letter

  // Interns `s` through a direct-mapped cache in front of the table: the
  // same few thousand names, categories and shape lists recur a million
  // times, and the table's hash reads every byte of them (shape lists run to
  // hundreds), where the slot is picked from the length and three 8-byte
  // pieces and a hit costs one compare with the string the table holds.
  // Only strings without a backslash are cached (see ReadString).
  StringId Intern(std::string_view s) {
    if (const StringId* id = FindCached(s)) return *id;
    const StringId id = trace_.strings.Intern(s);
    const std::string_view stored = trace_.strings.Get(id);
    if (!HasEscape(stored)) intern_cache_[InternSlotOf(stored)] = InternSlot{stored.data(), stored.size(), id};
    return id;
  }
  const StringId* FindCached(std::string_view s) const {
    const InternSlot& slot = intern_cache_[InternSlotOf(s)];
    if (slot.size != s.size() || slot.data == nullptr) return nullptr;
    return SameBytes(slot.data, s.data(), s.size()) ? &slot.id : nullptr;
  }
  static size_t InternSlotOf(std::string_view s) {
    const size_t n = s.size();
    uint64_t a = 0;
    uint64_t b = 0;
    uint64_t c = 0;
    if (n >= 8) {
      std::memcpy(&a, s.data(), 8);
      std::memcpy(&b, s.data() + n - 8, 8);
      std::memcpy(&c, s.data() + n / 2 - 4, 8);
    } else if (n >= 4) {  // two overlapping 4-byte loads: a memcpy of n bytes was a call and a stall
      uint32_t lo = 0;
      uint32_t hi = 0;
      std::memcpy(&lo, s.data(), 4);
      std::memcpy(&hi, s.data() + n - 4, 4);
      a = lo | (uint64_t{hi} << 32);
    } else if (n > 0) {
      const auto* u = reinterpret_cast<const unsigned char*>(s.data());
      a = u[0] | (uint64_t{u[n / 2]} << 8) | (uint64_t{u[n - 1]} << 16);
    }
    const uint64_t h = (a * 0x9E3779B97F4A7C15ULL) ^ (b * 0xC2B2AE3D27D4EB4FULL) ^ (c * 0x165667B19E3779F9ULL) ^ n;
    return static_cast<size_t>((h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ULL >> (64 - kInternCacheBits));
  }
  struct InternSlot {
    const char* data = nullptr;
    size_t size = 0;
    StringId id = 0;
  };
  static constexpr int kInternCacheBits = 12;
  // Strings of the table checked as JSON (raw args arrays), by id; and the
  // texts of skipped arrays and objects found well-formed (up to 4 KiB each,
  // 16 MiB in all: a trace whose every skipped array differs costs checks,
  // not memory).
  std::vector<bool> json_checked_;
  StringTable checked_texts_;
  static constexpr size_t kMaxRememberedText = 4096;
  static constexpr size_t kMaxRememberedBytes = size_t{16} << 20;  // then checked each time met
  std::vector<InternSlot> intern_cache_ = std::vector<InternSlot>(size_t{1} << kInternCacheBits);
  // WalkWindowIndex's stage 1 (simdjson's, for the CPU it runs on).
  std::unique_ptr<simdjson::internal::dom_parser_implementation> structure_;
  size_t structure_capacity_ = 0;
  NumberCache pid_cache_;  // ReadId: the last numeric pid and tid
  NumberCache tid_cache_;
  bool doc_started_ = false;
  // The input window (see Fill).
  std::string buf_;
  size_t begin_ = 1;
  size_t end_ = 1;
  int64_t buf_origin_ = -1;  // offset in the input of buf_[0]
  uint64_t total_read_ = 0;
  uint64_t prefetched_ = 0;  // input offset up to which PrefetchInput fetched the lines
  bool eof_ = false;      // the input is all read
  bool hit_end_ = false;  // ... and a read not ahead of one window at a time found that
  int64_t seen_end_ = 0;  // input offset: how far one window at a time would have read (NoteSeen)
  // The document being parsed, and how its pointers map to input offsets.
  const char* doc_start_ = nullptr;
  const char* doc_end_ = nullptr;
  const char* loc_base_ = nullptr;
  int64_t loc_global_ = 0;
  bool final_closed_ = true;  // false: the input ends before the top-level value closes
  int64_t index_ = 0;         // of the next event
  int64_t indexed_events_ = 0;  // read by WalkWindowIndex (ReadStats)
  std::vector<PendingWarning> pending_warnings_;
  absl::flat_hash_map<std::tuple<int64_t, int64_t, StringId, StringId>, int32_t> track_index_;
  std::tuple<int64_t, int64_t, StringId, StringId> last_track_key_;  // TrackFor's last answer (-1: none)
  int32_t last_track_ = -1;
  std::tuple<int64_t, int64_t, StringId, StringId> prev_track_key_;  // and the one before it
  int32_t prev_track_ = -1;
  std::vector<EventKind> kind_of_category_;  // KindOfCategory's, by category string (kUnspecified: not yet)
  std::vector<std::pair<int32_t, StringId>> meta_process_names_;
  std::vector<std::pair<int32_t, StringId>> meta_process_labels_;
  // A detached parser (ParseTwoWindows' helper) logs its thread_name and
  // thread_sort_index writes, in order, for Merge to replay.
  struct MetaWrite {
    int32_t track;
    bool sort_index;  // else thread_name (a StringId)
    int64_t value;
  };
  bool detached_ = false;
  std::vector<MetaWrite> meta_log_;
  std::vector<PendingWarning> detached_warnings_;  // flushed, in order, for Merge
  std::unique_ptr<KinetoParser> helper_;
  ReadOptions helper_options_;
  // Runs helper_ and merges it. Declared last, so destroyed first: it waits
  // for a job in flight while everything the job touches is still there.
  Worker worker_;
  bool merge_pending_ = false;  // worker_ merges helper_ (JoinMerge)
};

std::string BaseName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

size_t JsonPadding() { return simdjson::SIMDJSON_PADDING; }

int32_t RankFromFileName(std::string_view file_name) {
  const std::string name = BaseName(file_name);
  auto digits_at = [&](size_t pos) -> int32_t {
    size_t end = pos;
    while (end < name.size() && end - pos < 7 && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == pos) return -1;
    return static_cast<int32_t>(std::stoi(name.substr(pos, end - pos)));
  };
  for (const char* tag : {"rank", "worker"}) {
    size_t pos = name.find(tag);
    while (pos != std::string::npos) {
      size_t p = pos + std::char_traits<char>::length(tag);
      if (p < name.size() && (name[p] == '-' || name[p] == '_')) ++p;
      if (const int32_t r = digits_at(p); r >= 0) return r;
      pos = name.find(tag, pos + 1);
    }
  }
  // "..._3.json", "..._3.json.gz", "...-3.pt.trace.json": a number of at most
  // five digits right before the extension (longer ones are job or process ids).
  size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0) return -1;
  size_t start = dot;
  while (start > 0 && name[start - 1] >= '0' && name[start - 1] <= '9') --start;
  if (start == dot || start == 0 || dot - start > 5 || (name[start - 1] != '_' && name[start - 1] != '-')) {
    return -1;
  }
  return digits_at(start);
}

absl::StatusOr<Trace> ParseTraceJson(std::string_view json, const std::string& source,
                                     const ReadOptions& options) {
  auto stream = TraceByteStream::FromMemory(json, source, /*detect_gzip=*/false);
  KinetoParser parser(*stream, source, options);
  return parser.Run();
}

absl::StatusOr<Trace> ParseTraceText(const std::string& text, const std::string& source,
                                     const ReadOptions& options) {
  return ParseTraceJson(text, source, options);
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options) {
  FileSourceOptions source_options;
  source_options.max_bytes = options.max_bytes;
  source_options.read_ahead = true;
  DD_ASSIGN_OR_RETURN(auto stream, TraceByteStream::Open(path, source_options));
  KinetoParser parser(*stream, path, options);
  DD_ASSIGN_OR_RETURN(Trace trace, parser.Run());
  if (trace.rank < 0) {
    trace.rank = RankFromFileName(path);
    trace.rank_from_file_name = trace.rank >= 0;
  }
  return trace;
}

}  // namespace daydream
