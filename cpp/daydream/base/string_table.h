// StringTable: interns strings so that records hold a 4-byte id instead of a
// heap-allocated string. Storage is an arena of large blocks; ids are dense.
#ifndef DAYDREAM_BASE_STRING_TABLE_H_
#define DAYDREAM_BASE_STRING_TABLE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace daydream {

// Dense id of an interned string. Id 0 is always the empty string.
using StringId = int32_t;

class StringTable {
 public:
  StringTable();
  StringTable(const StringTable& other);
  StringTable& operator=(const StringTable& other);
  StringTable(StringTable&&) noexcept = default;
  StringTable& operator=(StringTable&&) noexcept = default;

  // Returns the id of `s`, adding it if it is new. The table copies `s`.
  StringId Intern(std::string_view s);

  // Returns the id of `s` or -1 when it was never interned.
  StringId Find(std::string_view s) const;

  // The string for `id`; valid for the lifetime of the table. `id` must be a
  // value returned by Intern().
  std::string_view Get(StringId id) const { return views_[static_cast<size_t>(id)]; }

  size_t size() const { return views_.size(); }

  // Bytes held in the arena (for memory reports).
  size_t arena_bytes() const { return arena_bytes_; }

 private:
  std::string_view Store(std::string_view s);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = 0;
  size_t block_size_ = 0;
  size_t arena_bytes_ = 0;
  std::vector<std::string_view> views_;
  // Keyed by absl::string_view: where abseil is built with its own
  // string_view (Debian's is), absl::Hash of a std::string_view falls back to
  // std::hash, which is several times slower on the reader's hot path.
  absl::flat_hash_map<absl::string_view, StringId> index_;
};

}  // namespace daydream

#endif  // DAYDREAM_BASE_STRING_TABLE_H_
