"""Shared fixtures: the bundled example trace, the shared real traces, small
hand-written traces."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TRACE = ROOT / "examples" / "traces" / "resnet-v100-ddp1-rank0.pt.trace.json.gz"
SHARED_TRACES = Path(os.environ.get("DAYDREAM_SHARED_TRACES", ROOT.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def example_trace() -> Path:
    assert EXAMPLE_TRACE.exists(), EXAMPLE_TRACE
    return EXAMPLE_TRACE


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    assert SHARED_TRACES.is_dir(), f"{SHARED_TRACES} missing (set DAYDREAM_SHARED_TRACES)"
    return SHARED_TRACES


def write_trace(path: Path, events: List[Dict[str, Any]], gz: bool = False, **top: Any) -> Path:
    doc = dict(top)
    doc["traceEvents"] = events
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def tiny_training_events() -> List[Dict[str, Any]]:
    """Two ProfilerSteps of a CPU thread launching kernels on one stream, with
    forward, backward (autograd op) and optimizer ranges."""
    ev: List[Dict[str, Any]] = []
    corr = 100
    for step in range(2):
        base = 1000.0 + step * 1000.0
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                   "ts": base, "dur": 900.0})
        for i, (rng, op) in enumerate([("## forward ##", "aten::mm"),
                                       ("autograd::engine::evaluate_function: MmBackward0", "aten::mm"),
                                       ("Optimizer.step#SGD.step", "aten::add_")]):
            t = base + 10 + i * 250
            ev.append({"ph": "X", "cat": "user_annotation" if "#" in rng else "cpu_op", "name": rng,
                       "pid": 1, "tid": 1, "ts": t, "dur": 200.0})
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t + 5, "dur": 50.0,
                       "args": {"Sequence number": 7 + step}})
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 20, "dur": 10.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i}", "pid": 0, "tid": 7, "ts": t + 32,
                       "dur": 120.0, "args": {"correlation": corr, "stream": 7, "device": 0}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
                   "ts": base + 760, "dur": 80.0, "args": {"correlation": corr + 1000}})
    return ev
