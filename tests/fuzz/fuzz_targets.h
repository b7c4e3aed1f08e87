// What the fuzzers run on one input, shared with the regression test that
// replays every input the fuzzers once crashed on (tests/data/fuzz/).
//
// Each function takes arbitrary bytes and goes as far through daydream as they
// allow; bad input must come back as an error Status (naming the source), never
// as a crash, a hang, an unbounded allocation or a sanitizer report.
#ifndef DAYDREAM_TESTS_FUZZ_FUZZ_TARGETS_H_
#define DAYDREAM_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <string_view>

#include "absl/status/status.h"

namespace daydream::fuzz {

// The name inputs get in error messages.
inline constexpr char kFuzzSource[] = "<fuzz-input>";

// A trace file's bytes (plain JSON or gzip, detected by magic bytes as the
// reader does): read, build the graph, replay it, round-trip it through the
// graph format, and run every registered pass with its default options on a
// copy. Returns the first error.
absl::Status RunTraceInput(std::string_view data);

// A graph file's bytes (as Graph.save writes them): load, replay, serialize.
absl::Status RunGraphInput(std::string_view data);

}  // namespace daydream::fuzz

#endif  // DAYDREAM_TESTS_FUZZ_FUZZ_TARGETS_H_
