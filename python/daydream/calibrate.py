"""Calibrations measured on this machine, for passes whose factors depend on
the hardware: the CPU's bf16 speed for ``amp`` on CPU-only graphs, and the
network of the communication backend in use for ``data_parallel``,
``tensor_fusion`` and ``p3``.

Example::

    factors = daydream.calibrate.amp_cpu_op_factors(graph)  # per op, at its recorded shapes
    daydream.predict(graph, opt="amp", cpu_op_factors=daydream.calibrate.format_op_factors(factors))
    ratio = daydream.calibrate.amp_cpu_ratio()   # one bf16/fp32 ratio for GEMMs here (the fallback)
    daydream.predict(graph, opt=f"amp:cpu_gemm_factor={ratio}")

    net = daydream.calibrate_network()           # gloo between 2 local processes
    daydream.predict(graph, opt="data_parallel", world_size=2, **net.options())
    daydream.predict(ddp_graph, opt="tensor_fusion", world_size=2, **net.options("tensor_fusion"))
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import inspect
import json
import logging
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _core, api
from ._core import DaydreamError, Graph

_log = logging.getLogger(__name__)


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover
        raise DaydreamError("calibration needs PyTorch: pip install torch") from e
    return torch


@functools.lru_cache(maxsize=None)
def amp_cpu_ratio(sizes: Sequence[Tuple[int, int, int]] = ((64, 256, 256), (256, 512, 512), (32, 1024, 1024)),
                  repeats: int = 10) -> float:
    """bf16-autocast time / fp32 time of matrix multiplies on this CPU (median
    over a few GEMM shapes, including autocast's casts of the operands).

    Below 1 the CPU has fast bf16 (AVX512-BF16, AMX); above 1 bf16 is
    emulated and ``amp`` on CPU makes GEMMs slower. Cached per process.
    """
    torch = _torch()
    ratios = []
    with torch.no_grad():
        for m, k, n in sizes:
            a = torch.randn(m, k)
            b = torch.randn(k, n)

            def fp32() -> Any:
                return torch.mm(a, b)

            def bf16() -> Any:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return torch.mm(a, b)

            bf16_s, fp32_s = _paired_median_times([bf16, fp32], repeats, budget_s=math.inf)
            ratios.append(bf16_s / fp32_s)
    return float(statistics.median(ratios))


def _timed_rounds(repeats: int, budget_s: float, min_s: float = 0.0, min_rounds: int = 3) -> Iterator[int]:
    """Round numbers 0, 1, ...: ``repeats`` of them, more until ``min_s``
    seconds have passed since the first, fewer (``min_rounds`` at least) once
    ``budget_s`` have."""
    start = time.perf_counter()
    r = 0
    while True:
        elapsed = time.perf_counter() - start
        if (r >= repeats and elapsed >= min_s) or (r >= min_rounds and elapsed > budget_s):
            return
        yield r
        r += 1


def _paired_median_times(fns: Sequence[Callable[[], Any]], repeats: int, budget_s: float = 1.0,
                         min_s: float = 0.0) -> List[float]:
    """Median time of each of ``fns``, run in turn within every repeat so that
    load bursts on a shared machine hit them alike. Slow ones stop repeating
    after 3 repeats once they have taken ``budget_s`` (a bf16 convolution
    emulated on a CPU without bf16 can take 50 ms a call); fast ones go on
    past ``repeats`` until they have taken ``min_s``."""
    for fn in fns:
        for _ in range(2):
            fn()
    times: List[List[float]] = [[] for _ in fns]
    for _ in _timed_rounds(repeats, budget_s, min_s):
        for fn, out in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _line_fit(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float]:
    """Least-squares y = a + b x with a, b >= 0 (a negative one is set to 0
    and the other refitted alone)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    a = my - b * mx
    if b < 0:
        return max(my, 0.0), 0.0
    if a < 0:
        sxx0 = sum(x * x for x in xs)
        return 0.0, max(sum(x * y for x, y in zip(xs, ys)) / sxx0, 0.0) if sxx0 > 0 else 0.0
    return a, b


# The CPU ops whose bf16 cost amp_cpu_op_factors measures: the GEMMs,
# convolutions and attention torch.autocast("cpu") runs in bf16, as they
# appear as leaf ops of a recorded fp32 step, forward and backward (the
# backward of a bf16 op gets bf16 gradients and runs in bf16 too).
AMP_REPLAYED_OPS = (
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm",
    "aten::mkldnn_convolution", "aten::convolution_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
)
_FLOAT_TYPES = ("float", "double", "c10::BFloat16", "c10::Half")
_INT_TYPES = {"long int": "int64", "int": "int32", "bool": "bool"}
# Inputs that stay fp32 when the op runs in bf16: flash attention's logsumexp.
_FP32_INPUTS = {"aten::_scaled_dot_product_flash_attention_for_cpu_backward": (5,)}


@dataclasses.dataclass(frozen=True)
class RecordedOp:
    """One CPU op as the profiler recorded it with ``record_shapes=True``: its
    name, the phase of its graph task, and per input the Kineto "Input Dims",
    "Input type", "Input Strides" and "Concrete Inputs" entries."""

    name: str
    phase: str
    dims: Tuple[Any, ...]
    types: Tuple[str, ...]
    strides: Tuple[Any, ...]
    concrete: Tuple[str, ...]

    @staticmethod
    def from_event(event: Dict[str, Any], phase: str) -> "RecordedOp":
        args = event.get("args", {})
        dims = args.get("Input Dims") or []
        n = len(dims)

        def column(key: str, fill: Any) -> Tuple[Any, ...]:
            values = list(args.get(key) or [])
            return tuple(_frozen(v) for v in (values + [fill] * n)[:n])

        return RecordedOp(event["name"], phase, tuple(_frozen(d) for d in dims), column("Input type", ""),
                          column("Input Strides", []), column("Concrete Inputs", ""))

    def weight_inputs(self) -> List[int]:
        """Indexes of the inputs that are a module's parameters, which autocast
        casts to bf16 once per forward (and their gradients back to fp32 in
        backward): a forward linear's transposed weight (addmm's mat2 or mm's,
        column-major, as F.linear passes weight.t()) with addmm's bias, and a
        convolution's weight and bias."""
        if self.phase != "forward":
            return []
        if self.name == "aten::mkldnn_convolution":
            return [i for i in (1, 2) if i < len(self.dims) and self._is_float_tensor(i)]
        mat2 = {"aten::addmm": 2, "aten::mm": 1}.get(self.name)
        if mat2 is None or mat2 >= len(self.dims) or len(self.dims[mat2]) != 2:
            return []
        rows = self.dims[mat2][0]
        if tuple(self.strides[mat2]) != (1, rows) or self.dims[mat2][1] == 1:
            return []
        return [0, mat2] if self.name == "aten::addmm" and self._is_float_tensor(0) else [mat2]

    def _is_float_tensor(self, i: int) -> bool:
        return self.types[i] in _FLOAT_TYPES and isinstance(self.dims[i], tuple) and len(self.dims[i]) > 0


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _scalar(text: str, kind: str) -> Any:
    """A Kineto "Concrete Inputs" entry: "1", "0.1", "True", "[1, 1]", "[True, False]"."""
    text = text.strip()
    if text in ("", "None"):
        return None
    if kind == "ScalarList":
        return [_scalar(t, "Scalar") for t in text.strip("[]").split(",") if t.strip()]
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return float(text)


def _tensor(torch: Any, dims: Sequence[int], strides: Sequence[int], dtype: Any) -> Any:
    """A tensor of ``dims`` laid out with ``strides`` (contiguous when they
    are not recorded), random where floating."""
    if strides and len(strides) == len(dims):
        t = torch.empty_strided(list(dims), list(strides), dtype=dtype)
    else:
        t = torch.empty(list(dims), dtype=dtype)
    return t.copy_(torch.rand(t.shape)) if t.is_floating_point() else t.zero_()


def _replay_args(torch: Any, op: RecordedOp, dtype: Any) -> List[Any]:
    """Inputs for ``op`` rebuilt from its record, floating tensors in ``dtype``.
    Raises ValueError for an op not recorded in fp32 (a step already in mixed
    precision has nothing for amp to change)."""
    args: List[Any] = []
    for i, (dims, kind, strides, concrete) in enumerate(zip(op.dims, op.types, op.strides, op.concrete)):
        if i in _FP32_INPUTS.get(op.name, ()) and kind in _FLOAT_TYPES:
            args.append(_tensor(torch, dims, strides, torch.float32))
        elif kind in ("Scalar", "ScalarList"):
            args.append(_scalar(concrete, kind))
        elif kind == "":
            args.append(None)
        elif kind in _FLOAT_TYPES and kind != "float":
            raise ValueError(f"input {i} was recorded in {kind}, not fp32")
        elif kind in _FLOAT_TYPES or kind in _INT_TYPES:
            args.append(_tensor(torch, dims, strides, dtype if kind in _FLOAT_TYPES else
                                getattr(torch, _INT_TYPES[kind])))
        else:
            raise ValueError(f"input type '{kind}'")
    return args


def _replay_call(torch: Any, op: RecordedOp, args: List[Any]) -> Callable[[], Any]:
    """What autocast runs for ``op``: the recorded aten op itself, except that
    a recorded oneDNN convolution is replayed as aten::convolution, which picks
    its backend by dtype (bf16 may not take the oneDNN path)."""
    if op.name == "aten::mkldnn_convolution":
        x, w, b, padding, stride, dilation, groups = args
        return lambda: torch.ops.aten.convolution(x, w, b, stride, padding, dilation, False, [0] * len(stride),
                                                  groups)
    fn = getattr(torch.ops.aten, op.name.split("::", 1)[1]).default
    # The profiler records keyword-only arguments (addmm's beta and alpha) in
    # schema order, like the positional ones.
    schema = fn._schema.arguments
    positional = [a for a, s in zip(args, schema) if not s.kwarg_only]
    keywords = {s.name: a for a, s in zip(args, schema) if s.kwarg_only}
    return lambda: fn(*positional, **keywords)


def amp_op_factor(op: RecordedOp, repeats: int = 20) -> float:
    """bf16-autocast time / fp32 time of one recorded op on this CPU: the op
    replayed at its recorded shapes in fp32 and in bf16, plus, for a forward
    op, autocast's casts of its weights to bf16 and of their gradients back to
    fp32 (:meth:`RecordedOp.weight_inputs`). Raises ValueError or
    RuntimeError when the op cannot be replayed."""
    torch = _torch()
    with torch.no_grad():
        fp32 = _replay_call(torch, op, _replay_args(torch, op, torch.float32))
        bf16 = _replay_call(torch, op, _replay_args(torch, op, torch.bfloat16))
        fns = [fp32, bf16]
        for i in op.weight_inputs():
            w = _tensor(torch, op.dims[i], (), torch.float32)
            w16 = w.to(torch.bfloat16)
            fns += [lambda w=w: w.to(torch.bfloat16), lambda w16=w16: w16.to(torch.float32)]
        times = _paired_median_times(fns, repeats)
    return (times[1] + sum(times[2:])) / times[0]


def _trace_events(path: str) -> List[Dict[str, Any]]:
    """The events of a Kineto JSON trace that daydream's reader numbers (its
    Task.trace_event): complete and instant events, in file order."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise DaydreamError(f"{path}: cannot read the trace the graph was built from: {e}") from e
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict) and e.get("ph") in ("X", "i", "I")]


def recorded_amp_ops(graph: Graph) -> Dict[int, RecordedOp]:
    """The forward and backward CPU ops of ``graph`` whose bf16 cost
    :func:`amp_cpu_op_factors` measures (:data:`AMP_REPLAYED_OPS`), by trace
    event, read from the trace the graph was built from (``graph.source``,
    recorded with shapes, as :class:`daydream.Profiler` records).

    Raises DaydreamError when that trace cannot be read or does not match the graph."""
    wanted: Dict[int, str] = {}
    for i in range(graph.num_tasks):
        t = graph.task(i)
        if t["kind"] == "cpu_op" and t["phase"] in ("forward", "backward") and t["name"] in AMP_REPLAYED_OPS:
            if t["trace_event"] >= 0:
                wanted[int(t["trace_event"])] = t["phase"]
    if not wanted:
        return {}
    events = _trace_events(graph.source)
    out: Dict[int, RecordedOp] = {}
    for index, phase in sorted(wanted.items()):
        event = events[index] if index < len(events) else None
        if event is None or event.get("name") not in AMP_REPLAYED_OPS:
            raise DaydreamError(f"{graph.source}: event {index} is not the op the graph's task names; was the "
                                "trace rewritten after the graph was built?")
        if "Input Dims" in event.get("args", {}):
            out[index] = RecordedOp.from_event(event, phase)
    return out


def amp_cpu_op_factors(graph: Graph, repeats: int = 20) -> Dict[int, float]:
    """bf16-autocast / fp32 time factor of every matmul, convolution and
    attention op of ``graph``'s forward and backward, by trace event: each
    distinct op (name, phase, shapes, strides, scalar arguments) is replayed
    once on this CPU (:func:`amp_op_factor`). Ops without recorded shapes or
    that cannot be replayed get no factor. The ``amp`` pass takes the result
    as its ``cpu_op_factors`` option (:func:`format_op_factors`).

    Example::

        factors = daydream.calibrate.amp_cpu_op_factors(prof.graph)
    """
    ops = recorded_amp_ops(graph)
    by_op: Dict[RecordedOp, Optional[float]] = {}
    out: Dict[int, float] = {}
    for event, op in ops.items():
        if op not in by_op:
            try:
                by_op[op] = amp_op_factor(op, repeats)
            except (ValueError, RuntimeError, TypeError) as e:
                _log.info("amp: %s %s not replayed: %s", op.name, list(op.dims), e)
                by_op[op] = None
        factor = by_op[op]
        if factor is not None:
            out[event] = factor
    return out


def _symbolic_step_ops(model: Any, inputs: Sequence[Tuple[Tuple[int, ...], Any]], autocast: bool
                       ) -> List[Tuple[str, Any, Any, Any]]:
    """Every aten op a forward and backward of ``model`` would run, with its
    arguments, found without computing: a copy of the model on
    ``FakeTensorMode`` tensors runs on fake inputs of ``inputs``' shapes and
    dtypes (its output summed in fp32 for the backward), under
    ``torch.autocast("cpu", torch.bfloat16)`` when ``autocast``, while a
    ``TorchDispatchMode`` logs (phase, op, args, kwargs)."""
    import copy  # noqa: PLC0415

    torch = _torch()
    from torch._subclasses.fake_tensor import FakeCopyMode, FakeTensorMode  # noqa: PLC0415
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: PLC0415

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.phase = "forward"
            self.ops: List[Tuple[str, Any, Any, Any]] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func.namespace == "aten":
                self.ops.append((self.phase, func, args, kwargs))
            return out

    mode = FakeTensorMode()
    with FakeCopyMode(mode):
        fake_model = copy.deepcopy(model)
    log = Log()
    with mode:
        xs = [torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.zeros(shape, dtype=dtype)
              for shape, dtype in inputs]
        with log:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = fake_model(*xs)
            while not isinstance(out, torch.Tensor):  # the first tensor of a tuple, list or dict output
                out = next(iter(out.values() if isinstance(out, dict) else out))
            loss = out.float().sum()
            log.phase = "backward"
            loss.backward()
    return log.ops


def _real_tensor(torch: Any, t: Any) -> Any:
    """A real tensor laid out like the fake ``t`` (expanded strides kept),
    values in [0.5, 1) where floating (valid for logs, roots and divisions),
    zeros otherwise (valid indices)."""
    storage = 1 + sum((d - 1) * st for d, st in zip(t.shape, t.stride())) if t.numel() else 0
    base = torch.empty(storage, dtype=t.dtype)
    base = base.uniform_(0.5, 1.0) if base.is_floating_point() else base.zero_()
    return base.as_strided(tuple(t.shape), tuple(t.stride()))


def _replay(calls: List[Callable[[], Any]], autocast: bool) -> Callable[[], None]:
    """One call that runs ``calls`` in order without autograd, and under
    ``torch.autocast("cpu", torch.bfloat16)`` when ``autocast``: a forward
    logged under autocast is replayed under it too. Its ops are already in
    the dtypes autocast chose (its casts are ops of the list), so it changes
    no computation, but every op pays autocast's dispatch as in the real
    forward (40 us over the small transformer's 122 forward ops here)."""
    torch = _torch()

    def all_of_them() -> None:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            for c in calls:
                c()
    return all_of_them


def _phase_times(model: Any, runs: Sequence[Tuple[Sequence[Tuple[Tuple[int, ...], Any]], bool]], who: str,
                 repeats: int, max_bytes: int) -> Dict[str, Tuple[float, float]]:
    """(ms of the first run, ms of the second) per phase (forward, backward):
    each run is (inputs, autocast) for :func:`_symbolic_step_ops`, and every
    op it lists is replayed on real tensors of its shapes, strides and dtypes
    (:func:`_real_tensor`), the two lists in turn, ``repeats`` times; ops that
    cannot be replayed alone are left out of their list. Raises
    DaydreamError when the model cannot run on fake tensors, or the replay
    would hold more than ``max_bytes`` of op inputs (each op has its own)."""
    torch = _torch()
    from torch.utils._pytree import tree_leaves, tree_map  # noqa: PLC0415

    logs = []
    for inputs, autocast in runs:
        try:
            logs.append(_symbolic_step_ops(model, inputs, autocast))
        except Exception as e:  # noqa: BLE001 - any model the fake run cannot take falls back
            raise DaydreamError(f"{who}: {type(model).__name__} cannot run on fake tensors: "
                                f"{type(e).__name__}: {e}") from e
    needed = sum(a.numel() * a.element_size() for ops in logs for _, _, args, kwargs in ops
                 for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor))
    if needed > max_bytes:
        raise DaydreamError(f"{who}: replaying {type(model).__name__}'s ops would hold "
                            f"{needed / 2**30:.1f} GiB of inputs (max_bytes {max_bytes / 2**30:.1f} GiB)")
    lists: List[Dict[str, List[Callable[[], Any]]]] = []
    for ops in logs:
        calls: Dict[str, List[Callable[[], Any]]] = {"forward": [], "backward": []}
        for phase, func, args, kwargs in ops:
            if phase not in calls:
                continue
            real = tree_map(lambda a: _real_tensor(torch, a) if isinstance(a, torch.Tensor) else a, (args, kwargs))

            def call(func: Any = func, real: Any = real) -> Any:
                return func(*real[0], **real[1])

            try:
                with torch.no_grad():
                    call()
            except Exception:  # noqa: BLE001, S112 - an op that needs real values (or fails alone) is left out
                continue
            calls[phase].append(call)
        lists.append(calls)

    out = {}
    for phase in ("forward", "backward"):
        first, second = lists[0][phase], lists[1][phase]
        if first and second:
            under = [autocast and phase == "forward" for _, autocast in runs]
            # At least a second of both: an emulated bf16 matmul's speed moves
            # by half from one tenth of a second to the next on a CPU without
            # bf16 (docs/accuracy.md), and 15 repeats of 20 ms saw one speed.
            a_s, b_s = _paired_median_times([_replay(first, under[0]), _replay(second, under[1])], repeats,
                                            budget_s=2.0, min_s=1.0)
            out[phase] = (a_s * 1e3, b_s * 1e3)
    return out


def amp_cpu_phase_times(model: Any, inputs: Sequence[Tuple[Tuple[int, ...], Any]], repeats: int = 15,
                        max_bytes: int = 1 << 30) -> Dict[str, Tuple[float, float]]:
    """(bf16-autocast ms, fp32 ms) of ``model``'s forward and of its backward
    on this CPU, per phase, the ops themselves (called one after another,
    without the model's Python between them): every aten op each would run
    (:func:`_symbolic_step_ops`, once under ``torch.autocast("cpu",
    torch.bfloat16)``, once in fp32: the casts autocast inserts, and the
    elementwise ops and normalizations that then run on bf16 tensors, are in
    the first) is replayed on real tensors of its shapes, strides and dtypes
    (:func:`_phase_times`). ``inputs`` are the shapes and dtypes of the
    model's positional inputs (``daydream.Profiler.model_inputs``). A model
    whose replay would hold more than ``max_bytes`` of op inputs is not
    replayed.

    Raises DaydreamError when the model cannot run on fake tensors, or its
    replay would take more than ``max_bytes``.

    Example::

        daydream.calibrate.amp_cpu_phase_times(model, [((32, 64), torch.float32)])   # {"forward": (0.4, 0.5), ...}
    """
    return _phase_times(model, [(inputs, True), (inputs, False)], "amp_cpu_phase_times", repeats, max_bytes)


def batch_cpu_phase_times(model: Any, inputs: Sequence[Tuple[Tuple[int, ...], Any]], factor: float,
                          repeats: int = 15, max_bytes: int = 1 << 30) -> Dict[str, Tuple[float, float]]:
    """(ms at the new batch, ms at the recorded one) of ``model``'s forward
    and of its backward on this CPU, per phase: the ops each runs with every
    input's first dimension (the batch) times ``factor``, and as recorded,
    replayed like :func:`amp_cpu_phase_times` (caches and fixed costs
    included, as the ops meet them at their sizes).

    Example::

        daydream.calibrate.batch_cpu_phase_times(model, [((32, 64), torch.float32)], 2.0)
    """
    scaled = [((max(1, round(shape[0] * factor)), *shape[1:]) if shape else shape, dtype) for shape, dtype in inputs]
    return _phase_times(model, [(scaled, False), (inputs, False)], "batch_cpu_phase_times", repeats, max_bytes)


def compile_cpu_phase_times(model: Any, inputs: Sequence[Any], repeats: int = 75,
                            backend: Any = "inductor", round_s: float = 0.01, max_bytes: int = 1 << 30
                            ) -> Dict[str, Tuple[float, float]]:
    """(compiled ms, eager ms) of ``model``'s forward and of its backward on
    this CPU, per phase: two copies of the model, one eager and one under
    ``torch.compile(backend=backend)`` (a name or a backend function), each
    run on the same inputs, with ``.grad`` cleared before every step as
    ``zero_grad`` leaves it. Each of ``inputs`` is a tensor (the batch
    itself, best: compiled code's speed can depend on values such as token
    ids; it is copied) or a (shape, dtype) pair (:func:`_real_tensor`: floats
    in [0.5, 1), integers 0). The forward is the model's call, the backward
    ``autograd.backward`` of its outputs that need a gradient (what a loss
    outside the model adds is the same in both). After three steps each
    (the compilation), ``repeats`` rounds of about ``round_s`` seconds per
    copy (one step at least) alternate between them, so that a slow spell of
    a shared machine hits both; slow steps stop repeating after five rounds
    once each copy has had ``repeats`` x ``round_s`` seconds. Each phase's
    median over the steps is returned. Everything compilation changes is in
    the times: generated kernels (fused normalizations and elementwise ops),
    the framework's Python and autograd nodes it removes, and the guards and
    calls it adds. The model itself is not run or changed.

    Raises DaydreamError when the model is already compiled, cannot be
    copied or run on ``inputs``, torch.compile fails on it, or the two copies
    would take more than ``max_bytes``.

    Example::

        daydream.calibrate.compile_cpu_phase_times(model, [((32, 3, 16, 16), torch.float32)])
        # {"forward": (1.07, 1.38), "backward": (1.42, 1.62)}
    """
    import copy  # noqa: PLC0415

    torch = _torch()
    who = "compile_cpu_phase_times"
    model = _unwrapped(model)
    name = type(model).__name__
    _refuse_compiled(model, who, "the recorded step ran its compiled code")
    _check_copies_fit(model, max_bytes, who)
    try:
        eager = copy.deepcopy(model)
        compiled = torch.compile(copy.deepcopy(model), backend=backend)
    except Exception as e:  # noqa: BLE001 - any model that cannot be copied or wrapped
        raise DaydreamError(f"{who}: {name} cannot be copied and compiled: {type(e).__name__}: {e}") from e
    how = backend if isinstance(backend, str) else getattr(backend, "__name__", "?")
    return _time_two_copies(eager, compiled, f"torch.compile(backend={how!r})", inputs, repeats, round_s, who, name)


def keep_bucket_hook(_state, bucket):  # type: ignore[no-untyped-def]  # DDP refuses other annotations on a hook
    """A DDP communication hook that hands each bucket back as it is: DDP
    then does its own CPU work (its forward wrapper, autograd hooks, the
    copies into each bucket and back, the reducer's bookkeeping) and
    communicates nothing. The DDP CPU calibrations time DDP with it, because
    the ring model's calibration times all-reduces whole, their CPU work
    (handing the bucket to gloo's thread, waking the thread that waits)
    included: timed with an all-reduce over a group of one, that work was
    counted twice: 0.15-0.28 ms of the backward on the accuracy harness's
    models (two calls each)."""
    fut = _torch().futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def ddp_cpu_phase_times(model: Any, inputs: Sequence[Any], repeats: int = 75, round_s: float = 0.01,
                        max_bytes: int = 1 << 30) -> Dict[str, Tuple[float, float]]:
    """(DDP ms, plain ms) of ``model``'s forward and of its backward on this
    CPU, per phase: DDP's own CPU work on this model, as the
    ``data_parallel`` pass's ``ddp_cpu_us`` and ``ddp_cpu_per_gradient_us``
    take it. Two copies of the model, one plain and one wrapped in
    ``DistributedDataParallel`` over a gloo group of this process alone, run
    in turn as :func:`compile_cpu_phase_times` runs its two (``inputs``
    likewise). The difference is DDP's forward wrapper, its autograd hooks,
    the copies into its buckets and back and the reducer's bookkeeping; the
    all-reduce is left out (:func:`keep_bucket_hook`), as the pass's ring
    model covers it whole. The group is this call's own (an in-memory store,
    no port), beside any the process has; the model itself is not run or
    changed.

    Raises DaydreamError when torch.distributed is unavailable, the model is
    not on the CPU, cannot be copied, wrapped or run on ``inputs``, or the
    two copies would take more than ``max_bytes``.

    Example::

        daydream.calibrate.ddp_cpu_phase_times(model, [x])   # {"forward": (0.61, 0.52), "backward": (0.98, 0.71)}
    """
    import copy  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    torch = _torch()
    who = "ddp_cpu_phase_times"
    dist = torch.distributed
    if not dist.is_available():
        raise DaydreamError(f"{who}: this torch has no torch.distributed")
    if not dist.is_gloo_available():
        raise DaydreamError(f"{who}: this torch has no gloo backend")
    model = _unwrapped(model)
    name = type(model).__name__
    _refuse_off_cpu(model, who, ": a gloo group of one process would not time what NCCL does")
    # A compiled model would be compiled again in each copy (and DDP splits compiled graphs).
    _refuse_compiled(model, who, "timing DDP around it would compile it twice")
    # DDP keeps its buckets besides the gradients: a third copy's worth.
    _check_copies_fit(model, max_bytes, who, copies=3)
    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    # Its buffer broadcast before every forward stays out: the pass adds it
    # as a collective (buffer_bytes), network time and all.
    no_sync = ({"forward_sync_buffers": False}
               if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
               else {"broadcast_buffers": False})
    group, done = _private_gloo_group(dist, who)
    plain = ddp = None
    try:
        try:
            plain = copy.deepcopy(model)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ddp = DistributedDataParallel(copy.deepcopy(model), process_group=group, **no_sync)
            ddp.register_comm_hook(None, keep_bucket_hook)
        except Exception as e:  # noqa: BLE001 - any model that cannot be copied or wrapped
            raise DaydreamError(f"{who}: {name} cannot be copied and wrapped in DDP: "
                                f"{type(e).__name__}: {e}") from e
        return _time_two_copies(plain, ddp, "DistributedDataParallel", inputs, repeats, round_s, who, name)
    finally:
        del plain, ddp, group
        done()


@dataclasses.dataclass
class CoRunning:
    """How much slower a model's forward and backward run on this host while
    the other ranks of a data-parallel job run theirs beside it: ``factor``,
    the median over rounds of (this round's median step with the others
    running) / (the adjacent round's alone), the ``data_parallel`` pass's
    ``cpu_factor`` for ranks that share the host; ``noise``: two standard
    errors of that median (from the ratios' median absolute deviation)."""

    factor: float
    noise: float
    alone_ms: float
    together_ms: float
    world_size: int
    threads: int  # torch threads per rank
    processes: int  # helper processes that ran beside this one
    rounds: int  # rounds of each configuration

    @property
    def measurable(self) -> bool:
        """Whether this is a slowdown larger than its noise. Sharing a host
        cannot make a rank faster: a factor under 1 is the host's noise (a
        run of the harness read x0.946 ± 4.2% on a transformer whose medians
        of all steps were 4.712 ms beside a copy and 4.695 ms alone)."""
        return self.factor - self.noise > 1.0

    def describe(self) -> str:
        return (f"one forward and backward took {self.together_ms:.3f} ms with {self.processes} "
                f"cop{'y' if self.processes == 1 else 'ies'} of the model stepping beside it in other processes, "
                f"{self.alone_ms:.3f} ms alone (medians; {self.rounds} interleaved rounds of each): "
                f"x{self.factor:.3f} ± {100 * self.noise:.1f}%")


def _corun_helper(model: Any, xs: Sequence[Any], go: Any, stop: Any, busy: Any, slot: int, parent: int) -> None:
    """A forked helper of :func:`corun_cpu_factor`: steps its own copy of
    ``model`` on one thread while ``go`` is set, saying so in ``busy[slot]``
    (1: stepping, 0: idle, -1: failed); ends with ``stop`` or when its parent
    has gone."""
    import copy  # noqa: PLC0415

    torch = _torch()
    # OpenMP's thread pool does not survive fork: more than one thread here
    # would hang. A rank of T threads is T such helpers.
    torch.set_num_threads(1)
    try:
        # Its own weights and inputs, as another rank has: pages shared with
        # the parent after fork would share the caches too.
        model = copy.deepcopy(model)
        xs = [x.clone() for x in xs]
        while not stop.is_set() and os.getppid() == parent:
            if not go.wait(0.05):
                continue
            busy[slot] = 1
            while go.is_set() and not stop.is_set():
                _fwd_bwd_step(torch, model, xs)
            busy[slot] = 0
    except Exception:  # noqa: BLE001 - the parent reports it
        busy[slot] = -1


def corun_cpu_factor(model: Any, inputs: Sequence[Any], world_size: int = 2, repeats: int = 50,
                     round_s: float = 0.03, timeout_s: float = 60.0, max_bytes: int = 1 << 30) -> CoRunning:
    """How much slower ``model``'s forward and backward run while the other
    ``world_size - 1`` ranks of a data-parallel job on this host run theirs:
    the ``data_parallel`` pass's ``cpu_factor``. Ranks that share a host
    share its memory bandwidth, caches and the cores' shared parts, so each
    may run slower than one process alone.

    A copy of the model steps in this process on ``torch.get_num_threads()``
    threads, alone and with helper processes stepping their own copies beside
    it (forked, so that a model defined in a notebook runs in them too; each
    copies the weights, as another rank has its own): ``(world_size - 1) x
    threads`` helpers of one thread each. Rounds of ``round_s`` seconds
    alternate between the two, ``repeats`` of each, so that a slow spell of a
    shared machine hits both alike; each pair of rounds gives a ratio, and
    the factor is their median. ``inputs`` are the model's positional inputs
    (tensors or (shape, dtype) specs). The model itself is not run or
    changed.

    Raises DaydreamError when the model is not on the CPU or does not run on
    ``inputs``, the ranks' threads would not each have a core here
    (world_size x threads > the cores this process may use: ranks that
    time-slice cores are not what a factor describes), fork is unavailable,
    a helper fails or stops answering within ``timeout_s``, or the copies
    would take more than ``max_bytes``.

    Example::

        daydream.calibrate.corun_cpu_factor(model, [x], world_size=2).factor   # 1.01
    """
    import copy  # noqa: PLC0415
    import multiprocessing  # noqa: PLC0415

    torch = _torch()
    who = "corun_cpu_factor"
    if world_size < 2:
        raise DaydreamError(f"{who}: world_size must be at least 2, got {world_size}")
    model = _unwrapped(model)
    name = type(model).__name__
    _refuse_off_cpu(model, who)
    _refuse_compiled(model, who, "each copy would compile it again")
    threads = torch.get_num_threads()
    cores = api.usable_cpus()
    if world_size * threads > cores:
        raise DaydreamError(f"{who}: {world_size} ranks of {threads} thread(s) need {world_size * threads} cores; "
                            f"this process may use {cores}: ranks that time-slice cores are not what a factor "
                            "describes")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise DaydreamError(f"{who}: this platform cannot fork, and a model defined in a notebook cannot be sent "
                            "to a spawned process")
    helpers = (world_size - 1) * threads
    _check_copies_fit(model, max_bytes, who, copies=2 * (helpers + 1))  # weights and gradients of each
    ctx = multiprocessing.get_context("fork")
    go, stop = ctx.Event(), ctx.Event()
    busy = ctx.Array("i", helpers, lock=False)
    procs: List[Any] = []

    def wait_until(state: int) -> None:
        deadline = time.perf_counter() + timeout_s
        while True:
            states = list(busy)
            if -1 in states:
                raise DaydreamError(f"{who}: a copy of {name} failed in a helper process")
            if all(b == state for b in states):
                return
            ended = [p.exitcode for p in procs if p.exitcode is not None]
            if ended:
                raise DaydreamError(f"{who}: a helper process ended (exit code {ended[0]})")
            if time.perf_counter() > deadline:
                raise DaydreamError(f"{who}: the helper processes did not {'start' if state else 'stop'} "
                                    f"stepping within {timeout_s:g} s")
            time.sleep(0.0002)

    with torch.random.fork_rng(devices=[]):
        mine = copy.deepcopy(model)
        xs = _step_inputs(torch, inputs)
        try:
            for _ in range(3):
                _fwd_bwd_step(torch, mine, xs)
        except Exception as e:  # noqa: BLE001 - a model that does not run on these inputs as they are
            raise DaydreamError(f"{who}: {name} does not run on the recorded inputs "
                                f"({len(xs)} positional tensors): {_first_lines(e)}") from e
        steps = _steps_per_round(torch, mine, xs, round_s)
        times: Dict[bool, List[float]] = {False: [], True: []}
        rounds: Dict[bool, List[float]] = {False: [], True: []}  # each round's median
        try:
            for slot in range(helpers):
                p = ctx.Process(target=_corun_helper, args=(mine, xs, go, stop, busy, slot, os.getpid()),
                                daemon=True)
                try:
                    p.start()
                except (AssertionError, OSError) as e:  # a daemonic process may not have children; no memory
                    raise DaydreamError(f"{who}: no helper process could be started: "
                                        f"{type(e).__name__}: {e}") from e
                procs.append(p)
            # The helpers' first steps allocate and fault in their pages: untimed.
            go.set()
            wait_until(1)
            time.sleep(max(0.2, 10 * round_s / steps))
            for r in _timed_rounds(repeats, budget_s=2 * repeats * round_s + 5, min_rounds=5):
                for together in ((False, True) if r % 2 == 0 else (True, False)):
                    if together:
                        go.set()
                    else:
                        go.clear()
                    wait_until(1 if together else 0)
                    block = []
                    for _ in range(steps):
                        fwd, bwd = _fwd_bwd_step(torch, mine, xs)
                        block.append(fwd + (bwd or 0.0))
                    times[together] += block
                    rounds[together].append(statistics.median(block))
        finally:
            stop.set()
            go.clear()
            for p in procs:
                p.join(timeout=1)  # a step in flight ends; one that does not is cut short
                if p.is_alive():
                    p.kill()
                    p.join()
    ratios = [t / a for a, t in zip(rounds[False], rounds[True])]
    factor = statistics.median(ratios)
    # Two standard errors of the median, from the ratios' median absolute
    # deviation (one round hit by a stall would blow up a standard deviation).
    mad = statistics.median(abs(r - factor) for r in ratios)
    noise = 2 * 1.2533 * 1.4826 * mad / math.sqrt(len(ratios))
    return CoRunning(factor=factor, noise=noise, alone_ms=statistics.median(times[False]) * 1e3,
                     together_ms=statistics.median(times[True]) * 1e3, world_size=world_size, threads=threads,
                     processes=helpers, rounds=len(ratios))


def _private_gloo_group(dist: Any, who: str) -> Tuple[Any, Callable[[], None]]:
    """A gloo process group of this process alone, on an in-memory store (no
    port, no other rank), and what to call when done with it. It is made on
    its own, beside any default group of a DDP job; where this torch cannot
    (its ProcessGroup constructors are not public API), the default group is
    made for the call and destroyed after, which needs none to exist."""
    import gc  # noqa: PLC0415

    torch = _torch()
    store = dist.HashStore()
    try:
        group = dist.ProcessGroup(store, 0, 1)
        backend = dist.ProcessGroupGloo(store, 0, 1)
        group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, backend)
        group._set_default_backend(dist.ProcessGroup.BackendType.GLOO)
    except (AttributeError, TypeError):  # no such constructors in this torch
        pass
    except Exception as e:  # noqa: BLE001 - gloo itself failed (no usable interface, ...)
        raise DaydreamError(f"{who}: no gloo group of one process: {type(e).__name__}: {e}") from e
    else:
        # DDP's copy holds the group in reference cycles: collect them, so
        # that gloo's threads end now rather than at some later collection.
        return group, gc.collect
    if dist.is_initialized():
        raise DaydreamError(f"{who}: a process group already exists in this process (rank "
                            f"{dist.get_rank()} of {dist.get_world_size()}), and this torch makes no group "
                            "of one process beside it")
    try:
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    except Exception as e:  # noqa: BLE001 - gloo itself failed
        raise DaydreamError(f"{who}: no gloo group of one process: {type(e).__name__}: {e}") from e
    return None, dist.destroy_process_group


def _unwrapped(model: Any) -> Any:
    """The module inside a (Distributed)DataParallel wrapper: what a copy
    should hold (a copy of the wrapper would run collectives on this rank
    alone), else the model."""
    if type(model).__name__ in ("DistributedDataParallel", "DataParallel") and hasattr(model, "module"):
        return model.module
    return model


def _refuse_off_cpu(model: Any, who: str, why: str = "") -> None:
    """A DaydreamError when any of the model's parameters or buffers is
    off the CPU; ``why`` follows the message."""
    devices = sorted({str(t.device) for t in (*model.parameters(), *model.buffers())} - {"cpu"})
    if devices:
        raise DaydreamError(f"{who}: {type(model).__name__} is on {', '.join(devices)}, not the CPU{why}")


def _refuse_compiled(model: Any, who: str, why: str) -> None:
    """A DaydreamError for a model torch.compile'd whole (what it returns)
    or in part (``Module.compile()``)."""
    name = type(model).__name__
    if name == "OptimizedModule" and hasattr(model, "_orig_mod"):
        raise DaydreamError(f"{who}: the model is already compiled (torch.compile of "
                            f"{type(model._orig_mod).__name__}): {why}")
    compiled_parts = [n or name for n, m in model.named_modules()
                      if getattr(m, "_compiled_call_impl", None) is not None]
    if compiled_parts:
        raise DaydreamError(f"{who}: {name} is already compiled in part ({', '.join(compiled_parts[:3])} by "
                            f"Module.compile()): {why}")


def _check_copies_fit(model: Any, max_bytes: int, who: str, copies: int = 2) -> None:
    """A DaydreamError when ``copies`` times the model's parameters and
    buffers exceed ``max_bytes``."""
    nbytes = copies * sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    if nbytes > max_bytes:
        raise DaydreamError(f"{who}: {'two' if copies == 2 else copies} copies of {type(model).__name__} would take "
                            f"{nbytes / 2**30:.1f} GiB (max_bytes {max_bytes / 2**30:.1f} GiB)")


def _step_inputs(torch: Any, inputs: Sequence[Any]) -> List[Any]:
    """The positional inputs a copy of the model runs on: a clone of each
    recorded tensor (a model that changes its input in place leaves the batch
    alone), made-up values for a (shape, dtype) spec."""
    return [spec.detach().clone() if isinstance(spec, torch.Tensor)
            else _real_tensor(torch, torch.empty(spec[0], dtype=spec[1])) for spec in inputs]


def _fwd_bwd_step(torch: Any, m: Any, xs: Sequence[Any]) -> Tuple[float, Optional[float]]:
    """Seconds of one forward of ``m`` on ``xs`` and of the backward from its
    outputs (None when no output needs a gradient); gradients reset first."""
    from torch.utils._pytree import tree_leaves  # noqa: PLC0415

    for p in m.parameters():
        p.grad = None
    t0 = time.perf_counter()
    out = m(*xs)
    t1 = time.perf_counter()
    outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs:
        return t1 - t0, None
    grads = [torch.ones_like(t) for t in outs]
    t2 = time.perf_counter()
    torch.autograd.backward(outs, grads)
    return t1 - t0, time.perf_counter() - t2


def _first_lines(e: Exception) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {' '.join(lines[:2])[:300]}"


def _steps_per_round(torch: Any, m: Any, xs: Sequence[Any], round_s: float) -> int:
    """How many steps of ``m`` fill a round of ``round_s`` seconds (1..50)."""
    t0 = time.perf_counter()
    _fwd_bwd_step(torch, m, xs)
    return max(1, min(50, int(round_s / max(time.perf_counter() - t0, 1e-6))))


def _time_two_copies(reference: Any, changed: Any, change: str, inputs: Sequence[Any], repeats: int,
                     round_s: float, who: str, name: str) -> Dict[str, Tuple[float, float]]:
    """(changed ms, reference ms) per phase of two copies of a model, timed as
    :func:`compile_cpu_phase_times` describes; ``change`` names what made
    ``changed`` in errors."""
    torch = _torch()

    def step(m: Any) -> Tuple[float, Optional[float]]:
        return _fwd_bwd_step(torch, m, xs)

    # Dropout in the copies, and the made-up inputs, leave the caller's random state alone.
    with torch.random.fork_rng(devices=[]):
        xs = _step_inputs(torch, inputs)
        try:
            for _ in range(3):
                step(reference)
        except Exception as e:  # noqa: BLE001 - a model that does not run on these inputs as they are
            raise DaydreamError(f"{who}: {name} does not run on the recorded inputs "
                                f"({len(xs)} positional tensors): {_first_lines(e)}") from e
        try:
            for _ in range(3):
                step(changed)
        except Exception as e:  # noqa: BLE001 - any failure of the changed copy is the reason
            raise DaydreamError(f"{who}: {change} of {name} failed: {_first_lines(e)}") from e
        # Short blocks: a slow spell of a shared machine (they last tenths of
        # a second) then hits both copies alike. Blocks of 0.15 s put it in
        # one copy's medians: compile's forward factor on the MLP read 1.02,
        # 1.28 and 1.67 in three calibrations (docs/accuracy.md). Slow
        # steps stop repeating after five rounds once each copy has had
        # repeats x round_s seconds.
        steps = _steps_per_round(torch, reference, xs, round_s)
        samples: Dict[str, Dict[str, List[float]]] = {m: {"forward": [], "backward": []}
                                                      for m in ("changed", "reference")}
        for r in _timed_rounds(repeats, budget_s=2 * repeats * round_s, min_rounds=5):
            for which in (("reference", "changed") if r % 2 == 0 else ("changed", "reference")):
                m = reference if which == "reference" else changed
                for _ in range(steps):
                    fwd, bwd = step(m)
                    samples[which]["forward"].append(fwd)
                    if bwd is not None:
                        samples[which]["backward"].append(bwd)
    return {phase: (statistics.median(samples["changed"][phase]) * 1e3,
                    statistics.median(samples["reference"][phase]) * 1e3)
            for phase in ("forward", "backward") if samples["changed"][phase] and samples["reference"][phase]}


def format_op_factors(factors: Dict[int, float]) -> str:
    """The ``amp`` pass's ``cpu_op_factors`` text: "EVENT=FACTOR;..."."""
    return ";".join(f"{event}={factor:.4g}" for event, factor in sorted(factors.items()))


@functools.lru_cache(maxsize=None)
def cpu_op_fixed_us(sizes: Tuple[int, ...] = (64, 1024, 4096, 16384), calls: int = 500) -> float:
    """The fixed cost of one CPU op on this machine, in microseconds: what a
    call costs whatever its size (dispatch, output allocation), the
    ``batch_size`` pass's ``cpu_fixed_us``.

    Six common forward/backward ops (add, relu, an in-place mul, a sum, a
    matmul of 64 columns, a layer norm) are each timed over ``calls`` calls
    at every size of ``sizes`` (elements), and t = c + k x size is fitted to
    each by least squares (:func:`_line_fit`: c and k at least 0); the
    result is the median c (measured once per process, in about a second
    with torch's import). It includes the
    Python binding's share of a call (a few tenths of a microsecond), which a
    recorded op's span does not.

    Example::

        daydream.calibrate.cpu_op_fixed_us()   # ~2 on a 2-vCPU EPYC
    """
    torch = _torch()

    def rows(n: int) -> int:
        return max(1, n // 64)

    makers: List[Callable[[int], Callable[[], Any]]] = [
        lambda n: (lambda a=torch.rand(n), b=torch.rand(n): torch.add(a, b)),
        lambda n: (lambda a=torch.rand(n): torch.relu(a)),
        lambda n: (lambda a=torch.rand(n): a.mul_(1.0)),
        lambda n: (lambda a=torch.rand(n): a.sum()),
        lambda n: (lambda a=torch.rand(rows(n), 64), b=torch.rand(64, 64): torch.mm(a, b)),
        lambda n: (lambda a=torch.rand(rows(n), 64), w=torch.rand(64), b=torch.rand(64):
                   torch.nn.functional.layer_norm(a, (64,), w, b)),
    ]

    def per_call_us(fn: Callable[[], Any]) -> float:
        for _ in range(50):
            fn()
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            runs.append((time.perf_counter() - t0) / calls * 1e6)
        return statistics.median(runs)

    with torch.no_grad():
        intercepts = [_line_fit([float(n) for n in sizes], [per_call_us(make(n)) for n in sizes])[0]
                      for make in makers]
    return float(statistics.median(intercepts))


# Optimizer settings that pick its implementation, not its arithmetic.
_OPTIMIZER_IMPL_KEYS = ("foreach", "fused", "capturable", "differentiable")


def fused_optimizer_cpu_factor(optimizer: Any, repeats: int = 30, max_bytes: int = 64 << 20) -> float:
    """Fused / unfused time of one ``optimizer.step()`` on this CPU, the
    ``fused_optimizer`` pass's ``cpu_step_factor``.

    Two fresh optimizers of ``optimizer``'s class, with its parameter groups'
    hyperparameters, each over its own copies of the parameters (same shapes
    and dtypes, small random values and gradients): one set up as
    ``optimizer`` is (its ``foreach`` and ``fused``), one with ``fused=True``.
    They step in turn (:func:`_paired_median_times`), so a slower or busier
    moment hits both. The ratio carries over to the recorded step the way
    :func:`amp_cpu_op_factors` does: the step's own Python loop and per-op
    dispatch are in both timings.

    The copies (and each optimizer's state) would take several times the
    model's memory, so a model of more than ``max_bytes`` of parameters is
    sampled: parameters in order until ``max_bytes`` (a first one larger
    than that is cut to its first ``max_bytes``), which keeps the mix of
    per-parameter and per-byte cost of the model's leading layers.

    Raises DaydreamError when ``optimizer`` has no CPU parameters or its
    class has no fused CPU step here.

    Example::

        factor = daydream.calibrate.fused_optimizer_cpu_factor(torch.optim.Adam(model.parameters()))
    """
    torch = _torch()
    cls = type(optimizer)
    groups = [g for g in getattr(optimizer, "param_groups", []) if g.get("params")]
    if not groups or any(p.device.type != "cpu" for g in groups for p in g["params"]):
        raise DaydreamError(f"fused_optimizer_cpu_factor: {cls.__name__} has no parameters, or some are not on "
                            "the CPU")
    generator = torch.Generator().manual_seed(0)
    shapes: List[List[Tuple[Any, Any]]] = []  # per group: (shape, dtype) of the parameters copied
    budget = max_bytes
    for g in groups:
        kept = []
        for p in g["params"]:
            nbytes = p.numel() * p.element_size()
            if nbytes <= budget:
                kept.append((tuple(p.shape), p.dtype))
                budget -= nbytes
            elif budget == max_bytes:  # the first parameter, and a huge one: cut to the budget
                kept.append(((max(1, budget // p.element_size()),), p.dtype))
                budget = 0
        shapes.append(kept)

    def copies() -> List[Dict[str, Any]]:
        out = []
        for g, kept in zip(groups, shapes):
            if not kept:
                continue
            params = []
            for shape, dtype in kept:
                q = torch.nn.Parameter(0.01 * torch.randn(shape, generator=generator).to(dtype))
                q.grad = 0.01 * torch.randn(shape, generator=generator).to(dtype)
                params.append(q)
            out.append({**{k: v for k, v in g.items() if k != "params" and k not in _OPTIMIZER_IMPL_KEYS},
                        "params": params})
        return out

    defaults = getattr(optimizer, "defaults", {})
    try:
        recorded = cls(copies(), foreach=defaults.get("foreach"), fused=defaults.get("fused"))
        fused = cls(copies(), fused=True)
    except (TypeError, RuntimeError, ValueError) as e:
        raise DaydreamError(f"fused_optimizer_cpu_factor: {cls.__name__} cannot be built with fused=True on the "
                            f"CPU here: {e}") from e
    unfused_s, fused_s = _paired_median_times([recorded.step, fused.step], repeats)
    return fused_s / unfused_s


@dataclasses.dataclass
class NetworkCalibration:
    """A network measured with real all-reduces, read as the ring model's
    per-step latency and link bandwidth (t = 2(N-1) latency + 2(N-1)/N bytes /
    bandwidth), the parameters the communication passes take, and
    ``comm_cpu_share``: the fraction of a collective's time that a rank's
    computing thread loses to it when both run at once (0 for NCCL, whose
    collectives run on the GPU beside compute; measured for gloo, whose
    collectives run on CPU threads that share the rank's cores), and, on
    gloo, DDP's own CPU work per step and per gradient (``ddp_cpu_us``,
    ``ddp_cpu_per_gradient_us``)."""

    backend: str
    world_size: int
    latency_us: float
    bandwidth_gbps: float
    samples: List[Dict[str, float]]  # per message size: bytes, mean_ms, median_ms
    comm_cpu_share: float = 0.0
    overlap: Dict[str, float] = dataclasses.field(default_factory=dict)  # how comm_cpu_share was measured
    #: DDP's own CPU work per step and per gradient, in us (measured on gloo; see measure_ddp_overhead).
    ddp_cpu_us: float = 0.0
    ddp_cpu_per_gradient_us: float = 0.0
    ddp: Dict[str, Any] = dataclasses.field(default_factory=dict)  # how they were measured
    #: What an all-reduce issued by DDP adds to a step after a stretch of
    #: compute, as data_parallel's ``gap_latency`` ("GAP_US:EXTRA_US;...";
    #: measured on gloo, see measure_ddp_gap_latency).
    gap_latency: str = ""
    ddp_gaps: Dict[str, Any] = dataclasses.field(default_factory=dict)  # how it was measured
    #: What DDP's buffer broadcast adds to a step beyond its wire time, after
    #: a step of each length, as data_parallel's ``broadcast_latency``
    #: ("STEP_US:EXTRA_US;..."; measured on gloo with the gap_latency above).
    broadcast_latency: str = ""
    #: A blocking all-reduce's extra time after compute (measure_gap_latency):
    #: tensor_fusion's ``gap_latency`` (its "gap_latency" entry; see options()).
    gaps: Dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Per-step latency of an all-reduce queued behind another, as the passes'
    #: ``queued_latency_us`` (-1: not measured, every all-reduce pays
    #: ``latency_us``; measured on gloo, see measure_ddp_queued_latency).
    queued_latency_us: float = -1.0
    queued: Dict[str, Any] = dataclasses.field(default_factory=dict)  # how it and the next were measured
    #: What each further DDP bucket costs the computing thread after a gap
    #: of compute, as tensor_fusion's ``bucket_cpu_latency`` (a curve per
    #: bucket count, "4@GAP_US:US;...|16@GAP_US:US;...", or one "GAP_US:US;..."
    #: for every count; measured on gloo, see measure_ddp_queued_latency).
    bucket_cpu_latency: str = ""
    #: The share of the fit's all-reduces that stalled (:func:`stalled_share`):
    #: on gloo with no core to spare, a scheduler tick each.
    stalled_share: float = 0.0

    def caveats(self) -> List[str]:
        """What makes predictions from this calibration less sure than the
        passes' models: on gloo, all-reduces that stalled for a scheduler
        tick (gloo's TCP loop thread busy-polls a socket whose message has
        no receive posted yet, pytorch/gloo#246; with no core to spare, the
        thread that would post it waits for the tick). Where they did, a
        prediction that changes how many all-reduces a step issues
        (``tensor_fusion``, ``data_parallel``) can be off by more than its
        model: on two-vCPU hosts docs/accuracy.md measured a median error
        of 11-36% and up to 153% for those rows (runs 35-37), and 3.7-6.4%,
        up to 22%, where gloo's threads ran at real-time priority."""
        if self.backend != "gloo" or self.stalled_share < STALLED_SHARE_CAVEAT:
            return []
        small = min(self.samples, key=lambda s: s["bytes"]) if self.samples else None
        times = (f" ({small['bytes'] / 1024:.0f} kB: median {small['median_ms']:.3f} ms, mean "
                 f"{small['mean_ms']:.3f} ms)") if small else ""
        return [f"{self.stalled_share:.0%} of the calibration's all-reduces stalled{times}: gloo's TCP loop "
                "thread busy-polls while a message waits for its receive (pytorch/gloo#246), and with no core to "
                "spare the thread that would post it waits for a scheduler tick. Predictions that change how many "
                "all-reduces a step issues are less sure here than the passes' models. gloo's threads at real-time "
                "priority removed the stalls on such a host; a core free per rank should too"]

    def median_ring(self) -> Optional[Tuple[float, float]]:
        """(latency_us, bandwidth_gbps) of the ring model fitted to each
        message size's median all-reduce instead of its mean
        (:func:`ring_fit`); None without the medians of two sizes."""
        points = [(s["bytes"], s["median_ms"] / 1e3) for s in self.samples if s.get("median_ms", 0) > 0]
        if len({b for b, _ in points}) < 2:
            return None
        return ring_fit(points, self.world_size)

    def options(self, for_pass: str = "data_parallel") -> Dict[str, Any]:
        """The options this calibration sets for ``for_pass``
        (``data_parallel`` or ``tensor_fusion``).

        ``gap_latency``: for ``data_parallel`` the points measured on DDP
        steps (:func:`measure_ddp_gap_latency`), which hold all the
        all-reduce costs a step, the wait for the slowest rank and the
        thread's wake-up after it included; ``straggler_us`` is then 0 (else
        ``daydream.predict`` would add the wait its Profiler's steps give).
        For ``tensor_fusion`` none: its recorded step already holds the
        thread's wake-up after each all-reduce (the pass links what waited
        for the recorded ones to the new ones, with their lag); and the
        network from each size's median all-reduce (:meth:`median_ring`),
        as the step it predicts is a median and ``bucket_cpu_latency`` is
        measured on median steps: on a host where gloo's all-reduces stall
        for a scheduler tick, the means put the stalls in every bucket's
        latency and wire time, the one-bucket step's included, which the
        measured DDP steps do not show (docs/accuracy.md, 2026-12-03).
        Before, it took the blocking all-reduces' points
        (:func:`measure_gap_latency`) and the means. ``bucket_cpu_latency``
        where measured: gloo's threads share the computing cores, so that
        each all-reduce's latency is paid on the computing thread, a further
        bucket's as DDP steps with one and with many buckets measure it (see
        :func:`measure_ddp_queued_latency`).
        ``broadcast_latency`` (``data_parallel`` only, where measured): what
        DDP's buffer broadcast adds to a step, measured with those points."""
        if for_pass not in ("data_parallel", "tensor_fusion"):
            raise DaydreamError(f"NetworkCalibration.options: no options for pass {for_pass!r} "
                                "(data_parallel or tensor_fusion)")
        out = {"latency_us": self.latency_us, "bandwidth_gbps": self.bandwidth_gbps,
               "comm_cpu_share": self.comm_cpu_share, "ddp_cpu_us": self.ddp_cpu_us,
               "ddp_cpu_per_gradient_us": self.ddp_cpu_per_gradient_us, "gap_latency": self.gap_latency,
               "queued_latency_us": self.queued_latency_us}
        if for_pass == "tensor_fusion":
            del out["gap_latency"]
            median = self.median_ring()
            if median:
                out["latency_us"], out["bandwidth_gbps"] = median
            if self.bucket_cpu_latency:
                out["bucket_cpu_latency"] = self.bucket_cpu_latency
        else:
            if self.ddp_gaps:
                out["straggler_us"] = 0.0
            if self.broadcast_latency:
                out["broadcast_latency"] = self.broadcast_latency
        return out


def fit_all_reduce(dist: Any, torch: Any, world_size: int, max_bytes: int = 4 << 20,
                   repeats: int = 20) -> Dict[str, Any]:
    """Times all_reduce of float32 tensors from 4 kB to ``max_bytes`` on the
    current process group (every rank must call it) and fits t = c0 + c1 bytes.

    Sizes are interleaved so that load bursts hit them alike, and each size
    keeps the mean of ``repeats`` (on a busy machine the times are bimodal:
    most near the wire cost, some a scheduler tick later, and the median flips
    between the two). The fit is least squares on relative error; c0 and c1
    are then read as the ring model's latency and bandwidth."""
    sizes = []
    s = 4096
    while s < max_bytes:
        sizes.append(s)
        s *= 4
    sizes.append(max(max_bytes, 4096))
    if len(sizes) == 1:  # a bandwidth needs a second size
        sizes.append(4 * sizes[0])
    bufs = {n: torch.ones(n // 4) for n in sizes}
    times: Dict[int, List[float]] = {n: [] for n in sizes}
    for r in range(3 + repeats):
        for n in sizes:
            t0 = time.perf_counter()
            dist.all_reduce(bufs[n])
            if r >= 3:
                times[n].append(time.perf_counter() - t0)
    samples = [(n, statistics.fmean(times[n])) for n in sizes]
    latency_us, bandwidth_gbps = ring_fit(samples, world_size)
    return {
        "latency_us": latency_us,
        "bandwidth_gbps": bandwidth_gbps,
        "stalled_share": stalled_share(list(times.values())),
        "samples": [{"bytes": n, "mean_ms": t * 1e3, "median_ms": statistics.median(times[n]) * 1e3}
                    for n, t in samples],
    }


#: A calibration whose all-reduces stalled this often says so (NetworkCalibration.caveats).
STALLED_SHARE_CAVEAT = 0.05


def stalled_share(times_by_size: Sequence[Sequence[float]], min_stall_s: float = 1e-3) -> float:
    """The share of all-reduce times (seconds, one list per message size)
    that stalled: longer than their size's unstalled time by at least
    ``min_stall_s`` and by at least that time itself. A stall on a busy
    host is a scheduler tick (1-10 ms), where a size's spread without one
    is tens of microseconds. The unstalled time is the size's 10th
    percentile, not its median: where half of a size's all-reduces or more
    stall, its median is a stalled one."""
    stalled = total = 0
    for times in times_by_size:
        if not times:
            continue
        base = sorted(times)[len(times) // 10]
        stalled += sum(1 for t in times if t - base >= max(min_stall_s, base))
        total += len(times)
    return stalled / total if total else 0.0


def ring_fit(samples: Sequence[Tuple[int, float]], world_size: int) -> Tuple[float, float]:
    """(latency_us, bandwidth_gbps) of the ring model fitted to all-reduce
    times: ``samples`` are (bytes, seconds); t = c0 + c1 bytes by least
    squares on relative error, c0 read as 2(N-1) latencies and c1 as the
    ring's 2(N-1)/N bytes over the bandwidth (:func:`fit_all_reduce`).

    Example::

        daydream.calibrate.ring_fit([(4096, 300e-6), (4 << 20, 2.1e-3)], 2)   # (~149, ~2.3)

    Raises DaydreamError for a sample whose bytes or seconds are not
    positive, or for fewer than two sizes (a latency and a bandwidth need two).
    """
    for i, (b, t) in enumerate(samples):
        if not (b > 0 and t > 0 and math.isfinite(t)):
            raise DaydreamError(f"ring_fit: sample {i} ({b} bytes, {t} s): bytes and seconds must be positive")
    sizes = len({b for b, _ in samples})
    if sizes < 2:
        raise DaydreamError(f"ring_fit: all-reduce times of {sizes} size(s); "
                            "a latency and a bandwidth need two sizes at least")
    sw = swb = swbb = swt = swbt = 0.0
    for b, t in samples:
        w = 1.0 / (t * t)
        sw += w
        swb += w * b
        swbb += w * b * b
        swt += w * t
        swbt += w * b * t
    det = sw * swbb - swb * swb
    c1 = (sw * swbt - swb * swt) / det if det > 0 else 1e-15
    c0 = (swt - c1 * swb) / sw
    c0, c1 = max(c0, 0.0), max(c1, 1e-15)
    steps = 2 * max(world_size - 1, 1)
    return c0 / steps * 1e6, (steps / max(world_size, 2)) / c1 / 1e9


def _ring_all_reduce_s(nbytes: int, world_size: int, latency_us: float, bandwidth_gbps: float) -> float:
    """The ring model's all-reduce time, as the passes compute it (cost/collectives.h)."""
    n = max(world_size, 2)
    return 2 * (n - 1) * latency_us * 1e-6 + 2 * (n - 1) / n * nbytes / (bandwidth_gbps * 1e9)


def _ring_broadcast_s(nbytes: int, world_size: int, latency_us: float, bandwidth_gbps: float) -> float:
    """The ring model's broadcast time, as the passes compute it (cost/collectives.h): log2(N) steps, the
    bytes once."""
    return math.log2(max(world_size, 2)) * latency_us * 1e-6 + nbytes / (bandwidth_gbps * 1e9)


def _shared_matmul_s(dist: Any, torch: Any, a: Any) -> float:
    """Seconds per ``torch.mm(a, a)``, the slowest rank's (every rank must
    call it): the calibration loops size their compute by it, and every rank
    must run the same number of matmuls, or the ranks reach each collective
    apart and the wait reads as the collective's cost."""
    t0 = time.perf_counter()
    for _ in range(20):
        torch.mm(a, a)
    mine = torch.tensor([max((time.perf_counter() - t0) / 20, 1e-7)], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return float(mine[0])


def measure_comm_cpu_share(dist: Any, torch: Any, world_size: int, latency_us: float, bandwidth_gbps: float,
                           nbytes: int = 64 << 10, collectives: int = 10, repeats: int = 15) -> Dict[str, float]:
    """How much of a collective's time a rank's computing thread loses to it
    on this host, as the fraction ``comm_cpu_share`` the communication passes
    take (every rank of the current process group must call it).

    Times a fixed compute loop (``collectives`` chunks of 128 x 128 matmuls,
    each chunk about twice a collective's modelled time, so that the
    collectives need not queue) alone and with one asynchronous all-reduce of
    ``nbytes`` issued at the start of every chunk, as DDP issues its buckets
    during backward; the two alternate, after a barrier each, and keep their
    medians. The compute's extra time (up to its last matmul: the wait for
    the last all-reduce after it is the network's time, which the pass
    models by itself, and on a host that wakes waiting threads late it held
    a 4 ms tail that doubled the share) over the collectives' time in the
    ring model fitted to the same network (latency, bandwidth) is the share:
    0 when they run beside compute (a spare core, or a device that
    communicates by itself), 1 when the rank computes and communicates one
    after the other."""
    model_s = _ring_all_reduce_s(nbytes, world_size, latency_us, bandwidth_gbps)
    a = torch.randn(128, 128)
    mm_s = _shared_matmul_s(dist, torch, a)
    per_chunk = max(1, int(2 * max(model_s, 1e-4) / mm_s))
    buf = torch.ones(nbytes // 4)

    def run(communicate: bool) -> float:
        dist.barrier()
        start = time.perf_counter()
        works = []
        for _ in range(collectives):
            if communicate:
                works.append(dist.all_reduce(buf, async_op=True))
            for _ in range(per_chunk):
                torch.mm(a, a)
        computed = time.perf_counter() - start
        for w in works:
            w.wait()
        return computed

    run(False)
    run(True)
    alone: List[float] = []
    both: List[float] = []
    for r in range(repeats):
        for communicate in ((False, True) if r % 2 == 0 else (True, False)):
            (both if communicate else alone).append(run(communicate))
    compute_s, with_comm_s = statistics.median(alone), statistics.median(both)
    share = (with_comm_s - compute_s) / (collectives * model_s)
    return {
        "comm_cpu_share": min(1.0, max(0.0, share)),
        "compute_ms": compute_s * 1e3,
        "compute_with_collectives_ms": with_comm_s * 1e3,
        "collectives": collectives,
        "bytes": nbytes,
        "model_ms": model_s * 1e3,
    }


def measure_ddp_overhead(dist: Any, torch: Any, layers: Sequence[int] = (1, 8, 32),
                         repeats: int = 30) -> Dict[str, Any]:
    """DDP's own CPU work in a training step on this host, as the ``data_parallel``
    pass takes it: ``ddp_cpu_us`` per step and ``ddp_cpu_per_gradient_us`` per
    gradient (every rank of the current process group must call it).

    Times forward and backward of stacks of ``layers`` Linear(16, 16) layers
    (2 gradients each) on a 4-sample batch, plain and wrapped in
    DistributedDataParallel over a gloo group of this rank alone, in turn
    (medians of ``repeats``). The difference is DDP's forward wrapper, its
    autograd hooks, the copies into its bucket and back and the reducer's
    bookkeeping. The all-reduce is left out (:func:`keep_bucket_hook`): the
    ring model covers it whole (with another rank it would also bring that
    rank's timing noise, larger on a CPU host than what is measured here). A
    line through the extra time per number of gradients gives the two
    figures."""
    import warnings  # noqa: PLC0415

    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    world = dist.get_world_size()
    rank = dist.get_rank()
    groups = [dist.new_group([r], backend="gloo") for r in range(world)]  # every rank creates every group
    try:
        x = torch.randn(4, 16)
        fns: List[Callable[[], None]] = []
        grads: List[int] = []
        for n in layers:
            def stack() -> Any:
                return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(n)])

            plain = stack()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ddp = DistributedDataParallel(stack(), process_group=groups[rank], broadcast_buffers=False)
            ddp.register_comm_hook(None, keep_bucket_hook)
            for model in (plain, ddp):
                def step(model: Any = model) -> None:
                    for p in model.parameters():
                        p.grad = None
                    model(x).sum().backward()

                fns.append(step)
            grads.append(sum(1 for _ in plain.parameters()))
        times = _paired_median_times(fns, repeats, budget_s=2.0)
    finally:
        for g in groups:
            dist.destroy_process_group(g)
    samples = [{"gradients": g, "plain_us": times[2 * i] * 1e6, "ddp_us": times[2 * i + 1] * 1e6}
               for i, g in enumerate(grads)]
    per_step, per_gradient = _line_fit([float(g) for g in grads],
                                       [s["ddp_us"] - s["plain_us"] for s in samples])
    return {"ddp_cpu_us": per_step, "ddp_cpu_per_gradient_us": per_gradient, "samples": samples}


def measure_gap_latency(dist: Any, torch: Any, gaps_ms: Sequence[float] = (0.5, 1, 2, 4, 8),
                        nbytes: int = 4096, repeats: int = 60) -> Dict[str, Any]:
    """How much longer an all-reduce takes after a stretch of compute than
    back to back, on the current process group (every rank must call it), as
    the communication passes' ``gap_latency``.

    Each repeat times one blocking all-reduce of ``nbytes`` right after the
    one before it, and one after each of ``gaps_ms`` of 128 x 128 matmuls on
    every rank. The extra at a gap is its mean time less the back-to-back mean
    (means, as ``fit_all_reduce`` keeps: the network model already holds the
    back-to-back time), at least 0 and at least the extra of a shorter gap.
    On gloo between CPU processes its threads sleep while the rank computes,
    and waking them costs more the longer they slept: on a 2-vCPU host a
    4 kB all-reduce took 1.6 ms back to back and 2.8 ms after 4 ms of
    matmuls (means)."""
    a = torch.randn(128, 128)
    mm_s = _shared_matmul_s(dist, torch, a)
    buf = torch.ones(nbytes // 4)
    gaps = [0.0] + [float(g) for g in gaps_ms]
    times: Dict[float, List[float]] = {g: [] for g in gaps}
    dist.barrier()
    for r in range(2 + repeats):
        for g in gaps:
            for _ in range(int(g * 1e-3 / mm_s)):
                torch.mm(a, a)
            start = time.perf_counter()
            dist.all_reduce(buf)
            if r >= 2:
                times[g].append(time.perf_counter() - start)
    def points(center: Dict[float, float]) -> str:
        extra = 0.0
        out = []
        for g in gaps[1:]:
            extra = max(extra, (center[g] - center[0.0]) * 1e6)
            out.append(f"{g * 1e3:g}:{extra:.1f}")
        return ";".join(out)

    means = {g: statistics.fmean(times[g]) for g in gaps}
    medians = {g: statistics.median(times[g]) for g in gaps}
    # For comparison (the accuracy harness predicts with them too): a tenth
    # of the repeats cut at each end, so that a few stalls of a busy host,
    # tens of ms each, do not make the extra (a scheduler tick's wait in a
    # fifth of the repeats stays in); and medians, the statistic of the step
    # times the harness compares with.
    trimmed = {g: _trimmed_mean(times[g], 0.1) for g in gaps}
    return {
        "gap_latency": points(means),
        "gap_latency_trimmed": points(trimmed),
        "gap_latency_median": points(medians),
        "bytes": nbytes,
        "mean_ms": {f"{g:g}": means[g] * 1e3 for g in gaps},
        "median_ms": {f"{g:g}": medians[g] * 1e3 for g in gaps},
        "times_ms": {f"{g:g}": [round(t * 1e3, 4) for t in times[g]] for g in gaps},
    }


def expected_wait_for_slowest_ms(step_times_ms: Sequence[float], world_size: int) -> float:
    """How long, on average, a rank waits for the slowest of ``world_size``
    ranks whose steps vary independently as ``step_times_ms`` did: the
    expected maximum of ``world_size`` draws from the times less their mean,
    exact for draws from the measured times (order statistics: the i-th
    smallest of n is the maximum with probability (i/n)^N - ((i-1)/n)^N)."""
    times = sorted(step_times_ms)
    n = len(times)
    if n == 0 or world_size < 2:
        return 0.0
    expected_max = sum(t * ((i / n) ** world_size - ((i - 1) / n) ** world_size) for i, t in enumerate(times, 1))
    return max(0.0, expected_max - sum(times) / n)


def ddp_gap_points(quiet_ms: Dict[float, List[float]], real_ms: Dict[float, List[float]], wire_us: float,
                   base_ms: Optional[Dict[float, List[float]]] = None) -> str:
    """``gap_latency`` points from DDP steps timed with and without their
    all-reduce, per step length (see :func:`measure_ddp_gap_latency`): at
    the gap of the quiet step's median, the real step's median less the
    quiet one's, less the ring model's wire time for the bucket, at least 0
    and at least the extra of a shorter gap. With ``base_ms`` (steps that
    communicate all but what is priced), the real step's median less the
    base one's instead (``broadcast_latency``: DDP steps with their buffer
    broadcast against the same steps without it)."""
    base_ms = base_ms if base_ms is not None else quiet_ms
    extra = 0.0
    out = []
    for quiet, real, base in sorted((statistics.median(quiet_ms[k]), statistics.median(real_ms[k]),
                                     statistics.median(base_ms[k])) for k in quiet_ms):
        extra = max(extra, (real - base) * 1e3 - wire_us)
        out.append(f"{quiet * 1e3:.0f}:{extra:.1f}")
    return ";".join(out)


def batches_for_step_lengths(step_s: Callable[[int], float], lengths_s: Sequence[float],
                             max_batch: int = 4096) -> List[Optional[int]]:
    """The batch at which a step takes each of ``lengths_s``, from
    ``step_s(batch)`` (a step's time at that batch) at batches 1, 2, 4, ...
    (up to ``max_batch``) until one takes the longest length: each length's
    batch lies between the two timed sizes around it, whose times are made
    non-decreasing (a noisy timing must not send the batch far off); None
    for a length below the step at batch 1, ``max_batch``'s batch for one
    beyond it."""
    measured: List[Tuple[int, float]] = []
    b = 1
    while True:
        t = max([step_s(b)] + [m for _, m in measured[-1:]])
        measured.append((b, t))
        if t >= max(lengths_s) or b >= max_batch:
            break
        b *= 2
    out: List[Optional[int]] = []
    for target in lengths_s:
        if target <= measured[0][1]:
            out.append(None)
            continue
        for (b0, t0), (b1, t1) in zip(measured, measured[1:]):
            if t1 >= target:
                out.append(b0 + round((b1 - b0) * (target - t0) / max(t1 - t0, 1e-9)))
                break
        else:
            out.append(measured[-1][0])
    return out


def _linear_stack(torch: Any, layers: int) -> Any:
    """The DDP calibrations' model: ``layers`` ``Linear(64, 64)`` layers."""
    return torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(layers)])


def _stack_batch(torch: Any, batch: int) -> Tuple[Any, Any]:
    """Inputs and targets of ``batch`` rows for a :func:`_linear_stack`, the
    same for a batch size every time."""
    g = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 64, generator=g), torch.randn(batch, 64, generator=g)


def _timed_training_step(torch: Any, model: Any, batch: int) -> Callable[[], float]:
    """Seconds of one Adam training step of ``model`` (a stack of
    :func:`_linear_stack`) at ``batch``, per call."""
    from .capture import training_step  # noqa: PLC0415

    x, y = _stack_batch(torch, batch)
    step = training_step(model, x, y, torch.nn.MSELoss(), torch.optim.Adam(model.parameters(), lr=1e-3))

    def timed() -> float:
        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0

    return timed


def _time_in_blocks(dist: Any, steps: Dict[Any, Callable[[], float]], times: Dict[Any, List[float]], rounds: int,
                    block: int, repeats: Optional[Dict[Any, int]] = None) -> None:
    """Appends to ``times[key]`` the ms of ``block`` calls of ``steps[key]``
    back to back after a barrier, for every key, in ``rounds`` rounds whose
    order alternates (after one round of warm-up), as a training loop runs
    its steps on every rank of the group. ``repeats``: blocks per round of
    the keys it names (1 for the others), spread through the round: after
    every key's first block, the second of those with two or more, and so
    on."""
    blocks = {key: max(1, (repeats or {}).get(key, 1)) for key in steps}
    order = [key for rep in range(max(blocks.values(), default=1)) for key in steps if blocks[key] > rep]
    for r in range(1 + rounds):
        for key in (order if r % 2 == 0 else order[::-1]):
            dist.barrier()
            for _ in range(block):
                t = steps[key]()
                if r > 0:
                    times[key].append(t * 1e3)
    dist.barrier()


def measure_ddp_gap_latency(dist: Any, torch: Any, latency_us: float, bandwidth_gbps: float,
                            steps_ms: Sequence[float] = (2, 4, 6, 8), layers: int = 16, rounds: int = 10,
                            block: int = 10, buffer_bytes: int = 4096) -> Dict[str, Any]:
    """What an all-reduce issued by DDP at the end of a training step adds
    to the step beyond the ring model's wire time, after steps of several
    lengths, as ``data_parallel``'s ``gap_latency`` (every rank of the
    current process group must call it).

    A stack of ``layers`` ``Linear(64, 64)`` layers (one bucket of 266 kB of
    gradients for 16) trains with Adam in DistributedDataParallel over the
    group, at batch sizes whose plain steps take about ``steps_ms`` (rank
    0's plain steps at batches 1, 2, 4, ..., interpolated; a length below
    the stack's step at batch 1 is left out), with its all-reduce and with :func:`keep_bucket_hook`
    (nothing communicated), in blocks of ``block`` steps back to back after a
    barrier, as a training loop runs them (the ranks drift apart within a
    block as they do in training). Configurations alternate from round to
    round; the first round warms up. Each point's gap is the quiet step's
    median, its extra the real step's median less the quiet one's, less the
    ring model's time for the bucket (:func:`ddp_gap_points`).

    The same stack with a batch norm's buffers, ``buffer_bytes`` of float
    statistics and an int64 count, which DDP broadcasts from rank 0 before
    every forward (``broadcast_buffers``), one broadcast per dtype as for a
    model's batch norms, is timed in the same rounds: what the
    broadcast adds to the real step, less the ring model's time for it, at
    each step length, is ``data_parallel``'s ``broadcast_latency``. On a
    2-vCPU host a broadcast of the harness's CNN buffers added 1.8-2.5 ms
    to its DDP step with gloo's threads as scheduled, 0.5 ms with them in
    real time, where the ring model gave it one latency, 0.1-0.5 ms
    (docs/accuracy.md).

    The quiet steps of the ranks do not wait for each other, the real ones
    do: the extra holds each step's wait for the slower rank, as steps of
    that length vary with every rank on this host (``straggler_ms``, from
    the quiet steps: 0.33-1.00 ms on a 2-vCPU host, where a model's own
    steps timed alone by the Profiler gave 0.04-0.53). The calibration's
    options therefore set ``straggler_us`` to 0.

    Unlike :func:`measure_gap_latency`, which times a blocking all-reduce
    from its call to its return after matmuls, this holds all that the
    all-reduce costs the step. On a 2-vCPU host the accuracy harness's
    MLP and transformer (0.3 MB of gradients) in DDP saw their all-reduce
    take 1.7-2.5 ms from issue to end (medians) and add 3.2-4.0 ms to the
    step; such a stack with the same gradient bytes and step time, in the
    same rounds, added 0.14 ms less on average over six jobs, one
    Linear(256, 256) after matmuls 0.6-0.9 ms less (docs/accuracy.md)."""
    import warnings  # noqa: PLC0415

    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    # Batch sizes for the step lengths, from rank 0's plain steps.
    plain = _linear_stack(torch, layers)

    def plain_step_s(batch: int) -> float:
        step = _timed_training_step(torch, plain, batch)
        step()  # Adam's first step makes its state
        return statistics.median(step() for _ in range(7))

    sizes = sorted({b for b in batches_for_step_lengths(plain_step_s, [t * 1e-3 for t in steps_ms])
                    if b is not None}) or [1]
    batches = torch.tensor(sizes + [0] * (len(steps_ms) - len(sizes)))  # rank 0's, for every rank
    dist.broadcast(batches, 0)
    sizes = [int(b) for b in batches if int(b) > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        real = DistributedDataParallel(_linear_stack(torch, layers), broadcast_buffers=False)
        quiet = DistributedDataParallel(_linear_stack(torch, layers), broadcast_buffers=False)
        # The same with a batch norm's buffers, which DDP broadcasts from
        # rank 0 before every forward, one broadcast per dtype: float
        # statistics and an int64 count (num_batches_tracked); one float
        # buffer alone missed the second. Each rank starts with its own
        # values, so that the broadcasts can be seen to have run.
        buffered = _linear_stack(torch, layers)
        buffered.register_buffer("stats", torch.full((buffer_bytes // 4,), float(dist.get_rank())))
        buffered.register_buffer("count", torch.tensor(dist.get_rank(), dtype=torch.int64))
        broadcasting = DistributedDataParallel(buffered, broadcast_buffers=True)
        buffered.stats.fill_(float(dist.get_rank()))  # DDP's construction synced them once
        buffered.count.fill_(dist.get_rank())
    quiet.register_comm_hook(None, keep_bucket_hook)
    nbytes = sum(p.numel() * p.element_size() for p in real.parameters())
    models = {"quiet": quiet, "real": real, "broadcast": broadcasting}
    steps = {(b, kind): _timed_training_step(torch, m, b) for b in sizes for kind, m in models.items()}
    times: Dict[Tuple[int, str], List[float]] = {k: [] for k in steps}
    _time_in_blocks(dist, steps, times, rounds, block)
    quiet_ms, real_ms, broadcast_ms = ({float(b): times[(b, kind)] for b in sizes} for kind in models)
    # Every rank holds rank 0's buffer: the broadcasting steps broadcast.
    synced = torch.tensor([1 if bool((buffered.stats == 0).all()) and int(buffered.count) == 0 else 0])
    dist.all_reduce(synced, op=dist.ReduceOp.MIN)
    world = dist.get_world_size()
    wire_us = _ring_all_reduce_s(nbytes, world, latency_us, bandwidth_gbps) * 1e6
    broadcast_wire_us = _ring_broadcast_s(buffer_bytes, world, latency_us, bandwidth_gbps) * 1e6
    return {
        "straggler_ms": {str(b): expected_wait_for_slowest_ms(quiet_ms[float(b)], dist.get_world_size())
                         for b in sizes},
        "gap_latency": ddp_gap_points(quiet_ms, real_ms, wire_us),
        "broadcast_latency": ddp_gap_points(quiet_ms, broadcast_ms, broadcast_wire_us, base_ms=real_ms),
        "buffer_bytes": buffer_bytes,
        "buffer_dtypes": [str(b.dtype) for b in buffered.buffers()],
        "buffers_broadcast": bool(synced.item()),
        "broadcast_median_ms": {str(b): statistics.median(broadcast_ms[float(b)]) for b in sizes},
        "bytes": nbytes,
        "layers": layers,
        "wire_us": wire_us,
        "batches": sizes,
        "quiet_median_ms": {str(b): statistics.median(quiet_ms[float(b)]) for b in sizes},
        "median_ms": {str(b): statistics.median(real_ms[float(b)]) for b in sizes},
        # Every timed step, per batch and kind, in the order run: the
        # points above are medians of a mixture (a step meets a stall of
        # gloo's or not), and its shape is in these.
        "times_ms": {kind: {str(b): [round(t, 4) for t in by_batch[float(b)]] for b in sizes}
                     for kind, by_batch in (("quiet", quiet_ms), ("real", real_ms), ("broadcast", broadcast_ms))},
    }


def _trimmed_mean(xs: Sequence[float], cut: float) -> float:
    """The mean of ``xs`` without the ``cut`` fraction at each end."""
    xs = sorted(xs)
    k = int(len(xs) * cut)
    return statistics.fmean(xs[k:len(xs) - k] or xs)


def ddp_extra_per_bucket_ms(quiet_ms: Dict[int, List[float]], real_ms: Dict[int, List[float]]) -> float:
    """From DDP steps with 1 and with K buckets of the same gradients (keys:
    buckets), each with its all-reduces (``real_ms``) and with nothing
    communicated (``quiet_ms``): what communicating adds to a step with K
    buckets beyond what it adds with one (medians), over the K - 1 extra
    buckets, in ms (may be negative)."""
    (one, many) = sorted(real_ms)

    def extra(k: int) -> float:
        return statistics.median(real_ms[k]) - statistics.median(quiet_ms[k])
    return (extra(many) - extra(one)) / (many - one)


def ddp_queued_latency_us(quiet_ms: Dict[int, List[float]], real_ms: Dict[int, List[float]],
                          world_size: int) -> float:
    """``queued_latency_us`` from DDP steps with 1 and with K buckets
    (:func:`ddp_extra_per_bucket_ms`): the extra per further all-reduce,
    which the ring model's 2(N-1) steps of latency price (the bandwidth term
    is the same in total), at least 0."""
    return max(0.0, ddp_extra_per_bucket_ms(quiet_ms, real_ms)) * 1e3 / (2 * (max(world_size, 2) - 1))


def ddp_bucket_latency_points(pairs: Sequence[Tuple[float, float]]) -> str:
    """``bucket_cpu_latency`` points from (gap us, extra ms per extra
    bucket) pairs, one per batch of :func:`measure_ddp_queued_latency`, in
    any order: at each gap in whole us (pairs whose gaps round alike
    pooled; one of 0 us left out), the extra in us of the least-squares
    non-decreasing fit to the pairs (adjacent violators pooled: a bucket
    costs no less after longer compute, and one noisy pair is averaged with
    its neighbours instead of raising every longer gap to it), at least 0."""
    groups: Dict[int, List[float]] = {}
    for gap_us, per_bucket_ms in pairs:
        gap = round(gap_us)  # as written: the pass wants gaps > 0 and increasing
        if gap > 0:
            groups.setdefault(gap, []).append(per_bucket_ms * 1e3)
    blocks: List[List[Any]] = []  # [gaps, sum, count], means increasing
    for gap in sorted(groups):
        blocks.append([[gap], sum(groups[gap]), len(groups[gap])])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            gaps, total, n = blocks.pop()
            blocks[-1] = [blocks[-1][0] + gaps, blocks[-1][1] + total, blocks[-1][2] + n]
    return ";".join(f"{g}:{max(0.0, total / n):.1f}" for gaps, total, n in blocks for g in gaps)


def bucket_latency_curves(curves: Dict[int, str]) -> str:
    """``bucket_cpu_latency`` from :func:`ddp_bucket_latency_points` curves
    by the bucket count they were measured at: "K@POINTS|..." in increasing
    K (the pass reads an iteration of K buckets between the two counts on
    either side), curves without points left out; one curve alone applies
    to every count."""
    kept = sorted((k, c) for k, c in curves.items() if c)
    if len(kept) == 1:
        return kept[0][1]
    return "|".join(f"{k}@{c}" for k, c in kept)


def _timed_backward(torch: Any, model: Any, batch: int) -> Callable[[], float]:
    """Seconds of one backward of ``model`` (a stack of :func:`_linear_stack`,
    in DDP with a hook that communicates nothing) at ``batch``, per call."""
    x, y = _stack_batch(torch, batch)
    loss_fn = torch.nn.MSELoss()

    def timed() -> float:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        t0 = time.perf_counter()
        loss.backward()
        return time.perf_counter() - t0

    return timed


def measure_ddp_queued_latency(dist: Any, torch: Any, layers: int = 16, batches: Sequence[int] = (32, 512, 2048),
                               rounds: int = 10, block: int = 10, coarse: int = 4,
                               coarse_blocks: int = 3) -> Dict[str, Any]:
    """What each further DDP bucket costs a training step, as the
    communication passes' ``queued_latency_us`` and ``bucket_cpu_latency``
    (every rank of the current process group must call it).

    The stack of :func:`measure_ddp_gap_latency` trains in
    DistributedDataParallel in one bucket and in one bucket per layer
    (``bucket_cap_mb`` of one layer's gradients), each with its all-reduces
    and with :func:`keep_bucket_hook` (DDP's CPU work per bucket without
    communication), in blocks of ``block`` steps as there, at each of
    ``batches``. At the first, small batch (a backward far shorter than its
    all-reduces, so that they queue) :func:`ddp_queued_latency_us` of the
    medians is ``queued_latency_us``. At every batch, what communicating
    adds to the step with one bucket per layer beyond what it adds with one,
    over the extra buckets, is a point of ``bucket_cpu_latency`` at the gap
    between two buckets' gradients: the median backward of the quiet stack
    over its layers (:func:`ddp_bucket_latency_points`), for iterations of
    ``layers`` buckets. The same stack in ``coarse`` buckets (of ``layers /
    coarse`` layers each; 0: none) gives the curve for ``coarse`` buckets,
    at gaps ``layers / coarse`` times as long (:func:`bucket_latency_curves`):
    a bucket costs more the fewer buckets the step has. Its step with
    all-reduces runs ``coarse_blocks`` blocks a round: that step's time is
    bimodal (an all-reduce's thread woken at once or a scheduler tick
    later), and its median's noise is shared by ``coarse - 1`` further
    buckets, not ``layers - 1`` (with 4 and 16: three, not fifteen); on a
    2-vCPU Intel guest the 4-bucket step's moved
    0.5-0.6 ms between sets of ten rounds of one job, the one-bucket step's
    0.10-0.37 ms and the quiet steps' 0.03-0.24 ms (2026-12-03,
    docs/accuracy.md). On a 2-vCPU Intel
    guest with gloo's threads as scheduled a further bucket cost 0.45 ms
    after 0.13 ms of compute in four buckets, and 0.31 ms after 0.09 ms
    and 0.51 after 0.31 ms in sixteen (medians of six jobs, 2026-12-03);
    the harness's models read 0.38-1.25 ms a bucket in two buckets (the
    MLP), 0.54-0.88 ms in four (the CNN) and 0.24-0.53 ms in ten (the
    transformer), where the sixteen-bucket curve said 0.25-0.46
    (docs/accuracy.md). On a 2-vCPU guest
    with gloo's threads as scheduled, each extra bucket added 0.25-0.44 ms
    at batch 32, 0.25-0.46 ms at 512 and 0.41-0.78 ms at 2048 (the jobs of
    2026-11-29's eighth session): a bucket costs more the more compute lies
    between it and the next (docs/accuracy.md).

    It replaced a measure of ten all-reduces issued at once and waited for
    together, which read 95-817 us from job to job in one session on a
    2-vCPU guest (2026-11-27) where this read 170-348 us: the harness's
    transformer went from ten DDP buckets' step to one's 2.9-5.8 ms faster,
    about 0.3-0.6 ms a bucket, where 817 us priced each queued one at
    1.6 ms (docs/accuracy.md)."""
    import warnings  # noqa: PLC0415

    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    if coarse and not (1 < coarse < layers and layers % coarse == 0):
        raise DaydreamError(f"measure_ddp_queued_latency: coarse must be 0 or divide layers ({layers}) into "
                            f"more than one bucket of more than one layer, got {coarse}")
    if coarse_blocks < 1:
        raise DaydreamError(f"measure_ddp_queued_latency: coarse_blocks must be at least 1, got {coarse_blocks}")
    layer_bytes = (64 * 64 + 64) * 4  # a Linear(64, 64)'s gradients
    counts = [1, *([coarse] if coarse else []), layers]
    models: Dict[Tuple[int, bool], Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # A bucket closes once it holds its cap: layers / k layers' gradients.
        for buckets, cap in ((k, 25.0 if k == 1 else layers // k * layer_bytes / 2**20) for k in counts):
            for communicate in (False, True):
                torch.manual_seed(0)
                ddp = DistributedDataParallel(_linear_stack(torch, layers), broadcast_buffers=False,
                                              bucket_cap_mb=cap)
                if not communicate:
                    ddp.register_comm_hook(None, keep_bucket_hook)
                models[(buckets, communicate)] = ddp
    world = dist.get_world_size()
    points: List[Dict[str, Any]] = []
    for batch in batches:
        steps = {k: _timed_training_step(torch, m, batch) for k, m in models.items()}
        times: Dict[Tuple[int, bool], List[float]] = {k: [] for k in steps}
        _time_in_blocks(dist, steps, times, rounds, block, {(coarse, True): coarse_blocks} if coarse else None)
        backward = _timed_backward(torch, models[(layers, False)], batch)
        backward()
        gap_us = statistics.median(backward() for _ in range(9)) / layers * 1e6
        quiet = {k: times[(k, False)] for k in counts}
        real = {k: times[(k, True)] for k in counts}
        fine = {k: quiet[k] for k in (1, layers)}, {k: real[k] for k in (1, layers)}
        point = {
            "batch": batch,
            "gap_us": gap_us,
            "queued_latency_us": ddp_queued_latency_us(*fine, world),
            "per_bucket_ms": ddp_extra_per_bucket_ms(*fine),
            "quiet_median_ms": {str(k): statistics.median(v) for k, v in quiet.items()},
            "median_ms": {str(k): statistics.median(v) for k, v in real.items()},
            "steps": {str(k): len(v) for k, v in real.items()},
        }
        if coarse:
            point["coarse_gap_us"] = gap_us * layers / coarse
            point["coarse_per_bucket_ms"] = ddp_extra_per_bucket_ms({k: quiet[k] for k in (1, coarse)},
                                                                    {k: real[k] for k in (1, coarse)})
        points.append(point)
    fine_curve = ddp_bucket_latency_points([(p["gap_us"], p["per_bucket_ms"]) for p in points])
    curves = {layers: fine_curve}
    if coarse:
        curves[coarse] = ddp_bucket_latency_points([(p["coarse_gap_us"], p["coarse_per_bucket_ms"]) for p in points])
    return {
        "queued_latency_us": points[0]["queued_latency_us"],
        "bucket_cpu_latency": bucket_latency_curves(curves),
        "coarse": coarse,
        "buckets": layers,
        "batch": batches[0],
        "bytes": layers * layer_bytes,
        "points": points,
        "quiet_median_ms": points[0]["quiet_median_ms"],
        "median_ms": points[0]["median_ms"],
    }


def measure_network(dist: Any, torch: Any, max_bytes: int = 4 << 20, repeats: int = 20,
                    coarse: int = 4) -> NetworkCalibration:
    """The network of the current process group (every rank must call it):
    the all-reduce fit and, on gloo, ``comm_cpu_share``, ``gap_latency``,
    ``queued_latency_us``, ``bucket_cpu_latency`` and DDP's CPU work.
    ``coarse``: the bucket count of ``bucket_cpu_latency``'s second curve
    (:func:`measure_ddp_queued_latency`; 0: one per layer alone, which is
    all ``data_parallel`` takes of it, for a shorter calibration)."""
    world = dist.get_world_size()
    backend = str(dist.get_backend())
    fit = fit_all_reduce(dist, torch, world, max_bytes, repeats)
    net = NetworkCalibration(backend, world, fit["latency_us"], fit["bandwidth_gbps"], fit["samples"],
                             stalled_share=fit["stalled_share"])
    if backend == "gloo":
        net.overlap = measure_comm_cpu_share(dist, torch, world, net.latency_us, net.bandwidth_gbps)
        net.comm_cpu_share = net.overlap["comm_cpu_share"]
        net.gaps = measure_gap_latency(dist, torch)
        net.ddp_gaps = measure_ddp_gap_latency(dist, torch, net.latency_us, net.bandwidth_gbps)
        net.gap_latency = net.ddp_gaps["gap_latency"]
        net.broadcast_latency = net.ddp_gaps["broadcast_latency"]
        net.queued = measure_ddp_queued_latency(dist, torch, coarse=coarse)
        net.queued_latency_us = net.queued["queued_latency_us"]
        net.bucket_cpu_latency = net.queued["bucket_cpu_latency"]
        net.ddp = measure_ddp_overhead(dist, torch)
        net.ddp_cpu_us = net.ddp["ddp_cpu_us"]
        net.ddp_cpu_per_gradient_us = net.ddp["ddp_cpu_per_gradient_us"]
    return net


def _calibration_worker(rank: int, world_size: int, port: int, max_bytes: int, repeats: int,
                        queue: Any) -> None:
    torch = _torch()
    import torch.distributed as dist  # noqa: PLC0415

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size)
        net = measure_network(dist, torch, max_bytes, repeats)
        dist.destroy_process_group()
        if rank == 0:
            queue.put(("ok", net))
    except Exception as e:  # reported to the parent, which raises DaydreamError
        queue.put(("error", f"rank {rank}: {type(e).__name__}: {e}"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def calibrate_network(world_size: int = 2, max_mb: float = 4, repeats: int = 20,
                      timeout_s: float = 120) -> NetworkCalibration:
    """Measures the communication backend really in use.

    Inside an initialized ``torch.distributed`` process group (every rank must
    call it, as for any collective): all-reduces on that group, its backend and
    size. Otherwise: ``world_size`` local processes joined by gloo over
    localhost (one thread each), the CPU data-parallel setting. On gloo it
    also measures ``comm_cpu_share`` (see :func:`measure_comm_cpu_share`),
    ``data_parallel``'s ``gap_latency`` (see :func:`measure_ddp_gap_latency`)
    and ``tensor_fusion``'s (see :func:`measure_gap_latency`),
    ``queued_latency_us`` and ``bucket_cpu_latency`` (see
    :func:`measure_ddp_queued_latency`) and DDP's own
    CPU work (see :func:`measure_ddp_overhead`).

    Raises DaydreamError when PyTorch or torch.distributed is missing, the
    arguments are out of range, or the measuring processes fail or time out.
    """
    if world_size < 2:
        raise DaydreamError(f"calibrate_network: world_size must be at least 2, got {world_size}")
    if not 0.004 <= max_mb <= 1024:
        raise DaydreamError(f"calibrate_network: max_mb must be in [0.004, 1024], got {max_mb}")
    if repeats < 1:
        raise DaydreamError(f"calibrate_network: repeats must be at least 1, got {repeats}")
    torch = _torch()
    import torch.distributed as dist  # noqa: PLC0415

    if not dist.is_available():
        raise DaydreamError("calibrate_network: this PyTorch has no torch.distributed")
    max_bytes = int(max_mb * (1 << 20))
    if dist.is_initialized():
        net = measure_network(dist, torch, max_bytes, repeats)
        if dist.get_rank() == 0:
            _warn_caveats(net)
        return net
    import torch.multiprocessing as mp  # noqa: PLC0415

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_calibration_worker, args=(r, world_size, port, max_bytes, repeats, queue),
                         daemon=True) for r in range(world_size)]
    for p in procs:
        p.start()
    result: Optional[Tuple[str, Any]] = None
    deadline = time.monotonic() + timeout_s
    try:
        while result is None:
            try:
                result = queue.get(timeout=0.2)
            except Exception:  # queue.Empty: still measuring, or a rank died without a word
                dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:  # its peers would wait for it until gloo's own timeout
                    result = ("error", "rank " + ", rank ".join(f"{r} exited with code {c}" for r, c in dead)
                              + " before reporting (is the calling script's work under "
                              "`if __name__ == \"__main__\":`? the processes are spawned)")
                elif time.monotonic() > deadline:
                    result = ("error", f"no result within {timeout_s:g} s")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    if result[0] != "ok":
        raise DaydreamError(f"calibrate_network: gloo between {world_size} local processes failed: {result[1]}")
    _warn_caveats(result[1])
    return result[1]


def _warn_caveats(net: NetworkCalibration) -> None:
    for caveat in net.caveats():
        _log.warning("calibrate_network: %s", caveat)


# --- the profiler's own cost (daydream.Profiler removes it from its graphs) -----------------------
@dataclasses.dataclass(frozen=True)
class ProfilerOverhead:
    """What recording a CPU step with ``daydream.Profiler`` adds to it on this
    machine, in ns: per recorded operator or annotation ``per_record_ns``
    (``record_shapes`` included; split evenly between ``begin_ns``, before
    the record's start stamp, and ``end_ns``, after its end stamp); and on
    top of their ranges, per ``nn.Module`` forward ``module_hook_ns``
    (daydream's pre- and post-hooks) and per parameter gradient
    ``grad_hook_ns`` (the post-accumulate hook)."""

    per_record_ns: float
    module_hook_ns: float
    grad_hook_ns: float
    record_shapes: bool
    fit: Tuple[Tuple[int, float], ...] = ()  # per calibration loop: records, measured extra time (ns)
    #: What every cost above is multiplied by when removed, and the factor
    #: on every CPU task and gap after that (fit_profiler_overhead sets them).
    scale: float = 1.0
    cpu_factor: float = 1.0
    #: The unprofiled step time the scale was fitted to, and the graph's replayed
    #: step time before (costs unscaled) and after the fit; None when not fitted.
    plain_step_ms: Optional[float] = None
    unscaled_replayed_ms: Optional[float] = None
    fitted_replayed_ms: Optional[float] = None
    #: Why the fit was not made, when it was not ("" otherwise).
    fit_note: str = ""
    #: The time inside optimizer.step() measured without the profiler, and the
    #: factor on the optimizer phase's CPU tasks and gaps fitted to it
    #: (instead of ``cpu_factor``); None when the step was not timed apart.
    plain_optimizer_ms: Optional[float] = None
    optimizer_cpu_factor: Optional[float] = None
    #: The model's forward timed without the profiler, when the fit was made
    #: to it instead of to the step (a step that waits for collectives);
    #: None otherwise.
    plain_forward_ms: Optional[float] = None

    @property
    def begin_ns(self) -> int:
        return int(round(self.scale * self.per_record_ns / 2))

    @property
    def end_ns(self) -> int:
        return int(round(self.scale * self.per_record_ns)) - self.begin_ns

    def options(self) -> Dict[str, int]:
        """Keyword arguments of ``daydream._core.remove_profiler_overhead`` (scaled)."""
        return {"begin_ns": self.begin_ns, "end_ns": self.end_ns,
                "module_hook_ns": int(round(self.scale * self.module_hook_ns)),
                "grad_hook_ns": int(round(self.scale * self.grad_hook_ns))}

    def describe(self) -> str:
        text = (f"{self.per_record_ns / 1e3:.2f} us per recorded op (record_shapes={self.record_shapes}), "
                f"{self.module_hook_ns / 1e3:.2f} us more per module forward, "
                f"{self.grad_hook_ns / 1e3:.2f} us more per parameter gradient")
        if self.fit_note:
            text += "; " + self.fit_note
        elif self.plain_step_ms is not None:
            text += (f"; {self.fit_text()} (the graph replays in {self.fitted_replayed_ms:.3f} ms per step; with "
                     f"the measured costs alone, {self.unscaled_replayed_ms:.3f} ms)")
        return text

    def fit_text(self) -> str:
        """How the costs were fitted to the step timed without the profiler
        (``fit_note`` when they were not); "" when there was no such step."""
        if self.plain_step_ms is None:
            return ""
        if self.fit_note:
            return self.fit_note
        if self.plain_forward_ms is not None:
            text = (f"fitted to the {self.plain_forward_ms:.3f} ms forward timed without the profiler (not to the "
                    f"{self.plain_step_ms:.3f} ms step: it waits for collectives, whose times vary from step to "
                    f"step): costs x{self.scale:.2f}, then CPU time x{self.cpu_factor:.3f}")
        else:
            text = (f"fitted to the {self.plain_step_ms:.3f} ms step timed without the profiler: "
                    f"costs x{self.scale:.2f}, then CPU time x{self.cpu_factor:.3f}")
        if self.optimizer_cpu_factor is not None:
            text += (f", the optimizer step's x{self.optimizer_cpu_factor:.3f} (fitted to the "
                     f"{self.plain_optimizer_ms:.3f} ms it took apart)")
        return text


#: The smallest factor fit_profiler_overhead gives the remaining CPU time.
MIN_CPU_FACTOR = 0.25


#: The largest factor fit_profiler_overhead gives a phase's CPU time.
MAX_CPU_FACTOR = 4.0


def remove_profiler_overhead(trace: Any, graph: Graph, overhead: ProfilerOverhead) -> Graph:
    """``graph`` (fresh from ``build_graph(trace)``) with ``overhead``'s costs
    removed in place (scaled by its ``scale``), then, when its ``cpu_factor``
    (or ``optimizer_cpu_factor``) is not 1, a copy with every CPU task and
    gap scaled by it (the optimizer phase's by ``optimizer_cpu_factor``;
    the ``scale`` pass)."""
    _core.remove_profiler_overhead(trace, graph, **overhead.options())  # forgets its kept baseline replay
    passes: List[Tuple[str, Dict[str, str]]] = []
    if overhead.cpu_factor != 1.0:
        passes.append(("scale", {"cpu": repr(overhead.cpu_factor)}))
    if overhead.optimizer_cpu_factor is not None and overhead.optimizer_cpu_factor != overhead.cpu_factor:
        passes.append(("scale", {"cpu": repr(overhead.optimizer_cpu_factor / overhead.cpu_factor),
                                 "phase": "optimizer"}))
    if not passes:
        return graph
    return _core.predict(graph, passes).predicted_graph


def phase_cpu_ms(graph: Graph, phase: str) -> float:
    """Median over ``graph``'s iterations of the CPU time its ``phase``
    tasks take: their durations on CPU threads, and the framework gaps
    between two tasks of the phase (not the lead-in before the first of a
    run); 0 when no iteration has any."""
    cpu = {i for i, r in enumerate(graph.resources()) if r["kind"] == "cpu_thread"}
    by_resource: Dict[int, List[Dict[str, Any]]] = {}
    for i in range(graph.num_tasks):
        t = graph.task(i)
        if t["resource"] in cpu:
            by_resource.setdefault(t["resource"], []).append(t)
    per_iteration: Dict[int, float] = {}
    for tasks in by_resource.values():
        tasks.sort(key=lambda t: t["recorded_start_ns"])
        previous = ""
        for t in tasks:
            if t["phase"] == phase and t["iteration"] >= 0:
                ns = t["duration_ns"] + (t["gap_ns"] if previous == phase else 0)
                per_iteration[t["iteration"]] = per_iteration.get(t["iteration"], 0.0) + ns / 1e6
            previous = t["phase"]
    return statistics.median(per_iteration.values()) if per_iteration else 0.0


def _bisect(f: Callable[[float], float], lo: float, hi: float, target: float) -> float:
    """x in [lo, hi] where the increasing ``f`` reaches ``target`` (within 0.1%), or the nearer bound."""
    if f(lo) >= target:
        return lo
    if f(hi) <= target:
        return hi
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        got = f(mid)
        if abs(got - target) <= 1e-3 * target:
            return mid
        lo, hi = (mid, hi) if got < target else (lo, mid)
    return (lo + hi) / 2


def fit_profiler_overhead(trace: Any, graph: Graph, overhead: ProfilerOverhead,
                          plain_step_ms: float, plain_optimizer_ms: Optional[float] = None,
                          plain_forward_ms: Optional[float] = None) -> ProfilerOverhead:
    """``overhead`` fitted so that ``graph`` (fresh from ``build_graph(trace)``,
    left as it is), with it removed (:func:`remove_profiler_overhead`),
    replays its iterations in ``plain_step_ms`` (median), the step timed
    without the profiler (``daydream.Profiler``'s ``wait`` steps).

    The measured per-record costs come first. When the graph without them
    replays faster than ``plain_step_ms``, they are scaled down (``scale``
    0..1). When it is still slower, what remains is the profiler slowing
    the work it records (cache and branch-predictor state its callbacks
    disturb, real ops' records costing more than the calibration's cheap
    ones) and the machine running slower during the recording: every CPU
    task and gap is scaled by ``cpu_factor`` (down to 0.25) until it
    matches. When ``plain_step_ms`` is not below the profiled steps' own
    time, the machine's speed changed between the two: nothing is fitted,
    and ``fit_note`` says so.

    With ``plain_optimizer_ms`` (the time inside ``optimizer.step()``
    without the profiler) the optimizer phase gets its own factor, the one
    that makes its CPU time (:func:`phase_cpu_ms`) that long, and the rest
    of the CPU work the factor that then makes the step ``plain_step_ms``
    (each within 0.25..4): what the profiler leaves behind is not spread
    evenly over the step (an optimizer's many tiny ops lose less to it than
    the forward and backward pass do).

    A step that waits for collectives (a recorded data-parallel step) is
    not fitted to its length: how long its all-reduces take moves from step
    to step far more than the profiler's cost (on CPU ranks with gloo, the
    10 recorded steps of one capture of the accuracy harness's transformer
    took 17-32 ms),
    and fitted to it the CPU work came out x0.25 in one capture and with
    nearly all of the profiler's cost left in another. With
    ``plain_forward_ms`` (the model's forward timed without the profiler,
    which communicates nothing) the fit is made to the forward's CPU time
    (:func:`phase_cpu_ms`) instead, the same way, and the optimizer's to
    ``plain_optimizer_ms``.

    Example::

        o = daydream.calibrate.fit_profiler_overhead(trace, graph, daydream.calibrate.profiler_overhead(), 6.2)
        o.scale, o.cpu_factor, o.fitted_replayed_ms
    """
    if not plain_step_ms > 0:
        raise DaydreamError(f"fit_profiler_overhead: plain_step_ms must be > 0 (got {plain_step_ms})")

    def replayed(o: ProfilerOverhead) -> float:
        g = remove_profiler_overhead(trace, graph.copy(), o)
        return statistics.median(it["replayed_ms"] for it in _core.simulate(g).iterations)

    def forward(o: ProfilerOverhead) -> float:
        return phase_cpu_ms(remove_profiler_overhead(trace, graph.copy(), o), "forward")

    # What is fitted: the replayed step to the plain step, or, for a step
    # that waits for collectives, the forward's CPU time to the plain forward.
    to_forward = (plain_forward_ms is not None and plain_forward_ms > 0
                  and graph.summary()["tasks_by_kind"]["collective"] > 0)
    if to_forward:
        measure, target = forward, float(plain_forward_ms)  # type: ignore[arg-type]
        profiled = phase_cpu_ms(graph, "forward")
        unfit = (f"the forward timed without the profiler ({target:.3f} ms) was not faster than the profiled one "
                 f"({profiled:.3f} ms)")
    else:
        measure, target = replayed, plain_step_ms
        profiled = statistics.median(it["measured_ms"] for it in graph.iterations)
        unfit = (f"the steps timed without the profiler ({target:.3f} ms) were not faster than the profiled ones "
                 f"({profiled:.3f} ms)")
    unscaled = replayed(overhead)
    if target >= profiled:
        # The profiler cannot have made them faster: the machine ran
        # slower while they were timed. The measured costs stand.
        return dataclasses.replace(overhead, plain_step_ms=plain_step_ms, unscaled_replayed_ms=unscaled,
                                   fitted_replayed_ms=unscaled,
                                   fit_note=f"not fitted: {unfit}; the machine's speed changed in between")
    if measure(overhead) <= target:
        # Less to remove than measured: the time grows as the scale falls.
        scale = 1.0 - _bisect(lambda s: measure(dataclasses.replace(overhead, scale=1.0 - s)), 0.0, 1.0, target)
        fitted = dataclasses.replace(overhead, scale=scale)
    else:
        factor = _bisect(lambda c: measure(dataclasses.replace(overhead, cpu_factor=c)), MIN_CPU_FACTOR, 1.0, target)
        fitted = dataclasses.replace(overhead, cpu_factor=factor)
    if plain_optimizer_ms is not None and plain_optimizer_ms > 0:
        removed = phase_cpu_ms(remove_profiler_overhead(trace, graph.copy(), dataclasses.replace(
            fitted, cpu_factor=1.0)), "optimizer")
        if removed > 0:
            opt = min(max(plain_optimizer_ms / removed, MIN_CPU_FACTOR), MAX_CPU_FACTOR)
            rest = _bisect(lambda c: measure(dataclasses.replace(fitted, cpu_factor=c, optimizer_cpu_factor=opt)),
                           MIN_CPU_FACTOR, MAX_CPU_FACTOR, target)
            fitted = dataclasses.replace(fitted, cpu_factor=rest, optimizer_cpu_factor=opt,
                                         plain_optimizer_ms=plain_optimizer_ms)
    return dataclasses.replace(fitted, plain_step_ms=plain_step_ms, unscaled_replayed_ms=unscaled,
                               plain_forward_ms=plain_forward_ms if to_forward else None,
                               fitted_replayed_ms=replayed(fitted))


@contextlib.contextmanager
def _without_kineto_marks(drop: Tuple[bytes, ...] = (b"USDT:",)) -> Iterator[None]:
    """Runs the block with the process's stderr (file descriptor 2) held in a
    temporary file, then writes it back without the lines that start with
    one of ``drop``. Kineto (torch 2.13) writes two such lines, at its
    own log level above errors, for every profiler session it starts and
    stops; the calibrations below run dozens of sessions, which would put
    dozens of lines before a user's own output. Anything else written to
    stderr meanwhile (warnings, errors) comes back as it was, in order,
    when the block ends, also when it raises. Without a usable descriptor 2,
    the block runs as it is."""
    held, saved = None, -1
    try:
        held = tempfile.TemporaryFile()
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        pass
    if held is None or saved < 0:
        if held is not None:
            held.close()
        yield
        return
    with held:
        try:
            os.dup2(held.fileno(), 2)
            try:
                yield
            finally:
                try:
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
                os.dup2(saved, 2)
                held.seek(0)
                kept = b"".join(line for line in held.read().splitlines(keepends=True)
                                if not line.startswith(drop))
                if kept:
                    os.write(2, kept)
        finally:
            os.close(saved)


def _count_records(fn: Callable[[], Any], record_shapes: bool) -> int:
    """Operator and annotation ranges the CPU profiler records in one call of ``fn``."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    with profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) as prof:
        fn()
    return len(prof.events())


def _profiled_minus_plain(fn: Callable[[], Any], record_shapes: bool, rounds: int, repeats: int,
                          hooks: Optional[Callable[[], Callable[[], Any]]] = None) -> float:
    """Median over ``rounds`` of (time of ``fn`` under the CPU profiler - time
    without), in ns. Each round times both ``repeats`` times, in alternating
    order, and keeps each one's lowest time (the machine's other work adds to
    both; the lowest is the least disturbed). With ``hooks`` (installs hooks
    and returns their remover) both run under the profiler, with the hooks
    and without."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    def best(under_profiler: bool, with_hooks: bool) -> float:
        remover = hooks() if with_hooks and hooks is not None else None
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=record_shapes) if under_profiler else None
        try:
            if prof is not None:
                prof.__enter__()
            fn()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        finally:
            if prof is not None:
                prof.__exit__(None, None, None)
            if remover is not None:
                remover()
        return min(times)

    plain, costly = ((False, False), (True, False)) if hooks is None else ((True, False), (True, True))
    diffs = []
    for r in range(rounds):
        if r % 2:
            b, a = best(*costly), best(*plain)
        else:
            a, b = best(*plain), best(*costly)
        diffs.append((b - a) * 1e9)
    return statistics.median(diffs)


def _overhead_loops(torch: Any) -> List[Callable[[], None]]:
    """Small training steps of cheap CPU ops (forward with autograd, backward,
    an Adam step), as the profiler sees a real step: one of few-input ops
    (linear, activation, elementwise), one of views whose size and stride
    lists the profiler records (reshape, transpose, as_strided, cat), and
    elementwise ops outside autograd."""
    nn = torch.nn
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 16, generator=g)
    a, b = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    mlp = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    mlp_opt = torch.optim.Adam(mlp.parameters(), lr=1e-3, foreach=False)
    w = nn.Parameter(torch.randn(16, 16, generator=g))
    view_opt = torch.optim.Adam([w], lr=1e-3, foreach=False)

    def linear_step() -> None:
        mlp_opt.zero_grad(set_to_none=True)
        (mlp(x) * 0.5).sum().backward()
        mlp_opt.step()

    def view_step() -> None:
        view_opt.zero_grad(set_to_none=True)
        y = (x @ w).reshape(4, 4, 4).transpose(0, 1).contiguous().view(16, 4)
        z = torch.cat((y, y.as_strided((16, 4), (4, 1), 0)), dim=1).permute(1, 0).flatten()
        z[:8].sum().backward()
        view_opt.step()

    def eager() -> None:
        for _ in range(20):
            torch.relu(a)
            torch.add(a, b)
            a.t()
            a.sum()

    return [linear_step, view_step, eager]


@functools.lru_cache(maxsize=None)
def profiler_overhead(record_shapes: bool = True, rounds: int = 5, repeats: int = 10) -> ProfilerOverhead:
    """Measures what ``daydream.Profiler`` (CPU activity, ``record_shapes``,
    daydream's module and gradient hooks) adds to a training step on this
    machine. Small training steps of cheap CPU ops (linear layers and
    activations; views with size and stride lists; forward, backward and an
    Adam step, with nested records) and a loop of eager elementwise ops are
    timed with and without the profiler (same configuration), in alternating
    order; the extra time over the records they make is the cost per record.
    A chain of ``nn.Identity``
    modules (no op of their own) and a set of parameters whose gradients are
    accumulated are timed under the profiler with and without daydream's
    hooks for the hooks' costs. Takes a second or two; cached per process.

    Example::

        daydream.calibrate.profiler_overhead().per_record_ns   # ~1-3 us on a server CPU
    """
    with _without_kineto_marks():
        return _measure_profiler_overhead(record_shapes, rounds, repeats)


def _measure_profiler_overhead(record_shapes: bool, rounds: int, repeats: int) -> ProfilerOverhead:
    """:func:`profiler_overhead`'s measurement."""
    torch = _torch()
    from .capture import _ModelHooks, _range_factory  # noqa: PLC0415

    samples = []
    for loop in _overhead_loops(torch):
        records = _count_records(loop, record_shapes)
        samples.append((records, _profiled_minus_plain(loop, record_shapes, rounds, repeats)))
    # One cost per record over all loops. (A cost per recorded input on top
    # is not separable here: the loops' inputs per record differ too little
    # for a fit that holds from run to run on a busy machine.)
    per_record = max(0.0, sum(c for _, c in samples) / sum(r for r, _ in samples))

    modules = torch.nn.Sequential(*[torch.nn.Identity() for _ in range(20)])
    x = torch.randn(2, 2)
    calls = 5 * sum(1 for _ in modules.modules())

    def forward() -> None:
        for _ in range(5):
            modules(x)

    def module_hooks() -> Callable[[], Any]:
        return _ModelHooks(modules, _range_factory(torch), grads=False).remove

    # The hooks' cost includes their ranges' records: take those out.
    with_ranges = _profiled_minus_plain(forward, record_shapes, rounds, repeats, hooks=module_hooks)
    module_hook = (with_ranges - per_record * calls) / calls

    g = torch.Generator().manual_seed(1)
    holder = torch.nn.Module()
    holder.params = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(4, generator=g)) for _ in range(20)])
    params = list(holder.params)

    def backward() -> None:
        total = params[0].sum()
        for p in params[1:]:
            total = total + p.sum()
        total.backward()
        for p in params:
            p.grad = None

    def grad_hooks() -> Callable[[], Any]:
        return _ModelHooks(holder, _range_factory(torch), modules=False).remove

    grad_hook = (_profiled_minus_plain(backward, record_shapes, rounds, repeats, hooks=grad_hooks)
                 - per_record * len(params)) / len(params)
    return ProfilerOverhead(per_record_ns=per_record, module_hook_ns=max(0.0, module_hook),
                            grad_hook_ns=max(0.0, grad_hook), record_shapes=record_shapes, fit=tuple(samples))
