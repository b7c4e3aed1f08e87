"""Tests for benchmarks/alternate.py (daydream_bench binaries compared in
alternation), run against fake binaries that print Google Benchmark JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "alternate.py"


def fake_bench(path: Path, times_ms, unit="ms", fail=False):
    """An executable that prints one run's repetitions of BM_BuildGraph
    (`times_ms`) as Google Benchmark's JSON, with an aggregate row too."""
    scale = {"ms": 1.0, "us": 1e3, "ns": 1e6}[unit]
    rows = [{"run_name": "BM_BuildGraph/real_time", "run_type": "iteration", "real_time": t * scale,
             "time_unit": unit} for t in times_ms]
    rows.append({"run_name": "BM_BuildGraph/real_time", "run_type": "aggregate", "real_time": 1.0, "time_unit": unit})
    path.write_text("#!/bin/sh\n" + ("echo boom >&2; exit 3\n" if fail else
                                     f"cat <<'EOF'\n{json.dumps({'benchmarks': rows})}\nEOF\n"))
    path.chmod(0o755)
    return str(path)


def run(args, tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text("{}")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=dict(os.environ, DAYDREAM_BENCH_TRACE=str(trace)))


def test_each_round_takes_the_fastest_repetition_and_the_median_over_rounds(tmp_path):
    old = fake_bench(tmp_path / "old", [130.0, 121.5, 140.0])
    new = fake_bench(tmp_path / "new", [110.0, 99.5], unit="us")  # printed as 110000 and 99500 us
    out = run([old, new, "--rounds", "3", "--filter", "BuildGraph"], tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == f"{old}: BM_BuildGraph 121.5 121.5 121.5 (median 121.5)"
    assert lines[1] == f"{new}: BM_BuildGraph 99.5 99.5 99.5 (median 99.5)"


def test_a_benchmark_of_process_cpu_time_reports_that_too(tmp_path):
    # BM_BuildGraph measures every thread's CPU time: Google Benchmark names
    # the run .../process_time/real_time and its cpu_time counts all threads.
    rows = [{"run_name": "BM_BuildGraph/process_time/real_time", "run_type": "iteration", "real_time": wall,
             "cpu_time": cpu, "time_unit": "ms"} for wall, cpu in ((100.0, 112.0), (98.0, 113.0), (104.0, 110.5))]
    bench = tmp_path / "bench"
    bench.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps({'benchmarks': rows})}\nEOF\n")
    bench.chmod(0o755)
    out = run([str(bench), "--rounds", "1", "--filter", "BuildGraph"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{bench}: BM_BuildGraph 98.0 (median 98.0) | BM_BuildGraph cpu 110.5 (median 110.5)"


def test_a_failing_binary_is_named(tmp_path):
    bad = fake_bench(tmp_path / "bad", [], fail=True)
    out = run([bad, "--rounds", "1"], tmp_path)
    assert out.returncode != 0
    assert "bad failed (exit 3)" in out.stderr and "boom" in out.stderr


def test_a_missing_trace_is_named(tmp_path):
    ok = fake_bench(tmp_path / "ok", [1.0])
    out = subprocess.run([sys.executable, str(SCRIPT), ok], capture_output=True, text=True,
                         env=dict(os.environ, DAYDREAM_BENCH_TRACE=str(tmp_path / "none.json")))
    assert out.returncode != 0
    assert "none.json" in out.stderr
