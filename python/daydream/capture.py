"""Capturing training iterations in-process with torch.profiler.

Three lines in a training loop::

    prof = daydream.Profiler(warmup=2, active=3, model=model, optimizer=opt)
    with prof:
        for batch in loader:
            train_step(batch)
            prof.step()
    graph = prof.graph

or one call for a model and a batch::

    graph = daydream.profile(model, inputs, target=labels, loss_fn=nn.CrossEntropyLoss())

What the profiler alone does not know is written into the trace itself as
record_function ranges, so a saved trace carries it too:

- ``daydream.module: <qualified name>`` around every ``nn.Module`` forward
  (names from ``named_modules()``); the graph's layers come from them, and
  backward ops join their forward layer through autograd's sequence number;
- ``daydream.grad: <name>|<dtype>|<shape>|<bytes>`` when a parameter's
  gradient has been accumulated (``register_post_accumulate_grad_hook``); the
  graph's gradient tensors come from them, each produced by the task that ran
  just before.

torch is imported only when a Profiler is created.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _core, api
from ._core import DaydreamError, Graph

_log = logging.getLogger("daydream")

#: How far (a fraction of the smaller) the plain steps timed before and after
#: the recorded ones may move before a capture counts as drifted
#: (:meth:`Profiler.speed_drift`; :func:`profile_steps` records again).
SPEED_DRIFT = 0.15

MODULE_PREFIX = "daydream.module: "
GRAD_PREFIX = "daydream.grad: "


def thread_runqueue_ms() -> Optional[float]:
    """How long the calling thread has waited for a core so far, in ms: the
    run-queue time Linux keeps per thread (``/proc/thread-self/schedstat``,
    its second field); None where the kernel does not keep it."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return None


class RunqueueClock:
    """:func:`thread_runqueue_ms` of the thread that made it, read through
    the file kept open: under a microsecond a read, against several to open
    it, so that steps timed without the profiler can read it inside their
    timed part. A read returns None where the kernel does not keep it, from
    another thread, or once closed."""

    def __init__(self) -> None:
        self._thread = threading.get_native_id()
        try:
            self._fd: Optional[int] = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> Optional[float]:
        if self._fd is None or threading.get_native_id() != self._thread:
            return None
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) / 1e6
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415 - torch is optional and heavy
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise DaydreamError("daydream.Profiler needs PyTorch: pip install torch") from e
    return torch


def grad_marker(name: str, dtype: str, shape: Sequence[int], nbytes: int) -> str:
    """The range name that marks ``name``'s gradient as ready."""
    dims = ",".join(str(int(d)) for d in shape)
    return f"{GRAD_PREFIX}{name}|{dtype}|[{dims}]|{int(nbytes)}"


def _range_factory(torch: Any) -> Any:
    """The cheapest record_function-like context manager this torch has:
    _RecordFunctionFast (C++, ~1 us per range, the one torch.compile uses)
    when present, else the public record_function (~17 us)."""
    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    return fast if fast is not None else torch.autograd.profiler.record_function


class _ModelHooks:
    """Forward ranges per module and gradient-ready markers per parameter."""

    def __init__(self, model: Any, record_function: Any, *, modules: bool = True, grads: bool = True) -> None:
        self._handles: List[Any] = []
        self._open: Dict[int, List[Any]] = {}
        self._record_function = record_function
        root_name = type(model).__name__
        for name, module in model.named_modules() if modules else ():
            qualified = name or root_name
            self._handles.append(module.register_forward_pre_hook(functools.partial(self._enter, qualified)))
            self._handles.append(
                module.register_forward_hook(functools.partial(self._exit, qualified), always_call=True)
            )
        seen = set()
        for name, param in model.named_parameters() if grads else ():
            if id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            dtype = str(param.dtype).replace("torch.", "")
            marker = grad_marker(name, dtype, tuple(param.shape), param.numel() * param.element_size())
            self._handles.append(param.register_post_accumulate_grad_hook(functools.partial(self._grad, marker)))

    def _enter(self, name: str, module: Any, args: Any) -> None:
        rf = self._record_function(MODULE_PREFIX + name)
        rf.__enter__()
        self._open.setdefault(id(module), []).append(rf)

    def _exit(self, name: str, module: Any, args: Any, output: Any) -> None:
        stack = self._open.get(id(module))
        if stack:
            stack.pop().__exit__(None, None, None)

    def _grad(self, marker: str, param: Any) -> None:
        with self._record_function(marker):
            pass

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._open.clear()


class Profiler:
    """Records training iterations and turns them into a :class:`daydream.Graph`.

    Like ``torch.profiler.schedule``: ``wait`` steps run without the
    profiler, ``warmup`` steps profiled and discarded, then ``active`` steps
    recorded, so ``wait + warmup + active`` calls of :meth:`step` (one per
    training iteration) complete a recording. CPU activity is always
    recorded, CUDA activity when a GPU is available. The ``wait`` steps are
    timed (their median is :attr:`plain_step_ms`): they are the step as it
    runs without a profiler, and the overhead removal below is fitted to it.
    Each is timed from the end of the Profiler's own work before it
    (entering ``with profiler:``, or the :meth:`step` call before) to the
    :meth:`step` call that ends it, so what :meth:`step` does is in none.

    ``model`` adds layers and gradient tensors; ``optimizer`` is accepted so
    the optimizer step can be recognized even when it is not
    ``torch.optim.Optimizer`` (torch's own optimizers annotate themselves),
    and a torch.optim optimizer's ``step()`` is timed apart in the ``wait``
    steps (:attr:`plain_optimizer_ms`, through its step hooks).

    The profiler slows what it records: each recorded op costs its enter and
    exit callbacks (more with ``record_shapes``), each module forward and
    parameter gradient daydream's hooks. ``remove_overhead`` (default: on
    when only CPU activity is recorded) measures those costs on this machine
    (:func:`daydream.calibrate.profiler_overhead`, a second or two, once per
    process) and takes them out of :attr:`graph`'s CPU tasks and gaps, so
    that the graph replays the step as it runs without a profiler;
    ``graph.profiler_overhead`` says what was removed. Those costs are
    measured on cheap ops and do not cover all that the profiler slows, so
    with ``wait`` steps timed the graph is then fitted to
    :attr:`plain_step_ms` (:func:`daydream.calibrate.fit_profiler_overhead`:
    what remains is spread over the CPU work in proportion to its time, the
    optimizer step's, when timed apart, fitted to :attr:`plain_optimizer_ms`);
    :attr:`overhead` says how. The saved trace is the recording as it is.

    Example::

        prof = daydream.Profiler(wait=10, warmup=2, active=3, model=model)
        with prof:
            for x, y in loader:  # 15 steps or more
                train_step(x, y)
                prof.step()
        prof.graph.summary()["tasks_by_phase"]
        prof.save_trace("run.pt.trace.json.gz")
    """

    def __init__(
        self,
        warmup: int = 2,
        active: int = 3,
        *,
        wait: int = 10,
        model: Any = None,
        optimizer: Any = None,
        record_shapes: bool = True,
        cuda: Optional[bool] = None,
        remove_overhead: Optional[bool] = None,
    ) -> None:
        if warmup < 0 or wait < 0 or active < 1:
            raise DaydreamError(f"Profiler: need wait >= 0, warmup >= 0, active >= 1 (got {wait}, {warmup}, {active})")
        self.wait, self.warmup, self.active = wait, warmup, active
        self.model, self.optimizer = model, optimizer
        self.record_shapes = record_shapes
        self._cuda = cuda
        self.remove_overhead = remove_overhead
        #: The costs removed from :attr:`graph` (a daydream.calibrate.ProfilerOverhead), None when none were.
        self.overhead: Any = None
        self._cuda_recorded = False
        self._dir = tempfile.mkdtemp(prefix="daydream-")
        self._trace_path: Optional[str] = None
        self._graph: Optional[Graph] = None
        self._prof: Any = None
        self._hooks: Optional[_ModelHooks] = None
        self._steps = 0
        # perf_counter where each wait step began (the end of start() or of
        # the step() before it) and where it ended (step() called): what
        # step() itself does is in neither, as it is in no unprofiled step.
        self._wait_begins: List[float] = []
        self._wait_ends: List[float] = []
        # The training thread's run-queue time (thread_runqueue_ms) at start()
        # and at each step's end, read only where recorded_cpu_wait_ms needs
        # it (None elsewhere): the read takes a few percent of a millisecond
        # step, which the wait steps must not pay.
        self._runqueue_stamps: List[Optional[float]] = []
        # The optimizer's step() timed apart in the wait steps (its pre/post hooks).
        self._step_hooks: List[Any] = []
        self._step_began: Optional[float] = None
        self._step_depth = 0  # optimizer.step() calls open (a step that raised leaves one; step() resets it)
        self._step_s = 0.0  # inside optimizer.step() during the current wait step
        self._optimizer_s: List[float] = []  # per wait step
        # The model's forward timed apart in the wait steps (its forward pre-hook and hook).
        self._forward_hooks: List[Any] = []
        self._forward_began: Optional[float] = None
        self._forward_s = 0.0  # inside the model's forward during the current wait step
        self._forward_times_s: List[float] = []  # per wait step
        # The training thread's run-queue time at the end of the step's last
        # forward and at the step's end, in the wait steps where the model's
        # forward is timed (a RunqueueClock, None elsewhere): the wait for a
        # core of an unprofiled step after its forward, per wait step.
        self._runqueue_clock: Optional[RunqueueClock] = None
        self._forward_end_runqueue: Optional[float] = None
        self._after_forward_waits_ms: List[float] = []
        #: The positional inputs of ``model``'s first recorded forward, the
        #: tensors themselves (references, not copies: calibrations whose cost
        #: depends on values, such as token ids, run on them); None without a
        #: model, or when one is not a tensor. :attr:`model_inputs` has their
        #: shapes and dtypes.
        self.model_input_values: Optional[List[Any]] = None
        self._input_hook: Any = None
        #: Step times (ms) run without the profiler after the recorded ones
        #: (:func:`profile_steps` times ``wait`` of them; empty otherwise): with
        #: :attr:`plain_step_times_ms`, whether the machine's speed held while
        #: recording (:meth:`speed_drift`).
        self.plain_step_times_after_ms: List[float] = []
        #: Set by :func:`profile_steps`: per capture it made (this one among
        #: them), how far the machine's speed moved while recording
        #: (:meth:`speed_change`); more than one when it recorded again.
        self.capture_tries: List[Optional[float]] = []

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "Profiler":
        torch = _torch()
        from torch.profiler import ProfilerActivity, profile, schedule  # noqa: PLC0415

        activities = [ProfilerActivity.CPU]
        cuda = torch.cuda.is_available() if self._cuda is None else self._cuda
        if cuda:
            activities.append(ProfilerActivity.CUDA)
        self._cuda_recorded = bool(cuda)
        with warnings.catch_warnings():
            # warmup=0 is the caller's explicit choice; torch warns about it.
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            steps = schedule(wait=self.wait, warmup=self.warmup, active=self.active, repeat=1)
        self._prof = profile(
            activities=activities,
            schedule=steps,
            on_trace_ready=self._on_ready,
            record_shapes=self.record_shapes,
        )
        self._prof.__enter__()
        self._runqueue_stamps = [self._runqueue_stamp(0)]
        if self.wait == 0:
            self._install_hooks()
        else:
            self._time_optimizer_steps()
            self._time_forwards()
        self._wait_begins, self._wait_ends = [time.perf_counter()], []
        return self

    def _runqueue_stamp(self, i: int) -> Optional[float]:
        """thread_runqueue_ms() for stamp ``i`` (0 at start(), k + 1 at the
        end of step k) where recorded_cpu_wait_ms reads it, else None."""
        first = self.wait + self.warmup
        return thread_runqueue_ms() if first <= i <= first + self.active else None

    def _time_optimizer_steps(self) -> None:
        """Times ``optimizer.step()`` in the wait steps (torch.optim's step
        hooks: two clock reads a step), for :attr:`plain_optimizer_ms`."""
        register = (getattr(self.optimizer, "register_step_pre_hook", None),
                    getattr(self.optimizer, "register_step_post_hook", None))
        if not all(callable(r) for r in register):
            return

        # A subclass's step() calling its base's runs the hooks once per
        # level: the outermost pair times it.
        def begin(*_: Any) -> None:
            self._step_depth += 1
            if self._step_depth == 1:
                self._step_began = time.perf_counter()

        def end(*_: Any) -> None:
            self._step_depth -= 1
            if self._step_depth == 0 and self._step_began is not None:
                self._step_s += time.perf_counter() - self._step_began
                self._step_began = None

        self._step_hooks = [register[0](begin), register[1](end)]

    def _time_forwards(self) -> None:
        """Times the model's forward in the wait steps (a forward pre-hook
        and hook: two clock reads a call), for :attr:`plain_forward_ms`. On
        a DistributedDataParallel model, the module it wraps: DDP's own
        forward may wait for the buffers' broadcast, communication that the
        graph's forward phase does not hold."""
        module = self.model
        if type(module).__name__ == "DistributedDataParallel" and getattr(module, "module", None) is not None:
            module = module.module
        register = (getattr(module, "register_forward_pre_hook", None), getattr(module, "register_forward_hook", None))
        if not all(callable(r) for r in register):
            return

        def begin(*_: Any) -> None:
            self._forward_began = time.perf_counter()

        clock = self._runqueue_clock = RunqueueClock()

        def end(*_: Any) -> None:
            if self._forward_began is not None:
                self._forward_s += time.perf_counter() - self._forward_began
                self._forward_began = None
                self._forward_end_runqueue = clock()

        self._forward_hooks = [register[0](begin), register[1](end)]

    def _untime_wait_steps(self) -> None:
        for h in self._step_hooks + self._forward_hooks:
            h.remove()
        self._step_hooks = []
        self._forward_hooks = []
        if self._runqueue_clock is not None:
            self._runqueue_clock.close()
            self._runqueue_clock = None

    def _install_hooks(self) -> None:
        # Not in the wait steps: the hooks' ranges cost time even with the profiler off.
        if self.model is not None and self._hooks is None:
            self._hooks = _ModelHooks(self.model, _range_factory(_torch()))
            if self.model_input_values is None and callable(getattr(self.model, "register_forward_pre_hook", None)):
                self._input_hook = self.model.register_forward_pre_hook(self._note_inputs)

    def _note_inputs(self, module: Any, args: Any) -> None:
        """The model's positional inputs, from its first recorded forward
        (None when one is not a tensor)."""
        torch = _torch()
        if all(isinstance(a, torch.Tensor) for a in args):
            self.model_input_values = list(args)
        if self._input_hook is not None:
            self._input_hook.remove()
            self._input_hook = None

    def step(self) -> None:
        """Marks the end of one training iteration."""
        if self._prof is None:
            raise DaydreamError("Profiler.step() called outside `with profiler:` (or before start())")
        if self._steps < self.wait:
            self._wait_ends.append(time.perf_counter())
            if self._step_hooks:
                self._optimizer_s.append(self._step_s)
                self._step_s, self._step_depth, self._step_began = 0.0, 0, None
            if self._forward_hooks:
                self._forward_times_s.append(self._forward_s)
                self._forward_s, self._forward_began = 0.0, None
                now = self._runqueue_clock() if self._runqueue_clock is not None else None
                if now is not None and self._forward_end_runqueue is not None:
                    self._after_forward_waits_ms.append(max(0.0, now - self._forward_end_runqueue))
                self._forward_end_runqueue = None
        self._runqueue_stamps.append(self._runqueue_stamp(self._steps + 1))
        self._prof.step()
        self._steps += 1
        if self._steps == self.wait:
            self._untime_wait_steps()
            self._install_hooks()
        elif self._steps < self.wait:
            self._wait_begins.append(time.perf_counter())

    @property
    def plain_step_ms(self) -> Optional[float]:
        """Median time of the ``wait`` steps, run without the profiler or
        daydream's hooks (each from the end of the Profiler's work before it
        to the :meth:`step` call that ends it); None before one has ended."""
        times = self.plain_step_times_ms
        return statistics.median(times) if times else None

    @property
    def plain_step_times_ms(self) -> List[float]:
        """Each ``wait`` step's time (ms), run without the profiler or
        daydream's hooks; their median is :attr:`plain_step_ms`."""
        return [(end - begin) * 1e3 for begin, end in zip(self._wait_begins, self._wait_ends)]

    @property
    def recorded_cpu_wait_ms(self) -> Optional[List[float]]:
        """Per recorded (``active``) step, in order, how long the thread that
        called :meth:`step` (the one that trains) waited for a core: ready to
        run while other threads held the cores (Linux schedstat, see
        :func:`thread_runqueue_ms`). On CPU ranks whose collectives run on
        gloo's threads, that is what they took from the computing thread,
        which ``tensor_fusion`` takes off with the recorded all-reduces
        (``recorded_cpu_wait_us``). None where the kernel does not keep it
        or before the recording ended."""
        first = self.wait + self.warmup
        stamps = self._runqueue_stamps[first:first + self.active + 1]
        if len(stamps) != self.active + 1 or any(s is None for s in stamps):
            return None
        return [max(0.0, b - a) for a, b in zip(stamps, stamps[1:])]  # type: ignore[operator]

    @property
    def plain_cpu_wait_after_forward_ms(self) -> Optional[float]:
        """Median over the ``wait`` steps (run without the profiler) of how
        long the training thread waited for a core from the end of the
        model's forward to the step's end (Linux schedstat, see
        :func:`thread_runqueue_ms`). On CPU ranks whose gradient all-reduces
        run on gloo's threads, what they took from it in a step the profiler
        did not slow, which ``tensor_fusion`` takes off with the recorded
        all-reduces (``unprofiled_cpu_wait_us``). None without ``model=``,
        where the kernel does not keep it, or before a wait step ended."""
        waits = self._after_forward_waits_ms
        return statistics.median(waits) if waits else None

    @property
    def model_inputs(self) -> Optional[List[Tuple[Tuple[int, ...], Any]]]:
        """Shape and dtype of each of :attr:`model_input_values`; None without them."""
        values = self.model_input_values
        return None if values is None else [(tuple(a.shape), a.dtype) for a in values]

    @property
    def plain_step_after_ms(self) -> Optional[float]:
        """Median of :attr:`plain_step_times_after_ms`; None when none were timed."""
        after = self.plain_step_times_after_ms
        return statistics.median(after) if after else None

    def speed_change(self) -> Optional[float]:
        """How far the median of the plain steps timed after the recorded
        ones (:attr:`plain_step_times_after_ms`) is from the median of those
        before (:attr:`plain_step_ms`), as a fraction of the smaller; None
        without both."""
        before, after_ms = self.plain_step_ms, self.plain_step_after_ms
        if before is None or after_ms is None or min(before, after_ms) <= 0:
            return None
        return abs(after_ms - before) / min(after_ms, before)

    def tries_note(self) -> Optional[str]:
        """What :func:`profile_steps` did when it recorded more than once;
        None when it recorded once."""
        if len(self.capture_tries) < 2:
            return None
        moved = ", ".join("?" if m is None else f"{100 * m:.0f}%" for m in self.capture_tries)
        this = self.speed_change()
        return (f"recorded {len(self.capture_tries)} times because the machine's speed changed while recording "
                f"(the plain steps before and after the recorded ones more than {100 * SPEED_DRIFT:.0f}% apart, here "
                "or, in a job, on "
                f"another rank; here {moved}); this capture's moved {'?' if this is None else f'{100 * this:.0f}%'}")

    def speed_drift(self, threshold: float = SPEED_DRIFT) -> Optional[str]:
        """A note when the plain steps timed after the recorded ones
        (:attr:`plain_step_times_after_ms`) have a median more than
        ``threshold`` away from those before (:attr:`plain_step_ms`), as a
        fraction of the smaller (:meth:`speed_change`): the machine's speed
        changed while recording, so the recorded op times are of a faster or
        slower moment than the steps around them. None when it held, or
        without both."""
        change = self.speed_change()
        if change is None or change <= threshold:
            return None
        before, after_ms = self.plain_step_ms, self.plain_step_after_ms
        return (f"the machine's speed changed while daydream.Profiler recorded: the step timed without the "
                f"profiler took {before:.3f} ms (median of {len(self.plain_step_times_ms)}) before the recorded "
                f"steps and {after_ms:.3f} ms (median of {len(self.plain_step_times_after_ms)}) after them; the recorded op times, and so "
                "the replay and the prediction, are of that moment (a shared or throttled machine): record again "
                "for a steadier baseline")

    @property
    def plain_forward_ms(self) -> Optional[float]:
        """Median time inside the model's forward in the ``wait`` steps
        (given ``model=``; in a DistributedDataParallel model, the module it
        wraps); None without one, or when no wait step ran it."""
        times = [t for t in self._forward_times_s if t > 0]
        if not times:
            return None
        return statistics.median(times) * 1e3

    @property
    def plain_optimizer_ms(self) -> Optional[float]:
        """Median time inside ``optimizer.step()`` in the ``wait`` steps
        (given ``optimizer=`` with torch.optim's step hooks); None without
        one, or when no wait step ran it."""
        times = [t for t in self._optimizer_s if t > 0]
        if not times:
            return None
        return statistics.median(times) * 1e3

    def stop(self) -> None:
        if self._prof is None:
            return
        try:
            self._prof.__exit__(None, None, None)
        finally:
            self._prof = None
            self._untime_wait_steps()
            if self._input_hook is not None:
                self._input_hook.remove()
                self._input_hook = None
            if self._hooks is not None:
                self._hooks.remove()
                self._hooks = None

    def __enter__(self) -> "Profiler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)

    def _on_ready(self, prof: Any) -> None:
        path = os.path.join(self._dir, "trace.json")
        prof.export_chrome_trace(path)
        self._trace_path = path
        self._graph = None

    # -- results ------------------------------------------------------------
    @property
    def trace_path(self) -> str:
        """The recorded Kineto trace (a temporary file; see :meth:`save_trace`)."""
        # torch exports what it has when profiling stops early; without one
        # completed active step that is nothing to build on.
        if self._trace_path is None or self._steps <= self.wait + self.warmup:
            needed = self.wait + self.warmup + self.active
            raise DaydreamError(
                f"Profiler: no trace recorded yet: {self._steps} step() calls made, "
                f"{needed} needed (wait={self.wait}, warmup={self.warmup}, active={self.active})"
            )
        return self._trace_path

    @property
    def graph(self) -> Graph:
        """The graph of the active iterations."""
        if self._graph is None:
            trace = api.load_trace(self.trace_path)
            graph = api.build_graph(trace)
            remove = (not self._cuda_recorded) if self.remove_overhead is None else self.remove_overhead
            if remove:
                if self._prof is not None:
                    raise DaydreamError("Profiler.graph: the profiler is still recording; read the graph after "
                                        "it stops (or pass remove_overhead=False)")
                from . import calibrate  # noqa: PLC0415 - needs torch, like the capture

                overhead = calibrate.profiler_overhead(self.record_shapes)
                plain = self.plain_step_ms
                if plain is not None:
                    overhead = calibrate.fit_profiler_overhead(trace, graph, overhead, plain,
                                                               self.plain_optimizer_ms, self.plain_forward_ms)
                self.overhead = overhead
                graph = calibrate.remove_profiler_overhead(trace, graph, overhead)
            self._graph = graph
        return self._graph

    def save_trace(self, path: str) -> None:
        """Copies the recorded trace to ``path`` (gzip when it ends in .gz).

        Written to a temporary file beside ``path`` and renamed into place: an
        error midway leaves no partial file and an older ``path`` intact.
        """
        src = self.trace_path
        target = os.fspath(path)
        try:
            fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".tmp",
                                       dir=os.path.dirname(os.path.abspath(target)))
        except OSError as e:
            raise DaydreamError(f"{target}: cannot save the trace: {e.strerror or e}") from e
        try:
            with open(src, "rb") as f, os.fdopen(fd, "wb") as raw:
                if target.endswith(".gz"):
                    import gzip  # noqa: PLC0415

                    with gzip.GzipFile(fileobj=raw, mode="wb", filename="") as out:
                        shutil.copyfileobj(f, out)
                else:
                    shutil.copyfileobj(f, raw)
                raw.flush()
                os.fsync(raw.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the trace from other users
            os.replace(tmp, target)
        except BaseException as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(e, OSError):
                raise DaydreamError(f"{target}: cannot save the trace: {e.strerror or e}") from e
            raise


def _default_loss(output: Any) -> Any:
    torch = _torch()
    if isinstance(output, torch.Tensor):
        return output.float().pow(2).mean()
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0].float().pow(2).mean()
    if isinstance(output, dict) and "loss" in output:
        return output["loss"]
    raise DaydreamError("profile(): cannot make a loss from the model's output; pass loss_fn=")


def training_step(
    model: Any,
    inputs: Any,
    target: Any = None,
    loss_fn: Optional[Callable[..., Any]] = None,
    optimizer: Any = None,
) -> Callable[[], None]:
    """A standard training step for ``model``: forward, loss, backward, optimizer step.

    The loss is ``loss_fn(output, target)`` when a target is given,
    ``loss_fn(output)`` when only a loss is, the mean of the output squared
    when neither is. The optimizer defaults to SGD(lr=0.01).
    """
    torch = _torch()
    if optimizer is None:
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
    args = inputs if isinstance(inputs, (tuple, list)) else (inputs,)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        output = model(*args)
        if loss_fn is not None:
            loss = loss_fn(output, target) if target is not None else loss_fn(output)
        else:
            loss = _default_loss(output)
        loss.backward()
        optimizer.step()

    return step


def profile(
    model: Any,
    inputs: Any,
    target: Any = None,
    loss_fn: Optional[Callable[..., Any]] = None,
    optimizer: Any = None,
    warmup: int = 2,
    active: int = 3,
) -> Graph:
    """Profiles standard training steps of ``model`` on ``inputs``, on the
    device the model is on (ten timed without the profiler, then ``warmup +
    active``), and returns the graph of the
    active ones.

    Example::

        graph = daydream.profile(model, torch.randn(32, 64))
        [layer.name for layer in graph.layers()]
    """
    return profile_steps(training_step(model, inputs, target, loss_fn, optimizer), warmup, active, model=model,
                         optimizer=optimizer).graph


def profile_steps(step: Callable[[], Any], warmup: int, active: int, model: Any = None,
                  optimizer: Any = None, wait: int = 10, tries: int = 3,
                  agree: Optional[Callable[[bool], bool]] = None) -> "Profiler":
    """Runs ``wait + warmup + active`` calls of ``step`` under a :class:`Profiler`,
    then ``wait`` more timed plain, and returns it: its graph's trace file
    lives as long as it does.

    When the machine's speed changed while it recorded
    (:meth:`Profiler.speed_drift`: the plain steps before and after more
    than ``SPEED_DRIFT`` apart), it records again, up to ``tries`` captures in all, and
    returns the first whose speed held, else the one whose speed moved
    least; :attr:`Profiler.capture_tries` lists how far each capture's speed
    moved. ``agree``, for a job whose ranks each run the same steps, is
    called after every capture with whether this rank's drifted and returns
    whether any rank's did (an all-reduce), so that they record again
    together."""
    best: Optional[Profiler] = None
    best_moved = math.inf
    moved: List[Optional[float]] = []
    for _ in range(max(1, tries)):
        prof = _profile_once(step, warmup, active, model, optimizer, wait)
        moved.append(prof.speed_change())
        this = math.inf if moved[-1] is None else moved[-1]  # an unknown change counts as the largest
        drifted = prof.speed_drift() is not None
        if agree is not None:
            drifted = bool(agree(drifted))
        if best is None or not drifted or this < best_moved:
            best, best_moved = prof, this
        if not drifted:
            break
    best.capture_tries = moved
    return best


def _profile_once(step: Callable[[], Any], warmup: int, active: int, model: Any, optimizer: Any,
                  wait: int) -> "Profiler":
    prof = Profiler(wait=wait, warmup=warmup, active=active, model=model, optimizer=optimizer)
    with prof:
        for _ in range(wait + warmup + active):
            step()
            prof.step()
    # As many plain steps after the recorded ones as before: whether the
    # machine's speed held while recording (Profiler.speed_drift).
    for _ in range(wait):
        t0 = time.perf_counter()
        step()
        prof.plain_step_times_after_ms.append((time.perf_counter() - t0) * 1e3)
    return prof
