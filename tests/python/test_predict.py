"""daydream.predict, daydream.passes and `daydream predict` (issue 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import daydream

if os.environ.get("DAYDREAM_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

from models import batch_for, build  # noqa: E402


@pytest.fixture(scope="module")
def graph(example_trace: Path) -> daydream.Graph:
    return daydream.build_graph(example_trace)


ALL_PASSES = ("amp", "fused_optimizer", "tensor_fusion", "data_parallel", "p3", "op_fusion", "cuda_graphs",
              "scale", "batch_size")


def test_passes_lists_each_pass_with_options_and_model() -> None:
    items = {p["name"]: p for p in daydream.passes()}
    assert tuple(items) == ALL_PASSES
    for name in ALL_PASSES:
        assert name in items
        assert items[name]["model"] and items[name]["summary"]
        for o in items[name]["options"]:
            assert set(o) == {"name", "type", "default", "help"} and o["help"]


# How each pass is asked about the bundled GPU-bound ResNet-50 trace, and
# whether it must make the step faster (True), slower (False) or may leave it.
GPU_WHAT_IFS = {
    "amp": ("amp", True),
    "fused_optimizer": ("fused_optimizer", None),
    "tensor_fusion": ("tensor_fusion:world_size=8,network=ethernet10", False),
    "data_parallel": ("data_parallel:world_size=8,network=ethernet10", False),
    "p3": (["data_parallel:world_size=8,network=ethernet10,bucket_mb=0", "p3"], False),
    "op_fusion": ("op_fusion", True),
    "cuda_graphs": ("cuda_graphs", None),
    "scale": ("scale:gpu=0.5", True),
    "batch_size": ("batch_size:factor=2", False),
}


@pytest.mark.parametrize("name", ALL_PASSES)
def test_every_pass_predicts_on_the_bundled_gpu_trace(graph: daydream.Graph, name: str) -> None:
    spec, faster = GPU_WHAT_IFS[name]
    pred = daydream.predict(graph, opt=spec)
    assert pred.notes and any(n.startswith(name + ":") for n in pred.notes)
    if faster is True:
        assert pred.speedup > 1.01
    elif faster is False:
        assert pred.speedup < 0.99
    else:
        assert pred.speedup >= 0.999  # removes CPU work from a GPU-bound step: no slower


def test_predict_returns_measured_replayed_predicted_and_speedup(graph: daydream.Graph) -> None:
    pred = daydream.predict(graph, opt="scale:gpu=0.5,cpu=0.5")
    assert pred.measured_ms == pytest.approx(95.699037)
    assert pred.replayed_ms == pytest.approx(pred.measured_ms, rel=0.05)
    assert pred.predicted_ms < pred.replayed_ms
    assert pred.speedup == pytest.approx(pred.replayed_ms / pred.predicted_ms)
    assert pred.by_phase["before"]["backward"] > pred.by_phase["after"]["backward"]
    assert set(pred.to_dict()) >= {"opts", "measured_ms", "replayed_ms", "predicted_ms", "speedup"}
    json.dumps(pred.to_dict())


def test_keyword_options_go_to_the_passes_that_take_them(graph: daydream.Graph) -> None:
    by_kwargs = daydream.predict(graph, opt="data_parallel", world_size=8, network="pcie")
    by_spec = daydream.predict(graph, opt="data_parallel:world_size=8,network=pcie")
    assert by_kwargs.predicted_ms == by_spec.predicted_ms
    assert "pcie" in by_kwargs.notes[0]


@pytest.fixture(scope="module")
def cpu_graph() -> daydream.Graph:
    """An MLP's training step recorded on a CPU (its gradients in the trace)."""
    path = Path(__file__).resolve().parents[1] / "data" / "passes" / "cpu_adam_mlp.pt.trace.json.gz"
    return daydream.build_graph(daydream.load_trace(str(path)))


def _calibration(**fields):
    from daydream import calibrate

    samples = [{"bytes": 4096, "mean_ms": 1.45, "median_ms": 0.28}]
    return calibrate.NetworkCalibration("gloo", 2, 700.0, 1.4, samples, gaps={"gap_latency": "500:40.0"},
                                        gap_latency="2000:300.0", ddp_cpu_us=26.0, ddp_cpu_per_gradient_us=1.5,
                                        **fields)


def test_a_network_calibration_gives_each_communication_pass_its_options_and_caveats(
        cpu_graph: daydream.Graph) -> None:
    graph = cpu_graph
    net = _calibration(stalled_share=0.3)
    calibrated = daydream.predict(graph, opt=["data_parallel:world_size=2", "scale"], network=net)
    by_hand = daydream.predict(graph, opt=["data_parallel:world_size=2", "scale"], **net.options())
    assert calibrated.predicted_ms == by_hand.predicted_ms
    assert "latency_us=700.0" in calibrated.opts[0] and "latency_us" not in calibrated.opts[1]
    # No model to measure DDP's CPU work on: the calibration's Linear stacks' stand in, and say so.
    assert "ddp_cpu_us=26.0" in calibrated.opts[0] and "ddp_cpu_per_gradient_us=1.5" in calibrated.opts[0]
    assert any("from the network calibration's Linear stacks" in n for n in calibrated.notes)
    (caveat,) = [n for n in calibrated.notes if "stalled" in n]
    assert caveat.startswith("data_parallel: 30% of the calibration's all-reduces stalled")
    assert not [n for n in calibrated.notes if "calibrated with 2 ranks" in n]
    # tensor_fusion gets its own options: no gap_latency (its recorded step
    # holds the wake-ups) and, with medians of two sizes, their ring.
    fused = daydream.predict(graph, opt="tensor_fusion:world_size=8", network=net)
    assert "gap_latency" not in fused.opts[0] and "latency_us=700.0" in fused.opts[0]
    net.samples = net.samples + [{"bytes": 1 << 20, "mean_ms": 3.0, "median_ms": 1.0}]
    fused = daydream.predict(graph, opt="tensor_fusion:world_size=8", network=net)
    latency_us, _ = net.median_ring()
    assert "gap_latency" not in fused.opts[0] and "latency_us=700.0" not in fused.opts[0]
    assert f"latency_us={latency_us}," in fused.opts[0]
    assert any("calibrated with 2 ranks and is taken as it is for 8" in n for n in fused.notes)
    # A calibration without stalls adds no caveat.
    net.stalled_share = 0.0
    assert not [n for n in daydream.predict(graph, opt="data_parallel:world_size=2", network=net).notes
                if "stalled" in n]


def test_a_network_calibration_stays_under_what_the_request_gives(cpu_graph: daydream.Graph) -> None:
    graph = cpu_graph
    net = _calibration(stalled_share=0.3)
    # An option given in the spec, or as a keyword before or after network=, wins.
    for kwargs in ({"network": net, "latency_us": 5}, {"latency_us": 5, "network": net}):
        pred = daydream.predict(graph, opt="data_parallel:world_size=2", **kwargs)
        assert "latency_us=5" in pred.opts[0] and "latency_us=700" not in pred.opts[0]
    pred = daydream.predict(graph, opt="tensor_fusion:world_size=2,latency_us=5", network=net)
    assert "latency_us=5" in pred.opts[0] and "latency_us=700" not in pred.opts[0]
    # A request that names its own network takes nothing from the calibration, nor its caveat.
    from daydream import prediction

    requests = prediction._requests(["data_parallel:world_size=8,network=ib100", "tensor_fusion"], {"network": net})
    assert requests[0] == ("data_parallel", {"world_size": "8", "network": "ib100"})
    assert requests[1][1]["latency_us"] == "700.0"
    (caveat,) = prediction._calibration_notes(requests, net)
    assert caveat.startswith("tensor_fusion: 30% of the calibration's all-reduces stalled")
    # p3 prices slices of the all-reduces in the graph: it takes no calibration.
    both = daydream.predict(graph, opt=["data_parallel:world_size=2,bucket_mb=0", "p3"], network=net)
    assert "latency_us=700.0" in both.opts[0] and both.opts[1] == "p3"
    (caveat,) = [n for n in both.notes if "stalled" in n]  # once, for the pass that took it
    assert caveat.startswith("data_parallel: ")
    for opt in ("scale", "p3", "data_parallel:network=ib100"):
        with pytest.raises(daydream.DaydreamError, match="network=: a NetworkCalibration sets the options of "
                                                         "data_parallel and tensor_fusion"):
            daydream.predict(graph, opt=opt, network=net)


def test_a_network_calibration_leaves_ddps_cpu_work_to_be_measured_on_the_model(monkeypatch) -> None:
    from daydream import calibrate

    model = build("mlp")
    inputs, target = batch_for("mlp")
    # DDP's CPU work on the model: 0.2 ms more in the forward, 0.4 ms more in the backward.
    monkeypatch.setattr(calibrate, "ddp_cpu_phase_times",
                        lambda m, xs: {"forward": (1.2, 1.0), "backward": (2.4, 2.0)})
    pred = daydream.predict(model, opt="data_parallel:cpu_factor=1", inputs=inputs, target=target,
                            loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2, world_size=2,
                            network=_calibration())
    assert "ddp_cpu_us=200.0" in pred.opts[0] and "ddp_cpu_us=26" not in pred.opts[0]
    assert any("DDP's own CPU work on" in n for n in pred.notes)
    # Where it cannot be measured, the calibration's stand in.

    def fails(m, xs):
        raise daydream.DaydreamError("no gloo here")

    monkeypatch.setattr(calibrate, "ddp_cpu_phase_times", fails)
    pred = daydream.predict(model, opt="data_parallel:cpu_factor=1", inputs=inputs, target=target,
                            loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2, world_size=2,
                            network=_calibration())
    assert "ddp_cpu_us=26.0" in pred.opts[0]
    assert any("not measured on the model (no gloo here); from the network calibration's" in n for n in pred.notes)


def test_an_option_no_requested_pass_takes_is_an_error(graph: daydream.Graph) -> None:
    with pytest.raises(daydream.DaydreamError, match="no requested optimization takes option 'bucket_mb'"):
        daydream.predict(graph, opt="scale", bucket_mb=25)


def test_an_unknown_optimization_is_an_error_listing_the_known_ones(graph: daydream.Graph) -> None:
    with pytest.raises(daydream.DaydreamError, match="unknown optimization 'warp_drive'.*data_parallel"):
        daydream.predict(graph, opt="warp_drive")


def test_a_pass_that_cannot_apply_says_why(graph: daydream.Graph, tmp_path: Path) -> None:
    with pytest.raises(daydream.DaydreamError, match="scale: no task name matches the pattern"):
        daydream.predict(graph, opt="scale:pattern=no_such_kernel_name,factor=0.5")


def test_passes_compose_in_order(graph: daydream.Graph) -> None:
    one = daydream.predict(graph, opt="scale:gpu=0.5,cpu=0.5")
    two = daydream.predict(graph, opt=["scale:gpu=0.5,cpu=0.5", "data_parallel:network=ethernet10"])
    assert two.predicted_ms > one.predicted_ms
    assert len(two.notes) == 2


def test_timeline_holds_baseline_and_prediction_side_by_side(graph: daydream.Graph, tmp_path: Path) -> None:
    pred = daydream.predict(graph, opt="data_parallel:network=pcie")
    out = tmp_path / "t.json"
    pred.timeline(out)
    doc = json.loads(out.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert any(n.startswith("baseline:") for n in names)
    assert any(n.startswith("predicted: data_parallel") for n in names)
    assert any("network" in n for n in names)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == graph.num_tasks + pred.graph.num_tasks


def test_predictions_from_one_graph_share_its_baseline_replay(example_trace: Path) -> None:
    from daydream import api

    g = daydream.build_graph(example_trace)
    first = daydream.predict(g, opt="scale:gpu=0.5")
    second = daydream.predict(g, opt="scale:gpu=0.8")
    # The second reused the first's replay of the baseline instead of simulating it again.
    assert second._result.baseline_schedule is first._result.baseline_schedule
    assert second.replayed_ms == first.replayed_ms
    assert second.predicted_ms > first.predicted_ms
    # A graph predicted from for the first time gets its own, with the same figures.
    other = daydream.build_graph(example_trace)
    again = daydream.predict(other, opt="scale:gpu=0.8")
    assert again._result.baseline_schedule is not first._result.baseline_schedule
    assert (again.replayed_ms, again.predicted_ms) == (second.replayed_ms, second.predicted_ms)
    assert again.before == second.before and again.critical_path == second.critical_path
    # A replay of another graph is refused.
    with pytest.raises(daydream.DaydreamError, match="baseline= must be a replay of the graph"):
        daydream._core.predict(g, [("scale", {})], again._result.baseline_schedule)
    # Dropped with the graph.
    assert g in api._baseline_replays
    import gc
    import weakref

    kept = weakref.ref(first._result.baseline_schedule)
    del g, first, second
    gc.collect()
    assert kept() is None


def test_removing_profiler_overhead_in_place_forgets_the_graphs_baseline_replay(example_trace: Path) -> None:
    from daydream import api, calibrate

    trace = daydream.load_trace(example_trace)
    overhead = calibrate.ProfilerOverhead(per_record_ns=4000.0, module_hook_ns=0.0, grad_hook_ns=0.0,
                                          record_shapes=False)
    g = daydream.build_graph(trace)
    before = daydream.predict(g, opt="scale:gpu=0.5")
    calibrate.remove_profiler_overhead(trace, g, overhead)
    assert g not in api._baseline_replays
    after = daydream.predict(g, opt="scale:gpu=0.5")
    # As from a graph that was never predicted from before the change.
    fresh = calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), overhead)
    expected = daydream.predict(fresh, opt="scale:gpu=0.5")
    assert after.before == expected.before != before.before
    assert (after.replayed_ms, after.predicted_ms) == (expected.replayed_ms, expected.predicted_ms)
    # The same through the binding itself, which is what changes the graph.
    g2 = daydream.build_graph(trace)
    daydream.predict(g2, opt="scale:gpu=0.5")
    daydream._core.remove_profiler_overhead(trace, g2, **overhead.options())
    assert g2 not in api._baseline_replays
    assert daydream.predict(g2, opt="scale:gpu=0.5").before == expected.before


def test_a_predict_scratch_serves_one_prediction_at_a_time(graph: daydream.Graph) -> None:
    import threading

    from daydream import prediction

    scratch = daydream._core.PredictScratch()
    requests = prediction._requests("scale:gpu=0.5", {})
    expected = daydream._core.predict(graph, requests, None, scratch).predicted_ms
    results, refused = [], []

    def loop() -> None:
        for _ in range(40):
            try:
                results.append(daydream._core.predict(graph, requests, None, scratch).predicted_ms)
            except daydream.DaydreamError as e:
                refused.append(str(e))

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The two threads overlap (each prediction runs without the GIL): the second is refused, never wrong.
    assert refused and all("in use by another prediction (use one per thread)" in e for e in refused)
    assert results and all(r == expected for r in results)
    assert daydream._core.predict(graph, requests, None, scratch).predicted_ms == expected  # free again


def test_predict_and_simulate_refuse_none_for_a_graph() -> None:
    with pytest.raises(daydream.DaydreamError, match="predict: graph is None"):
        daydream._core.predict(None, [("scale", {})])
    with pytest.raises(daydream.DaydreamError, match="simulate: graph is None"):
        daydream._core.simulate(None)


def test_predict_many_predicts_each_variant_as_predict_does(graph: daydream.Graph) -> None:
    specs = ["scale:gpu=0.5", ["scale:gpu=0.5,cpu=0.5", "data_parallel:network=ethernet10"], "scale:gpu=0.9",
             "data_parallel:network=pcie"]
    one_by_one = [daydream.predict(graph, opt=s) for s in specs]
    for threads in (None, 1, 3):
        many = daydream.predict_many(graph, specs, threads=threads)
        assert [p.opts for p in many] == [p.opts for p in one_by_one]
        assert [p.predicted_ms for p in many] == [p.predicted_ms for p in one_by_one]
        assert [p.notes for p in many] == [p.notes for p in one_by_one]
        assert all(p.graph is None for p in many)
    assert daydream.predict_many(graph, []) == []


def test_predict_many_keeps_graphs_only_when_asked(graph: daydream.Graph, tmp_path: Path) -> None:
    dropped = daydream.predict_many(graph, ["scale:gpu=0.5", "scale:gpu=0.6"])
    with pytest.raises(daydream.DaydreamError, match="kept no schedules.*daydream.predict"):
        dropped[1].timeline(tmp_path / "t.json")
    kept = daydream.predict_many(graph, ["scale:gpu=0.5", "scale:gpu=0.6"], keep_graphs=True)
    assert kept[1].graph is not None and kept[1].graph.num_tasks == graph.num_tasks
    kept[1].timeline(tmp_path / "t.json")
    assert (tmp_path / "t.json").stat().st_size > 0


def test_predict_many_from_a_trace_path_reads_it_once(example_trace: Path, monkeypatch) -> None:
    from daydream import api

    reads = []
    load = api.load_trace
    monkeypatch.setattr(api, "load_trace", lambda p: reads.append(p) or load(p))
    preds = daydream.predict_many(str(example_trace), ["scale:gpu=0.5", "scale:gpu=0.8", "scale:gpu=1.2"])
    assert len(reads) == 1
    assert preds[0].predicted_ms < preds[1].predicted_ms < preds[2].predicted_ms


def test_predict_many_stops_at_the_first_error(graph: daydream.Graph, monkeypatch) -> None:
    from daydream import prediction

    ran = []
    real = prediction._predict_recorded
    monkeypatch.setattr(prediction, "_predict_recorded", lambda *a: ran.append(a[2]) or real(*a))
    specs = ["scale:gpu=0.5", "scale:gpu=fast"] + [f"scale:gpu={0.6 + 0.001 * i:.3f}" for i in range(60)]
    with pytest.raises(daydream.DaydreamError, match="'fast'"):
        daydream.predict_many(graph, specs, threads=2)
    assert len(ran) < 20  # the variants queued behind the error were not run


@pytest.mark.parametrize("threads", [1, 2])
def test_predict_many_returns_a_failing_variants_error_in_its_place(graph: daydream.Graph, threads: int) -> None:
    specs = ["scale:gpu=fast", "scale:gpu=0.5", "nosuch", "scale:gpu=0.6", "scale:gpu=0.7"]
    got = daydream.predict_many(graph, specs, threads=threads, return_errors=True)
    assert len(got) == len(specs)
    assert isinstance(got[0], daydream.DaydreamError) and "'fast'" in str(got[0])
    assert isinstance(got[2], daydream.DaydreamError) and "unknown optimization 'nosuch'" in str(got[2])
    for i in (1, 3, 4):  # the others as predict gives them, the baseline replayed by the first that ran
        assert got[i].predicted_ms == pytest.approx(daydream.predict(graph, opt=specs[i]).predicted_ms)
        assert got[i].replayed_ms == pytest.approx(got[1].replayed_ms)
    every = daydream.predict_many(graph, ["scale:gpu=fast", "nosuch"], return_errors=True)
    assert all(isinstance(e, daydream.DaydreamError) for e in every)


def test_predict_many_refuses_bad_arguments_and_raises_a_variants_error(graph: daydream.Graph) -> None:
    with pytest.raises(daydream.DaydreamError, match="one optimization per variant, got the string 'amp'"):
        daydream.predict_many(graph, "amp")
    with pytest.raises(daydream.DaydreamError, match="threads must be at least 1"):
        daydream.predict_many(graph, ["scale"], threads=0)
    with pytest.raises(daydream.DaydreamError, match="option 'gpu' must be a number, got 'fast'"):
        daydream.predict_many(graph, ["scale:gpu=0.5", "scale:gpu=0.6", "scale:gpu=fast"], threads=2)


def test_prediction_renders_as_text_and_html(graph: daydream.Graph) -> None:
    pred = daydream.predict(graph, opt="data_parallel:network=pcie")
    assert "predicted step" in repr(pred)
    assert "<table>" in pred._repr_html_()


def _profiled(model: nn.Module, opt: torch.optim.Optimizer, with_optimizer: bool = True) -> daydream.Profiler:
    """Two recorded training steps of the MLP ``model`` (its test batch)."""
    inputs, target = batch_for("mlp")
    prof = daydream.Profiler(wait=0, warmup=1, active=2, model=model, optimizer=opt if with_optimizer else None)
    with prof:
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(inputs), target).backward()
            opt.step()
            prof.step()
    return prof


def test_predict_from_a_trace_path_and_a_profiler(example_trace: Path) -> None:
    assert daydream.predict(str(example_trace), opt="scale:cpu=0.5,gpu=0.5").speedup > 1.5
    model = build("mlp")
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01), with_optimizer=False)
    pred = daydream.predict(prof, opt="data_parallel:world_size=2")
    assert pred.predicted_ms >= pred.replayed_ms


def test_predict_from_a_model_profiles_it_on_this_cpu() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    pred = daydream.predict(model, opt="scale:cpu=0.5", inputs=inputs, target=target,
                            loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2)
    assert pred.predicted_ms < pred.replayed_ms
    assert len(pred.iterations) == 2


def test_profile_steps_times_as_many_plain_steps_after_the_recorded_ones_as_before() -> None:
    from daydream.capture import profile_steps, training_step

    model = build("mlp")
    inputs, target = batch_for("mlp")
    step = training_step(model, inputs, target, nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.01))
    prof = profile_steps(step, 1, 2, model=model, wait=4)
    assert len(prof.plain_step_times_ms) == 4 and len(prof.plain_step_times_after_ms) == 4
    assert all(t > 0 for t in prof.plain_step_times_after_ms)


def test_profile_steps_records_again_while_the_machines_speed_moves(monkeypatch) -> None:
    import types

    from daydream import capture
    from daydream.capture import profile_steps

    # A clock that only the steps move (daydream.capture reads time.perf_counter
    # alone): each plain step takes exactly its time, however loaded the machine
    # is. (Steps that slept were timed 15% apart on a busy CI machine.)
    now = [0.0]
    monkeypatch.setattr(capture, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    calls = []

    def step(slow_calls=range(6, 10)):  # noqa: ANN001, ANN202 - the first capture's plain steps after: 3x slower
        now[0] += 0.015 if len(calls) in slow_calls else 0.005
        calls.append(torch.ones(4).sum())

    # One capture is wait + warmup + active + wait calls: 4 + 1 + 1 + 4.
    prof = profile_steps(step, 1, 1, wait=4)
    assert len(calls) == 20 and len(prof.capture_tries) == 2
    assert prof.capture_tries[0] > 0.5 and prof.capture_tries[1] < 0.15
    assert prof.speed_drift() is None and prof.speed_change() == prof.capture_tries[1]
    assert "recorded 2 times because the machine's speed changed" in prof.tries_note()
    # tries=1: the drifted capture is kept, and says so.
    calls.clear()
    once = profile_steps(step, 1, 1, wait=4, tries=1)
    assert len(calls) == 10 and once.speed_drift() is not None and once.tries_note() is None
    # agree (a job's ranks): recorded again while any rank drifted; the capture that moved least is kept.
    calls.clear()
    votes = []
    kept = profile_steps(lambda: step(slow_calls=range(16, 20)), 1, 1, wait=4, tries=3,
                         agree=lambda drifted: votes.append(drifted) or True)
    assert len(calls) == 30 and len(votes) == 3 and votes[1]  # the second capture drifted on this rank
    assert kept.speed_change() == min(kept.capture_tries)


def test_predict_says_when_the_machines_speed_changed_while_recording() -> None:
    model = build("mlp")
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01), with_optimizer=False)
    # Plain steps of 2 ms before the recorded ones (the Profiler's wait-step stamps, in seconds).
    prof._wait_begins, prof._wait_ends = [0.0, 0.003, 0.006], [0.002, 0.005, 0.008]
    prof.plain_step_times_after_ms = [2.1, 2.2, 2.0]  # within 15%: held
    assert prof.speed_drift() is None
    assert not any("while daydream.Profiler recorded" in n for n in daydream.predict(prof, opt="scale:cpu=0.5").notes)
    prof.plain_step_times_after_ms = [3.0, 3.1, 2.9]  # 50% slower after
    note = prof.speed_drift()
    assert "2.000 ms (median of 3) before" in note and "3.000 ms (median of 3) after" in note
    assert daydream.predict(prof, opt="scale:cpu=0.5").notes[0] == note
    prof.plain_step_times_after_ms = []  # not timed after (a user's own loop): nothing to say
    assert prof.speed_drift() is None


@pytest.mark.parametrize("name, buffers", [("cnn", True), ("mlp", False)])
def test_data_parallel_of_a_model_broadcasts_its_buffers_before_every_forward(name: str, buffers: bool) -> None:
    model = build(name)
    inputs, target = batch_for(name)
    nbytes = sum(b.numel() * b.element_size() for b in model.buffers())
    assert (nbytes > 0) == buffers  # the CNN's batch norms keep running statistics
    pred = daydream.predict(model, opt="data_parallel", inputs=inputs, target=target, loss_fn=nn.CrossEntropyLoss(),
                            warmup=1, active=2, world_size=2, network="ethernet10")
    assert (f"buffer_bytes={nbytes}" in pred.opts[0]) == buffers
    assert any("DDP broadcasts" in n for n in pred.notes) == buffers
    if buffers:
        # The given size wins: broadcast_buffers=False.
        pred = daydream.predict(model, opt="data_parallel", inputs=inputs, target=target,
                                loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2, world_size=2, buffer_bytes=0)
        assert "buffer_bytes=0" in pred.opts[0] and not any("DDP broadcasts" in n for n in pred.notes)


def test_ddp_cpu_phase_times_measure_ddps_own_work_beside_any_process_group(monkeypatch) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from daydream import calibrate

    model = build("cnn")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x, _ = batch_for("cnn")
    times = calibrate.ddp_cpu_phase_times(model, [x], repeats=2)
    assert set(times) == {"forward", "backward"} and all(a > 0 and b > 0 for a, b in times.values())
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())  # the model itself never ran
    assert all(p.grad is None for p in model.parameters())
    assert not dist.is_initialized()  # its group was its own
    # What DDP adds is in the DDP copy's times: a reducer whose every bucket takes 2 ms more.
    real_init = DistributedDataParallel.__init__
    made = []

    def recorded_init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        real_init(self, *args, **kwargs)
        made.append(self)
    monkeypatch.setattr(DistributedDataParallel, "__init__", recorded_init)
    monkeypatch.setattr(calibrate, "keep_bucket_hook", _sleepy_all_reduce)
    times = calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=2)
    assert times["backward"][0] - times["backward"][1] >= 1.8
    assert abs(times["forward"][0] - times["forward"][1]) < 1.0
    # The buffers' broadcast before every forward is left to the pass (buffer_bytes).
    calibrate.ddp_cpu_phase_times(build("cnn"), [x], repeats=1)
    assert not made[-1].broadcast_buffers and not getattr(made[-1], "forward_sync_buffers", False)
    monkeypatch.undo()
    # Beside a DDP job's default group (a rank predicting): its group is still its own.
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        group = dist.group.WORLD
        assert set(calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)) == {
            "forward", "backward"}
        assert dist.is_initialized() and dist.group.WORLD is group
        # A torch that cannot make a group beside it says so.
        monkeypatch.setattr(dist, "ProcessGroup", None)
        with pytest.raises(daydream.DaydreamError, match=r"a process group already exists in this process"):
            calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)
    finally:
        dist.destroy_process_group()
    # Without one, such a torch gets a default group for the call, destroyed after.
    assert set(calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)) == {
        "forward", "backward"}
    assert not dist.is_initialized()


def test_ddps_cpu_calibrations_leave_the_all_reduce_to_the_ring_model(monkeypatch) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from daydream import calibrate

    # The hook hands each bucket back as it is: DDP's gradients are each rank's own.
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        plain = torch.nn.Linear(4, 2)
        quiet = DistributedDataParallel(torch.nn.Linear(4, 2))
        quiet.module.load_state_dict(plain.state_dict())
        quiet.register_comm_hook(None, calibrate.keep_bucket_hook)  # DDP checks a hook's signature
        x = torch.randn(8, 4)
        plain(x).sum().backward()
        quiet(x).sum().backward()
        assert all(torch.equal(a.grad, b.grad) for a, b in zip(plain.parameters(), quiet.module.parameters()))
        # Both DDP calibrations time DDP with it, not with an all-reduce over a group of one.
        hooks = []
        real_register = DistributedDataParallel.register_comm_hook

        def register(self, state, hook):  # noqa: ANN001, ANN202
            hooks.append(hook)
            return real_register(self, state, hook)
        monkeypatch.setattr(DistributedDataParallel, "register_comm_hook", register)
        calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)
        assert hooks == [calibrate.keep_bucket_hook]
        calibrate.measure_ddp_overhead(dist, torch, layers=(1, 2), repeats=1)
        assert hooks[1:] == [calibrate.keep_bucket_hook] * 2
    finally:
        dist.destroy_process_group()


def _sleepy_all_reduce(state, bucket):  # noqa: ANN001, ANN202
    """A DDP comm hook: 2 ms of the reducer's time, then the bucket as it is."""
    import time

    time.sleep(0.002)
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def test_ddp_cpu_phase_times_name_what_they_cannot_time(monkeypatch) -> None:
    import torch.distributed as dist

    from daydream import calibrate

    def no_gloo(*args):  # noqa: ANN002, ANN202
        raise RuntimeError("no device to bind to")
    monkeypatch.setattr(dist, "ProcessGroupGloo", no_gloo)
    with pytest.raises(daydream.DaydreamError, match=r"no gloo group of one process: RuntimeError: no device"):
        calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)
    monkeypatch.setattr(dist, "is_gloo_available", lambda: False)
    with pytest.raises(daydream.DaydreamError, match=r"this torch has no gloo backend"):
        calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1)
    monkeypatch.undo()
    assert not dist.is_initialized()
    with pytest.raises(daydream.DaydreamError, match=r"the model is already compiled"):
        calibrate.ddp_cpu_phase_times(torch.compile(build("mlp"), backend="eager"), [((4, 64), torch.float32)])

    with pytest.raises(daydream.DaydreamError, match=r"Sequential is on meta, not the CPU"):
        calibrate.ddp_cpu_phase_times(build("mlp").to("meta"), [((4, 64), torch.float32)], repeats=1)
    with pytest.raises(daydream.DaydreamError, match=r"Sequential does not run on the recorded inputs"):
        calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 63), torch.float32)], repeats=1)
    with pytest.raises(daydream.DaydreamError, match=r"3 copies of Sequential would take"):
        calibrate.ddp_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1, max_bytes=1000)


def test_data_parallel_of_a_known_model_measures_ddps_cpu_work_on_it(monkeypatch) -> None:
    from daydream import calibrate

    model = build("mlp")
    inputs, target = batch_for("mlp")
    kw = dict(inputs=inputs, target=target, loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2, world_size=2,
              network="ethernet10")
    monkeypatch.setattr(calibrate, "ddp_cpu_phase_times", lambda m, x: {"forward": (0.35, 0.25),
                                                                         "backward": (1.6, 1.0)})
    pred = daydream.predict(model, opt="data_parallel", **kw)
    gradients = sum(1 for p in model.parameters())
    assert "ddp_cpu_us=100.0," in pred.opts[0], pred.opts
    assert f"ddp_cpu_per_gradient_us={600 / gradients:.2f}" in pred.opts[0], pred.opts
    assert any("ddp_cpu_phase_times" in n and "+0.100 ms in the forward" in n for n in pred.notes), pred.notes
    # Given values win; a failed measurement leaves the pass's options as given, and says why.
    pred = daydream.predict(model, opt="data_parallel", ddp_cpu_us=5, **kw)
    assert "ddp_cpu_us=5," in pred.opts[0] and "ddp_cpu_per_gradient_us" not in pred.opts[0]

    def fails(*args):  # noqa: ANN002, ANN202
        raise daydream.DaydreamError("ddp_cpu_phase_times: Sequential is on meta, not the CPU")
    monkeypatch.setattr(calibrate, "ddp_cpu_phase_times", fails)
    pred = daydream.predict(model, opt="data_parallel", **kw)
    assert "ddp_cpu_us" not in pred.opts[0]
    assert any("DDP's own CPU work not measured on the model" in n for n in pred.notes), pred.notes


def test_data_parallel_of_a_known_cpu_model_applies_the_co_running_slowdown_it_can_measure(monkeypatch) -> None:
    from daydream import calibrate

    model = build("mlp")
    # One capture for every prediction below: they differ by the factor alone.
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01), with_optimizer=False)
    kw = dict(network="ethernet10", ddp_cpu_us=0)
    asked = []

    def corun(factor: float, noise: float):  # noqa: ANN202
        def measure(m, x, world_size):  # noqa: ANN001, ANN202
            asked.append(world_size)
            return calibrate.CoRunning(factor=factor, noise=noise, alone_ms=1.0, together_ms=factor, world_size=2,
                                       threads=1, processes=1, rounds=50)
        return measure

    monkeypatch.setattr(calibrate, "corun_cpu_factor", corun(1.25, 0.03))
    slow = daydream.predict(prof, opt="data_parallel", world_size=3, **kw)
    assert asked == [3] and "cpu_factor=1.2500" in slow.opts[0], slow.opts
    assert any("ranks sharing this host" in n and "x1.250 ± 3.0%" in n for n in slow.notes), slow.notes
    # The pass made every CPU op 1.25x as long: the step is longer than with the factor left at 1.
    plain = daydream.predict(prof, opt="data_parallel", world_size=3, cpu_factor=1, **kw)
    assert "cpu_factor=1," in plain.opts[0] or plain.opts[0].endswith("cpu_factor=1"), plain.opts
    assert slow.predicted_ms > plain.predicted_ms * 1.05, (slow.predicted_ms, plain.predicted_ms)  # 1.14 here
    # Within its noise: left at 1, and the note says so.
    monkeypatch.setattr(calibrate, "corun_cpu_factor", corun(1.02, 0.04))
    pred = daydream.predict(prof, opt="data_parallel", world_size=2, **kw)
    assert "cpu_factor" not in pred.opts[0]
    assert any("within its noise: cpu_factor stays 1" in n for n in pred.notes), pred.notes
    # Faster beside other ranks is the host's noise, however small its own.
    monkeypatch.setattr(calibrate, "corun_cpu_factor", corun(0.90, 0.02))
    pred = daydream.predict(prof, opt="data_parallel", world_size=2, **kw)
    assert "cpu_factor" not in pred.opts[0]
    assert any("x0.900 ± 2.0%, not a slowdown: cpu_factor stays 1" in n for n in pred.notes), pred.notes
    # One rank: nothing to measure.
    asked.clear()
    daydream.predict(prof, opt="data_parallel", world_size=1, **kw)
    assert asked == []

    def fails(m, x, world_size):  # noqa: ANN001, ANN202
        raise daydream.DaydreamError("corun_cpu_factor: 8 ranks of 1 thread(s) need 8 cores; this process may use 2")
    monkeypatch.setattr(calibrate, "corun_cpu_factor", fails)
    pred = daydream.predict(prof, opt="data_parallel", world_size=8, **kw)
    assert "cpu_factor" not in pred.opts[0]
    assert any("no co-running factor measured (corun_cpu_factor: 8 ranks" in n for n in pred.notes), pred.notes


@pytest.fixture
def one_torch_thread():
    """One intra-op thread, as the accuracy harness runs: with both cores
    busy, the fused optimizer's threads measured 2.7x slower than the loop."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_fused_optimizer_cpu_factor_times_both_steps_at_the_optimizers_shapes(one_torch_thread) -> None:
    from daydream import calibrate

    model = build("transformer")
    factor = calibrate.fused_optimizer_cpu_factor(torch.optim.Adam(model.parameters(), foreach=False))
    # One fused kernel per tensor instead of a Python loop of ~10 ops per parameter.
    assert 0 < factor < 1
    # A model beyond max_bytes is sampled: a first parameter over it is cut
    # (a 16 MiB one, or the transformer's 25.6 kB embedding at 4 kB).
    big = torch.nn.Parameter(torch.zeros(1 << 22))  # 16 MiB, never copied whole
    made = []
    randn = torch.randn

    def recording_randn(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        out = randn(*args, **kwargs)
        made.append(out.numel())
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch, "randn", recording_randn)
        sampled = calibrate.fused_optimizer_cpu_factor(torch.optim.Adam([big], foreach=False), max_bytes=1 << 16)
    assert 0 < sampled < 2
    assert made and max(made) == (1 << 16) // 4
    assert 0 < calibrate.fused_optimizer_cpu_factor(torch.optim.Adam(model.parameters(), foreach=False),
                                                    max_bytes=4096) < 2
    with pytest.raises(daydream.DaydreamError, match="LBFGS cannot be built with fused=True"):
        calibrate.fused_optimizer_cpu_factor(torch.optim.LBFGS(model.parameters()))
    with pytest.raises(daydream.DaydreamError, match="has no parameters"):
        calibrate.fused_optimizer_cpu_factor(object())


def test_fused_optimizer_of_a_known_optimizer_takes_its_measured_step_factor(one_torch_thread) -> None:
    model = build("mlp")
    prof = _profiled(model, torch.optim.Adam(model.parameters(), foreach=False))
    pred = daydream.predict(prof, opt="fused_optimizer")
    assert "cpu_step_factor=" in pred.opts[0]
    assert any("Adam(fused=True) steps its 6 parameters" in n for n in pred.notes), pred.notes
    assert any("x the unfused step (cpu_step_factor" in n for n in pred.notes), pred.notes
    assert pred.predicted_ms < pred.replayed_ms
    # A given factor wins; 1 keeps the (median) step's time.
    same = daydream.predict(prof, opt="fused_optimizer:cpu_step_factor=1")
    assert same.opts == ["fused_optimizer:cpu_step_factor=1"]
    assert any("= 1 x the unfused step" in n for n in same.notes), same.notes
    assert same.predicted_ms > pred.predicted_ms
    # Without the optimizer (a trace file) the operator and bandwidth model stays.
    from_file = daydream.predict(prof.trace_path, opt="fused_optimizer")
    assert "cpu_step_factor" not in from_file.opts[0]


def test_batch_size_on_a_cpu_graph_takes_the_measured_fixed_cost_of_an_op() -> None:
    from daydream import calibrate

    fixed = calibrate.cpu_op_fixed_us()
    assert 0 < fixed < 20  # microseconds: dispatch and allocation, not work
    model = build("mlp")
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01))
    # Without the model (a graph): every op grows by its work above the fixed cost.
    pred = daydream.predict(prof.graph, opt="batch_size:factor=2")
    assert f"cpu_fixed_us={fixed:.3f}" in pred.opts[0] and "cpu_op_factors" not in pred.opts[0]
    assert any("whatever its size on this CPU" in n for n in pred.notes), pred.notes
    # The note rounds the option as passed (three decimals) to two: round that, not the measured value
    # (2.6349 is passed as 2.635, which reads 2.64, not 2.63).
    passed = float(pred.opts[0].split("cpu_fixed_us=")[1].split(",")[0])
    assert any(f"{passed:.2f} us of fixed cost each" in n for n in pred.notes), pred.notes
    assert pred.replayed_ms < pred.predicted_ms < 2 * pred.replayed_ms
    # The saturation model, when asked for, is not overridden.
    saturation = daydream.predict(prof.graph, opt="batch_size:factor=2,cpu_saturation_us=50")
    assert "cpu_fixed_us" not in saturation.opts[0]
    assert any("(saturation 50.0 us)" in n for n in saturation.notes), saturation.notes


def test_predict_many_runs_variants_that_time_ops_here_one_after_another(graph: daydream.Graph, monkeypatch) -> None:
    import concurrent.futures

    pools = []
    real = concurrent.futures.ThreadPoolExecutor

    class Counted(real):
        def __init__(self, *args, **kwargs):
            import traceback

            if any(f.name == "predict_many" for f in traceback.extract_stack()):  # not the Profiler's, say
                pools.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", Counted)
    # A GPU graph: batch_size times nothing on this CPU, so the variants run side by side.
    daydream.predict_many(graph, ["scale:gpu=0.5", "batch_size:factor=2", "scale:gpu=0.7"], threads=2)
    assert pools == [2]
    # A CPU graph: batch_size first measures a CPU op's fixed cost here, with nothing beside it.
    model = build("mlp")
    cpu_graph = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01)).graph
    preds = daydream.predict_many(cpu_graph, ["scale:cpu=0.5", "batch_size:factor=2", "scale:cpu=0.7"], threads=2)
    assert pools == [2]
    assert any("cpu_fixed_us=" in o for o in preds[1].opts)
    daydream.predict_many(cpu_graph, ["scale:cpu=0.5", "scale:cpu=0.6", "scale:cpu=0.7"], threads=2)
    assert pools == [2, 2]


def test_batch_size_of_a_known_model_replays_its_ops_at_both_batches() -> None:
    from daydream import calibrate

    model = build("mlp")
    (shape, dtype), = [(tuple(x.shape), x.dtype) for x in batch_for("mlp")[:1]]
    times = calibrate.batch_cpu_phase_times(model, [(shape, dtype)], 4.0, repeats=3)
    assert set(times) == {"forward", "backward"}
    assert all(new > old > 0 for new, old in times.values())  # four times the rows: more time
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01))
    pred = daydream.predict(prof, opt="batch_size:factor=2")
    assert "cpu_op_factors=" in pred.opts[0]
    assert any("batch_cpu_phase_times" in n for n in pred.notes), pred.notes
    assert any("at their measured factors (cpu_op_factors)" in n for n in pred.notes), pred.notes
    assert pred.predicted_ms > pred.replayed_ms
    # Printed, the per-op table is its number of entries; opts keeps it all (to predict it again).
    table = daydream.prediction.parse_opt(pred.opts[0])[1]["cpu_op_factors"]
    entries = len(table.split(";"))
    assert entries > 5 and table not in repr(pred) and table not in pred._repr_html_()
    assert "optimization    batch_size:factor=2," in repr(pred)
    assert f"cpu_op_factors=<{entries} entries>" in repr(pred)
    assert __import__("html").escape(pred.label) in pred._repr_html_()


def test_display_opt_shortens_only_long_values() -> None:
    from daydream.prediction import display_opt

    assert display_opt("amp") == "amp"
    assert display_opt("tensor_fusion:bucket_mb=25,world_size=8") == "tensor_fusion:bucket_mb=25,world_size=8"
    long_table = ";".join(f"{i}=1.5" for i in range(40))
    assert display_opt(f"amp:cpu_op_factors={long_table},x=1") == "amp:cpu_op_factors=<40 entries>,x=1"
    assert display_opt("p:path=" + "a" * 60) == "p:path=<60 characters>"


def _slow_forward_backend(gm, example_inputs):  # noqa: ANN001, ANN202 - a torch.compile backend
    """Runs the captured forward as it is, 3 ms later: no AOT autograd, so
    the backward is eager's."""
    import time

    def run(*args):  # noqa: ANN002, ANN202
        time.sleep(0.003)
        return gm.forward(*args)
    return run


def test_compile_cpu_phase_times_time_each_phase_of_both_copies_and_leave_the_model_alone() -> None:
    from daydream import calibrate

    model = build("cnn")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x, _ = batch_for("cnn")
    times = calibrate.compile_cpu_phase_times(model, [x], repeats=3, backend=_slow_forward_backend)
    assert set(times) == {"forward", "backward"}
    (fwd_compiled, fwd_eager), (bwd_compiled, bwd_eager) = times["forward"], times["backward"]
    # The backend's 3 ms (at least: a sleep) land in the forward, not in the backward.
    assert fwd_compiled - fwd_eager >= 2.8
    assert abs(bwd_compiled - bwd_eager) < (fwd_compiled - fwd_eager) / 2
    # The model itself was not run: its batch-norm statistics and gradients are as they were.
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    # The batch is not changed by a model that writes into its input.
    class InPlace(nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN202
            return x.mul_(2.0).sum()

    batch = torch.ones(4)
    calibrate.compile_cpu_phase_times(InPlace(), [batch], repeats=1, backend="eager")
    assert torch.equal(batch, torch.ones(4))
    # A DataParallel wrapper: its module is timed (a DDP copy would run collectives on one rank).
    assert set(calibrate.compile_cpu_phase_times(nn.DataParallel(build("mlp")), [((4, 64), torch.float32)],
                                                 repeats=1, backend="eager")) == {"forward", "backward"}
    # (shape, dtype) pairs instead of the batch; a forward-only model has no backward.
    frozen = build("mlp").requires_grad_(False)
    only = calibrate.compile_cpu_phase_times(frozen, [((4, 64), torch.float32)], repeats=1, backend="eager")
    assert set(only) == {"forward"}


def test_compile_cpu_phase_times_alternate_the_copies_in_short_blocks() -> None:
    """A slow spell of a shared machine lasts tenths of a second: blocks of
    about round_s (10 ms) put it in both copies' medians, not in one's."""
    import time

    from daydream import calibrate

    calls: list = []

    @torch._dynamo.disable
    def log(module: nn.Module) -> None:
        calls.append(id(module))  # the eager copy, or the module inside the compiled one
        time.sleep(0.001)

    class Logged(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):  # noqa: ANN001, ANN202
            log(self)
            return self.lin(x)

    times = calibrate.compile_cpu_phase_times(Logged(), [((2, 4), torch.float32)], backend="eager")  # as predict
    assert set(times) == {"forward", "backward"}
    assert len(set(calls)) == 2
    timed = calls[7:]  # after three steps of each copy and the one that sizes the blocks
    longest = run = 1
    for a, b in zip(timed, timed[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    # About 10 steps of 1 ms a block, two blocks of a copy back to back (the
    # order alternates each round); blocks of 0.15 s would be 50 steps.
    assert longest <= 24, longest
    assert len(timed) >= 5 * 2


def test_compile_cpu_phase_times_name_a_compile_failure() -> None:
    from daydream import calibrate

    def broken(gm, example_inputs):  # noqa: ANN001, ANN202
        raise RuntimeError("no compiler here")

    with pytest.raises(daydream.DaydreamError,
                       match=r"torch.compile\(backend='broken'\) of Sequential failed: .*no compiler here"):
        calibrate.compile_cpu_phase_times(build("mlp"), [((4, 64), torch.float32)], repeats=1, backend=broken)
    # A model compiled already: the recorded step was compiled, nothing to time.
    with pytest.raises(daydream.DaydreamError, match=r"already compiled \(torch.compile of Sequential\)"):
        calibrate.compile_cpu_phase_times(torch.compile(build("mlp"), backend="eager"), [((4, 64), torch.float32)],
                                          repeats=1)
    part = build("mlp")
    part[0].compile(backend="eager")
    with pytest.raises(daydream.DaydreamError, match=r"Sequential is already compiled in part \(0 by Module.compile"):
        calibrate.compile_cpu_phase_times(part, [((4, 64), torch.float32)], repeats=1)
    # A model that does not run on the inputs at all is not blamed on the compiler.
    with pytest.raises(daydream.DaydreamError, match=r"Sequential does not run on the recorded inputs \(1 positional"):
        calibrate.compile_cpu_phase_times(build("mlp"), [((4, 63), torch.float32)], repeats=1, backend=broken)


def test_op_fusion_of_a_known_model_spreads_its_compiled_phases_over_the_graph(monkeypatch) -> None:
    import functools

    from daydream import calibrate

    model = build("mlp")
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01))
    # Inductor's first compilation takes tens of seconds on a cold cache: the test's backend adds 3 ms instead.
    monkeypatch.setattr(calibrate, "compile_cpu_phase_times",
                        functools.partial(calibrate.compile_cpu_phase_times, repeats=2, backend=_slow_forward_backend))
    pred = daydream.predict(prof, opt="op_fusion")
    assert "cpu_op_factors=" in pred.opts[0]
    assert any("compile_cpu_phase_times" in n for n in pred.notes), pred.notes
    assert any("forward/backward CPU ops at their measured factors" in n for n in pred.notes), pred.notes
    assert pred.predicted_ms - pred.replayed_ms >= 2.5  # the backend's 3 ms (at least) a forward
    # Without the model (a graph), or when compilation fails: the chain model.
    assert "cpu_op_factors" not in daydream.predict(prof.graph, opt="op_fusion").opts[0]

    def fails(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise daydream.DaydreamError("compile_cpu_phase_times: torch.compile(backend='inductor') of X failed: boom")

    # A saving larger than the phase's ops: capped, and the note says how much is left out.
    monkeypatch.setattr(calibrate, "compile_cpu_phase_times", lambda *a, **k: {"forward": (0.0, 100.0)})
    pred = daydream.predict(prof, opt="op_fusion")
    assert any("capped at x0.05" in n and "of the saving is not applied" in n for n in pred.notes), pred.notes

    monkeypatch.setattr(calibrate, "compile_cpu_phase_times", fails)
    pred = daydream.predict(prof, opt="op_fusion")
    assert "cpu_op_factors" not in pred.opts[0]
    assert any("not measured under torch.compile" in n and "boom" in n and "chain model is used" in n
               for n in pred.notes), pred.notes


def test_predict_many_measures_a_pass_asked_for_in_several_variants_once(monkeypatch) -> None:
    from daydream import calibrate

    model = build("mlp")
    prof = _profiled(model, torch.optim.SGD(model.parameters(), lr=0.01))
    calls = []

    def phases(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return {"forward": (1.0, 0.8 - 0.1 * len(calls)), "backward": (2.0, 1.5)}  # another figure each call

    monkeypatch.setattr(calibrate, "amp_cpu_phase_times", phases)
    preds = daydream.predict_many(prof, ["amp", ["amp", "scale:cpu=0.9"], "scale:cpu=0.5", "amp"])
    assert len(calls) == 1
    amp_notes = [[n for n in p.notes if n.startswith("amp:")] for p in preds]
    assert amp_notes[0] and amp_notes[0] == amp_notes[1] == amp_notes[3] and not amp_notes[2]
    assert preds[0].opts == preds[3].opts and preds[0].predicted_ms == preds[3].predicted_ms
    assert preds[1].opts[0] == preds[0].opts[0] and preds[1].predicted_ms < preds[0].predicted_ms
    # Other options are another request: measured again.
    daydream.predict_many(prof, ["amp", "amp:gemm_factor=0.4"])
    assert len(calls) == 3


def test_predict_from_a_model_needs_inputs() -> None:
    with pytest.raises(daydream.DaydreamError, match="inputs="):
        daydream.predict(build("mlp"), opt="scale:cpu=0.5")


def test_predict_from_a_training_step_callable() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(inputs), target).backward()
        opt.step()

    pred = daydream.predict(step, opt="scale:cpu=0.5", warmup=1, active=2)
    assert pred.predicted_ms < pred.replayed_ms


def run(args):
    return subprocess.run([sys.executable, "-m", "daydream", *args], capture_output=True, text=True, timeout=120)


def test_cli_predict_json_has_the_documented_keys(example_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    r = run(["predict", str(example_trace), "--opt", "data_parallel:world_size=8,network=pcie",
             "--opt", "scale:cpu=0.9", "--json", "--timeline", str(out)])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["trace"] == str(example_trace)
    assert d["opts"] == ["data_parallel:world_size=8,network=pcie", "scale:cpu=0.9"]
    for key in ("measured_ms", "replayed_ms", "predicted_ms", "speedup"):
        assert isinstance(d[key], float)
    assert out.exists()


def test_cli_predict_bad_option_exits_2_with_one_line(example_trace: Path) -> None:
    r = run(["predict", str(example_trace), "--opt", "data_parallel:world_size=many"])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "world_size" in lines[0] and "integer" in lines[0]


def test_cli_predict_each_predicts_every_opt_on_its_own(example_trace: Path) -> None:
    specs = ["scale:gpu=0.5", "data_parallel:world_size=8,network=pcie"]
    r = run(["predict", str(example_trace), "--each", "--opt", specs[0], "--opt", specs[1], "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["trace"] == str(example_trace)
    assert [p["opts"] for p in d["predictions"]] == [[s] for s in specs]
    for p, spec in zip(d["predictions"], specs):
        assert p["predicted_ms"] == pytest.approx(daydream.predict(str(example_trace), opt=spec).predicted_ms)
    text = run(["predict", str(example_trace), "--each", "--opt", specs[0], "--opt", specs[1]])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[3].split() == ["optimization", "predicted", "ms", "speed-up"]
    assert [line.split()[0] for line in lines[4:]] == specs
    refused = run(["predict", str(example_trace), "--each", "--opt", specs[0], "--timeline", "t.json"])
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--timeline" in refused.stderr


def test_cli_predict_each_reports_a_failing_variant_and_predicts_the_others(example_trace: Path) -> None:
    specs = ["scale:gpu=0.5", "scale:gpu=fast", "scale:gpu=0.8"]
    argv = ["predict", str(example_trace), "--each"] + [a for spec in specs for a in ("--opt", spec)]
    r = run(argv + ["--json"])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "variant 'scale:gpu=fast'" in r.stderr and "'fast'" in r.stderr
    rows = json.loads(r.stdout)["predictions"]
    assert rows[1] == {"opts": ["scale:gpu=fast"], "error": "pass 'scale': option 'gpu' must be a number, got 'fast'"}
    assert rows[0]["predicted_ms"] < rows[2]["predicted_ms"]
    text = run(argv)
    assert text.returncode == 2 and text.stderr.count("\n") == 1
    lines = text.stdout.splitlines()[4:]
    assert [line.split()[0] for line in lines] == specs
    assert "failed: pass 'scale'" in lines[1] and lines[0].endswith("x") and lines[2].endswith("x")
    every = run(["predict", str(example_trace), "--each", "--opt", "scale:gpu=fast", "--opt", "nosuch"])
    assert every.returncode == 2 and every.stdout == ""
    assert every.stderr.count("\n") == 1 and "'fast'" in every.stderr


def test_cli_passes_lists_them(example_trace: Path) -> None:
    r = run(["passes", "--json"])
    assert r.returncode == 0
    assert {p["name"] for p in json.loads(r.stdout)} >= {"data_parallel", "tensor_fusion", "scale"}


class _World:
    """A stand-in for a graph: its world size, and whether it communicates."""

    def __init__(self, world_size: int, collectives: int = 0) -> None:
        self.world_size = world_size
        self.collectives = collectives

    def summary(self):
        return {"tasks_by_kind": {"collective": self.collectives}}


@pytest.mark.parametrize("name, given, world, times, wait_us", [
    # Two ranks drawing from [1, 1, 1, 1, 3] ms: the slower of two is 3 ms with
    # probability 9/25, so E[max] = (16 + 27) / 25 = 1.72 ms against a mean of 1.4.
    ("data_parallel", {"world_size": "2"}, 1, [1.0, 1.0, 3.0, 1.0, 1.0], 320.0),
    ("data_parallel", {"world_size": "8"}, 1, [2.0] * 6, 0.0),              # lockstep: no wait
    ("data_parallel", {}, 1, [1.0, 1.0, 1.0, 1.0, 3.0], 1.0e3 * (3 * (1 - 0.8 ** 8) + 0.8 ** 8 - 1.4)),  # the pass's default 8 ranks
    ("tensor_fusion", {"world_size": "2"}, 1, [1.0, 1.0, 3.0, 1.0, 1.0], 320.0),  # a single-device graph
])
def test_straggler_wait_is_the_expected_slowest_of_world_size_recorded_steps(name, given, world, times,
                                                                            wait_us) -> None:
    from daydream import prediction  # noqa: PLC0415

    note = prediction._straggler(name, _World(world), given, times)
    assert float(given["straggler_us"]) == pytest.approx(wait_us, abs=0.1)
    assert "straggler_us" in note


def test_a_one_off_stall_among_the_recorded_steps_is_not_a_straggler() -> None:
    # The first step of a process allocates and initializes (43 ms against 13
    # in the demo): kept, four ranks would wait for it every iteration.
    from daydream import prediction  # noqa: PLC0415

    given = {"world_size": "4"}
    note = prediction._straggler("data_parallel", _World(1), given, [300.0] + [12.0] * 9)
    assert float(given["straggler_us"]) == 0.0
    assert "1 step over three times their median (12.000 ms) left out as one-off stalls" in note
    # What stays must still be enough steps to say.
    assert prediction._straggler("data_parallel", _World(1), {"world_size": "4"}, [300.0] * 2 + [12.0] * 4) is None


@pytest.mark.parametrize("given, world, times", [
    ({"world_size": "2"}, 1, [1.0, 2.0, 3.0, 4.0]),  # too few steps to say
    ({"world_size": "1"}, 1, [1.0, 2.0, 3.0, 4.0, 5.0]),  # one rank waits for nobody
    ({}, 1, [1.0, 2.0, 3.0, 4.0, 5.0]),  # tensor_fusion on a single-device trace without world_size
])
def test_no_straggler_wait_without_the_steps_or_the_ranks(given, world, times) -> None:
    from daydream import prediction  # noqa: PLC0415

    name = "tensor_fusion" if not given else "data_parallel"
    assert prediction._straggler(name, _World(world), given, times) is None
    assert "straggler_us" not in given


def test_no_straggler_wait_added_to_a_step_that_already_communicated() -> None:
    # tensor_fusion on a recorded DDP step: its step times hold the waits already.
    from daydream import prediction  # noqa: PLC0415

    given: dict = {}
    assert prediction._straggler("tensor_fusion", _World(2, collectives=10), given, [1.0, 1.0, 3.0, 1.0, 1.0]) is None
    assert "straggler_us" not in given
