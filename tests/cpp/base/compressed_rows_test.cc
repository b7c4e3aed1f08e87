// Tests for daydream/base/compressed_rows.h.
#include "daydream/base/compressed_rows.h"

#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

TEST_CASE("CompressedRows lists each row's items in the order placed", "[compressed_rows]") {
  // Items 0..5 in rows 2, 0, 2, 3, 0, 2 of five rows (rows 1 and 4 empty).
  const std::vector<size_t> row_of = {2, 0, 2, 3, 0, 2};
  CompressedRows rows(5);
  for (size_t r : row_of) rows.Count(r);
  REQUIRE(rows.Start() == row_of.size());
  std::vector<int32_t> items(row_of.size(), -1);
  for (size_t i = 0; i < row_of.size(); ++i) items[static_cast<size_t>(rows.Place(row_of[i]))] = static_cast<int32_t>(i);
  const std::vector<int32_t> offsets = std::move(rows).TakeOffsets();
  CHECK(offsets == std::vector<int32_t>{0, 2, 2, 5, 6, 6});
  CHECK(items == std::vector<int32_t>{1, 4, 0, 2, 5, 3});
}

TEST_CASE("CompressedRows with no items, and with no rows", "[compressed_rows]") {
  CompressedRows empty_rows(3);
  CHECK(empty_rows.Start() == 0);
  CHECK(std::move(empty_rows).TakeOffsets() == std::vector<int32_t>{0, 0, 0, 0});
  CompressedRows none(0);
  CHECK(none.Start() == 0);
  CHECK(std::move(none).TakeOffsets() == std::vector<int32_t>{0});
}

TEST_CASE("CompressedRows agrees with a row-by-row scan on random rows", "[compressed_rows]") {
  std::mt19937 rng(11);
  for (const size_t num_rows : {size_t{1}, size_t{7}, size_t{1000}}) {
    std::uniform_int_distribution<size_t> pick(0, num_rows - 1);
    std::vector<size_t> row_of(5000);
    for (size_t& r : row_of) r = pick(rng);
    CompressedRows rows(num_rows);
    for (size_t r : row_of) rows.Count(r);
    std::vector<int32_t> items(rows.Start(), -1);
    for (size_t i = 0; i < row_of.size(); ++i) items[static_cast<size_t>(rows.Place(row_of[i]))] = static_cast<int32_t>(i);
    const std::vector<int32_t> offsets = std::move(rows).TakeOffsets();
    REQUIRE(offsets.size() == num_rows + 1);
    std::vector<int32_t> want;
    std::vector<int32_t> want_offsets = {0};
    for (size_t r = 0; r < num_rows; ++r) {
      for (size_t i = 0; i < row_of.size(); ++i) {
        if (row_of[i] == r) want.push_back(static_cast<int32_t>(i));
      }
      want_offsets.push_back(static_cast<int32_t>(want.size()));
    }
    INFO(num_rows << " rows");
    CHECK(offsets == want_offsets);
    CHECK(items == want);
  }
}
