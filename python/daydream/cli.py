"""The ``daydream`` command line.

    daydream info TRACE [--json]
    daydream replay TRACE [--json] [--timeline OUT.json]
    daydream predict TRACE --opt NAME[:key=value,...] [--opt ...] [--json] [--timeline OUT.json]
    daydream predict TRACE --each --opt ... --opt ... [--json]   (each on its own: a what-if search)
    daydream passes [--json]

TRACE is a trace file (``.json`` or ``.json.gz``) or a directory of per-rank
trace files. Bad input exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from . import __version__, api
from ._core import DaydreamError

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line on stderr and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"daydream: error: {message} (see 'daydream --help')\n")


def _fmt_count(n: int) -> str:
    return f"{n:,}"


def _info_dict(trace: Any, graph: Any = None) -> Dict[str, Any]:
    summary = trace.summary()
    graph = api.build_graph(trace) if graph is None else graph
    return {
        "trace": summary["path"],
        "trace_name": summary["trace_name"],
        "rank": summary["rank"],
        "world_size": summary["world_size"],
        "backend": summary["backend"],
        "events": summary["num_events"],
        "events_by_kind": summary["events_by_kind"],
        "flows_by_category": summary["flows_by_category"],
        "threads": summary["threads"],
        "streams": summary["streams"],
        "devices": summary["devices"],
        "iterations": [{"name": it["name"], "measured_ms": it["measured_ms"]} for it in graph.iterations],
        "graph": graph.summary(),
        "warnings": summary["warnings"] + [w for w in graph.warnings if w not in summary["warnings"]],
    }


def _print_info(info: Dict[str, Any]) -> None:
    p = print
    p(f"trace       {info['trace']}")
    if info["rank"] >= 0 or info["world_size"] > 0:
        ws = f" of {info['world_size']}" if info["world_size"] > 0 else ""
        backend = f" ({info['backend']})" if info["backend"] else ""
        p(f"rank        {info['rank']}{ws}{backend}")
    for d in info["devices"][:1]:
        cc = ".".join(str(x) for x in d["compute_capability"])
        p(f"device      {d['name']} (compute {cc}, {d['num_sms']} SMs, {d['total_memory_bytes'] / 2**30:.1f} GiB)"
          + (f", +{len(info['devices']) - 1} more listed" if len(info["devices"]) > 1 else ""))
    kinds = sorted(info["events_by_kind"].items(), key=lambda kv: -kv[1])
    p(f"events      {_fmt_count(info['events'])}: " + ", ".join(f"{k} {_fmt_count(v)}" for k, v in kinds))
    threads = sorted(info["threads"], key=lambda t: -t["events"])
    p(f"threads     {len(threads)}: " + ", ".join(f"{t['name']} ({_fmt_count(t['events'])})" for t in threads[:6])
      + (" ..." if len(threads) > 6 else ""))
    streams = sorted(info["streams"], key=lambda t: -t["events"])
    p(f"streams     {len(streams)}: "
      + ", ".join(f"GPU {s['pid']} {s['name'].strip()} ({_fmt_count(s['events'])})" for s in streams[:6])
      + (" ..." if len(streams) > 6 else ""))
    g = info["graph"]
    p(f"graph       {_fmt_count(g['num_tasks'])} tasks, {_fmt_count(g['num_edges'])} edges, "
      f"{g['num_resources']} resources, {g['num_layers']} layers")
    phases = {k: v for k, v in g["tasks_by_phase"].items() if v}
    p("phases      " + ", ".join(f"{k} {_fmt_count(v)}" for k, v in phases.items()))
    its = info["iterations"]
    if its:
        p(f"iterations  {len(its)}: " + ", ".join(f"{it['name']} {it['measured_ms']:.3f} ms" for it in its[:8])
          + (" ..." if len(its) > 8 else ""))
    else:
        p("iterations  none (no ProfilerStep#N or Optimizer.step ranges): replay covers the whole trace")
    for w in info["warnings"]:
        p(f"warning     {w['count']} x {w['kind']}: {w['example']}")


def _cmd_info(args: argparse.Namespace) -> int:
    path = args.trace
    if os.path.isdir(path):
        job = api.load_job(path)
        infos = [_info_dict(t, g) for t, g in zip(job.traces, job.graphs())]
        if args.json:
            json.dump({"trace": path, "ranks": infos, "warnings": job.warnings}, sys.stdout, indent=1)
            print()
            return 0
        print(f"job         {path}: {len(infos)} ranks")
        for info in infos:
            print()
            _print_info(info)
        return 0
    info = _info_dict(api.load_trace(path))
    if args.json:
        json.dump(info, sys.stdout, indent=1)
        print()
    else:
        _print_info(info)
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    result = api.replay(args.trace)
    if args.timeline:
        result.timeline(args.timeline)
    if args.json:
        out = result.to_dict()
        if args.timeline:
            out["timeline"] = args.timeline
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    if isinstance(result, api.JobReplayResult):
        print(f"job {result.trace}: {len(result.ranks)} ranks, median |error| {result.median_error_pct:.2f}%")
        for r in result.ranks:
            print(f"\nrank {r.rank}: {r.trace}")
            print(api.format_replay_table(r))
    else:
        print(f"trace {result.trace}")
        print(api.format_replay_table(result))
    if args.timeline:
        print(f"timeline written to {args.timeline} (open it in https://ui.perfetto.dev)")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from . import prediction  # noqa: PLC0415 - `daydream replay` and `info` start sooner without it

    if args.each:
        return _predict_each(args, prediction)
    pred = prediction.predict(args.trace, args.opt)
    if args.timeline:
        pred.timeline(args.timeline)
    if args.json:
        out = {"trace": args.trace, **pred.to_dict()}
        if args.timeline:
            out["timeline"] = args.timeline
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"trace           {args.trace}")
    print(repr(pred))
    if args.timeline:
        print(f"timeline        {args.timeline} (baseline and predicted side by side; open in https://ui.perfetto.dev)")
    return 0


def _predict_each(args: argparse.Namespace, prediction: Any) -> int:
    """``daydream predict --each``: every --opt on its own, from one reading of the trace."""
    if args.timeline:
        raise DaydreamError("--timeline writes one prediction's schedules: leave it out with --each "
                            "(or predict that optimization alone)")
    # A variant that fails (an option out of range, a pass that does not
    # apply) is reported in its place; the others are still predicted.
    got = prediction.predict_many(args.trace, args.opt, return_errors=True)
    done = [p for p in got if not isinstance(p, DaydreamError)]
    if not done:
        raise got[0]  # nothing to show: the first error, as without --each
    failed = [(spec, e) for spec, e in zip(args.opt, got) if isinstance(e, DaydreamError)]
    if args.json:
        rows = [{"opts": [spec], "error": str(p)} if isinstance(p, DaydreamError) else p.to_dict()
                for spec, p in zip(args.opt, got)]
        json.dump({"trace": args.trace, "predictions": rows}, sys.stdout, indent=1)
        print()
    else:
        labels = [spec if isinstance(p, DaydreamError) else p.label for spec, p in zip(args.opt, got)]
        print(f"trace           {args.trace}")
        print(f"measured step   {done[0].measured_ms:.3f} ms")
        print(f"replayed step   {done[0].replayed_ms:.3f} ms")
        width = max(len("optimization"), *(len(label) for label in labels))
        print(f"{'optimization':<{width}}  predicted ms  speed-up")
        for label, p in zip(labels, got):
            if isinstance(p, DaydreamError):
                print(f"{label:<{width}}  failed: {p}")
            else:
                print(f"{label:<{width}}  {p.predicted_ms:12.3f}  {p.speedup:7.3f}x")
    if failed:
        spec, e = failed[0]
        more = f" (and {len(failed) - 1} more variants failed)" if len(failed) > 1 else ""
        print(f"daydream: error: variant '{spec}': {e}{more}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


def _cmd_passes(args: argparse.Namespace) -> int:
    from . import prediction  # noqa: PLC0415

    items = prediction.passes()
    if args.json:
        json.dump(items, sys.stdout, indent=1)
        print()
        return 0
    for p in items:
        print(f"{p['name']}: {p['summary']}")
        for o in p["options"]:
            default = f" (default {o['default']})" if o["default"] != "" else ""
            print(f"    {o['name']} [{o['type']}]{default}: {o['help']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="daydream",
        description="Replay and predict training iterations from PyTorch profiler traces.",
    )
    parser.add_argument("--version", action="version", version=f"daydream {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log warnings while reading")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    info = sub.add_parser("info", help="what a trace holds: events, threads, streams, ranks, iterations")
    info.add_argument("trace", metavar="TRACE", help="trace file (.json, .json.gz) or directory of rank traces")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(func=_cmd_info)

    replay = sub.add_parser("replay", help="replay each iteration; measured vs replayed time")
    replay.add_argument("trace", metavar="TRACE", help="trace file (.json, .json.gz) or directory of rank traces")
    replay.add_argument("--json", action="store_true", help="print one JSON object")
    replay.add_argument("--timeline", metavar="OUT.json", help="write the replayed schedule for ui.perfetto.dev")
    replay.set_defaults(func=_cmd_replay)

    predict = sub.add_parser("predict", help="predict the step time after optimizations")
    predict.add_argument("trace", metavar="TRACE", help="trace file (.json, .json.gz)")
    predict.add_argument("--opt", action="append", required=True, metavar="NAME[:key=value,...]",
                         help="an optimization with its options (repeatable, applied in order); see 'daydream passes'")
    predict.add_argument("--each", action="store_true",
                         help="predict each --opt on its own instead of applying them together: a what-if "
                              "search, the trace read once and the variants on every core; one line each "
                              "(a variant that fails says why on its line, exit 2)")
    predict.add_argument("--json", action="store_true", help="print one JSON object")
    predict.add_argument("--timeline", metavar="OUT.json", help="write baseline and predicted schedules side by side")
    predict.set_defaults(func=_cmd_predict)

    passes = sub.add_parser("passes", help="the optimizations daydream can predict, with their options")
    passes.add_argument("--json", action="store_true", help="print JSON")
    passes.set_defaults(func=_cmd_passes)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logged = api.log_trace_warnings
    if args.verbose or args.func is not _cmd_replay:
        import logging  # noqa: PLC0415 - `daydream replay` starts without it

        logging.basicConfig(level=logging.WARNING if args.verbose else logging.ERROR,
                            format="daydream: warning: %(message)s")
    else:
        api.log_trace_warnings = False  # they would be dropped: nothing else logs in a replay
    try:
        return int(args.func(args))
    except DaydreamError as e:
        print(f"daydream: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader went away (`daydream ... | head`): nothing more to say.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0
    except OSError as e:
        print(f"daydream: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("daydream: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI must end with one line, never a traceback
        import logging  # noqa: PLC0415

        logging.getLogger("daydream").debug("internal error", exc_info=True)
        print(f"daydream: internal error: {type(e).__name__}: {e} (please report it)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        api.log_trace_warnings = logged  # main() called in a process that goes on (tests, notebooks)


if __name__ == "__main__":
    sys.exit(main())
