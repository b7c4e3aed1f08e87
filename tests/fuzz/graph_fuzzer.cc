// libFuzzer target: a graph file's bytes through Graph load, replay and save
// (make fuzz).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)daydream::fuzz::RunGraphInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
