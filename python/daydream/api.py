"""Loading traces, building graphs, simulating and replaying them.

Example::

    import daydream
    trace = daydream.load_trace("rank0.pt.trace.json.gz")
    graph = daydream.build_graph(trace)
    result = daydream.replay(graph)
    for it in result.iterations:
        print(it.name, it.measured_ms, it.replayed_ms, it.error_pct)
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Union

from . import _core
from ._core import DaydreamError, Graph, Schedule, Trace

PathLike = Union[str, "os.PathLike[str]"]

#: Whether reading a trace logs its warnings (logger "daydream", WARNING).
#: ``daydream replay`` without ``--verbose``, which would drop them, turns it
#: off and so never imports ``logging`` (a fifth of its import time).
log_trace_warnings = True


#: Each graph's baseline replay, kept by ``daydream.predict`` for the next
#: prediction from the same graph (a what-if search predicts many variants of
#: one graph, and replaying the baseline was a fifth of each prediction);
#: dropped with the graph, and by ``_core.remove_profiler_overhead``, which
#: changes a graph in place.
_baseline_replays: "weakref.WeakKeyDictionary[Graph, Schedule]" = weakref.WeakKeyDictionary()


def _forget_baseline(graph: Graph) -> None:
    """Drops ``graph``'s remembered baseline replay: call it after changing ``graph`` in place."""
    _baseline_replays.pop(graph, None)


def _log_warnings(source: str, warnings: List[Dict[str, Any]]) -> None:
    if not warnings or not log_trace_warnings:
        return
    import logging  # noqa: PLC0415 - see log_trace_warnings

    log = logging.getLogger("daydream")
    for w in warnings:
        more = f" (and {w['count'] - 1} more like it)" if w["count"] > 1 else ""
        log.warning("%s%s", w["example"], more)


def load_trace(path: PathLike) -> Trace:
    """Reads one PyTorch profiler (Kineto / Chrome-trace) JSON file, plain or gzip.

    Example::

        trace = daydream.load_trace("worker0.pt.trace.json.gz")
        trace.summary()["events_by_kind"]["kernel"]

    A directory of per-rank files is a job: use :func:`load_job`.
    Raises :class:`DaydreamError` naming the file and the event for bad input.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise DaydreamError(f"{path}: is a directory of traces; use daydream.load_job() to load every rank")
    trace = _core.load_trace_file(path)
    _log_warnings(path, trace.warnings)
    return trace


class Job:
    """The traces of every rank of one job (one file per rank), sorted by rank."""

    # Plain classes here, not dataclasses: `dataclasses` imports `inspect`,
    # a third of the time `import daydream` takes (docs/performance.md).
    def __init__(self, path: str, traces: List[Trace], warnings: Optional[List[Dict[str, Any]]] = None) -> None:
        self.path = path
        self.traces = traces
        self.warnings: List[Dict[str, Any]] = [] if warnings is None else warnings

    def __repr__(self) -> str:
        return f"Job(path={self.path!r}, ranks={self.ranks!r})"

    @property
    def ranks(self) -> List[int]:
        return [t.rank for t in self.traces]

    def graphs(self) -> List[Graph]:
        """One graph per rank, each replayable on its own (built several at a time)."""
        return _build_graphs(self.traces)

    def __len__(self) -> int:
        return len(self.traces)


def load_job(path: PathLike) -> Job:
    """Loads a directory of per-rank traces (or a single file, a job of one rank).

    Each file's rank comes from its ``distributedInfo``, else from its name
    (``rank-3``, ``worker3``, ``..._3.json``), else from name order.

    Example::

        job = daydream.load_job("traces/")
        [g.num_tasks for g in job.graphs()]
    """
    path = os.fspath(path)
    traces, warnings = _core.load_job(path)
    _log_warnings(path, warnings)
    for t in traces:
        _log_warnings(t.path, t.warnings)
    return Job(path=path, traces=list(traces), warnings=list(warnings))


def build_graph(trace: Union[Trace, PathLike], *, exact_latencies: bool = False) -> Graph:
    """Builds the dependency graph of a trace (or of the trace file at a path).

    ``exact_latencies=True`` keeps each activity's recorded delay on the
    constraint that bound it, so the replay reproduces the trace exactly: a
    consistency check, not a model (see docs/architecture.md).

    Example::

        graph = daydream.build_graph("rank0.json.gz")
        graph.summary()["tasks_by_phase"]["backward"]
    """
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    graph = _core.build_graph(trace, exact_latencies)
    _log_graph_warnings(trace, graph)
    return graph


def _log_graph_warnings(trace: Trace, graph: Graph) -> None:
    """The builder's warnings that the trace's own (logged when it was read) do not hold."""
    _log_warnings(graph.source, [w for w in graph.warnings if w not in trace.warnings])


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has
    one, which a container's cpuset narrows; else every CPU)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _each_rank(fn: Any, items: List[Any]) -> List[Any]:
    """``[fn(x) for x in items]``, on up to one thread per usable CPU: the
    builder and the simulator release the GIL. The first exception in the
    items' order is raised, as the loop would."""
    workers = min(len(items), usable_cpus())
    if workers <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - only for a job: keeps `daydream` quick to import

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="daydream-rank") as pool:
        return list(pool.map(fn, items))


def _build_graphs(traces: List[Trace]) -> List[Graph]:
    """:func:`build_graph` of each trace, several at a time; their warnings
    logged in the traces' order."""
    graphs = _each_rank(lambda t: _core.build_graph(t, False), list(traces))
    for trace, graph in zip(traces, graphs):
        _log_graph_warnings(trace, graph)
    return graphs


def simulate(graph: Graph) -> Schedule:
    """Replays ``graph`` in the event simulator.

    Returns a :class:`Schedule` with the start and end of every task,
    ``iterations`` (measured and replayed times), ``critical_path`` (task ids)
    and ``critical_path_summary``.

    Example::

        schedule = daydream.simulate(graph)
        schedule.iterations[0]["replayed_ms"]
    """
    return _core.simulate(graph)


class IterationResult(NamedTuple):
    """One iteration: measured (from the trace) and replayed (simulated) time."""

    name: str
    measured_ms: float
    replayed_ms: float
    error_pct: float
    #: Span of the iteration's GPU work, recorded and replayed (0 without GPU work).
    gpu_measured_ms: float = 0.0
    gpu_replayed_ms: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict of the fields."""
        return self._asdict()


class ReplayResult:
    """What ``daydream replay`` reports for one trace (one rank)."""

    def __init__(self, trace: str, rank: int, iterations: List[IterationResult], median_error_pct: float,
                 mean_error_pct: float, whole_trace: bool, gpu_start_error_us: Dict[str, float],
                 critical_path: Dict[str, Any], graph: Dict[str, Any], schedule: Schedule) -> None:
        self.trace = trace
        self.rank = rank
        self.iterations = iterations
        self.median_error_pct = median_error_pct
        self.mean_error_pct = mean_error_pct
        self.whole_trace = whole_trace
        self.gpu_start_error_us = gpu_start_error_us
        self.critical_path = critical_path
        self.graph = graph
        self.schedule = schedule

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict: the shape ``daydream replay --json`` prints."""
        return {
            "trace": self.trace,
            "rank": self.rank,
            "iterations": [it.to_dict() for it in self.iterations],
            "median_error_pct": self.median_error_pct,
            "mean_error_pct": self.mean_error_pct,
            "whole_trace": self.whole_trace,
            "gpu_start_error_us": self.gpu_start_error_us,
            "critical_path": self.critical_path,
            "graph": self.graph,
        }

    def timeline(self, path: PathLike, label: str = "replay") -> None:
        """Writes the replayed schedule as Chrome-trace JSON (open in ui.perfetto.dev)."""
        self.schedule.write_timeline(os.fspath(path), label)

    def __repr__(self) -> str:
        return format_replay_table(self)


class JobReplayResult:
    """Replay of every rank of a job."""

    def __init__(self, trace: str, ranks: List[ReplayResult]) -> None:
        self.trace = trace
        self.ranks = ranks

    def __repr__(self) -> str:
        return (f"JobReplayResult(trace={self.trace!r}, ranks={len(self.ranks)}, "
                f"median_error_pct={self.median_error_pct:.3f})")

    @property
    def median_error_pct(self) -> float:
        import statistics  # noqa: PLC0415 - only jobs need it; `daydream replay FILE` starts sooner

        errors = [abs(it.error_pct) for r in self.ranks for it in r.iterations]
        return statistics.median(errors) if errors else 0.0

    @property
    def iterations(self) -> List[IterationResult]:
        return [it for r in self.ranks for it in r.iterations]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "trace": self.trace,
            "median_error_pct": self.median_error_pct,
            "ranks": [r.to_dict() for r in self.ranks],
        }

    def timeline(self, path: PathLike) -> None:
        """Writes every rank's replayed schedule into one Chrome-trace file."""
        writer = _core.TimelineWriter()
        for r in self.ranks:
            writer.add(r.schedule, f"rank {r.rank}")
        writer.write(os.fspath(path))


def _replay_graph(graph: Graph) -> ReplayResult:
    schedule = simulate(graph)
    iterations = [
        IterationResult(it["name"], it["measured_ms"], it["replayed_ms"], it["error_pct"],
                        it["gpu_measured_ms"], it["gpu_replayed_ms"])
        for it in schedule.iterations
    ]
    return ReplayResult(
        trace=graph.source,
        rank=graph.rank,
        iterations=iterations,
        median_error_pct=schedule.median_error_pct,
        mean_error_pct=schedule.mean_error_pct,
        whole_trace=schedule.whole_trace,
        gpu_start_error_us=schedule.gpu_start_error_us,
        critical_path=schedule.critical_path_summary,
        graph=graph.summary(),
        schedule=schedule,
    )


def replay(target: Union[Graph, Trace, PathLike]) -> Union[ReplayResult, JobReplayResult]:
    """Replays a graph, a trace, a trace file or a directory of per-rank traces.

    Each iteration is reported with its measured time (the ``ProfilerStep#N``
    span in the trace), its replayed time and the error. A trace without
    iterations is replayed as one span, ``"whole trace"``.

    Example::

        result = daydream.replay("rank0.pt.trace.json.gz")
        result.median_error_pct
        result.timeline("replayed.json")
    """
    if isinstance(target, Graph):
        return _replay_graph(target)
    if isinstance(target, Trace):
        return _replay_graph(build_graph(target))
    path = os.fspath(target)
    if os.path.isdir(path):
        job = load_job(path)
        return JobReplayResult(trace=path, ranks=_each_rank(_replay_graph, job.graphs()))
    return _replay_graph(build_graph(load_trace(path)))


def format_replay_table(result: ReplayResult) -> str:
    """The replay table ``daydream replay`` prints."""
    lines = []
    width = max([len("iteration")] + [len(it.name) for it in result.iterations])
    gpu = any(it.gpu_measured_ms > 0 for it in result.iterations)
    head = f"{'iteration':<{width}}  {'measured ms':>12}  {'replayed ms':>12}  {'error':>8}"
    lines.append(head + (f"  {'GPU span ms (measured / replayed)':>34}" if gpu else ""))
    for it in result.iterations:
        row = f"{it.name:<{width}}  {it.measured_ms:12.3f}  {it.replayed_ms:12.3f}  {it.error_pct:+7.2f}%"
        if gpu:
            row += f"  {it.gpu_measured_ms:16.3f} / {it.gpu_replayed_ms:<15.3f}"
        lines.append(row)
    summary = f"median |error| {result.median_error_pct:.2f}%"
    if gpu:
        e = result.gpu_start_error_us
        summary += f"; GPU task starts off by {e['p50']:.1f} us (median), {e['p95']:.1f} us (95th pct)"
    lines.append(summary)
    cp = result.critical_path
    if cp.get("length_ms", 0) > 0:
        total = cp["length_ms"]
        shares = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in list(cp["by_kind_ms"].items())[:6])
        lines.append(f"critical path ({total:.3f} ms, {cp['num_tasks']} tasks): {shares}")
        for name, ms in cp["top_tasks_ms"][:5]:
            short = name if len(name) <= 70 else name[:67] + "..."
            lines.append(f"  {ms:10.3f} ms  {short}")
    return "\n".join(lines)
