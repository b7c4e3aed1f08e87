#include "daydream/passes/pass.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "daydream/base/strings.h"

namespace daydream {
namespace {

std::string_view TypeName(OptionType t) {
  switch (t) {
    case OptionType::kDouble: return "a number";
    case OptionType::kInt: return "an integer";
    case OptionType::kBool: return "true or false";
    case OptionType::kString: return "a word";
  }
  return "a value";
}

bool ParseNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<PassOptions> PassOptions::Parse(std::string_view pass, const std::vector<OptionSpec>& specs,
                                               const OptionMap& given) {
  PassOptions out;
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const OptionSpec& s : specs) known = known || s.name == name;
    if (!known) {
      std::string names;
      for (const OptionSpec& s : specs) StrAppend(&names, names.empty() ? "" : ", ", s.name);
      return absl::InvalidArgumentError(StrCat("pass '", pass, "' has no option '", name, "'",
                                               names.empty() ? std::string(" (it takes none)")
                                                             : StrCat(" (options: ", names, ")")));
    }
  }
  for (const OptionSpec& s : specs) {
    auto it = given.find(s.name);
    const bool set = it != given.end();
    const std::string& text = set ? it->second : s.default_value;
    if (set) out.set_[s.name] = 1;
    auto bad = [&]() {
      return absl::InvalidArgumentError(
          StrCat("pass '", pass, "': option '", s.name, "' must be ", TypeName(s.type), ", got '", text, "'"));
    };
    switch (s.type) {
      case OptionType::kString:
        out.strings_[s.name] = text;
        break;
      case OptionType::kBool: {
        const std::string v = AsciiLower(text);
        if (v == "true" || v == "1" || v == "yes") out.numbers_[s.name] = 1;
        else if (v == "false" || v == "0" || v == "no") out.numbers_[s.name] = 0;
        else return bad();
        break;
      }
      case OptionType::kInt: {
        double v = 0;
        // Integers beyond 2^53 are not exact in a double; nothing needs them.
        if (!ParseNumber(text, &v) || v != std::floor(v) || std::fabs(v) > 9007199254740992.0) return bad();
        out.numbers_[s.name] = v;
        break;
      }
      case OptionType::kDouble: {
        double v = 0;
        if (!ParseNumber(text, &v)) return bad();
        out.numbers_[s.name] = v;
        break;
      }
    }
  }
  return out;
}

double PassOptions::Double(const std::string& name) const {
  auto it = numbers_.find(name);
  return it == numbers_.end() ? 0.0 : it->second;
}

int64_t PassOptions::Int(const std::string& name) const { return static_cast<int64_t>(Double(name)); }

bool PassOptions::Bool(const std::string& name) const { return Double(name) != 0.0; }

const std::string& PassOptions::String(const std::string& name) const {
  static const std::string kEmpty;
  auto it = strings_.find(name);
  return it == strings_.end() ? kEmpty : it->second;
}

absl::StatusOr<EventFactors> ParseEventFactors(std::string_view pass, std::string_view option,
                                               const std::string& text) {
  EventFactors out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(pos, end - pos);
    pos = end + 1;
    if (entry.find_first_not_of(" ") == std::string::npos) continue;
    const char* s = entry.c_str();
    char* after_event = nullptr;
    char* after_factor = nullptr;
    errno = 0;
    const long long event = std::strtoll(s, &after_event, 10);
    const bool has_eq = after_event != s && *after_event == '=';
    const double factor = has_eq ? std::strtod(after_event + 1, &after_factor) : 0;
    if (!has_eq || errno != 0 || event < 0 || after_factor == after_event + 1 ||
        std::string_view(after_factor).find_first_not_of(" ") != std::string_view::npos || !std::isfinite(factor) ||
        factor <= 0) {
      return absl::InvalidArgumentError(StrCat(pass, ": ", option, ": bad entry '", entry,
                                               "' (expected TRACE_EVENT=FACTOR: an event index >= 0 and a "
                                               "factor > 0, entries separated by ';')"));
    }
    out[event] = factor;
  }
  return out;
}

const double* EventFactorOf(const EventFactors& factors, const Task& t) {
  if (t.trace_event < 0) return nullptr;
  const auto it = factors.find(t.trace_event);
  return it == factors.end() ? nullptr : &it->second;
}

absl::StatusOr<std::unique_ptr<Pass>> CreatePass(std::string_view name, const OptionMap& options) {
  for (const PassInfo& info : RegisteredPasses()) {
    if (info.name != name) continue;
    absl::StatusOr<PassOptions> parsed = PassOptions::Parse(name, info.options, options);
    if (!parsed.ok()) return parsed.status();
    return info.create(*parsed);
  }
  std::string names;
  for (const PassInfo& info : RegisteredPasses()) StrAppend(&names, names.empty() ? "" : ", ", info.name);
  return absl::NotFoundError(StrCat("unknown pass '", name, "' (known: ", names, ")"));
}

}  // namespace daydream
