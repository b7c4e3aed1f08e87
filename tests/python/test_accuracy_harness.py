"""Tests for the accuracy harness's own helpers (benchmarks/accuracy/run.py)."""

import importlib.util
from pathlib import Path

import pytest

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


def test_ddp_noise_broadcast_extras_pair_each_step_with_its_own_without_the_broadcast():
    noise = load_script("ddp_noise.py")
    d = {"DDP": {"median": 6.4, "mean": 6.5, "round_medians_median": 6.3},
         "DDP, no buffer broadcast": {"median": 4.0, "mean": 4.75, "round_medians_median": 4.1},
         "broadcast stand-in: DDP, broadcast": {"median": 5.5, "mean": 6.0, "round_medians_median": 5.4},
         "broadcast stand-in: DDP, no broadcast": {"median": 4.0, "mean": 4.25, "round_medians_median": 3.9}}
    extras = noise.broadcast_extras(d)
    assert list(extras) == ["the model", "the broadcast stand-in"]
    assert extras["the model"] == pytest.approx({"median": 2.4, "mean": 1.75})
    assert extras["the broadcast stand-in"] == pytest.approx({"median": 1.5, "mean": 1.75})
    # A model without buffers ran neither pair's second half: nothing to report.
    assert noise.broadcast_extras({"DDP": d["DDP"]}) == {}


def test_ddp_noise_cpu_shares_sum_each_names_threads_over_the_wall_time():
    noise = load_script("ddp_noise.py")
    before = {1: ("python", 1_000), 2: ("gloo_tcp_loop", 0), 3: ("pt_gloo_runloop", 500)}
    # Thread 4 started between the readings; thread 3 ended (absent after).
    after = {1: ("python", 2_000), 2: ("gloo_tcp_loop", 6_000), 4: ("pt_gloo_runloop", 2_000)}
    shares = noise.cpu_shares(before, after, 10_000)
    assert shares == {"gloo_tcp_loop": 0.6, "pt_gloo_runloop": 0.2, "python": 0.1}
    assert list(shares) == ["gloo_tcp_loop", "pt_gloo_runloop", "python"]  # largest first
    assert noise.cpu_shares(after, after, 0) == {"python": 0.0, "gloo_tcp_loop": 0.0, "pt_gloo_runloop": 0.0}


def test_ddp_noise_threads_cpu_reads_this_process_threads_on_cpu_time():
    import threading
    import time

    noise = load_script("ddp_noise.py")
    if not Path("/proc/self/task").is_dir():
        pytest.skip("no /proc/self/task here")
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    worker = threading.Thread(target=spin)
    before = noise.threads_cpu_ns()
    t0 = time.perf_counter_ns()
    worker.start()
    try:
        time.sleep(0.2)
        after = noise.threads_cpu_ns()  # while the spinner still runs: an ended thread leaves /proc
        wall = time.perf_counter_ns() - t0
    finally:
        stop.set()
        worker.join()
    if not after:
        pytest.skip("no schedstat here")
    new = [tid for tid in after if tid not in before]
    assert len(new) == 1  # the spinner, and no thread counted twice
    spun = after[new[0]][1]
    assert spun > 0.25 * wall  # it spun for most of the 0.2 s (a loaded 2-core machine gives it less)
    assert all(name for name, _ in after.values())
    assert noise.cpu_shares(before, after, wall)[after[new[0]][0]] > 0.25


def test_job_spread_reads_the_same_ddp_step_measured_by_separate_jobs():
    run = load_run()

    def row(exp, model, base_ms, opt_ms, error, gradient_mb=0.3):
        return {"experiment": exp, "model": model, "error_pct": error, "noise_pct": 2.0, "within_noise": False,
                "baseline": {"median_ms": base_ms}, "optimized": {"median_ms": opt_ms},
                "config": {"gradient_mb": gradient_mb}}

    rows = [
        # The one-bucket DDP step: data_parallel's and tensor_fusion's optimized
        # steps, tensor_fusion_reverse's baseline: 4.0, 5.0, 4.5 ms.
        row("data_parallel", "mlp", 2.0, 4.0, -12.0),
        row("tensor_fusion", "mlp", 6.0, 5.0, +30.0),
        row("tensor_fusion_reverse", "mlp", 4.5, 7.0, +20.0),
        row("amp", "mlp", 2.0, 1.6, +1.0),
        # One job only: nothing to compare.
        row("data_parallel", "cnn", 3.0, 7.0, -5.0),
        # 2 MB of gradients: several buckets, not the same step in each job.
        row("data_parallel", "big", 3.0, 7.0, -5.0, gradient_mb=2.0),
        row("tensor_fusion", "big", 9.0, 9.0, -5.0, gradient_mb=2.0),
    ]
    run.job_spread(rows)
    dp, tf, rev, amp, cnn, big_dp, big_tf = rows
    for r in (dp, tf, rev):
        assert r["job_noise_pct"] == 25.0  # (5.0 - 4.0) / 4.0
        assert r["job_medians_ms"] == {"data_parallel": 4.0, "tensor_fusion": 5.0, "tensor_fusion_reverse": 4.5}
    assert dp["within_noise"] and rev["within_noise"] and not tf["within_noise"]
    for r in (amp, cnn, big_dp, big_tf):
        assert "job_noise_pct" not in r and not r["within_noise"]


def test_speedup_spread_compares_the_tensor_fusion_speed_up_its_two_jobs_measured():
    run = load_run()

    def row(exp, model, base, opt, speedup, error, caps=("small", "one")):
        if exp == "tensor_fusion_reverse":
            caps = caps[::-1]
        return {"experiment": exp, "model": model, "error_pct": error, "noise_pct": 2.0, "within_noise": False,
                "measured_speedup": speedup, "baseline": {"median_ms": base}, "optimized": {"median_ms": opt},
                "config": {"gradient_mb": 0.3, "baseline": caps[0], "optimized": caps[1]}}

    rows = [
        # small -> one bucket measured 1.25x in one job; the reverse 0.8x in
        # another, i.e. 1.25x: no spread. Errors of 3% stay outside the noise.
        row("tensor_fusion", "mlp", 5.0, 4.0, 1.25, +3.0),
        row("tensor_fusion_reverse", "mlp", 4.0, 5.0, 0.8, -3.0),
        # 1.2x forward, 1 / 0.75 = 1.333x reverse: 11.1% apart.
        row("tensor_fusion", "cnn", 6.0, 5.0, 1.2, +10.0),
        row("tensor_fusion_reverse", "cnn", 4.5, 6.0, 0.75, -12.0),
        # The reverse ran other bucket caps: not the same speed-up.
        row("tensor_fusion", "big", 6.0, 5.0, 1.2, +10.0),
        row("tensor_fusion_reverse", "big", 4.5, 6.0, 0.75, -12.0, caps=("tiny", "one")),
    ]
    run.speedup_spread(rows)
    fwd, rev, cfwd, crev, bfwd, brev = rows
    assert fwd["speedup_jobs_pct"] == pytest.approx(0.0) and rev["speedup_jobs_pct"] == pytest.approx(0.0)
    assert not fwd["within_noise"] and not rev["within_noise"]
    assert cfwd["speedup_jobs"] == pytest.approx({"tensor_fusion": 1.2, "tensor_fusion_reverse": 4 / 3})
    assert cfwd["speedup_jobs_pct"] == pytest.approx(100 / 9) and crev["speedup_jobs_pct"] == pytest.approx(100 / 9)
    assert cfwd["within_noise"] and not crev["within_noise"]  # 10% within 11.1%, 12% not
    assert "speedup_jobs_pct" not in bfwd and "speedup_jobs_pct" not in brev
    assert run.noise_cell(cfwd) == "2.0 (speed-up 11.1)"
    assert run.noise_cell({**cfwd, "job_noise_pct": 6.0}) == "2.0 (jobs 6.0; speed-up 11.1)"
    assert run.noise_cell(bfwd) == "2.0"
    s = run.summary([{**r, "error_additive_pct": 0.0, "error_direct_pct": 0.0, "baseline_replay_error_pct": 0.0}
                     for r in rows])
    assert s["speedup_jobs_min_pct"] == pytest.approx(0.0) and s["speedup_jobs_max_pct"] == pytest.approx(100 / 9)


def test_table_lists_the_captures_during_which_the_machines_speed_changed():
    run = load_run()

    def row(model, drift, tries=(0.05,)):
        return {"experiment": "amp", "model": model, "config": {}, "within_noise": False, "predicted_ms": 1.0,
                "measured_ms": 1.0, "error_pct": 0.0, "optimized": {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1},
                "baseline": {"median_ms": 2.0}, "predicted_speedup": 2.0, "measured_speedup": 2.0,
                "noise_pct": 1.0, "error_direct_pct": 0.0, "error_additive_pct": 0.0,
                "baseline_replay_error_pct": 0.0,
                "prediction": {"raw_predicted_ms": 1.0, "speed_drift": "changed" if drift else None,
                               "capture_tries": list(tries),
                               "plain_step_ms": {"before": 2.0, "after": 3.0 if drift else 2.1}}}

    rows = [row("mlp", False), row("cnn", True, (0.6, 0.4, 0.5)), row("transformer", False, (0.3, 0.05))]
    meta = {"command": "`run.py`", "machine": "test", "torch": "x", "threads": 1, "rounds": 1, "steps": 1,
            "wall_s": 60.0, "loadavg_1min": {"start": 0.0, "end": 0.0}, "summary": run.summary(rows)}
    text = run.table(rows, meta)
    assert "Captures during which the machine's speed changed" in text
    assert "- amp on cnn: 2.000 ms before, 3.000 ms after" in text
    assert "amp on mlp:" not in text and "amp on transformer: 2.000 ms" not in text
    # Recorded again: every try's speed change, the rows recorded once not listed.
    assert "Baselines recorded more than once" in text
    assert "- amp on cnn: 60%, 40%, 50%" in text and "- amp on transformer: 30%, 5%" in text


def test_a_two_process_row_survives_an_abort_in_gloos_teardown_once_rank_0_wrote_it(monkeypatch):
    import json

    import pytest

    torch_mp = pytest.importorskip("torch.multiprocessing")
    run = load_run()

    def spawn(fn, args, nprocs, join, write=True):
        path = args[-1]
        if write:
            with open(path, "w") as f:
                json.dump({"measured": 1}, f)
        raise torch_mp.ProcessExitedException("process 1 terminated with signal SIGABRT", error_index=1,
                                              error_pid=7, exit_code=-6, signal_name="SIGABRT")

    monkeypatch.setattr(torch_mp, "spawn", spawn)
    row = run.two_process("data_parallel", "mlp", None)
    assert row["measured"] == 1 and "SIGABRT" in row["teardown_failure"]
    # Without rank 0's row the abort came before the measurements ended: the row fails.
    monkeypatch.setattr(torch_mp, "spawn", lambda *a, **k: spawn(*a, **k, write=False))
    with pytest.raises(torch_mp.ProcessExitedException):
        run.two_process("data_parallel", "mlp", None)


def test_a_row_that_times_out_says_what_its_child_last_wrote(monkeypatch):
    import argparse
    import subprocess

    run = load_run()

    def timeout(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"], stderr=b"USDT: x\nRuntimeError: rank 0 gave up\n")

    monkeypatch.setattr(run.subprocess, "run", timeout)
    a = argparse.Namespace(timeout=300.0, compile_limit=120.0, steps=1, rounds=1, warmup=1, active=1, threads=1, comm_threads="default",
                           net_repeats=1, save_traces=None, malloc="steady", profile_ranks="0")
    row = run.run_one("tensor_fusion", "mlp", a)
    assert row["skipped"] == "did not finish within 300 s (last on stderr: RuntimeError: rank 0 gave up)"


def test_a_row_that_hangs_says_where_each_rank_was(monkeypatch):
    import argparse
    import subprocess

    run = load_run()
    path = run.__file__
    # What faulthandler.dump_traceback_later writes: a block per thread,
    # innermost frame first; rank 0 waits in a barrier, rank 1 in a collective.
    dump = (f'Thread 0x00007f01 (most recent call first):\n'
            f'  File "/x/threading.py", line 331 in wait\n'
            f'Current thread 0x00007f00 (most recent call first):\n'
            f'  File "/x/torch/distributed/distributed_c10d.py", line 4800 in barrier\n'
            f'  File "{path}", line 152 in interleaved\n'
            f'  File "{path}", line 372 in ddp_rank\n'
            f'Current thread 0x00007f02 (most recent call first):\n'
            f'  File "/x/torch/distributed/distributed_c10d.py", line 2900 in all_reduce\n'
            f'  File "{path}", line 152 in interleaved\n')
    assert run.where_stuck(dump) == "run.py:152 interleaved > barrier; run.py:152 interleaved > all_reduce"
    assert run.where_stuck("no dump here\n") == ""

    seen = {}

    def timeout(cmd, **kwargs):
        seen["cmd"] = cmd
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"], stderr=("USDT: x\n" + dump).encode())

    monkeypatch.setattr(run.subprocess, "run", timeout)
    a = argparse.Namespace(timeout=120.0, compile_limit=120.0, steps=1, rounds=1, warmup=1, active=1, threads=1,
                           comm_threads="default", net_repeats=1, save_traces=None, malloc="steady",
                           profile_ranks="0")
    row = run.run_one("data_parallel", "cnn", a)
    assert row["skipped"] == ("did not finish within 120 s (stacks 20 s before: run.py:152 interleaved > barrier; "
                              "run.py:152 interleaved > all_reduce)")
    # The child knows its limit, to dump its stacks before it.
    assert seen["cmd"][seen["cmd"].index("--timeout") + 1] == "120.0"


def test_rank_1_mirrors_rank_0s_captures_step_for_step():
    import pytest

    pytest.importorskip("torch")
    import torch

    run = load_run()
    for decisions in ([False], [True, False], [True, True, True]):
        counts = {"rank0": 0, "rank1": 0}
        votes = {"rank0": [], "rank1": []}

        def stepper(rank):
            def step():
                counts[rank] += 1
                torch.ones(4).sum()
            return step

        def agree(rank):
            def decide(drifted):
                votes[rank].append(drifted)
                return decisions[len(votes[rank]) - 1]  # what the all-reduce of every rank's vote says
            return decide

        prof = run.capture(stepper("rank0"), None, None, 1, agree=agree("rank0"))
        run.mirror_capture(stepper("rank1"), 1, agree("rank1"))
        assert counts["rank0"] == counts["rank1"] == len(decisions) * run.capture_steps(1), decisions
        assert len(votes["rank0"]) == len(votes["rank1"]) == len(decisions)
        assert len(prof.capture_tries) == len(decisions)


def test_measured_ddp_cpu_reads_what_predict_measured_or_none():
    run = load_run()
    pred = {"opts": ["data_parallel:world_size=2,gap_latency=500:0.0;1000:3.5,ddp_cpu_us=111.0,"
                     "ddp_cpu_per_gradient_us=33.89,straggler_us=49.5"]}
    assert run.measured_ddp_cpu(pred) == {"ddp_cpu_us": "111.0", "ddp_cpu_per_gradient_us": "33.89"}
    assert run.measured_ddp_cpu({"opts": ["data_parallel:world_size=2,straggler_us=49.5"]}) is None


def test_the_realtime_table_goes_between_its_own_markers_and_leaves_the_other_alone(tmp_path):
    run = load_run()
    doc = tmp_path / "accuracy.md"
    doc.write_text(f"intro\n{run.DOC_BEGIN}\nold default table\n{run.DOC_END}\nmiddle\n"
                   f"{run.DOC_BEGIN_REALTIME}\nold realtime table\n{run.DOC_END_REALTIME}\nend\n")
    run.write_doc(doc, "new realtime table", realtime=True)
    text = doc.read_text()
    assert "old default table" in text and "old realtime table" not in text
    assert f"{run.DOC_BEGIN_REALTIME}\nnew realtime table\n{run.DOC_END_REALTIME}" in text
    assert text.endswith("middle\n" f"{run.DOC_BEGIN_REALTIME}\nnew realtime table\n{run.DOC_END_REALTIME}\nend\n")
    run.write_doc(doc, "new default table")
    assert f"{run.DOC_BEGIN}\nnew default table\n{run.DOC_END}" in doc.read_text()
    assert "new realtime table" in doc.read_text()


def test_realtime_comm_threads_puts_every_other_thread_in_sched_fifo():
    run = load_run()
    import os
    import threading

    import pytest

    if not run.realtime_permitted():
        pytest.skip("SCHED_FIFO needs root or CAP_SYS_NICE here")
    started, stop = threading.Event(), threading.Event()
    tid = []

    def worker() -> None:
        tid.append(threading.get_native_id())
        started.set()
        stop.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    started.wait(10)
    try:
        assert run.realtime_comm_threads() >= 1
        assert os.sched_getscheduler(tid[0]) == os.SCHED_FIFO
        assert os.sched_getscheduler(threading.get_native_id()) == os.SCHED_OTHER  # the caller keeps its class
    finally:
        os.sched_setscheduler(tid[0], os.SCHED_OTHER, os.sched_param(0))
        stop.set()
        t.join()


def test_save_traces_keeps_the_trace_the_corrected_graph_and_the_options(tmp_path, example_trace):
    import argparse  # noqa: PLC0415
    import json  # noqa: PLC0415

    import daydream  # noqa: PLC0415

    run = load_run()
    graph = daydream.build_graph(example_trace)

    class Capture:  # what keep_capture reads of a daydream.Profiler
        def __init__(self):
            self.graph = graph

        def save_trace(self, path):
            Path(path).write_bytes(b"trace")

    opts = ["tensor_fusion:world_size=2"]
    run.keep_capture(argparse.Namespace(save_traces=tmp_path), "tensor_fusion", "mlp", Capture(), {"opts": opts})
    assert (tmp_path / "tensor_fusion_mlp.json.gz").read_bytes() == b"trace"
    kept_options = json.loads((tmp_path / "tensor_fusion_mlp.options.json").read_text())
    assert kept_options["opts"] == opts
    # What the Profiler measured goes beside them (none here), for repredict.py.
    assert kept_options["profiler"] == {"plain_step_ms": None, "plain_optimizer_ms": None, "plain_forward_ms": None,
                                        "plain_cpu_wait_after_forward_ms": None, "overhead": None}
    kept = daydream.Graph.load(str(tmp_path / "tensor_fusion_mlp.graph.pb"))
    assert kept.to_bytes() == graph.to_bytes()
    run.keep_capture(argparse.Namespace(save_traces=None), "x", "y", Capture(), {"opts": opts})  # off: writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tensor_fusion_mlp.graph.pb", "tensor_fusion_mlp.json.gz", "tensor_fusion_mlp.options.json"]
    # --capture-optimized: the optimized configuration's capture beside it, trace and graph.
    run.keep_capture(argparse.Namespace(save_traces=tmp_path), "tensor_fusion", "mlp", Capture(), suffix=".optimized")
    assert (tmp_path / "tensor_fusion_mlp.optimized.json.gz").read_bytes() == b"trace"
    assert daydream.Graph.load(str(tmp_path / "tensor_fusion_mlp.optimized.graph.pb")).to_bytes() == graph.to_bytes()
    assert len(list(tmp_path.iterdir())) == 5


def test_capture_optimized_reaches_the_child_and_replays_the_optimized_capture(monkeypatch, example_trace):
    import argparse
    import statistics

    import daydream

    run = load_run()
    seen = []

    def fake_run(cmd, **kwargs):
        seen.append(cmd)
        raise run.subprocess.TimeoutExpired(cmd, kwargs["timeout"], stderr=b"")

    monkeypatch.setattr(run.subprocess, "run", fake_run)
    a = argparse.Namespace(timeout=300.0, compile_limit=120.0, steps=1, rounds=1, warmup=1, active=1, threads=1,
                           comm_threads="default", net_repeats=1, save_traces=None, malloc="steady",
                           capture_optimized=True, profile_ranks="all")
    run.run_one("tensor_fusion", "mlp", a)
    a.capture_optimized = False
    a.profile_ranks = "0"
    run.run_one("tensor_fusion", "mlp", a)
    assert "--capture-optimized" in seen[0] and "--capture-optimized" not in seen[1]
    # --profile-ranks reaches the child either way.
    assert [cmd[cmd.index("--profile-ranks") + 1] for cmd in seen] == ["all", "0"]

    graph = daydream.build_graph(example_trace)

    class Capture:  # what replay_capture reads of a daydream.Profiler
        def __init__(self):
            self.graph = graph
            self.plain_step_ms, self.plain_step_after_ms = 1.5, 1.6
            self.overhead = argparse.Namespace(fit_note="")

    got = run.replay_capture(Capture())
    # The step as daydream.predict replays a baseline, unchanged by the pass run for it.
    assert got["replayed_ms"] == daydream.predict(graph, opt="amp").replayed_ms
    assert got["replayed_ms"] == daydream.predict(graph, opt="scale:cpu=2").replayed_ms
    replay = daydream.replay(graph)
    assert abs(got["replayed_ms"] / statistics.median(it.replayed_ms for it in replay.iterations) - 1) < 0.01
    assert got["plain_step_ms"] == {"before": 1.5, "after": 1.6}
    assert got["by_phase_ms"] and all(ms >= 0 for ms in got["by_phase_ms"].values())



def test_capture_optimized_captures_on_rank_0_mirrors_on_rank_1_and_fills_the_row(monkeypatch):
    import argparse

    run = load_run()
    calls = []

    class Dist:
        def barrier(self):
            calls.append("barrier")

    monkeypatch.setattr(run, "any_rank", lambda dist, torch: "agree")
    monkeypatch.setattr(run, "capture", lambda step, model, opt, active, agree: calls.append(("capture", agree)) or "prof")
    monkeypatch.setattr(run, "mirror_capture", lambda step, active, agree: calls.append(("mirror", agree)))
    on = argparse.Namespace(capture_optimized=True, active=3, profile_ranks="0")
    off = argparse.Namespace(capture_optimized=False, active=3, profile_ranks="0")
    assert run.capture_optimized(off, None, None, None, 0, Dist(), None) is None and calls == []
    assert run.capture_optimized(on, None, None, None, 0, Dist(), None) == "prof"
    assert run.capture_optimized(on, None, None, None, 1, Dist(), None) is None
    assert calls == [("capture", "agree"), "barrier", ("mirror", "agree"), "barrier"]
    # --profile-ranks all: rank 1 records too (its own Profiler, not read), and still returns None.
    calls.clear()
    every = argparse.Namespace(active=3, profile_ranks="all")
    assert run.capture_ranks(every, None, None, None, 0, Dist(), None) == "prof"
    assert run.capture_ranks(every, None, None, None, 1, Dist(), None) is None
    assert calls == [("capture", "agree"), "barrier", ("capture", "agree"), "barrier"]

    monkeypatch.setattr(run, "replay_capture", lambda prof: {"replayed_ms": 1.0, "of": prof})
    kept = []
    monkeypatch.setattr(run, "keep_capture", lambda a, exp, name, prof, suffix="": kept.append((exp, name, prof, suffix)))
    row = {}
    run.add_optimized_capture(on, "data_parallel", "cnn", row, None)  # rank 1, or the option off: nothing
    assert row == {} and kept == []
    run.add_optimized_capture(on, "data_parallel", "cnn", row, "prof")
    assert row == {"optimized_capture": {"replayed_ms": 1.0, "of": "prof"}}
    assert kept == [("data_parallel", "cnn", "prof", ".optimized")]


def test_a_data_parallel_row_says_what_co_running_measured_and_the_comparison_predictions():
    run = load_run()

    def row(model, note, no_corun=None):
        r = {"experiment": "data_parallel", "model": model, "config": {}, "within_noise": False,
             "predicted_ms": 1.1, "measured_ms": 1.0, "error_pct": 10.0,
             "optimized": {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1}, "baseline": {"median_ms": 2.0},
             "predicted_speedup": 2.0, "measured_speedup": 2.0, "noise_pct": 1.0, "error_direct_pct": 0.0,
             "error_additive_pct": 0.0, "baseline_replay_error_pct": 0.0,
             "network": {"latency_us": 100.0, "bandwidth_gbps": 1.0, "gap_latency": ""},
             "prediction": {"raw_predicted_ms": 1.0, "capture_tries": [0.01], "opts": ["data_parallel:world_size=2"],
                            "plain_step_ms": {"before": 2.0, "after": 2.0}, "speed_drift": None},
             "corun_note": note}
        if no_corun:
            r["prediction"]["options"] = {"broadcast_latency": "4000:900.0"}
            r["prediction_no_broadcast_latency"] = {"predicted_ms": 0.9, "error_pct": -10.0}
            r["prediction_no_corun"] = {"predicted_ms": no_corun, "error_pct": -5.0}
            r["prediction_blocking_gap"] = {"predicted_ms": 1.05, "error_pct": 5.0,
                                           "options": {"gap_latency": "500:1.0;1000:2.0"}}
            r["prediction_median_network"] = {"predicted_ms": 0.98, "error_pct": -2.0,
                                              "options": {"latency_us": 150.0, "bandwidth_gbps": 2.5,
                                                          "gap_latency": "500:0.0;1000:1.0"}}
        return r

    applied = "data_parallel: ranks sharing this host: one forward and backward took 1.2 ms ...: x1.200 ± 2.0% (cpu_factor)"
    left = "data_parallel: ranks sharing this host: ...: x1.010 ± 3.0%, within its noise: cpu_factor stays 1"
    rows = [row("mlp", applied, no_corun=0.95), row("cnn", left)]
    meta = {"command": "`run.py`", "machine": "test", "torch": "x", "threads": 1, "rounds": 1, "steps": 1,
            "wall_s": 60.0, "loadavg_1min": {"start": 0.0, "end": 0.0}, "summary": run.summary(rows)}
    text = run.table(rows, meta)
    mlp = next(line for line in text.splitlines() if line.startswith("- data_parallel on mlp:"))
    cnn = next(line for line in text.splitlines() if line.startswith("- data_parallel on cnn:"))
    assert "; ranks sharing this host: one forward and backward took 1.2 ms ...: x1.200 ± 2.0% (cpu_factor)" in mlp
    assert "; without the co-running factor the prediction is 0.950 ms (-5.0%)" in mlp
    assert "within its noise: cpu_factor stays 1" in cnn and "without the co-running factor" not in cnn
    assert ("; with gap_latency from blocking all-reduces after matmuls (500:1.0;1000:2.0) and the wait for the "
            "slowest rank from the Profiler's plain steps 1.050 ms (+5.0%)") in mlp
    assert "blocking" not in cnn
    assert "; with the network priced from medians (150 us, 2.50 GB/s, gap_latency 500:0.0;1000:1.0) 0.980 ms (-2.0%)" in mlp
    assert "priced from medians" not in cnn
    assert ("; the buffer broadcast's extra (broadcast_latency, from DDP steps of the stack with a buffer) "
            "4000:900.0, without it 0.900 ms (-10.0%)") in mlp
    assert "broadcast_latency" not in cnn
    # Each row names the gap_latency its prediction took: data_parallel's from DDP steps.
    assert "gap_latency (us after a step of us, from DDP steps of a Linear stack) none" in mlp


def tensor_fusion_row(experiment, model, config, options, gap_latency=""):
    """A finished two-process tensor_fusion row, as table() renders it; the
    prediction took ``options``."""
    return {"experiment": experiment, "model": model, "config": config,
            "within_noise": False, "predicted_ms": 1.1, "measured_ms": 1.0, "error_pct": 10.0,
            "optimized": {"median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1}, "baseline": {"median_ms": 2.0},
            "predicted_speedup": 2.0, "measured_speedup": 2.0, "noise_pct": 1.0, "error_direct_pct": 0.0,
            "error_additive_pct": 0.0, "baseline_replay_error_pct": 0.0,
            "network": {"latency_us": 100.0, "bandwidth_gbps": 1.0, "gap_latency": gap_latency},
            "prediction": {"raw_predicted_ms": 1.0, "capture_tries": [0.01], "opts": ["tensor_fusion:world_size=2"],
                           "options": options, "plain_step_ms": {"before": 2.0, "after": 2.0}, "speed_drift": None}}


def test_a_tensor_fusion_row_names_its_blocking_gap_and_compares_data_parallels():
    run = load_run()
    r = tensor_fusion_row("tensor_fusion", "mlp", {"baseline": "DDP x2, bucket_cap_mb=1",
                                                    "optimized": "DDP x2, bucket_cap_mb=25"},
                          {"gap_latency": "500:0.0;4000:300.0"}, gap_latency="4000:900.0")
    r["prediction_ddp_gap"] = {"predicted_ms": 1.2, "error_pct": 20.0, "options": {"gap_latency": "4000:900.0"}}
    meta = {"command": "`run.py`", "machine": "test", "torch": "x", "threads": 1, "rounds": 1, "steps": 1,
            "wall_s": 60.0, "loadavg_1min": {"start": 0.0, "end": 0.0}, "summary": run.summary([r])}
    line = next(x for x in run.table([r], meta).splitlines() if x.startswith("- tensor_fusion on mlp:"))
    assert "gap_latency (us after us of compute, from blocking all-reduces after matmuls) 500:0.0;4000:300.0" in line
    assert "; with data_parallel's gap_latency, from DDP steps (4000:900.0), 1.200 ms (+20.0%)" in line


def test_a_tensor_fusion_row_compares_the_prediction_without_bucket_cpu_latency(monkeypatch):
    run = load_run()
    calls = []
    monkeypatch.setattr(run, "predict", lambda prof, opt, options, recorded=None:
                        calls.append((opt, options, recorded)) or {"options": options})
    options = {"world_size": 2, "queued_latency_us": 250.0, "bucket_cpu_latency": "50:300.0;400:700.0"}
    out = {}
    caps = {"bucket_mb": 25, "first_bucket_mb": 25}
    run.add_without_bucket_latency(out, "prof", options, caps)
    assert calls == [("tensor_fusion", {"world_size": 2, "queued_latency_us": 250.0, "bucket_cpu_latency": ""}, caps)]
    # Without the calibration's points there is nothing to compare.
    calls.clear()
    out = {}
    run.add_without_bucket_latency(out, "prof", {"world_size": 2, "queued_latency_us": 250.0}, caps)
    assert calls == [] and "prediction_no_bucket_latency" not in out
    # With a curve per bucket count, also the one of the most buckets for
    # every count (the model of runs 47-48).
    calls.clear()
    out = {}
    run.add_without_bucket_latency(out, "prof", {**options, "bucket_cpu_latency": "4@140:600.0|16@50:300.0;400:700.0"},
                                   caps)
    assert [c[1]["bucket_cpu_latency"] for c in calls] == ["", "50:300.0;400:700.0"]
    assert out["prediction_one_bucket_curve"]["options"]["bucket_cpu_latency"] == "50:300.0;400:700.0"

    r = tensor_fusion_row("tensor_fusion_reverse", "transformer", {"baseline": "DDP x2, bucket_cap_mb=25",
                                                                    "optimized": "DDP x2, bucket_cap_mb=0.0152"},
                          {"gap_latency": "500:0.0", "queued_latency_us": 250.0,
                           "bucket_cpu_latency": "50:300.0;400:700.0"})
    r["prediction_no_bucket_latency"] = {"predicted_ms": 1.3, "error_pct": 30.0, "options": {}}
    r["prediction_one_bucket_curve"] = {"predicted_ms": 1.1, "error_pct": 10.0,
                                        "options": {"bucket_cpu_latency": "50:300.0;400:700.0"}}
    meta = {"command": "`run.py`", "machine": "test", "torch": "x", "threads": 1, "rounds": 1, "steps": 1,
            "wall_s": 60.0, "loadavg_1min": {"start": 0.0, "end": 0.0}, "summary": run.summary([r])}
    line = next(x for x in run.table([r], meta).splitlines() if x.startswith("- tensor_fusion_reverse on transformer:"))
    assert ("; without bucket_cpu_latency (50:300.0;400:700.0: every all-reduce's latency on the network, one queued "
            "behind another at queued_latency_us 250 us) 1.300 ms (+30.0%)") in line
    assert ("; with the curve of the most buckets for every bucket count (50:300.0;400:700.0), the model of "
            "runs 47-48, 1.100 ms (+10.0%)") in line


def test_a_single_process_row_captures_its_optimized_step_with_capture_optimized(monkeypatch):
    import argparse

    import pytest

    pytest.importorskip("torch")
    run = load_run()
    captured = []
    monkeypatch.setattr(run, "interleaved", lambda configs, *args, **kw: {k: [[1.0, 1.1]] for k in configs})
    monkeypatch.setattr(run, "capture", lambda step, model, opt, active: captured.append((step, model, opt)) or "prof")
    monkeypatch.setattr(run, "predict", lambda prof, opt, options: {"pass": opt})
    monkeypatch.setattr(run, "replay_capture", lambda prof: {"replayed_ms": 1.0, "of": prof})
    a = argparse.Namespace(threads=1, warmup=1, rounds=1, steps=1, active=1, save_traces=None, capture_optimized=True)
    row = run.single_process("amp", "mlp", a)
    # The baseline is captured, then the optimized step, with its own model and optimizer.
    assert len(captured) == 2 and captured[0][1] is not captured[1][1] and captured[0][2] is not captured[1][2]
    assert row["optimized_capture"] == {"replayed_ms": 1.0, "of": "prof"}
    captured.clear()
    a.capture_optimized = False
    assert "optimized_capture" not in run.single_process("amp", "mlp", a) and len(captured) == 1


def test_a_data_parallel_row_takes_the_ddp_step_apart_beside_the_prediction():
    run = load_run()
    r = {"baseline": {"median_ms": 3.0}, "two_plain_processes": {"median_ms": 3.25},
         "ddp_no_comm": {"median_ms": 3.5}, "optimized": {"median_ms": 6.5},
         "prediction": {"replayed_ms": 4.0, "raw_predicted_ms": 6.75},
         "prediction_no_comm": {"raw_predicted_ms": 4.25}}
    text = run.where_the_step_goes(r)
    # Measured: +0.5 before any communication (+0.25 of it without DDP), +3.0
    # communicating; predicted: +0.25 and +2.5, each from its own baseline.
    assert "DDP's own CPU work +0.500 / +0.250 (of it, without DDP +0.250 measured)" in text
    assert "communicating +3.000 / +2.500" in text
    assert "3.500 ms; predicted: the network priced at zero, 4.250 ms" in text


def test_repredict_drops_only_the_measured_waits():
    repredict = load_script("repredict.py")
    opt = "tensor_fusion:world_size=2,comm_cpu_share=0.3,recorded_cpu_wait_us=1.5;2;0,queued_latency_us=5"
    assert repredict.without_waits(opt) == "tensor_fusion:world_size=2,comm_cpu_share=0.3,queued_latency_us=5"
    assert repredict.without_waits("tensor_fusion:recorded_cpu_wait_us=1;2,world_size=2") == "tensor_fusion:world_size=2"
    assert repredict.without_waits("tensor_fusion:recorded_cpu_wait_us=1;2,unprofiled_cpu_wait_us=3.5,world_size=2") \
        == "tensor_fusion:world_size=2"
    assert repredict.without_waits("amp") == "amp"


def test_repredict_fits_a_kept_capture_both_ways_and_predicts_it_four(tmp_path):
    """On a kept single-process capture (no collectives) the forward fit is
    the step fit, and there are no waits to drop: the four ways agree, and
    the first is the row's own prediction."""
    import argparse  # noqa: PLC0415
    import json  # noqa: PLC0415

    import daydream  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from models import build, train_under  # noqa: PLC0415

    run, repredict = load_run(), load_script("repredict.py")
    torch.manual_seed(0)
    model = build("mlp")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    prof = daydream.Profiler(wait=3, warmup=1, active=2, model=model, optimizer=opt)
    train_under(prof, model, opt, 6)
    prediction = daydream.predict(prof, opt="scale:cpu=0.5")
    run.keep_capture(argparse.Namespace(save_traces=tmp_path), "scale", "mlp", prof, {"opts": prediction.opts})
    measured = json.loads((tmp_path / "scale_mlp.options.json").read_text())["profiler"]
    assert measured["plain_step_ms"] == prof.plain_step_ms and measured["plain_forward_ms"] == prof.plain_forward_ms
    row = {"experiment": "scale", "model": "mlp", "baseline": {"median_ms": 2.0}, "measured_ms": 1.0}
    errors = repredict.errors(row, tmp_path)
    assert errors is not None and len(errors) == 4
    assert errors[0] == pytest.approx(100 * (2.0 / prediction.speedup - 1.0), rel=1e-6)
    assert errors == pytest.approx([errors[0]] * 4, rel=1e-9)
    # A row without a kept capture, or one kept before the Profiler's measurements were, is skipped.
    assert repredict.errors(dict(row, model="cnn"), tmp_path) is None


def test_predict_with_the_recorded_options_reprices_the_capture_through_the_same_pass(monkeypatch):
    import daydream

    run = load_run()
    calls = []

    class Prof:
        capture_tries, plain_step_ms, plain_step_after_ms, overhead = [], 2.0, 2.0, None

        def speed_drift(self):
            return None

    class P:
        def __init__(self, ms):
            self.opts, self.measured_ms, self.replayed_ms, self.predicted_ms = ["x"], 3.0, 2.0, ms
            self.speedup, self.notes, self.by_phase = 2.0 / ms, [], {}

    def fake(prof, opt, **options):
        calls.append((opt, options))
        return P(1.0 if options.get("bucket_mb", 25) == 25 else 2.5)

    monkeypatch.setattr(daydream, "predict", fake)
    options = {"world_size": 2, "bucket_mb": 25, "first_bucket_mb": 25, "latency_us": 80.0}
    pred = run.predict(Prof(), "tensor_fusion", options, {"bucket_mb": 0.01, "first_bucket_mb": 0.01})
    # The pass again, every option the same but the captured buckets.
    assert calls == [("tensor_fusion", options),
                     ("tensor_fusion", {**options, "bucket_mb": 0.01, "first_bucket_mb": 0.01})]
    assert pred["repriced_ms"] == 2.5 and pred["raw_predicted_ms"] == 1.0 and pred["replayed_ms"] == 2.0
    calls.clear()
    assert run.predict(Prof(), "amp", {})["repriced_ms"] is None and len(calls) == 1


def test_data_parallel_carries_the_quiet_step_by_the_ratio_and_adds_the_communication_in_ms():
    run = load_run()

    def pred(raw):
        return {"raw_predicted_ms": raw, "replayed_ms": 4.0, "speedup": 4.0 / raw, "repriced_ms": None,
                "profiled_measured_ms": 6.0}

    # The capture replays 4.0 ms against a 5.0 ms unprofiled baseline; the
    # pass gives 4.4 ms with the network priced at zero, 6.4 ms with it, 6.0
    # without its gap latency.
    row = {"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 7.0}, "round_speedups": [0.7, 0.72],
           "prediction": pred(6.4), "prediction_no_comm": pred(4.4), "prediction_no_gap": pred(6.0)}
    run.finish(row)
    # The quiet step scaled by 5/4, the 2.0 ms of communication added as it is.
    assert row["predicted_ms"] == pytest.approx(5.0 * 4.4 / 4.0 + 2.0)
    assert row["error_pct"] == pytest.approx(100 * (7.5 - 7.0) / 7.0)
    assert row["predicted_speedup"] == pytest.approx(5.0 / 7.5)
    # The ratio alone scales the communication too.
    assert row["predicted_ratio_ms"] == pytest.approx(5.0 * 6.4 / 4.0)
    assert row["error_ratio_pct"] == pytest.approx(100 * (8.0 - 7.0) / 7.0)
    # A comparison prediction is carried over the same way, its own network added.
    assert row["prediction_no_gap"]["predicted_ms"] == pytest.approx(5.5 + 1.6)
    s = run.summary([{**row, "experiment": "data_parallel", "model": "mlp"}])
    assert s["split_count"] == 1 and s["split_max_abs_error_pct"] == pytest.approx(100 * 0.5 / 7.0)
    assert s["split_ratio_max_abs_error_pct"] == pytest.approx(100 * 1.0 / 7.0)
    # finish again (run.py --from-json) gives the same row.
    again = run.finish(dict(row))
    assert again["predicted_ms"] == pytest.approx(row["predicted_ms"]) and again["noise_pct"] == row["noise_pct"]
    # A row without the quiet prediction (every other pass): the ratio, nothing beside it.
    other = {"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 4.0}, "round_speedups": [1.2, 1.3],
             "prediction": pred(2.0)}
    run.finish(other)
    assert other["predicted_ms"] == pytest.approx(2.5) and "predicted_ratio_ms" not in other
    assert "split_count" not in run.summary([{**other, "experiment": "amp", "model": "mlp"}])


def test_finish_takes_a_tensor_fusion_speed_up_against_the_repriced_capture():
    run = load_run()

    def pred(raw, repriced):
        return {"raw_predicted_ms": raw, "replayed_ms": 4.0, "speedup": 4.0 / raw, "repriced_ms": repriced,
                "profiled_measured_ms": 6.0}

    row = {"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 4.0}, "round_speedups": [1.2, 1.3],
           "prediction": pred(2.0, 3.0), "prediction_no_gap": pred(2.4, 3.2)}
    run.finish(row)
    # 5.0 ms unprofiled / (3.0 repriced / 2.0 predicted), not 5.0 / (4.0 replayed / 2.0).
    assert row["predicted_ms"] == pytest.approx(5.0 * 2.0 / 3.0)
    assert row["predicted_speedup"] == pytest.approx(1.5)
    assert row["error_pct"] == pytest.approx(100 * (5.0 * 2.0 / 3.0 - 4.0) / 4.0)
    assert row["predicted_replay_ratio_ms"] == pytest.approx(2.5)
    assert row["error_replay_ratio_pct"] == pytest.approx(-37.5)
    assert row["repriced_baseline_error_pct"] == pytest.approx(-40.0)
    # The additive carry-over takes the change from the same repriced capture.
    assert row["predicted_additive_ms"] == pytest.approx(5.0 + 2.0 - 3.0)
    # A comparison prediction against its own repriced capture.
    assert row["prediction_no_gap"]["predicted_ms"] == pytest.approx(5.0 * 2.4 / 3.2)
    s = run.summary([{**row, "experiment": "tensor_fusion", "model": "mlp"}])
    assert s["replay_ratio_count"] == 1 and s["replay_ratio_max_abs_error_pct"] == pytest.approx(37.5)

    # Without a repriced capture (every other pass): against the replay, as before.
    single = {"baseline": {"median_ms": 5.0}, "optimized": {"median_ms": 4.0}, "round_speedups": [1.2, 1.3],
              "prediction": pred(2.0, None)}
    run.finish(single)
    assert single["predicted_ms"] == pytest.approx(2.5) and "error_replay_ratio_pct" not in single
    assert single["predicted_additive_ms"] == pytest.approx(3.0)
    assert run.summary([{**single, "experiment": "amp", "model": "mlp"}]).get("replay_ratio_count") is None


def test_phase_check_real_changes_are_optimized_minus_baseline_medians_per_phase_and_step():
    check = load_script("phase_check.py")
    baseline = [(1.0, 2.0, 0.5), (1.2, 2.2, 0.7), (0.8, 1.8, 0.6)]
    optimized = [(1.5, 3.0, 0.9), (1.7, 2.6, 0.5), (1.6, 2.8, 0.4)]
    changes = check.real_changes(optimized, baseline)
    assert changes["forward"] == pytest.approx(1.6 - 1.0)
    assert changes["backward"] == pytest.approx(2.8 - 2.0)
    assert changes["optimizer"] == pytest.approx(0.5 - 0.6)
    # The step's change is of the median sum (4.8), not the sum of the phase medians (4.9).
    assert changes["step"] == pytest.approx(4.8 - 3.5)


def test_phase_check_replay_changes_take_each_calls_difference_then_the_median():
    check = load_script("phase_check.py")
    calls = [{"forward": (2.0, 1.0), "backward": (5.0, 3.0)},
             {"forward": (3.0, 1.5), "backward": (4.0, 3.5)},
             {"forward": (1.0, 0.8), "backward": (6.0, 3.0)}]
    assert check.replay_changes(calls) == pytest.approx({"forward": 1.0, "backward": 2.0})
    # A phase one call could not replay is left out rather than half-counted.
    assert check.replay_changes([*calls, {"forward": (1.0, 0.5)}]) == pytest.approx({"forward": 0.75})
