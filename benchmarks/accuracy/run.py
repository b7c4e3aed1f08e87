#!/usr/bin/env python3
"""Ground truth for daydream's predictions (issue 5): predict an optimization
from a captured baseline, then run the optimization for real and compare.

    python benchmarks/accuracy/run.py --doc docs/accuracy.md --json benchmarks/accuracy/results.json
    python benchmarks/accuracy/run.py --quick            # smoke run: few steps, no files written

Each experiment (one optimization on one of the three small models the tests
train: an MLP, a CNN with batch norm, a transformer encoder) runs in its own
Python process, on the CPU:

1. the baseline training step and the optimized one run without any profiler,
   interleaved round by round (the order alternates) so that machine noise
   hits both alike; step time = median over all timed steps after warm-up,
   with the 10th-90th percentile spread;
2. the baseline is captured with ``daydream.Profiler(model=..., optimizer=...)``
   and ``daydream.predict`` runs the matching pass on its graph;
3. the prediction of the unprofiled optimized step is
   ``baseline median (unprofiled) / predicted speed-up`` (ratio carry-over;
   on data_parallel the step with the network priced at zero so, plus what
   the calibrated network adds to it in ms: ``carried_ms``).
   daydream.Profiler removes the profiler's own overhead from the graph it
   captures, so the pass's own ``predicted_ms`` predicts the unprofiled
   optimized step directly too: it is reported beside it (``raw_predicted_ms``
   and ``predicted_direct_ms`` in the JSON), with the additive carry-over.

error % = 100 * (predicted - measured) / measured. Noise: each round gives a
measured speed-up (baseline median / optimized median of that round); two
standard errors of their mean, in % of the overall measured speed-up, is how
uncertain the measured figure itself is. An error below it is within noise.

Experiments (``--experiments``): fused_optimizer (Adam(foreach=False) ->
Adam(fused=True)), batch_size (B -> 2B, per step), amp (fp32 ->
torch.autocast("cpu", bfloat16)), data_parallel (1 process -> DDP over 2
processes, gloo, network calibrated here), tensor_fusion (DDP with small
buckets -> bucket_cap_mb=25, captured on rank 0 with its gloo all-reduces),
tensor_fusion_reverse (the same, bucket_cap_mb=25 -> small buckets),
op_fusion (eager -> torch.compile; skipped if it fails or compiles too slowly).
Every process runs with ``torch.set_num_threads(--threads)`` (1: the two-rank
runs need one core each on a two-core machine, and one thread keeps the
timings of a busy machine steady) and, unless ``--malloc default``, glibc's
mmap and trim thresholds at 1 GiB (``MALLOC_ENV``: otherwise whether large
tensors fault in fresh pages every step depends on the heap's history).
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))

EXPERIMENTS = ["fused_optimizer", "batch_size", "amp", "data_parallel", "tensor_fusion", "tensor_fusion_reverse",
               "op_fusion"]
MODELS = ["mlp", "cnn", "transformer"]
# Per-process batch of each model: a few milliseconds per step on one core.
BATCH = {"mlp": 256, "cnn": 16, "transformer": 8}
DOC_BEGIN = "<!-- ground-truth:begin -->"
DOC_END = "<!-- ground-truth:end -->"
DOC_BEGIN_REALTIME = "<!-- ground-truth-realtime:begin -->"
DOC_END_REALTIME = "<!-- ground-truth-realtime:end -->"
TARGET_MEDIAN, TARGET_MAX = 5.0, 15.0
# Second predictions some rows carry, for comparison (same carry-over):
# tensor_fusion with the pass's default network, amp with one GEMM ratio, the
# communication passes with collectives beside compute (comm_cpu_share=0, no
# buffer broadcast: their model before the CPU share was measured), and
# fused_optimizer with its operator and bandwidth model instead of the
# measured step factor.
ALTERNATIVE_PREDICTIONS = ("prediction_trace_fit", "prediction_gemm_ratio", "prediction_beside_compute",
                           "prediction_op_model", "prediction_no_gap", "prediction_chain_model",
                           "prediction_synthetic_ddp", "prediction_no_corun", "prediction_blocking_gap",
                           "prediction_ddp_gap", "prediction_median_network", "prediction_no_bucket_latency",
                           "prediction_no_broadcast_latency", "prediction_mean_network", "prediction_one_bucket_curve")
MIB = 1024 * 1024
# glibc serves allocations from 128 kB up with mmap until a free raises its
# threshold, and trims the heap's top: whether a step's large tensors fault
# in fresh zeroed pages each time depends on the heap's history, and the
# small CNN's fp32 step then runs in 2.9-3.3 ms in one process and 4.0-4.6
# ms in the next (docs/accuracy.md). "steady" keeps them in the heap, as
# jemalloc/tcmalloc (PyTorch's CPU tuning guide) do.
MALLOC_ENV = {"steady": {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
              "default": {}}


# --- shared helpers (child processes) ------------------------------------------------------
def make_batch(name: str, batch: int, seed: int = 0) -> Tuple[Any, Any]:
    """A batch of ``batch`` samples shaped as tests/python/models.py's batch_for."""
    import torch  # noqa: PLC0415

    g = torch.Generator().manual_seed(seed)
    if name == "mlp":
        return torch.randn(batch, 64, generator=g), torch.randint(0, 10, (batch,), generator=g)
    if name == "cnn":
        return torch.randn(batch, 3, 16, 16, generator=g), torch.randint(0, 10, (batch,), generator=g)
    return torch.randint(0, 100, (batch, 16), generator=g), torch.randint(0, 100, (batch, 16), generator=g)


def stats(xs: Sequence[float]) -> Dict[str, float]:
    q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
    return {"median_ms": statistics.median(xs), "p10_ms": q[0], "p90_ms": q[-1], "steps": len(xs)}


def timed(step: Callable[[], None], n: int) -> List[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def amp_step(model: Any, inputs: Any, target: Any, loss_fn: Any, optimizer: Any) -> Callable[[], None]:
    import torch  # noqa: PLC0415

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(inputs), target)
        loss.backward()
        optimizer.step()

    return step


def interleaved(configs: Dict[str, Callable[[], None]], warmup: int, rounds: int, steps: int,
                sync: Optional[Callable[[str], None]] = None) -> Dict[str, List[List[float]]]:
    """Step times per config and round; the order of the configs alternates
    from round to round. ``sync(config)`` runs after each block (DDP barriers)."""
    names = list(configs)
    for name in names:
        timed(configs[name], warmup)
        if sync:
            sync(name)
    out: Dict[str, List[List[float]]] = {n: [] for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            out[name].append(timed(configs[name], steps))
            if sync:
                sync(name)
    return out


CAPTURE_WAIT, CAPTURE_WARMUP = 10, 2  # daydream.Profiler's defaults: 10 steps timed without it, 2 discarded
CAPTURE_TRIES = 3  # profile_steps' default: recorded again while the machine's speed moves


# Steps a capture runs: CAPTURE_WAIT timed plain, CAPTURE_WARMUP, the
# recorded ones, then CAPTURE_WAIT timed plain again (Profiler.speed_drift).
def capture_steps(active: int) -> int:
    return 2 * CAPTURE_WAIT + CAPTURE_WARMUP + active


def capture(step: Callable[[], None], model: Any, optimizer: Any, active: int,
            agree: Optional[Callable[[bool], bool]] = None) -> Any:
    """The baseline recorded as daydream.predict(model) records it: again
    (up to CAPTURE_TRIES captures) while the machine's speed moves."""
    from daydream.capture import profile_steps  # noqa: PLC0415

    return profile_steps(step, CAPTURE_WARMUP, active, model=model, optimizer=optimizer, wait=CAPTURE_WAIT,
                         tries=CAPTURE_TRIES, agree=agree)


def any_rank(dist: Any, torch: Any) -> Callable[[bool], bool]:
    """profile_steps' ``agree`` for the two ranks: whether either's capture
    drifted (rank 1 passes False: it only runs the steps)."""
    def agree(drifted: bool) -> bool:
        flag = torch.tensor([1 if drifted else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())
    return agree


def mirror_capture(step: Callable[[], None], active: int, agree: Callable[[bool], bool]) -> None:
    """Rank 1's side of rank 0's capture: the same steps, as many times."""
    for _ in range(CAPTURE_TRIES):
        for _ in range(capture_steps(active)):
            step()
        if not agree(False):
            return


def opt_value(prediction: Dict[str, Any], key: str) -> Optional[str]:
    """An option of a prediction's first pass as daydream.predict ran it
    (calibrated options included)."""
    for kv in prediction["opts"][0].partition(":")[2].split(","):
        k, _, v = kv.partition("=")
        if k == key:
            return v
    return None


def measured_ddp_cpu(prediction: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """DDP's own CPU work as daydream.predict measured it on the model
    (ddp_cpu_us, ddp_cpu_per_gradient_us), None where it did not."""
    found = {k: opt_value(prediction, k) for k in ("ddp_cpu_us", "ddp_cpu_per_gradient_us")}
    return None if None in found.values() else found  # type: ignore[return-value]


def predict(prof: Any, opt: str, options: Dict[str, Any], recorded: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One prediction's figures. With ``recorded`` (the options that give the
    captured configuration itself, on tensor_fusion its bucket caps), the
    same pass with them too: the baseline with its recorded all-reduces
    repriced as the prediction prices the new ones (``repriced_ms``), the
    denominator of the row's carry-over (finish)."""
    import daydream  # noqa: PLC0415

    t0 = time.perf_counter()
    p = daydream.predict(prof, opt=opt, **options)  # the Profiler: predict sees the model, as a user's would
    repriced = daydream.predict(prof, opt=opt, **{**options, **recorded}).predicted_ms if recorded else None
    return {
        "pass": opt,
        "options": {k: v for k, v in options.items()},
        "opts": p.opts,
        "profiled_measured_ms": p.measured_ms,
        "replayed_ms": p.replayed_ms,
        "raw_predicted_ms": p.predicted_ms,
        "speedup": p.speedup,
        "repriced_ms": repriced,
        "notes": list(p.notes),
        "speed_drift": prof.speed_drift(),  # None, or how the plain steps moved around the recorded ones
        "capture_tries": list(prof.capture_tries),  # per capture profile_steps made: how far the speed moved
        "plain_step_ms": {"before": prof.plain_step_ms, "after": prof.plain_step_after_ms},
        "predict_s": time.perf_counter() - t0,
        "by_phase_ms": p.by_phase,  # busy ms per iteration, replayed baseline ("before") and predicted ("after")
        "overhead_fit": {k: getattr(prof.overhead, k, None)
                         for k in ("scale", "cpu_factor", "plain_step_ms", "unscaled_replayed_ms", "fitted_replayed_ms",
                                  "fit_note", "plain_optimizer_ms", "optimizer_cpu_factor")},
    }


def replay_capture(prof: Any) -> Dict[str, Any]:
    """--capture-optimized: the optimized configuration, captured as the
    baseline is, and replayed (the profiler's overhead removed, fitted to its
    plain steps): what the pass's predicted graph should look like, phase by
    phase. Its replay against the optimized run's unprofiled median says how
    much of a row's error a perfect pass would still have."""
    import daydream  # noqa: PLC0415

    p = daydream.predict(prof.graph, opt="scale")  # factor 1 everywhere: the replay and its phases
    return {"profiled_measured_ms": p.measured_ms, "replayed_ms": p.replayed_ms,
            "plain_step_ms": {"before": prof.plain_step_ms, "after": prof.plain_step_after_ms},
            "by_phase_ms": p.by_phase["before"], "fit_note": getattr(prof.overhead, "fit_note", "")}


def capture_ranks(a: argparse.Namespace, step: Callable[[], None], model: Any, optimizer: Any, rank: int,
                  dist: Any, torch: Any) -> Any:
    """A two-process job's capture: rank 0 records its steps; rank 1 runs
    the same steps, under a Profiler of its own with ``--profile-ranks all``
    (as a user profiles every rank of a job: each rank then waits for a
    peer slowed as much as itself) or plainly with ``0``. Rank 0's
    Profiler (rank 1: None)."""
    agree = any_rank(dist, torch)
    prof = None
    if rank == 0:
        prof = capture(step, model, optimizer, a.active, agree=agree)
    elif a.profile_ranks == "all":
        capture(step, model, optimizer, a.active, agree=agree)  # its recording is not read
    else:
        mirror_capture(step, a.active, agree)
    dist.barrier()
    return prof


def capture_optimized(a: argparse.Namespace, step: Callable[[], None], model: Any, optimizer: Any, rank: int,
                      dist: Any, torch: Any) -> Any:
    """--capture-optimized, in a two-process job: the optimized DDP step
    captured as the baseline is (capture_ranks). Rank 0's Profiler, else None."""
    if not getattr(a, "capture_optimized", False):
        return None
    return capture_ranks(a, step, model, optimizer, rank, dist, torch)


def add_optimized_capture(a: argparse.Namespace, exp: str, name: str, out: Dict[str, Any], prof: Any) -> None:
    """Rank 0: the optimized capture's replay into the row, and its files with --save-traces."""
    if prof is not None:
        out["optimized_capture"] = replay_capture(prof)
        keep_capture(a, exp, name, prof, suffix=".optimized")


def keep_capture(a: argparse.Namespace, exp: str, name: str, prof: Any, prediction: Optional[Dict[str, Any]] = None,
                 suffix: str = "") -> None:
    """--save-traces: the captured baseline, the graph daydream.predict ran
    the pass on (the profiler's overhead removed) and the passes as it ran
    them (calibrated options included), to rerun by hand with `daydream
    predict TRACE --opt OPTS` or on the graph (`daydream.Graph.load`). With
    ``suffix`` (".optimized", --capture-optimized) another capture of the row
    beside it, trace and graph."""
    if not getattr(a, "save_traces", None):
        return
    os.makedirs(a.save_traces, exist_ok=True)
    stem = os.path.join(a.save_traces, f"{exp}_{name}{suffix}")
    prof.save_trace(stem + ".json.gz")
    prof.graph.save(stem + ".graph.pb")  # what daydream.predict ran the pass on: the profiler's overhead removed
    if prediction is not None:
        # With what the Profiler measured, so that the capture can be fitted
        # again another way (repredict.py).
        o = getattr(prof, "overhead", None)
        measured = {"plain_step_ms": getattr(prof, "plain_step_ms", None),
                    "plain_optimizer_ms": getattr(prof, "plain_optimizer_ms", None),
                    "plain_forward_ms": getattr(prof, "plain_forward_ms", None),
                    "plain_cpu_wait_after_forward_ms": getattr(prof, "plain_cpu_wait_after_forward_ms", None),
                    "overhead": None if o is None else {
                        "per_record_ns": o.per_record_ns, "module_hook_ns": o.module_hook_ns,
                        "grad_hook_ns": o.grad_hook_ns, "record_shapes": o.record_shapes}}
        Path(stem + ".options.json").write_text(json.dumps({"opts": prediction["opts"], "profiler": measured},
                                                           indent=1) + "\n")


def summarize(times: Dict[str, List[List[float]]], base: str, opt: str) -> Dict[str, Any]:
    flat = {k: [t for r in v for t in r] for k, v in times.items()}
    ratios = [statistics.median(b) / statistics.median(o) for b, o in zip(times[base], times[opt])]
    return {"baseline": stats(flat[base]), "optimized": stats(flat[opt]), "round_speedups": ratios}


def adam(params: Any, **kw: Any) -> Any:
    import torch  # noqa: PLC0415

    return torch.optim.Adam(params, lr=1e-3, **kw)


def grad_mb(model: Any) -> float:
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad) / MIB


# --- single-process experiments -----------------------------------------------------------
def single_process(exp: str, name: str, a: argparse.Namespace) -> Dict[str, Any]:
    import torch  # noqa: PLC0415
    from daydream.capture import training_step  # noqa: PLC0415
    from models import build, loss_for  # noqa: PLC0415

    torch.set_num_threads(a.threads)
    loss_fn = loss_for(name)
    batch = BATCH[name]
    x, y = make_batch(name, batch)
    base_model = build(name)
    base_opt = adam(base_model.parameters(), foreach=False if exp == "fused_optimizer" else None)
    base_step = training_step(base_model, x, y, loss_fn, base_opt)
    opt_model = build(name)
    extra: Dict[str, Any] = {"batch": batch}
    if exp == "fused_optimizer":
        opt_opt = adam(opt_model.parameters(), fused=True)
        opt_step = training_step(opt_model, x, y, loss_fn, opt_opt)
        pass_opt, options = "fused_optimizer", {}
        extra.update(baseline="Adam(foreach=False)", optimized="Adam(fused=True)")
    elif exp == "batch_size":
        x2, y2 = make_batch(name, 2 * batch)
        opt_opt = adam(opt_model.parameters())
        opt_step = training_step(opt_model, x2, y2, loss_fn, opt_opt)
        pass_opt, options = "batch_size", {"factor": 2}
        extra.update(baseline=f"batch {batch}", optimized=f"batch {2 * batch}")
    elif exp == "amp":
        opt_opt = adam(opt_model.parameters())
        opt_step = amp_step(opt_model, x, y, loss_fn, opt_opt)
        pass_opt, options = "amp", {}  # daydream.predict measures cpu_op_factors here
        extra.update(baseline="fp32", optimized='torch.autocast("cpu", torch.bfloat16)')
    elif exp == "op_fusion":
        compiled = torch.compile(opt_model)
        opt_opt = adam(opt_model.parameters())
        opt_step = training_step(compiled, x, y, loss_fn, opt_opt)
        t0 = time.perf_counter()
        try:
            for _ in range(3):
                opt_step()
        except Exception as e:  # noqa: BLE001 - any compile failure is a skip reason
            return {"skipped": f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        compile_s = time.perf_counter() - t0
        if compile_s > a.compile_limit:
            return {"skipped": f"torch.compile took {compile_s:.0f} s (> {a.compile_limit:.0f} s)"}
        pass_opt, options = "op_fusion", {}
        extra.update(baseline="eager", optimized=f"torch.compile(model) (inductor, CPU; first 3 steps {compile_s:.0f} s)",
                     compile_s=round(compile_s, 1))
    else:
        raise ValueError(exp)
    times = interleaved({"baseline": base_step, "optimized": opt_step}, a.warmup, a.rounds, a.steps)
    prof = capture(base_step, base_model, base_opt, a.active)
    out = summarize(times, "baseline", "optimized")
    out["prediction"] = predict(prof, pass_opt, options)
    keep_capture(a, exp, name, prof, out["prediction"])
    if exp == "amp":
        # The pass's fallback model for comparison: one bf16/fp32 GEMM ratio
        # (three fixed torch.mm shapes) for every op instead of the measured factors.
        from daydream.calibrate import amp_cpu_ratio  # noqa: PLC0415

        out["prediction_gemm_ratio"] = predict(prof, pass_opt, {"cpu_gemm_factor": round(amp_cpu_ratio(), 4)})
    if exp == "fused_optimizer":
        # The pass's model without the optimizer (a trace file): operator
        # costs plus bytes at the bandwidth the unfused ops reached.
        out["prediction_op_model"] = predict(prof, pass_opt, {"cpu_step_factor": 0})
    if exp == "op_fusion":
        # The pass's model without the model (a trace file): chains of
        # elementwise ops fused, instead of the phases timed under torch.compile.
        out["prediction_chain_model"] = predict(prof, pass_opt, {"cpu_op_factors": ""})
    if getattr(a, "capture_optimized", False):
        # The optimized step captured as the baseline was: its phases beside the prediction's.
        add_optimized_capture(a, exp, name, out, capture(opt_step, opt_model, opt_opt, a.active))
    out["config"] = extra
    return out


# --- two-process experiments (gloo) ------------------------------------------------------
def ddp_rank(rank: int, world: int, port: int, exp: str, name: str, a: argparse.Namespace, out_path: str) -> None:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    warnings.filterwarnings("ignore")
    dump_stacks_before_limit(exp, a)  # a spawned rank starts without the child's
    from daydream.calibrate import keep_bucket_hook, measure_network  # noqa: PLC0415
    from daydream.capture import training_step  # noqa: PLC0415
    from models import build, loss_for  # noqa: PLC0415

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        comm_threads = 0
        if a.comm_threads == "realtime":
            dist.barrier()  # gloo's threads exist once it has communicated
            comm_threads = realtime_comm_threads()
        loss_fn = loss_for(name)
        batch = BATCH[name]
        x, y = make_batch(name, batch, seed=rank)  # each rank its own data, the same per-rank batch
        out: Dict[str, Any] = {}
        if exp == "data_parallel":
            plain = build(name)
            plain_opt = adam(plain.parameters())
            configs = {"baseline": training_step(plain, x, y, loss_fn, plain_opt)}
            ddp = DDP(build(name))  # DDP defaults: 25 MB buckets, the first 1 MB
            ddp_opt = adam(ddp.parameters())
            configs["optimized"] = training_step(ddp, x, y, loss_fn, ddp_opt)
            # data_parallel takes no bucket_cpu_latency: no second curve.
            net = measure_network(dist, torch, max(4 * MIB, int(2 * grad_mb(plain) * MIB)), a.net_repeats, coarse=0)
            # The single-process baseline runs on rank 0 alone; rank 1 waits.
            # Diagnostic, not predicted: the plain step on both ranks at once
            # (no DDP), i.e. what sharing the machine with a second process
            # costs before any communication.
            # And DDP with nothing to communicate (keep_bucket_hook, no buffer
            # broadcast) on both ranks: DDP's own CPU work as the ranks run it.
            # The optimized step less it is what communicating costs, the
            # part of the truth that the network calibration prices.
            quiet = DDP(build(name), forward_sync_buffers=False)
            quiet.register_comm_hook(None, keep_bucket_hook)
            run = {"baseline": configs["baseline"] if rank == 0 else (lambda: None), "optimized": configs["optimized"],
                   "two_plain": configs["baseline"],
                   "ddp_no_comm": training_step(quiet, x, y, loss_fn, adam(quiet.parameters()))}
            if a.comm_threads == "realtime":
                comm_threads = realtime_comm_threads()  # and any thread the calibration started
            times = interleaved(run, a.warmup, a.rounds, a.steps, sync=lambda _n: dist.barrier())
            captured_opt = capture_optimized(a, configs["optimized"], ddp, ddp_opt, rank, dist, torch)
            if rank == 0:
                prof = capture(configs["baseline"], plain, plain_opt, a.active)
                out = summarize(times, "baseline", "optimized")
                out["two_plain_processes"] = stats([t for r in times["two_plain"] for t in r])
                out["ddp_no_comm"] = stats([t for r in times["ddp_no_comm"] for t in r])
                # DDP's own CPU work: measured by predict on the model itself
                # (ddp_cpu_phase_times); the calibration's synthetic Linear
                # stacks give the comparison row.
                synthetic = network_options(net)
                ddp_cpu = {k: synthetic.pop(k) for k in ("ddp_cpu_us", "ddp_cpu_per_gradient_us")}
                options = {"world_size": world, "bucket_mb": 25, "first_bucket_mb": 1, **synthetic}
                out["prediction"] = predict(prof, "data_parallel", options)
                # The co-running factor predict measured (or left at 1): the
                # comparison predictions below keep it rather than measure again.
                corun = opt_value(out["prediction"], "cpu_factor")
                options["cpu_factor"] = float(corun) if corun else 1.0
                out["corun_note"] = next((n for n in out["prediction"]["notes"]
                                          if "ranks sharing this host" in n or "co-running" in n), None)
                measured = measured_ddp_cpu(out["prediction"])
                if measured is None:  # predict could not measure it: the synthetic figures, and its note stays
                    out["ddp_cpu_not_measured"] = [n for n in out["prediction"]["notes"] if "not measured" in n]
                    out["prediction"] = predict(prof, "data_parallel", {**options, **ddp_cpu})
                else:
                    out["prediction_synthetic_ddp"] = predict(prof, "data_parallel", {**options, **ddp_cpu})
                options.update(measured or ddp_cpu)
                keep_capture(a, exp, name, prof, out["prediction"])
                out["prediction_beside_compute"] = predict(prof, "data_parallel",
                                                           {**options, "comm_cpu_share": 0, "buffer_bytes": 0})
                out["prediction_no_gap"] = predict(prof, "data_parallel", {**options, "gap_latency": ""})
                if options.get("broadcast_latency") and any(True for _ in plain.buffers()):
                    # The buffer broadcast at its wire time (the pass's model before broadcast_latency).
                    out["prediction_no_broadcast_latency"] = predict(prof, "data_parallel",
                                                                     {**options, "broadcast_latency": ""})
                # The prediction with nothing to communicate, as ddp_no_comm.
                out["prediction_no_comm"] = predict(prof, "data_parallel", {
                    **options, "latency_us": 0.0, "bandwidth_gbps": 1e6, "gap_latency": "", "queued_latency_us": -1.0,
                    "straggler_us": 0.0, "buffer_bytes": 0})
                add_blocking_gap(out, prof, options, net)
                add_median_network(out, prof, "data_parallel", options, net)
                if corun:
                    out["prediction_no_corun"] = predict(prof, "data_parallel", {**options, "cpu_factor": 1.0})
                add_optimized_capture(a, exp, name, out, captured_opt)
                out["network"] = dataclasses.asdict(net)
                out["config"] = {"batch": batch, "baseline": "1 process, 1 thread",
                                 "optimized": f"DDP, {world} processes (gloo), default buckets",
                                 "gradient_mb": round(grad_mb(plain), 3)}
            dist.barrier()
        elif exp in ("tensor_fusion", "tensor_fusion_reverse"):
            probe = build(name)
            gmb = grad_mb(probe)
            # bucket_cap_mb=1 leaves several buckets only for models with more
            # than a few MB of gradients; the three models here have less than
            # 0.4 MB, so the small buckets are 1/20 of their gradients (DDP
            # closes a bucket once it reaches the cap: a large gradient fills
            # one by itself).
            small = 1.0 if gmb >= 4.0 else round(gmb / 20, 4)
            big = 25.0
            # tensor_fusion: small buckets -> one; the reverse: one -> small
            # (the pass splits the recorded all-reduce into the new buckets).
            base_cap, opt_cap = (small, big) if exp == "tensor_fusion" else (big, small)
            ddp_base = DDP(build(name), bucket_cap_mb=base_cap)
            opt_base = adam(ddp_base.parameters())
            ddp_opt = DDP(build(name), bucket_cap_mb=opt_cap)
            opt_opt = adam(ddp_opt.parameters())
            configs = {"baseline": training_step(ddp_base, x, y, loss_fn, opt_base),
                       "optimized": training_step(ddp_opt, x, y, loss_fn, opt_opt)}
            net = measure_network(dist, torch, max(4 * MIB, int(2 * gmb * MIB)), a.net_repeats)
            if a.comm_threads == "realtime":
                comm_threads = realtime_comm_threads()  # and any thread the calibration started
            times = interleaved(configs, a.warmup, a.rounds, a.steps, sync=lambda _n: dist.barrier())
            prof = capture_ranks(a, configs["baseline"], ddp_base, opt_base, rank, dist, torch)
            captured_opt = capture_optimized(a, configs["optimized"], ddp_opt, opt_opt, rank, dist, torch)
            if rank == 0:
                out = summarize(times, "baseline", "optimized")
                # An explicit bucket_cap_mb caps DDP's first bucket too.
                # The network: calibrated here, as for data_parallel. The
                # pass's default (network=auto) fits it to the recorded
                # gloo:all_reduce spans instead, which on a CPU include the
                # wait for the other rank; that prediction is kept too.
                # The captured configuration through the pass: what each
                # prediction's speed-up is taken against (predict, finish).
                recorded = {"bucket_mb": base_cap, "first_bucket_mb": base_cap}
                options = {"world_size": world, "bucket_mb": opt_cap, "first_bucket_mb": opt_cap,
                           "comm_cpu_share": round(net.comm_cpu_share, 4)}
                out["prediction_trace_fit"] = predict(prof, "tensor_fusion", options, recorded)
                options.update(network_options(net, "tensor_fusion"))
                out["prediction"] = predict(prof, "tensor_fusion", options, recorded)
                keep_capture(a, exp, name, prof, out["prediction"])
                out["prediction_beside_compute"] = predict(prof, "tensor_fusion", {**options, "comm_cpu_share": 0,
                                                                                  "bucket_cpu_latency": ""}, recorded)
                add_mean_network(out, prof, options, net, recorded)
                add_ddp_gap(out, prof, options, net, recorded)
                add_without_bucket_latency(out, prof, options, recorded)
                add_optimized_capture(a, exp, name, out, captured_opt)
                out["network"] = dataclasses.asdict(net)
                out["config"] = {"batch": batch, "baseline": f"DDP x{world}, bucket_cap_mb={base_cap:g}",
                                 "optimized": f"DDP x{world}, bucket_cap_mb={opt_cap:g}", "gradient_mb": round(gmb, 3)}
            dist.barrier()
        else:
            raise ValueError(exp)
        if rank == 0:
            out["comm_threads"] = {"mode": a.comm_threads, "threads_set": comm_threads}
            Path(out_path + ".tmp").write_text(json.dumps(out))
            os.replace(out_path + ".tmp", out_path)  # whole or absent: two_process reads it after a teardown abort
    finally:
        dist.destroy_process_group()


def add_blocking_gap(out: Dict[str, Any], prof: Any, options: Dict[str, Any], net: Any) -> None:
    """For comparison, on data_parallel: the prediction with gap_latency
    from blocking all-reduces timed after matmuls (measure_gap_latency) and
    the wait for the slowest rank from the Profiler's plain steps (predict's
    straggler_us): the model before measure_ddp_gap_latency, whose points
    hold that wait."""
    blocking = (net.gaps or {}).get("gap_latency")
    if blocking is not None:
        before = {k: v for k, v in options.items() if k != "straggler_us"}
        out["prediction_blocking_gap"] = predict(prof, "data_parallel", {**before, "gap_latency": blocking})


def add_ddp_gap(out: Dict[str, Any], prof: Any, options: Dict[str, Any], net: Any,
                recorded: Dict[str, Any]) -> None:
    """For comparison, on tensor_fusion: the prediction with data_parallel's
    gap_latency, measured on DDP steps (measure_ddp_gap_latency), instead of
    the blocking all-reduces' (the step's recorded wake-ups are kept)."""
    if net.ddp_gaps:
        out["prediction_ddp_gap"] = predict(prof, "tensor_fusion", {**options, "gap_latency": net.gap_latency},
                                            recorded)


def add_median_network(out: Dict[str, Any], prof: Any, opt: str, options: Dict[str, Any], net: Any) -> None:
    """For comparison, on data_parallel: the prediction with the network
    priced from medians (the ring fit to each size's median all-reduce,
    gap_latency from the medians) instead of means, since the measured step
    is a median (tensor_fusion's headline takes the medians itself)."""
    gap = (net.gaps or {}).get("gap_latency_median")
    median = net.median_ring()
    if gap is None or median is None:
        return
    out["prediction_median_network"] = predict(prof, opt, {**options, "latency_us": round(median[0], 4),
                                                           "bandwidth_gbps": round(median[1], 4), "gap_latency": gap})


def add_mean_network(out: Dict[str, Any], prof: Any, options: Dict[str, Any], net: Any,
                     recorded: Dict[str, Any]) -> None:
    """For comparison, on tensor_fusion: the model until 2026-12-03, the
    network priced from the means of the fit and gap_latency from blocking
    all-reduces timed after matmuls (measure_gap_latency), where the
    headline takes the medians and no gap_latency."""
    out["prediction_mean_network"] = predict(prof, "tensor_fusion", {
        **options, "latency_us": round(net.latency_us, 4), "bandwidth_gbps": round(net.bandwidth_gbps, 4),
        "gap_latency": (net.gaps or {}).get("gap_latency", "")}, recorded)


def add_without_bucket_latency(out: Dict[str, Any], prof: Any, options: Dict[str, Any],
                               recorded: Dict[str, Any]) -> None:
    """For comparison, where the calibration gives ``bucket_cpu_latency``:
    the prediction without it (every all-reduce's latency on the network,
    one queued behind another at ``queued_latency_us``: the pass's model
    before 2026-11-29's eighth session); where it holds a curve per bucket
    count, also the prediction with the curve of the most buckets for every
    count (``prediction_one_bucket_curve``)."""
    curves = options.get("bucket_cpu_latency", "")
    if curves:
        out["prediction_no_bucket_latency"] = predict(prof, "tensor_fusion", {**options, "bucket_cpu_latency": ""},
                                                        recorded)
    if "|" in curves:
        # The curve of the most buckets alone, for every count: the model
        # of runs 47-48 (2026-12-03), when each further bucket cost what one
        # did in a step of one bucket per layer.
        out["prediction_one_bucket_curve"] = predict(
            prof, "tensor_fusion", {**options, "bucket_cpu_latency": curves.rsplit("|", 1)[1].partition("@")[2]},
            recorded)


def network_options(net: Any, for_pass: str = "data_parallel") -> Dict[str, float]:
    """The calibrated network's options for a pass (latency, bandwidth, CPU share, DDP's CPU work, gap_latency),
    rounded for the table."""
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in net.options(for_pass).items()}


def realtime_comm_threads() -> int:
    """``--comm-threads realtime``: every thread of this process but the calling
    one (gloo's, here) to SCHED_FIFO priority 1, so that a gloo thread woken
    by a peer's message runs at once instead of after the host's next
    scheduler tick (docs/accuracy.md, "The two-process experiments with
    gloo's threads in real time").
    Returns how many threads were set; PermissionError without CAP_SYS_NICE."""
    me = threading.get_native_id()
    n = 0
    for tid in sorted(int(t) for t in os.listdir("/proc/self/task")):
        if tid != me:
            try:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(1))
            except ProcessLookupError:  # the thread ended meanwhile
                continue
            n += 1
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_process(exp: str, name: str, a: argparse.Namespace) -> Dict[str, Any]:
    import torch.multiprocessing as mp  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="dd-accuracy-") as d:
        path = os.path.join(d, "rank0.json")
        try:
            mp.spawn(ddp_rank, args=(2, free_port(), exp, name, a, path), nprocs=2, join=True)
        except mp.ProcessExitedException as e:
            # Rank 0 writes its row after the last barrier: with the row
            # there, every measurement and collective had finished, and what
            # failed was gloo's teardown (a rank that destroys the group while
            # its peer still closes the last barrier can abort, "terminate
            # called without an active exception").
            if not os.path.exists(path):
                raise
            row = json.loads(Path(path).read_text())
            row["teardown_failure"] = str(e)[:200]
            return row
        return json.loads(Path(path).read_text())


# --- one experiment, in a child process ----------------------------------------------------
def child(exp: str, name: str, a: argparse.Namespace) -> Dict[str, Any]:
    warnings.filterwarnings("ignore")
    dump_stacks_before_limit(exp, a)
    if exp in ("data_parallel", "tensor_fusion", "tensor_fusion_reverse"):
        return two_process(exp, name, a)
    return single_process(exp, name, a)


def model_baseline_ms(pred: Dict[str, Any]) -> float:
    """What a prediction's change is taken against: the captured
    configuration put through the pass where the row has it (``repriced_ms``,
    tensor_fusion), else the capture's replay."""
    return pred.get("repriced_ms") or pred["replayed_ms"]


def model_speedup(pred: Dict[str, Any]) -> float:
    """The predicted speed-up, model against model: model_baseline_ms / predicted."""
    return model_baseline_ms(pred) / pred["raw_predicted_ms"] if pred.get("repriced_ms") else pred["speedup"]


def carried_ms(row: Dict[str, Any], pred: Dict[str, Any]) -> float:
    """A prediction of the row carried over to the unprofiled run: the
    unprofiled baseline / the predicted speed-up (the ratio), but on a row
    with the step predicted with the network priced at zero
    (``prediction_no_comm``, data_parallel) that step by the ratio and what
    the communication adds to it in ms (the split; the ratio alone stays
    beside it, :func:`ratio_beside_split`). A comparison
    prediction of such a row takes the same quiet step, so whatever it
    changes (its network, or DDP's CPU work in ``prediction_synthetic_ddp``)
    is carried in ms."""
    base = row["baseline"]["median_ms"]
    quiet = row.get("prediction_no_comm")
    if quiet:
        q = quiet["raw_predicted_ms"]
        return base * q / model_baseline_ms(pred) + pred["raw_predicted_ms"] - q
    return base / model_speedup(pred)


def finish(row: Dict[str, Any]) -> Dict[str, Any]:
    """predicted = the prediction carried over to the unprofiled run
    (:func:`carried_ms`); error; noise. On the tensor_fusion rows the
    speed-up is against the captured configuration repriced by the pass
    (model_speedup); the one against the capture's replay stays beside it
    (``predicted_replay_ratio_ms``). On the data_parallel rows the ratio
    alone stays beside the split (``predicted_ratio_ms``)."""
    if "skipped" in row:
        return row
    base = row["baseline"]["median_ms"]
    measured = row["optimized"]["median_ms"]
    pred = row["prediction"]
    predicted = carried_ms(row, pred)
    measured_speedup = base / measured
    ratios = row.pop("round_speedups")
    # Two standard errors of the per-round measured speed-ups.
    noise = (100.0 * 2 * statistics.stdev(ratios) / len(ratios) ** 0.5 / measured_speedup
             if len(ratios) > 1 else 0.0)
    row.update(
        predicted_ms=predicted,
        measured_ms=measured,
        error_pct=100.0 * (predicted - measured) / measured,
        predicted_speedup=base / predicted,
        measured_speedup=measured_speedup,
        round_speedups=ratios,
        noise_pct=noise,
        profiler_overhead_pct=100.0 * (pred["profiled_measured_ms"] - base) / base,
    )
    row["within_noise"] = abs(row["error_pct"]) <= noise
    if pred.get("repriced_ms"):
        row["predicted_replay_ratio_ms"] = base / pred["speedup"]
        row["error_replay_ratio_pct"] = 100.0 * (row["predicted_replay_ratio_ms"] - measured) / measured
        row["repriced_baseline_error_pct"] = 100.0 * (pred["repriced_ms"] - base) / base
    additive(row)
    ratio_beside_split(row)
    direct(row)
    for key in ALTERNATIVE_PREDICTIONS:
        alt = row.get(key)
        if alt:
            alt["predicted_ms"] = carried_ms(row, alt)
            alt["error_pct"] = 100.0 * (alt["predicted_ms"] - measured) / measured
    return row


TWO_PROCESS = ("data_parallel", "tensor_fusion", "tensor_fusion_reverse")
# One DDP step, measured in three separate jobs: data_parallel's optimized
# step (default buckets), tensor_fusion's (bucket_cap_mb=25) and
# tensor_fusion_reverse's baseline (bucket_cap_mb=25). For a model with less
# than 1 MB of gradients each is one bucket: the same training step.
SAME_DDP_STEP = (("data_parallel", "optimized"), ("tensor_fusion", "optimized"), ("tensor_fusion_reverse", "baseline"))


def job_spread(rows: List[Dict[str, Any]]) -> None:
    """The two-process truth's own reproducibility, per model: the medians
    of the one DDP step that separate jobs of this run measured
    (SAME_DDP_STEP), their range in % of the smallest, as ``job_noise_pct``
    on every two-process row of the model (with ``job_medians_ms``). The
    per-round noise (two standard errors within one job) understates how far
    a two-process median moves between jobs (docs/accuracy.md); an error
    within the jobs' range is within the noise too. Needs two of the jobs and
    gradients under 1 MB (one bucket in each)."""
    for name in {r["model"] for r in rows}:
        mine = {r["experiment"]: r for r in rows if r["model"] == name and "skipped" not in r}
        medians = {exp: mine[exp][side]["median_ms"] for exp, side in SAME_DDP_STEP
                   if exp in mine and mine[exp].get("config", {}).get("gradient_mb", 1.0) < 1.0}
        if len(medians) < 2:
            continue
        spread = 100.0 * (max(medians.values()) - min(medians.values())) / min(medians.values())
        for exp in TWO_PROCESS:
            if exp in mine:
                mine[exp]["job_medians_ms"] = medians
                mine[exp]["job_noise_pct"] = spread
                mine[exp]["within_noise"] = abs(mine[exp]["error_pct"]) <= max(mine[exp]["noise_pct"], spread)
    speedup_spread(rows)


def speedup_spread(rows: List[Dict[str, Any]]) -> None:
    """The same speed-up measured by two jobs: tensor_fusion's (small
    buckets -> one) and tensor_fusion_reverse's the other way round, where
    the one's baseline is the other's optimized configuration. Their
    distance in % of the smaller, as ``speedup_jobs_pct`` (with
    ``speedup_jobs``, tensor_fusion's speed-up and the reverse's inverted)
    on both rows. The one-bucket step's spread (``job_noise_pct``) misses
    how far the small buckets' step moves between jobs; a tensor_fusion
    row's error follows its speed-up, so one within this is within the
    noise too."""
    for name in {r["model"] for r in rows}:
        mine = {r["experiment"]: r for r in rows if r["model"] == name and "skipped" not in r}
        fwd, rev = mine.get("tensor_fusion"), mine.get("tensor_fusion_reverse")
        if not fwd or not rev:
            continue
        cf, cr = fwd.get("config", {}), rev.get("config", {})
        if not (cf.get("baseline") and cf.get("baseline") == cr.get("optimized")
                and cf.get("optimized") == cr.get("baseline")) or not rev["measured_speedup"] > 0:
            continue
        speedups = {"tensor_fusion": fwd["measured_speedup"], "tensor_fusion_reverse": 1.0 / rev["measured_speedup"]}
        spread = 100.0 * (max(speedups.values()) - min(speedups.values())) / min(speedups.values())
        for r in (fwd, rev):
            r["speedup_jobs"] = speedups
            r["speedup_jobs_pct"] = spread
            r["within_noise"] = r["within_noise"] or abs(r["error_pct"]) <= spread


def additive(row: Dict[str, Any]) -> None:
    """The other way to carry the prediction over to the unprofiled run:
    add the predicted change in ms (predicted - model_baseline_ms) to the
    unprofiled baseline. Right for work the profiler does not slow (more compute per
    op, communication), wrong for removed ops (each carried overhead)."""
    pred = row["prediction"]
    row["predicted_additive_ms"] = row["baseline"]["median_ms"] + pred["raw_predicted_ms"] - model_baseline_ms(pred)
    row["error_additive_pct"] = 100.0 * (row["predicted_additive_ms"] - row["measured_ms"]) / row["measured_ms"]


def ratio_beside_split(row: Dict[str, Any]) -> None:
    """The ratio carry-over alone, beside data_parallel's headline split
    (:func:`carried_ms`), as ``predicted_ratio_ms``: the split carries the
    step with the network priced at zero (``prediction_no_comm``: the
    capture's compute, DDP's CPU work) by the ratio, as the profiler slowed
    it, and adds what the communication adds to it (the calibrated network,
    gap and broadcast latencies, measured without the profiler) in ms:
    unprofiled baseline x quiet / replayed + (predicted - quiet). The ratio
    alone scales the communication too, by how far the capture's replay is
    from the unprofiled step."""
    if not row.get("prediction_no_comm"):
        return
    row["predicted_ratio_ms"] = row["baseline"]["median_ms"] / model_speedup(row["prediction"])
    row["error_ratio_pct"] = 100.0 * (row["predicted_ratio_ms"] - row["measured_ms"]) / row["measured_ms"]


def direct(row: Dict[str, Any]) -> None:
    """The prediction as daydream gives it: ``predicted_ms`` of the captured
    graph after the pass. daydream.Profiler removes its own overhead from the
    graphs it captures, so this predicts the unprofiled optimized step with
    no carry-over; ``baseline_replay_error_pct`` is how far the corrected
    baseline's replay is from the unprofiled baseline."""
    pred = row["prediction"]
    base = row["baseline"]["median_ms"]
    row["predicted_direct_ms"] = pred["raw_predicted_ms"]
    row["error_direct_pct"] = 100.0 * (pred["raw_predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
    row["baseline_replay_error_pct"] = 100.0 * (pred["replayed_ms"] - base) / base


# --- orchestration -------------------------------------------------------------------------
def limit_s(exp: str, a: argparse.Namespace) -> float:
    """How long an experiment's child may run before the parent stops it."""
    return a.timeout + (a.compile_limit if exp == "op_fusion" else 0)


STACKS_BEFORE_S = 20.0  # a child dumps its threads' stacks this long before its limit


def dump_stacks_before_limit(exp: str, a: argparse.Namespace) -> None:
    """In a child (and in each rank it spawns): every thread's Python stack
    on stderr shortly before the parent stops it, so that a row that hangs
    says where (:func:`where_stuck`). Not with a limit under a minute: a dump
    while a rank was still starting (importing torch) crashed it once."""
    if limit_s(exp, a) >= 60:
        faulthandler.dump_traceback_later(limit_s(exp, a) - STACKS_BEFORE_S, exit=False)


def where_stuck(stderr: str) -> str:
    """From faulthandler's dumps on a child's stderr: per thread that was in
    this file, its innermost frame here and the call it was in, "run.py:372
    ddp_rank > barrier"; distinct ones joined by "; "."""
    here = os.path.basename(__file__)
    found: List[str] = []
    frames: List[Tuple[str, str, str]] = []

    def close() -> None:
        for i, (path, line, func) in enumerate(frames):
            if os.path.basename(path) == here:
                inner = frames[i - 1][2] if i > 0 else ""
                where = f"{here}:{line} {func}" + (f" > {inner}" if inner else "")
                if where not in found:
                    found.append(where)
                break
        frames.clear()

    for ln in stderr.splitlines():
        if ln.startswith(("Thread 0x", "Current thread 0x")):
            close()
        elif ln.startswith('  File "'):
            try:
                path, rest = ln[len('  File "'):].split('", line ', 1)
                line, func = rest.split(" in ", 1)
            except ValueError:
                continue
            frames.append((path, line.strip(), func.strip()))
    close()
    return "; ".join(found)


def run_one(exp: str, name: str, a: argparse.Namespace) -> Dict[str, Any]:
    limit = limit_s(exp, a)
    with tempfile.TemporaryDirectory(prefix="dd-accuracy-") as d:
        out = os.path.join(d, "row.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", exp, name, "--child-out", out,
               "--steps", str(a.steps), "--rounds", str(a.rounds), "--warmup", str(a.warmup),
               "--active", str(a.active), "--threads", str(a.threads), "--compile-limit", str(a.compile_limit),
               "--net-repeats", str(a.net_repeats), "--comm-threads", a.comm_threads, "--timeout", str(a.timeout),
               "--profile-ranks", a.profile_ranks]
        if a.save_traces:
            cmd += ["--save-traces", os.path.abspath(a.save_traces)]
        if getattr(a, "capture_optimized", False):
            cmd.append("--capture-optimized")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT,
                                  env={**os.environ, **MALLOC_ENV[a.malloc]})
        except subprocess.TimeoutExpired as e:
            reason = (f"torch.compile and the timed steps did not finish within {limit:.0f} s"
                      if exp == "op_fusion" else f"did not finish within {limit:.0f} s")
            # What the child had written by then (a rank's error before the
            # other waited forever in a collective, say).
            partial = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            said = failure_reason(partial)
            stuck = where_stuck(partial)
            return {"skipped": reason + (f" (last on stderr: {said})" if said and not stuck else "")
                    + (f" (stacks {STACKS_BEFORE_S:.0f} s before: {stuck})" if stuck else ""),
                    "wall_s": time.perf_counter() - t0}
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(out):
            return {"skipped": f"failed (exit {proc.returncode}): {failure_reason(proc.stderr)}", "wall_s": wall}
        row = json.loads(Path(out).read_text())
        row["wall_s"] = wall
        return row


def failure_reason(stderr: str) -> str:
    """The line of a failed child's stderr that says why: a rank's C++ abort
    ("terminate called ...", "what(): ...") before mp.spawn's own
    ProcessExitedException, which names only the signal; else the last line
    that mentions an error."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("USDT:")]
    aborts = [ln for ln in lines if ln.startswith("terminate called") or ln.startswith("what():")]
    if aborts:
        return " ".join(aborts[-2:])[:300]
    err = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), lines[-1] if lines else "")
    return err[:300]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fmt_spread(s: Dict[str, float]) -> str:
    return f"{s['p10_ms']:.3f}–{s['p90_ms']:.3f}"


def where_the_step_goes(r: Dict[str, Any]) -> str:
    """data_parallel: the truth's step taken apart (medians of the
    interleaved rounds) beside the prediction's (daydream's own predicted_ms,
    before the ratio carry-over)."""
    alone, both = r["baseline"]["median_ms"], r["two_plain_processes"]["median_ms"]
    quiet, ddp = r["ddp_no_comm"]["median_ms"], r["optimized"]["median_ms"]
    replayed = r["prediction"]["replayed_ms"]
    p_quiet, p_ddp = r["prediction_no_comm"]["raw_predicted_ms"], r["prediction"]["raw_predicted_ms"]
    return (f"where the DDP step's time goes (ms added, measured / predicted): the ranks computing at once and "
            f"DDP's own CPU work {quiet - alone:+.3f} / {p_quiet - replayed:+.3f} (of it, without DDP "
            f"{both - alone:+.3f} measured), communicating {ddp - quiet:+.3f} / {p_ddp - p_quiet:+.3f} "
            f"(measured: DDP with a comm hook that returns each bucket as it is and no buffer broadcast, "
            f"{quiet:.3f} ms; predicted: the network priced at zero, {p_quiet:.3f} ms)")


def table(rows: List[Dict[str, Any]], meta: Dict[str, Any]) -> str:
    lines = [
        f"Regenerate with `make accuracy` ({meta['command']}; {meta['machine']}, torch {meta['torch']}, "
        f"{meta['threads']} thread(s) per process, glibc malloc {meta.get('malloc', 'default')}; "
        f"{meta['rounds']} rounds x {meta['steps']} steps per configuration; "
        f"whole run {meta['wall_s'] / 60:.1f} min, 1-minute load average {meta['loadavg_1min']['start']:.1f} at the "
        f"start, {meta['loadavg_1min']['end']:.1f} at the end). Predicted = unprofiled baseline / predicted speed-up; "
        "on the tensor_fusion rows the speed-up is against the captured configuration put through the same pass "
        "(its recorded all-reduces repriced as the new ones are), not against the capture's replay; on the "
        "data_parallel rows the step predicted with the network priced at zero is carried over so, and what the "
        "communication adds to it is added in ms. "
        "Spread = 10th–90th percentile of the optimized run's step times; noise = two standard errors of the "
        "per-round measured speed-ups, in % of the measured speed-up; on the two-process rows, (jobs N) is how far "
        "the one-bucket DDP step's median moved between the separate jobs of this run that measured it "
        "(data_parallel's and tensor_fusion's optimized steps, tensor_fusion_reverse's baseline), in % of the "
        "smallest, and on the tensor_fusion rows (speed-up N) how far the same speed-up moved between the two "
        "jobs that measured it (tensor_fusion's, and tensor_fusion_reverse's the other way round), in % of the "
        "smaller; an error within either counts as within noise. Direct = daydream's own predicted_ms "
        "(the captured graph has the profiler's overhead removed).",
        "",
        "| experiment | model | predicted ms | measured ms | error % | spread (p10–p90) ms | baseline ms "
        "| speed-up predicted / measured | noise ±% | direct predicted ms | direct error % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        label = r["experiment"]
        cfg = r.get("config", {})
        if "baseline" in cfg and "optimized" in cfg:
            label += f": {cfg['baseline']} → {cfg['optimized']}"
        if "skipped" in r:
            lines.append(f"| {label} | {r['model']} | — | — | — | — | — | — | — | — | skipped: {r['skipped']} |")
            continue
        mark = " (within noise)" if r["within_noise"] else ""
        lines.append(
            f"| {label} | {r['model']} | {r['predicted_ms']:.3f} | {r['measured_ms']:.3f} | "
            f"{r['error_pct']:+.1f}{mark} | {fmt_spread(r['optimized'])} | {r['baseline']['median_ms']:.3f} | "
            f"{r['predicted_speedup']:.3f} / {r['measured_speedup']:.3f} | {noise_cell(r)} | "
            f"{r['prediction']['raw_predicted_ms']:.3f} | {r['error_direct_pct']:+.1f} |")
    extra = []
    for r in rows:
        net = r.get("network")
        if net and "skipped" not in r:
            synthetic = (f"{net.get('ddp_cpu_us', 0.0):.0f} us + {net.get('ddp_cpu_per_gradient_us', 0.0):.1f} us "
                         "per gradient")
            measured = measured_ddp_cpu(r["prediction"]) if r["experiment"] == "data_parallel" else None
            if measured and r.get("prediction_synthetic_ddp"):
                ddp_cpu = (f"DDP's CPU work measured on the model {float(measured['ddp_cpu_us']):.0f} us + "
                           f"{float(measured['ddp_cpu_per_gradient_us']):.1f} us per gradient (from synthetic "
                           f"stacks {synthetic}: prediction {r['prediction_synthetic_ddp']['predicted_ms']:.3f} ms, "
                           f"{r['prediction_synthetic_ddp']['error_pct']:+.1f}%)")
            elif r.get("ddp_cpu_not_measured"):
                ddp_cpu = f"DDP's CPU work from synthetic stacks {synthetic} (not measured on the model)"
            else:
                ddp_cpu = f"DDP's CPU work {synthetic}"
            used = r["prediction"].get("options", {})
            medians = r["experiment"].startswith("tensor_fusion") and "gap_latency" not in used
            extra.append(f"- {r['experiment']} on {r['model']}: gloo all-reduce calibrated in the same job to "
                         + (f"{used['latency_us']:.0f} us per step and {used['bandwidth_gbps']:.2f} GB/s (ring model "
                            f"of each size's median; of the means {net['latency_us']:.0f} us, "
                            f"{net['bandwidth_gbps']:.2f} GB/s), " if medians else
                            f"{net['latency_us']:.0f} us per step and {net['bandwidth_gbps']:.2f} GB/s (ring model), ")
                         + (f"{net['stalled_share']:.0%} of its all-reduces stalled, "
                            if "stalled_share" in net else "")
                         + f"comm_cpu_share {net.get('comm_cpu_share', 0.0):.2f}, {ddp_cpu}, "
                         + ("no gap_latency (the recorded waits after each all-reduce hold the wake-up)" if medians else
                            ("gap_latency (us after us of compute, from blocking all-reduces after matmuls) "
                             if r["experiment"].startswith("tensor_fusion") else
                             "gap_latency (us after a step of us, from DDP steps of a Linear stack) ")
                            + f"{used.get('gap_latency') or net.get('gap_latency') or 'none'}")
                         + (f"; with the network priced from the means and gap_latency from blocking all-reduces "
                            f"after matmuls ({mean_net['gap_latency'] or 'none'}), the model until 2026-12-03, "
                            f"{r['prediction_mean_network']['predicted_ms']:.3f} ms "
                            f"({r['prediction_mean_network']['error_pct']:+.1f}%)"
                            if (mean_net := (r.get("prediction_mean_network") or {}).get("options")) else "")
                         + (f"; without gap_latency the prediction is {r['prediction_no_gap']['predicted_ms']:.3f} ms "
                            f"({r['prediction_no_gap']['error_pct']:+.1f}%)" if r.get("prediction_no_gap") else "")
                         + (f"; the buffer broadcast's extra (broadcast_latency, from DDP steps of the stack with a "
                            f"buffer) {r['prediction'].get('options', {}).get('broadcast_latency')}, without it "
                            f"{r['prediction_no_broadcast_latency']['predicted_ms']:.3f} ms "
                            f"({r['prediction_no_broadcast_latency']['error_pct']:+.1f}%)"
                            if r.get("prediction_no_broadcast_latency") else "")
                         + (f"; with gap_latency from blocking all-reduces after matmuls ({blocking['gap_latency']}) "
                            "and the wait for the slowest rank from the Profiler's plain steps "
                            f"{r['prediction_blocking_gap']['predicted_ms']:.3f} ms "
                            f"({r['prediction_blocking_gap']['error_pct']:+.1f}%)"
                            if (blocking := (r.get("prediction_blocking_gap") or {}).get("options")) else "")
                         + (f"; with data_parallel's gap_latency, from DDP steps ({ddp_gap['gap_latency']}), "
                            f"{r['prediction_ddp_gap']['predicted_ms']:.3f} ms ({r['prediction_ddp_gap']['error_pct']:+.1f}%)"
                            if (ddp_gap := (r.get("prediction_ddp_gap") or {}).get("options")) else "")
                         + (f"; with the network priced from medians ({median_net['latency_us']:.0f} us, "
                            f"{median_net['bandwidth_gbps']:.2f} GB/s, gap_latency {median_net['gap_latency']}) "
                            f"{r['prediction_median_network']['predicted_ms']:.3f} ms "
                            f"({r['prediction_median_network']['error_pct']:+.1f}%)"
                            if (median_net := (r.get("prediction_median_network") or {}).get("options")) else "")
                         + (f"; without bucket_cpu_latency ({r['prediction']['options']['bucket_cpu_latency']}: every "
                            "all-reduce's latency on the network, one queued behind another at queued_latency_us "
                            f"{r['prediction']['options'].get('queued_latency_us', -1):.0f} us) "
                            f"{r['prediction_no_bucket_latency']['predicted_ms']:.3f} ms "
                            f"({r['prediction_no_bucket_latency']['error_pct']:+.1f}%)"
                            if r.get("prediction_no_bucket_latency") else "")
                         + (f"; with the curve of the most buckets for every bucket count "
                            f"({r['prediction_one_bucket_curve']['options']['bucket_cpu_latency']}), the model of "
                            f"runs 47-48, {r['prediction_one_bucket_curve']['predicted_ms']:.3f} ms "
                            f"({r['prediction_one_bucket_curve']['error_pct']:+.1f}%)"
                            if r.get("prediction_one_bucket_curve") else "")
                         + (f"; with the pass's default network (fitted to the trace's gloo:all_reduce spans) the "
                            f"prediction is {r['prediction_trace_fit']['predicted_ms']:.3f} ms "
                            f"({r['prediction_trace_fit']['error_pct']:+.1f}%)" if r.get("prediction_trace_fit") else "")
                         + (f"; with the collectives beside compute (comm_cpu_share=0, no buffer broadcast) "
                            f"the prediction is {r['prediction_beside_compute']['predicted_ms']:.3f} ms "
                            f"({r['prediction_beside_compute']['error_pct']:+.1f}%)"
                            if r.get("prediction_beside_compute") else "")
                         + (f"; the plain step on both ranks at once, without DDP: "
                            f"{r['two_plain_processes']['median_ms']:.3f} ms (alone: {r['baseline']['median_ms']:.3f} ms)"
                            if r.get("two_plain_processes") else "")
                         + (f"; {where_the_step_goes(r)}" if r.get("ddp_no_comm") and r.get("prediction_no_comm") else "")
                         + (f"; {r['corun_note'].partition(': ')[2]}" if r.get("corun_note") else "")
                         + (f"; without the co-running factor the prediction is "
                            f"{r['prediction_no_corun']['predicted_ms']:.3f} ms "
                            f"({r['prediction_no_corun']['error_pct']:+.1f}%)" if r.get("prediction_no_corun") else ""))
    if extra:
        lines += ["", "Two-process runs:", ""] + extra
    done = [r for r in rows if "skipped" not in r]
    retried = [r for r in done if len(r["prediction"].get("capture_tries") or []) > 1]
    if retried:
        lines += ["", "Baselines recorded more than once (`daydream.capture.profile_steps` records again, up to "
                  f"{CAPTURE_TRIES} captures, while the plain steps before and after the recorded ones are more "
                  "than 15% apart; the speed change of each capture):", ""]
        lines += [f"- {r['experiment']} on {r['model']}: "
                  + ", ".join("?" if m is None else f"{100 * m:.0f}%" for m in r["prediction"]["capture_tries"])
                  for r in retried]
    drifted = [r for r in done if r["prediction"].get("speed_drift")]
    if drifted:
        lines += ["", "Captures during which the machine's speed changed in every try (the plain step before and "
                  "after the recorded ones more than 15% apart; the prediction is of that moment):", ""]
        lines += [f"- {r['experiment']} on {r['model']}: {r['prediction']['plain_step_ms']['before']:.3f} ms before, "
                  f"{r['prediction']['plain_step_ms']['after']:.3f} ms after" for r in drifted]
    alternatives = [
        ("prediction_gemm_ratio", "amp with one bf16/fp32 GEMM ratio for every op (`cpu_gemm_factor` from "
         "`daydream.calibrate.amp_cpu_ratio`, the pass's last fallback) instead of the measured factors:",
         lambda r: f"cpu_gemm_factor {r['prediction_gemm_ratio']['options']['cpu_gemm_factor']:.3f}"),
        ("prediction_op_model", "fused_optimizer with the pass's operator and bandwidth model (what it uses without "
         "the optimizer, from a trace file) instead of the measured step factor:",
         lambda r: f"instead of cpu_step_factor {opt_value(r['prediction'], 'cpu_step_factor') or 'not measured'} "
                   f"({r['predicted_ms']:.3f} ms, {r['error_pct']:+.1f}%)"),
        ("prediction_chain_model", "op_fusion with the pass's chain model (what it uses without the model, from a "
         "trace file: adjacent elementwise ops fused) instead of the forward and backward timed under torch.compile:",
         lambda r: f"instead of {r['predicted_ms']:.3f} ms ({r['error_pct']:+.1f}%)"),
    ]
    for key, heading, what in alternatives:
        alt = [r for r in rows if r.get(key) and "skipped" not in r]
        if alt:
            lines += ["", heading, ""]
            lines += [f"- {r['model']}: {what(r)}, predicted {r[key]['predicted_ms']:.3f} ms "
                      f"({r[key]['error_pct']:+.1f}%)" for r in alt]
    s = meta["summary"]
    lines.append("")
    if s["count"]:
        lines.append(
            f"Over {s['count']} experiments: median |error| {s['median_abs_error_pct']:.1f}% (target <= "
            f"{TARGET_MEDIAN:g}%: {'met' if s['median_met'] else 'missed'}), max |error| "
            f"{s['max_abs_error_pct']:.1f}% ({s['max_row']}; target none above {TARGET_MAX:g}%: "
            f"{'met' if s['max_met'] else 'missed'}); {s['above_max']} above {TARGET_MAX:g}%, "
            f"{s['within_noise']} within the run's own noise"
            + (f" (the tensor_fusion speed-up moved by {s['speedup_jobs_min_pct']:.1f}–"
               f"{s['speedup_jobs_max_pct']:.1f}% between the two jobs that measured it)"
               if s.get("speedup_jobs_max_pct") is not None else "")
            + f". Skipped: {s['skipped']}. With the additive "
            f"carry-over instead (unprofiled baseline + predicted change in ms; `predicted_additive_ms` in the "
            f"JSON): median |error| {s['additive_median_abs_error_pct']:.1f}%, max "
            f"{s['additive_max_abs_error_pct']:.1f}%. Direct (daydream's own `predicted_ms`, the profiler's "
            f"overhead removed from the captured graph; `predicted_direct_ms`): median |error| "
            f"{s['direct_median_abs_error_pct']:.1f}%, max {s['direct_max_abs_error_pct']:.1f}%; the corrected "
            f"baseline replays within {s['baseline_replay_median_abs_error_pct']:.1f}% (median |error|) of the "
            "unprofiled baseline."
            + (f" On the {s['replay_ratio_count']} tensor_fusion rows, the speed-up against the capture's replay "
               f"instead of the repriced capture (`predicted_replay_ratio_ms`): median |error| "
               f"{s['replay_ratio_median_abs_error_pct']:.1f}%, max {s['replay_ratio_max_abs_error_pct']:.1f}% "
               f"(the repriced rows: {s['repriced_median_abs_error_pct']:.1f}%, max "
               f"{s['repriced_max_abs_error_pct']:.1f}%)." if s.get("replay_ratio_count") else "")
            + (f" On the {s['split_count']} data_parallel rows, the ratio carry-over instead of the split "
               f"(`predicted_ratio_ms`): median |error| {s['split_ratio_median_abs_error_pct']:.1f}%, max "
               f"{s['split_ratio_max_abs_error_pct']:.1f}% (the split: {s['split_median_abs_error_pct']:.1f}%, max "
               f"{s['split_max_abs_error_pct']:.1f}%)." if s.get("split_count") else ""))
    else:
        lines.append("No experiment ran.")
    return "\n".join(lines)


def noise_cell(r: Dict[str, Any]) -> str:
    """The noise column: the round-to-round noise, then what moved between
    jobs (the one DDP step, the tensor_fusion speed-up) where measured."""
    between = [f"{label} {r[key]:.1f}" for key, label in (("job_noise_pct", "jobs"), ("speedup_jobs_pct", "speed-up"))
               if key in r]
    return f"{r['noise_pct']:.1f}" + (f" ({'; '.join(between)})" if between else "")


def split_summary(done: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The rows carried over split (data_parallel): the median and largest
    |error| of the split, the headline, beside the ratio's on the same rows."""
    rows = [r for r in done if "error_ratio_pct" in r]
    if not rows:
        return {}
    split_errs, ratio_errs = [abs(r["error_pct"]) for r in rows], [abs(r["error_ratio_pct"]) for r in rows]
    return {"split_count": len(rows),
            "split_median_abs_error_pct": statistics.median(split_errs), "split_max_abs_error_pct": max(split_errs),
            "split_ratio_median_abs_error_pct": statistics.median(ratio_errs),
            "split_ratio_max_abs_error_pct": max(ratio_errs)}


def summary(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    done = [r for r in rows if "skipped" not in r]
    errs = [abs(r["error_pct"]) for r in done]
    worst = max(done, key=lambda r: abs(r["error_pct"])) if done else None
    between = [r["speedup_jobs_pct"] for r in done if r["experiment"] == "tensor_fusion" and "speedup_jobs_pct" in r]
    return {
        "count": len(done),
        "skipped": len(rows) - len(done),
        "median_abs_error_pct": statistics.median(errs) if errs else None,
        "max_abs_error_pct": max(errs) if errs else None,
        "max_row": f"{worst['experiment']} on {worst['model']}" if worst else None,
        "median_met": bool(errs) and statistics.median(errs) <= TARGET_MEDIAN,
        "max_met": bool(errs) and max(errs) <= TARGET_MAX,
        "above_max": sum(e > TARGET_MAX for e in errs),
        "within_noise": sum(r["within_noise"] for r in done),
        "speedup_jobs_min_pct": min(between) if between else None,
        "speedup_jobs_max_pct": max(between) if between else None,
        "additive_median_abs_error_pct": statistics.median(abs(r["error_additive_pct"]) for r in done) if done else None,
        "additive_max_abs_error_pct": max(abs(r["error_additive_pct"]) for r in done) if done else None,
        "direct_median_abs_error_pct": statistics.median(abs(r["error_direct_pct"]) for r in done) if done else None,
        "direct_max_abs_error_pct": max(abs(r["error_direct_pct"]) for r in done) if done else None,
        "baseline_replay_median_abs_error_pct":
            statistics.median(abs(r["baseline_replay_error_pct"]) for r in done) if done else None,
        "targets": {"median_abs_error_pct": TARGET_MEDIAN, "max_abs_error_pct": TARGET_MAX},
        **repriced_summary(done),
        **split_summary(done),
    }


def repriced_summary(done: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The rows carried over against a repriced capture (tensor_fusion): their
    error both ways, the headline's and against the capture's replay."""
    rows = [r for r in done if "error_replay_ratio_pct" in r]
    if not rows:
        return {}
    ours = [abs(r["error_pct"]) for r in rows]
    theirs = [abs(r["error_replay_ratio_pct"]) for r in rows]
    return {"replay_ratio_count": len(rows),
            "replay_ratio_median_abs_error_pct": statistics.median(theirs), "replay_ratio_max_abs_error_pct": max(theirs),
            "repriced_median_abs_error_pct": statistics.median(ours), "repriced_max_abs_error_pct": max(ours)}


def write_doc(doc: Path, body: str, realtime: bool = False) -> None:
    """Puts the table between the doc's markers: the ground-truth ones, or with
    ``realtime`` (``--comm-threads realtime``) those of its own block."""
    begin, end = (DOC_BEGIN_REALTIME, DOC_END_REALTIME) if realtime else (DOC_BEGIN, DOC_END)
    text = doc.read_text()
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        title = ("### The two-process experiments with gloo's threads in real time" if realtime
                 else "## Predictions against real runs (issue 5)")
        text = text.rstrip("\n") + f"\n\n{title}\n\n" + block + "\n"
    doc.write_text(text)


def realtime_permitted() -> bool:
    """Whether this process may put a thread in SCHED_FIFO (root or CAP_SYS_NICE)."""
    result = []

    def probe() -> None:
        try:
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO, os.sched_param(1))
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return result[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiments", default=",".join(EXPERIMENTS), help="comma-separated subset of: "
                    + ", ".join(EXPERIMENTS))
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    # 50 rounds of 10 steps rather than 10 of 50: a slow spell of the shared
    # machine (tenths of a second) then falls in both configurations' blocks.
    ap.add_argument("--steps", type=int, default=10, help="timed steps per configuration and round")
    ap.add_argument("--rounds", type=int, default=50, help="rounds (baseline and optimized alternate)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps per configuration first")
    ap.add_argument("--active", type=int, default=10, help="captured iterations of the baseline")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in every process")
    ap.add_argument("--compile-limit", type=float, default=120.0, help="op_fusion: skip when torch.compile "
                    "takes longer (s)")
    ap.add_argument("--net-repeats", type=int, default=50, help="all_reduce repeats per size (network calibration)")
    ap.add_argument("--malloc", choices=("steady", "default"), default="steady",
                    help="glibc malloc in the experiment processes: steady (MALLOC_MMAP_THRESHOLD_ and "
                         "MALLOC_TRIM_THRESHOLD_ at 1 GiB: large tensors stay in the heap) or glibc's default")
    ap.add_argument("--comm-threads", choices=("default", "realtime"), default="default",
                    help="two-process experiments: gloo's threads as the OS schedules them (default) or at "
                         "SCHED_FIFO priority 1 (realtime: a woken thread runs at once, not at the next scheduler "
                         "tick; needs root or CAP_SYS_NICE)")
    ap.add_argument("--profile-ranks", choices=("0", "all"), default="0",
                    help="two-process captures (tensor_fusion, tensor_fusion_reverse): only rank 0 under the "
                         "profiler, rank 1 running the same steps plainly (0), or every rank under its own "
                         "profiler (all); rank 0's recording is the one predicted from either way")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-experiment limit (s), besides compile")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 rounds x 8 steps (files written only "
                    "when --doc/--json are given)")
    ap.add_argument("--save-traces", type=Path, help="keep each captured baseline here "
                    "(EXPERIMENT_MODEL.json.gz), the graph its prediction ran on, the profiler's overhead removed "
                    "(EXPERIMENT_MODEL.graph.pb, for daydream.Graph.load), and the pass options of its prediction "
                    "(EXPERIMENT_MODEL.options.json), for `daydream predict` by hand")
    ap.add_argument("--capture-optimized", action="store_true",
                    help="capture the optimized configuration too and replay it (optimized_capture in the JSON: "
                         "its replay and busy ms by phase, beside the prediction's by_phase_ms)")
    ap.add_argument("--doc", type=Path, help="markdown file whose ground-truth markers get the table")
    ap.add_argument("--json", type=Path, help="where to write every row")
    ap.add_argument("--from-json", type=Path, help="re-render the table from a results file of an earlier run "
                    "(no experiment runs)")
    ap.add_argument("--child", nargs=2, metavar=("EXPERIMENT", "MODEL"), help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.steps, a.rounds, a.warmup, a.active, a.net_repeats = 8, 2, 3, 3, 20

    if a.child:
        exp, name = a.child
        try:
            row = child(exp, name, a)
        except Exception:  # noqa: BLE001 - the parent records it as skipped
            traceback.print_exc()
            return 1
        Path(a.child_out).write_text(json.dumps(row))
        return 0

    if a.from_json:
        saved = json.loads(a.from_json.read_text())
        rows, meta = saved["rows"], saved["meta"]
        for row in rows:
            finish(row)  # the carry-overs again, from the same measurements
            cfg = row.get("config", {})
            if "compile_s" in cfg:
                cfg["optimized"] = f"torch.compile(model) (inductor, CPU; first 3 steps {cfg['compile_s']:.0f} s)"
        job_spread(rows)
        meta["summary"] = summary(rows)
        text = table(rows, meta)
        print(text)
        if a.json:
            a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        if a.doc:
            write_doc(a.doc, text, realtime=meta.get("comm_threads") == "realtime")
        return 0

    exps = [e for e in a.experiments.split(",") if e]
    models = [m for m in a.models.split(",") if m]
    for e in exps:
        if e not in EXPERIMENTS:
            ap.error(f"unknown experiment {e}")
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    if a.comm_threads == "realtime" and not realtime_permitted():
        print("run.py: --comm-threads realtime needs root or CAP_SYS_NICE (SCHED_FIFO was refused)", file=sys.stderr)
        return 3
    import torch  # noqa: PLC0415

    t0 = time.perf_counter()
    load_before = os.getloadavg()
    rows = []
    for exp in exps:
        for name in models:
            row = {"experiment": exp, "model": name}
            row.update(finish(run_one(exp, name, a)))
            rows.append(row)
            if "skipped" in row:
                print(f"{exp:<16} {name:<12} skipped: {row['skipped']}", flush=True)
            else:
                print(f"{exp:<16} {name:<12} predicted {row['predicted_ms']:8.3f} ms  measured "
                      f"{row['measured_ms']:8.3f} ms  error {row['error_pct']:+6.1f}%  noise ±{row['noise_pct']:.1f}%  "
                      f"(baseline {row['baseline']['median_ms']:.3f} ms, speed-up {row['predicted_speedup']:.3f} "
                      f"predicted / {row['measured_speedup']:.3f} measured; additive {row['error_additive_pct']:+.1f}%, "
                      + (f"ratio {row['error_ratio_pct']:+.1f}%, " if "error_ratio_pct" in row else "")
                      + f"direct {row['error_direct_pct']:+.1f}%, baseline replay {row['baseline_replay_error_pct']:+.1f}%"
                      + (f", against the replay {row['error_replay_ratio_pct']:+.1f}%, repriced baseline "
                         f"{row['repriced_baseline_error_pct']:+.1f}%" if "error_replay_ratio_pct" in row else "")
                      + f"; {row['wall_s']:.0f} s)"
                      + (f" [one GEMM ratio: {row['prediction_gemm_ratio']['error_pct']:+.1f}%]"
                         if row.get("prediction_gemm_ratio") else "")
                      + (f" [beside compute: {row['prediction_beside_compute']['error_pct']:+.1f}%]"
                         if row.get("prediction_beside_compute") else ""), flush=True)
    wall = time.perf_counter() - t0
    job_spread(rows)
    cmd = "python benchmarks/accuracy/run.py" + (" --quick" if a.quick else "") + (
        f" --steps {a.steps} --rounds {a.rounds}" if not a.quick else "") + (
        f" --malloc {a.malloc}" if a.malloc != "steady" else "") + (
        f" --comm-threads {a.comm_threads}" if a.comm_threads != "default" else "") + (
        f" --profile-ranks {a.profile_ranks}" if a.profile_ranks != "0" else "")
    meta = {
        "command": f"`{cmd}`",
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "threads": a.threads,
        "malloc": a.malloc,
        "comm_threads": a.comm_threads,
        "profile_ranks": a.profile_ranks,
        "steps": a.steps,
        "rounds": a.rounds,
        "warmup": a.warmup,
        "active": a.active,
        "wall_s": wall,
        "loadavg_1min": {"start": round(load_before[0], 2), "end": round(os.getloadavg()[0], 2)},
        "summary": summary(rows),
    }
    text = table(rows, meta)
    print()
    print(text)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if a.doc:
        write_doc(a.doc, text, realtime=a.comm_threads == "realtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
