// Tests for daydream/base/string_table.h: interning, ids, copies, arena blocks.
#include "daydream/base/string_table.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

using namespace daydream;

TEST_CASE("string table id 0 is the empty string", "[string_table]") {
  StringTable table;
  CHECK(table.size() == 1);
  CHECK(table.Get(0).empty());
  CHECK(table.Find("") == 0);
  CHECK(table.Intern("") == 0);
  CHECK(table.size() == 1);
}

TEST_CASE("string table interns the same string to the same dense id", "[string_table]") {
  StringTable table;
  const StringId a = table.Intern("aten::add");
  const StringId b = table.Intern("aten::mul");
  CHECK(a == 1);
  CHECK(b == 2);
  CHECK(table.Intern("aten::add") == a);
  CHECK(table.Intern(std::string("aten::") + "mul") == b);
  CHECK(table.size() == 3);
  CHECK(table.Get(a) == "aten::add");
  CHECK(table.Get(b) == "aten::mul");
}

TEST_CASE("string table Find returns the id without adding, -1 when unknown", "[string_table]") {
  StringTable table;
  const StringId id = table.Intern("cudaLaunchKernel");
  CHECK(table.Find("cudaLaunchKernel") == id);
  CHECK(table.Find("cudaLaunch") == -1);
  CHECK(table.Find("cudaLaunchKernel ") == -1);
  CHECK(table.size() == 2);
}

TEST_CASE("string table copies the bytes it interns", "[string_table]") {
  StringTable table;
  StringId id;
  {
    std::string temp = "transient name";
    id = table.Intern(temp);
    temp.assign("XXXXXXXXXXXXXX");
  }
  CHECK(table.Get(id) == "transient name");
  CHECK(table.Find("transient name") == id);
}

TEST_CASE("string table keeps embedded NUL bytes and distinguishes prefixes", "[string_table]") {
  StringTable table;
  const std::string with_nul("a\0b", 3);
  const StringId x = table.Intern(with_nul);
  const StringId y = table.Intern("a");
  CHECK(x != y);
  CHECK(table.Get(x) == std::string_view(with_nul));
  CHECK(table.Get(x).size() == 3);
}

TEST_CASE("string table copy keeps every id and owns its own storage", "[string_table]") {
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) names.push_back("kernel_" + std::to_string(i * 7919));
  auto original = std::make_unique<StringTable>();
  std::vector<StringId> ids;
  for (const auto& n : names) ids.push_back(original->Intern(n));

  StringTable copy(*original);
  StringTable assigned;
  assigned.Intern("something else");
  assigned = *original;
  original.reset();  // the copies must not point into the original's arena

  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(copy.Get(ids[i]) == names[i]);
    CHECK(assigned.Get(ids[i]) == names[i]);
    CHECK(copy.Find(names[i]) == ids[i]);
    CHECK(assigned.Find(names[i]) == ids[i]);
  }
  CHECK(copy.size() == names.size() + 1);
  CHECK(assigned.size() == names.size() + 1);
  CHECK(assigned.Find("something else") == -1);
  // The copy is independent: interning into it leaves the other alone.
  copy.Intern("only in copy");
  CHECK(assigned.Find("only in copy") == -1);
}

TEST_CASE("string table move keeps ids and the views already handed out", "[string_table]") {
  StringTable table;
  const StringId id = table.Intern("python_function");
  const std::string_view view = table.Get(id);
  StringTable moved(std::move(table));
  CHECK(moved.Get(id) == "python_function");
  CHECK(view == "python_function");
  CHECK(moved.Find("python_function") == id);
}

TEST_CASE("string table holds many strings across arena blocks", "[string_table]") {
  StringTable table;
  std::vector<std::string> names;
  size_t total = 0;
  for (int i = 0; i < 20000; ++i) {
    names.push_back("void at::native::elementwise_kernel<" + std::to_string(i) + ">");
    total += names.back().size();
  }
  REQUIRE(total > 4 * (size_t{1} << 16));  // several 64 KiB blocks
  std::vector<StringId> ids;
  for (const auto& n : names) ids.push_back(table.Intern(n));
  for (size_t i = 0; i < names.size(); ++i) {
    REQUIRE(ids[i] == static_cast<StringId>(i + 1));
    REQUIRE(table.Get(ids[i]) == names[i]);
    REQUIRE(table.Find(names[i]) == ids[i]);
  }
  CHECK(table.arena_bytes() >= total);
}

TEST_CASE("string table stores a string larger than an arena block", "[string_table]") {
  StringTable table;
  const StringId before = table.Intern("before");
  const std::string huge(300'000, 'k');  // bigger than a 64 KiB block
  const StringId big = table.Intern(huge);
  const StringId after = table.Intern("after");
  const std::string huge2(70'000, 'q');
  const StringId big2 = table.Intern(huge2);
  CHECK(table.Get(big) == huge);
  CHECK(table.Get(big2) == huge2);
  CHECK(table.Get(before) == "before");
  CHECK(table.Get(after) == "after");
  CHECK(table.Find(huge) == big);
  CHECK(table.arena_bytes() >= huge.size() + huge2.size());
}
