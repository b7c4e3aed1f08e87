// Tests for daydream/trace/kineto_reader.h: the Kineto / Chrome-trace JSON
// reader — forms, categories, args, metadata, flows, and bad input.
#include "daydream/trace/kineto_reader.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_support.h"

using namespace daydream;
using daydream::testing::KinetoDoc;
using daydream::testing::ParseOrDie;
using daydream::testing::TempDir;
using daydream::testing::WriteFile;

namespace {

// A minimal valid complete event.
std::string Op(const std::string& name = "aten::add", const std::string& ts = "10", const std::string& dur = "5") {
  return R"j({"ph":"X","cat":"cpu_op","name":")j" + name + R"j(","pid":1,"tid":1,"ts":)j" + ts + R"j(,"dur":)j" + dur + "}";
}

// The error message of parsing `json` as "t.json"; REQUIREs that it fails.
std::string ErrorOf(const std::string& json, const ReadOptions& options = {}) {
  auto trace = ParseTraceText(json, "t.json", options);
  REQUIRE_FALSE(trace.ok());
  CHECK(absl::IsInvalidArgument(trace.status()));
  return std::string(trace.status().message());
}

// The error message of parsing `json`, or "OK" when it parses (for tests
// that expose bugs and must not stop at the first check).
std::string MessageOf(const std::string& json, const ReadOptions& options = {}) {
  auto trace = ParseTraceText(json, "t.json", options);
  return trace.ok() ? std::string("OK") : std::string(trace.status().message());
}

// Error of a document whose third event (index 2) is `bad`.
std::string ErrorOfThirdEvent(const std::string& bad, const ReadOptions& options = {}) {
  return ErrorOf(KinetoDoc(Op() + "," + Op() + "," + bad), options);
}

const TraceEvent& OnlyEvent(const Trace& trace) {
  REQUIRE(trace.events.size() == 1);
  return trace.events[0];
}

}  // namespace

// --- document forms ----------------------------------------------------------

TEST_CASE("reader reads the object form with traceEvents", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op("a") + "," + Op("b", "20", "3")));
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.Str(trace.events[0].name) == "a");
  CHECK(trace.Str(trace.events[1].name) == "b");
  CHECK(trace.events[1].ts_ns == 20'000);
  CHECK(trace.events[1].dur_ns == 3'000);
  CHECK(trace.events[1].end_ns() == 23'000);
  CHECK(trace.path == "test.json");
}

TEST_CASE("reader reads the bare array form", "[kineto_reader]") {
  const Trace trace = ParseOrDie("[" + Op("a") + "," + Op("b") + "]");
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.Str(trace.events[1].name) == "b");
}

TEST_CASE("reader accepts leading and trailing whitespace around the document", "[kineto_reader]") {
  const Trace trace = ParseOrDie(" \n\t" + KinetoDoc(Op()) + "\n\n  ");
  CHECK(trace.events.size() == 1);
}

TEST_CASE("reader keeps events in file order regardless of their timestamps", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op("late", "100") + "," + Op("early", "1")));
  REQUIRE(trace.events.size() == 2);
  CHECK(trace.Str(trace.events[0].name) == "late");
  CHECK(trace.Str(trace.events[1].name) == "early");
}

TEST_CASE("reader accepts fields in any order within an event", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"args":{"correlation":7},"dur":2,"tid":3,"ts":5,"name":"k","pid":0,"cat":"kernel","ph":"X"})j"));
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kKernel);
  CHECK(ev.correlation == 7);
  CHECK(ev.ts_ns == 5000);
  CHECK(trace.tracks[static_cast<size_t>(ev.track)].tid == 3);
}

// --- categories --------------------------------------------------------------

TEST_CASE("reader maps every Kineto category, including 2021 legacy names, to its EventKind", "[kineto_reader]") {
  struct Case {
    const char* category;
    EventKind kind;
  };
  const std::vector<Case> cases = {
      {"cpu_op", EventKind::kCpuOp},
      {"Operator", EventKind::kCpuOp},
      {"user_annotation", EventKind::kUserAnnotation},
      {"gpu_user_annotation", EventKind::kGpuUserAnnotation},
      {"cuda_runtime", EventKind::kRuntime},
      {"Runtime", EventKind::kRuntime},
      {"cuda_driver", EventKind::kDriver},
      {"kernel", EventKind::kKernel},
      {"Kernel", EventKind::kKernel},
      {"gpu_memcpy", EventKind::kMemcpy},
      {"Memcpy", EventKind::kMemcpy},
      {"gpu_memset", EventKind::kMemset},
      {"Memset", EventKind::kMemset},
      {"cuda_sync", EventKind::kCudaSync},
      {"python_function", EventKind::kPythonFunction},
      {"overhead", EventKind::kOverhead},
      {"Trace", EventKind::kOther},
      {"some_new_category", EventKind::kOther},
  };
  std::string events;
  for (const Case& c : cases) {
    if (!events.empty()) events += ",";
    events += std::string(R"j({"ph":"X","cat":")j") + c.category + R"j(","name":")j" + c.category +
              R"j(","pid":1,"tid":1,"ts":1,"dur":1})j";
  }
  const Trace trace = ParseOrDie(KinetoDoc(events));
  REQUIRE(trace.events.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("category " << cases[i].category);
    CHECK(trace.events[i].kind == cases[i].kind);
    CHECK(EventKindFromCategory(cases[i].category) == cases[i].kind);
  }
}

TEST_CASE("reader gives an event without a category the kind kOther", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(R"j({"ph":"X","name":"x","pid":1,"tid":1,"ts":1,"dur":1})j"));
  CHECK(OnlyEvent(trace).kind == EventKind::kOther);
}

TEST_CASE("EventKindName and IsGpuKind describe the kinds", "[kineto_reader]") {
  CHECK(EventKindName(EventKind::kCpuOp) == "cpu_op");
  CHECK(EventKindName(EventKind::kRuntime) == "cuda_runtime");
  CHECK(EventKindName(EventKind::kKernel) == "kernel");
  CHECK(EventKindName(EventKind::kUnspecified) == "unspecified");
  CHECK(IsGpuKind(EventKind::kKernel));
  CHECK(IsGpuKind(EventKind::kMemcpy));
  CHECK(IsGpuKind(EventKind::kMemset));
  CHECK(IsGpuKind(EventKind::kCudaSync));
  CHECK_FALSE(IsGpuKind(EventKind::kRuntime));
  CHECK_FALSE(IsGpuKind(EventKind::kCpuOp));
}

// --- args ----------------------------------------------------------------------

TEST_CASE("reader reads each event's own pid and tid when the text repeats or nearly does", "[kineto_reader]") {
  // The reader keeps the last pid and tid token with its value; a token
  // that differs in any byte, in its length or only in the space after it
  // must still be read for itself.
  const std::vector<std::string> tids = {"7",    "7",    "8",          "17",       "71",        "7 ",   "7",
                                         "1234", "1235", "1234 ",      "-5",       "5",         "1.0e1",
                                         "1234567890123456", "1234567890123457", "12345678901234567",
                                         "12345678901234568", "12345678901234567"};
  const std::vector<int64_t> want = {7,    7,    8,    17,   71,   7,    7,    1234, 1235, 1234, -5, 5, 10,
                                     1234567890123456, 1234567890123457, 12345678901234567, 12345678901234568,
                                     12345678901234567};
  std::string events;
  for (size_t i = 0; i < tids.size(); ++i) {
    if (i > 0) events += ",";
    events += R"({"ph":"X","cat":"cpu_op","name":"op","pid":)" + tids[(i + 3) % tids.size()] + R"(,"tid":)" +
              tids[i] + R"(,"ts":)" + std::to_string(10 * i) + R"(,"dur":1})";
  }
  const Trace trace = ParseOrDie(KinetoDoc(events));
  REQUIRE(trace.events.size() == tids.size());
  for (size_t i = 0; i < tids.size(); ++i) {
    INFO("event " << i << ": tid " << tids[i]);
    const TraceTrack& track = trace.tracks[static_cast<size_t>(trace.events[i].track)];
    CHECK(track.tid == want[i]);
    CHECK(track.pid == want[(i + 3) % want.size()]);
  }
}

TEST_CASE("reader parses the args of CPU ops", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cpu_op","name":"aten::zeros","pid":3113936,"tid":3113937,"ts":1661203462598738,"dur":19,)j"
      R"j("args":{"External id":1,"Input Dims":[[2,3],[],[4]],"Input type":["","","Scalar"],)j"
      R"j("Record function id":42,"Sequence number":1080,"Fwd thread id":1,"Ev Idx":0}})j"));
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kCpuOp);
  CHECK(ev.external_id == 1);
  CHECK(trace.Detail(ev).sequence_number == 1080);  // "Record function id" and "Fwd thread id" are skipped
  CHECK(trace.Str(ev.input_dims) == "[[2,3],[],[4]]");
  CHECK(ev.correlation == kUnset);
  CHECK(trace.Detail(ev).stream == kUnset);
  CHECK(trace.Detail(ev).device == -1);
  const TraceTrack& track = trace.tracks[static_cast<size_t>(ev.track)];
  CHECK(track.pid == 3113936);
  CHECK(track.tid == 3113937);
}

TEST_CASE("reader stores a detail only for events with an arg that goes there", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":9,)j"
      R"j("args":{"External id":3,"Input Dims":[[2,2]],"Input type":["float"],"Ev Idx":0}},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":2,"dur":3,)j"
      R"j("args":{"External id":3,"cbid":211,"correlation":77}},)j"
      R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":6,"dur":4,)j"
      R"j("args":{"External id":3,"device":0,"stream":7,"correlation":77,"grid":[2,1,1],"block":[64,1,1]}},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":20,"dur":9,)j"
      R"j("args":{"External id":4,"Sequence number":12}})j"));
  REQUIRE(trace.events.size() == 4);
  // Names, shapes and ids stay on the event; stream, device, launch shape
  // and sequence number go to a detail, which events without them lack.
  CHECK(trace.events[0].detail == -1);
  CHECK(trace.events[0].external_id == 3);
  CHECK(trace.Str(trace.events[0].input_types) == "[\"float\"]");
  CHECK(trace.events[1].detail == -1);
  CHECK(trace.events[1].correlation == 77);
  REQUIRE(trace.details.size() == 2);
  CHECK(trace.events[2].detail == 0);
  CHECK(trace.Detail(trace.events[2]).stream == 7);
  CHECK(trace.Detail(trace.events[2]).grid_blocks == 2);
  CHECK(trace.Detail(trace.events[2]).block_threads == 64);
  CHECK(trace.events[3].detail == 1);
  CHECK(trace.Detail(trace.events[3]).sequence_number == 12);
  CHECK(trace.Detail(trace.events[3]).stream == kUnset);
  // Without a detail, every field reads as absent.
  CHECK(trace.Detail(trace.events[0]).stream == kUnset);
  CHECK(trace.Detail(trace.events[0]).device == -1);
  CHECK(trace.Detail(trace.events[0]).dtype == 0);
  CHECK(&trace.Detail(trace.events[1]) == &kNoDetail);
}

TEST_CASE("reader multiplies a kernel's grid and block the same way whatever their text", "[kineto_reader]") {
  // Plain arrays of small integers are read from their text, anything else
  // item by item: both give these.
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"[512, 1, 1]", 512},
      {"[ 2 ,3\n,\t4 ]", 24},
      {"[]", 1},
      {"[ ]", 1},
      {"[01, 2]", 2},
      {"[2147483648, 2]", 4294967296},  // 2^31 is the largest dimension
      {"[2147483649, 1]", kUnset},
      {"[0, 5]", kUnset},
      {"[1048576, 1048576]", 1099511627776},  // 2^40, the largest product
      {"[1048576, 1048576, 2]", kUnset},
      {"[12345678901]", kUnset},  // 11 digits: item by item
      {"[-1, 2]", kUnset},
      {"[1.5, 2]", kUnset},
      {"[1e2]", kUnset},
      {"[\"4\", 2]", kUnset},
      {"[[2], 2]", kUnset},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    const Trace trace = ParseOrDie(KinetoDoc(R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,)j"
                                             R"j("args":{"grid":)j" + text + R"j(,"block":)j" + text + "}}"));
    CHECK(trace.Detail(OnlyEvent(trace)).grid_blocks == want);
    CHECK(trace.Detail(OnlyEvent(trace)).block_threads == (want > INT32_MAX ? INT32_MAX : want));
  }
  CHECK_FALSE(ErrorOf(KinetoDoc(R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,)j"
                                R"j("args":{"grid":[1,]}})j")).empty());
}

TEST_CASE("reader parses the args of kernels, copies and memsets", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"kernel","name":"void k()","pid":0,"tid":7,"ts":10,"dur":41.407,)j"
      R"j("args":{"External id":12353,"queued":0,"device":0,"context":1,"stream":7,"correlation":57541,)j"
      R"j("registers per thread":40,"blocks per SM":4.740741,"grid":[512,1,1],"block":[512,1,1]}},)j"
      R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy DtoD (Device -> Device)","pid":1,"tid":9,"ts":20,"dur":5.088,)j"
      R"j("args":{"device":1,"stream":9,"correlation":64014,"bytes":4000,"memory bandwidth (GB/s)":0.786}},)j"
      R"j({"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":7,"ts":30,"dur":4.96,)j"
      R"j("args":{"device":0,"stream":7,"correlation":57609,"bytes":6291456}})j"));
  REQUIRE(trace.events.size() == 3);
  const TraceEvent& k = trace.events[0];
  CHECK(k.kind == EventKind::kKernel);
  CHECK(k.correlation == 57541);
  CHECK(k.external_id == 12353);
  CHECK(trace.Detail(k).device == 0);
  CHECK(trace.Detail(k).stream == 7);
  CHECK(k.dur_ns == 41407);
  const TraceEvent& c = trace.events[1];
  CHECK(c.kind == EventKind::kMemcpy);
  CHECK(trace.Detail(c).device == 1);
  CHECK(trace.Detail(c).stream == 9);
  CHECK(trace.Detail(c).bytes == 4000);
  CHECK(c.correlation == 64014);
  CHECK(trace.Detail(trace.events[2]).bytes == 6291456);
  CHECK(trace.events[2].kind == EventKind::kMemset);
  // GPU tracks are marked as such; a CPU-less trace has only GPU tracks.
  for (const TraceTrack& t : trace.tracks) CHECK(t.gpu);
}

TEST_CASE("reader parses the args of NCCL kernels and record_param_comms", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",)j"
      R"j("pid":0,"tid":40,"ts":4458677009853.422,"dur":2636.669,)j"
      R"j("args":{"External id":12945,"device":0,"stream":40,"correlation":60047,"Collective name":"allreduce",)j"
      R"j("In msg nelems":6637568,"Out msg nelems":6637569,"Group size":2,"dtype":"Float","In split size":"[]",)j"
      R"j("Process Group Name":"0","Process Group Ranks":"[0, 1]"}},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":2910249,"tid":2919752,"ts":4458676524648.797,)j"
      R"j("dur":189.626,"args":{"External id":2099,"Collective name":"broadcast","In msg nelems":2049000,)j"
      R"j("Out msg nelems":2049000,"Group size":8,"dtype":"BFloat16"}})j"));
  REQUIRE(trace.events.size() == 2);
  const TraceEvent& k = trace.events[0];
  CHECK(trace.Detail(k).in_msg_nelems == 6637568);  // "Collective name", "Out msg nelems", "Group size" are skipped
  CHECK(trace.Str(trace.Detail(k).dtype) == "Float");
  CHECK(k.ts_ns == 4458677009853422);
  CHECK(k.dur_ns == 2636669);
  const TraceEvent& c = trace.events[1];
  CHECK(trace.Detail(c).in_msg_nelems == 2049000);
  CHECK(trace.Str(trace.Detail(c).dtype) == "BFloat16");
}

TEST_CASE("reader parses cuda_sync records", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cuda_sync","name":"Stream Wait Event","pid":0,"tid":20,"ts":1695835585751488,"dur":3,)j"
      R"j("args":{"External id":5170,"cuda_sync_kind":"Stream Wait Event","wait_on_stream":7,)j"
      R"j("wait_on_cuda_event_record_corr_id":5169,"wait_on_cuda_event_id":1,"stream":20,"correlation":5170,)j"
      R"j("device":0,"context":1}})j"));
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.kind == EventKind::kCudaSync);
  CHECK(trace.Str(trace.Detail(ev).sync_kind) == "Stream Wait Event");
  CHECK(trace.Detail(ev).wait_on_stream == 7);
  CHECK(trace.Detail(ev).wait_on_event_record_correlation == 5169);
  CHECK(trace.Detail(ev).stream == 20);
  CHECK(ev.correlation == 5170);
}

TEST_CASE("reader reads integer args written as strings or integral floats", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":1,)j"
      R"j("args":{"correlation":"135071","External id":12.0,"Sequence number":null}})j"));
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.correlation == 135071);
  CHECK(ev.external_id == 12);
  CHECK(trace.Detail(ev).sequence_number == kUnset);
  CHECK(trace.warnings.empty());
}

TEST_CASE("reader reads integers of every length exactly, whatever follows them", "[kineto_reader]") {
  // The reader reads numbers eight digits at a time, past the token's end
  // into the text after it: a number followed at once by '}' or ',' then
  // more digits, or by blanks, must keep its own digits only.
  const std::string digits = "9182736450918273645";  // 19 digits: beyond the fast path
  for (size_t n = 1; n <= digits.size(); ++n) {
    const std::string number = digits.substr(0, n);
    const int64_t value = std::stoll(number);
    const std::string ts = n <= 15 ? number : "1";  // 16 digits here pass kMaxTimeNs
    for (const std::string& sign : {std::string(), std::string("-")}) {
      const Trace trace = ParseOrDie(KinetoDoc(
          R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":)j" + sign + number +
          R"j(,"tid":12345678901,"ts":)j" + ts + R"j(,"dur":1,"args":{"correlation":)j" + sign + number +
          R"j(,"stream":7 ,"External id":)j" + number + "}}"));
      const TraceEvent& ev = OnlyEvent(trace);
      INFO("number: " << sign << number);
      CHECK(ev.correlation == (sign.empty() ? value : -value));
      CHECK(ev.external_id == value);
      CHECK(trace.Detail(ev).stream == 7);
      CHECK(trace.tracks[static_cast<size_t>(ev.track)].pid == (sign.empty() ? value : -value));
      CHECK(trace.tracks[static_cast<size_t>(ev.track)].tid == 12345678901);
      CHECK(ev.ts_ns == std::stoll(ts) * 1000);
    }
  }
}

TEST_CASE("reader ignores an arg of the wrong type and counts a warning", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,)j"
      R"j("args":{"correlation":1.5,"stream":[7],"dtype":3}})j"));
  const TraceEvent& ev = OnlyEvent(trace);
  CHECK(ev.correlation == kUnset);
  CHECK(trace.Detail(ev).stream == kUnset);
  CHECK(trace.Detail(ev).dtype == 0);
  REQUIRE(trace.warnings.items().size() == 1);
  CHECK(trace.warnings.items()[0].kind == "bad_arg_type");
  CHECK(trace.warnings.items()[0].count == 3);
  CHECK_THAT(trace.warnings.items()[0].example, Catch::Contains("test.json") && Catch::Contains("event 0"));
}

// --- top level -----------------------------------------------------------------

TEST_CASE("reader reads deviceProperties, distributedInfo, traceName and baseTimeNanoseconds", "[kineto_reader]") {
  const std::string top =
      R"j("schemaVersion":1,"deviceProperties":[{"id":0,"name":"NVIDIA A100-PG509-200","totalGlobalMem":42297524224,)j"
      R"j("computeMajor":8,"computeMinor":0,"maxThreadsPerBlock":1024,"numSms":108},)j"
      R"j({"id":1,"name":"Tesla V100-SXM2-32GB","totalGlobalMem":34089730048,"computeMajor":7,"computeMinor":0,"numSms":80}],)j"
      R"j("distributedInfo":{"backend":"nccl","rank":3,"world_size":8,"pg_count":1,)j"
      R"j("pg_config":[{"pg_name":"0","pg_size":8,"ranks":[0,1,2,3,4,5,6,7]}],"nccl_version":"2.17.1"},)j"
      R"j("traceName":"worker3.pt.trace.json","displayTimeUnit":"ms","baseTimeNanoseconds":1700000000000000000)j";
  const Trace trace = ParseOrDie(KinetoDoc(Op(), top));
  CHECK(trace.schema_version == 1);
  REQUIRE(trace.devices.size() == 2);
  CHECK(trace.devices[0].id == 0);
  CHECK(trace.devices[0].name == "NVIDIA A100-PG509-200");
  CHECK(trace.devices[0].total_global_mem == 42297524224);
  CHECK(trace.devices[0].compute_major == 8);
  CHECK(trace.devices[0].compute_minor == 0);
  CHECK(trace.devices[0].num_sms == 108);
  CHECK(trace.devices[1].id == 1);
  CHECK(trace.devices[1].compute_major == 7);
  CHECK(trace.devices[1].num_sms == 80);
  CHECK(trace.rank == 3);
  CHECK(trace.world_size == 8);
  CHECK(trace.backend == "nccl");
  CHECK(trace.trace_name == "worker3.pt.trace.json");
  CHECK(trace.base_time_ns == 1700000000000000000);
}

TEST_CASE("reader reads top-level fields that follow traceEvents", "[kineto_reader]") {
  const Trace trace = ParseOrDie(
      R"j({"traceEvents":[)j" + Op() + R"j(],"distributedInfo":{"rank":1,"world_size":2},"traceName":"late"})j");
  CHECK(trace.rank == 1);
  CHECK(trace.world_size == 2);
  CHECK(trace.trace_name == "late");
}

TEST_CASE("reader leaves rank, world size and devices unset when the trace has none", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op()));
  CHECK(trace.rank == -1);
  CHECK(trace.world_size == -1);
  CHECK(trace.devices.empty());
  CHECK(trace.base_time_ns == 0);
  CHECK(trace.schema_version == kUnset);
  CHECK_FALSE(trace.rank_from_file_name);
}

TEST_CASE("reader ignores malformed deviceProperties and distributedInfo with a warning", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op(), R"j("deviceProperties":{"id":0},"distributedInfo":[1])j"));
  CHECK(trace.devices.empty());
  CHECK(trace.rank == -1);
  std::vector<std::string> kinds;
  for (const auto& w : trace.warnings.items()) kinds.push_back(w.kind);
  CHECK(kinds == std::vector<std::string>{"bad_device_properties", "bad_distributed_info"});
}

// --- metadata and tracks ---------------------------------------------------------

TEST_CASE("reader applies process and thread metadata to tracks", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"python3"}},)j"
      R"j({"name":"process_labels","ph":"M","pid":0,"tid":0,"args":{"labels":"GPU 0"}},)j"
      R"j({"name":"thread_name","ph":"M","pid":0,"tid":7,"args":{"name":"stream 7 "}},)j"
      R"j({"name":"thread_sort_index","ph":"M","pid":0,"tid":7,"args":{"sort_index":7}},)j"
      R"j({"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":1,"dur":1,"args":{"stream":7}},)j"
      R"j({"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":8,"ts":2,"dur":1,"args":{"stream":8}},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"op","pid":5,"tid":5,"ts":1,"dur":1},)j"
      R"j({"name":"thread_name","ph":"M","pid":5,"tid":5,"args":{"name":"pt_main_thread"}})j"));
  REQUIRE(trace.events.size() == 3);
  const TraceTrack& s7 = trace.tracks[static_cast<size_t>(trace.events[0].track)];
  const TraceTrack& s8 = trace.tracks[static_cast<size_t>(trace.events[1].track)];
  const TraceTrack& cpu = trace.tracks[static_cast<size_t>(trace.events[2].track)];
  CHECK(trace.Str(s7.thread_name) == "stream 7 ");
  CHECK(s7.sort_index == 7);
  CHECK(trace.Str(s7.process_name) == "python3");
  CHECK(trace.Str(s7.process_label) == "GPU 0");
  // Process metadata applies to every track of the pid, also to tracks seen later.
  CHECK(trace.Str(s8.process_name) == "python3");
  CHECK(trace.Str(s8.process_label) == "GPU 0");
  CHECK(s8.thread_name == 0);
  CHECK(s8.sort_index == kUnset);
  CHECK(s7.gpu);
  CHECK(s7.num_events == 1);
  // Thread metadata may follow the events of its thread.
  CHECK(trace.Str(cpu.thread_name) == "pt_main_thread");
  CHECK(cpu.process_name == 0);
  CHECK_FALSE(cpu.gpu);
}

TEST_CASE("reader keeps string pids and tids by name", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":1,"dur":100},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"op","pid":"123","tid":"45","ts":2,"dur":1},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"op2","pid":0,"tid":0,"ts":3,"dur":1})j"));
  REQUIRE(trace.events.size() == 3);
  const TraceTrack& spans = trace.tracks[static_cast<size_t>(trace.events[0].track)];
  CHECK(spans.pid_is_text);
  CHECK(spans.tid_is_text);
  CHECK(trace.Str(spans.pid_text) == "Spans");
  CHECK(trace.Str(spans.tid_text) == "PyTorch Profiler");
  // Numeric strings are numbers.
  const TraceTrack& numeric = trace.tracks[static_cast<size_t>(trace.events[1].track)];
  CHECK_FALSE(numeric.pid_is_text);
  CHECK(numeric.pid == 123);
  CHECK(numeric.tid == 45);
  // A text pid never shares a track with the numeric pid 0.
  CHECK(trace.events[2].track != trace.events[0].track);
}

TEST_CASE("reader puts events of one (pid, tid) on one track", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":2,"ts":1,"dur":1},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":3,"ts":1,"dur":1},)j"
      R"j({"ph":"X","cat":"cpu_op","name":"c","pid":1,"tid":2,"ts":3,"dur":1})j"));
  CHECK(trace.events[0].track == trace.events[2].track);
  CHECK(trace.events[0].track != trace.events[1].track);
  CHECK(trace.tracks[static_cast<size_t>(trace.events[0].track)].num_events == 2);
}

TEST_CASE("reader keeps tracks apart when events alternate between two and three of them", "[kineto_reader]") {
  // The reader remembers its last two tracks: every order of a, b and c
  // here must still land each event on its own (pid, tid).
  const std::string tids = "2323423424";
  std::string events;
  for (size_t i = 0; i < tids.size(); ++i) {
    if (i > 0) events += ",";
    events += R"j({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":)j" + std::string(1, tids[i]) +
              R"j(,"ts":)j" + std::to_string(i) + R"j(,"dur":1})j";
  }
  const Trace trace = ParseOrDie(KinetoDoc(events));
  REQUIRE(trace.events.size() == tids.size());
  REQUIRE(trace.tracks.size() == 3);
  for (size_t i = 0; i < tids.size(); ++i) {
    CHECK(trace.tracks[static_cast<size_t>(trace.events[i].track)].tid == tids[i] - '0');
  }
  CHECK(trace.tracks[static_cast<size_t>(trace.events[0].track)].num_events == 4);
  CHECK(trace.tracks[static_cast<size_t>(trace.events[1].track)].num_events == 3);
  CHECK(trace.tracks[static_cast<size_t>(trace.events[4].track)].num_events == 3);
}

// --- flows and instants ------------------------------------------------------------

TEST_CASE("reader reads flow start and finish events with their ids and categories", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      Op() + "," +
      R"j({"ph":"s","id":57541,"pid":2910249,"tid":2919752,"ts":4458676983526.767,"cat":"ac2g","name":"ac2g"},)j"
      R"j({"ph":"f","id":57541,"pid":0,"tid":7,"ts":4458676983543.183,"cat":"ac2g","name":"ac2g","bp":"e"},)j"
      R"j({"ph":"s","id":12,"pid":1,"tid":1,"ts":5,"cat":"async","name":"async"},)j"
      R"j({"ph":"t","id":"3","pid":1,"tid":1,"ts":6,"cat":"fwdbwd","name":"fwdbwd"})j"));
  CHECK(trace.events.size() == 1);  // flows are not events
  REQUIRE(trace.flows.size() == 4);
  const TraceFlow& s = trace.flows[0];
  const TraceFlow& f = trace.flows[1];
  CHECK(s.phase == 's');
  CHECK(f.phase == 'f');
  CHECK(s.id == 57541);
  CHECK(f.id == 57541);
  CHECK(trace.Str(s.category) == "ac2g");
  CHECK(s.ts_ns == 4458676983526767);
  CHECK(f.ts_ns == 4458676983543183);
  CHECK(trace.tracks[static_cast<size_t>(s.track)].tid == 2919752);
  CHECK(trace.tracks[static_cast<size_t>(f.track)].tid == 7);
  CHECK(trace.Str(trace.flows[2].category) == "async");
  CHECK(trace.flows[3].phase == 't');
  CHECK(trace.flows[3].id == 3);
  CHECK(trace.Str(trace.flows[3].category) == "fwdbwd");
}

TEST_CASE("reader passes over a flow's name once its phase is known, checking only that it is JSON",
          "[kineto_reader]") {
  // A flow keeps no name, so the reader neither interns nor type-checks it.
  const Trace trace = ParseOrDie(KinetoDoc(
      Op() + "," +
      R"j({"ph":"s","id":1,"pid":1,"tid":1,"ts":5,"cat":"ac2g","name":"flow name"},)j"
      R"j({"ph":"f","id":1,"pid":0,"tid":7,"ts":6,"cat":"ac2g","name":5,"bp":"e"},)j"
      R"j({"ph":"t","id":2,"pid":1,"tid":1,"ts":7,"cat":"fwdbwd","name":{"a":[1]}})j"));
  REQUIRE(trace.flows.size() == 3);
  CHECK(trace.flows[1].phase == 'f');
  CHECK(trace.Str(trace.flows[2].category) == "fwdbwd");
  CHECK(trace.strings.Find("flow name") == -1);
  // Malformed JSON in it is still an error, where it is.
  const std::string bad = R"j({"ph":"s","id":1,"pid":1,"tid":1,"ts":5,"cat":"ac2g","name":[1,,2]})j";
  const std::string message = ErrorOfThirdEvent(bad);
  CHECK_THAT(message, Catch::StartsWith("t.json: event 2: 'name': the JSON is malformed at byte "));
  // Before its phase, the name is read as any event's: it must be a string.
  CHECK(ErrorOfThirdEvent(R"j({"name":5,"ph":"s","id":1,"pid":1,"tid":1,"ts":5,"cat":"ac2g"})j") ==
        "t.json: event 2: 'name' must be a string");
}

TEST_CASE("reader drops a flow event without an id and counts a warning", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op() + "," + R"j({"ph":"s","pid":1,"tid":1,"ts":5,"cat":"ac2g","name":"ac2g"})j"));
  CHECK(trace.flows.empty());
  REQUIRE(trace.warnings.items().size() == 1);
  CHECK(trace.warnings.items()[0].kind == "bad_flow");
}

TEST_CASE("reader reads instant events, including [memory] with Bytes", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":783658,"tid":785244,"ts":1669783687464300,)j"
      R"j("args":{"Device Type":1,"Device Id":1,"Addr":139926520725504,"Bytes":5242880,"Total Allocated":5435638784}},)j"
      R"j({"ph":"I","s":"g","name":"Iteration Start: PyTorch Profiler","pid":1,"tid":1,"ts":7,"dur":99})j"));
  REQUIRE(trace.events.size() == 2);
  const TraceEvent& mem = trace.events[0];
  CHECK(mem.instant);
  CHECK(mem.kind == EventKind::kInstant);
  CHECK(trace.Str(mem.name) == "[memory]");
  CHECK(trace.Detail(mem).bytes == 5242880);
  CHECK(mem.dur_ns == 0);
  CHECK(mem.ts_ns == 1669783687464300000);
  CHECK(trace.events[1].instant);
  CHECK(trace.events[1].dur_ns == 0);  // an instant's dur is meaningless
}

TEST_CASE("reader skips unsupported phases with a warning", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(Op() + "," + R"j({"ph":"B","name":"begin","pid":1,"tid":1,"ts":1})j"));
  CHECK(trace.events.size() == 1);
  REQUIRE(trace.warnings.items().size() == 1);
  CHECK(trace.warnings.items()[0].kind == "unsupported_phase_B");
  CHECK_THAT(trace.warnings.items()[0].example, Catch::Contains("event 1"));
}

TEST_CASE("reader keeps float timestamps' nanosecond fractions exactly", "[kineto_reader]") {
  const Trace trace = ParseOrDie(KinetoDoc(
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1102,"tid":1102,"ts":1712195495505543.2,"dur":41.768},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1102,"tid":1102,"ts":1712195495519695.8,"dur":0.001},)j"
      R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1102,"tid":1102,"ts":4.5e2,"dur":1E1})j"));
  REQUIRE(trace.events.size() == 3);
  CHECK(trace.events[0].ts_ns == 1712195495505543200);
  CHECK(trace.events[0].dur_ns == 41768);
  CHECK(trace.events[1].ts_ns == 1712195495519695800);
  CHECK(trace.events[1].dur_ns == 1);
  CHECK(trace.events[2].ts_ns == 450000);
  CHECK(trace.events[2].dur_ns == 10000);
}

// --- bad input ---------------------------------------------------------------------

TEST_CASE("reader refuses empty input", "[kineto_reader][errors]") {
  CHECK(ErrorOf("") == "t.json: the file is empty (0 bytes)");
}

TEST_CASE("reader refuses whitespace-only input", "[kineto_reader][errors]") {
  CHECK(ErrorOf(" \n\t\r ") == "t.json: the file holds only whitespace");
}

TEST_CASE("reader refuses text that is not JSON, quoting how it starts", "[kineto_reader][errors]") {
  CHECK(ErrorOf("hello world") ==
        "t.json: not JSON: a trace starts with '{' or '[', this file starts with 'hello world'");
  CHECK_THAT(ErrorOf(std::string("\x01\x02garbage", 9)), Catch::Contains("'??garbage'"));
}

TEST_CASE("reader refuses a top level that is neither an object nor an array", "[kineto_reader][errors]") {
  CHECK_THAT(ErrorOf("42"), Catch::StartsWith("t.json: not JSON") && Catch::Contains("'42'"));
  CHECK_THAT(ErrorOf("\"traceEvents\""), Catch::StartsWith("t.json: not JSON"));
  CHECK_THAT(ErrorOf("null"), Catch::StartsWith("t.json: not JSON"));
}

TEST_CASE("reader refuses truncated JSON", "[kineto_reader][errors]") {
  const std::string doc = KinetoDoc(Op("a") + "," + Op("b") + "," + Op("c"));
  for (size_t cut : {doc.size() / 2, doc.size() / 3, doc.size() - 1, doc.size() - 2, size_t{1}, size_t{17}}) {
    INFO("cut at " << cut << ": " << doc.substr(0, cut));
    const std::string msg = ErrorOf(doc.substr(0, cut));
    CHECK_THAT(msg, Catch::StartsWith("t.json: ") && Catch::Contains("truncated"));
  }
  const std::string array = "[" + Op("a") + "," + Op("b") + "]";
  CHECK_THAT(ErrorOf(array.substr(0, array.size() / 2)), Catch::Contains("truncated"));
}

TEST_CASE("reader refuses an object without traceEvents", "[kineto_reader][errors]") {
  CHECK(ErrorOf(R"j({"schemaVersion":1,"deviceProperties":[]})j") ==
        "t.json: no \"traceEvents\" array in the top-level object");
}

TEST_CASE("reader refuses traceEvents that is not an array", "[kineto_reader][errors]") {
  CHECK(ErrorOf(R"j({"traceEvents":{}})j") == "t.json: \"traceEvents\" must be an array");
}

TEST_CASE("reader refuses a trace that holds no events", "[kineto_reader][errors]") {
  CHECK(ErrorOf(KinetoDoc("")) == "t.json: the trace holds no events");
  CHECK(ErrorOf("[]") == "t.json: the trace holds no events");
  // Metadata alone is no trace either.
  CHECK(ErrorOf(KinetoDoc(R"j({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"x"}})j")) ==
        "t.json: the trace holds no events");
}

TEST_CASE("reader refuses an event that is not an object, naming its index", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent("17") == "t.json: event 2: not a JSON object");
  CHECK(ErrorOfThirdEvent("[1,2]") == "t.json: event 2: not a JSON object");
}

TEST_CASE("reader refuses an event without ph", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"name":"a","ts":1,"dur":1})j") == "t.json: event 2: no 'ph' (event phase)");
}

TEST_CASE("reader refuses a ph that is not one letter", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"XX","name":"a","ts":1,"dur":1})j") == "t.json: event 2: 'ph' is 'XX', not one letter");
  CHECK(ErrorOfThirdEvent(R"j({"ph":1,"name":"a","ts":1,"dur":1})j") == "t.json: event 2: 'ph' must be a string");
}

TEST_CASE("reader refuses an event without ts", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","dur":1})j") == "t.json: event 2: no 'ts'");
  CHECK(ErrorOfThirdEvent(R"j({"ph":"i","name":"a"})j") == "t.json: event 2: no 'ts'");
}

TEST_CASE("reader refuses an event without name", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","ts":1,"dur":1})j") == "t.json: event 2: no 'name'");
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":7,"ts":1,"dur":1})j") == "t.json: event 2: 'name' must be a string");
}

TEST_CASE("reader refuses a complete event without dur", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":1})j") ==
        "t.json: event 2: complete event ('ph': 'X') has no 'dur'");
}

TEST_CASE("reader refuses a negative dur", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":1,"dur":-4})j") == "t.json: event 2: 'dur' is negative (-4 us)");
}

TEST_CASE("reader refuses ts written as a string", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":"1","dur":1})j") ==
        "t.json: event 2: 'ts' must be a number of microseconds");
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":1,"dur":null})j") ==
        "t.json: event 2: 'dur' must be a number of microseconds");
}

TEST_CASE("reader refuses ts out of range", "[kineto_reader][errors]") {
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":1e300,"dur":1})j") ==
        "t.json: event 2: 'ts' is out of range (1e300 us)");
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","ts":1,"dur":99999999999999999999})j") ==
        "t.json: event 2: 'dur' is out of range (99999999999999999999 us)");
}

TEST_CASE("reader refuses a string longer than max_string_bytes", "[kineto_reader][errors]") {
  ReadOptions options;
  options.max_string_bytes = 12;
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"aaaaaaaaaaaaaaaa","ts":1,"dur":1})j", options) ==
        "t.json: event 2: 'name' is 16 bytes long (the limit is 12)");
  CHECK(ErrorOfThirdEvent(R"j({"ph":"X","name":"a","cat":"0123456789abc","ts":1,"dur":1})j", options) ==
        "t.json: event 2: 'cat' is 13 bytes long (the limit is 12)");
  // At the limit is fine.
  auto ok = ParseTraceText(KinetoDoc(Op("123456789012")), "t.json", options);
  CHECK(ok.ok());
}

TEST_CASE("reader unescapes strings, also ones whose text it read before", "[kineto_reader]") {
  // Strings without escapes are read as they stand in the text and cached by
  // those bytes. `a\\nb` unescapes to the four characters a \ n b, which are
  // the bytes of the next name as written, `a\nb` (a, newline, b): each must
  // keep its own meaning however often and in whatever order they come.
  const std::string escaped_backslash = R"(a\\nb)";
  const std::string newline = R"(a\nb)";
  const std::string quote = R"(say \"hi\")";
  const Trace trace = ParseOrDie(KinetoDoc(Op(escaped_backslash) + "," + Op(newline) + "," + Op(newline) + "," +
                                           Op(escaped_backslash) + "," + Op("plain") + "," + Op("plain") + "," +
                                           Op(quote) + "," + Op(quote) + "," + Op(R"(\u00e9t\u00e9)")));
  REQUIRE(trace.events.size() == 9);
  const std::vector<std::string> expected = {"a\\nb", "a\nb", "a\nb", "a\\nb", "plain", "plain",
                                             "say \"hi\"", "say \"hi\"", "\xc3\xa9t\xc3\xa9"};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("event " << i);
    CHECK(trace.Str(trace.events[i].name) == expected[i]);
  }
  CHECK(trace.events[0].name == trace.events[3].name);
  CHECK(trace.events[1].name == trace.events[2].name);
  CHECK(trace.events[0].name != trace.events[1].name);
  CHECK(trace.events[4].name == trace.events[5].name);
}

TEST_CASE("reader keeps apart names of one length that share a slot of its string cache", "[kineto_reader]") {
  // 5000 names of each length outnumber the cache's 4096 slots, so some
  // share one: a hit must compare every byte (the compare has its own code
  // for 4-7 and 8-16 bytes). Each name comes twice, the second time from
  // the cache.
  for (const size_t length : {1, 4, 5, 7, 8, 9, 12, 15, 16, 17, 30}) {
    std::vector<std::string> names;
    for (int i = 0; i < 5000; ++i) {
      std::string digits = std::to_string(i * 7919 % 10000);
      std::string name = std::string(length > digits.size() ? length - digits.size() : 0, 'n') + digits;
      names.push_back(name.substr(name.size() - length));
    }
    std::string events;
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::string& name : names) events += (events.empty() ? "" : ",") + Op(name);
    }
    const Trace trace = ParseOrDie(KinetoDoc(events));
    REQUIRE(trace.events.size() == 2 * names.size());
    size_t wrong = 0;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      if (trace.Str(trace.events[i].name) != names[i % names.size()]) ++wrong;
    }
    INFO("length " << length);
    CHECK(wrong == 0);
  }
}

TEST_CASE("reader refuses more events than max_events", "[kineto_reader][errors]") {
  ReadOptions options;
  options.max_events = 2;
  CHECK(ErrorOf(KinetoDoc(Op() + "," + Op() + "," + Op()), options) == "t.json: more than 2 events");
  CHECK(ParseTraceText(KinetoDoc(Op() + "," + Op()), "t.json", options).ok());
}

TEST_CASE("reader survives nesting a million levels deep without recursion", "[kineto_reader][errors]") {
  // Nothing recurses: a value daydream does not read is skipped iteratively,
  // however deep, and the rest of the event still loads ...
  const size_t depth = 1000000;
  const std::string deep_arg = R"j({"ph":"X","name":"a","ts":1,"dur":1,"args":{"x":)j" +
                               std::string(depth, '[') + std::string(depth, ']') + R"j(,"External id":5}})j";
  const Trace trace = ParseOrDie(KinetoDoc(deep_arg));
  REQUIRE(trace.events.size() == 1);
  CHECK(trace.events[0].external_id == 5);
  // ... an event that is nothing but nesting fails its type check ...
  CHECK(ErrorOf(KinetoDoc(std::string(depth, '[') + std::string(depth, ']'))) ==
        "t.json: event 0: not a JSON object");
  // ... and nesting that never closes is a truncated file.
  CHECK_THAT(ErrorOf(std::string(depth, '[')), Catch::Contains("truncated"));
  CHECK_THAT(ErrorOf(KinetoDoc(std::string(depth, '['))), Catch::StartsWith("t.json: event 0: "));
}

TEST_CASE("reader refuses a second document after the first", "[kineto_reader][errors]") {
  const std::string doc = KinetoDoc(Op());
  CHECK_THAT(MessageOf(doc + " {}"),
             Catch::StartsWith("t.json: unexpected text after the end of the JSON document at byte " +
                               std::to_string(doc.size() + 1)));
  CHECK_THAT(MessageOf(doc + "}"), Catch::Contains("unexpected text after the end of the JSON document"));
}

TEST_CASE("reader reports trailing garbage as text after the document", "[kineto_reader][errors]") {
  // Text after the root that is not a closing bracket (or any text after a
  // root array) fails simdjson's root check before iteration starts, and the
  // reader then calls the file "truncated or malformed" although the
  // document is complete; only "{...} {}" gets the right message.
  const std::string doc = KinetoDoc(Op());
  CHECK_THAT(MessageOf(doc + " garbage"), Catch::Contains("unexpected text after the end of the JSON document"));
  const std::string array = "[" + Op() + "]";
  CHECK_THAT(MessageOf(array + " {}"), Catch::Contains("unexpected text after the end of the JSON document"));
}

TEST_CASE("reader refuses trailing garbage after the document", "[kineto_reader][errors]") {
  // Whatever the wording, it is an error naming the source.
  for (const std::string& tail : {std::string(" garbage"), std::string("]"), std::string(",{}"), std::string(" 1")}) {
    INFO("tail " << tail);
    CHECK_THAT(ErrorOf(KinetoDoc(Op()) + tail), Catch::StartsWith("t.json: "));
    CHECK_THAT(ErrorOf("[" + Op() + "]" + tail), Catch::StartsWith("t.json: "));
  }
}

// --- files and ranks -----------------------------------------------------------------

TEST_CASE("ReadTraceFile takes the rank from the file name when distributedInfo lacks it", "[kineto_reader]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/rank-3.json", KinetoDoc(Op()));
  auto trace = ReadTraceFile(dir + "/rank-3.json");
  REQUIRE(trace.ok());
  CHECK(trace->rank == 3);
  CHECK(trace->rank_from_file_name);
  CHECK(trace->path == dir + "/rank-3.json");
}

TEST_CASE("ReadTraceFile prefers distributedInfo's rank to the file name", "[kineto_reader]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/rank-3.json", KinetoDoc(Op(), R"j("distributedInfo":{"rank":5,"world_size":8})j"));
  auto trace = ReadTraceFile(dir + "/rank-3.json");
  REQUIRE(trace.ok());
  CHECK(trace->rank == 5);
  CHECK_FALSE(trace->rank_from_file_name);
}

TEST_CASE("ReadTraceFile errors name the file", "[kineto_reader][errors]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/bad.json", KinetoDoc(Op() + R"j(,{"ph":"X","name":"a","ts":1,"dur":-4})j"));
  auto trace = ReadTraceFile(dir + "/bad.json");
  REQUIRE_FALSE(trace.ok());
  CHECK(std::string(trace.status().message()) == dir + "/bad.json: event 1: 'dur' is negative (-4 us)");
  auto missing = ReadTraceFile(dir + "/missing.json");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains(dir + "/missing.json"));
}

TEST_CASE("ReadTraceFile reads gzip files", "[kineto_reader]") {
  const std::string dir = TempDir();
  WriteFile(dir + "/t.json.gz", KinetoDoc(Op("gz")), /*gzip=*/true);
  auto trace = ReadTraceFile(dir + "/t.json.gz");
  REQUIRE(trace.ok());
  REQUIRE(trace->events.size() == 1);
  CHECK(trace->Str(trace->events[0].name) == "gz");
}

TEST_CASE("RankFromFileName finds the rank in common trace file names", "[kineto_reader]") {
  CHECK(RankFromFileName("rank-3.json") == 3);
  CHECK(RankFromFileName("rank3") == 3);
  CHECK(RankFromFileName("rank_12.json.gz") == 12);
  CHECK(RankFromFileName("/some/dir/rank-2.Apr_03_18_51_38.1102.pt.trace.json.gz") == 2);
  CHECK(RankFromFileName("worker5_step_12.123.pt.trace.json") == 5);
  CHECK(RankFromFileName("worker0_step_12.1694128201545.pt.trace.json") == 0);
  CHECK(RankFromFileName("megatron_kineto_7.json.gz") == 7);
  CHECK(RankFromFileName("trace-4.pt.trace.json") == 4);
  CHECK(RankFromFileName("sampled_rank-1.json.gz") == 1);
}

TEST_CASE("RankFromFileName returns -1 when the name holds no rank", "[kineto_reader]") {
  CHECK(RankFromFileName("Falconsai__1016002.json.gz") == -1);  // a job id, not a rank
  CHECK(RankFromFileName("trace.json") == -1);
  CHECK(RankFromFileName("model3.json") == -1);  // no separator before the number
  CHECK(RankFromFileName("") == -1);
  CHECK(RankFromFileName(".json") == -1);
  CHECK(RankFromFileName("/data/rank7/trace.json") == -1);  // only the base name counts
}

// --- windows -------------------------------------------------------------------------
// The events are parsed a window (ReadOptions::window_bytes) at a time; how the
// text is cut must never show in the result.

namespace {

// Everything a parse produced, as text, for comparing two parses.
std::string Dump(const Trace& t) {
  std::ostringstream out;
  out << "rank " << t.rank << " world " << t.world_size << " backend " << t.backend << " name " << t.trace_name
      << " schema " << t.schema_version << " base " << t.base_time_ns << "\n";
  for (const DeviceProperties& d : t.devices) out << "device " << d.id << " " << d.name << " " << d.num_sms << "\n";
  for (const TraceTrack& k : t.tracks) {
    out << "track " << k.pid << " " << k.tid << " " << k.pid_is_text << k.tid_is_text << " " << t.Str(k.pid_text)
        << " " << t.Str(k.tid_text) << " " << t.Str(k.process_name) << " " << t.Str(k.process_label) << " "
        << t.Str(k.thread_name) << " " << k.sort_index << " " << k.gpu << " " << k.num_events << "\n";
  }
  for (const TraceEvent& e : t.events) {
    const TraceEventDetail& x = t.Detail(e);
    out << "event " << t.Str(e.name) << " " << e.ts_ns << " " << e.dur_ns << " " << e.correlation << " "
        << e.external_id << " " << t.Str(e.input_dims) << " " << t.Str(e.input_types) << " " << e.track << " "
        << static_cast<int>(e.kind) << " " << e.instant << " detail " << e.detail << " " << x.sequence_number << " "
        << x.stream << " " << x.bytes << " " << x.in_msg_nelems << " " << x.wait_on_stream << " "
        << x.wait_on_event_record_correlation << " " << t.Str(x.dtype) << " " << t.Str(x.sync_kind) << " " << x.device
        << " " << x.grid_blocks << " " << x.block_threads << "\n";
  }
  for (const TraceFlow& f : t.flows) {
    out << "flow " << f.id << " " << f.ts_ns << " " << t.Str(f.category) << " " << f.track << " " << f.phase << "\n";
  }
  for (const WarningCount& w : t.warnings.items()) out << "warning " << w.kind << " " << w.count << " " << w.example << "\n";
  // The table itself, in id order: ids are the order strings were first met.
  for (size_t i = 0; i < t.strings.size(); ++i) out << "string " << i << " " << t.Str(static_cast<StringId>(i)) << "\n";
  return out.str();
}

Trace ParseWithWindow(const std::string& json, size_t window_bytes, bool parallel = true) {
  ReadOptions options;
  options.window_bytes = window_bytes;
  options.parallel_window_bytes = window_bytes;
  options.parallel_windows = parallel;
  auto trace = ParseTraceText(json, "w.json", options);
  INFO("window " << window_bytes);
  REQUIRE(trace.ok());
  return *std::move(trace);
}

// A Kineto-style document (one event per line group, "},\n  {" between
// events) whose events hold what can fool a cut: args arrays of objects
// written over several lines (",\n{" inside an event), strings with
// brackets, commas and escaped quotes, one event far longer than the small
// windows, args of the wrong type (warnings), flows and metadata.
std::string TrickyDoc(int events) {
  std::string body;
  for (int i = 0; i < events; ++i) {
    if (i > 0) body += ",\n  ";
    const std::string ts = std::to_string(10 * i);
    switch (i % 7) {
      case 0:
        body += R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":)j" + ts +
                R"j(,"dur":5,"args":{"External id":)j" + std::to_string(i) +
                R"j(,"Input Dims":[[4,8],[8,2]],"Sequence number":"x","list":[
    {"a":1},
    {"a":2},
    {"a":3},
    {"a":4},
    {"a":5},
    {"a":6},
    {"b":"},\n{"}
  ]})j" "\n  }";
        break;
      case 1:
        body += R"j({"ph":"X","cat":"kernel","name":"k \"q\" ],{ x","pid":0,"tid":7,"ts":)j" + ts +
                R"j(,"dur":3,"args":{"correlation":)j" + std::to_string(i) +
                R"j(,"stream":7,"grid":[2,1,1],"block":[128,1,1],"device":0}})j";
        break;
      case 2:
        body += R"j({"ph":"X","cat":"cpu_op","name":"bad args","pid":1,"tid":1,"ts":)j" + ts +
                R"j(,"dur":1,"args":{"correlation":1.5,"stream":[7],"dtype":3}})j";
        break;
      case 3:
        body += R"j({"ph":"s","cat":"ac2g","id":)j" + std::to_string(i) + R"j(,"pid":1,"tid":1,"ts":)j" + ts + "}";
        break;
      case 4:
        body += R"j({"ph":"X","cat":"cpu_op","name":")j" + std::string(3000, 'L') + R"j(","pid":1,"tid":2,"ts":)j" +
                ts + R"j(,"dur":2})j";
        break;
      case 5:
        body += R"j({"name":"thread_name","ph":"M","pid":1,"tid":)j" + std::to_string(i) +
                R"j(,"args":{"name":"thread )j" + std::to_string(i) + R"j("}})j";
        break;
      default:
        body += R"j({"ph":"Q","name":"unknown phase","pid":1,"tid":1,"ts":)j" + ts + "}";
        break;
    }
  }
  return "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"rank\": 3, \"world_size\": 4},\n"
         "  \"traceEvents\": [\n  " + body + "\n  ],\n  \"traceName\": \"tricky\",\n"
         "  \"deviceProperties\": [\n    {\"id\": 0, \"name\": \"GPU\", \"numSms\": 80}\n  ]\n}\n";
}

}  // namespace

TEST_CASE("reader gives the same trace whatever the window size", "[kineto_reader][windows]") {
  const std::string doc = TrickyDoc(120);
  const std::string whole = Dump(ParseWithWindow(doc, size_t{1} << 30));
  REQUIRE_THAT(whole, Catch::Contains("warning bad_arg_type 69 ") && Catch::Contains("tricky") &&
                          Catch::Contains("flow 115 "));
  // Every window size from 64 bytes to past the longest event, so that
  // windows end inside events at every kind of place.
  for (size_t window = 64; window < 4000; window += window < 600 ? 7 : 97) {
    INFO("window " << window);
    CHECK(Dump(ParseWithWindow(doc, window)) == whole);
  }
}

// A document of what a merge must map (TrickyDoc adds warnings and cut
// events): tracks first seen in later windows, text pids and tids, thread
// names written and overwritten, process names and labels, flows, kernels
// with args, new strings throughout.
std::string CleanDoc(int events) {
  std::string body;
  for (int i = 0; i < events; ++i) {
    if (i > 0) body += ",\n  ";
    const std::string n = std::to_string(i), ts = std::to_string(10 * i), tid = std::to_string(1 + i % 13);
    switch (i % 6) {
      case 0:
        body += R"j({"ph":"X","cat":"cpu_op","name":"op )j" + std::to_string(i % 17) + R"j(","pid":1,"tid":)j" + tid +
                R"j(,"ts":)j" + ts + R"j(,"dur":5,"args":{"External id":)j" + n +
                R"j(,"Input Dims":[[)j" + n + R"j(,8],[8,2]],"Input type":["float","c10::BFloat16"],"Sequence number":)j" +
                n + R"j(,"dtype":"type )j" + std::to_string(i % 7) + R"j(","cuda_sync_kind":"kind )j" +
                std::to_string(i % 11) + "\"}}";
        break;
      case 1:
        body += R"j({"ph":"X","cat":"kernel","name":"kernel )j" + std::to_string(i % 5) +
                R"j(","pid":0,"tid":)j" + std::to_string(7 + i % 3) + R"j(,"ts":)j" + ts +
                R"j(,"dur":3,"args":{"correlation":)j" + n + R"j(,"stream":7,"grid":[2,1,1],"block":[128,1,1],"device":0}})j";
        break;
      case 2:
        body += R"j({"ph":"f","cat":"ac2g","id":)j" + n + R"j(,"pid":1,"tid":)j" + tid + R"j(,"ts":)j" + ts +
                R"j(,"bp":"e"})j";
        break;
      case 3:
        body += R"j({"name":"thread_name","ph":"M","pid":1,"tid":)j" + tid + R"j(,"args":{"name":"thread )j" + n +
                R"j("}})j";
        break;
      case 4:
        body += R"j({"ph":"X","cat":"user_annotation","name":"span )j" + n + R"j(","pid":"Spans","tid":"lane )j" +
                std::to_string(i % 4) + R"j(","ts":)j" + ts + R"j(,"dur":2})j";
        break;
      default:
        body += i % 4 == 1 ? R"j({"name":"process_name","ph":"M","pid":)j" + std::to_string(i % 3) +
                                 R"j(,"tid":0,"args":{"name":"process )j" + n + R"j("}})j"
                           : R"j({"name":"thread_sort_index","ph":"M","pid":1,"tid":)j" + tid +
                                 R"j(,"args":{"sort_index":)j" + n + "}}";
        break;
    }
  }
  return "{\n  \"traceEvents\": [\n  " + body + "\n  ]\n}\n";
}

TEST_CASE("reader gives the same trace with windows parsed two at a time", "[kineto_reader][windows]") {
  for (const std::string& doc : {CleanDoc(400), TrickyDoc(120)}) {
    const std::string whole = Dump(ParseWithWindow(doc, size_t{1} << 30, /*parallel=*/false));
    for (size_t window = 64; window < 3000; window += window < 600 ? 11 : 131) {
      INFO("window " << window);
      CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/true)) == whole);
      CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/false)) == whole);
    }
  }
}

TEST_CASE("reader errors and limits come out the same with windows parsed two at a time", "[kineto_reader][windows]") {
  std::string events;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) events += ",\n";
    events += i == 250 ? R"j({"ph":"X","name":"a","ts":1,"dur":-4})j" : Op("op " + std::to_string(i));
  }
  ReadOptions options;
  options.max_events = 200;
  for (size_t window = 128; window < 2000; window += 37) {
    INFO("window " << window);
    options.window_bytes = window;
    options.parallel_window_bytes = window;
    for (bool parallel : {true, false}) {
      options.parallel_windows = parallel;
      CHECK(ErrorOf(KinetoDoc(events), options) == "t.json: more than 200 events");
    }
  }
  options.max_events = 1000;
  for (size_t window = 128; window < 2000; window += 37) {
    INFO("window " << window);
    options.window_bytes = window;
    options.parallel_window_bytes = window;
    options.parallel_windows = true;
    CHECK(ErrorOf(KinetoDoc(events), options) == "t.json: event 250: 'dur' is negative (-4 us)");
  }
}

namespace {

// The same document with no line break anywhere (json.dump without indent,
// minified traces): JSON strings hold no raw line break, so removing them
// changes no value.
std::string OneLine(std::string doc) {
  doc.erase(std::remove(doc.begin(), doc.end(), '\n'), doc.end());
  return doc;
}

}  // namespace

TEST_CASE("reader keeps what the helper parsed, its window read from the index a chunk at a time",
          "[kineto_reader][windows]") {
  // Two windows at a time, the helper's window is walked window_bytes at a
  // time; what it parsed is kept (not parsed again here: counted in
  // ReadStats::helper_windows) and is the same as a parse one window at a
  // time.
  for (const std::string& doc : {CleanDoc(400), TrickyDoc(200), OneLine(CleanDoc(400))}) {
    for (bool walk : {true, false}) {
      for (size_t piece : {size_t{64}, size_t{300}, size_t{4000}}) {
        ReadStats stats;
        ReadOptions options;
        options.window_bytes = piece;
        options.parallel_window_bytes = 4000;
        options.walk_index = walk;
        options.stats = &stats;
        INFO("walk " << walk << ", pieces of " << piece << "\n" << doc.substr(0, 400));
        auto two = ParseTraceText(doc, "w.json", options);
        REQUIRE(two.ok());
        CHECK(stats.helper_windows >= 3);
        // The windows of 4000 bytes were indexed a piece at a time (a piece
        // holds a few events; one shorter than an event is no piece).
        INFO("longest text indexed at once: " << stats.largest_walk_bytes);
        if (!walk) CHECK(stats.largest_walk_bytes == 0);
        if (walk && piece == 300) CHECK(stats.largest_walk_bytes <= 2 * piece);
        options.parallel_windows = false;
        options.window_bytes = 4000;
        options.stats = nullptr;
        auto one = ParseTraceText(doc, "w.json", options);
        REQUIRE(one.ok());
        CHECK(Dump(*two) == Dump(*one));
      }
    }
  }
}

TEST_CASE("reader parses what two at a time left at the input's end in windows of window_bytes",
          "[kineto_reader][windows]") {
  // Two at a time reads a window of parallel_window_bytes ahead; where that
  // meets the input's end, the rest is parsed window_bytes at a time, not
  // as one last window (scanned byte by byte for its close).
  const std::string doc = CleanDoc(400);
  REQUIRE(doc.size() > 20000);
  for (bool walk : {true, false}) {
    ReadStats stats;
    ReadOptions options;
    options.window_bytes = 1000;
    options.parallel_window_bytes = size_t{1} << 20;
    options.walk_index = walk;
    options.stats = &stats;
    auto two = ParseTraceText(doc, "w.json", options);
    REQUIRE(two.ok());
    INFO("walk " << walk << ", " << stats.windows << " windows, the longest " << stats.largest_window_bytes);
    CHECK(stats.windows > static_cast<int64_t>(doc.size() / 1000));
    CHECK(stats.largest_window_bytes <= 1000);
    options.parallel_windows = false;
    options.stats = nullptr;
    auto one = ParseTraceText(doc, "w.json", options);
    REQUIRE(one.ok());
    CHECK(Dump(*two) == Dump(*one));
    // With pairs formed before the end: what the last pair's read-ahead
    // leaves is parsed the same way.
    options.parallel_windows = true;
    options.parallel_window_bytes = 4000;
    stats = {};
    options.stats = &stats;
    auto pairs = ParseTraceText(doc, "w.json", options);
    REQUIRE(pairs.ok());
    CHECK(stats.helper_windows > 0);
    CHECK(Dump(*pairs) == Dump(*one));
  }
}

TEST_CASE("reader cuts text without line breaks between events into windows", "[kineto_reader][windows]") {
  for (const std::string& doc : {OneLine(CleanDoc(400)), OneLine(TrickyDoc(120))}) {
    REQUIRE(doc.find('\n') == std::string::npos);
    const std::string whole = Dump(ParseWithWindow(doc, size_t{1} << 30, /*parallel=*/false));
    for (size_t window = 64; window < 3000; window += window < 600 ? 11 : 131) {
      INFO("window " << window);
      CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/true)) == whole);
      CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/false)) == whole);
    }
  }
  // The windows stay near their size, as with line breaks: the text is not
  // parsed whole (which took a one-line 190 MB trace 4.5 times as long, and
  // memory for all of its text at once).
  const std::string doc = OneLine(CleanDoc(2000));
  for (bool parallel : {true, false}) {
    ReadStats stats;
    ReadOptions options;
    options.window_bytes = 256;
    options.parallel_window_bytes = 256;
    options.parallel_windows = parallel;
    options.stats = &stats;
    REQUIRE(ParseTraceText(doc, "w.json", options).ok());
    INFO("parallel " << parallel << ", " << stats.windows << " windows, the longest " << stats.largest_window_bytes);
    CHECK(stats.windows > static_cast<int64_t>(doc.size() / 512));
    CHECK(stats.largest_window_bytes <= 256);
  }
}

TEST_CASE("reader cuts no window past the end of a one-line events array", "[kineto_reader][windows]") {
  // What follows the events holds "},{" too (devices, a list of objects).
  std::string events;
  for (int i = 0; i < 60; ++i) events += (i > 0 ? "," : "") + Op("op" + std::to_string(i), std::to_string(i));
  std::string devices;
  for (int i = 0; i < 8; ++i) {
    devices += std::string(i > 0 ? "," : "") + R"j({"id":)j" + std::to_string(i) + R"j(,"name":"GPU )j" + std::to_string(i) +
               R"j(","numSms":80})j";
  }
  const std::string doc = KinetoDoc(events);
  const std::string with_devices =
      doc.substr(0, doc.size() - 1) + R"j(,"deviceProperties":[)j" + devices + R"j(],"other":[{"a":1},{"b":2}]})j";
  const std::string whole = Dump(ParseWithWindow(with_devices, size_t{1} << 30, /*parallel=*/false));
  REQUIRE_THAT(whole, Catch::Contains("device 7 GPU 7 80"));
  for (size_t window = 64; window < 1200; window += 7) {
    INFO("window " << window);
    CHECK(Dump(ParseWithWindow(with_devices, window, /*parallel=*/true)) == whole);
    CHECK(Dump(ParseWithWindow(with_devices, window, /*parallel=*/false)) == whole);
  }
}

TEST_CASE("reader never cuts a one-line text inside a string", "[kineto_reader][windows]") {
  // Every event's strings hold what looks like the space between two events,
  // after escaped quotes and before quotes that end a string after an
  // escaped backslash: only the quotes' count tells these apart.
  const std::vector<std::string> names = {
      R"j(x\"},{\"ph\":\"X\")j",  // x"},{"ph":"X"
      R"j(y\\)j",                  // y\ : the quote after it ends the string
      R"j(z\\\"} , {)j",          // z\"} , {
      R"j(},{},{)j",
  };
  std::string events;
  for (int i = 0; i < 300; ++i) {
    const std::string& name = names[static_cast<size_t>(i) % names.size()];
    events += (i > 0 ? ", " : "");
    events += R"j({"ph":"X","cat":"cpu_op","name":")j" + name + R"j(","pid":1,"tid":1,"ts":)j" +
              std::to_string(i) + R"j(,"dur":1,"args":{"Input type":[")j" + name + R"j("]}})j";
  }
  const std::string doc = KinetoDoc(events);
  REQUIRE(doc.find('\n') == std::string::npos);
  const Trace whole = ParseWithWindow(doc, size_t{1} << 30, /*parallel=*/false);
  REQUIRE(whole.events.size() == 300);
  CHECK(whole.Str(whole.events[0].name) == "x\"},{\"ph\":\"X\"");
  CHECK(whole.Str(whole.events[1].name) == "y\\");
  for (size_t window = 64; window < 1500; window += 13) {
    INFO("window " << window);
    CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/true)) == Dump(whole));
    CHECK(Dump(ParseWithWindow(doc, window, /*parallel=*/false)) == Dump(whole));
  }
  // A window whose every "},{" lies inside strings still parses: it grows
  // until it holds a cut.
  const std::string inside = R"j({"ph":"X","name":")j" + std::string(40, 'a');
  std::string crowded;
  for (int i = 0; i < 20; ++i) crowded += "},{";
  std::string many;
  for (int i = 0; i < 30; ++i) {
    many += (i > 0 ? "," : "") + inside + crowded + R"j(","ts":)j" + std::to_string(i) + R"j(,"dur":1})j";
  }
  const std::string crowded_doc = KinetoDoc(many);
  CHECK(Dump(ParseWithWindow(crowded_doc, 64)) == Dump(ParseWithWindow(crowded_doc, size_t{1} << 30)));
}

TEST_CASE("reader windows give a real trace unchanged", "[kineto_reader][windows]") {
  const std::string path = daydream::testing::SharedTracePath(
      "hta-v100-1rank/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  ReadOptions whole, small;
  whole.window_bytes = size_t{1} << 32;
  whole.parallel_window_bytes = size_t{1} << 32;
  small.window_bytes = 4096;
  small.parallel_window_bytes = 4096;
  auto a = ReadTraceFile(path, whole);
  auto b = ReadTraceFile(path, small);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->events.size() > 10000);
  CHECK(Dump(*a) == Dump(*b));
}

TEST_CASE("reader errors in a later window name the event and the byte in the file", "[kineto_reader][windows]") {
  std::string events;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) events += ",\n";
    events += i == 250 ? R"j({"ph":"X","name":"a","ts":1,"dur":-4})j" : Op();
  }
  ReadOptions options;
  options.window_bytes = 256;
  options.parallel_window_bytes = 256;
  CHECK(ErrorOf(KinetoDoc(events), options) == "t.json: event 250: 'dur' is negative (-4 us)");
  // Malformed JSON deep in the file: the offset is the file's, not the window's.
  std::string broken = KinetoDoc(events);
  const size_t at = broken.find(R"("dur":-4)");
  broken.replace(at, 8, R"("dur" -4)");
  const std::string msg = ErrorOf(broken, options);
  CHECK_THAT(msg, Catch::StartsWith("t.json: event 250: "));
  const size_t byte_at = msg.find("at byte ");
  REQUIRE(byte_at != std::string::npos);
  const size_t byte = std::stoul(msg.substr(byte_at + 8));
  CHECK(byte >= at);
  CHECK(byte <= at + 8);
}

TEST_CASE("reader refuses a file truncated after many windows", "[kineto_reader][windows]") {
  std::string events;
  for (int i = 0; i < 300; ++i) events += (i > 0 ? ",\n" : "") + Op();
  const std::string doc = KinetoDoc(events);
  ReadOptions options;
  options.window_bytes = 256;
  options.parallel_window_bytes = 256;
  for (size_t cut : {doc.size() - 1, doc.size() - 2, doc.size() / 2, doc.size() / 2 + 1}) {
    INFO("cut at " << cut);
    CHECK_THAT(ErrorOf(doc.substr(0, cut), options),
               Catch::Contains("truncated") && Catch::Contains("(" + std::to_string(cut) + " bytes read)"));
  }
  CHECK_THAT(ErrorOf(doc + "\n{}", options),
             Catch::Contains("unexpected text after the end of the JSON document at byte " +
                             std::to_string(doc.size() + 1)));
}

TEST_CASE("reader refuses invalid JSON that a window's cut could hide", "[kineto_reader][windows]") {
  ReadOptions options;
  options.window_bytes = 64;
  options.parallel_window_bytes = 64;
  const std::string a = Op(), b = Op("b");
  // A comma before the first event, two commas, a closed array followed by more events.
  CHECK_THAT(ErrorOf("[\n,\n" + a + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf("[" + a + ",,\n" + b + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf("[" + a + "],\n" + b + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf(R"({"traceEvents":[)" + a + "],\n" + b + "]}", options), Catch::StartsWith("t.json: "));
  // The same on one line.
  CHECK_THAT(ErrorOf("[," + a + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf("[" + a + ",," + b + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf("[" + a + "]," + b + "]", options), Catch::StartsWith("t.json: "));
  CHECK_THAT(ErrorOf(R"({"traceEvents":[)" + a + "]," + b + "]}", options), Catch::StartsWith("t.json: "));
  // A raw line break inside a string.
  CHECK_THAT(ErrorOf("[" + a + ",\n" + R"({"ph":"X","name":"x,
{","ts":1,"dur":1})" + "]", options), Catch::StartsWith("t.json: "));
}

TEST_CASE("reader refuses a malformed top-level object, naming what it expected and where", "[kineto_reader][errors]") {
  CHECK(ErrorOf(R"({"schemaVersion" 1, "traceEvents": []})") ==
        "t.json: the JSON is malformed at byte 17: expected ':', found '1, \"traceEvents\"'");
  CHECK(ErrorOf(R"({"traceEvents": [)" + Op() + R"(] "x": 1})") ==
        "t.json: the JSON is malformed at byte " + std::to_string(19 + Op().size()) +
            ": expected ',' or '}', found '\"x\": 1}'");
  CHECK_THAT(ErrorOf(R"({1: 2})"), Catch::StartsWith("t.json: the JSON is malformed at byte 1: expected a member name"));
  // A member daydream skips is still checked to close and to be UTF-8.
  CHECK_THAT(ErrorOf(R"({"other": [1, 2)"), Catch::Contains("truncated"));
  CHECK(ErrorOf("{\"other\": \"\xff\", \"traceEvents\": [" + Op() + "]}") == "t.json: the text is not valid UTF-8");
  CHECK(ErrorOf("{\"\xff\": 1, \"traceEvents\": [" + Op() + "]}") == "t.json: the text is not valid UTF-8");
  // ... however small the window (a skipped member longer than it was once
  // dropped unchecked as it was read: found by the fuzzer's window check).
  ReadOptions small;
  small.window_bytes = 64;
  small.parallel_window_bytes = 64;
  CHECK(ErrorOf("{\"other\": [\"" + std::string(300, 'x') + "\xff\"], \"traceEvents\": [" + Op() + "]}", small) ==
        "t.json: the text is not valid UTF-8");
}

// --- checking what On-Demand skips -------------------------------------------

TEST_CASE("JsonValueErrorAt accepts one JSON value of any kind", "[kineto_reader][json_check]") {
  for (const char* text : {"0", "-0", "12", "-3.25", "1e9", "1.5E-3", "2e+7", "true", "false", "null", "\"\"",
                           "\"a \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9\"", "[]", "{}", " [ 1 , [2, [ ]], {\"a\":[]} ] ",
                           "{\"a\": {\"b\": [null, true, \"x\"]}, \"c\": -1}", "[[[[[[[[[[]]]]]]]]]]", "\n\t1\r\n"}) {
    INFO(text);
    CHECK(JsonValueErrorAt(text) == std::string_view::npos);
  }
}

TEST_CASE("JsonValueErrorAt names where a value stops being JSON", "[kineto_reader][json_check]") {
  const std::vector<std::pair<std::string, size_t>> cases = {
      {"", 0},            // nothing
      {"   ", 3},         // only blanks
      {"[1 2]", 3},       // no comma
      {"[1,]", 3},        // a comma before the close
      {"[\"r\":62]", 4},  // a colon in an array
      {"{\"x\" 1}", 5},   // no colon
      {"{\"x\":1,}", 7},  // a comma before the close
      {"{1:2}", 1},       // a key that is not a string
      {"[1}", 2},         // the wrong close
      {"[[1]", 4},        // never closed
      {"nul", 0},         // not a literal
      {"truex", 4},       // a literal running on
      {"1x", 1},          // a number running on
      {"01", 1},          // a leading zero
      {"-", 0},           // no digits
      {"1.", 0},          // no fraction digits
      {"1e", 0},          // no exponent digits
      {".5", 0},          // no integer part
      {"\"a\\x\"", 0},    // an unknown escape
      {"\"\\u12g4\"", 0}, // a bad \u
      {"\"a\tb\"", 0},    // a raw control character
      {"\"abc", 0},       // no closing quote
      {"1 2", 2},         // text after the value
      {"[]]", 2},         // a close too many
  };
  for (const auto& [text, at] : cases) {
    INFO(text);
    CHECK(JsonValueErrorAt(text) == at);
  }
}

TEST_CASE("reader refuses malformed JSON in values it does not read", "[kineto_reader][errors][json_check]") {
  // simdjson's On-Demand parser skips what it is not asked for without
  // checking it (counting brackets); each of these was read as a valid trace
  // before. The error
  // names the event, the field and the byte where the JSON goes wrong (the
  // first byte of `bad`, found in the document itself).
  struct Case {
    std::string extra, field, bad;
  };
  const std::vector<Case> cases = {
      {R"j("args":{"Input Strides":[[1 2]]})j", "Input Strides", "2]]"},
      {R"j("args":{"Concrete Inputs":["r":62]})j", "Concrete Inputs", ":62"},
      {R"j("bp":{"x" 1})j", "bp", "1}"},
      {R"j("args":{"correlation": ame})j", "correlation", "ame"},
      {R"j("args":{"correlation": 1x})j", "correlation", "x}"},
      {R"j("args":{"Input Dims":[[1,2] [3]]})j", "Input Dims", "[3]"},
      {R"j("args":{"grid":[1, 2 3]})j", "grid", "3]"},
      {R"j("args":{"grid":[1, "x" 3]})j", "grid", "3]"},
  };
  for (const Case& c : cases) {
    const std::string doc =
        KinetoDoc(R"j({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1,)j" + c.extra + "}");
    INFO(doc);
    const std::string error = ErrorOf(doc);
    CHECK_THAT(error, Catch::StartsWith("t.json: event 0: '" + c.field + "': the JSON is ") &&
                          Catch::EndsWith("malformed at byte " + std::to_string(doc.rfind(c.bad))));
  }
  const std::string top = R"j({"foo":[1 2],"traceEvents":[)j" + Op() + "]}";
  CHECK(ErrorOf(top) == "t.json: the JSON is malformed at byte " + std::to_string(top.find("2]")) +
                            " (in the top-level member \"foo\")");
  const std::string devices = KinetoDoc(Op(), R"j("deviceProperties":[{"id":0,"regsPerBlock":6 5}])j");
  CHECK(ErrorOf(devices) == "t.json: the JSON is malformed at byte " + std::to_string(devices.find("5}")) +
                                " (in the top-level member \"deviceProperties\")");
  // A scalar daydream does not read is not checked: skipping it passes one
  // token and hides nothing else (checking them all cost 7% of the parse).
  CHECK(ParseTraceText(KinetoDoc(Op("a", "1", "1").insert(1, R"j("bp": nul,)j")), "t.json").ok());
  // Well-formed values of any kind stay accepted and ignored.
  auto ok = ParseTraceText(
      KinetoDoc(R"j({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"bp":{"x":[1,{"y":null}]},)j"
                R"j("args":{"Input Strides":[[1,2],[]],"grid":[1,"x",3],"block":[2.5,1],"correlation":1.5}})j"),
      "t.json");
  REQUIRE(ok.ok());
  CHECK(ok->Detail(OnlyEvent(*ok)).grid_blocks == kUnset);
  CHECK(ok->Detail(OnlyEvent(*ok)).block_threads == kUnset);
  CHECK(OnlyEvent(*ok).correlation == kUnset);
}

TEST_CASE("reader windows refuse a string followed by ':', or no value, whatever closes after it",
          "[kineto_reader][windows]") {
  // On-Demand takes a string it was not asked to read for a key when a ':'
  // follows it: passing over "x":1} it ate the '}' that closes the object,
  // so with a stray '}' after it a window parsed on as if nothing was wrong,
  // where a parse of the whole text refused it (the fuzzer found the first
  // of these). Every field the reader reads from its raw token, and every
  // string it passes over, must refuse it in every window.
  const std::string next = R"({"ph":"X","name":"b","ts":4,"dur":44,"pid":1,"tid":1})";
  const std::string op = R"("ph":"X","name":"b","ts":4,"dur":44,"pid":1,"tid":1)";
  const std::string docs[] = {
      std::string("[{\"ph\":\"M\":\x01}},{\"ph\":\"X\",\"t\":\"\",\"name\":\"\",\"\":21,\"ts\":4,\"dur\":44}]"),
      "[{" + op + R"(,"ph":"X":1}},)" + next + "]",
      R"([{"ph":"M":1}},)" + next + "]",
      R"([{"ph":"s","name":"x":1}},)" + next + "]",
      "[{" + op + R"(,"args":{"foo":"x":1}}},)" + next + "]",
      "[{" + op + R"(,"args":{"dtype":"x":1}}},)" + next + "]",
      "[{" + op + R"(,"args":{"grid":["a":1]]}},)" + next + "]",
      "[{" + op + R"(,"args":{"Input Dims":["a":1]]}},)" + next + "]",
      R"({"traceEvents":[{)" + op + R"(,"args":{"foo":"x":1}}},)" + next + "]}",
      // No value where one should be: On-Demand skips the ':' or ',' there
      // as structure (the fuzzer found the first).
      R"([{"ph":"M","":: ,}},)" + next + "]",
      "[{" + op + R"(,"foo":,"a":1}},)" + next + "]",
      "[{" + op + R"(,"args"::1}},)" + next + "]",
      "[{" + op + R"(,"args":{"foo"::1}}},)" + next + "]",
      "[{" + op + R"(,"args":"x":1}},)" + next + "]",
  };
  for (const std::string& doc : docs) {
    for (size_t window : {size_t{64}, size_t{100}, size_t{1} << 30}) {
      for (bool parallel : {false, true}) {
        ReadOptions options;
        options.window_bytes = window;
        options.parallel_window_bytes = window;
        options.parallel_windows = parallel;
        INFO(doc << "\nwindow " << window << ", parallel " << parallel);
        auto trace = ParseTraceJson(doc, "t.json", options);
        REQUIRE_FALSE(trace.ok());
        CHECK(absl::IsInvalidArgument(trace.status()));
      }
    }
  }
}

namespace {

// The trace a read gives (its Dump), or its error; the events read from the
// structural index in `*indexed`. Windows of `window` bytes; with `chunk`
// (not 0), windows of `chunk` one at a time, and two at a time windows of
// `window` read from the index `chunk` at a time.
std::string ReadWalking(const std::string& doc, size_t window, bool parallel, bool walk, int64_t* indexed = nullptr,
                        size_t chunk = 0) {
  ReadStats stats;
  ReadOptions options;
  options.window_bytes = chunk != 0 ? chunk : window;
  options.parallel_window_bytes = window;
  options.parallel_windows = parallel;
  options.walk_index = walk;
  options.stats = &stats;
  auto trace = ParseTraceText(doc, "t.json", options);
  if (indexed != nullptr) *indexed = stats.indexed_events;
  return trace.ok() ? Dump(*trace) : "error: " + std::string(trace.status().message());
}

// Events read the same whether from the structural index or by On-Demand:
// every field and arg the reader reads, in the forms real traces write them
// (blanks around tokens and after arrays, numbers in strings, null, text
// pids, duplicate keys, UTF-8, values it passes over of every kind).
const char* const kPlainEvents[] = {
    R"j({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 3.25, "args": {"External id": 7, "Sequence number": 3, "Input Dims": [[4, 8], [8, 2]] , "Input type": ["float", "float"], "Ev Idx": 5}})j",
    R"j({"ph":"X","cat":"kernel","name":"void k<float>(float*)","pid":0,"tid":7,"ts":12.001,"dur":1.5,"args":{"correlation":44,"stream":7,"device":0,"grid":[2, 1, 1],"block":[128,1,1],"registers per thread":32,"est. achieved occupancy %":0.5}})j",
    R"j({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":11,"dur":2,"args":{"correlation":"44","External id":null,"device":null,"cbid":211}})j",
    R"j({"ph":"s","id":44,"pid":1,"tid":1,"ts":11,"cat":"ac2g","name":"ac2g"})j",
    R"j({"ph":"f","id":44,"pid":0,"tid":7,"ts":12,"cat":"ac2g","name":"ac2g","bp":"e"})j",
    R"j({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"python main"}})j",
    R"j({"name":"thread_sort_index","ph":"M","pid":1,"tid":1,"args":{"sort_index":3}})j",
    R"j({"name":"process_labels","ph":"M","pid":0,"args":{"labels":"GPU 0"}})j",
    R"j({"ph":"i","s":"t","name":"mark","pid":1,"tid":1,"ts":13})j",
    R"j({"ph":"X","name":"span","pid":"Spans","tid":"PyTorch Profiler","ts":1,"dur":100,"cat":"Trace"})j",
    R"j({"ph":"X","name":"text ids","pid":"12","tid":"-3","ts":2,"dur":1})j",
    R"j({"ph":"X","cat":"user_annotation","name":"café ☕","pid":1,"tid":2,"ts":14,"dur":1,"bp":{"a":[1,{"b":[]}],"c":{}},"args":{}})j",
    R"j({"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":7,"ts":15,"dur":2,"args":{"bytes":4096,"Bytes":8,"wait_on_stream":3,"wait_on_cuda_event_record_corr_id":12,"In msg nelems":10,"dtype":"Float","cuda_sync_kind":"Stream Wait Event","flag":true,"none":null,"neg":-1.5e3,"s":"x"}})j",
    R"j({ "ph" : "X" , "name" : "dup" , "ts" : 1 , "ts" : 2 , "dur" : 1 , "pid" : 1 , "tid" : 1 })j",
    R"j({"ph":"X","name":"times","pid":1,"tid":1,"ts":1.23456,"dur":1e2,"args":{"Input Dims":"none","Input type":{"a":1}}})j",
    R"j({"ph":"X","name":"text id","pid":1,"tid":1,"ts":-5,"dur":0,"id":"text-id","args":{"grid":[],"block":[ 4 ]}})j",
    R"j({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":3,"ts":20,"dur":1,"args":{"Input Dims":[[4, 8], [8, 2]] , "Input type":["float", "float"]}})j",
};

// Events the index walk gives over to On-Demand: escapes, fields that warn,
// a phase daydream does not read.
const char* const kOddEvents[] = {
    R"j({"ph":"X","name":"a\"b\u00e9","pid":1,"tid":1,"ts":1,"dur":1})j",
    R"j({"ph":"X","n\u0061me":"escaped key","name":"n","pid":1,"tid":1,"ts":1,"dur":1})j",
    R"j({"ph":"X","name":"bad args","pid":1,"tid":1,"ts":1,"dur":1,"args":5})j",
    R"j({"ph":"X","name":"bad arg types","pid":1,"tid":1,"ts":1,"dur":1,"args":{"correlation":1.5,"dtype":3,"stream":true,"grid":[1,"x",3]}})j",
    R"j({"ph":"Q","name":"unknown phase","pid":1,"tid":1,"ts":1})j",
    R"j({"ph":"s","name":"flow without id","pid":1,"tid":1,"ts":1})j",
    R"j({"ph":"X","name":"tab\tin name","pid":1,"tid":1,"ts":1,"dur":1})j",
};

// `sep` between events: a line break and blanks, as Kineto writes them, or
// a bare ',' (json.dump with separators=(",", ":")).
std::string JoinEvents(const std::vector<std::string>& events, std::string_view sep = ",\n  ") {
  std::string body;
  for (const std::string& e : events) {
    if (!body.empty()) body += sep;
    body += e;
  }
  return KinetoDoc(body);
}

}  // namespace

TEST_CASE("reader reads plain events from the structural index as On-Demand reads them", "[kineto_reader][windows]") {
  std::vector<std::string> plain;
  for (int i = 0; i < 60; ++i) plain.push_back(kPlainEvents[i % std::size(kPlainEvents)]);
  std::vector<std::string> mixed = plain;
  for (size_t i = 0; i < std::size(kOddEvents); ++i) mixed.insert(mixed.begin() + 7 * (i + 1), kOddEvents[i]);
  for (const std::string& doc :
       {JoinEvents(plain), JoinEvents(mixed), OneLine(JoinEvents(mixed)), JoinEvents(mixed, ","), TrickyDoc(60)}) {
    for (size_t window : {size_t{64}, size_t{100}, size_t{300}, size_t{1000}, size_t{1} << 30}) {
      for (size_t chunk : {size_t{64}, size_t{250}, size_t{0}}) {  // 0: window_bytes is the window
        for (bool parallel : {false, true}) {
          INFO(doc << "\nwindow " << window << ", chunk " << chunk << ", parallel " << parallel);
          int64_t indexed = -1;
          const std::string walked = ReadWalking(doc, window, parallel, true, &indexed, chunk);
          CHECK_THAT(walked, !Catch::StartsWith("error"));
          CHECK(walked == ReadWalking(doc, window, parallel, false, nullptr, chunk));
          if (window == 300 && chunk == 0 && doc.size() > 4000) CHECK(indexed > 0);
        }
      }
    }
  }
  // All but the last window's events come from the index, and none when the
  // walk is off.
  const std::string doc = JoinEvents(plain);
  int64_t indexed = -1;
  ReadWalking(doc, 300, /*parallel=*/false, /*walk=*/true, &indexed);
  CHECK(indexed >= 50);
  ReadWalking(doc, 300, /*parallel=*/false, /*walk=*/false, &indexed);
  CHECK(indexed == 0);
  // Windows two at a time read from the index in chunks (cut between
  // events, as windows are) give the walk every event that windows read at
  // once give it: all but the last.
  int64_t whole = -1;
  ReadWalking(doc, 2000, /*parallel=*/true, /*walk=*/true, &whole);
  CHECK(whole == 59);
  for (size_t chunk : {size_t{64}, size_t{250}, size_t{700}}) {
    INFO("chunk " << chunk);
    ReadWalking(doc, 2000, /*parallel=*/true, /*walk=*/true, &indexed, chunk);
    CHECK(indexed == whole);
  }
}

TEST_CASE("reader reads the last window's events but its last from the index", "[kineto_reader][windows]") {
  // A trace shorter than a window is all last window: its events up to the
  // last cut between two of them are read from the index too.
  std::vector<std::string> plain;
  for (int i = 0; i < 30; ++i) plain.push_back(kPlainEvents[i % std::size(kPlainEvents)]);
  std::string bare = "[" + JoinEvents(plain).substr(std::string(R"({"traceEvents":[)").size());
  bare.pop_back();  // the object's '}'
  // Members after the events, one with a cut-like ",\n{" in it.
  std::string after_doc = JoinEvents(plain);
  after_doc.pop_back();
  after_doc += ",\n\"deviceProperties\":[{\"id\":0},\n{\"id\":1}],\"traceName\":\"t\"}";
  for (const std::string& doc : {JoinEvents(plain), bare, after_doc, OneLine(JoinEvents(plain))}) {
    for (bool parallel : {false, true}) {
      INFO(doc << "\nparallel " << parallel);
      int64_t indexed = -1;
      const std::string walked = ReadWalking(doc, size_t{1} << 30, parallel, true, &indexed);
      CHECK_THAT(walked, !Catch::StartsWith("error"));
      CHECK(walked == ReadWalking(doc, size_t{1} << 30, parallel, false));
      CHECK(indexed == 29);
    }
  }
  // Not where the text never closes: every failure there reads as
  // truncation, which On-Demand words.
  std::string truncated = JoinEvents(plain);
  truncated.resize(truncated.size() - 2);
  int64_t indexed = -1;
  const std::string error = ReadWalking(truncated, size_t{1} << 30, false, true, &indexed);
  CHECK_THAT(error, Catch::StartsWith("error: t.json: ") && Catch::Contains("truncated"));
  CHECK(error == ReadWalking(truncated, size_t{1} << 30, false, false));
  CHECK(indexed == 0);
}

TEST_CASE("reader errors come out the same whether events are read from the index or not", "[kineto_reader][windows]") {
  const std::string bad[] = {
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":-4})j",
      R"j({"name":"no phase","pid":1,"tid":1,"ts":1,"dur":1})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1.5,"ts":1,"dur":1})j",
      R"j({"ph":"X","name":"a" "pid":1,"tid":1,"ts":1,"dur":1})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"x":[1 2]}})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":"1","dur":1})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"Input Dims":[[1,2] [3]]}})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"foo":"x":1}}})j",
      R"j({"ph":"XY","name":"a","pid":1,"tid":1,"ts":1,"dur":1})j",
      R"j({"ph":"X","name":"a","pid":1,"tid":1,"ts":1e400,"dur":1})j",
      R"j(["not", "an", "event"])j",
      R"j(17)j",
  };
  for (const std::string& b : bad) {
    std::vector<std::string> events;
    for (int i = 0; i < 40; ++i) events.push_back(i == 30 ? b : kPlainEvents[i % std::size(kPlainEvents)]);
    const std::string doc = JoinEvents(events);
    for (size_t window : {size_t{64}, size_t{100}, size_t{300}, size_t{1000}, size_t{1} << 30}) {
      for (size_t chunk : {size_t{64}, size_t{250}, size_t{0}}) {  // 0: window_bytes is the window
        for (bool parallel : {false, true}) {
          INFO(b << "\nwindow " << window << ", chunk " << chunk << ", parallel " << parallel);
          const std::string walked = ReadWalking(doc, window, parallel, true, nullptr, chunk);
          CHECK_THAT(walked, Catch::StartsWith("error: t.json: "));
          CHECK(walked == ReadWalking(doc, window, parallel, false, nullptr, chunk));
        }
      }
    }
  }
  // The event limit, in the middle of a window.
  std::vector<std::string> events(50, kPlainEvents[1]);
  ReadOptions options;
  options.max_events = 33;
  options.window_bytes = 1000;
  options.parallel_window_bytes = 1000;
  for (bool walk : {true, false}) {
    options.walk_index = walk;
    CHECK(ErrorOf(JoinEvents(events), options) == "t.json: more than 33 events");
  }
  // A string limit that refuses even the first phase letter.
  ReadOptions tiny;
  tiny.max_string_bytes = 0;
  tiny.window_bytes = 300;
  tiny.parallel_window_bytes = 300;
  tiny.walk_index = false;
  const std::string refused = ErrorOf(JoinEvents(events), tiny);
  CHECK_THAT(refused, Catch::Contains("'ph'"));
  tiny.walk_index = true;
  CHECK(ErrorOf(JoinEvents(events), tiny) == refused);
}
