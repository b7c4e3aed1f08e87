"""The `daydream` command line: info and replay, JSON output, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest


def run(args: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=120)


def test_info_prints_the_summary(example_trace: Path) -> None:
    r = run(["info", str(example_trace)])
    assert r.returncode == 0, r.stderr
    assert "events      45,422" in r.stdout
    assert "ProfilerStep#103 95.697 ms" in r.stdout
    assert "pt_autograd_0" in r.stdout


def test_info_json_has_the_documented_keys(example_trace: Path) -> None:
    r = run(["info", str(example_trace), "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["events"] == 45422
    assert d["events_by_kind"]["kernel"] == 4350
    assert {it["name"] for it in d["iterations"]} == {f"ProfilerStep#{i}" for i in range(101, 106)}
    assert d["rank"] == 0 and d["world_size"] == 1
    assert d["graph"]["tasks_by_phase"]["backward"] > 0


def test_replay_json_has_the_documented_shape(example_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    r = run(["replay", str(example_trace), "--json", "--timeline", str(out)])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert isinstance(d["trace"], str)
    assert isinstance(d["median_error_pct"], float)
    assert isinstance(d["critical_path"], dict)
    for it in d["iterations"]:
        assert set(it) >= {"name", "measured_ms", "replayed_ms", "error_pct", "gpu_measured_ms", "gpu_replayed_ms"}
        assert all(isinstance(it[k], float) for k in ("measured_ms", "replayed_ms", "error_pct"))
    assert json.loads(out.read_text())["traceEvents"]


def test_replay_prints_a_table(example_trace: Path) -> None:
    r = run(["replay", str(example_trace)])
    assert r.returncode == 0, r.stderr
    assert "measured ms" in r.stdout and "ProfilerStep#105" in r.stdout and "median |error|" in r.stdout


@pytest.mark.parametrize("content", [b"", b"not json", b'{"traceEvents": [{"ph": "X"'])
def test_bad_input_exits_2_with_one_line_on_stderr(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    for cmd in ("info", "replay"):
        r = run([cmd, str(path)])
        assert r.returncode == 2
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("daydream: error: ") and str(path) in lines[0]


def test_usage_error_exits_2_with_one_line() -> None:
    r = run(["replay"])
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_cli_does_not_import_torch() -> None:
    code = "import sys, daydream.cli; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_replay_logs_trace_warnings_only_with_verbose_and_starts_without_logging(example_trace: Path) -> None:
    verbose = run(["-v", "replay", str(example_trace)])
    assert verbose.returncode == 0, verbose.stderr
    assert "daydream: warning: " in verbose.stderr and "has no GPU activity in the trace" in verbose.stderr
    quiet = run(["replay", str(example_trace)])
    assert quiet.returncode == 0 and quiet.stderr == ""
    # Without --verbose the warnings would be dropped: `logging` is not even imported.
    code = ("import contextlib, io, sys\nfrom daydream.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['replay', {str(example_trace)!r}])\n"
            "import daydream.api\nprint('logging' in sys.modules, daydream.api.log_trace_warnings)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # ... and the library logs them again once main() returns.
    assert r.returncode == 0 and r.stdout.strip() == "False True", r.stderr
