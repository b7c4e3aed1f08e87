// Schedules -> Chrome-trace JSON that ui.perfetto.dev and chrome://tracing
// open. Several schedules (a baseline and a prediction) can share one file,
// each as its own set of processes.
#ifndef DAYDREAM_EXPORT_CHROME_TRACE_H_
#define DAYDREAM_EXPORT_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daydream/graph/graph.h"
#include "daydream/sim/simulator.h"

namespace daydream {

class TimelineWriter {
 public:
  // Adds every task of `graph` as scheduled in `schedule`, named as in the
  // input trace, in processes whose names start with `label` ("replay",
  // "baseline", "predicted: amp"). Times are the simulation clock shifted to
  // the graph's recorded origin, so a replay lines up with its source trace.
  // Launch edges become flow arrows. Both references are used only during
  // the call.
  void Add(const Graph& graph, const Schedule& schedule, const std::string& label);

  // The JSON document built so far.
  std::string ToJson() const;

  // Writes the document to `path` atomically.
  absl::Status Write(const std::string& path) const;

 private:
  std::vector<std::string> events_;  // serialized event objects
  int64_t next_pid_ = 1;
  int64_t next_flow_id_ = 1;
};

// Writes the timeline of one schedule (convenience for TimelineWriter).
absl::Status WriteTimeline(const Graph& graph, const Schedule& schedule, const std::string& path,
                           const std::string& label = "replay");

}  // namespace daydream

#endif  // DAYDREAM_EXPORT_CHROME_TRACE_H_
