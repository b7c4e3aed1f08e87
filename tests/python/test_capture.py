"""Capturing training iterations in-process (issue 3): the Profiler hook,
one-call profiling, layers, gradient tensors, DDP collectives."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

if os.environ.get("DAYDREAM_REQUIRE_TORCH"):
    import torch  # `make test` installs torch: a missing torch must fail, not skip
else:
    torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import daydream  # noqa: E402
from daydream.calibrate import MAX_CPU_FACTOR, MIN_CPU_FACTOR, phase_cpu_ms  # noqa: E402
from daydream.capture import thread_runqueue_ms  # noqa: E402
from models import batch_for, build, loss_for, train_under  # noqa: E402

MODELS = ["mlp", "cnn", "transformer"]


@pytest.fixture(scope="module", params=MODELS)
def captured(request):
    name = request.param
    model = build(name)
    inputs, target = batch_for(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = loss_for(name)
    prof = daydream.Profiler(warmup=2, active=3, model=model, optimizer=opt)  # wait=10 by default
    with prof:
        for _ in range(15):
            opt.zero_grad()
            loss_fn(model(inputs), target).backward()
            opt.step()
            prof.step()
    prof.graph  # noqa: B018 - reading the graph measures and fits the overhead, which tests read alone
    return name, model, prof


def test_graph_has_forward_backward_and_optimizer_phases(captured) -> None:
    _, _, prof = captured
    phases = prof.graph.summary()["tasks_by_phase"]
    for phase in ("forward", "backward", "optimizer"):
        assert phases[phase] > 0, phases


def test_the_active_iterations_are_the_graphs_iterations(captured) -> None:
    _, _, prof = captured
    assert len(prof.graph.iterations) == 3


def test_every_parameter_has_its_gradient_tensor(captured) -> None:
    _, model, prof = captured
    grads = prof.graph.tensors(role="gradient")
    params = dict(model.named_parameters())
    assert {t.name for t in grads} == set(params)
    for t in grads:
        p = params[t.name]
        assert t.shape == list(p.shape)
        assert t.dtype == "float32"
        assert t.bytes == p.numel() * p.element_size()
        assert len(t.producers) == 3 and all(i >= 0 for i in t.producers), t
    assert sum(t.bytes for t in grads) == sum(p.numel() * p.element_size() for p in params.values())


def test_gradients_are_produced_by_backward_tasks(captured) -> None:
    _, _, prof = captured
    g = prof.graph
    for t in g.tensors(role="gradient"):
        assert g.task(t.producer)["phase"] == "backward", (t.name, g.task(t.producer))


def test_layer_names_match_named_modules(captured) -> None:
    _, model, prof = captured
    expected = {name or type(model).__name__ for name, _ in model.named_modules()}
    names = {layer.name for layer in prof.graph.layers()}
    # Modules whose forward never runs as a module call (e.g. a MultiheadAttention
    # out_proj used through F.multi_head_attention_forward) leave no range.
    assert names <= expected
    assert len(names) >= 0.8 * len(expected), sorted(expected - names)


def test_gradient_tensors_belong_to_their_layer(captured) -> None:
    _, _, prof = captured
    g = prof.graph
    layers = g.layers()
    for t in g.tensors(role="gradient"):
        if t.layer >= 0:
            assert t.name.startswith(layers[t.layer].name + "."), (t.name, layers[t.layer].name)


def test_backward_tasks_map_to_forward_layers(captured) -> None:
    _, _, prof = captured
    g = prof.graph
    backward_with_layer = [
        i for i in range(g.num_tasks) if g.task(i)["phase"] == "backward" and g.task(i)["layer"] >= 0
    ]
    assert backward_with_layer, "no backward task was mapped to a layer through its sequence number"


def test_replay_of_each_active_iteration_is_within_5_percent(captured) -> None:
    _, _, prof = captured
    result = daydream.replay(daydream.build_graph(prof.trace_path))  # the recording, overhead and all
    assert len(result.iterations) == 3
    for it in result.iterations:
        assert abs(it.error_pct) <= 5.0, it


def _unfitted(prof):
    """prof's graph with the measured per-record costs removed as they are (not fitted)."""
    from daydream import calibrate

    trace = daydream.load_trace(prof.trace_path)
    measured = dataclasses.replace(prof.overhead, scale=1.0, cpu_factor=1.0, optimizer_cpu_factor=None)
    return calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), measured)


def test_captured_graph_replays_without_the_profilers_overhead(captured) -> None:
    _, _, prof = captured
    recorded = daydream.build_graph(prof.trace_path)
    assert prof.overhead is not None and prof.overhead.per_record_ns > 0
    graph = _unfitted(prof)
    o = graph.profiler_overhead
    assert o["records"] > 0 and 0 < o["removed_ms"] <= o["estimated_ms"]
    assert o["begin_ns"] + o["end_ns"] == pytest.approx(prof.overhead.per_record_ns, abs=1)
    before = daydream.replay(recorded)
    after = daydream.replay(graph)
    removed_per_step = o["removed_ms"] / len(graph.iterations)
    for b, a in zip(before.iterations, after.iterations):
        assert a.replayed_ms < b.replayed_ms
        # The replay loses what was removed (less where it was off the critical path).
        assert b.replayed_ms - a.replayed_ms <= removed_per_step * 1.5 + 0.01
    assert recorded.num_tasks == graph.num_tasks == prof.graph.num_tasks
    assert all(prof.graph.task(i)["duration_ns"] >= 0 for i in range(prof.graph.num_tasks))


def _median_replayed(graph) -> float:
    return statistics.median(it.replayed_ms for it in daydream.replay(graph).iterations)


def test_profiler_graph_is_fitted_to_the_steps_timed_without_it(captured) -> None:
    _, _, prof = captured
    fitted = prof.overhead
    assert fitted.plain_step_ms == prof.plain_step_ms > 0
    assert _median_replayed(prof.graph) == pytest.approx(fitted.fitted_replayed_ms, rel=1e-9)
    assert _median_replayed(_unfitted(prof)) == pytest.approx(fitted.unscaled_replayed_ms, rel=1e-9)
    if fitted.fit_note:  # the machine's speed changed between the wait steps and the recording
        assert fitted.scale == 1.0 and fitted.cpu_factor == 1.0 and fitted.optimizer_cpu_factor is None
    else:
        # The optimizer step (SGD) was timed apart and has its own factor.
        assert fitted.plain_optimizer_ms == prof.plain_optimizer_ms > 0
        assert MIN_CPU_FACTOR <= fitted.optimizer_cpu_factor <= MAX_CPU_FACTOR
        if MIN_CPU_FACTOR < fitted.optimizer_cpu_factor < MAX_CPU_FACTOR:
            assert phase_cpu_ms(prof.graph, "optimizer") == pytest.approx(fitted.plain_optimizer_ms, rel=1e-2)
        if MIN_CPU_FACTOR < fitted.cpu_factor < MAX_CPU_FACTOR:
            assert fitted.fitted_replayed_ms == pytest.approx(fitted.plain_step_ms, rel=2e-3)
    notes = daydream.predict(prof, opt="scale:cpu=0.5").notes
    assert any(n.startswith("profiler overhead removed") and ("not fitted" in n if fitted.fit_note else
                                                              f"fitted to the {fitted.plain_step_ms:.3f} ms step" in n)
               for n in notes), notes


@pytest.mark.parametrize("where", ["below the measured costs' replay", "between it and the recording",
                                   "above the recording"])
def test_fit_profiler_overhead_reaches_the_plain_step_time(captured, where: str) -> None:
    from daydream import calibrate

    _, _, prof = captured
    trace = daydream.load_trace(prof.trace_path)
    recorded = daydream.build_graph(trace)
    measured = calibrate.profiler_overhead(prof.record_shapes)
    unscaled = _median_replayed(calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), measured))
    profiled = statistics.median(it["measured_ms"] for it in recorded.iterations)
    assert unscaled < profiled
    target = {"below the measured costs' replay": 0.8 * unscaled,
              "between it and the recording": (unscaled + profiled) / 2,
              "above the recording": 1.1 * profiled}[where]
    fitted = calibrate.fit_profiler_overhead(trace, recorded, measured, target)
    assert recorded.profiler_overhead["records"] == 0  # the graph given is left as it is
    graph = calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), fitted)
    got = _median_replayed(graph)
    assert got == pytest.approx(fitted.fitted_replayed_ms, rel=1e-9)
    assert fitted.unscaled_replayed_ms == pytest.approx(unscaled, rel=1e-9)
    if where == "above the recording":
        assert fitted.fit_note.startswith("not fitted")
        assert (fitted.scale, fitted.cpu_factor) == (1.0, 1.0) and got == pytest.approx(unscaled, rel=1e-9)
    else:
        assert not fitted.fit_note and got == pytest.approx(target, rel=2e-3)
        if where == "between it and the recording":  # less removed than measured
            assert 0 < fitted.scale < 1 and fitted.cpu_factor == 1.0
        else:  # everything measured removed, then the CPU work scaled down
            assert fitted.scale == 1.0 and MIN_CPU_FACTOR < fitted.cpu_factor < 1
    assert "fitted" in fitted.describe() or "not fitted" in fitted.describe()


def test_fit_profiler_overhead_rejects_a_non_positive_step_time(captured) -> None:
    from daydream import calibrate

    _, _, prof = captured
    trace = daydream.load_trace(prof.trace_path)
    with pytest.raises(daydream.DaydreamError, match="plain_step_ms must be > 0"):
        calibrate.fit_profiler_overhead(trace, daydream.build_graph(trace), prof.overhead, 0.0)


def test_wait_steps_run_without_hooks_and_are_timed() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    prof = daydream.Profiler(wait=3, warmup=0, active=1, model=model)

    def hooked() -> bool:  # daydream's module hooks, on every submodule
        return any(m._forward_pre_hooks for m in model.modules() if m is not model)

    with prof:
        assert prof.plain_step_ms is None
        for i in range(4):
            assert hooked() == (i == 3), i  # installed when the recording begins
            if i < 3:  # in the wait steps only the model's own forward is timed (two clock reads)
                assert (len(model._forward_pre_hooks), len(model._forward_hooks)) == (1, 1), i
            loss_for("mlp")(model(inputs), target).backward()
            if i < 3:
                time.sleep(0.02)  # the wait steps are at least 20 ms
            prof.step()
    assert 20 <= prof.plain_step_ms < 1000
    assert 0 < prof.plain_forward_ms < 20  # the forward alone, not the sleep after it
    assert not hooked() and not model._forward_pre_hooks and not model._forward_hooks
    assert prof.overhead is None
    _ = prof.graph
    assert prof.overhead.plain_step_ms == prof.plain_step_ms


@pytest.mark.skipif(thread_runqueue_ms() is None or not hasattr(os, "sched_setaffinity"),
                    reason="needs Linux schedstat and CPU affinity")
def test_recorded_steps_say_how_long_the_training_thread_waited_for_a_core() -> None:
    """With a busy process pinned to the training thread's only core, each
    recorded step waits for the core about as long as it runs."""
    core = min(os.sched_getaffinity(0))
    saved = os.sched_getaffinity(0)
    spinner = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"])
    try:
        os.sched_setaffinity(0, {core})
        time.sleep(0.2)  # the spinner is pinned and running
        a = torch.randn(256, 256)
        prof = daydream.Profiler(wait=1, warmup=0, active=2)
        with prof:
            for _ in range(3):
                t0 = time.thread_time()
                while time.thread_time() - t0 < 0.05:  # 50 ms of CPU work a step
                    a = torch.tanh(a @ a)
                prof.step()
    finally:
        os.sched_setaffinity(0, saved)
        spinner.kill()
        spinner.wait()
    waits = prof.recorded_cpu_wait_ms
    assert waits is not None and len(waits) == 2
    assert all(w > 10 for w in waits), waits  # sharing one core with a busy process: about 50 ms each


def test_wait_steps_are_timed_without_the_profilers_own_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Profiler.step() does (stepping torch's profiler, reading the
    thread's run-queue time) runs in no unprofiled step: the plain steps,
    which the graph is fitted to, must not hold it; and the run-queue time
    is read only at the recorded steps' bounds."""
    from daydream import capture

    reads = []
    monkeypatch.setattr(capture, "thread_runqueue_ms", lambda: reads.append(1) or 1.0 * len(reads))
    prof = daydream.Profiler(wait=4, warmup=1, active=2)
    with prof:
        torch_step = prof._prof.step

        def slow_torch_step() -> None:
            time.sleep(0.03)
            torch_step()

        prof._prof.step = slow_torch_step
        for _ in range(7):
            time.sleep(0.002)  # the training step: 2 ms
            prof.step()
    times = prof.plain_step_times_ms
    assert len(times) == 4
    assert all(1.5 < t < 20 for t in times), times  # 2 ms each, not 32
    assert len(reads) == 3  # at the end of the warm-up step and of each recorded one
    assert prof.recorded_cpu_wait_ms == [1.0, 1.0]


def test_runqueue_clock_reads_its_own_thread_only() -> None:
    """RunqueueClock reads the run-queue time of the thread that made it, as
    thread_runqueue_ms does, and nothing from another thread or once closed."""
    from daydream import capture

    if capture.thread_runqueue_ms() is None:
        pytest.skip("this kernel keeps no per-thread schedstat")
    clock = capture.RunqueueClock()
    before = capture.thread_runqueue_ms()
    mine = clock()
    assert mine is not None and before is not None and 0 <= mine - before < 50
    seen = []
    t = threading.Thread(target=lambda: seen.append(clock()))
    t.start()
    t.join()
    assert seen == [None]
    clock.close()
    assert clock() is None


def test_wait_steps_read_the_wait_after_the_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """In each wait step with the model's forward timed, the training
    thread's run-queue time is read at the forward's end and at the step's
    end: their difference's median over the wait steps is
    plain_cpu_wait_after_forward_ms; none is read in the recorded steps."""
    from daydream import capture

    clock_reads = []

    class FakeClock:
        def __call__(self) -> float:
            clock_reads.append(1)
            return 1.5 * len(clock_reads) ** 2  # a longer wait each step

        def close(self) -> None:
            pass

    monkeypatch.setattr(capture, "RunqueueClock", FakeClock)
    model = build("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    prof = daydream.Profiler(wait=3, warmup=1, active=1, model=model, optimizer=opt)
    train_under(prof, model, opt, 5)
    assert len(clock_reads) == 6  # two per wait step
    # Read k is 1.5 k^2: the wait steps waited 1.5 (4 - 1), 1.5 (16 - 9) and 1.5 (36 - 25) ms after their forwards.
    assert prof.plain_cpu_wait_after_forward_ms == pytest.approx(10.5)
    assert daydream.Profiler(wait=2).plain_cpu_wait_after_forward_ms is None  # no model: none timed


def test_wait_steps_time_the_optimizer_step_apart() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")

    class SlowSGD(torch.optim.SGD):
        def step(self, closure=None):  # noqa: ANN001, ANN202
            time.sleep(0.01)
            return super().step(closure)

    opt = SlowSGD(model.parameters(), lr=0.01)
    prof = daydream.Profiler(wait=3, warmup=0, active=1, model=model, optimizer=opt)
    with prof:
        for i in range(4):
            assert bool(opt._optimizer_step_pre_hooks) == (i < 3), i  # timed in the wait steps only
            opt.zero_grad()
            loss_for("mlp")(model(inputs), target).backward()
            opt.step()
            prof.step()
    assert 10 <= prof.plain_optimizer_ms < prof.plain_step_ms
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks
    # Without an optimizer (or one without step hooks) it is not timed.
    plain = daydream.Profiler(wait=1, warmup=0, active=1, model=model, optimizer=object())
    with plain:
        for _ in range(2):
            loss_for("mlp")(model(inputs), target).backward()
            plain.step()
    assert plain.plain_optimizer_ms is None and plain.plain_step_ms is not None


def test_profiler_notes_the_shapes_and_dtypes_of_the_models_inputs(captured) -> None:
    name, model, prof = captured
    inputs, _ = batch_for(name)
    assert prof.model_inputs == [(tuple(inputs.shape), inputs.dtype)]
    assert len(prof.model_input_values) == 1 and torch.equal(prof.model_input_values[0], inputs)  # the batch itself
    assert not any(m._forward_pre_hooks for m in model.modules())  # every hook is gone
    plain = daydream.Profiler(wait=0, warmup=0, active=1)
    with plain:
        torch.randn(4).sum()
        plain.step()
    assert plain.model_inputs is None and plain.model_input_values is None


def test_phase_cpu_ms_is_the_phases_tasks_and_the_gaps_between_them(captured) -> None:
    _, _, prof = captured
    graph = daydream.build_graph(prof.trace_path)
    tasks = [graph.task(i) for i in range(graph.num_tasks)]
    total = sum(t["duration_ns"] + t["gap_ns"] for t in tasks if t["phase"] == "optimizer") / 1e6
    per_iteration = phase_cpu_ms(graph, "optimizer")
    # Three iterations; the gaps before each run of optimizer tasks (lead-ins) are left out.
    assert 0 < per_iteration < total / 3 + 1e-9
    assert phase_cpu_ms(graph, "no such phase") == 0.0


def test_without_wait_steps_nothing_is_fitted() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    prof = daydream.Profiler(wait=0, warmup=0, active=1, model=model)
    with prof:
        loss_for("mlp")(model(inputs), target).backward()
        prof.step()
    assert prof.plain_step_ms is None
    _ = prof.graph
    assert prof.overhead.plain_step_ms is None and prof.overhead.scale == 1.0 and prof.overhead.cpu_factor == 1.0


def test_remove_overhead_false_keeps_the_recording() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    prof = daydream.Profiler(wait=0, warmup=0, active=1, model=model, remove_overhead=False)
    with prof:
        loss_for("mlp")(model(inputs), target).backward()
        prof.step()
    assert prof.overhead is None
    assert prof.graph.profiler_overhead["records"] == 0
    assert prof.graph.summary() == daydream.build_graph(prof.trace_path).summary()


def test_graph_while_still_recording_is_a_clear_error_when_removing_overhead() -> None:
    prof = daydream.Profiler(wait=0, warmup=0, active=1)
    with prof:
        torch.randn(4).sum()
        prof.step()
        with pytest.raises(daydream.DaydreamError, match="still recording"):
            _ = prof.graph
    assert prof.graph.profiler_overhead["records"] > 0


def test_saved_trace_rebuilds_the_same_graph(captured, tmp_path: Path) -> None:
    _, _, prof = captured
    out = tmp_path / "run.pt.trace.json.gz"
    prof.save_trace(str(out))
    again = daydream.build_graph(out)  # the recording: a saved trace keeps the profiler's overhead
    assert again.profiler_overhead["records"] == 0
    keys = ("num_tasks", "num_edges", "tasks_by_kind", "tasks_by_phase", "edges_by_kind")
    assert {k: again.summary()[k] for k in keys} == {k: prof.graph.summary()[k] for k in keys}
    assert len(again.tensors(role="gradient")) == len(prof.graph.tensors(role="gradient"))


def test_save_trace_failing_midway_leaves_the_old_file_and_no_temporary(captured, tmp_path: Path,
                                                                        monkeypatch) -> None:
    _, _, prof = captured
    out = tmp_path / "run.pt.trace.json"
    out.write_text("old")

    def broken_copy(src, dst, *args, **kwargs):
        dst.write(b'{"traceEvents": [')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("daydream.capture.shutil.copyfileobj", broken_copy)
    with pytest.raises(daydream.DaydreamError, match=r"run\.pt\.trace\.json: cannot save the trace: No space left"):
        prof.save_trace(str(out))
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt.trace.json"]


def test_save_trace_into_a_missing_directory_names_the_path(captured, tmp_path: Path) -> None:
    _, _, prof = captured
    with pytest.raises(daydream.DaydreamError, match="missing"):
        prof.save_trace(str(tmp_path / "missing" / "t.json"))


def test_profile_runs_a_standard_training_step() -> None:
    model = build("mlp")
    inputs, target = batch_for("mlp")
    graph = daydream.profile(model, inputs, target=target, loss_fn=nn.CrossEntropyLoss(), warmup=1, active=2)
    assert len(graph.iterations) == 2
    assert graph.summary()["tasks_by_phase"]["optimizer"] > 0
    assert len(graph.tensors(role="gradient")) == len(list(model.parameters()))


def test_profile_without_loss_uses_the_mean_squared_output() -> None:
    graph = daydream.profile(build("mlp"), batch_for("mlp")[0], warmup=0, active=1)
    assert graph.summary()["tasks_by_phase"]["backward"] > 0


def test_profile_with_only_a_loss_calls_it_on_the_output() -> None:
    seen = []

    def loss(out):
        seen.append(out.shape)
        return out.abs().mean()

    daydream.profile(build("mlp"), batch_for("mlp")[0], loss_fn=loss, warmup=0, active=1)
    assert seen and seen[0] == (32, 10)


def test_hooks_are_removed_after_profiling() -> None:
    model = build("mlp")
    daydream.profile(model, batch_for("mlp")[0], warmup=0, active=1)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert all(not p._post_accumulate_grad_hooks for p in model.parameters())


def test_graph_before_enough_steps_is_a_clear_error() -> None:
    prof = daydream.Profiler(wait=2, warmup=1, active=2)
    with prof:
        prof.step()
    with pytest.raises(daydream.DaydreamError, match="1 step\\(\\) calls made, 5 needed \\(wait=2"):
        _ = prof.graph


def test_step_outside_the_profiler_is_a_clear_error() -> None:
    with pytest.raises(daydream.DaydreamError, match="outside"):
        daydream.Profiler().step()


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> Path:
    """The folder ddp_worker.py wrote: two gloo ranks' traces and what their Profilers measured."""
    out = tmp_path_factory.mktemp("ddp")
    worker = Path(__file__).with_name("ddp_worker.py")
    r = subprocess.run([sys.executable, str(worker), str(out), _free_port()],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_ddp_with_two_gloo_processes_yields_collectives_with_the_right_bytes(ddp_run: Path) -> None:
    tmp_path = ddp_run
    job = daydream.load_job(tmp_path)
    assert job.ranks == [0, 1]
    param_bytes = (128 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10) * 4
    for graph in job.graphs():
        collectives = [graph.task(i) for i in range(graph.num_tasks) if graph.task(i)["kind"] == "collective"]
        assert collectives, "no collective tasks"
        assert all(c["phase"] == "comm" for c in collectives)
        per_iteration = {}
        for c in collectives:
            if c["name"] == "gloo:all_reduce" and c["iteration"] >= 0:
                per_iteration[c["iteration"]] = per_iteration.get(c["iteration"], 0) + c["bytes"]
        assert per_iteration and all(b == param_bytes for b in per_iteration.values()), per_iteration
        # The all-reduces run on gloo's own threads, not the training thread.
        resources = graph.resources()
        main = max(range(len(resources)), key=lambda r: sum(1 for i in range(graph.num_tasks) if graph.task(i)["resource"] == r))
        assert all(c["resource"] != main for c in collectives)
    for rank in (0, 1):
        measured = json.loads((tmp_path / "measured" / f"rank{rank}.json").read_text())
        assert measured["plain_forward_ms"] > 0
        # A step that waits for all-reduces is fitted to its forward, not to its length.
        assert "forward" in measured["fit"] and "step timed without" not in measured["fit"], measured["fit"]
        # The training thread's wait for a core in each recorded step goes to tensor_fusion.
        if thread_runqueue_ms() is None:
            assert measured["recorded_cpu_wait_ms"] is None
            continue
        waits = measured["recorded_cpu_wait_ms"]
        assert len(waits) == measured["iterations"] == 2 and all(w >= 0 for w in waits)
        opt = measured["opts"][0]
        assert "recorded_cpu_wait_us=" + ";".join(f"{w * 1e3:.1f}" for w in waits) in opt, opt
        assert any("waited" in n and "recorded_cpu_wait_us" in n for n in measured["notes"]), measured["notes"]
        # And its wait after the forward in the steps run without the profiler, which the pass takes instead.
        unprofiled = measured["plain_cpu_wait_after_forward_ms"]
        assert unprofiled is not None and unprofiled >= 0
        assert f"unprofiled_cpu_wait_us={unprofiled * 1e3:.1f}" in opt, opt
        assert any("unprofiled_cpu_wait_us" in n for n in measured["notes"]), measured["notes"]


def test_fit_to_the_forward_of_a_step_that_communicates(ddp_run: Path) -> None:
    """fit_profiler_overhead with the forward's unprofiled time, on a graph
    with collectives: the forward's CPU time reaches it, whatever the step's."""
    from daydream import calibrate

    trace = daydream.load_trace(str(ddp_run / "rank0.pt.trace.json"))
    recorded = daydream.build_graph(trace)
    measured = calibrate.profiler_overhead(True)
    unscaled = phase_cpu_ms(calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), measured), "forward")
    profiled = phase_cpu_ms(recorded, "forward")
    assert 0 < unscaled < profiled
    step = 1e6  # no step length could be fitted to: the forward is
    for target, how in ((0.8 * unscaled, "cpu"), ((unscaled + profiled) / 2, "scale"), (1.1 * profiled, "none")):
        fitted = calibrate.fit_profiler_overhead(trace, recorded, measured, step, plain_forward_ms=target)
        graph = calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), fitted)
        if how == "none":
            assert fitted.fit_note.startswith("not fitted: the forward") and fitted.plain_forward_ms is None
            continue
        assert phase_cpu_ms(graph, "forward") == pytest.approx(target, rel=2e-3)
        assert fitted.plain_forward_ms == target and "forward timed without the profiler" in fitted.fit_text()
        if how == "scale":
            assert 0 < fitted.scale < 1 and fitted.cpu_factor == 1.0
        else:
            assert fitted.scale == 1.0 and MIN_CPU_FACTOR < fitted.cpu_factor < 1



def test_only_tensor_fusion_with_a_cpu_share_takes_the_recorded_waits(ddp_run: Path, captured) -> None:
    """daydream.predict hands the Profiler's recorded waits to tensor_fusion
    of a graph that communicates, one per iteration, where the pass has a
    comm_cpu_share or pays latencies on the thread (bucket_cpu_latency):
    without either, collectives take nothing from compute."""
    from daydream.prediction import _recorded_cpu_waits

    graph = daydream.build_graph(daydream.load_trace(str(ddp_run / "rank0.pt.trace.json")))
    waits = [0.5 * (i + 1) for i in range(len(graph.iterations))]
    requests = [("tensor_fusion", {"comm_cpu_share": "0.5"}), ("tensor_fusion", {}),
                ("tensor_fusion", {"comm_cpu_share": "0.5", "recorded_cpu_wait_us": "7;7"}),
                ("data_parallel", {"comm_cpu_share": "0.5"}),
                ("tensor_fusion", {"bucket_cpu_latency": "50:300"})]
    notes = _recorded_cpu_waits(graph, requests, waits)
    assert requests[0][1]["recorded_cpu_wait_us"] == ";".join(f"{w * 1e3:.1f}" for w in waits)
    assert requests[4][1]["recorded_cpu_wait_us"] == requests[0][1]["recorded_cpu_wait_us"]
    assert "recorded_cpu_wait_us" not in requests[1][1] and "recorded_cpu_wait_us" not in requests[3][1]
    assert requests[2][1]["recorded_cpu_wait_us"] == "7;7"  # given: kept
    assert len(notes) == 2 and all("waited" in n for n in notes)
    # One wait per iteration, or none taken.
    fresh = [("tensor_fusion", {"comm_cpu_share": "0.5"})]
    assert _recorded_cpu_waits(graph, fresh, waits[:-1]) == [] and "recorded_cpu_wait_us" not in fresh[0][1]
    # A graph that does not communicate has no recorded all-reduces to take them off.
    _, _, prof = captured
    alone = prof.graph
    fresh = [("tensor_fusion", {"comm_cpu_share": "0.5"})]
    assert _recorded_cpu_waits(alone, fresh, [1.0] * len(alone.iterations)) == []
    assert "recorded_cpu_wait_us" not in fresh[0][1]
    # With the wait measured without the profiler, that goes too, and the note says the pass takes it.
    fresh = [("tensor_fusion", {"comm_cpu_share": "0.5"}), ("tensor_fusion", {"comm_cpu_share": "0.5", "unprofiled_cpu_wait_us": "3"}),
             ("data_parallel", {"comm_cpu_share": "0.5"})]
    notes = _recorded_cpu_waits(graph, fresh, waits, 0.25)
    assert fresh[0][1]["unprofiled_cpu_wait_us"] == "250.0" and "recorded_cpu_wait_us" in fresh[0][1]
    assert fresh[1][1] == {"comm_cpu_share": "0.5", "unprofiled_cpu_wait_us": "3"}  # given: kept, and taken alone
    assert "unprofiled_cpu_wait_us" not in fresh[2][1]
    assert len(notes) == 1 and "0.250 ms after the forward" in notes[0] and "unprofiled_cpu_wait_us" in notes[0]
