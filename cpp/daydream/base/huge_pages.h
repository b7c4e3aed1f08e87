// Transparent huge pages for the few large arrays that are filled once and
// then read all over: a trace's events, a graph's tasks and the builder's
// per-event tables. With 4 KiB pages, reaching a million 160-byte events in
// start order rather than file order misses the TLB on nearly every event,
// and filling them takes one page fault per 4 KiB. Where the kernel's THP
// mode is "madvise" (the common default), memory must ask for huge pages.
#ifndef DAYDREAM_BASE_HUGE_PAGES_H_
#define DAYDREAM_BASE_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace daydream {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks that the whole 2 MiB pages inside [data, data + bytes) be backed by
// huge pages when they are first touched. Only advice: a no-op off Linux,
// for ranges under one huge page, and where the kernel declines.
inline void AdviseHugePages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t last = (begin + bytes) & ~(uintptr_t{kHugePageBytes} - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

// v.reserve(n), with the new storage advised as above. Call it before the
// vector is filled: pages already touched keep their size.
template <typename T, typename A>
void ReserveHugePages(std::vector<T, A>& v, size_t n) {
  v.reserve(n);
  AdviseHugePages(v.data(), v.capacity() * sizeof(T));
}

// A vector of `n` copies of `value` whose storage was advised before it was
// filled.
template <typename T>
std::vector<T> HugePagesVector(size_t n, const T& value) {
  std::vector<T> v;
  ReserveHugePages(v, n);
  v.assign(n, value);
  return v;
}

}  // namespace daydream

#endif  // DAYDREAM_BASE_HUGE_PAGES_H_
