#!/usr/bin/env bash
# Checks that an optimization left every stage's output unchanged: runs
# `daydream_bench --check` (digests of the Trace, Graph, Schedule, ReplayReport,
# predict-loop variants and a Predict; see benchmarks/core_bench.cc) on every
# trace in ../shared/traces, on tests/data/passes and on benchmarks/out/big_1m.json.gz,
# and compares the lines with a saved reference.
#
#   benchmarks/check_outputs.sh --save   # record benchmarks/out/check_reference.txt (before a change)
#   benchmarks/check_outputs.sh          # compare with it (after); exit 1 on any difference
#
# Environment: BENCH=build/bench/daydream_bench (built by run_bench.sh);
# REFERENCE=benchmarks/out/check_reference.txt.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH=${BENCH:-build/bench/daydream_bench}
REFERENCE=${REFERENCE:-benchmarks/out/check_reference.txt}
[[ -x "$BENCH" ]] || { echo "check_outputs.sh: $BENCH not built (benchmarks/run_bench.sh builds it)" >&2; exit 1; }

mapfile -t traces < <(find ../shared/traces tests/data/passes examples/traces -type f \
  \( -name '*.json' -o -name '*.json.gz' \) 2>/dev/null | LC_ALL=C sort)
[[ -f benchmarks/out/big_1m.json.gz ]] && traces+=(benchmarks/out/big_1m.json.gz)

mkdir -p benchmarks/out
current=$(mktemp)
trap 'rm -f "$current"' EXIT
"$BENCH" --check "${traces[@]}" > "$current"

if [[ "${1:-}" == --save ]]; then
  cp "$current" "$REFERENCE"
  echo "check_outputs.sh: saved ${#traces[@]} digests to $REFERENCE"
elif diff "$REFERENCE" "$current"; then
  echo "check_outputs.sh: all ${#traces[@]} traces identical to $REFERENCE"
else
  echo "check_outputs.sh: outputs differ from $REFERENCE (lines above: < reference, > now)" >&2
  exit 1
fi
