#include "fuzz_targets.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "daydream/base/status_macros.h"
#include "daydream/graph/builder.h"
#include "daydream/graph/serialization.h"
#include "daydream/passes/pass.h"
#include "daydream/sim/replay.h"
#include "daydream/trace/file_source.h"
#include "daydream/trace/kineto_reader.h"

namespace daydream::fuzz {
namespace {

// Limits well under libFuzzer's 2 GB RSS limit, so that an input the limits
// should stop cannot pass as an out-of-memory report instead.
ReadOptions FuzzReadOptions() {
  ReadOptions options;
  options.max_string_bytes = size_t{1} << 20;
  options.max_events = 200000;
  options.max_bytes = uint64_t{64} << 20;
  return options;
}

// Two parses with the same windows, two at a time and one at a time, must
// agree exactly: the same error message, or the same trace down to string
// ids, warning examples and every event field.
bool SameDetail(const TraceEventDetail& a, const TraceEventDetail& b) {
  return a.bytes == b.bytes && a.stream == b.stream && a.sequence_number == b.sequence_number &&
         a.in_msg_nelems == b.in_msg_nelems && a.wait_on_stream == b.wait_on_stream &&
         a.wait_on_event_record_correlation == b.wait_on_event_record_correlation && a.grid_blocks == b.grid_blocks &&
         a.dtype == b.dtype && a.sync_kind == b.sync_kind && a.device == b.device && a.block_threads == b.block_threads;
}

bool SameEvent(const Trace& ta, const TraceEvent& a, const Trace& tb, const TraceEvent& b) {
  return a.ts_ns == b.ts_ns && a.dur_ns == b.dur_ns && a.correlation == b.correlation &&
         a.external_id == b.external_id && a.name == b.name && a.input_dims == b.input_dims &&
         a.input_types == b.input_types && a.track == b.track && a.detail == b.detail && a.kind == b.kind &&
         a.instant == b.instant && SameDetail(ta.Detail(a), tb.Detail(b));
}

bool SameTrace(const Trace& a, const Trace& b) {
  if (a.events.size() != b.events.size() || a.details.size() != b.details.size() || a.flows.size() != b.flows.size() || a.tracks.size() != b.tracks.size() ||
      a.strings.size() != b.strings.size() || a.warnings.items().size() != b.warnings.items().size()) {
    return false;
  }
  for (size_t i = 0; i < a.events.size(); ++i) {
    if (!SameEvent(a, a.events[i], b, b.events[i])) return false;
  }
  for (size_t i = 0; i < a.flows.size(); ++i) {
    const TraceFlow &x = a.flows[i], &y = b.flows[i];
    if (x.id != y.id || x.ts_ns != y.ts_ns || x.category != y.category || x.track != y.track || x.phase != y.phase) {
      return false;
    }
  }
  for (size_t i = 0; i < a.tracks.size(); ++i) {
    const TraceTrack &x = a.tracks[i], &y = b.tracks[i];
    if (x.pid != y.pid || x.tid != y.tid || x.pid_is_text != y.pid_is_text || x.tid_is_text != y.tid_is_text ||
        x.pid_text != y.pid_text || x.tid_text != y.tid_text || x.process_name != y.process_name ||
        x.process_label != y.process_label || x.thread_name != y.thread_name || x.sort_index != y.sort_index ||
        x.gpu != y.gpu || x.num_events != y.num_events) {
      return false;
    }
  }
  for (size_t i = 0; i < a.strings.size(); ++i) {
    if (a.Str(static_cast<StringId>(i)) != b.Str(static_cast<StringId>(i))) return false;
  }
  for (size_t i = 0; i < a.warnings.items().size(); ++i) {
    const WarningCount &x = a.warnings.items()[i], &y = b.warnings.items()[i];
    if (x.kind != y.kind || x.count != y.count || x.example != y.example) return false;
  }
  return true;
}

void CheckTwoAtATimeAgrees(const std::string& json, const absl::StatusOr<Trace>& two, const ReadOptions& small) {
  ReadOptions one = small;
  one.parallel_windows = false;
  const absl::StatusOr<Trace> sequential = ParseTraceJson(json, kFuzzSource, one);
  const bool same = two.ok() == sequential.ok() &&
                    (two.ok() ? SameTrace(*two, *sequential) : two.status() == sequential.status());
  if (!same) {
    std::fprintf(stderr, "two windows at a time differ from one at a time: %s / %s\n",
                 std::string(two.status().message()).c_str(), std::string(sequential.status().message()).c_str());
    std::abort();
  }
}

// Events read from the structural index (ReadOptions::walk_index) and by
// On-Demand alone must agree exactly, as two windows at a time must.
void CheckIndexWalkAgrees(const std::string& json, const absl::StatusOr<Trace>& walked, const ReadOptions& options) {
  ReadOptions plain = options;
  plain.walk_index = false;
  const absl::StatusOr<Trace> read = ParseTraceJson(json, kFuzzSource, plain);
  const bool same =
      walked.ok() == read.ok() && (walked.ok() ? SameTrace(*walked, *read) : walked.status() == read.status());
  if (!same) {
    std::fprintf(stderr,
                 "events read from the index differ from On-Demand's (window %zu, two at a time %d of %zu): "
                 "%s / %s\n",
                 options.window_bytes, options.parallel_windows, options.parallel_window_bytes,
                 std::string(walked.status().message()).c_str(), std::string(read.status().message()).c_str());
    std::abort();
  }
}

// The reader parses events a window at a time; the cuts must never show.
// Parses `json` again with 64-byte windows and aborts (a crash the fuzzer
// reports) when that succeeds where the one-window parse failed, or the
// other way round, or gives another trace.
void CheckWindowsAgree(const std::string& json, const absl::StatusOr<Trace>& whole, const ReadOptions& options) {
  ReadOptions small = options;
  small.window_bytes = 64;
  small.parallel_window_bytes = 64;  // the windows a parse one at a time takes
  const absl::StatusOr<Trace> windowed = ParseTraceJson(json, kFuzzSource, small);
  CheckTwoAtATimeAgrees(json, windowed, small);
  CheckIndexWalkAgrees(json, windowed, small);
  ReadOptions medium = options;  // windows of several events
  medium.window_bytes = 1024;
  medium.parallel_windows = false;
  const absl::StatusOr<Trace> one = ParseTraceJson(json, kFuzzSource, medium);
  CheckIndexWalkAgrees(json, one, medium);
  medium.window_bytes = 200;  // two at a time, each walked in chunks of a few events
  medium.parallel_window_bytes = 1024;
  medium.parallel_windows = true;
  const absl::StatusOr<Trace> two = ParseTraceJson(json, kFuzzSource, medium);
  CheckIndexWalkAgrees(json, two, medium);
  // Sizes that differ (as by default) give the same trace, or both fail.
  if (one.ok() != two.ok() || (one.ok() && !SameTrace(*one, *two))) {
    std::fprintf(stderr, "two at a time with windows of 200 and 1024 bytes differ from one at a time: %s / %s\n",
                 std::string(two.status().message()).c_str(), std::string(one.status().message()).c_str());
    std::abort();
  }
  bool same = whole.ok() == windowed.ok();
  if (same && whole.ok()) {
    same = whole->events.size() == windowed->events.size() && whole->flows.size() == windowed->flows.size() &&
           whole->tracks.size() == windowed->tracks.size() && whole->strings.size() == windowed->strings.size() &&
           whole->warnings.items().size() == windowed->warnings.items().size();
    for (size_t i = 0; same && i < whole->events.size(); ++i) {
      const TraceEvent& a = whole->events[i];
      const TraceEvent& b = windowed->events[i];
      same = a.ts_ns == b.ts_ns && a.dur_ns == b.dur_ns && a.name == b.name && a.track == b.track &&
             a.correlation == b.correlation && a.kind == b.kind;
    }
    for (size_t i = 0; same && i < whole->warnings.items().size(); ++i) {
      same = whole->warnings.items()[i].count == windowed->warnings.items()[i].count;
    }
  }
  if (!same) {
    std::fprintf(stderr, "windowed parse differs: whole %s, 64-byte windows %s\n",
                 std::string(whole.status().message()).c_str(), std::string(windowed.status().message()).c_str());
    std::abort();
  }
}

absl::Status RunGraph(const Graph& graph) {
  DD_RETURN_IF_ERROR(graph.Validate());
  DD_ASSIGN_OR_RETURN(const ReplayReport report, Replay(graph));
  (void)report;
  DD_ASSIGN_OR_RETURN(const std::string bytes, SerializeGraph(graph));
  DD_ASSIGN_OR_RETURN(const Graph back, DeserializeGraph(bytes, kFuzzSource));
  (void)back;
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTraceInput(std::string_view data) {
  const ReadOptions options = FuzzReadOptions();
  std::string json;
  if (data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0x1f && static_cast<uint8_t>(data[1]) == 0x8b) {
    FileSourceOptions source_options;
    source_options.max_bytes = options.max_bytes;
    DD_ASSIGN_OR_RETURN(json, GunzipBuffer(std::string(data), kFuzzSource, JsonPadding(), source_options));
  } else {
    json.reserve(data.size() + JsonPadding());
    json.assign(data.data(), data.size());
  }
  ReadOptions whole_options = options;
  whole_options.window_bytes = json.size() + 1;  // one window
  whole_options.parallel_window_bytes = json.size() + 1;
  absl::StatusOr<Trace> parsed = ParseTraceJson(json, kFuzzSource, whole_options);
  CheckWindowsAgree(json, parsed, options);
  DD_ASSIGN_OR_RETURN(const Trace trace, std::move(parsed));
  DD_ASSIGN_OR_RETURN(const Graph graph, BuildGraph(trace));
  DD_RETURN_IF_ERROR(RunGraph(graph));
  // Passes may refuse a graph (no GPU, no gradients, ...) but never crash on
  // one, and what they leave must still be a valid, replayable graph.
  for (const PassInfo& info : RegisteredPasses()) {
    auto pass = CreatePass(info.name);
    if (!pass.ok()) continue;  // a pass without usable defaults
    Graph copy = graph;
    PassContext context;
    if ((*pass)->Run(copy, context).ok()) {
      DD_RETURN_IF_ERROR(RunGraph(copy));
    }
  }
  return absl::OkStatus();
}

absl::Status RunGraphInput(std::string_view data) {
  DD_ASSIGN_OR_RETURN(const Graph graph, DeserializeGraph(std::string(data), kFuzzSource));
  return RunGraph(graph);
}

}  // namespace daydream::fuzz
