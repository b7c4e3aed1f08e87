#!/usr/bin/env python3
"""Compares daydream_bench binaries in alternation, for changes smaller than
the host's drift (docs/history/performance-log.md, "How it was timed").

    benchmarks/alternate.py OLD_BENCH NEW_BENCH [--rounds 4] [--filter 'ParseTraceJsonOneCore|BuildGraph']

Each round runs every binary once, in turn, with --benchmark_repetitions
(5 by default); a run's figure for a benchmark is its fastest repetition
(a slow spell of a shared host lengthens all of a run's repetitions; the
fastest is the one it touched least). Printed per binary and benchmark:
each round's figure and their median, in ms; for a benchmark that counts
every thread's CPU time (BM_BuildGraph), that too, as "NAME cpu": the
least CPU time of a run's repetitions, which need not be the repetition
with the least wall time. The trace is
$DAYDREAM_BENCH_TRACE (default benchmarks/out/big_1m.json, which
benchmarks/run_bench.sh generates). With --filter naming one benchmark,
that benchmark runs alone in its process; `make bench` runs them all in
one, where what ran before changes the allocator's state (glibc's mmap
threshold) and the build's time with it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List


def run_once(binary: str, flt: str, reps: int, trace: str) -> Dict[str, float]:
    """The fastest repetition of each benchmark of one run, in ms."""
    out = subprocess.run(
        [binary, f"--benchmark_filter={flt}", f"--benchmark_repetitions={reps}", "--benchmark_format=json"],
        env=dict(os.environ, DAYDREAM_BENCH_TRACE=trace), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"alternate.py: {binary} failed (exit {out.returncode}): {out.stderr.strip()[-300:]}")
    fastest: Dict[str, float] = {}
    for bm in json.loads(out.stdout)["benchmarks"]:
        if bm.get("run_type") != "iteration":
            continue
        if bm.get("error_occurred"):
            raise SystemExit(f"alternate.py: {binary}: {bm['run_name']}: {bm.get('error_message', 'error')}")
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bm["time_unit"]]
        name = bm["run_name"].split("/")[0]
        fastest[name] = min(fastest.get(name, float("inf")), bm["real_time"] * scale)
        if "/process_time" in bm["run_name"]:  # its CPU time counts every thread: the cost per core
            fastest[name + " cpu"] = min(fastest.get(name + " cpu", float("inf")), bm["cpu_time"] * scale)
    return fastest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+", help="daydream_bench binaries, run in this order each round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--filter", default="ParseTraceJsonOneCore|BuildGraph", help="--benchmark_filter")
    a = ap.parse_args()
    trace = os.environ.get("DAYDREAM_BENCH_TRACE", "benchmarks/out/big_1m.json")
    if not Path(trace).is_file():
        raise SystemExit(f"alternate.py: no trace at {trace} (benchmarks/run_bench.sh makes big_1m)")
    for b in a.binaries:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"alternate.py: {b} is not an executable")
    figures: Dict[str, Dict[str, List[float]]] = {b: {} for b in a.binaries}
    for _ in range(a.rounds):
        for b in a.binaries:
            for name, ms in run_once(b, a.filter, a.repetitions, trace).items():
                figures[b].setdefault(name, []).append(ms)
    for b in a.binaries:
        parts = [f"{name} {' '.join(f'{v:.1f}' for v in vals)} (median {statistics.median(vals):.1f})"
                 for name, vals in figures[b].items()]
        print(f"{b}: " + " | ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
