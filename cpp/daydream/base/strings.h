// String helpers that take std::string_view.
//
// Debian's abseil (20220623) is built with its own absl::string_view, which
// std::string_view does not convert to; these wrappers bridge the two so the
// rest of the code can use std::string_view throughout.
#ifndef DAYDREAM_BASE_STRINGS_H_
#define DAYDREAM_BASE_STRINGS_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace daydream {
namespace strings_internal {

inline absl::string_view Piece(std::string_view s) { return absl::string_view(s.data(), s.size()); }
template <typename T>
inline const T& Piece(const T& value) {
  return value;
}

}  // namespace strings_internal

// absl::StrCat / absl::StrAppend accepting std::string_view among the pieces.
template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(strings_internal::Piece(args)...);
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  absl::StrAppend(out, strings_internal::Piece(args)...);
}

inline bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// ASCII lowercase copy.
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_STRINGS_H_
