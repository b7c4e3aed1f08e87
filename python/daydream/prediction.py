"""daydream.predict: how fast will one iteration be after optimization X?

Example::

    pred = daydream.predict("rank0.pt.trace.json.gz", opt="tensor_fusion", world_size=8, bucket_mb=25)
    pred = daydream.predict(model, opt=["amp", "fused_optimizer"], inputs=batch)
    pred.speedup, pred.predicted_ms
    pred.timeline("baseline_vs_predicted.json")   # open in https://ui.perfetto.dev
"""

from __future__ import annotations

import html
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _core, api
from ._core import DaydreamError, Graph

OptSpec = Union[str, Sequence[str]]


def passes() -> List[Dict[str, Any]]:
    """Every optimization daydream can predict: name, summary, model (what it
    assumes and its source) and options with their types, defaults and help.

    Example::

        [p["name"] for p in daydream.passes()]
    """
    return list(_core.passes())


def parse_opt(spec: str) -> Tuple[str, Dict[str, str]]:
    """``"tensor_fusion:bucket_mb=25,world_size=8"`` -> ("tensor_fusion", {...})."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise DaydreamError(f"optimization '{spec}': no name before ':'")
    options: Dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise DaydreamError(f"optimization '{spec}': expected key=value, got '{item}'")
        options[key.strip()] = value.strip()
    return name, options


def display_opt(spec: str, limit: int = 48) -> str:
    """``spec`` as printed for a reader: an option whose value is longer
    than ``limit`` characters (a calibration's per-op table, such as
    amp's ``cpu_op_factors`` with one entry per recorded op) is shown as
    its number of entries; the rest as given. ``Prediction.opts`` keeps the
    whole text, which reproduces the prediction."""
    name, options = parse_opt(spec)

    def shown(value: str) -> str:
        if len(value) <= limit:
            return value
        n = value.count(";") + 1
        return f"<{n} entries>" if n > 1 else f"<{len(value)} characters>"

    if not options:
        return name
    return f"{name}:" + ",".join(f"{k}={shown(v)}" for k, v in options.items())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _requests(opt: OptSpec, options: Dict[str, Any]) -> List[Tuple[str, Dict[str, str]]]:
    specs = [opt] if isinstance(opt, str) else list(opt)
    if not specs:
        raise DaydreamError("predict: no optimization given (opt=...); see daydream.passes()")
    known = {p["name"]: {o["name"] for o in p["options"]} for p in passes()}
    requests = []
    for spec in specs:
        name, given = parse_opt(spec)
        if name not in known:
            raise DaydreamError(f"unknown optimization '{name}' (known: {', '.join(known)})")
        requests.append((name, given))
    # Keyword options go to every requested pass that takes them; a network
    # calibration's options after them, under what a request gave.
    net = _network_calibration(options)
    for key, value in options.items():
        if net is not None and key == "network":
            continue
        takers = [name for name, _ in requests if key in known[name]]
        if not takers:
            offered = "; ".join(f"{n}: {', '.join(sorted(known[n])) or 'none'}" for n, _ in requests)
            raise DaydreamError(f"no requested optimization takes option '{key}' ({offered})")
        for name, given in requests:
            if name in takers:
                given.setdefault(key, _text(value))
    if net is not None:
        _apply_calibration(requests, known, net)
    return requests


# The passes a NetworkCalibration sets options for (NetworkCalibration.options).
_CALIBRATED_PASSES = ("data_parallel", "tensor_fusion")
# What data_parallel measures on a known model (_ddp_cpu_on_model), where a
# calibration's Linear stacks give only a stand-in.
_DDP_CPU_OPTIONS = ("ddp_cpu_us", "ddp_cpu_per_gradient_us")


def _network_calibration(options: Dict[str, Any]) -> Any:
    """A :class:`daydream.NetworkCalibration` (from ``calibrate_network()``)
    given as ``network=``, else None."""
    net = options.get("network")
    return net if callable(getattr(net, "options", None)) and callable(getattr(net, "caveats", None)) else None


def _takes_calibration(name: str, given: Dict[str, str]) -> bool:
    """Whether request ``name`` takes a calibration given as ``network=``:
    a pass the calibration sets options for, that names no network itself."""
    return name in _CALIBRATED_PASSES and "network" not in given


def _apply_calibration(requests: List[Tuple[str, Dict[str, str]]], known: Dict[str, set], net: Any) -> None:
    """``network=calibrate_network()``: each request that takes it
    (:func:`_takes_calibration`) gets the options the calibration sets for
    its pass (``net.options``), under what the request gave; data_parallel's
    DDP CPU work only where it is not measured on the model
    (:func:`_calibrate_request`)."""
    takers = [(name, given) for name, given in requests if _takes_calibration(name, given)]
    if not takers:
        raise DaydreamError("network=: a NetworkCalibration sets the options of " + " and ".join(_CALIBRATED_PASSES)
                            + ", and no such request is without a network of its own")
    for name, given in takers:
        for key, value in net.options(name).items():
            if key in known[name] and not (name == "data_parallel" and key in _DDP_CPU_OPTIONS):
                given.setdefault(key, _text(value))


def _calibration_notes(requests: List[Tuple[str, Dict[str, str]]], net: Any) -> List[str]:
    """What ``net``, a calibration given as ``network=`` (or None), says of
    itself (``caveats()``), once for the requests that took it, and where a
    request is for another number of ranks than it measured."""
    if net is None:
        return []
    takers = [(name, given) for name, given in requests if _takes_calibration(name, given)]
    notes = [f"{' and '.join(name for name, _ in takers)}: {caveat}" for caveat in net.caveats()]
    for name, given in takers:
        try:
            ranks = int(float(given.get("world_size", net.world_size)))
        except ValueError:
            continue  # the pass names the bad value
        if ranks != net.world_size:
            notes.append(f"{name}: the network was calibrated with {net.world_size} ranks and is taken as it is for "
                         f"{ranks}: its latencies and the waits its gap_latency holds were not measured at {ranks}")
    return notes


def _is_module(obj: Any) -> bool:
    return hasattr(obj, "named_modules") and hasattr(obj, "parameters") and callable(obj)


def _baseline(subject: Any, inputs: Any, target: Any, loss_fn: Any, optimizer: Any, warmup: int,
              active: int) -> Any:
    """The graph to predict for, or the Profiler that recorded it (which keeps
    its trace file, read by calibrations, alive)."""
    from .capture import Profiler, profile_steps, training_step  # noqa: PLC0415 - torch only when needed

    if isinstance(subject, (Graph, Profiler)):
        return subject
    if isinstance(subject, (str, os.PathLike)):
        path = os.fspath(subject)
        if os.path.isdir(path):
            raise DaydreamError(f"{path}: predict takes one rank's trace; for a job, predict each rank "
                                "(daydream.load_job(path).graphs())")
        return api.build_graph(api.load_trace(path))
    if _is_module(subject):
        if inputs is None:
            raise DaydreamError("predict(model, ...): pass inputs= (a batch the model takes)")
        return profile_steps(training_step(subject, inputs, target, loss_fn, optimizer), warmup, active,
                             model=subject, optimizer=optimizer)
    if callable(subject):
        return profile_steps(subject, warmup, active, optimizer=optimizer)
    raise DaydreamError(f"predict: cannot predict for a {type(subject).__name__}: pass an nn.Module with inputs=, "
                        "a callable training step, a Graph, a Profiler or a trace path")


@dataclass
class Prediction:
    """A predicted step time next to the measured and replayed ones.

    Step times are steady-state: max(CPU step span, device period) — a host
    that never waits inside a step hides a GPU bottleneck otherwise.
    ``speedup`` is replayed / predicted (model against model).
    """

    opts: List[str]
    measured_ms: float
    replayed_ms: float
    predicted_ms: float
    speedup: float
    iterations: List[Dict[str, Any]]
    notes: List[str]
    before: Dict[str, Dict[str, float]]
    after: Dict[str, Dict[str, float]]
    critical_path: Dict[str, Any]
    baseline: Graph = field(repr=False, compare=False)
    #: The predicted graph; None in the results of ``predict_many`` without ``keep_graphs``.
    graph: Optional[Graph] = field(repr=False, compare=False)
    _result: Any = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        """The optimizations as printed: ``opts`` joined by " + ", long
        calibrated tables shortened (:func:`display_opt`)."""
        return " + ".join(map(display_opt, self.opts))

    @property
    def by_phase(self) -> Dict[str, Dict[str, float]]:
        """Busy ms per iteration by phase: {"before": {...}, "after": {...}}."""
        return {"before": self.before["by_phase_ms"], "after": self.after["by_phase_ms"]}

    @property
    def by_resource(self) -> Dict[str, Dict[str, float]]:
        """Busy ms per iteration by resource: {"before": {...}, "after": {...}}."""
        return {"before": self.before["by_resource_ms"], "after": self.after["by_resource_ms"]}

    def timeline(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes baseline and predicted schedules side by side (two processes
        in one Chrome-trace file; open it in https://ui.perfetto.dev)."""
        if self._result is None:
            raise DaydreamError("timeline: this prediction kept no schedules (predict_many(..., keep_graphs=False)); "
                                "predict it again with daydream.predict to write its timeline")
        writer = _core.TimelineWriter()
        writer.add(self._result.baseline_schedule, "baseline")
        writer.add(self._result.predicted_schedule, "predicted: " + self.label)
        writer.write(os.fspath(path))

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict: what ``daydream predict --json`` prints."""
        return {
            "opts": self.opts,
            "measured_ms": self.measured_ms,
            "replayed_ms": self.replayed_ms,
            "predicted_ms": self.predicted_ms,
            "speedup": self.speedup,
            "iterations": self.iterations,
            "notes": self.notes,
            "by_phase_ms": self.by_phase,
            "by_resource_ms": self.by_resource,
            "critical_path": self.critical_path,
        }

    def _rows(self) -> List[Tuple[str, str]]:
        return [
            ("optimization", self.label),
            ("measured step", f"{self.measured_ms:.3f} ms"),
            ("replayed step", f"{self.replayed_ms:.3f} ms"),
            ("predicted step", f"{self.predicted_ms:.3f} ms"),
            ("speed-up", f"{self.speedup:.3f}x"),
        ]

    def __repr__(self) -> str:
        lines = [f"{k:<15} {v}" for k, v in self._rows()]
        changes = self.critical_path.get("changes_ms", {})
        if changes:
            lines.append("critical path   " + ", ".join(
                f"{k} {b:.1f} -> {a:.1f} ms" for k, (b, a) in list(changes.items())[:5]))
        lines += [f"note            {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in self._rows())
        phases = sorted(set(self.by_phase["before"]) | set(self.by_phase["after"]))
        phase_rows = "".join(
            f"<tr><td>{html.escape(p)}</td><td>{self.by_phase['before'].get(p, 0):.2f}</td>"
            f"<td>{self.by_phase['after'].get(p, 0):.2f}</td></tr>" for p in phases)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<table>{rows}</table>"
                f"<table><tr><th>phase</th><th>busy ms before</th><th>after</th></tr>{phase_rows}</table>"
                + (f"<ul>{notes}</ul>" if notes else ""))


# The least a phase's ops keep of their time when a measured change is spread
# over them (a change larger than their time came from what lies between them).
_MIN_PHASE_FACTOR = 0.05


def _spread_phase_change(graph: Graph, times: Dict[str, Tuple[float, float]], given: Dict[str, str]) -> str:
    """Each phase's measured change, ``times[phase]`` = (new ms, recorded ms)
    of its replayed ops, spread over the graph's CPU ops of that phase in
    proportion to their time: every such op (by trace event) gets the factor
    1 + change / their time per iteration, in ``given["cpu_op_factors"]``.
    Returns what was done, "" when nothing was."""
    from . import calibrate  # noqa: PLC0415

    ops: Dict[str, List[Tuple[int, int]]] = {p: [] for p in times}  # phase -> (trace event, ns)
    for i in range(graph.num_tasks):
        t = graph.task(i)
        if t["kind"] == "cpu_op" and t["phase"] in ops and t["trace_event"] >= 0:
            ops[t["phase"]].append((int(t["trace_event"]), t["duration_ns"]))
    iterations = max(1, len(graph.iterations))
    events: Dict[int, float] = {}
    parts = []
    for phase, (new_ms, old_ms) in times.items():
        graph_ms = sum(ns for _, ns in ops[phase]) / 1e6 / iterations
        if graph_ms <= 0:
            continue
        wanted = 1 + (new_ms - old_ms) / graph_ms
        factor = max(_MIN_PHASE_FACTOR, wanted)
        events.update((event, factor) for event, _ in ops[phase])
        capped = (f"; capped at x{_MIN_PHASE_FACTOR:g}: {(factor - wanted) * graph_ms:.3f} ms of the saving is not "
                  "applied (it exceeds the ops' time: the Python between them, which stays, went too)"
                  if factor > wanted else "")
        parts.append(f"the {phase} {old_ms:.3f} -> {new_ms:.3f} ms ({new_ms - old_ms:+.3f} ms on its "
                     f"{graph_ms:.3f} ms of ops per iteration, x{factor:.3f}{capped})")
    if not events:
        return ""
    given["cpu_op_factors"] = calibrate.format_op_factors(events)
    return "; ".join(parts)


def _calibrate_amp_cpu(graph: Graph, given: Dict[str, str], model: Any = None, inputs: Any = None) -> str:
    """amp on a CPU-only graph. With the model and its inputs' shapes (a
    Profiler given ``model=``): every op of its forward and of its backward
    that autocast would run, replayed in both precisions (casts and bf16
    elementwise ops included); each phase's change in milliseconds is spread
    over the graph's ops of that phase in proportion to their time (their
    factor: 1 + change / their time per iteration). Else the bf16/fp32 factor of each matmul,
    convolution and attention op replayed at its recorded shapes; where the
    graph's trace cannot give them, one measured GEMM ratio."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    why_not_phases = "no model and input shapes (a daydream.Profiler given model=)"
    if model is not None and inputs:
        try:
            times = calibrate.amp_cpu_phase_times(model, inputs)
        except DaydreamError as e:
            times, why_not_phases = {}, str(e)
        spread = _spread_phase_change(graph, times, given)
        if spread:
            return ("amp: every op of the model's forward and backward replayed on this CPU as torch.autocast would "
                    "run it (bf16 matmuls, casts, ops on bf16 tensors) and in fp32: " + spread
                    + " (daydream.calibrate.amp_cpu_phase_times)")
        if times:
            why_not_phases = "the graph has no forward or backward op with a trace event"
    try:
        factors = calibrate.amp_cpu_op_factors(graph)
        why = "no op with recorded shapes could be replayed"
    except DaydreamError as e:
        factors, why = {}, str(e)
    if factors:
        given["cpu_op_factors"] = calibrate.format_op_factors(factors)
        values = sorted(factors.values())
        return (f"amp: {len(factors)} matmul/convolution/attention ops replayed at their recorded shapes in fp32 "
                f"and bf16 on this CPU (weight casts included): bf16 takes {values[0]:.2f}-{values[-1]:.2f}x "
                f"their fp32 time (daydream.calibrate.amp_cpu_op_factors; not per phase: {why_not_phases})")
    ratio = calibrate.amp_cpu_ratio()
    given["cpu_gemm_factor"] = f"{ratio:.4f}"
    return (f"amp: bf16 GEMMs on this CPU take {ratio:.2f}x their fp32 time (measured with torch.autocast; "
            f"daydream.calibrate.amp_cpu_ratio; no per-op factors: {why})")


def _calibrate_op_fusion_cpu(graph: Graph, given: Dict[str, str], model: Any = None, inputs: Any = None
                             ) -> Optional[str]:
    """op_fusion on a CPU-only graph with the model and its recorded inputs
    (a Profiler given ``model=``): its forward and backward timed on this CPU
    eager and under torch.compile; each phase's change in milliseconds is
    spread over the graph's ops of that phase (``cpu_op_factors``). Without
    them, the pass's chain model (no note: the pass's own says what it did);
    when the measurement fails, the same, and the note says why."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    if model is None or not inputs:
        return None
    t0 = time.perf_counter()
    try:
        times = calibrate.compile_cpu_phase_times(model, inputs)
    except DaydreamError as e:
        return f"op_fusion: not measured under torch.compile ({e}); the pass's chain model is used"
    spread = _spread_phase_change(graph, times, given)
    if not spread:
        return "op_fusion: the graph has no forward or backward op with a trace event; the pass's chain model is used"
    return ("op_fusion: the model's forward and backward timed on this CPU eager and under torch.compile (inductor; "
            f"compiled and timed in {time.perf_counter() - t0:.1f} s): " + spread
            + " (daydream.calibrate.compile_cpu_phase_times)")


def _buffer_broadcast(model: Any, given: Dict[str, str]) -> Optional[str]:
    """data_parallel of a model with buffers (batch-norm running statistics):
    DDP (broadcast_buffers=True) broadcasts them before every forward. The
    graph cannot tell them apart from other tensors; the model can."""
    nbytes = sum(b.numel() * b.element_size() for b in model.buffers())
    if nbytes <= 0:
        return None
    given["buffer_bytes"] = str(nbytes)
    return (f"data_parallel: the model has {nbytes} bytes of buffers, which DDP broadcasts before every forward "
            "(broadcast_buffers=True; pass buffer_bytes=0 for broadcast_buffers=False)")


def _ddp_cpu_on_model(model: Any, inputs: Any, given: Dict[str, str], network: Any = None) -> str:
    """data_parallel of a known model on a CPU-only graph: DDP's own CPU work
    on it, measured (a one-process DDP copy, its all-reduce left to the
    ring model, against a plain one): its
    forward's extra as ``ddp_cpu_us``, its backward's spread over the
    gradients as ``ddp_cpu_per_gradient_us`` (pass ``ddp_cpu_us=0`` to
    leave it out). When it cannot be measured, ``network``'s (a
    calibration given as ``network=``) stand in, else both stay 0, the
    pass's default; the note says why."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    try:
        times = calibrate.ddp_cpu_phase_times(model, inputs)
    except DaydreamError as e:
        if network is not None:
            return _ddp_cpu_from_calibration(network, given, f"not measured on the model ({e})")
        return (f"data_parallel: DDP's own CPU work not measured on the model ({e}); ddp_cpu_us and "
                "ddp_cpu_per_gradient_us stay 0 (the pass's default)")
    gradients = sum(1 for p in model.parameters() if p.requires_grad)
    forward = max(0.0, times["forward"][0] - times["forward"][1]) if "forward" in times else 0.0
    backward = max(0.0, times["backward"][0] - times["backward"][1]) if "backward" in times else 0.0
    given["ddp_cpu_us"] = f"{forward * 1e3:.1f}"
    given["ddp_cpu_per_gradient_us"] = f"{backward * 1e3 / max(1, gradients):.2f}"
    return (f"data_parallel: DDP's own CPU work on {type(calibrate._unwrapped(model)).__name__}, measured on this CPU "
            f"(a copy in DistributedDataParallel over a gloo group of this process alone, its all-reduce left to "
            f"the network model, against a plain copy): "
            f"+{forward:.3f} ms in the forward (ddp_cpu_us), +{backward:.3f} ms in the backward over its "
            f"{gradients} gradients (ddp_cpu_per_gradient_us) (daydream.calibrate.ddp_cpu_phase_times)")


def _ddp_cpu_from_calibration(network: Any, given: Dict[str, str], why: str = "") -> str:
    """data_parallel with a calibration given as ``network=`` where DDP's
    own CPU work is not measured on the model (none is known, or the
    measurement failed: ``why``): the calibration's, from its Linear
    stacks."""
    options = network.options("data_parallel")
    for key in _DDP_CPU_OPTIONS:
        given[key] = _text(options[key])
    return (f"data_parallel: DDP's own CPU work {why + '; ' if why else ''}from the network calibration's Linear "
            f"stacks: {float(given['ddp_cpu_us']):.1f} us + {float(given['ddp_cpu_per_gradient_us']):.2f} us per "
            "gradient (ddp_cpu_us, ddp_cpu_per_gradient_us; measured on the model where it is known)")


def _pass_default(name: str, option: str) -> str:
    """The default of pass ``name``'s ``option`` ("0" when it has none)."""
    return next((o["default"] for p in passes() if p["name"] == name for o in p["options"] if o["name"] == option),
                "0")


def _corun_on_model(model: Any, inputs: Any, given: Dict[str, str]) -> Optional[str]:
    """data_parallel of a known CPU model: how much slower its forward and
    backward run while the other ranks on this host run theirs
    (``cpu_factor``), set when the slowdown is larger than its noise. Ranks
    that would not each have their cores here are taken to run elsewhere."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    try:
        world = int(float(given.get("world_size", _pass_default("data_parallel", "world_size"))))
    except ValueError:
        return None  # the pass says what is wrong with it
    if world < 2:
        return None
    try:
        corun = calibrate.corun_cpu_factor(model, inputs, world_size=world)
    except DaydreamError as e:
        return f"data_parallel: no co-running factor measured ({e}); cpu_factor stays 1"
    if not corun.measurable:
        return (f"data_parallel: ranks sharing this host: {corun.describe()}, "
                + ("within its noise" if corun.factor - corun.noise <= 1.0 < corun.factor + corun.noise
                   else "not a slowdown") + ": cpu_factor stays 1 (daydream.calibrate.corun_cpu_factor)")
    given["cpu_factor"] = f"{corun.factor:.4f}"
    return f"data_parallel: ranks sharing this host: {corun.describe()} (cpu_factor; daydream.calibrate.corun_cpu_factor)"


def _straggler(name: str, graph: Graph, given: Dict[str, str], step_times_ms: Sequence[float]) -> Optional[str]:
    """data_parallel / tensor_fusion with the recorded step's times: every
    iteration the ranks meet at the first all-reduce, so each waits for the
    slowest. With world_size ranks whose step times vary as the recorded
    one's did (independently), the wait is the expected maximum of
    world_size draws from those times less their mean
    (calibrate.expected_wait_for_slowest_ms), tails included.
    Not for a graph that already communicates (tensor_fusion on a recorded
    data-parallel step): its steps' times hold the waits for the other
    ranks, and its recorded collectives held them too. A step over three
    times the median is a one-off stall (the first step of a process, which
    allocates and initializes, took 43 ms against 13 here), not how the
    ranks' steps vary: it is left out. Kept, one such step among ten made the
    demo's four CNN ranks wait about 80 ms an iteration."""
    if graph.summary()["tasks_by_kind"]["collective"] > 0:
        return None
    median = statistics.median(step_times_ms) if step_times_ms else 0.0
    steady = [t for t in step_times_ms if t <= 3 * median]
    stalls = len(step_times_ms) - len(steady)
    if len(steady) < 5:
        return None
    world = int(float(given.get("world_size", _pass_default(name, "world_size")))) or graph.world_size
    if world < 2:
        return None
    from .calibrate import expected_wait_for_slowest_ms  # noqa: PLC0415 - the module needs torch to run, not to import

    times = sorted(steady)
    n = len(times)
    wait_us = expected_wait_for_slowest_ms(times, world) * 1e3
    given["straggler_us"] = f"{wait_us:.1f}"
    return (f"{name}: with {world} ranks whose steps vary as the {n} recorded ones timed without the profiler did "
            f"({times[0]:.3f}-{times[-1]:.3f} ms), each iteration's first all-reduce waits {wait_us / 1e3:.3f} ms "
            "for the slowest (straggler_us)"
            + (f"; {stalls} step{'s' if stalls > 1 else ''} over three times their median ({median:.3f} ms) left out "
               "as one-off stalls" if stalls else ""))


def _recorded_cpu_waits(graph: Graph, requests: List[Tuple[str, Dict[str, str]]],
                        waits_ms: Optional[Sequence[float]], unprofiled_ms: Optional[float] = None) -> List[str]:
    """tensor_fusion on a recorded data-parallel step that a Profiler timed:
    how long its training thread waited for a core in each recorded
    iteration (``Profiler.recorded_cpu_wait_ms``) becomes
    ``recorded_cpu_wait_us``, what the recorded all-reduces' threads took from
    it, and how long it waited after the forward in the steps run without the
    profiler (``Profiler.plain_cpu_wait_after_forward_ms``)
    ``unprofiled_cpu_wait_us``, which the pass takes instead, unless either is
    given. Only where the graph communicates, with one wait per iteration of
    the graph, and for a pass given ``comm_cpu_share`` or
    ``bucket_cpu_latency`` (without either, collectives run beside compute
    and take nothing from it)."""
    if not waits_ms or len(waits_ms) != len(graph.iterations):
        return []
    notes: List[str] = []
    for name, given in requests:
        if name != "tensor_fusion" or "recorded_cpu_wait_us" in given or "unprofiled_cpu_wait_us" in given:
            continue
        try:
            if not float(given.get("comm_cpu_share", "0")) > 0 and not given.get("bucket_cpu_latency"):
                continue
        except ValueError:
            continue  # the pass names the bad value
        if graph.summary()["tasks_by_kind"]["collective"] == 0:
            return []
        given["recorded_cpu_wait_us"] = ";".join(f"{w * 1e3:.1f}" for w in waits_ms)
        note = (f"tensor_fusion: in the recorded iterations the training thread waited {min(waits_ms):.3f}-"
                f"{max(waits_ms):.3f} ms (median {statistics.median(waits_ms):.3f}) for a core "
                "(recorded_cpu_wait_us, from Linux schedstat)")
        if unprofiled_ms is not None:
            given["unprofiled_cpu_wait_us"] = f"{unprofiled_ms * 1e3:.1f}"
            note += (f"; in the steps run without the profiler, {unprofiled_ms:.3f} ms after the forward (median; "
                     "unprofiled_cpu_wait_us, which the pass takes off instead: the profiled rank is the slower one)")
        notes.append(note)
    return notes


def _calibrate_batch_cpu(graph: Graph, given: Dict[str, str], model: Any = None, inputs: Any = None) -> List[str]:
    """batch_size on a CPU-only graph: a CPU op's fixed cost on this machine
    (``cpu_fixed_us``) and, with the model and its inputs' shapes, each
    phase's ops replayed at both batches (``cpu_op_factors``)."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    notes = []
    try:
        fixed = calibrate.cpu_op_fixed_us()
        given["cpu_fixed_us"] = f"{fixed:.3f}"
        notes.append(f"batch_size: a CPU op costs {fixed:.2f} us whatever its size on this CPU (six common ops timed "
                     "at four sizes; daydream.calibrate.cpu_op_fixed_us): only the rest grows with the batch")
    except DaydreamError as e:
        notes.append(f"batch_size: no fixed CPU op cost measured ({e}); the cpu_saturation_us model is used")
    if model is not None and inputs and "cpu_op_factors" not in given:
        try:
            factor = float(given.get("factor", "2"))
            times = calibrate.batch_cpu_phase_times(model, inputs, factor)
        except (DaydreamError, ValueError) as e:
            notes.append(f"batch_size: the model's ops not replayed at the new batch ({e})")
        else:
            spread = _spread_phase_change(graph, times, given)
            if spread:
                notes.append(f"batch_size: every op of the model's forward and backward replayed on this CPU at the "
                             f"recorded batch and at x{factor:g} (inputs' first dimension): " + spread
                             + " (daydream.calibrate.batch_cpu_phase_times)")
    return notes


def _fused_cpu_step(optimizer: Any, given: Dict[str, str]) -> Optional[str]:
    """fused_optimizer on a CPU-only graph whose optimizer is known: the
    fused / unfused step time measured on this CPU at its parameters' shapes."""
    from . import calibrate  # noqa: PLC0415 - needs torch

    if getattr(optimizer, "defaults", {}).get("fused"):
        return None  # already fused: the pass says so
    try:
        factor = calibrate.fused_optimizer_cpu_factor(optimizer)
    except DaydreamError as e:
        return f"fused_optimizer: no measured step factor ({e}); the pass's operator and bandwidth model is used"
    given["cpu_step_factor"] = f"{factor:.4f}"
    n = sum(len(g["params"]) for g in optimizer.param_groups)
    return (f"fused_optimizer: {type(optimizer).__name__}(fused=True) steps its {n} parameters (their shapes, "
            f"fresh values) in {factor:.2f}x the time of the recorded configuration on this CPU "
            "(daydream.calibrate.fused_optimizer_cpu_factor)")


# The passes _calibrate may time ops for on this CPU, given a CPU-only graph and no model.
_TIMED_ON_CPU = ("amp", "batch_size", "op_fusion")


def _cpu_only(graph: Graph) -> bool:
    return all(r["kind"] != "gpu_stream" for r in graph.resources())


def _calibrate(graph: Graph, requests: List[Tuple[str, Dict[str, str]]], model: Any = None,
               optimizer: Any = None, inputs: Any = None, step_times_ms: Sequence[float] = (),
               memo: Optional[Dict[Any, Tuple[Dict[str, str], List[str]]]] = None, network: Any = None) -> List[str]:
    """Fills in what must be measured on this machine or read from the model:
    amp on a CPU-only graph gets the CPU's measured bf16/fp32 factors,
    batch_size a CPU op's fixed cost, fused_optimizer the fused/unfused step
    ratio of a known optimizer, op_fusion of a known model its phases'
    change under torch.compile;
    data_parallel of a known model the bytes of buffers DDP broadcasts,
    DDP's own CPU work on it and, on a CPU, how much slower it runs beside
    the other ranks;
    data_parallel and tensor_fusion of a step timed by a Profiler the wait
    for the slowest rank. ``inputs``: the model's recorded input tensors
    (``Profiler.model_input_values``); ``network``: a calibration given as
    ``network=``, whose DDP CPU work stands in where none is measured on the
    model."""
    notes: List[str] = []
    shapes = [(tuple(a.shape), a.dtype) for a in inputs] if inputs else None
    cpu_only = _cpu_only(graph)
    for name, given in requests:
        # ``memo`` (one per predict_many): a pass asked for with the same
        # options in several variants is measured once, and every variant
        # compares against the same measurement.
        key = (name, tuple(sorted(given.items())))
        if memo is not None and key in memo:
            added, said = memo[key]
            given.update(added)
            notes += said
            continue
        before = dict(given)
        said = _calibrate_request(graph, name, given, cpu_only, model, optimizer, inputs, shapes, step_times_ms,
                                  network if _takes_calibration(name, given) else None)
        if memo is not None:
            memo[key] = ({k: v for k, v in given.items() if before.get(k) != v}, said)
        notes += said
    return notes


def _calibrate_request(graph: Graph, name: str, given: Dict[str, str], cpu_only: bool, model: Any,
                       optimizer: Any, inputs: Any, shapes: Any, step_times_ms: Sequence[float],
                       network: Any = None) -> List[str]:
    """_calibrate for one requested pass: fills ``given``, returns the notes."""
    notes: List[str] = []
    if name == "amp" and cpu_only and "cpu_gemm_factor" not in given and "cpu_op_factors" not in given:
        notes.append(_calibrate_amp_cpu(graph, given, model, shapes))
    if name == "batch_size" and cpu_only and not {"cpu_fixed_us", "cpu_saturation_us"} & set(given):
        notes += _calibrate_batch_cpu(graph, given, model, shapes)
    if name == "op_fusion" and cpu_only and "cpu_op_factors" not in given:
        note = _calibrate_op_fusion_cpu(graph, given, model, inputs)
        if note:
            notes.append(note)
    if name == "fused_optimizer" and cpu_only and optimizer is not None and "cpu_step_factor" not in given:
        note = _fused_cpu_step(optimizer, given)
        if note:
            notes.append(note)
    if name == "data_parallel" and model is not None and "buffer_bytes" not in given:
        note = _buffer_broadcast(model, given)
        if note:
            notes.append(note)
    if name == "data_parallel" and not set(_DDP_CPU_OPTIONS) & set(given):
        if cpu_only and model is not None and inputs:
            notes.append(_ddp_cpu_on_model(model, inputs, given, network))
        elif network is not None:
            notes.append(_ddp_cpu_from_calibration(network, given))
    if name == "data_parallel" and cpu_only and model is not None and inputs and "cpu_factor" not in given:
        note = _corun_on_model(model, inputs, given)
        if note:
            notes.append(note)
    if name in ("data_parallel", "tensor_fusion") and "straggler_us" not in given:
        note = _straggler(name, graph, given, step_times_ms)
        if note:
            notes.append(note)
    return notes


def _overhead_notes(graph: Graph, fitted: Any = None) -> List[str]:
    """What daydream.Profiler took out of the graph: the profiler's own cost
    (``fitted``: the Profiler's ProfilerOverhead, when it was fitted to the
    step timed without the profiler)."""
    o = graph.profiler_overhead
    if o["records"] <= 0:
        return []
    iterations = max(1, len(graph.iterations))
    shapes = f" + {o['per_input_ns'] / 1e3:.2f} us per recorded input" if o.get("per_input_ns") else ""
    how = "measured on this machine by daydream.calibrate.profiler_overhead"
    if fitted is not None and fitted.fit_text():
        how += "; " + fitted.fit_text()
    return [f"profiler overhead removed: {o['removed_ms'] / iterations:.3f} ms per iteration "
            f"({o['records'] / iterations:.0f} records at {(o['begin_ns'] + o['end_ns']) / 1e3:.2f} us{shapes}, "
            f"module hooks {o['module_hook_ns'] / 1e3:.2f} us, gradient hooks {o['grad_hook_ns'] / 1e3:.2f} us; "
            f"{how}): replayed and predicted times are of the step without a profiler, measured_ms is the "
            "profiled one"]


def _critical_path_changes(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    kinds = set(before["by_kind_ms"]) | set(after["by_kind_ms"])
    changes = {k: (before["by_kind_ms"].get(k, 0.0), after["by_kind_ms"].get(k, 0.0)) for k in kinds}
    ordered = dict(sorted(changes.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0])))
    return {"before": before, "after": after, "changes_ms": {k: v for k, v in ordered.items() if v[0] != v[1]}}


def predict(
    subject: Any,
    opt: OptSpec = (),
    *,
    inputs: Any = None,
    target: Any = None,
    loss_fn: Optional[Callable[..., Any]] = None,
    optimizer: Any = None,
    warmup: int = 2,
    active: int = 3,
    **options: Any,
) -> Prediction:
    """Predicts one training iteration after the optimizations in ``opt``.

    ``subject`` is what to predict for: an ``nn.Module`` (profiled on its
    device with ``inputs=``, optional ``target=``, ``loss_fn=``,
    ``optimizer=``), a callable that runs one training step, a
    :class:`Graph`, a trace path, or a :class:`daydream.Profiler`.
    ``opt`` is a pass name or a list, each optionally with options
    (``"tensor_fusion:bucket_mb=25"``); other keyword arguments go to every
    requested pass that takes them. ``daydream.passes()`` lists them.
    For a model (an ``nn.Module``, or a Profiler given ``model=``),
    ``data_parallel`` gets ``buffer_bytes`` from its buffers, which DDP
    broadcasts before every forward.
    ``network=`` takes a preset's name (``"ib100"``) or what
    :func:`daydream.calibrate_network` measured: each ``data_parallel`` and
    ``tensor_fusion`` request that names no network of its own then gets
    the options the calibration sets for it (``NetworkCalibration.options``)
    where the request does not give them (data_parallel's DDP CPU work only
    where it is not measured on the model), and the prediction's notes
    carry the calibration's ``caveats()``.

    Example::

        pred = daydream.predict("trace.json.gz", opt="data_parallel", world_size=8, network="ib100")
        print(pred)
    """
    recorded = _baseline(subject, inputs, target, loss_fn, optimizer, warmup, active)
    return _predict_recorded(subject, recorded, opt, options, None, None)


def _predict_recorded(subject: Any, recorded: Any, opt: OptSpec, options: Dict[str, Any],
                      scratch: Optional[Any], memo: Optional[Dict[Any, Any]]) -> Prediction:
    """:func:`predict` once the baseline is recorded or read; in ``scratch``
    (a ``_core.PredictScratch``) the prediction keeps no graph or schedule;
    ``memo``, the calibrations of a search so far (see ``_calibrate``)."""
    requests = _requests(opt, options)
    graph = recorded if isinstance(recorded, Graph) else recorded.graph
    model = subject if _is_module(subject) else getattr(recorded, "model", None)
    capture = [recorded.speed_drift(), recorded.tries_note()] if hasattr(recorded, "speed_drift") else []
    calibration_notes = [n for n in capture if n] + _overhead_notes(graph, getattr(recorded, "overhead", None))
    net = _network_calibration(options)
    calibration_notes += _calibration_notes(requests, net)
    calibration_notes += _calibrate(
        graph, requests, model, getattr(recorded, "optimizer", None), getattr(recorded, "model_input_values", None),
        getattr(recorded, "plain_step_times_ms", ()), memo, net)
    calibration_notes += _recorded_cpu_waits(graph, requests, getattr(recorded, "recorded_cpu_wait_ms", None),
                                             getattr(recorded, "plain_cpu_wait_after_forward_ms", None))
    baseline = api._baseline_replays.get(graph)
    result = _core.predict(graph, requests, baseline, scratch)
    if baseline is None:
        api._baseline_replays[graph] = result.baseline_schedule
    labels = [name + (":" + ",".join(f"{k}={v}" for k, v in given.items()) if given else "")
              for name, given in requests]
    return Prediction(
        opts=labels,
        measured_ms=result.measured_ms,
        replayed_ms=result.replayed_ms,
        predicted_ms=result.predicted_ms,
        speedup=result.speedup,
        iterations=list(result.iterations),
        notes=calibration_notes + list(result.notes),
        before=dict(result.before),
        after=dict(result.after),
        critical_path=_critical_path_changes(result.critical_path_before, result.critical_path_after),
        baseline=graph,
        graph=result.predicted_graph,
        _result=result,
    )


def predict_many(
    subject: Any,
    opts: Sequence[OptSpec],
    *,
    threads: Optional[int] = None,
    keep_graphs: bool = False,
    inputs: Any = None,
    target: Any = None,
    loss_fn: Optional[Callable[..., Any]] = None,
    optimizer: Any = None,
    warmup: int = 2,
    active: int = 3,
    return_errors: bool = False,
    **options: Any,
) -> List[Any]:
    """Predicts each entry of ``opts`` from one baseline: a what-if search.

    ``subject`` and the keyword arguments are as for :func:`predict`; each
    entry of ``opts`` is what :func:`predict` takes as ``opt`` (a pass, or a
    list of passes applied together). The baseline is recorded or read once
    and replayed once; each variant copies the graph, runs its passes and
    replays the copy. From a Graph or a trace file the variants run on
    ``threads`` threads at once (default: one per CPU this process may use;
    the C++ work releases the GIL; each thread holds a copy of the graph);
    for a recorded model, or passes that time ops on this CPU first (amp,
    batch_size, op_fusion on a CPU-only graph), they run one after another,
    so that nothing runs beside a measurement; a pass asked
    for with the same options in several variants is measured once, so the
    variants compare against one measurement. Results come back in the
    order of ``opts``; the first error is raised, and the variants not yet
    started are not run. With ``return_errors`` (as ``asyncio.gather``'s
    ``return_exceptions``), a variant that fails with a
    :class:`DaydreamError` (an option out of range, a pass that does not
    apply to this graph) comes back in its place as that error, and the
    others still run; an error reading or recording the baseline is raised
    either way.

    Each predicted graph is about as large as the baseline, so unless
    ``keep_graphs`` is true the results drop theirs (``graph`` is None and
    ``timeline()`` raises): predict the variant you choose again with
    :func:`predict` to look at its schedule.

    Example::

        preds = daydream.predict_many("trace.json.gz", [f"scale:gpu={f}" for f in (0.5, 0.6, 0.7, 0.8)])
        best = min(preds, key=lambda p: p.predicted_ms)

        got = daydream.predict_many(graph, ["amp", "tensor_fusion:bucket_mb=25"], return_errors=True)
        fine = [p for p in got if not isinstance(p, daydream.DaydreamError)]
    """
    if isinstance(opts, str):
        raise DaydreamError(f"predict_many: opts is a list with one optimization per variant, got the string "
                            f"'{opts}' (for one prediction, use daydream.predict)")
    specs = list(opts)
    if threads is not None and threads < 1:
        raise DaydreamError(f"predict_many: threads must be at least 1, got {threads}")
    if not specs:
        return []
    recorded = _baseline(subject, inputs, target, loss_fn, optimizer, warmup, active)

    # Without keep_graphs each thread predicts in a scratch of its own, whose
    # memory the next variant reuses (fresh memory was a quarter of a search's
    # time on a 1 M-task graph).
    scratches = threading.local()
    memo: Dict[Any, Any] = {}  # a pass asked for with the same options in several variants is calibrated once

    def one(spec: OptSpec) -> Prediction:
        scratch = None
        if not keep_graphs:
            scratch = getattr(scratches, "scratch", None)
            if scratch is None:
                scratch = scratches.scratch = _core.PredictScratch()
        pred = _predict_recorded(subject, recorded, spec, options, scratch, memo)
        if not keep_graphs:
            pred._result = None
        return pred

    def attempt(spec: OptSpec) -> Any:
        try:
            return one(spec)
        except DaydreamError as e:
            if not return_errors:
                raise
            return e

    def timed_here(spec: OptSpec) -> bool:
        try:
            return any(name in _TIMED_ON_CPU for name, _ in _requests(spec, options))
        except DaydreamError:
            if not return_errors:
                raise
            return False  # it fails again where it runs, and comes back as its error

    # The first that succeeds replays the baseline; the others reuse that replay.
    results: List[Any] = []
    for spec in specs:
        results.append(attempt(spec))
        if not isinstance(results[-1], DaydreamError):
            break
    rest = specs[len(results):]
    workers = min(threads or api.usable_cpus(), len(rest))
    # Nothing runs beside a calibration that times ops on this CPU.
    sequential = workers <= 1 or not isinstance(recorded, Graph) or (
        _cpu_only(recorded) and any(timed_here(spec) for spec in specs))
    if sequential:
        return results + [attempt(spec) for spec in rest]
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - only a search needs it

    with ThreadPoolExecutor(max_workers=workers) as pool:
        # map's iterator cancels the variants not yet started when one raises (or on an interrupt).
        return results + list(pool.map(attempt, rest))
