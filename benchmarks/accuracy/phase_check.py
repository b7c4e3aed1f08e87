#!/usr/bin/env python3
"""How closely the per-phase op replay tracks the real step's phase changes.

The amp and batch_size predictions on a CPU graph come from
``daydream.calibrate.amp_cpu_phase_times`` / ``batch_cpu_phase_times``:
every aten op of the model's forward and of its backward, replayed in both
configurations, each phase's change in ms spread over the graph's ops of
that phase. This script times the harness's training step (its models,
batches and Adam; the loss computed under autocast, as run.py's amp step
does) in both configurations with the forward (and loss), the backward and
the optimizer step timed apart, blocks of ``--steps`` steps of each in
turn, and between the blocks of every round one call of the replay. It
prints, per model and experiment, the real change of each phase
(optimized minus baseline, medians over the rounds' steps) beside the
replay's (medians over its calls, and the range its calls read), and the
replay's miss in ms and in % of the real optimized step: the part of the
row's error that the replay itself makes.

    python benchmarks/accuracy/phase_check.py
    python benchmarks/accuracy/phase_check.py --experiments amp --models transformer --rounds 10

Diagnostic only: nothing here feeds a prediction (docs/accuracy.md, "What the misses say").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests" / "python"))

PHASES = ("forward", "backward", "optimizer")


def phase_step(model: Any, x: Any, y: Any, loss_fn: Any, optimizer: Any, autocast: bool
               ) -> Callable[[], Tuple[float, float, float]]:
    """One training step that returns the ms of its forward (with the loss),
    its backward and its optimizer step; under ``torch.autocast("cpu",
    torch.bfloat16)`` for the forward when ``autocast``."""
    import torch  # noqa: PLC0415

    def step() -> Tuple[float, float, float]:
        optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3
    return step


def real_changes(optimized: Sequence[Tuple[float, float, float]], baseline: Sequence[Tuple[float, float, float]]
                 ) -> Dict[str, float]:
    """Each phase's median ms in the optimized steps minus the baseline's,
    and the whole step's (``step``: median of the steps' sums)."""
    out = {phase: statistics.median(s[i] for s in optimized) - statistics.median(s[i] for s in baseline)
           for i, phase in enumerate(PHASES)}
    out["step"] = statistics.median(sum(s) for s in optimized) - statistics.median(sum(s) for s in baseline)
    return out


def call_changes(calls: Sequence[Dict[str, Tuple[float, float]]]) -> Dict[str, List[float]]:
    """Each phase's change in every one of ``calls`` (each a phase-times
    dict: (optimized ms, baseline ms) per phase), for the phases every call
    replayed."""
    return {phase: [c[phase][0] - c[phase][1] for c in calls]
            for phase in ("forward", "backward") if all(phase in c for c in calls)}


def replay_changes(calls: Sequence[Dict[str, Tuple[float, float]]]) -> Dict[str, float]:
    """The median over ``calls`` of each phase's change (:func:`call_changes`)."""
    return {phase: statistics.median(changes) for phase, changes in call_changes(calls).items()}


def check(name: str, experiment: str, rounds: int, steps: int, warmup: int) -> Dict[str, Any]:
    import torch  # noqa: PLC0415

    from daydream import calibrate  # noqa: PLC0415
    from models import build, loss_for  # noqa: PLC0415
    from run import BATCH, adam, make_batch  # noqa: PLC0415

    torch.manual_seed(0)
    model = build(name)
    optimizer = adam(model.parameters())
    x, y = make_batch(name, BATCH[name])
    inputs = [(tuple(x.shape), x.dtype)]
    base = phase_step(model, x, y, loss_for(name), optimizer, autocast=False)
    if experiment == "amp":
        opt = phase_step(model, x, y, loss_for(name), optimizer, autocast=True)

        def replay() -> Dict[str, Tuple[float, float]]:
            return calibrate.amp_cpu_phase_times(model, inputs)
    else:
        x2, y2 = make_batch(name, 2 * BATCH[name])
        opt = phase_step(model, x2, y2, loss_for(name), optimizer, autocast=False)

        def replay() -> Dict[str, Tuple[float, float]]:
            return calibrate.batch_cpu_phase_times(model, inputs, 2.0)
    for fn in (base, opt):
        for _ in range(warmup):
            fn()
    times: Dict[str, List[Tuple[float, float, float]]] = {"base": [], "opt": []}
    calls = []
    for r in range(rounds):
        for key, fn in ((("base", base), ("opt", opt)) if r % 2 == 0 else (("opt", opt), ("base", base))):
            times[key].extend(fn() for _ in range(steps))
        calls.append(replay())
    real = real_changes(times["opt"], times["base"])
    replayed = replay_changes(calls)
    step_ms = statistics.median(sum(s) for s in times["opt"])
    miss = sum(replayed.get(p, 0.0) - real[p] for p in ("forward", "backward"))
    spread = {phase: (min(changes), max(changes)) for phase, changes in call_changes(calls).items()}
    return {"model": name, "experiment": experiment, "real": real, "replay": replayed, "replay_range": spread,
            "optimized_step_ms": step_ms, "miss_ms": miss, "miss_pct": 100 * miss / step_ms}


def line(r: Dict[str, Any]) -> str:
    real, rep = r["real"], r["replay"]
    return (f"{r['experiment']:<10} {r['model']:<11} real forward {real['forward']:+.3f} backward "
            f"{real['backward']:+.3f} optimizer {real['optimizer']:+.3f} step {real['step']:+.3f} ms | replay "
            f"forward {rep.get('forward', float('nan')):+.3f} backward {rep.get('backward', float('nan')):+.3f} ms"
            f" | miss {r['miss_ms']:+.3f} ms = {r['miss_pct']:+.1f}% of the {r['optimized_step_ms']:.3f} ms step"
            + "".join(f" | {phase} calls {lo:+.3f} to {hi:+.3f}" for phase, (lo, hi) in r["replay_range"].items()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiments", default="amp,batch_size", help="comma-separated subset of: amp, batch_size")
    p.add_argument("--models", default="mlp,cnn,transformer")
    p.add_argument("--rounds", type=int, default=6, help="rounds (one replay call each)")
    p.add_argument("--steps", type=int, default=40, help="steps of each configuration per round")
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    for experiment in a.experiments.split(","):
        if experiment not in ("amp", "batch_size"):
            p.error(f"--experiments: {experiment!r} is not amp or batch_size")
        for name in a.models.split(","):
            print(line(check(name, experiment, a.rounds, a.steps, a.warmup)), flush=True)


if __name__ == "__main__":
    main()
