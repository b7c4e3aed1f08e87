#!/usr/bin/env python3
"""Predicts a run's saved captures again, four ways, paired on the same captures.

For each row of a results file (``run.py --json``) whose capture was kept
(``run.py --save-traces DIR``: the trace, and in ``.options.json`` the passes
as run and what the Profiler measured), the captured trace is fitted to the
profiler's overhead two ways, to the model's forward timed without the
profiler (what daydream.Profiler does for a step that waits for
collectives) and to the unprofiled step's length (what it did before), and
each graph is predicted with the row's own options and without the training
thread's measured waits for a core (``recorded_cpu_wait_us`` and
``unprofiled_cpu_wait_us``: tensor_fusion then takes ``comm_cpu_share`` of
the recorded all-reduces' time instead).
Prints each row's error % (ratio carry-over against the capture's replay;
the table's tensor_fusion rows now take it against the repriced capture) and
the median / mean / max |error| of each way.

    python benchmarks/accuracy/run.py --experiments tensor_fusion,tensor_fusion_reverse --save-traces DIR --json DIR.json
    python benchmarks/accuracy/repredict.py DIR.json DIR [DIR2.json DIR2 ...]

Diagnostic only: nothing here feeds a prediction (docs/history/accuracy-log.md,
"tensor_fusion's capture fitted to its forward").
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

WAYS = ("forward fit + wait", "forward fit + share", "step fit + wait", "step fit + share")


def without_waits(opt: str) -> str:
    """``opt`` less its ``recorded_cpu_wait_us`` and ``unprofiled_cpu_wait_us`` options."""
    return re.sub(r",?(recorded|unprofiled)_cpu_wait_us=[0-9.;]*", "", opt).replace(":,", ":")


def fitted_graphs(trace_path: Path, measured: Dict[str, Any]) -> Tuple[Any, Any]:
    """The capture with the Profiler's measured costs fitted to its forward
    and to its step (the same graph twice where it had no forward timed)."""
    import daydream  # noqa: PLC0415
    from daydream import calibrate  # noqa: PLC0415

    trace = daydream.load_trace(str(trace_path))
    costs = calibrate.ProfilerOverhead(**measured["overhead"])
    graphs = []
    for forward in (measured.get("plain_forward_ms"), None):
        fit = calibrate.fit_profiler_overhead(trace, daydream.build_graph(trace), costs, measured["plain_step_ms"],
                                              measured.get("plain_optimizer_ms"), forward)
        graphs.append(calibrate.remove_profiler_overhead(trace, daydream.build_graph(trace), fit))
    return graphs[0], graphs[1]


def errors(row: Dict[str, Any], saved: Path) -> Optional[List[float]]:
    """The row's error % each way (WAYS), or None without a usable capture."""
    import daydream  # noqa: PLC0415

    stem = saved / f"{row['experiment']}_{row['model']}"
    options = stem.with_name(stem.name + ".options.json")
    trace = stem.with_name(stem.name + ".json.gz")
    if not options.exists() or not trace.exists():
        return None
    kept = json.loads(options.read_text())
    measured = kept.get("profiler") or {}
    if not measured.get("overhead") or not measured.get("plain_step_ms"):
        return None  # saved before run.py kept what the Profiler measured
    opt = kept["opts"][0]
    forward, step = fitted_graphs(trace, measured)
    baseline, truth = row["baseline"]["median_ms"], row["measured_ms"]
    out = []
    for graph in (forward, step):
        for o in (opt, without_waits(opt)):
            speedup = daydream.predict(graph, opt=o).speedup
            out.append(100 * (baseline / speedup - truth) / truth)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="RESULTS.json TRACES_DIR, one pair per run")
    a = ap.parse_args()
    if len(a.pairs) % 2:
        ap.error("give a results file and its --save-traces folder for every run")
    table: List[List[float]] = []
    print("| run | row | " + " | ".join(WAYS) + " |")
    print("|---|---|" + "---|" * len(WAYS))
    for k in range(0, len(a.pairs), 2):
        rows = json.loads(Path(a.pairs[k]).read_text())["rows"]
        for row in rows:
            e = errors(row, Path(a.pairs[k + 1]))
            if e is None:
                continue
            table.append(e)
            print(f"| {k // 2 + 1} | {row['experiment']} {row['model']} | " + " | ".join(f"{x:+.1f}" for x in e) + " |")
    if not table:
        print("no row with a kept capture and what the Profiler measured", file=sys.stderr)
        return 1
    for i, way in enumerate(WAYS):
        xs = [abs(e[i]) for e in table]
        print(f"{way}: median |error| {statistics.median(xs):.1f}%, mean {statistics.mean(xs):.1f}%, "
              f"max {max(xs):.1f}% over {len(xs)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
