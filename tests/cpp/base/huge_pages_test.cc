// Tests for daydream/base/huge_pages.h. Whether the kernel grants huge pages
// depends on the machine (THP mode, free memory), so these pin the contract
// that holds everywhere: the storage asked for, the values, and advice on
// any range being harmless.
#include "daydream/base/huge_pages.h"

#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

TEST_CASE("ReserveHugePages reserves at least what was asked and keeps the contents", "[huge_pages]") {
  std::vector<int64_t> v{1, 2, 3};
  ReserveHugePages(v, 3 * kHugePageBytes / sizeof(int64_t));
  CHECK(v.capacity() >= 3 * kHugePageBytes / sizeof(int64_t));
  CHECK(v == std::vector<int64_t>{1, 2, 3});
  v.resize(v.capacity(), 7);  // every page of the advised storage written
  CHECK(v.back() == 7);
}

TEST_CASE("HugePagesVector holds n copies of the value", "[huge_pages]") {
  const std::vector<int32_t> big = HugePagesVector<int32_t>(kHugePageBytes, -1);
  REQUIRE(big.size() == kHugePageBytes);
  CHECK(big.front() == -1);
  CHECK(big[kHugePageBytes / 2] == -1);
  CHECK(big.back() == -1);
  CHECK(HugePagesVector<int32_t>(0, 5).empty());
  CHECK(HugePagesVector<uint8_t>(3, 9) == std::vector<uint8_t>{9, 9, 9});
}

TEST_CASE("AdviseHugePages accepts ranges smaller than a huge page, unaligned, or empty", "[huge_pages]") {
  std::vector<char> small(100, 'x');
  AdviseHugePages(small.data(), small.size());
  AdviseHugePages(small.data() + 1, 0);
  AdviseHugePages(nullptr, 0);
  std::vector<char> odd(3 * kHugePageBytes + 123, 'y');
  AdviseHugePages(odd.data() + 17, odd.size() - 17);
  CHECK(small[99] == 'x');
  CHECK(odd[odd.size() - 1] == 'y');
}
