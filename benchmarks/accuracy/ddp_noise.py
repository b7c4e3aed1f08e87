#!/usr/bin/env python3
"""How much the two-process truth moves on this host, and why.

Runs the harness's DDP step (gloo, two processes, one thread each, the
harness's models and batches) in ``--jobs`` separate jobs, as the accuracy
run's data_parallel and tensor_fusion experiments do, and prints per job:
the step times' median, mean and 10th/90th percentiles with a histogram, a
4 kB all-reduce's times back to back (the calibration's probe) with theirs
and how much of that time each of rank 0's threads was on a CPU (gloo's TCP
loop thread busy-polls while a message waits for its receive), after 2 ms
of matmuls on both ranks, and ten issued at once, a 1 MB
all-reduce's, what a 32 kB all-reduce costs rank 0's matmuls when rank 1
issues it 0, 100 or 300 us later, and the CPU time each rank spent while
the other slept 5 ms before every all-reduce (near the wall time if gloo's
threads spin while they wait, near zero if they sleep). ``--comm-threads realtime`` runs gloo's
threads at SCHED_FIFO, as ``run.py --comm-threads realtime`` does;
``--phases`` times forward, backward and optimizer step of the model in DDP
with the harness's small buckets, with one bucket, plain, and with the small
buckets and nothing sent (``keep_bucket_hook``), instead, each phase with
the training thread's wait for a core (its run-queue time, Linux schedstat);
``--decompose`` takes the harness's data_parallel step apart instead: the
plain step alone and on both ranks at once, DDP with nothing to
communicate, DDP, and DDP's all-reduces timed from issue to end (and, for a
model with buffers, DDP without its buffer broadcast); with
``--stand-in``, also stand-ins for the model with its gradient bytes and
step time, in DDP with and without communication, and, for a model with
buffers, the calibration's broadcast stand-in (16 x Linear(64, 64) at the
model's step time) carrying the model's buffers, with and without DDP's
buffer broadcast: what the broadcast adds to each step, median and mean.

    python benchmarks/accuracy/ddp_noise.py --model mlp --cap 25 --jobs 3
    python benchmarks/accuracy/ddp_noise.py --model mlp --jobs 2 --comm-threads realtime
    python benchmarks/accuracy/ddp_noise.py --model transformer --jobs 1 --phases --comm-threads realtime
    python benchmarks/accuracy/ddp_noise.py --model transformer --jobs 2 --decompose --steps 400
    python benchmarks/accuracy/ddp_noise.py --model transformer --jobs 2 --decompose --stand-in --steps 300
    python benchmarks/accuracy/ddp_noise.py --model cnn --jobs 2 --decompose --stand-in --steps 800

Diagnostic only: nothing here feeds a prediction (docs/history/accuracy-log.md, "How far
the two-process truth itself moves").
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests" / "python"))

STEP_EDGES_MS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 16)
ALL_REDUCE_EDGES_MS = (0.2, 0.5, 1, 2, 3, 3.8, 4.2, 5, 8)


def histogram(xs: Sequence[float], edges: Sequence[float]) -> str:
    bounds = [0.0, *edges, float("inf")]
    counts = [sum(1 for x in xs if lo <= x < hi) for lo, hi in zip(bounds, bounds[1:])]
    labels = [f"<{edges[0]:g}"] + [f"{lo:g}-{hi:g}" for lo, hi in zip(edges, edges[1:])] + [f">={edges[-1]:g}"]
    return " ".join(f"{label}:{n}" for label, n in zip(labels, counts) if n)


def describe(xs: Sequence[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return (f"median {statistics.median(xs):.3f} mean {statistics.fmean(xs):.3f} "
            f"p10 {q[0]:.3f} p90 {q[-1]:.3f} ms")


def rank_main(rank: int, port: int, a: argparse.Namespace, queue: Any) -> None:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    from daydream.capture import training_step  # noqa: PLC0415
    from models import build, loss_for  # noqa: PLC0415
    from run import BATCH, adam, grad_mb, make_batch, realtime_comm_threads  # noqa: PLC0415

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        if a.comm_threads == "realtime":
            dist.barrier()  # gloo's threads exist once it has communicated
            realtime_comm_threads()
        x, y = make_batch(a.model, BATCH[a.model], seed=rank)
        if a.decompose:
            result = decompose(a, rank, dist, DDP, build, adam, loss_for(a.model), x, y, training_step)
            if rank == 0:
                queue.put({"decompose": result})
            dist.barrier()
            return
        if a.phases:
            if rank == 0:
                queue.put({"phases": phase_times(a, dist, DDP, build, adam, grad_mb, loss_for(a.model), x, y)})
            else:
                phase_times(a, dist, DDP, build, adam, grad_mb, loss_for(a.model), x, y)
            dist.barrier()
            return
        model = DDP(build(a.model), bucket_cap_mb=a.cap)
        step = training_step(model, x, y, loss_for(a.model), adam(model.parameters()))
        for _ in range(a.warmup):
            step()
        dist.barrier()
        steps: List[float] = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            steps.append((time.perf_counter() - t0) * 1e3)
        buf = torch.ones(1024)
        dist.barrier()
        all_reduce: List[float] = []
        cpu0, wall0 = threads_cpu_ns(), time.perf_counter_ns()
        for _ in range(a.all_reduces):
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            all_reduce.append((time.perf_counter() - t0) * 1e3)
        threads_cpu = cpu_shares(cpu0, threads_cpu_ns(), time.perf_counter_ns() - wall0)
        # The same 4 kB all-reduce after 2 ms of matmuls on both ranks, ten
        # issued at once and waited for together, and a 1 MB one.
        mat = torch.randn(128, 128)
        after_compute: List[float] = []
        for _ in range(a.all_reduces // 3):
            dist.barrier()
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.002:
                mat = torch.mm(mat, mat)
                mat = mat / mat.norm()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            after_compute.append((time.perf_counter() - t0) * 1e3)
        ten_at_once: List[float] = []
        for _ in range(max(a.all_reduces // 8, 2)):
            dist.barrier()
            t0 = time.perf_counter()
            works = [dist.all_reduce(buf.clone(), async_op=True) for _ in range(10)]
            for w in works:
                w.wait()
            ten_at_once.append((time.perf_counter() - t0) * 1e3)
        big = torch.ones(256 * 1024)
        dist.barrier()
        one_mb: List[float] = []
        for _ in range(a.all_reduces // 3):
            t0 = time.perf_counter()
            dist.all_reduce(big)
            one_mb.append((time.perf_counter() - t0) * 1e3)
        skew_loss_us = skewed_all_reduce_cost(rank, dist, torch, a.all_reduces // 5)
        dist.barrier()
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(100):
            if rank == 1:
                time.sleep(0.005)
            dist.all_reduce(buf)
        r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        # Both ranks past their last all-reduce before either tears gloo
        # down: a rank whose peer closed the connection first can abort
        # ("terminate called without an active exception").
        dist.barrier()
        if rank == 0:
            queue.put({"steps": steps, "all_reduce": all_reduce, "threads_cpu": threads_cpu,
                       "after_compute": after_compute,
                       "ten_at_once": ten_at_once, "one_mb": one_mb, "wait_wall_s": wall, "wait_cpu_s": cpu,
                       "skew_loss_us": skew_loss_us})
    finally:
        dist.destroy_process_group()


def threads_cpu_ns() -> Dict[int, Tuple[str, int]]:
    """Each thread of this process: its name and its time on a CPU so far,
    in ns (Linux schedstat)."""
    out: Dict[int, Tuple[str, int]] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            out[int(task.name)] = (name, int((task / "schedstat").read_text().split()[0]))
        except (OSError, ValueError, IndexError):  # a thread that ended, or no schedstat
            continue
    return out


def cpu_shares(before: Dict[int, Tuple[str, int]], after: Dict[int, Tuple[str, int]],
               wall_ns: int) -> Dict[str, float]:
    """CPU time per thread name between two :func:`threads_cpu_ns`, as a
    share of ``wall_ns``: near 1 for a thread that ran the whole time
    (gloo's TCP loop thread when it busy-polls its socket), near 0 for one
    that slept."""
    shares: Dict[str, float] = {}
    for tid, (name, ns) in after.items():
        shares[name] = shares.get(name, 0.0) + (ns - before.get(tid, (name, 0))[1]) / max(wall_ns, 1)
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


SKEWS_US = (0, 100, 300)


def skewed_all_reduce_cost(rank: int, dist: Any, torch: Any, rounds: int) -> Dict[int, float]:
    """What a 32 kB all-reduce costs rank 0's compute when rank 1 issues it
    SKEWS_US later (rank 1 computes that long first), as DDP's ranks issue a
    bucket out of step: rank 0 issues it, runs about 1 ms of 128 x 128
    matmuls, then waits for it. Per skew, the median of those matmuls' time
    less their median without an all-reduce, in us (rank 0's figures)."""
    a = torch.randn(128, 128)
    buf = torch.ones(8192)
    t0 = time.perf_counter()
    for _ in range(50):
        torch.mm(a, a)
    count = max(1, int(1e-3 / ((time.perf_counter() - t0) / 50)))

    def matmuls(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            torch.mm(a, a)
        return time.perf_counter() - start

    def skewed(us: float) -> None:
        until = time.perf_counter() + us * 1e-6
        while time.perf_counter() < until:
            torch.mm(a, a)

    alone: List[float] = []
    for _ in range(rounds):
        dist.barrier()
        if rank == 0:
            alone.append(matmuls(count))
    out: Dict[int, float] = {}
    for skew in SKEWS_US:
        with_all_reduce: List[float] = []
        for _ in range(rounds):
            dist.barrier()
            if rank == 1:
                skewed(skew)
                dist.all_reduce(buf)
                continue
            work = dist.all_reduce(buf, async_op=True)
            with_all_reduce.append(matmuls(count))
            work.wait()
        if rank == 0:
            out[skew] = (statistics.median(with_all_reduce) - statistics.median(alone)) * 1e6
    return out


def phase_times(a: argparse.Namespace, dist: Any, DDP: Any, build: Any, adam: Any, grad_mb: Any, loss_fn: Any,
                x: Any, y: Any) -> Dict[str, Dict[str, float]]:
    """``--phases``: forward, backward and optimizer step of the model in DDP
    with the harness's small buckets (1/20 of its gradients), in DDP with one
    bucket, plain, and in DDP with the small buckets and nothing sent,
    interleaved round by round; medians in ms, of each phase's time and of
    the time the thread waited for a core in it ("runqueue")."""
    from daydream.calibrate import keep_bucket_hook  # noqa: PLC0415
    from daydream.capture import thread_runqueue_ms  # noqa: PLC0415

    def runqueue_ms() -> float:
        return thread_runqueue_ms() or 0.0

    small = round(grad_mb(build(a.model)) / 20, 4)
    models = {f"DDP bucket_cap_mb={small:g}": DDP(build(a.model), bucket_cap_mb=small),
              "DDP bucket_cap_mb=25": DDP(build(a.model), bucket_cap_mb=25.0), "plain": build(a.model)}
    quiet = DDP(build(a.model), bucket_cap_mb=small)
    quiet.register_comm_hook(None, keep_bucket_hook)
    models[f"DDP bucket_cap_mb={small:g}, nothing sent"] = quiet
    optimizers = {k: adam(m.parameters()) for k, m in models.items()}
    phases = ("forward", "backward", "optimizer", "step")
    keys = [*phases, *(f"{p} runqueue" for p in phases)]
    times: Dict[str, Dict[str, List[float]]] = {k: {p: [] for p in keys} for k in models}
    rounds = max(a.steps // 30, 3)
    for r in range(rounds + 2):  # the first two rounds warm up
        for k, m in models.items():
            opt = optimizers[k]
            for _ in range(30):
                dist.barrier()
                w0, t0 = runqueue_ms(), time.perf_counter()
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(m(x), y)
                w1, t1 = runqueue_ms(), time.perf_counter()
                loss.backward()
                w2, t2 = runqueue_ms(), time.perf_counter()
                opt.step()
                w3, t3 = runqueue_ms(), time.perf_counter()
                if r >= 2:
                    for phase, v, w in (("forward", t1 - t0, w1 - w0), ("backward", t2 - t1, w2 - w1),
                                        ("optimizer", t3 - t2, w3 - w2), ("step", t3 - t0, w3 - w0)):
                        times[k][phase].append(v * 1e3)
                        times[k][f"{phase} runqueue"].append(w)
    return {k: {phase: statistics.median(v) for phase, v in d.items()} for k, d in times.items()}


def decompose(a: argparse.Namespace, rank: int, dist: Any, DDP: Any, build: Any, adam: Any, loss_fn: Any,
              x: Any, y: Any, training_step: Any) -> Dict[str, Dict[str, float]]:
    """``--decompose``: the harness's data_parallel step taken apart, in
    interleaved rounds as run.py times it (blocks of ``--block`` steps, a
    barrier after each): the plain step on rank 0 while rank 1 waits in the
    barrier (the harness's baseline), the plain step on both ranks at once,
    DDP with a comm hook that returns each bucket as it is and no buffer
    broadcast (DDP's own CPU work on two ranks, no communication; run.py
    times it too), DDP as it is, DDP whose hook times each all-reduce
    from its issue to its end, and, for a model with buffers, DDP without
    its buffer broadcast (what the broadcast adds: data_parallel's
    broadcast_latency). Rank 0's medians and means, ms."""
    from daydream.calibrate import keep_bucket_hook  # noqa: PLC0415
    from run import interleaved  # noqa: PLC0415

    plain = build(a.model)
    noop = DDP(build(a.model), forward_sync_buffers=False)
    noop.register_comm_hook(None, keep_bucket_hook)
    ddp = DDP(build(a.model))
    # DDP whose hook times each all-reduce from its issue to its end (it
    # sums the gradients where DDP's own hook averages them: the same
    # communication).
    timed = DDP(build(a.model))
    spans: List[float] = []

    def timed_all_reduce(_state, bucket):  # type: ignore[no-untyped-def]  # as keep_bucket_hook: no annotations
        t0 = time.perf_counter()
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

        def done(f):  # type: ignore[no-untyped-def]
            spans.append((time.perf_counter() - t0) * 1e3)
            return f.value()[0]

        return fut.then(done)

    timed.register_comm_hook(None, timed_all_reduce)
    steps = {k: training_step(m, x, y, loss_fn, adam(m.parameters()))
             for k, m in (("plain", plain), ("noop", noop), ("ddp", ddp), ("timed", timed))}
    extra: Dict[str, Any] = {}
    if a.stand_in:
        extra = stand_in_configs(rank, dist, DDP, adam, plain, steps["plain"], training_step)
    if any(True for _ in plain.buffers()):  # what DDP's buffer broadcast adds (broadcast_latency)
        no_broadcast = DDP(build(a.model), broadcast_buffers=False)
        extra["DDP, no buffer broadcast"] = training_step(no_broadcast, x, y, loss_fn, adam(no_broadcast.parameters()))
    configs = {"plain step, rank 0 alone": steps["plain"] if rank == 0 else (lambda: None),
               "plain step, both ranks": steps["plain"],
               "DDP, no communication": steps["noop"],
               "DDP": steps["ddp"],
               "DDP, all-reduces timed": steps["timed"], **extra}
    rounds = max(a.steps // a.block, 2)
    times = interleaved(configs, a.warmup, rounds, a.block, sync=lambda _n: dist.barrier())
    out = {}
    for k, blocks in times.items():
        flat = [t for r in blocks for t in r]
        out[k] = {"median": statistics.median(flat), "mean": statistics.fmean(flat),
                  "round_medians_median": statistics.median(statistics.median(r) for r in blocks)}
    # The timed rounds' all-reduces: the last ones, after the warm-up's.
    per_step = len(spans) // (a.warmup + rounds * a.block)
    kept = spans[len(spans) - rounds * a.block * per_step:]
    out["its all-reduces, issue to end"] = {"median": statistics.median(kept), "mean": statistics.fmean(kept)}
    return out


def stand_in_configs(rank: int, dist: Any, DDP: Any, adam: Any, model: Any, model_step: Any,
                     training_step: Any) -> Dict[str, Any]:
    """``--stand-in``: stand-ins for the model, each in DDP and in DDP with
    nothing to communicate, in the same rounds as the model: a stack of
    Linear(64, 64) layers holding the model's gradient bytes, its batch
    sized so that its plain step takes the model's, trained with Adam and
    with a no-op optimizer; and one Linear(256, 256) after as many matmuls
    as the model's step takes, without and with Adam. What each adds to
    its step, set beside what DDP's all-reduce adds to the model's, is how
    daydream.calibrate.measure_ddp_gap_latency's stand-in was chosen."""
    import torch  # noqa: PLC0415

    from daydream.calibrate import _linear_stack, batches_for_step_lengths, keep_bucket_hook  # noqa: PLC0415

    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    layers = max(1, round(nbytes / (64 * 65 * 4)))

    def stack(n: int = layers) -> Any:  # the DDP calibrations' model
        torch.manual_seed(0)
        return _linear_stack(torch, n)

    def median_ms(fn: Any, n: int = 15) -> float:
        fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    target = median_ms(model_step)
    loss = torch.nn.MSELoss()

    def batch_for_target(n: int) -> int:
        """Rank 0's batch at which an ``n``-layer stack's plain step takes
        the model's, for every rank."""
        def step_s(batch: int) -> float:
            m = stack(n)
            xs, ys = torch.randn(batch, 64), torch.randn(batch, 64)
            return median_ms(training_step(m, xs, ys, loss, adam(m.parameters()))) / 1e3

        b = torch.tensor([batches_for_step_lengths(step_s, [target / 1e3], 1 << 16)[0] or 1])
        dist.broadcast(b, 0)
        return int(b[0])

    batch = batch_for_target(layers)
    xs, ys = torch.randn(batch, 64), torch.randn(batch, 64)
    # The calibration's form: one Linear(256, 256) after matmuls that take
    # the model's step time.
    a = torch.randn(128, 128)
    t0 = time.perf_counter()
    for _ in range(50):
        torch.mm(a, a)
    mm = torch.tensor([(time.perf_counter() - t0) / 50])
    dist.broadcast(mm, 0)
    matmuls = int(target * 1e-3 / float(mm[0]))
    x256 = torch.randn(8, 256)

    def padded(m: Any, optimizer: Any) -> Any:
        def step() -> None:
            for p in m.parameters():
                p.grad = None
            for _ in range(matmuls):
                torch.mm(a, a)
            m(x256).sum().backward()
            if optimizer is not None:
                optimizer.step()
        return step

    out = {}
    for label, make, adam_too in (("stack", stack, True), ("stack, no optimizer", stack, False),
                                  ("linear256", lambda: torch.nn.Linear(256, 256), False),
                                  ("linear256 + adam", lambda: torch.nn.Linear(256, 256), True)):
        ddp = DDP(make())
        quiet = DDP(make(), forward_sync_buffers=False)
        quiet.register_comm_hook(None, keep_bucket_hook)
        for name, m in (("quiet", quiet), ("DDP", ddp)):
            if label.startswith("stack"):
                out[f"{label}: {name}"] = training_step(m, xs, ys, loss, adam(m.parameters()) if adam_too else
                                                        torch.optim.SGD(m.parameters(), lr=0.0))
            else:
                out[f"{label}: {name}"] = padded(m, adam(m.parameters()) if adam_too else None)
    note = ""
    buffers = dict(model.named_buffers())
    if buffers:
        # The calibration's broadcast stand-in (measure_ddp_gap_latency's
        # 16 layers, at the model's step time) carrying the model's own
        # buffers, each rank its own values as there: what DDP's buffer
        # broadcast adds to it, beside what it adds to the model.
        batch16 = batch_for_target(16)
        xb, yb = torch.randn(batch16, 64), torch.randn(batch16, 64)
        for name, broadcast in (("no broadcast", False), ("broadcast", True)):
            m = stack(16)
            for i, b in enumerate(buffers.values()):
                m.register_buffer(f"b{i}", torch.full_like(b, rank))
            ddp = DDP(m, broadcast_buffers=broadcast)
            out[f"broadcast stand-in: DDP, {name}"] = training_step(ddp, xb, yb, loss, adam(ddp.parameters()))
        nb = sum(b.numel() * b.element_size() for b in buffers.values())
        note = f"; broadcast stand-in: 16 x Linear(64, 64) with the model's {len(buffers)} buffers ({nb} B), batch {batch16}"
    if rank == 0:
        print(f"stand-in: {layers} x Linear(64, 64) ({nbytes / 1e6:.3f} MB of gradients), batch {batch}; "
              f"{matmuls} matmuls; model's plain step {target:.3f} ms{note}", flush=True)
    return out


def broadcast_extras(decomposed: Dict[str, Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    """What DDP's buffer broadcast adds to the model's step and to the
    broadcast stand-in's, from :func:`decompose`'s figures: each with the
    broadcast less without it, of the medians and of the means, ms (only
    those both configurations of which ran: a model with buffers)."""
    pairs = {"the model": ("DDP", "DDP, no buffer broadcast"),
             "the broadcast stand-in": ("broadcast stand-in: DDP, broadcast", "broadcast stand-in: DDP, no broadcast")}
    return {who: {k: decomposed[on][k] - decomposed[off][k] for k in ("median", "mean")}
            for who, (on, off) in pairs.items() if on in decomposed and off in decomposed}


def one_job(a: argparse.Namespace) -> Dict[str, Any]:
    import torch.multiprocessing as mp  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, port, a, queue)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=a.timeout)
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    for p in procs:
        if p.is_alive():
            p.kill()
    if bad or queue.empty():
        raise SystemExit(f"ddp_noise: a rank failed (exit codes {[p.exitcode for p in procs]})")
    return queue.get()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mlp", choices=("mlp", "cnn", "transformer"))
    ap.add_argument("--cap", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--jobs", type=int, default=3, help="separate two-process jobs")
    ap.add_argument("--steps", type=int, default=400, help="timed DDP steps per job")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--all-reduces", type=int, default=300, help="timed 4 kB all-reduces per job")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-job limit (s)")
    ap.add_argument("--comm-threads", choices=("default", "realtime"), default="default",
                    help="gloo's threads as the OS schedules them or at SCHED_FIFO 1 (as run.py; root or CAP_SYS_NICE)")
    ap.add_argument("--phases", action="store_true",
                    help="instead: forward, backward and optimizer of DDP with small buckets, with one, and plain")
    ap.add_argument("--decompose", action="store_true",
                    help="instead: the plain step alone and on both ranks, DDP without communication, and DDP")
    ap.add_argument("--stand-in", action="store_true",
                    help="--decompose: also a Linear stack with the model's gradient bytes and step time, in DDP")
    ap.add_argument("--block", type=int, default=10, help="--decompose: steps per block, as run.py's --steps")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"{a.model}, DDP bucket_cap_mb={a.cap:g}, gloo, 2 processes x 1 thread, gloo's threads {a.comm_threads}; "
          f"{a.jobs} jobs")
    for j in range(a.jobs):
        r = one_job(a)
        if a.decompose:
            d = r["decompose"]
            for config, v in d.items():
                print(f"job {j + 1}: {config:<26} " + "  ".join(f"{k} {x:.3f}" for k, x in v.items()) + " ms")
            for who, added in broadcast_extras(d).items():
                print(f"job {j + 1}: the buffer broadcast adds to {who}'s step: "
                      + "  ".join(f"{k} {v:+.3f}" for k, v in added.items()) + " ms")
            continue
        if a.phases:
            for config, d in r["phases"].items():
                print(f"job {j + 1}: {config:<28} " + "  ".join(f"{p} {v:.3f}" for p, v in d.items()) + " ms")
            continue
        print(f"job {j + 1}: step {describe(r['steps'])}")
        print(f"  step histogram (ms): {histogram(r['steps'], STEP_EDGES_MS)}")
        print(f"  4 kB all-reduce: {describe(r['all_reduce'])}")
        print(f"  all-reduce histogram (ms): {histogram(r['all_reduce'], ALL_REDUCE_EDGES_MS)}")
        print("  rank 0's threads on a CPU during them, share of the wall time: " + ", ".join(
            f"{name} {share:.2f}" for name, share in r["threads_cpu"].items() if share >= 0.005))
        print(f"  4 kB all-reduce after 2 ms of matmuls: {describe(r['after_compute'])}")
        print(f"  ten 4 kB all-reduces issued at once: {describe(r['ten_at_once'])}")
        print(f"  1 MB all-reduce: {describe(r['one_mb'])}")
        print("  rank 0's compute lost to a 32 kB all-reduce that rank 1 issues later: " + ", ".join(
            f"{v:.0f} us when {k} us later" for k, v in r["skew_loss_us"].items()))
        print(f"  rank 0 waiting for a rank that sleeps 5 ms before each of 100 all-reduces: "
              f"{r['wait_cpu_s']:.3f} s of CPU in {r['wait_wall_s']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
