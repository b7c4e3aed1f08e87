#!/usr/bin/env bash
# Builds daydream_bench (Release) into build/bench and runs it on
#   1. the largest shared trace (../shared/traces/tracelens-nvidia/h100-hf-inference/
#      google_owlv2-large-patch14-ensemble__1016001.json.gz), and
#   2. a generated ~1M-event trace (benchmarks/out/big_1m.json.gz, made once by
#      benchmarks/make_big_trace.py from shared/traces/hta-v100-1rank).
# For each trace it runs every benchmark in one process (results in
# benchmarks/out/bench_<name>.json), then BM_ReadTraceFile and BM_BuildGraph alone in
# fresh processes, whose peak_rss_MB is the peak memory of file -> Trace and of
# file -> Trace -> Graph (benchmarks/out/rss_<name>_<stage>.json). Finally it prints a
# summary table, with BM_LoadJob on job8 (8 ranks of 250k events, benchmarks/out/job8, generated
# once; not with TRACES=...). Last, benchmarks/e2e_bench.py times `daydream replay` as a whole process
# next to HolisticTraceAnalysis loading the same files, and a directory of 8 ranks as one job
# (benchmarks/out/job8, generated once; not with TRACES=...) (benchmarks/out/e2e.json; it makes
# benchmarks/.venv-hta the first time). Then benchmarks/search_bench.py times a what-if search
# (100 predictions from one graph, daydream.predict_many) on big_1m and big_2m (a 1.0M-task
# graph, generated once), in the daydream venv (benchmarks/out/search.json).
#
# Environment:
#   MIN_TIME=1     seconds per benchmark (google-benchmark --benchmark_min_time)
#   REPS=1         repetitions (with REPS>1 the summary shows the medians)
#   BIG_EVENTS=1000000  size of the generated trace
#   TRACES="name=path ..."  benchmark these traces instead of the two above
#   SKIP_BUILD=1   use the existing build/bench/daydream_bench
#   SKIP_E2E=1     skip the end-to-end / HTA comparison (it needs the daydream CLI: make install)
#   E2E_REPS=3     rounds of the end-to-end comparison
#   E2E_ARGS="..."  extra arguments for e2e_bench.py (e.g. --doc docs/performance.md --with-10m)
#   SKIP_SEARCH=1  skip the what-if search (it needs the daydream module: make install)
#   SEARCH_ARGS="..."  extra arguments for search_bench.py (e.g. --doc docs/performance.md)
# Extra arguments go to daydream_bench (e.g. --benchmark_filter=Parse).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=build/bench
OUT=benchmarks/out
MIN_TIME=${MIN_TIME:-1}
REPS=${REPS:-1}
BIG_EVENTS=${BIG_EVENTS:-1000000}
DEFAULT_TRACE=../shared/traces/tracelens-nvidia/h100-hf-inference/google_owlv2-large-patch14-ensemble__1016001.json.gz
BIG_TRACE=$OUT/big_1m.json.gz

mkdir -p "$OUT"

if [[ "${SKIP_E2E:-0}" != 1 ]] && [[ ! -x .venv/bin/daydream ]] && ! command -v daydream > /dev/null; then
  echo "run_bench.sh: the end-to-end comparison needs the daydream CLI: run \`make install\` first," \
    "or SKIP_E2E=1 to skip it" >&2
  exit 1
fi

if [[ "${SKIP_SEARCH:-0}" != 1 ]] && ! .venv/bin/python -c "import daydream._core" 2> /dev/null; then
  echo "run_bench.sh: the what-if search needs the daydream module in .venv: run \`make install\` first," \
    "or SKIP_SEARCH=1 to skip it" >&2
  exit 1
fi

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DDAYDREAM_BUILD_BENCHMARKS=ON -DDAYDREAM_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD_DIR" --target daydream_bench
fi
BENCH=$BUILD_DIR/daydream_bench
[[ -x "$BENCH" ]] || { echo "run_bench.sh: $BENCH was not built" >&2; exit 1; }

DEFAULT_TRACES=0
if [[ -z "${TRACES:-}" ]]; then
  DEFAULT_TRACES=1
  if [[ ! -f "$DEFAULT_TRACE" ]]; then
    echo "run_bench.sh: $DEFAULT_TRACE not found (shared/ must sit beside the checkout)" >&2
    exit 1
  fi
  if [[ ! -f "$BIG_TRACE" ]]; then
    echo "== generating $BIG_TRACE ($BIG_EVENTS events)"
    python3 benchmarks/make_big_trace.py --events "$BIG_EVENTS" --out "$BIG_TRACE"
  fi
  TRACES="owlv2=$DEFAULT_TRACE big_1m=$BIG_TRACE"
fi

echo "== machine: $(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p')"

results=()
for spec in $TRACES; do
  name=${spec%%=*}
  trace=${spec#*=}
  echo
  echo "== $name: $trace"
  DAYDREAM_BENCH_TRACE=$trace "$BENCH" \
    --benchmark_min_time="$MIN_TIME" --benchmark_repetitions="$REPS" \
    --benchmark_out="$OUT/bench_$name.json" --benchmark_out_format=json "$@"
  results+=("$OUT/bench_$name.json")
  for stage in ReadTraceFile BuildGraph; do
    # One iteration in a fresh process: its peak RSS is what the stage needs.
    DAYDREAM_BENCH_TRACE=$trace "$BENCH" --benchmark_filter="^BM_${stage}/" \
      --benchmark_min_time=0.000001 --benchmark_out="$OUT/rss_${name}_${stage}.json" \
      --benchmark_out_format=json > /dev/null
    results+=("$OUT/rss_${name}_${stage}.json")
  done
done

if [[ "$DEFAULT_TRACES" == 1 ]]; then
  # A job: 8 ranks of 250k events (.json.gz), read one file at a time and as LoadJob does.
  JOB=$OUT/job8
  if [[ $(find "$JOB" -name '*.json.gz' 2> /dev/null | wc -l) -ne 8 ]]; then
    echo "== generating $JOB (8 ranks x 250000 events)"
    python3 benchmarks/make_big_trace.py --events 250000 --ranks 8 --gzip --out "$JOB"
  fi
  echo
  echo "== job8: $JOB"
  DAYDREAM_BENCH_JOB=$JOB "$BENCH" --benchmark_filter='^BM_LoadJob/' \
    --benchmark_min_time="$MIN_TIME" --benchmark_repetitions="$REPS" \
    --benchmark_out="$OUT/bench_job8.json" --benchmark_out_format=json
  results+=("$OUT/bench_job8.json")
fi

echo
echo "== summary (rates of the median run; peak RSS of one process)"
python3 - "${results[@]}" <<'PY'
import json, os, sys

def fmt_rate(v, unit):
    if v is None:
        return ""
    if v >= 1e6:
        return "%.2f M%s" % (v / 1e6, unit)
    return "%.1f k%s" % (v / 1e3, unit)

rows = []
for path in sys.argv[1:]:
    with open(path) as f:
        data = json.load(f)
    base = os.path.basename(path)[:-5]
    runs = [b for b in data["benchmarks"] if b.get("run_type") != "aggregate"
            or b.get("aggregate_name") == "median"]
    if any(b.get("aggregate_name") == "median" for b in runs):
        runs = [b for b in runs if b.get("aggregate_name") == "median"]
    for b in runs:
        if b.get("error_occurred"):
            rows.append((base, b["name"], "error: " + b.get("error_message", ""), "", "", "", "", ""))
            continue
        ms = b["real_time"] if b.get("time_unit") == "ms" else b["real_time"] / 1e6
        mbs = b.get("bytes_per_second")
        name = b["run_name"] if "run_name" in b else b["name"]
        # BM_BuildGraph counts every thread's CPU time (its cycle check runs on a second one).
        cpu = b["cpu_time"] if b.get("time_unit") == "ms" else b["cpu_time"] / 1e6
        rows.append((base, name, "%.2f ms" % ms, "%.2f ms" % cpu if "/process_time" in name else "",
                     "%.1f MB/s" % (mbs / 1e6) if mbs else "",
                     fmt_rate(b.get("events/s"), "ev/s"), fmt_rate(b.get("tasks/s"), "tasks/s"),
                     "%.0f MiB" % b["peak_rss_MB"] if "peak_rss_MB" in b else ""))
header = ("file", "benchmark", "time", "CPU, all threads", "bytes", "events", "tasks", "peak RSS")
widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
for r in [header] + rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
PY

if [[ "${SKIP_E2E:-0}" != 1 ]]; then
  echo
  echo "== end to end: daydream replay vs HolisticTraceAnalysis (SKIP_E2E=1 skips)"
  e2e_traces=()
  for spec in $TRACES; do e2e_traces+=(--trace "$spec"); done
  # By default also a job: 8 ranks of 250k events (benchmarks/out/job8, made once), read as a whole.
  if [[ "$DEFAULT_TRACES" == 1 ]]; then e2e_traces+=(--with-job); fi
  # shellcheck disable=SC2086  # E2E_ARGS is a list of words
  python3 benchmarks/e2e_bench.py --reps "${E2E_REPS:-3}" "${e2e_traces[@]}" ${E2E_ARGS:-}
fi

if [[ "${SKIP_SEARCH:-0}" != 1 ]]; then
  echo
  echo "== what-if search: predict_many over 100 variants (SKIP_SEARCH=1 skips)"
  # shellcheck disable=SC2086  # SEARCH_ARGS is a list of words
  .venv/bin/python benchmarks/search_bench.py ${SEARCH_ARGS:-}
fi
