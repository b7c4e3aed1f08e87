#include "daydream/graph/serialization.h"

#include <utility>

#include "daydream/base/strings.h"
#include "daydream/base/file_io.h"
#include "daydream/base/status_macros.h"
#include "daydream/graph.pb.h"

namespace daydream {
namespace {

namespace pb = ::daydream::proto;

}  // namespace

absl::StatusOr<std::string> SerializeGraph(const Graph& g) {
  pb::Graph out;
  out.set_schema_version(kGraphSchemaVersion);
  out.set_source(g.source);
  out.set_rank(g.rank);
  out.set_world_size(g.world_size);
  out.set_origin_ns(g.origin_ns);
  out.set_recorded_end_ns(g.recorded_end_ns);
  pb::Device* dev = out.mutable_device();
  dev->set_name(g.device.name);
  dev->set_compute_major(g.device.compute_major);
  dev->set_compute_minor(g.device.compute_minor);
  dev->set_total_memory_bytes(g.device.total_memory_bytes);
  dev->set_num_sms(g.device.num_sms);
  out.mutable_strings()->Reserve(static_cast<int>(g.strings.size()));
  for (size_t i = 0; i < g.strings.size(); ++i) {
    const std::string_view s = g.strings.Get(static_cast<StringId>(i));
    out.add_strings(s.data(), s.size());
  }
  for (const Resource& r : g.resources) {
    pb::Resource* pr = out.add_resources();
    pr->set_kind(static_cast<pb::ResourceKind>(r.kind));
    pr->set_process(r.process);
    pr->set_thread(r.thread);
    pr->set_name(r.name);
  }
  pb::TaskColumns* tc = out.mutable_tasks();
  const int n = static_cast<int>(g.tasks.size());
  tc->mutable_duration_ns()->Reserve(n);
  tc->mutable_gap_ns()->Reserve(n);
  tc->mutable_recorded_start_ns()->Reserve(n);
  tc->mutable_trace_event()->Reserve(n);
  tc->mutable_correlation()->Reserve(n);
  tc->mutable_bytes()->Reserve(n);
  tc->mutable_name()->Reserve(n);
  tc->mutable_resource()->Reserve(n);
  tc->mutable_layer()->Reserve(n);
  tc->mutable_iteration()->Reserve(n);
  tc->mutable_priority()->Reserve(n);
  tc->mutable_kind()->Reserve(n);
  tc->mutable_phase()->Reserve(n);
  for (const Task& t : g.tasks) {
    tc->add_duration_ns(t.duration_ns);
    tc->add_gap_ns(t.gap_ns);
    tc->add_recorded_start_ns(t.recorded_start_ns);
    tc->add_trace_event(t.trace_event);
    tc->add_correlation(t.correlation);
    tc->add_bytes(t.bytes);
    tc->add_name(t.name);
    tc->add_resource(t.resource);
    tc->add_layer(t.layer);
    tc->add_iteration(t.iteration);
    tc->add_priority(t.priority);
    tc->add_kind(static_cast<pb::TaskKind>(t.kind));
    tc->add_phase(static_cast<pb::Phase>(t.phase));
  }
  pb::EdgeColumns* ec = out.mutable_edges();
  const int m = static_cast<int>(g.edges.size());
  ec->mutable_from_task()->Reserve(m);
  ec->mutable_to_task()->Reserve(m);
  ec->mutable_kind()->Reserve(m);
  ec->mutable_lag_ns()->Reserve(m);
  for (const Edge& e : g.edges) {
    ec->add_from_task(e.from);
    ec->add_to_task(e.to);
    ec->add_kind(static_cast<pb::EdgeKind>(e.kind));
    ec->add_lag_ns(e.lag_ns);
  }
  for (const Layer& l : g.layers) {
    pb::Layer* pl = out.add_layers();
    pl->set_name(l.name);
    pl->set_parent(l.parent);
  }
  for (const Tensor& t : g.tensors) {
    pb::Tensor* pt = out.add_tensors();
    pt->set_name(t.name);
    pt->set_dtype(t.dtype);
    pt->set_bytes(t.bytes);
    pt->set_producer(t.producer);
    pt->set_layer(t.layer);
    pt->set_role(static_cast<pb::TensorRole>(t.role));
    for (int64_t d : t.shape) pt->add_shape(d);
    for (int32_t p : t.producers) pt->add_producers(p);
  }
  for (const Iteration& it : g.iterations) {
    pb::Iteration* pi = out.add_iterations();
    pi->set_name(it.name);
    pi->set_begin_task(it.begin_task);
    pi->set_end_task(it.end_task);
    pi->set_begin_offset_ns(it.begin_offset_ns);
    pi->set_end_offset_ns(it.end_offset_ns);
    pi->set_measured_ns(it.measured_ns);
    pi->set_recorded_begin_ns(it.recorded_begin_ns);
  }
  std::string bytes;
  if (!out.SerializeToString(&bytes)) {
    return absl::ResourceExhaustedError("the graph is too large to serialize (protobuf's 2 GiB limit)");
  }
  return bytes;
}

absl::StatusOr<Graph> DeserializeGraph(const std::string& bytes, const std::string& source) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat(source, ": not a daydream graph file: ", why));
  };
  if (bytes.empty()) return bad("the file is empty");
  pb::Graph in;
  if (!in.ParseFromString(bytes)) return bad("protobuf decoding failed");
  if (in.schema_version() == 0) return bad("no schema version");
  if (in.schema_version() > kGraphSchemaVersion) {
    return absl::FailedPreconditionError(StrCat(
        source, ": written by a newer daydream (graph schema ", in.schema_version(),
        "; this version reads up to ", kGraphSchemaVersion, "): upgrade daydream to load it"));
  }
  Graph g;
  g.source = in.source();
  g.rank = in.rank();
  g.world_size = in.world_size();
  g.origin_ns = in.origin_ns();
  g.recorded_end_ns = in.recorded_end_ns();
  g.device.name = in.device().name();
  g.device.compute_major = in.device().compute_major();
  g.device.compute_minor = in.device().compute_minor();
  g.device.total_memory_bytes = in.device().total_memory_bytes();
  g.device.num_sms = in.device().num_sms();
  if (in.strings_size() == 0 || !in.strings(0).empty()) return bad("string table must start with \"\"");
  for (int i = 1; i < in.strings_size(); ++i) {
    if (g.strings.Intern(in.strings(i)) != i) return bad(StrCat("string ", i, " is repeated"));
  }
  const auto num_strings = static_cast<int64_t>(g.strings.size());
  auto string_ok = [&](int64_t id) { return id >= 0 && id < num_strings; };
  for (const pb::Resource& pr : in.resources()) {
    if (!string_ok(pr.name())) return bad("resource name out of range");
    if (pr.kind() < 0 || pr.kind() >= kNumResourceKinds) return bad(StrCat("unknown resource kind ", pr.kind()));
    Resource r;
    r.kind = static_cast<ResourceKind>(pr.kind());
    r.process = pr.process();
    r.thread = pr.thread();
    r.name = pr.name();
    g.resources.push_back(r);
  }
  const pb::TaskColumns& tc = in.tasks();
  const int n = tc.duration_ns_size();
  if (tc.gap_ns_size() != n || tc.recorded_start_ns_size() != n || tc.trace_event_size() != n ||
      tc.correlation_size() != n || tc.bytes_size() != n || tc.name_size() != n || tc.resource_size() != n ||
      tc.layer_size() != n || tc.iteration_size() != n || tc.priority_size() != n || tc.kind_size() != n ||
      tc.phase_size() != n) {
    return bad("task columns have different lengths");
  }
  g.tasks.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Task& t = g.tasks[static_cast<size_t>(i)];
    if (!string_ok(tc.name(i))) return bad(StrCat("task ", i, ": name out of range"));
    if (tc.kind(i) < 0 || tc.kind(i) >= kNumTaskKinds || tc.phase(i) < 0 || tc.phase(i) >= kNumPhases) {
      return bad(StrCat("task ", i, ": unknown kind or phase"));
    }
    t.duration_ns = tc.duration_ns(i);
    t.gap_ns = tc.gap_ns(i);
    t.recorded_start_ns = tc.recorded_start_ns(i);
    t.trace_event = tc.trace_event(i);
    t.correlation = tc.correlation(i);
    t.bytes = tc.bytes(i);
    t.name = tc.name(i);
    t.resource = tc.resource(i);
    t.layer = tc.layer(i);
    t.iteration = tc.iteration(i);
    t.priority = tc.priority(i);
    t.kind = static_cast<TaskKind>(tc.kind(i));
    t.phase = static_cast<Phase>(tc.phase(i));
  }
  const pb::EdgeColumns& ec = in.edges();
  const int m = ec.from_task_size();
  if (ec.to_task_size() != m || ec.kind_size() != m || ec.lag_ns_size() != m) {
    return bad("edge columns have different lengths");
  }
  g.edges.resize(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    if (ec.kind(i) < 0 || ec.kind(i) >= kNumEdgeKinds) return bad(StrCat("edge ", i, ": unknown kind"));
    g.edges[static_cast<size_t>(i)] =
        Edge{ec.from_task(i), ec.to_task(i), static_cast<EdgeKind>(ec.kind(i)), ec.lag_ns(i)};
  }
  for (const pb::Layer& pl : in.layers()) {
    if (!string_ok(pl.name())) return bad("layer name out of range");
    g.layers.push_back(Layer{pl.name(), pl.parent()});
  }
  for (const Layer& l : g.layers) {
    if (l.parent < -1 || l.parent >= static_cast<int64_t>(g.layers.size())) return bad("layer parent out of range");
  }
  for (const pb::Tensor& pt : in.tensors()) {
    if (!string_ok(pt.name()) || !string_ok(pt.dtype())) return bad("tensor name out of range");
    if (pt.role() < 0 || pt.role() > static_cast<int>(TensorRole::kOther)) return bad("unknown tensor role");
    Tensor t;
    t.name = pt.name();
    t.dtype = pt.dtype();
    t.bytes = pt.bytes();
    t.producer = pt.producer();
    t.layer = pt.layer();
    t.role = static_cast<TensorRole>(pt.role());
    t.shape.assign(pt.shape().begin(), pt.shape().end());
    t.producers.assign(pt.producers().begin(), pt.producers().end());
    g.tensors.push_back(std::move(t));
  }
  for (const pb::Iteration& pi : in.iterations()) {
    if (!string_ok(pi.name())) return bad("iteration name out of range");
    Iteration it;
    it.name = pi.name();
    it.begin_task = pi.begin_task();
    it.end_task = pi.end_task();
    it.begin_offset_ns = pi.begin_offset_ns();
    it.end_offset_ns = pi.end_offset_ns();
    it.measured_ns = pi.measured_ns();
    it.recorded_begin_ns = pi.recorded_begin_ns();
    g.iterations.push_back(it);
  }
  if (absl::Status s = g.Validate(); !s.ok()) return bad(std::string(s.message()));
  g.BuildAdjacency();
  return g;
}

absl::Status SaveGraph(const Graph& graph, const std::string& path) {
  DD_ASSIGN_OR_RETURN(std::string bytes, SerializeGraph(graph));
  return WriteFileAtomically(path, bytes);
}

absl::StatusOr<Graph> LoadGraph(const std::string& path) {
  DD_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return DeserializeGraph(bytes, path);
}

}  // namespace daydream
