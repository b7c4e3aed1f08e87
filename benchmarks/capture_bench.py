#!/usr/bin/env python3
"""Capture on real models (CPU): the profiler hook's overhead on step time, and
replay of every captured iteration against its measured time.

    python benchmarks/capture_bench.py --steps 30 \
        --accuracy-doc docs/accuracy.md --performance-doc docs/performance.md

Each model (MLP, small CNN with batch norm, small transformer encoder, the
ones the tests train) runs its training step in three settings, interleaved
round by round so machine noise hits them alike: no profiler, torch.profiler
alone (CPU activities, record_shapes), and daydream.Profiler(model=...).
Step time is the median over the rounds' steps, with the 10th-90th
percentile spread. The docs are rewritten between
<!-- capture-*:begin --> / <!-- capture-*:end --> markers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch

import daydream
from daydream.capture import training_step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from models import batch_for, build, loss_for  # noqa: E402

warnings.filterwarnings("ignore")
MODELS = ["mlp", "cnn", "transformer"]


def timed_steps(step: Callable[[], None], n: int, around: Callable[[], Any] | None = None) -> List[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        if around is not None:
            around()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def measure(name: str, steps: int, rounds: int) -> Dict[str, Any]:
    model = build(name)
    inputs, target = batch_for(name)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = training_step(model, inputs, target, loss_for(name), opt)
    for _ in range(5):
        step()
    samples: Dict[str, List[float]] = {"none": [], "torch.profiler": [], "daydream.Profiler": []}
    last_prof = None
    for _ in range(rounds):
        samples["none"] += timed_steps(step, steps)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as p:
            samples["torch.profiler"] += timed_steps(step, steps, p.step)
        # The recording as it is: this checks the capture and build path, so
        # the profiler's overhead stays in the graph (remove_overhead=False).
        prof = daydream.Profiler(wait=0, warmup=1, active=steps - 1, model=model, optimizer=opt, remove_overhead=False)
        with prof:
            samples["daydream.Profiler"] += timed_steps(step, steps, prof.step)
        last_prof = prof
    result = daydream.replay(last_prof.graph)

    def stats(xs: List[float]) -> Dict[str, float]:
        q = statistics.quantiles(xs, n=10)
        return {"median_ms": statistics.median(xs), "p10_ms": q[0], "p90_ms": q[-1]}

    out = {k: stats(v) for k, v in samples.items()}
    base = out["none"]["median_ms"]
    for k in out:
        out[k]["overhead_pct"] = 100.0 * (out[k]["median_ms"] - base) / base
    return {
        "model": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "step": out,
        "replay": [it.to_dict() for it in result.iterations],
        "replay_median_error_pct": result.median_error_pct,
    }


def replace_block(doc: Path, key: str, text: str) -> None:
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    old = doc.read_text() if doc.exists() else ""
    if begin not in old:
        old += f"\n{begin}\n{end}\n"
    head, rest = old.split(begin, 1)
    doc.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")


def overhead_table(rows: List[Dict[str, Any]], command: str) -> str:
    lines = [
        f"Measured with `{command}` (CPU, {torch.get_num_threads()} threads, torch {torch.__version__}).",
        "",
        "| model | parameters | no profiler ms | torch.profiler ms (overhead) | daydream.Profiler ms (overhead) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["step"]

        def cell(k: str, with_overhead: bool = True) -> str:
            c = s[k]
            spread = f"{c['median_ms']:.2f} [{c['p10_ms']:.2f}-{c['p90_ms']:.2f}]"
            return f"{spread} ({c['overhead_pct']:+.0f}%)" if with_overhead else spread

        lines.append(f"| {r['model']} | {r['parameters']:,} | {cell('none', False)} | {cell('torch.profiler')} "
                     f"| {cell('daydream.Profiler')} |")
    return "\n".join(lines)


def accuracy_table(rows: List[Dict[str, Any]], command: str) -> str:
    lines = [
        f"Regenerate with `{command}`. Measured = the `ProfilerStep#N` span; replayed = the same span in the "
        "simulated schedule of the captured graph.",
        "",
        "| model | captured iterations | measured ms (median) | replayed ms (median) | median \\|error\\| | max \\|error\\| |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        its = r["replay"]
        errors = [abs(it["error_pct"]) for it in its]
        lines.append(f"| {r['model']} | {len(its)} | {statistics.median(it['measured_ms'] for it in its):.3f} "
                     f"| {statistics.median(it['replayed_ms'] for it in its):.3f} | {statistics.median(errors):.3f}% "
                     f"| {max(errors):.3f}% |")
    worst = max(abs(it["error_pct"]) for r in rows for it in r["replay"])
    lines += ["", f"Worst |error| over all captured iterations: {worst:.3f}% (target: each within 5%)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="steps per setting per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--accuracy-doc")
    parser.add_argument("--performance-doc")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for name in MODELS:
        rows.append(measure(name, args.steps, args.rounds))
        s = rows[-1]["step"]
        print(f"{name}: none {s['none']['median_ms']:.2f} ms, torch.profiler {s['torch.profiler']['overhead_pct']:+.1f}%, "
              f"daydream.Profiler {s['daydream.Profiler']['overhead_pct']:+.1f}%, "
              f"replay median |error| {rows[-1]['replay_median_error_pct']:.3f}%")
    command = f"python benchmarks/capture_bench.py --steps {args.steps} --rounds {args.rounds}"
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.performance_doc:
        replace_block(Path(args.performance_doc), "capture-overhead", overhead_table(rows, command))
    if args.accuracy_doc:
        replace_block(Path(args.accuracy_doc), "capture-replay", accuracy_table(rows, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
