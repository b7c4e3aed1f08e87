"""Tests for the accuracy harness's own helpers (benchmarks/accuracy/run.py)."""

import importlib.util
from pathlib import Path

RUN_PY = Path(__file__).resolve().parents[2] / "benchmarks" / "accuracy" / "run.py"


def load_run():
    spec = importlib.util.spec_from_file_location("accuracy_run", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
