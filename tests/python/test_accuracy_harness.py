"""Tests for the accuracy harness's own helpers (benchmarks/accuracy/run.py)."""

import importlib.util
from pathlib import Path

RUN_PY = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "run.py"


def load_script(name):
    path = RUN_PY.parent / name
    spec = importlib.util.spec_from_file_location(f"accuracy_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_run():
    return load_script(RUN_PY.name)


def test_failure_reason_names_a_ranks_abort_not_the_signal():
    run = load_run()
    stderr = (
        "USDT: probe\n"
        "terminate called after throwing an instance of 'gloo::IoException'\n"
        "  what():  [gloo/transport/tcp/pair.cc:598] Connection closed by peer\n"
        "Traceback (most recent call last):\n"
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGABRT\n"
    )
    reason = run.failure_reason(stderr)
    assert reason.startswith("terminate called after throwing an instance of 'gloo::IoException'")
    assert "Connection closed by peer" in reason
    assert "SIGABRT" not in reason


def test_failure_reason_falls_back_to_the_last_error_line():
    run = load_run()
    assert run.failure_reason("starting\nValueError: bad batch\ncleanup done\n") == "ValueError: bad batch"
    assert run.failure_reason("only this\n") == "only this"
    assert run.failure_reason("") == ""


def test_ddp_noise_histogram_puts_each_time_in_its_bin_and_skips_empty_ones():
    noise = load_script("ddp_noise.py")
    # 0.1 below the first edge, 3.9 and 4.0 in the tick's bin, 9 past the last edge.
    assert noise.histogram([0.1, 0.3, 3.9, 4.0, 9.0], (0.2, 0.5, 3.8, 4.2)) == "<0.2:1 0.2-0.5:1 3.8-4.2:2 >=4.2:1"
    assert noise.histogram([], (1, 2)) == ""
