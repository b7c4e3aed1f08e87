"""daydream.calibrate_network: the communication backend measured for the passes."""
from __future__ import annotations

import os
import re
import statistics
from typing import Callable, Dict, List

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
    # gloo's collectives run on CPU threads: how much they take from compute is measured.
    assert 0 <= net.comm_cpu_share <= 1
    assert net.overlap["compute_ms"] > 0 and net.overlap["compute_with_collectives_ms"] > 0
    # And DDP's own CPU work: measured on stacks of 2, 16 and 64 gradients.
    assert [s["gradients"] for s in net.ddp["samples"]] == [2, 16, 64]
    assert all(s["plain_us"] > 0 and s["ddp_us"] > 0 for s in net.ddp["samples"])
    assert net.ddp_cpu_us >= 0 and net.ddp_cpu_per_gradient_us >= 0
    # And what DDP's all-reduce adds to a step beyond the wire time, after
    # steps of several lengths, as increasing points: the passes' gap_latency.
    assert net.ddp_gaps["layers"] == 16 and net.ddp_gaps["bytes"] == 16 * (64 * 64 + 64) * 4
    assert net.gap_latency == net.ddp_gaps["gap_latency"]
    points = [tuple(map(float, p.split(":"))) for p in net.gap_latency.split(";")]
    assert len(points) == len(net.ddp_gaps["batches"]) >= 1
    assert [g for g, _ in points] == sorted(g for g, _ in points) and all(g > 0 for g, _ in points)
    assert all(e >= 0 for _, e in points) and [e for _, e in points] == sorted(e for _, e in points)
    # The blocking all-reduces after matmuls, for comparison.
    blocking = [tuple(map(float, p.split(":"))) for p in net.gaps["gap_latency"].split(";")]
    assert [g for g, _ in blocking] == [500, 1000, 2000, 4000, 8000]
    # And the latency of an all-reduce queued behind another, measured on
    # DDP steps of the stack in one bucket and in one per layer at the
    # smallest batch; at every batch, what a further bucket costs after the
    # gap between two layers' gradients: tensor_fusion's bucket_cpu_latency.
    assert net.queued_latency_us >= 0 and net.queued["queued_latency_us"] == net.queued_latency_us
    assert net.queued["buckets"] == 16 and set(net.queued["median_ms"]) == {"1", "4", "16"}
    assert [p["batch"] for p in net.queued["points"]] == [32, 512, 2048]
    assert net.queued["points"][0]["queued_latency_us"] == net.queued_latency_us
    assert net.bucket_cpu_latency == net.queued["bucket_cpu_latency"]
    # Two curves, for steps of 4 buckets (of 4 layers) and of 16 (one per
    # layer): each point at its batch's backward over the curve's buckets,
    # its extra per further bucket, non-decreasing in the gap.
    assert net.queued["coarse"] == 4
    curves = dict(c.split("@") for c in net.bucket_cpu_latency.split("|"))
    assert list(curves) == ["4", "16"]
    for count, gap_key in (("16", "gap_us"), ("4", "coarse_gap_us")):
        curve = [tuple(map(float, p.split(":"))) for p in curves[count].split(";")]
        assert [g for g, _ in curve] == [round(p[gap_key]) for p in net.queued["points"]]
        assert all(e >= 0 for _, e in curve) and [e for _, e in curve] == sorted(e for _, e in curve)
    for p in net.queued["points"]:
        assert p["coarse_gap_us"] == pytest.approx(4 * p["gap_us"]) and p["gap_us"] > 0
    assert net.options("tensor_fusion")["bucket_cpu_latency"] == net.bucket_cpu_latency
    assert "bucket_cpu_latency" not in net.options()
    # How many of the fit's all-reduces stalled: a share of the 5 sizes x 3 repeats.
    assert net.stalled_share * 15 == pytest.approx(round(net.stalled_share * 15))
    # Its options feed the communication passes.
    # gap_latency from DDP steps holds the wait for the slowest rank: straggler_us is 0.
    # And what DDP's broadcast of a module's buffer adds to those steps, at
    # the same step lengths: data_parallel's broadcast_latency.
    assert net.ddp_gaps["buffer_bytes"] == 4096
    # A batch norm's buffers, which DDP broadcasts one dtype at a time: two broadcasts.
    assert net.ddp_gaps["buffer_dtypes"] == ["torch.float32", "torch.int64"]
    assert net.ddp_gaps["buffers_broadcast"] is True  # rank 1's buffers hold rank 0's values
    assert net.broadcast_latency == net.ddp_gaps["broadcast_latency"]
    broadcast = [tuple(map(float, p.split(":"))) for p in net.broadcast_latency.split(";")]
    assert [g for g, _ in broadcast] == [g for g, _ in points]
    assert all(e >= 0 for _, e in broadcast) and [e for _, e in broadcast] == sorted(e for _, e in broadcast)
    assert set(net.options()) == {"latency_us", "bandwidth_gbps", "comm_cpu_share", "ddp_cpu_us",
                                  "ddp_cpu_per_gradient_us", "gap_latency", "queued_latency_us", "straggler_us",
                                  "broadcast_latency"}
    assert net.options()["straggler_us"] == 0.0
    assert net.options()["broadcast_latency"] == net.broadcast_latency
    assert "gap_latency" not in net.options("tensor_fusion")
    assert (net.options("tensor_fusion")["latency_us"], net.options("tensor_fusion")["bandwidth_gbps"]) == \
        net.median_ring()
    assert "broadcast_latency" not in net.options("tensor_fusion")
    assert set(net.ddp_gaps["straggler_ms"]) == {str(b) for b in net.ddp_gaps["batches"]}
    # Every timed step kept, per kind and batch: the medians are theirs.
    times = net.ddp_gaps["times_ms"]
    assert set(times) == {"quiet", "real", "broadcast"}
    for b in net.ddp_gaps["batches"]:
        assert statistics.median(times["real"][str(b)]) == pytest.approx(net.ddp_gaps["median_ms"][str(b)], abs=1e-3)
        assert statistics.median(times["quiet"][str(b)]) == pytest.approx(net.ddp_gaps["quiet_median_ms"][str(b)],
                                                                          abs=1e-3)
        assert statistics.median(times["broadcast"][str(b)]) == pytest.approx(
            net.ddp_gaps["broadcast_median_ms"][str(b)], abs=1e-3)
    names = {o["name"] for p in daydream.passes() if p["name"] == "data_parallel" for o in p["options"]}
    assert set(net.options()) <= names


class _FakeHost:
    """A rank on a virtual clock (deterministic on a busy machine): a matmul
    takes 1 us; an asynchronous all-reduce holds the rank's only thread for
    ``blocking_s`` (a collective that cannot run beside compute) or none of
    it (one that can). Stands in for ``torch``, ``torch.distributed`` and
    the calibration's clock."""

    def __init__(self, blocking_s: float, wait_s: float = 0.0) -> None:
        self.blocking_s = blocking_s
        self.wait_s = wait_s  # what waiting for an all-reduce takes (the network, a late wake-up)
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def randn(self, *shape):
        return None

    def ones(self, n):
        return None

    def mm(self, a, b):
        self.now += 1e-6

    float64 = "float64"

    class ReduceOp:
        MAX = "max"

    def tensor(self, values, dtype=None):
        return list(values)

    def barrier(self) -> None:
        pass

    def all_reduce(self, buf, op=None, async_op: bool = False):
        if op is None:  # the calibration's collectives (not the matmul time agreed by MAX)
            self.now += self.blocking_s
        return self

    def wait(self) -> None:
        self.now += self.wait_s


@pytest.mark.parametrize("blocking, wait_s, share", [(True, 0.0, 1.0), (False, 0.0, 0.0), (False, 4e-3, 0.0)])
def test_comm_cpu_share_is_the_collectives_time_the_computing_thread_loses(monkeypatch, blocking: bool,
                                                                          wait_s: float, share: float) -> None:
    # Ring model with these numbers: 2 x 1000 us latency, the bytes negligible.
    model_s = calibrate._ring_all_reduce_s(64 << 10, 2, 1000.0, 1000.0)
    assert model_s == pytest.approx(2e-3, rel=1e-3)
    # A wait for the all-reduces after the compute (4 ms: a late wake-up) is
    # the network's time, not the computing thread's loss.
    host = _FakeHost(model_s if blocking else 0.0, wait_s)
    monkeypatch.setattr(calibrate, "time", host)
    got = calibrate.measure_comm_cpu_share(host, host, 2, 1000.0, 1000.0, repeats=3)
    assert got["comm_cpu_share"] == pytest.approx(share, abs=1e-3)
    assert got["collectives"] == 10 and got["model_ms"] == pytest.approx(2.0, rel=1e-3)
    assert got["compute_ms"] == pytest.approx(40.0, rel=1e-3)  # 10 chunks of twice the all-reduce's model time


class _SleepyHost(_FakeHost):
    """An all-reduce takes 1 ms, and 0.5 ms more when the rank computed for
    more than 3 ms since the last one ended (its threads fell asleep). With
    ``stall_every`` N, every Nth all-reduce after about 4 ms of compute
    stalls for 20 ms more (a busy host)."""

    def __init__(self, stall_every: int = 0) -> None:
        super().__init__(0.0)
        self.last_end = 0.0
        self.stall_every = stall_every
        self.after_4ms = 0

    def all_reduce(self, buf, op=None, async_op: bool = False):
        if op is None:
            gap = self.now - self.last_end
            self.now += 1e-3 + (0.5e-3 if gap > 3e-3 else 0.0)
            if self.stall_every and 3.5e-3 < gap < 6e-3:
                self.after_4ms += 1
                self.now += 20e-3 if self.after_4ms % self.stall_every == 0 else 0.0
            self.last_end = self.now
        return self


def test_gap_latency_is_the_extra_time_of_an_all_reduce_after_compute(monkeypatch) -> None:
    host = _SleepyHost()
    monkeypatch.setattr(calibrate, "time", host)
    got = calibrate.measure_gap_latency(host, host, repeats=3)
    assert got["gap_latency"] == "500:0.0;1000:0.0;2000:0.0;4000:500.0;8000:500.0"
    assert got["mean_ms"]["0"] == pytest.approx(1.0) and got["mean_ms"]["8"] == pytest.approx(1.5)
    assert got["gap_latency_trimmed"] == got["gap_latency"]  # no stall to cut
    assert got["times_ms"]["8"] == pytest.approx([1.5] * 3)


def test_gap_latency_trimmed_leaves_out_a_few_stalls_that_the_mean_keeps(monkeypatch) -> None:
    host = _SleepyHost(stall_every=10)
    monkeypatch.setattr(calibrate, "time", host)
    got = calibrate.measure_gap_latency(host, host, repeats=20)
    stalls = sum(t > 10 for t in got["times_ms"]["4"])
    assert 1 <= stalls <= 2  # of 20: a tenth cut at the top takes them
    assert got["gap_latency_trimmed"] == "500:0.0;1000:0.0;2000:0.0;4000:500.0;8000:500.0"
    extra_4ms = float(got["gap_latency"].split(";")[3].split(":")[1])
    assert extra_4ms == pytest.approx(500 + stalls * 20e3 / 20, abs=1)
    assert got["gap_latency_median"] == "500:0.0;1000:0.0;2000:0.0;4000:500.0;8000:500.0"  # the stalls leave it


def test_the_wait_for_the_slowest_rank_is_the_expected_maximum_less_the_mean() -> None:
    # Two ranks drawing 1 or 3 ms: the slower is 3 ms in three draws of four.
    assert calibrate.expected_wait_for_slowest_ms([1.0, 3.0], 2) == pytest.approx(2.5 - 2.0)
    assert calibrate.expected_wait_for_slowest_ms([1.0, 3.0], 1) == 0.0
    assert calibrate.expected_wait_for_slowest_ms([2.0] * 5, 8) == pytest.approx(0.0)
    assert calibrate.expected_wait_for_slowest_ms([], 2) == 0.0


def test_stalled_share_counts_times_a_tick_past_their_sizes_median() -> None:
    us, ms = 1e-6, 1e-3
    # 4 kB: most near 0.3 ms, two a 4 ms tick later; 1 MB: 3 ms, one 4 ms later.
    small = [300 * us] * 8 + [4.3 * ms, 4.2 * ms]
    large = [3 * ms] * 9 + [7.2 * ms]
    assert calibrate.stalled_share([small, large]) == pytest.approx(3 / 20)
    # A spread of tens of microseconds is no stall, nor is 0.9 ms past a
    # 0.3 ms median (under the 1 ms floor), nor 2.9 ms past a 3 ms one
    # (under the median itself).
    assert calibrate.stalled_share([[300 * us, 340 * us, 1.2 * ms], [3 * ms, 3 * ms, 5.9 * ms]]) == 0.0
    assert calibrate.stalled_share([[300 * us, 300 * us, 1.31 * ms]]) == pytest.approx(1 / 3)
    assert calibrate.stalled_share([[], []]) == 0.0
    # Where most of a size's all-reduces stall, its median is a stalled one:
    # they still count, against its fast tenth.
    assert calibrate.stalled_share([[300 * us] * 4 + [4.2 * ms] * 6]) == pytest.approx(0.6)
    assert calibrate.stalled_share([[300 * us] * 2 + [4.2 * ms] * 8]) == pytest.approx(0.8)


def test_caveats_name_stalled_all_reduces_on_gloo_only() -> None:
    samples = [{"bytes": 4096, "mean_ms": 1.45, "median_ms": 0.28}, {"bytes": 1 << 20, "mean_ms": 2.0, "median_ms": 1.0}]
    net = calibrate.NetworkCalibration("gloo", 2, 700.0, 1.4, samples, stalled_share=0.3)
    (caveat,) = net.caveats()
    assert caveat.startswith("30% of the calibration's all-reduces stalled (4 kB: median 0.280 ms, mean 1.450 ms)")
    assert "pytorch/gloo#246" in caveat and "real-time priority" in caveat
    assert calibrate.NetworkCalibration("gloo", 2, 70.0, 5.0, samples, stalled_share=0.01).caveats() == []
    assert calibrate.NetworkCalibration("nccl", 2, 10.0, 100.0, samples, stalled_share=0.3).caveats() == []


def test_options_leave_the_straggler_to_predict_without_gaps_measured_on_ddp_steps() -> None:
    net = calibrate.NetworkCalibration("nccl", 2, 10.0, 100.0, [])
    assert "straggler_us" not in net.options()
    net.ddp_gaps = {"gap_latency": "4000:100.0"}
    net.gap_latency = "4000:100.0"
    assert net.options()["straggler_us"] == 0.0 and net.options()["gap_latency"] == "4000:100.0"


def test_tensor_fusion_takes_the_median_network_and_no_gap_latency() -> None:
    # Its recorded step holds the thread's wake-up after each all-reduce
    # (no gap_latency, neither the DDP steps' nor the blocking all-reduces');
    # its network is the ring fitted to each size's median, where the means
    # hold the stalls: 4 kB in 0.3 ms and 1 MB in 0.6 ms at the median,
    # 1.2 and 2.0 ms on average.
    samples = [{"bytes": 4096, "mean_ms": 1.2, "median_ms": 0.3}, {"bytes": 1 << 20, "mean_ms": 2.0, "median_ms": 0.6}]
    net = calibrate.NetworkCalibration("gloo", 2, 10.0, 100.0, samples, gap_latency="4000:900.0",
                                       ddp_gaps={"gap_latency": "4000:900.0"},
                                       gaps={"gap_latency": "4000:300.0"})
    tf = net.options("tensor_fusion")
    assert "gap_latency" not in tf and "straggler_us" not in tf
    latency_us, bandwidth_gbps = calibrate.ring_fit([(4096, 0.3e-3), (1 << 20, 0.6e-3)], 2)
    assert net.median_ring() == (latency_us, bandwidth_gbps)
    assert tf["latency_us"] == pytest.approx(latency_us) and tf["bandwidth_gbps"] == pytest.approx(bandwidth_gbps)
    assert latency_us == pytest.approx(149.4, abs=0.1)  # (0.3 ms less 4 kB of wire) / 2 steps; the means: 598 us
    # data_parallel keeps the means: its gap_latency from DDP steps is what
    # a real step adds beyond the means' ring time.
    assert (net.options("data_parallel")["latency_us"], net.options("data_parallel")["bandwidth_gbps"]) == (10.0, 100.0)
    # Without medians of two sizes, the fit's own figures.
    assert calibrate.NetworkCalibration("gloo", 2, 10.0, 100.0, samples[:1]).median_ring() is None
    assert calibrate.NetworkCalibration("gloo", 2, 10.0, 100.0, []).options("tensor_fusion")["latency_us"] == 10.0
    assert "bucket_cpu_latency" not in tf  # not measured
    assert net.options("data_parallel")["gap_latency"] == "4000:900.0"
    # Where measured, tensor_fusion prices its buckets' latencies on the
    # thread; data_parallel's gap_latency from DDP steps holds them already.
    net.bucket_cpu_latency = "50:300.0;400:700.0"
    assert net.options("tensor_fusion")["bucket_cpu_latency"] == "50:300.0;400:700.0"
    assert "bucket_cpu_latency" not in net.options("data_parallel")
    with pytest.raises(DaydreamError, match="no options for pass 'amp'"):
        net.options("amp")


def test_ddp_gap_points_are_what_the_all_reduce_adds_to_the_step_beyond_the_wire() -> None:
    quiet = {1.0: [4.0] * 10, 2.0: [8.0] * 10}
    real = {1.0: [7.0] * 10, 2.0: [12.0] * 10}
    assert calibrate.ddp_gap_points(quiet, real, wire_us=2000.0) == "4000:1000.0;8000:2000.0"
    # Points are ordered by the gap; an extra never drops with a longer gap, nor below 0.
    real = {2.0: [9.0] * 10, 1.0: [7.0] * 10}
    assert calibrate.ddp_gap_points(quiet, real, wire_us=2000.0) == "4000:1000.0;8000:1000.0"
    assert calibrate.ddp_gap_points(quiet, real, wire_us=5000.0) == "4000:0.0;8000:0.0"
    # Medians: a few slow steps leave a point where it is.
    real = {1.0: [7.0] * 8 + [30.0, 40.0], 2.0: [12.0] * 10}
    assert calibrate.ddp_gap_points(quiet, real, wire_us=2000.0) == "4000:1000.0;8000:2000.0"
    # broadcast_latency: what the broadcasting steps add beyond the same
    # steps that only all-reduce, at the quiet steps' lengths.
    broadcasting = {1.0: [7.5] * 10, 2.0: [14.0] * 10}
    assert calibrate.ddp_gap_points(quiet, broadcasting, wire_us=100.0, base_ms=real) == "4000:400.0;8000:1900.0"


def test_ring_fit_reads_latency_and_bandwidth_off_exact_ring_times() -> None:
    # Times the ring model gives for 4 ranks at 50 us and 2 GB/s come back as those.
    sizes = [4096, 65536, 1 << 20, 4 << 20]
    samples = [(n, calibrate._ring_all_reduce_s(n, 4, 50.0, 2.0)) for n in sizes]
    latency_us, bandwidth_gbps = calibrate.ring_fit(samples, 4)
    assert latency_us == pytest.approx(50.0, rel=1e-6) and bandwidth_gbps == pytest.approx(2.0, rel=1e-6)
    # Times that shrink with size (no bandwidth term to see) keep both positive.
    latency_us, bandwidth_gbps = calibrate.ring_fit([(4096, 2e-3), (1 << 20, 1e-3)], 2)
    assert latency_us >= 0 and bandwidth_gbps > 0


def test_fit_all_reduce_times_two_sizes_when_asked_for_one(monkeypatch) -> None:
    host = _FakeHost(1e-3)  # every all-reduce 1 ms: no bandwidth term to see, but a fit
    monkeypatch.setattr(calibrate, "time", host)
    got = calibrate.fit_all_reduce(host, host, 2, max_bytes=4096, repeats=2)
    assert [s["bytes"] for s in got["samples"]] == [4096, 16384]
    assert got["latency_us"] == pytest.approx(500.0, rel=1e-3)  # 1 ms over the ring's two steps


@pytest.mark.parametrize("samples, what", [([], "0 size"), ([(4096, 1e-3), (4096, 2e-3)], "1 size"),
                                           ([(4096, 0.0)], "sample 0"),
                                           ([(4096, 1e-3), (-1, 1e-3)], "sample 1"),
                                           ([(4096, float("nan"))], "sample 0")])
def test_ring_fit_refuses_what_it_cannot_fit(samples, what: str) -> None:
    with pytest.raises(DaydreamError, match=what):
        calibrate.ring_fit(samples, 2)


def test_ddp_queued_latency_is_the_extra_communication_of_more_buckets_per_ring_step() -> None:
    # One bucket: communicating adds 1.5 ms to the step; sixteen: 7.5 ms,
    # of which 0.5 ms is DDP's CPU work per bucket (quiet steps): the
    # fifteen extra all-reduces add 6 ms, 0.4 ms each, over 2 ring steps.
    quiet = {1: [2.0, 2.1, 1.9], 16: [2.5, 2.6, 2.4]}
    real = {1: [3.5, 3.6, 3.4, 9.0, 3.5], 16: [10.0, 10.1, 9.9]}  # medians: a stall does not move them
    assert calibrate.ddp_queued_latency_us(quiet, real, 2) == pytest.approx(200.0)
    # Four ranks: six ring steps.
    assert calibrate.ddp_queued_latency_us(quiet, real, 4) == pytest.approx(400.0 / 6)
    # More buckets communicating no slower: 0, never negative.
    assert calibrate.ddp_queued_latency_us(quiet, {1: [3.5], 16: [3.0]}, 2) == 0.0
    # What each further bucket adds to the step, in ms: 0.4, the ring's steps not divided out.
    assert calibrate.ddp_extra_per_bucket_ms(quiet, real) == pytest.approx(0.4)
    assert calibrate.ddp_extra_per_bucket_ms(quiet, {1: [3.5], 16: [3.0]}) == pytest.approx(-1.0 / 15)


def test_blocks_in_turn_time_a_repeated_configuration_more_often_spread_through_each_round() -> None:
    calls: List[str] = []

    class _Dist:
        @staticmethod
        def barrier() -> None:
            calls.append("|")

    def step(key: str) -> Callable[[], float]:
        def run() -> float:
            calls.append(key)
            return 0.001
        return run

    steps = {key: step(key) for key in ("a", "b", "c")}
    times: Dict[str, List[float]] = {key: [] for key in steps}
    calibrate._time_in_blocks(_Dist(), steps, times, rounds=2, block=2, repeats={"b": 3})
    # One round of warm-up, untimed, then two: "b" three blocks a round.
    assert {key: len(v) for key, v in times.items()} == {"a": 4, "b": 12, "c": 4}
    assert times["a"] == [pytest.approx(1.0)] * 4
    rounds = "".join(calls).split("|")[1:-1]
    # Every key's first block, then b's further ones; each other round the order reversed.
    assert rounds[:5] == ["aa", "bb", "cc", "bb", "bb"]
    assert rounds[5:10] == ["bb", "bb", "cc", "bb", "aa"]
    assert len(rounds) == 15
    # Without repeats, one block of each a round.
    times = {key: [] for key in steps}
    calibrate._time_in_blocks(_Dist(), steps, times, rounds=1, block=1)
    assert {key: len(v) for key, v in times.items()} == {"a": 1, "b": 1, "c": 1}


def test_ddp_queued_latency_refuses_a_coarse_count_that_does_not_split_the_stack() -> None:
    import torch  # noqa: PLC0415

    for coarse in (1, 3, 16, 32):
        with pytest.raises(DaydreamError, match="coarse must be 0 or divide layers"):
            calibrate.measure_ddp_queued_latency(None, torch, coarse=coarse)
    for blocks in (0, -1):
        with pytest.raises(DaydreamError, match="coarse_blocks must be at least 1, got"):
            calibrate.measure_ddp_queued_latency(None, torch, coarse_blocks=blocks)


def test_ddp_queued_latency_without_a_coarse_count_gives_the_one_per_layer_curve_alone(tmp_path) -> None:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        both = calibrate.measure_ddp_queued_latency(dist, torch, batches=(32,), rounds=1, block=2)
        fine = calibrate.measure_ddp_queued_latency(dist, torch, batches=(32,), rounds=1, block=2, coarse=0)
    finally:
        dist.destroy_process_group()
    assert both["coarse"] == 4 and both["bucket_cpu_latency"].startswith("4@")
    assert "|16@" in both["bucket_cpu_latency"] and "coarse_gap_us" in both["points"][0]
    assert set(both["median_ms"]) == {"1", "4", "16"}
    # The four-bucket step with its all-reduces, the noisiest, is timed three times as often.
    assert both["points"][0]["steps"] == {"1": 2, "4": 6, "16": 2}
    assert fine["coarse"] == 0 and "@" not in fine["bucket_cpu_latency"] and ";" not in fine["bucket_cpu_latency"]
    assert "coarse_gap_us" not in fine["points"][0] and set(fine["median_ms"]) == {"1", "16"}
    assert fine["points"][0]["steps"] == {"1": 2, "16": 2}


def test_bucket_cpu_latency_points_rise_with_the_gap_between_buckets() -> None:
    # (gap us, extra ms per further bucket) per batch, in any order: points
    # at increasing gaps, extras in us.
    assert calibrate.ddp_bucket_latency_points([(425.2, 0.781), (52.0, 0.2687), (122.4, 0.3496)]) == \
        "52:268.7;122:349.6;425:781.0"
    # One that falls below a shorter gap's is pooled with it: the
    # least-squares non-decreasing fit, not the running maximum.
    assert calibrate.ddp_bucket_latency_points([(50.0, 0.3), (120.0, 0.2), (400.0, 0.5)]) == "50:250.0;120:250.0;400:500.0"
    assert calibrate.ddp_bucket_latency_points([(50.0, 0.2), (140.0, 0.6), (350.0, 0.3), (420.0, 0.3), (1400.0, 0.9)]) \
        == "50:200.0;140:400.0;350:400.0;420:400.0;1400:900.0"
    # Gaps that round alike (a noisy backward) are pooled into one point.
    assert calibrate.ddp_bucket_latency_points([(50.2, 0.3), (50.4, 0.4), (400.0, 0.5)]) == "50:350.0;400:500.0"
    # Never below 0; no gap of 0 us.
    assert calibrate.ddp_bucket_latency_points([(0.2, 0.9), (30.0, -0.1), (90.0, 0.1)]) == "30:0.0;90:100.0"
    assert calibrate.ddp_bucket_latency_points([]) == ""


def test_bucket_latency_curves_name_their_bucket_counts() -> None:
    assert calibrate.bucket_latency_curves({16: "35:250.0;104:350.0", 4: "140:600.0"}) == \
        "4@140:600.0|16@35:250.0;104:350.0"
    # One curve alone prices every count; one without points is left out.
    assert calibrate.bucket_latency_curves({16: "35:250.0", 4: ""}) == "35:250.0"
    assert calibrate.bucket_latency_curves({16: ""}) == ""


@pytest.mark.parametrize("xs, ys, fit", [
    ([2, 16, 64], [164.0, 256.0, 594.0], (147.7, 6.96)),  # DDP's extra time on this host, roughly
    ([2, 16, 64], [300.0, 200.0, 100.0], (200.0, 0.0)),   # falling: no per-gradient cost, the mean per step
    ([2, 16, 64], [0.0, 150.0, 630.0], (0.0, 9.81)),      # through zero rather than a negative intercept
])
def test_ddp_overhead_line_is_fitted_with_nonnegative_terms(xs, ys, fit) -> None:
    got = calibrate._line_fit(xs, ys)
    assert got == pytest.approx(fit, abs=0.1)


def test_calibrate_network_fails_fast_when_a_rank_dies(tmp_path) -> None:
    # A script without a __main__ guard: each spawned rank re-runs it on
    # import and dies at once. The error must say so, not wait out the timeout.
    script = tmp_path / "unguarded.py"
    script.write_text("import daydream\n"
                      "try:\n"
                      "    daydream.calibrate_network(timeout_s=100)\n"
                      "except daydream.DaydreamError as e:\n"
                      "    print('ERROR', e)\n")
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import time as clock  # noqa: PLC0415

    start = clock.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90)
    assert re.search(r"ERROR calibrate_network: gloo between 2 local processes failed: rank \d exited with code 1",
                     proc.stdout), proc.stdout
    assert "__main__" in proc.stdout
    assert clock.monotonic() - start < 60


@pytest.mark.parametrize("kwargs, message", [
    ({"world_size": 1}, "world_size must be at least 2"),
    ({"max_mb": 0}, "max_mb must be in"),
    ({"repeats": 0}, "repeats must be at least 1"),
])
def test_calibrate_network_rejects_bad_arguments(kwargs, message) -> None:
    with pytest.raises(DaydreamError, match=message):
        daydream.calibrate_network(**kwargs)


# --- amp on CPU: per-op bf16/fp32 factors replayed from the trace ---------------------------
from daydream import calibrate  # noqa: E402
from daydream.calibrate import RecordedOp  # noqa: E402


def _op(name: str, phase: str, dims, strides, types=None, concrete=None) -> RecordedOp:
    n = len(dims)
    event = {"name": name, "args": {"Input Dims": dims, "Input Strides": strides,
                                    "Input type": types or ["float"] * n, "Concrete Inputs": concrete or [""] * n}}
    return RecordedOp.from_event(event, phase)


LINEAR_ADDMM = dict(name="aten::addmm", dims=[[16], [8, 32], [32, 16], [], []], strides=[[1], [32, 1], [1, 32], [], []],
                    types=["float", "float", "float", "Scalar", "Scalar"], concrete=["", "", "", "1", "1"])
CONV = dict(name="aten::mkldnn_convolution", dims=[[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],
            strides=[[192, 64, 8, 1], [27, 9, 3, 1], [1], [], [], [], []],
            types=["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
            concrete=["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"])


def test_recorded_op_weight_inputs_are_a_forward_linear_or_convolution_weight_and_bias() -> None:
    assert _op(phase="forward", **LINEAR_ADDMM).weight_inputs() == [0, 2]
    assert _op(phase="backward", **LINEAR_ADDMM).weight_inputs() == []  # backward: no cast of weights
    assert _op(phase="forward", **CONV).weight_inputs() == [1, 2]
    # mm of a transposed weight (a bias-free linear) and of two activations.
    assert _op("aten::mm", "forward", [[8, 32], [32, 16]], [[32, 1], [1, 32]]).weight_inputs() == [1]
    assert _op("aten::mm", "forward", [[8, 32], [32, 16]], [[32, 1], [16, 1]]).weight_inputs() == []


@pytest.mark.parametrize("op", [
    _op(phase="forward", **LINEAR_ADDMM),
    _op(phase="forward", **CONV),
    _op("aten::convolution_backward", "backward", [[2, 4, 8, 8], [2, 3, 8, 8], [4, 3, 3, 3]] + [[]] * 8,
        [[256, 64, 8, 1], [192, 64, 8, 1], [27, 9, 3, 1]] + [[]] * 8,
        ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"],
        ["", "", "", "[4]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, True]"]),
    _op("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "backward",
        [[2, 2, 4, 8]] * 5 + [[2, 2, 4]] + [[]] * 4, [[64, 32, 8, 1]] * 5 + [[8, 4, 1]] + [[]] * 4,
        ["float"] * 6 + ["Scalar", "Scalar", "", ""], [""] * 6 + ["0.", "False", "", ""]),
], ids=["addmm", "convolution", "convolution_backward", "flash_attention_backward"])
def test_amp_op_factor_replays_the_recorded_op_in_fp32_and_bf16(op: RecordedOp) -> None:
    assert calibrate.amp_op_factor(op, repeats=2) > 0


def test_amp_op_factor_refuses_an_op_recorded_in_half_precision() -> None:
    bf16 = dict(LINEAR_ADDMM, types=["c10::BFloat16"] * 3 + ["Scalar", "Scalar"])
    with pytest.raises(ValueError, match="recorded in c10::BFloat16, not fp32"):
        calibrate.amp_op_factor(_op(phase="forward", **bf16), repeats=1)


def test_amp_op_factor_adds_the_weight_casts_and_their_gradients_to_a_forward_op(monkeypatch) -> None:
    calls = []

    def fake_times(fns, repeats):  # fp32 op 1, bf16 op 2, each cast 0.25
        calls.append(len(fns))
        return [1.0, 2.0] + [0.25] * (len(fns) - 2)

    monkeypatch.setattr(calibrate, "_paired_median_times", fake_times)
    # Weight and bias: cast to bf16 in forward, their gradients back in backward.
    assert calibrate.amp_op_factor(_op(phase="forward", **LINEAR_ADDMM)) == pytest.approx(3.0)
    assert calibrate.amp_op_factor(_op(phase="backward", **LINEAR_ADDMM)) == pytest.approx(2.0)
    assert calls == [6, 2]


def _profiled_mlp(tmp_path):
    torch = pytest.importorskip("torch")
    from daydream.capture import training_step
    from models import build

    model = build("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # A batch whose matmuls outlast their aten::resolve_conj children by far
    # more than the builder's min_self_task_ns (20 us), so each is a task on
    # any host (at batch 16 some were, some not, from run to run).
    step = training_step(model, torch.randn(1024, 64), torch.randint(0, 10, (1024,)), torch.nn.CrossEntropyLoss(),
                         opt)
    prof = daydream.Profiler(wait=0, warmup=1, active=2, model=model, optimizer=opt)
    with prof:
        for _ in range(3):
            step()
            prof.step()
    path = tmp_path / "mlp.json"
    prof.save_trace(str(path))
    return daydream.build_graph(path), path


def test_amp_cpu_op_factors_cover_every_matmul_of_forward_and_backward_by_trace_event(tmp_path, monkeypatch) -> None:
    graph, _ = _profiled_mlp(tmp_path)
    replayed = []
    monkeypatch.setattr(calibrate, "amp_op_factor", lambda op, repeats=20: replayed.append(op) or 1.5)
    factors = calibrate.amp_cpu_op_factors(graph)
    tasks = [graph.task(i) for i in range(graph.num_tasks)]
    matmuls = {t["trace_event"] for t in tasks if t["name"] in ("aten::mm", "aten::addmm")
               and t["phase"] in ("forward", "backward")}
    assert matmuls and set(factors) == matmuls
    assert all(f == 1.5 for f in factors.values())
    # Each distinct op (name, phase, shapes) is replayed once: 3 linears forward, 2 iterations.
    assert len(replayed) == len(set(replayed)) < len(matmuls)
    assert calibrate.format_op_factors({7: 1.5, 3: 0.25}) == "3=0.25;7=1.5"


def test_predict_amp_on_cpu_uses_the_per_op_factors_else_the_gemm_ratio(tmp_path) -> None:
    graph, path = _profiled_mlp(tmp_path)
    pred = daydream.predict(graph, opt="amp")
    assert "cpu_op_factors=" in pred.opts[0] and "cpu_gemm_factor" not in pred.opts[0]
    assert any("replayed at their recorded shapes" in n and "not per phase: no model and input shapes" in n
               for n in pred.notes), pred.notes
    assert any("ops at their measured bf16/fp32 factors" in n for n in pred.notes)
    path.unlink()  # the trace is gone: one measured GEMM ratio instead
    pred = daydream.predict(graph, opt="amp")
    assert "cpu_gemm_factor=" in pred.opts[0]
    assert any("no per-op factors" in n and "cannot read the trace" in n for n in pred.notes)


def test_amp_cpu_op_factors_refuse_a_trace_that_no_longer_matches_the_graph(tmp_path) -> None:
    graph, path = _profiled_mlp(tmp_path)
    path.write_text('{"traceEvents": [{"ph": "X", "name": "aten::relu", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}')
    with pytest.raises(DaydreamError, match="is not the op the graph's task names"):
        calibrate.amp_cpu_op_factors(graph)


def test_predict_keeps_the_trace_of_a_model_it_profiles_for_the_calibration() -> None:
    import gc

    torch = pytest.importorskip("torch")
    from daydream import prediction
    from models import batch_for, build

    x, y = batch_for("mlp")
    recorded = prediction._baseline(build("mlp"), x, y, torch.nn.CrossEntropyLoss(), None, 1, 1)
    gc.collect()  # a Profiler nobody holds would delete its trace
    assert os.path.exists(recorded.graph.source)
    pred = daydream.predict(build("mlp"), opt="amp", inputs=x, target=y, loss_fn=torch.nn.CrossEntropyLoss(),
                            warmup=1, active=1)
    # A model and its inputs' shapes: the per-phase replay of what autocast would run.
    assert any("amp_cpu_phase_times" in n for n in pred.notes), pred.notes


def test_amp_cpu_phase_times_replay_what_autocast_would_run_in_each_phase() -> None:
    torch = pytest.importorskip("torch")
    from models import build

    model = build("cnn")
    inputs = [((4, 3, 16, 16), torch.float32)]
    amp_ops = calibrate._symbolic_step_ops(model, inputs, autocast=True)
    fp32_ops = calibrate._symbolic_step_ops(model, inputs, autocast=False)

    def dtypes(ops, name):
        return [str(a.dtype) for phase, f, args, _ in ops if f.overloadpacket.__name__ == name
                for a in args[:1] if isinstance(a, torch.Tensor)]

    # Autocast casts weights and inputs, and batch norm and ReLU then run on bf16.
    assert any(f.overloadpacket.__name__ == "_to_copy" for _, f, _, _ in amp_ops)
    assert set(dtypes(amp_ops, "relu")) == {"torch.bfloat16"}
    assert set(dtypes(amp_ops, "native_batch_norm")) == {"torch.bfloat16"}
    assert set(dtypes(fp32_ops, "relu")) == {"torch.float32"}
    assert {p for p, _, _, _ in amp_ops} == {"forward", "backward"}
    assert all(p.grad is None for p in model.parameters())  # the model itself was not touched
    times = calibrate.amp_cpu_phase_times(model, inputs, repeats=3)
    assert set(times) == {"forward", "backward"}
    assert all(amp > 0 and fp32 > 0 for amp, fp32 in times.values())
    # A model whose replay would hold too much is not replayed (predict falls back to per-op factors).
    with pytest.raises(DaydreamError, match=r"replaying SmallCNN's ops would hold .* GiB of inputs"):
        calibrate.amp_cpu_phase_times(model, inputs, repeats=3, max_bytes=1 << 10)


def test_a_forward_logged_under_autocast_is_replayed_under_it() -> None:
    torch = pytest.importorskip("torch")
    seen = []

    def probe():  # noqa: ANN202
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_grad_enabled()))

    calibrate._replay([probe], autocast=True)()
    calibrate._replay([probe], autocast=False)()
    assert seen == [(True, torch.bfloat16, False), (False, seen[1][1], False)]


def test_amp_cpu_phase_times_of_a_model_fake_tensors_cannot_run_is_an_error() -> None:
    torch = pytest.importorskip("torch")

    class DataDependent(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN202
            return x * float(x.sum())  # needs the values

    with pytest.raises(DaydreamError, match="DataDependent cannot run on fake tensors"):
        calibrate.amp_cpu_phase_times(DataDependent(), [((4,), torch.float32)])


def test_replay_timing_stops_repeating_slow_ops_after_its_budget() -> None:
    import time

    calls = []

    def slow() -> None:
        calls.append(1)
        time.sleep(0.01)

    times = calibrate._paired_median_times([slow, slow], repeats=50, budget_s=0.05)
    assert len(times) == 2 and all(t >= 0.009 for t in times)
    assert len(calls) <= 2 * (2 + 4)  # two warm-ups, then repeats until 3 are done and the budget is spent


def test_phase_replays_sample_a_second_at_least_not_fifteen_calls(monkeypatch) -> None:
    """An emulated bf16 matmul's speed moves by half from one tenth of a
    second to the next: fifteen repeats of a fast list saw one speed."""
    torch = pytest.importorskip("torch")
    from models import build

    calls = []
    replay = calibrate._replay

    def counted(ops, autocast):  # noqa: ANN001, ANN202
        run = replay(ops, autocast)

        def wrapper() -> None:
            calls.append(autocast)
            run()
        return wrapper

    monkeypatch.setattr(calibrate, "_replay", counted)
    calibrate.amp_cpu_phase_times(build("mlp"), [((2, 64), torch.float32)])  # predict's repeats (15)
    # Two phases, two lists each, two warm-ups per list; a tiny batch's
    # lists take well under a millisecond, so a second is far more than 15.
    assert len(calls) > 4 * (2 + 15) * 3, len(calls)


def test_profiler_overhead_is_a_positive_cost_per_record_within_sane_bounds() -> None:
    from daydream.calibrate import profiler_overhead

    cost = profiler_overhead()
    # A profiler record costs at least tens of ns and, even on a busy
    # machine, far less than a millisecond.
    assert 20 < cost.per_record_ns < 200_000, cost
    assert 0 <= cost.module_hook_ns < 500_000, cost
    assert 0 <= cost.grad_hook_ns < 500_000, cost
    assert cost.begin_ns + cost.end_ns == round(cost.per_record_ns)
    assert cost.fit and all(records > 0 for records, _ in cost.fit)
    assert "per recorded op" in cost.describe()


def test_kineto_marks_are_dropped_and_the_rest_of_stderr_kept_in_order(capfd) -> None:
    from daydream.calibrate import _without_kineto_marks

    with _without_kineto_marks():
        os.write(2, b"USDT:2026-11-27 10:00:00 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a warning\n")
        os.write(2, b"USDT:2026-11-27 10:00:00 1:1 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
        os.write(2, b"an error, not a USDT: line\nlast")
    assert capfd.readouterr().err == "a warning\nan error, not a USDT: line\nlast"
    # A block that raises gives stderr back too, with what it wrote.
    with pytest.raises(RuntimeError, match="boom"):
        with _without_kineto_marks():
            os.write(2, b"USDT: x\nbefore the error\n")
            raise RuntimeError("boom")
    assert capfd.readouterr().err == "before the error\n"
    os.write(2, b"USDT: after\n")  # stderr itself is untouched afterwards
    assert capfd.readouterr().err == "USDT: after\n"


def test_profiler_overhead_calibration_leaves_no_kineto_marks_on_stderr(capfd) -> None:
    from torch.profiler import ProfilerActivity, profile

    from daydream.calibrate import profiler_overhead

    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(2).add_(1)
    if "USDT:" not in capfd.readouterr().err:
        pytest.skip("this torch writes no kineto marks on stderr")
    profiler_overhead.cache_clear()
    cost = profiler_overhead(rounds=1, repeats=2)  # a dozen profiler sessions
    assert len(cost.fit) == 3
    assert "USDT:" not in capfd.readouterr().err



# --- corun_cpu_factor ----------------------------------------------------------------------------

import torch  # noqa: E402 - the module skips without it, above

# A page shared with forked children: a helper stamps it while it steps, and
# the parent's copy of _Neighbourly sees whether one ran beside it.
_STAMP = __import__("mmap").mmap(-1, 8)
_PARENT = os.getpid()


class _Neighbourly(torch.nn.Module):
    """A model that takes 2 ms alone and 4 ms while a copy of it steps in
    another process: what ranks sharing a host would see, made exact."""

    def __init__(self, fail_in_helper: bool = False, hang_in_helper: bool = False) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))
        self.fail_in_helper = fail_in_helper
        self.hang_in_helper = hang_in_helper

    def forward(self, x):  # noqa: ANN001, ANN201
        import struct
        import time

        now = time.monotonic()
        if os.getpid() != _PARENT:
            if self.fail_in_helper:
                raise RuntimeError("only in a helper")
            if self.hang_in_helper:
                time.sleep(3600)
            time.sleep(0.001)
            _STAMP[:8] = struct.pack("d", time.monotonic())  # about every 1.1 ms while it steps
        else:
            beside = now - struct.unpack("d", _STAMP[:8])[0] < 0.002
            time.sleep(0.004 if beside else 0.002)
        return (x * self.w).sum()


@pytest.fixture
def single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_corun_cpu_factor_times_the_model_alone_and_beside_copies_in_other_processes(single_thread) -> None:
    import multiprocessing

    model = _Neighbourly()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    corun = calibrate.corun_cpu_factor(model, [torch.ones(4)], world_size=2, repeats=10, round_s=0.02)
    assert 1.6 < corun.factor < 2.5, corun.describe()
    assert corun.measurable and corun.noise < 0.3
    assert corun.processes == 1 and corun.threads == 1 and corun.rounds >= 5
    assert 3.5 < corun.together_ms < 6 and 1.8 < corun.alone_ms < 3, corun.describe()
    assert f"x{corun.factor:.3f}" in corun.describe()
    # The model itself never ran, and no helper is left.
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert not multiprocessing.active_children()


def test_corun_cpu_factor_names_what_it_cannot_time(single_thread, monkeypatch) -> None:
    import multiprocessing

    x = [torch.ones(4)]
    with pytest.raises(DaydreamError, match=r"world_size must be at least 2, got 1"):
        calibrate.corun_cpu_factor(_Neighbourly(), x, world_size=1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    with pytest.raises(DaydreamError, match=r"3 ranks of 1 thread\(s\) need 3 cores; this process may use 2"):
        calibrate.corun_cpu_factor(_Neighbourly(), x, world_size=3)
    with pytest.raises(DaydreamError, match=r"_Neighbourly does not run on the recorded inputs"):
        calibrate.corun_cpu_factor(_Neighbourly(), [torch.ones(3)])
    with pytest.raises(DaydreamError, match=r"a copy of _Neighbourly failed in a helper process"):
        calibrate.corun_cpu_factor(_Neighbourly(fail_in_helper=True), x, round_s=0.01)
    # A helper that stops answering is given up on, and killed.
    with pytest.raises(DaydreamError, match=r"did not stop stepping within 1 s"):
        calibrate.corun_cpu_factor(_Neighbourly(hang_in_helper=True), x, round_s=0.01, timeout_s=1)
    assert not multiprocessing.active_children()
    with pytest.raises(DaydreamError, match=r"Sequential is on meta, not the CPU"):
        calibrate.corun_cpu_factor(torch.nn.Sequential(torch.nn.Linear(4, 4)).to("meta"), x)
    with pytest.raises(DaydreamError, match=r"4 copies of _Neighbourly would take"):
        calibrate.corun_cpu_factor(_Neighbourly(), x, max_bytes=16)

    def no_children(self):  # noqa: ANN001, ANN202
        raise AssertionError("daemonic processes are not allowed to have children")
    monkeypatch.setattr(multiprocessing.get_context("fork").Process, "start", no_children)
    with pytest.raises(DaydreamError, match=r"no helper process could be started: AssertionError: daemonic"):
        calibrate.corun_cpu_factor(_Neighbourly(), x)


def test_batches_for_step_lengths_interpolate_between_doublings_and_hold_against_a_noisy_timing() -> None:
    timed = []

    def linear(batch: int) -> float:  # 1 ms per sample
        timed.append(batch)
        return batch * 1e-3

    got = calibrate.batches_for_step_lengths(linear, [0.5e-3, 3e-3, 6e-3, 100e-3], max_batch=16)
    assert got == [None, 3, 6, 16]  # below batch 1; between 2 and 4; between 4 and 8; past the largest batch
    assert timed == [1, 2, 4, 8, 16]  # doubling, up to max_batch
    # One slow timing (batch 4 at 20 ms) holds the later ones at it: batch
    # 8's 8 ms counts as 20 ms, so 30 ms lies 10/20 of the way from 8 to 16
    # (taken as timed, 22/32 of it: 14).
    noisy = {1: 1e-3, 2: 2e-3, 4: 20e-3, 8: 8e-3, 16: 40e-3}
    assert calibrate.batches_for_step_lengths(noisy.__getitem__, [30e-3], max_batch=16) == [12]
