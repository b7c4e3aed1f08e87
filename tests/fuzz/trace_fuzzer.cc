// libFuzzer target: a trace file's bytes through the reader, the graph
// builder, the simulator and every pass (make fuzz).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)daydream::fuzz::RunTraceInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
