"""`make demo`: daydream on a real GPU training trace and on a small model
profiled on this CPU.

    python -m daydream.demo [--out build/demo] [--no-model]

1. The bundled trace (ResNet-50 training on a V100, recorded by
   HolisticTraceAnalysis): what it holds, each iteration replayed against its
   measured time, the replayed timeline written for Perfetto.
2. What-ifs on that trace: mixed precision, gradient bucketing, 8-way data
   parallelism.
3. A small CNN trained for a few steps on this CPU under daydream.Profiler,
   and every optimization daydream knows predicted for it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import api, cli, prediction
from ._core import DaydreamError

TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "resnet-v100-ddp1-rank0.pt.trace.json.gz"

GPU_WHAT_IFS: List[Tuple[str, Union[str, Sequence[str]]]] = [
    ("mixed precision (amp)", "amp"),
    ("8 GPUs, NVLink, DDP buckets (tensor_fusion)", "tensor_fusion:world_size=8,bucket_mb=25"),
    ("8 GPUs, NVLink (data_parallel)", "data_parallel:world_size=8,network=nvlink"),
    ("8 GPUs over 10 GbE (data_parallel)", "data_parallel:world_size=8,network=ethernet10"),
]

# How each pass is asked about the small CPU model (a pass missing here runs
# with its defaults).
CPU_WHAT_IFS = {
    "amp": "amp",
    "fused_optimizer": "fused_optimizer",
    "op_fusion": "op_fusion",
    "batch_size": "batch_size:factor=2",
    "cuda_graphs": "cuda_graphs",
    "data_parallel": "data_parallel:world_size=4",
    "tensor_fusion": "tensor_fusion:world_size=4,bucket_mb=0.25",
    "p3": ["data_parallel:world_size=4,bucket_mb=0", "p3"],
    "scale": "scale:cpu=0.5",
}


def _table(rows: List[Tuple[str, str, str, str]]) -> str:
    head = ("optimization", "step ms", "speed-up", "what daydream modelled")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(3)]
    lines = [f"  {head[0]:<{widths[0]}}  {head[1]:>{widths[1]}}  {head[2]:>{widths[2]}}  {head[3]}",
             "  " + "-" * (sum(widths) + 6 + len(head[3]))]
    for r in rows:
        lines.append(f"  {r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}")
    return "\n".join(lines)


def _short(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _batch_factor(spec: Union[str, Sequence[str]]) -> Optional[float]:
    """The batch_size factor a what-if asks for, or None."""
    for item in [spec] if isinstance(spec, str) else spec:
        name, _, opts = item.partition(":")
        if name == "batch_size":
            options = dict(o.split("=", 1) for o in opts.split(",") if "=" in o)
            if "factor" not in options:  # the pass's default
                info = next(p for p in prediction.passes() if p["name"] == "batch_size")
                options["factor"] = next(o["default"] for o in info["options"] if o["name"] == "factor")
            return float(options["factor"])
    return None


def _what_ifs(subject: Any, items: List[Tuple[str, Union[str, Sequence[str]]]]) -> str:
    rows: List[Tuple[str, str, str, str]] = []
    baseline = None
    for label, spec in items:
        try:
            pred = prediction.predict(subject, opt=spec)
        except DaydreamError as e:
            rows.append((label, "n/a", "", _short(str(e))))
            continue
        if baseline is None:
            baseline = pred
            overhead = pred.baseline.profiler_overhead
            removed = overhead["removed_ms"] / max(1, len(pred.baseline.iterations))
            rows.insert(0, ("(replay of the recording)", f"{pred.replayed_ms:.2f}", "1.00x",
                            f"measured {pred.measured_ms:.2f} ms"
                            + (f" under the profiler, {removed:.2f} ms of its overhead removed" if removed else "")
                            + (f"; {subject.overhead.fit_text()}"
                               if getattr(subject, "overhead", None) is not None and subject.overhead.fit_text()
                               else "")))
        note = _short(pred.notes[-1].split(": ", 1)[-1]) if pred.notes else ""
        factor = _batch_factor(spec)
        if factor is not None:  # a bigger batch is judged per sample, not per step
            note = _short(f"x{factor:g} batch: {pred.speedup * factor:.2f}x samples/s. " + note)
        rows.append((label, f"{pred.predicted_ms:.2f}", f"{pred.speedup:.2f}x", note))
    return _table(rows)


def _gpu_part(out: Path) -> None:
    print("== 1. A real GPU training trace: ResNet-50 on a V100 (HolisticTraceAnalysis test data)\n")
    trace = api.load_trace(TRACE)
    cli._print_info(cli._info_dict(trace))
    print()
    result = api.replay(trace)
    print(api.format_replay_table(result))
    timeline = out / "replay-timeline.json"
    result.timeline(timeline)
    print(f"\nreplayed timeline: {timeline} (open it in https://ui.perfetto.dev)\n")
    print("== 2. What if ...? (the same trace)\n")
    graph = api.build_graph(trace)
    print(_what_ifs(graph, GPU_WHAT_IFS))
    pred = prediction.predict(graph, opt="data_parallel:world_size=8,network=ethernet10")
    side_by_side = out / "data-parallel-10gbe.json"
    pred.timeline(side_by_side)
    print(f"\nbaseline and 10 GbE prediction side by side: {side_by_side}\n")


def _model_part() -> None:
    try:
        import torch  # noqa: PLC0415
        import torch.nn as nn  # noqa: PLC0415
    except ImportError:
        print("== 3. (skipped: PyTorch is not installed)")
        return
    from .capture import Profiler  # noqa: PLC0415

    print("== 3. A small CNN with batch norm, trained on this CPU under daydream.Profiler\n")
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    prof = Profiler(wait=10, warmup=2, active=3, model=model, optimizer=opt)
    with prof:
        for _ in range(15):  # 10 timed without the profiler, 2 discarded, 3 recorded
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            prof.step()
    graph = prof.graph
    s = graph.summary()
    grads = graph.tensors(role="gradient")
    print(f"captured {len(graph.iterations)} iterations: {s['num_tasks']:,} tasks, "
          f"{len(graph.layers())} layers, {len(grads)} gradients ({sum(t.bytes for t in grads) / 1e3:.1f} kB)\n")
    items = [(p["name"], CPU_WHAT_IFS.get(p["name"], p["name"])) for p in prediction.passes()]
    print(_what_ifs(prof, items))  # the Profiler: predict sees the model and the overhead fit
    print()


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/demo", help="folder for the timelines")
    parser.add_argument("--no-model", action="store_true", help="skip the CPU model part")
    args = parser.parse_args(list(argv) or None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The trace's own warnings (memsets without GPU activity, ...) are in `daydream info`.
    logging.getLogger("daydream").setLevel(logging.ERROR)
    try:
        _gpu_part(out)
        if not args.no_model:
            _model_part()
    except DaydreamError as e:
        print(f"daydream: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
