"""Bad input gets a DaydreamError naming the file and the event, or a counted
warning where the rest of the trace is usable. Never a crash or a hang."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import daydream
from conftest import tiny_training_events, write_trace


def _load(path: Path) -> daydream.Trace:
    return daydream.load_trace(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty (0 bytes)"),
        (b"   \n", "only whitespace"),
        (b"hello, not json", "not JSON"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2', "truncated"),
        (b'{"traceEvents": []}', "holds no events"),
        (b'{"other": 1}', 'no "traceEvents"'),
        (b'"just a string"', "a trace starts with '{' or '['"),
        (b"[1, 2] trailing", "unexpected text after the end of the JSON document at byte 7"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]} trailing', "unexpected text after the end"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]} {}', "after the end of the JSON document"),
        (b'{"traceEvents": [5]}', "event 0: not a JSON object"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "12", "dur": 3}]}', "event 0: 'ts' must be a number"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -4}]}', "event 0: 'dur' is negative"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}', "event 0: complete event ('ph': 'X') has no 'dur'"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1e300, "dur": 1}]}', "event 0: 'ts' is out of range"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1}]}', "event 0: no 'name'"),
        (b'{"traceEvents": [{"ph": "X", "name": 7, "ts": 1, "dur": 1}]}', "event 0: 'name' must be a string"),
        (b'{"traceEvents": [{"name": "a", "ts": 1, "dur": 1}]}', "event 0: no 'ph'"),
    ],
)
def test_bad_json_is_a_clear_error_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(daydream.DaydreamError) as err:
        _load(path)
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(daydream.DaydreamError, match="no_such.json"):
        _load(tmp_path / "no_such.json")


def test_corrupt_gzip_is_a_clear_error(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(json.dumps({"traceEvents": tiny_training_events()}).encode()))
    data[40:60] = b"\xff" * 20
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(daydream.DaydreamError, match="corrupt gzip"):
        _load(path)


def test_truncated_gzip_is_a_clear_error(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps({"traceEvents": tiny_training_events()}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(daydream.DaydreamError, match="truncated"):
        _load(path)


def test_truncated_real_trace_is_a_clear_error(tmp_path: Path, example_trace: Path) -> None:
    text = gzip.decompress(example_trace.read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(text[: len(text) * 2 // 3])
    with pytest.raises(daydream.DaydreamError, match="cut.json"):
        _load(path)


def test_kernels_without_launches_are_a_counted_warning(tmp_path: Path) -> None:
    events = tiny_training_events()
    for e in events:
        if e["name"] == "cudaLaunchKernel":
            e["args"]["correlation"] += 50_000  # break every link
    graph = daydream.build_graph(write_trace(tmp_path / "t.json", events))
    kinds = {w["kind"]: w["count"] for w in graph.warnings}
    assert kinds["kernel_without_launch"] == 6
    assert kinds["launch_without_kernel"] == 6
    assert graph.summary()["edges_by_kind"]["launch"] == 0
    result = daydream.replay(graph)
    assert len(result.iterations) == 2


def test_a_trace_without_iterations_replays_as_one_span(tmp_path: Path) -> None:
    events = [e for e in tiny_training_events() if not e["name"].startswith(("ProfilerStep", "Optimizer"))]
    result = daydream.replay(write_trace(tmp_path / "t.json", events))
    assert result.whole_trace
    assert [it.name for it in result.iterations] == ["whole trace"]
    assert result.iterations[0].measured_ms > 0


def test_a_graph_file_that_is_not_a_graph_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "g.ddg"
    path.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(daydream.DaydreamError, match="not a daydream graph file"):
        daydream.Graph.load(str(path))


def test_a_graph_from_a_newer_schema_says_so(tmp_path: Path) -> None:
    path = tmp_path / "g.ddg"
    path.write_bytes(b"\x08\x63")  # field 1 (schema_version) = 99
    with pytest.raises(daydream.DaydreamError, match="newer daydream"):
        daydream.Graph.load(str(path))


def test_saving_into_a_missing_directory_fails_and_leaves_nothing(tmp_path: Path, example_trace: Path) -> None:
    graph = daydream.build_graph(example_trace)
    with pytest.raises(daydream.DaydreamError):
        graph.save(str(tmp_path / "missing" / "g.ddg"))
    assert not (tmp_path / "missing").exists()


def test_failed_save_keeps_the_old_file(tmp_path: Path, example_trace: Path) -> None:
    """A write that fails half-way (here: the file-size limit) leaves the old
    graph file intact and no temporary file behind (works as root too)."""
    target = tmp_path / "g.ddg"
    daydream.build_graph(example_trace).save(str(target))
    before = target.read_bytes()
    code = (
        "import resource, signal, sys, daydream\n"
        "g = daydream.build_graph(sys.argv[1])\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    g.save(sys.argv[2])\n"
        "except daydream.DaydreamError as e:\n"
        "    print(e)\n"
        "    sys.exit(7)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(example_trace), str(target)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 7, r.stdout + r.stderr
    assert "write failed" in r.stdout
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.ddg"]
