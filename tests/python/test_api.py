"""The Python API on real traces: load, build, summarize, save/load, simulate, replay."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import daydream
from conftest import tiny_training_events, write_trace


def test_load_trace_reads_the_bundled_real_trace(example_trace: Path) -> None:
    trace = daydream.load_trace(example_trace)
    s = trace.summary()
    assert s["num_events"] == len(trace) > 40_000
    assert s["events_by_kind"]["kernel"] == 4350
    assert s["events_by_kind"]["cuda_runtime"] == 15329
    assert s["rank"] == 0 and s["world_size"] == 1
    assert s["devices"][0]["name"].startswith("Tesla V100")
    assert any("autograd" in t["name"] for t in s["threads"])
    assert [st["tid"] for st in s["streams"]] == [7]


def test_graph_summary_has_lowercase_kinds_and_phases(example_trace: Path) -> None:
    graph = daydream.build_graph(daydream.load_trace(example_trace))
    s = graph.summary()
    assert s["tasks_by_kind"]["kernel"] == 4350
    assert s["tasks_by_kind"]["memcpy"] == 1600
    for phase in ("forward", "backward", "optimizer"):
        assert s["tasks_by_phase"][phase] > 0, phase
    assert s["edges_by_kind"]["launch"] == 4350 + 1600 + 145 - s["edges_by_kind"]["blocking_launch"]
    assert [it["name"] for it in graph.iterations] == [f"ProfilerStep#{i}" for i in range(101, 106)]
    assert graph.device["compute_capability"] == (7, 0)


def test_build_graph_accepts_a_path(example_trace: Path) -> None:
    assert daydream.build_graph(example_trace).num_tasks == daydream.build_graph(str(example_trace)).num_tasks


def test_graph_save_and_load_round_trip_exactly(example_trace: Path, tmp_path: Path) -> None:
    graph = daydream.build_graph(example_trace)
    out = tmp_path / "g.ddg"
    graph.save(str(out))
    loaded = daydream.Graph.load(str(out))
    assert loaded.to_bytes() == graph.to_bytes()
    assert loaded.summary() == graph.summary()
    assert daydream.simulate(loaded).makespan_ms == daydream.simulate(graph).makespan_ms


def test_graph_copy_is_independent_and_equal(example_trace: Path) -> None:
    graph = daydream.build_graph(example_trace)
    copy = graph.copy()
    assert copy is not graph and copy.to_bytes() == graph.to_bytes()


def test_simulate_reports_iterations_and_critical_path(example_trace: Path) -> None:
    schedule = daydream.simulate(daydream.build_graph(example_trace))
    assert len(schedule.iterations) == 5
    it = schedule.iterations[-1]
    assert it["measured_ms"] == pytest.approx(95.699037)
    assert it["replayed_ms"] > 0
    path = schedule.critical_path
    assert len(path) > 100
    # Each task was held back by the one before it: none ends before its
    # binder began (a launch call held open by a full queue ends after the
    # kernel whose start freed a slot, so starts alone need not be sorted).
    assert all(schedule.end_ns[q] >= schedule.start_ns[p] for p, q in zip(path, path[1:]))
    summary = schedule.critical_path_summary
    assert sum(summary["by_kind_ms"].values()) == pytest.approx(summary["length_ms"], rel=1e-9)


def test_replay_matches_measured_time_on_the_bundled_trace(example_trace: Path) -> None:
    result = daydream.replay(example_trace)
    assert isinstance(result, daydream.ReplayResult)
    assert [it.name for it in result.iterations] == [f"ProfilerStep#{i}" for i in range(101, 106)]
    assert result.median_error_pct <= 5.0
    d = result.to_dict()
    assert set(d) >= {"trace", "iterations", "median_error_pct", "critical_path"}
    assert set(d["iterations"][0]) >= {"name", "measured_ms", "replayed_ms", "error_pct"}
    json.dumps(d)
    first = result.iterations[0]
    assert first.to_dict() == d["iterations"][0]
    assert first.to_dict()["replayed_ms"] == first.replayed_ms


def test_replay_timeline_is_perfetto_json_with_every_task(example_trace: Path, tmp_path: Path) -> None:
    graph = daydream.build_graph(example_trace)
    result = daydream.replay(graph)
    out = tmp_path / "timeline.json"
    result.timeline(out)
    doc = json.loads(out.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == graph.num_tasks
    names = {e["name"] for e in spans}
    assert "cudaLaunchKernel" in names and "volta_sgemm_64x64_nt" in names
    # The timeline loads back as a trace.
    assert daydream.load_trace(out).num_events >= graph.num_tasks


def test_exact_latencies_reproduce_every_iteration(example_trace: Path) -> None:
    result = daydream.replay(daydream.build_graph(example_trace, exact_latencies=True))
    for it in result.iterations:
        assert abs(it.replayed_ms - it.measured_ms) < 1e-3, it


def test_load_job_reads_every_rank_of_a_directory(shared_traces: Path) -> None:
    job = daydream.load_job(shared_traces / "param-dlrm-v100-8rank")
    assert job.ranks == list(range(8))
    assert all(t.world_size == 8 for t in job.traces)
    graphs = job.graphs()
    assert all(g.summary()["tasks_by_kind"]["collective"] > 0 for g in graphs)


def test_a_jobs_ranks_are_built_and_replayed_at_once_as_one_at_a_time(shared_traces: Path) -> None:
    job = daydream.load_job(shared_traces / "param-dlrm-v100-8rank")
    alone = [daydream.replay(daydream.build_graph(t)) for t in job.traces]
    together = daydream.replay(shared_traces / "param-dlrm-v100-8rank").ranks
    assert [(r.rank, r.trace, r.graph) for r in together] == [(r.rank, r.trace, r.graph) for r in alone]
    assert [[it.replayed_ms for it in r.iterations] for r in together] == \
        [[it.replayed_ms for it in r.iterations] for r in alone]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_usable_cpus_follows_the_affinity_mask() -> None:
    from daydream.api import usable_cpus

    before = os.sched_getaffinity(0)
    assert usable_cpus() == len(before)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert usable_cpus() == 1
    finally:
        os.sched_setaffinity(0, before)


def test_each_rank_keeps_the_order_and_raises_the_first_error_in_it() -> None:
    import time

    from daydream.api import _each_rank

    def slow_square(x: int) -> int:
        time.sleep(0.01 * (5 - x))  # the later items finish first
        if x in (2, 4):
            raise ValueError(f"item {x}")
        return x * x

    assert _each_rank(lambda x: x * x, list(range(6))) == [0, 1, 4, 9, 16, 25]
    with pytest.raises(ValueError, match="item 2"):
        _each_rank(slow_square, list(range(6)))
    assert _each_rank(slow_square, []) == []


def test_replay_of_a_directory_reports_each_rank(shared_traces: Path, tmp_path: Path) -> None:
    result = daydream.replay(shared_traces / "astra-megatron-tp8-a100")
    assert isinstance(result, daydream.JobReplayResult)
    assert [r.rank for r in result.ranks] == list(range(8))
    assert result.median_error_pct <= 5.0
    out = tmp_path / "job.json"
    result.timeline(out)
    doc = json.loads(out.read_text())
    labels = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert any(label.startswith("rank 7") for label in labels)


def test_load_trace_of_a_directory_points_to_load_job(shared_traces: Path) -> None:
    with pytest.raises(daydream.DaydreamError, match="load_job"):
        daydream.load_trace(shared_traces / "param-dlrm-v100-8rank")


def test_phases_of_a_tiny_training_trace(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "tiny.json", tiny_training_events())
    graph = daydream.build_graph(path)
    phases = {graph.task(i)["name"]: graph.task(i)["phase"] for i in range(graph.num_tasks)}
    assert phases["gemm_0"] == "forward"
    assert phases["gemm_1"] == "backward"
    assert phases["gemm_2"] == "optimizer"
    result = daydream.replay(graph)
    assert [it.name for it in result.iterations] == ["ProfilerStep#0", "ProfilerStep#1"]
    for it in result.iterations:
        assert it.measured_ms == pytest.approx(0.9)


def test_error_is_a_runtime_error() -> None:
    assert issubclass(daydream.DaydreamError, RuntimeError)
