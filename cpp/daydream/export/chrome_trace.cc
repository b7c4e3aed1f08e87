#include "daydream/export/chrome_trace.h"

#include <cstdio>
#include <map>
#include <string_view>
#include <utility>

#include "daydream/base/strings.h"
#include "daydream/base/file_io.h"

namespace daydream {
namespace {

void AppendEscaped(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string Quoted(std::string_view s) {
  std::string out;
  AppendEscaped(out, s);
  return out;
}

// Nanoseconds as microseconds with three decimals, exactly.
std::string Micros(TimeNs ns) {
  const bool neg = ns < 0;
  const TimeNs a = neg ? -ns : ns;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%lld.%03lld", neg ? "-" : "", static_cast<long long>(a / 1000),
                static_cast<long long>(a % 1000));
  return buf;
}

std::string Metadata(std::string_view what, int64_t pid, int64_t tid, std::string_view name) {
  return StrCat("{\"ph\":\"M\",\"name\":\"", what, "\",\"pid\":", pid, ",\"tid\":", tid,
                      ",\"args\":{\"name\":", Quoted(name), "}}");
}

// The Kineto category of a task kind, so a written timeline reads back as a
// trace (daydream's own kind goes into args).
std::string_view KinetoCategory(TaskKind kind) {
  switch (kind) {
    case TaskKind::kRuntime:
    case TaskKind::kSync: return "cuda_runtime";
    case TaskKind::kKernel:
    case TaskKind::kCollective: return "kernel";
    case TaskKind::kMemcpy: return "gpu_memcpy";
    case TaskKind::kMemset: return "gpu_memset";
    default: return "cpu_op";
  }
}

}  // namespace

void TimelineWriter::Add(const Graph& graph, const Schedule& schedule, const std::string& label) {
  // One output process per (resource kind, process id) of this graph.
  std::map<std::pair<int, int64_t>, int64_t> pids;
  std::vector<int64_t> resource_pid(graph.resources.size());
  for (size_t r = 0; r < graph.resources.size(); ++r) {
    const Resource& res = graph.resources[r];
    const bool gpu = res.kind == ResourceKind::kGpuStream;
    auto [it, inserted] = pids.try_emplace({static_cast<int>(res.kind), res.process}, 0);
    if (inserted) {
      it->second = next_pid_++;
      const std::string name =
          gpu ? StrCat(label, ": GPU ", res.process)
              : res.kind == ResourceKind::kCommChannel ? StrCat(label, ": network")
                                                        : StrCat(label, ": CPU (pid ", res.process, ")");
      events_.push_back(Metadata("process_name", it->second, 0, name));
      events_.push_back(StrCat("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":", it->second,
                                     ",\"tid\":0,\"args\":{\"sort_index\":", it->second, "}}"));
    }
    resource_pid[r] = it->second;
    events_.push_back(Metadata("thread_name", it->second, res.thread, graph.Str(res.name)));
  }
  for (size_t t = 0; t < graph.tasks.size(); ++t) {
    const Task& task = graph.tasks[t];
    const Resource& res = graph.resources[static_cast<size_t>(task.resource)];
    const TimeNs start = graph.origin_ns + schedule.start_ns[t];
    std::string ev = StrCat("{\"ph\":\"X\",\"cat\":\"", KinetoCategory(task.kind), "\",\"name\":",
                            Quoted(graph.Str(task.name)), ",\"pid\":", resource_pid[static_cast<size_t>(task.resource)],
                            ",\"tid\":", res.thread, ",\"ts\":", Micros(start),
                            ",\"dur\":", Micros(schedule.end_ns[t] - schedule.start_ns[t]),
                            ",\"args\":{\"task\":", t, ",\"kind\":\"", TaskKindName(task.kind),
                            "\",\"phase\":\"", PhaseName(task.phase), "\"");
    if (task.correlation >= 0) StrAppend(&ev, ",\"correlation\":", task.correlation);
    if (res.kind == ResourceKind::kGpuStream) StrAppend(&ev, ",\"device\":", res.process, ",\"stream\":", res.thread);
    if (task.layer >= 0) {
      StrAppend(&ev, ",\"layer\":", Quoted(graph.Str(graph.layers[static_cast<size_t>(task.layer)].name)));
    }
    if (task.iteration >= 0) StrAppend(&ev, ",\"iteration\":", task.iteration);
    StrAppend(&ev, ",\"recorded_start_us\":", Micros(task.recorded_start_ns), "}}");
    events_.push_back(std::move(ev));
  }
  for (const Edge& e : graph.edges) {
    if (!IsLaunch(e.kind)) continue;
    const auto from = static_cast<size_t>(e.from), to = static_cast<size_t>(e.to);
    const Task& a = graph.tasks[from];
    const Task& b = graph.tasks[to];
    const int64_t id = next_flow_id_++;
    events_.push_back(StrCat("{\"ph\":\"s\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":", id,
                                   ",\"pid\":", resource_pid[static_cast<size_t>(a.resource)],
                                   ",\"tid\":", graph.resources[static_cast<size_t>(a.resource)].thread,
                                   ",\"ts\":", Micros(graph.origin_ns + schedule.start_ns[from]), "}"));
    events_.push_back(StrCat("{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":", id,
                                   ",\"pid\":", resource_pid[static_cast<size_t>(b.resource)],
                                   ",\"tid\":", graph.resources[static_cast<size_t>(b.resource)].thread,
                                   ",\"ts\":", Micros(graph.origin_ns + schedule.start_ns[to]), "}"));
  }
}

std::string TimelineWriter::ToJson() const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"daydream\"},\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    out += events_[i];
    out += i + 1 < events_.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

absl::Status TimelineWriter::Write(const std::string& path) const { return WriteFileAtomically(path, ToJson()); }

absl::Status WriteTimeline(const Graph& graph, const Schedule& schedule, const std::string& path,
                           const std::string& label) {
  TimelineWriter writer;
  writer.Add(graph, schedule, label);
  return writer.Write(path);
}

}  // namespace daydream
