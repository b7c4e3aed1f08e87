#!/usr/bin/env python3
"""Replay every trace under a folder (default ../shared/traces) and report the
error per iteration: the table in docs/accuracy.md.

    python benchmarks/replay_accuracy.py --traces ../shared/traces \
        --doc docs/accuracy.md --json benchmarks/out/replay_accuracy.json

The doc is rewritten between the markers <!-- replay-table:begin --> and
<!-- replay-table:end -->; the rest of it is left as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import daydream

# Folders whose files cannot give an accuracy figure, and why.
EXEMPT = {
    "hta-sampled-128rank": "events were sampled away: tests robustness, not accuracy",
    "hta-a100-alexnet": "no iterations: replayed as one whole-trace span",
}
BEGIN, END = "<!-- replay-table:begin -->", "<!-- replay-table:end -->"


def trace_files(root: Path) -> List[Path]:
    files = [p for p in root.rglob("*") if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))]
    return sorted(files)


def replay_file(path: Path, root: Path) -> Dict[str, Any]:
    t0 = time.perf_counter()
    result = daydream.replay(path)
    seconds = time.perf_counter() - t0
    folder = path.relative_to(root).parts[0]
    return {
        "folder": folder,
        "file": str(path.relative_to(root)),
        "exempt": EXEMPT.get(folder, ""),
        "iterations": [it.to_dict() for it in result.iterations],
        "median_error_pct": result.median_error_pct,
        "gpu_start_error_us": result.gpu_start_error_us,
        "tasks": result.graph["num_tasks"],
        "seconds": seconds,
    }


def table(rows: List[Dict[str, Any]], command: str) -> str:
    out = [
        f"Regenerate with `{command}` (default build options; nothing is fitted to the measured step times).",
        "",
        "| trace file | iterations | measured ms (median) | replayed ms (median) | median \\|error\\| | max \\|error\\| | GPU start error p50 / p95 (us) | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    counted = []
    for r in rows:
        its = r["iterations"]
        meas = statistics.median(it["measured_ms"] for it in its)
        rep = statistics.median(it["replayed_ms"] for it in its)
        worst = max(abs(it["error_pct"]) for it in its)
        gpu = r["gpu_start_error_us"]
        if r["exempt"]:
            target = f"exempt ({r['exempt']})"
        else:
            ok = r["median_error_pct"] <= 5.0
            target = "<= 5%: met" if ok else "<= 5%: MISSED"
            counted.append(r["median_error_pct"])
        out.append(
            f"| `{r['file']}` | {len(its)} | {meas:.3f} | {rep:.3f} | {r['median_error_pct']:.3f}% | {worst:.3f}% "
            f"| {gpu['p50']:.1f} / {gpu['p95']:.1f} | {target} |"
        )
    if counted:
        out.append("")
        out.append(
            f"Over the {len(counted)} files with a target: median of the per-file median |error| "
            f"{statistics.median(counted):.3f}%, worst {max(counted):.3f}%."
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="../shared/traces")
    parser.add_argument("--doc", help="markdown file to update between the replay-table markers")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    root = Path(args.traces)
    rows = []
    for path in trace_files(root):
        try:
            rows.append(replay_file(path, root))
        except daydream.DaydreamError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 2
        r = rows[-1]
        print(f"{r['file']}: median |error| {r['median_error_pct']:.3f}% over {len(r['iterations'])} iterations "
              f"({r['tasks']} tasks, {r['seconds']:.2f} s)")
    command = "make replay-accuracy"
    text = table(rows, command)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.doc:
        doc = Path(args.doc)
        old = doc.read_text() if doc.exists() else f"# Accuracy\n\n{BEGIN}\n{END}\n"
        if BEGIN not in old:
            old += f"\n{BEGIN}\n{END}\n"
        head, rest = old.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        doc.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")
    else:
        print(text)
    failed = [r for r in rows if not r["exempt"] and r["median_error_pct"] > 5.0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
