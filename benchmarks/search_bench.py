#!/usr/bin/env python3
"""What-if search as a user runs it: many predictions from one graph, timed in Python.

    .venv/bin/python benchmarks/search_bench.py [--variants 100] [--doc docs/performance.md]

For each trace (default: big_1m, 434 k tasks, and big_2m, 1.0 M tasks; both
generated once by benchmarks/make_big_trace.py from ../shared/traces) it reads
and builds the graph once, then times, in this process:

  * ``daydream.predict_many(graph, specs)``: the search, one variant per
    spec (``scale:gpu=F``, F = 0.5, 0.505, ...), on one thread per CPU;
  * the same with ``threads=1``;
  * ``--compare`` variants (default 10) by ``daydream.predict`` with the
    baseline's remembered replay dropped before each one, as every
    prediction replayed its baseline before predict kept that replay.

Each variant copies the graph, runs the pass, replays the copy and reports
(step times, breakdowns, critical path). Peak RSS is this process's. Results
go to benchmarks/out/search.json; with --doc the <!-- search:begin/end -->
block of that markdown file is rewritten.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_bench import OUT, ROOT, ensure_generated, git_commit, machine, replace_block  # noqa: E402

import daydream  # noqa: E402
from daydream import api  # noqa: E402

DEFAULT_TRACES = ("big_1m", "big_2m")
api.log_trace_warnings = False  # the generated traces' warnings are known (docs/performance.md)


def log(msg: str) -> None:
    print(f"search_bench: {msg}", file=sys.stderr, flush=True)


def specs(n: int) -> List[str]:
    return [f"scale:gpu={0.5 + 0.005 * i:.3f}" for i in range(n)]


def measure(name: str, path: Path, variants: int, compare: int) -> Dict[str, Any]:
    log(f"{name}: {path}")
    t0 = time.perf_counter()
    graph = api.build_graph(api.load_trace(path))
    load_s = time.perf_counter() - t0
    summary = graph.summary()
    rec: Dict[str, Any] = {"trace": name, "path": str(path), "tasks": summary["num_tasks"], "edges": summary["num_edges"],
                           "load_build_s": load_s}
    log(f"  {rec['tasks']:,} tasks, read and built in {load_s:.2f} s")

    t0 = time.perf_counter()
    many = daydream.predict_many(graph, specs(variants))
    rec["search_s"] = time.perf_counter() - t0
    log(f"  predict_many, {variants} variants: {rec['search_s']:.2f} s")

    api._forget_baseline(graph)
    t0 = time.perf_counter()
    one_thread = daydream.predict_many(graph, specs(variants), threads=1)
    rec["search_one_thread_s"] = time.perf_counter() - t0
    log(f"  predict_many, {variants} variants, threads=1: {rec['search_one_thread_s']:.2f} s")
    same = [p.predicted_ms for p in many] == [p.predicted_ms for p in one_thread]
    rec["threads_agree"] = same

    times = []
    for spec in specs(compare):
        api._forget_baseline(graph)
        t0 = time.perf_counter()
        daydream.predict(graph, spec)
        times.append(time.perf_counter() - t0)
    rec["predict_without_remembered_baseline_ms"] = statistics.median(times) * 1e3
    log(f"  predict with the baseline replayed each time: {rec['predict_without_remembered_baseline_ms']:.0f} ms"
        " per variant (median)")
    rec["predicted_ms_range"] = [min(p.predicted_ms for p in many), max(p.predicted_ms for p in many)]
    return rec


def table(results: List[Dict[str, Any]], meta: Dict[str, Any]) -> str:
    lines = [
        f"Measured with `{meta['command']}` on {meta['machine']}; daydream at `{meta['commit']}`. "
        f"{meta['variants']} variants (`scale:gpu=F`); each copies the graph, runs the pass, replays the copy "
        "and reports. One run each.",
        "",
        "| trace | tasks / edges | read + build s | `predict_many`, one thread per CPU: s (ms per variant) "
        "| `predict_many`, `threads=1`: s (ms per variant) | `predict` replaying the baseline every time: "
        "ms per variant | peak RSS of the process so far, MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    n = meta["variants"]
    for r in results:
        lines.append(
            f"| {r['trace']} | {r['tasks']:,} / {r['edges']:,} | {r['load_build_s']:.2f} "
            f"| {r['search_s']:.2f} ({r['search_s'] / n * 1e3:.0f}) "
            f"| {r['search_one_thread_s']:.2f} ({r['search_one_thread_s'] / n * 1e3:.0f}) "
            f"| {r['predict_without_remembered_baseline_ms']:.0f} | {r['peak_rss_mib']:,} |")
    if not all(r["threads_agree"] for r in results):
        lines += ["", "**The threaded and one-thread searches predicted different times: a bug.**"]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", action="append", default=[], metavar="NAME=PATH",
                   help="trace to search over (repeatable; default: big_1m and big_2m, generated once)")
    p.add_argument("--variants", type=int, default=100, help="variants per search (default 100)")
    p.add_argument("--compare", type=int, default=10,
                   help="variants predicted one by one with the baseline replayed each time (default 10)")
    p.add_argument("--doc", help="rewrite the <!-- search:begin/end --> block of this markdown file")
    args = p.parse_args()
    if args.variants < 1 or args.compare < 1:
        p.error("--variants and --compare must be at least 1")
    traces = []
    for spec in args.trace or [f"{n}={OUT / (n + '.json.gz')}" for n in DEFAULT_TRACES]:
        name, eq, path = spec.partition("=")
        if not eq:
            p.error(f"--trace expects NAME=PATH, got {spec!r}")
        ensure_generated(name, Path(path))
        if not Path(path).exists():
            p.error(f"{path}: no such file")
        traces.append((name, Path(path)))
    results = []
    for name, path in traces:
        rec = measure(name, path, args.variants, args.compare)
        # Peak of the process so far: the largest trace is measured last.
        rec["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        results.append(rec)
    meta = {"command": "python benchmarks/search_bench.py" + (f" --variants {args.variants}"
                                                             if args.variants != 100 else ""),
            "machine": machine(), "commit": git_commit(), "variants": args.variants}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "search.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    text = table(results, meta)
    print(text)
    if args.doc:
        replace_block(ROOT / args.doc if not Path(args.doc).is_absolute() else Path(args.doc), "search", text)
    return 0 if all(r["threads_agree"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
