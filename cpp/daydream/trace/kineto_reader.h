// Reader for Kineto / Chrome-trace JSON as torch.profiler writes it: plain or
// gzip, object form ({"traceEvents": [...]}) or a bare array, every category
// name from 2021 to today. Parsed with simdjson (its structural index, and
// On-Demand).
#ifndef DAYDREAM_TRACE_KINETO_READER_H_
#define DAYDREAM_TRACE_KINETO_READER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daydream/trace/trace.h"

namespace daydream {

// What a read did, for tests and benchmarks (ReadOptions::stats).
struct ReadStats {
  int64_t windows = 0;              // texts of events handed to the JSON parser
  size_t largest_window_bytes = 0;  // the longest of them
  int64_t indexed_events = 0;       // events of any phase read from the index (ReadOptions::walk_index)
  int64_t helper_windows = 0;       // windows parsed on the helper thread and kept (parallel_windows)
  size_t largest_walk_bytes = 0;    // the longest text indexed at once for the walk, on this thread

  // Counts another read's into these (LoadJob adds up its files').
  void Add(const ReadStats& other) {
    windows += other.windows;
    largest_window_bytes = std::max(largest_window_bytes, other.largest_window_bytes);
    indexed_events += other.indexed_events;
    helper_windows += other.helper_windows;
    largest_walk_bytes = std::max(largest_walk_bytes, other.largest_walk_bytes);
  }
};

struct ReadOptions {
  // Longest string accepted in any field (names of C++ template kernels run to
  // tens of KB; a longer one means a broken or hostile file).
  size_t max_string_bytes = size_t{4} << 20;
  // Most events accepted in one file.
  int64_t max_events = int64_t{1} << 31;
  // (No nesting limit is needed: nothing recurses. Values daydream does not
  // read are skipped iteratively, however deep; where a field it reads holds
  // nested arrays instead of what it expects, the type check rejects it.)
  // Bytes of events parsed at a time, one window at a time (a window grows
  // past this only for an event longer than it, or for text with no '}' ','
  // '{' outside its strings). Small enough that a window's text, copied in,
  // is still in the core's own cache when simdjson indexes it and the
  // reader reads it. A longer window (parallel_window_bytes) is indexed and
  // walked this much at a time (walk_index), as far as the walk goes.
  size_t window_bytes = size_t{64} << 10;
  // Parse two windows at a time, the second on a helper thread, each of
  // parallel_window_bytes: each pair costs a wake-up of the helper and a
  // merge, which a longer window pays for. The Trace and its warnings are
  // the same either way; so are errors where parallel_window_bytes is
  // window_bytes (with other sizes, a file with several faults may have
  // another of them reported first, as with another window_bytes).
  bool parallel_windows = true;
  size_t parallel_window_bytes = size_t{1} << 20;
  // Read plain events straight from simdjson's index of each window's
  // structure, handing the rest of a window to simdjson On-Demand at the
  // first event that is anything else (one with a field that warns or fails,
  // an escaped string, anything but another event after it); false:
  // On-Demand reads every event. The Trace, errors and warnings are the same
  // either way.
  bool walk_index = true;
  // Decompression limit for gzip files.
  uint64_t max_bytes = uint64_t{64} << 30;
  // Where to count what the read did; nullptr: not counted.
  ReadStats* stats = nullptr;
};

// Reads the trace file at `path` (plain or gzip). Errors name the file and,
// where there is one, the event index and field: "t.json: event 12: 'dur' is
// negative (-4)". The rank comes from distributedInfo, else from the file
// name (RankFromFileName), else stays -1. The file is read and decompressed
// as it is parsed, a window of events at a time: memory holds the Trace and
// one window, never the whole text.
absl::StatusOr<Trace> ReadTraceFile(const std::string& path, const ReadOptions& options = {});

// Parses JSON text already in memory. `source` names it in errors.
absl::StatusOr<Trace> ParseTraceJson(std::string_view json, const std::string& source,
                                     const ReadOptions& options = {});

// The same, for a std::string.
absl::StatusOr<Trace> ParseTraceText(const std::string& text, const std::string& source = "<memory>",
                                     const ReadOptions& options = {});

// The offset of the first byte where `text` stops being one JSON value
// (blanks around it allowed), or std::string_view::npos when it is one. The
// reader checks with it what simdjson's On-Demand parser skips unchecked.
// UTF-8 is not checked here.
size_t JsonValueErrorAt(std::string_view text);

// Bytes of padding the parser needs after the JSON text.
size_t JsonPadding();

// Rank encoded in a trace file name: "rank-3", "rank3", "rank_3", "worker3",
// "..._3.json" (a number right before the extension). -1 when none.
int32_t RankFromFileName(std::string_view file_name);

}  // namespace daydream

#endif  // DAYDREAM_TRACE_KINETO_READER_H_
