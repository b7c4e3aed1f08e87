#include "daydream/base/string_table.h"

#include <algorithm>
#include <cstring>

namespace daydream {
namespace {
constexpr size_t kBlockBytes = size_t{1} << 16;

absl::string_view Key(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

StringTable::StringTable() { Intern(""); }

StringTable::StringTable(const StringTable& other) : StringTable() {
  for (size_t i = 1; i < other.views_.size(); ++i) Intern(other.views_[i]);
}

StringTable& StringTable::operator=(const StringTable& other) {
  if (this != &other) {
    StringTable copy(other);
    *this = std::move(copy);
  }
  return *this;
}

std::string_view StringTable::Store(std::string_view s) {
  if (s.empty()) return std::string_view();
  if (block_size_ - block_used_ < s.size()) {
    const size_t size = std::max(kBlockBytes, s.size());
    blocks_.emplace_back(new char[size]);
    block_size_ = size;
    block_used_ = 0;
    arena_bytes_ += size;
  }
  char* dst = blocks_.back().get() + block_used_;
  std::memcpy(dst, s.data(), s.size());
  block_used_ += s.size();
  return std::string_view(dst, s.size());
}

StringId StringTable::Intern(std::string_view s) {
  auto it = index_.find(Key(s));
  if (it != index_.end()) return it->second;
  const std::string_view stored = Store(s);
  const auto id = static_cast<StringId>(views_.size());
  views_.push_back(stored);
  index_.emplace(Key(stored), id);
  return id;
}

StringId StringTable::Find(std::string_view s) const {
  auto it = index_.find(Key(s));
  return it == index_.end() ? -1 : it->second;
}

}  // namespace daydream
