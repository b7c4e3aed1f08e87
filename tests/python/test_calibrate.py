"""daydream.calibrate_network: the communication backend measured for the passes."""
from __future__ import annotations

import os

import pytest

import daydream
from daydream import DaydreamError

if os.environ.get("DAYDREAM_REQUIRE_TORCH"):
    import torch  # noqa: F401
else:
    pytest.importorskip("torch")


def test_calibrate_network_measures_gloo_between_local_processes() -> None:
    net = daydream.calibrate_network(world_size=2, max_mb=1, repeats=3)
    assert net.backend == "gloo" and net.world_size == 2
    assert net.latency_us > 0 and net.bandwidth_gbps > 0
    assert [s["bytes"] for s in net.samples] == [4096, 16384, 65536, 262144, 1 << 20]
    assert all(s["mean_ms"] > 0 for s in net.samples)
    # Its options feed the communication passes.
    assert set(net.options()) == {"latency_us", "bandwidth_gbps"}
    names = {o["name"] for p in daydream.passes() if p["name"] == "data_parallel" for o in p["options"]}
    assert set(net.options()) <= names


@pytest.mark.parametrize("kwargs, message", [
    ({"world_size": 1}, "world_size must be at least 2"),
    ({"max_mb": 0}, "max_mb must be in"),
    ({"repeats": 0}, "repeats must be at least 1"),
])
def test_calibrate_network_rejects_bad_arguments(kwargs, message) -> None:
    with pytest.raises(DaydreamError, match=message):
        daydream.calibrate_network(**kwargs)
