"""Record CUDA activity in-process with CUPTI, without torch.profiler.

For programs that are not PyTorch, or where torch.profiler's overhead is too
much::

    from daydream import cupti

    with cupti.Collector() as rec:
        run_one_iteration()
        torch.cuda.synchronize()      # or cudaDeviceSynchronize: finish the work
    graph = daydream.build_graph(rec.trace())

The trace holds kernels, copies, memsets, runtime and driver calls and
synchronization, linked by correlation id, as the Kineto reader makes them of
a torch.profiler file; ``external_id`` tags calls with the id of the operator
that made them. CUPTI is process-wide: one collector records at a time, and
not while torch.profiler or Nsight Systems does. libcuda and libcupti are
loaded when a collector is made, so on a machine without a GPU ``Collector()``
raises :class:`daydream.DaydreamError` ("no CUDA driver/device: ...").
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional

from . import _core
from ._core import DaydreamError, Trace

__all__ = ["Collector", "available"]


def available() -> bool:
    """Whether this daydream was built with the CUPTI collector (whether it
    can record here is only known when a :class:`Collector` is made)."""
    return bool(_core.cupti_built())


class Collector:
    """Records this process's CUDA activity between :meth:`start` and
    :meth:`stop` (or a ``with`` block); :meth:`trace` returns it.

    Args:
        buffer_mb: size of each activity buffer handed to CUPTI (0.0625 to 1024).
        max_buffers: most buffers held at once; when CUPTI wants more it drops
            records and the trace warns ``cupti_dropped_records``.
        driver_api: also record driver API (``cu*``) calls.
        driver_library, cupti_library: paths to libcuda / libcupti where the
            standard search misses them (default: ``$DAYDREAM_CUDA_DRIVER`` /
            ``$DAYDREAM_CUPTI``, else the loader's path, ``$CUDA_HOME`` and
            ``/usr/local/cuda``).

    Raises:
        DaydreamError: no CUDA driver or device, CUPTI not found or too old,
            a build without CUPTI, or bad options.
    """

    def __init__(self, buffer_mb: float = 8, max_buffers: int = 32, driver_api: bool = True,
                 driver_library: Optional[str] = None, cupti_library: Optional[str] = None) -> None:
        if not 0.0625 <= buffer_mb <= 1024:
            raise DaydreamError(f"cupti.Collector: buffer_mb must be in [0.0625, 1024], got {buffer_mb}")
        if max_buffers < 1:
            raise DaydreamError(f"cupti.Collector: max_buffers must be at least 1, got {max_buffers}")
        self._c = _core.CuptiCollector(
            buffer_bytes=int(buffer_mb * (1 << 20)), max_buffers=max_buffers, record_driver_api=driver_api,
            driver_library=driver_library or os.environ.get("DAYDREAM_CUDA_DRIVER", ""),
            cupti_library=cupti_library or os.environ.get("DAYDREAM_CUPTI", ""))

    @property
    def recording(self) -> bool:
        return bool(self._c.recording)

    @property
    def cupti_path(self) -> str:
        """The libcupti file loaded."""
        return str(self._c.cupti_path)

    @property
    def cupti_version(self) -> int:
        """The CUPTI API version libcupti reports."""
        return int(self._c.cupti_version)

    def start(self) -> "Collector":
        """Starts recording. Raises DaydreamError while this or another
        collector records, or when CUPTI refuses (another profiler holds it)."""
        self._c.start()
        return self

    def stop(self) -> None:
        """Stops recording and flushes CUPTI's buffers. Synchronize the device
        first: work still running is recorded incompletely."""
        self._c.stop()

    def trace(self) -> Trace:
        """Everything recorded since the collector was made or the last
        ``trace()`` (several start/stop windows accumulate), as a
        :class:`daydream.Trace`; the collector then starts over empty.
        Raises DaydreamError while recording or when nothing was recorded."""
        if self.recording:
            raise DaydreamError("cupti.Collector.trace: still recording: call stop() first")
        return self._c.take_trace()

    @contextlib.contextmanager
    def external_id(self, external_id: int) -> Iterator[None]:
        """Tags the CUDA calls this thread makes inside the block, and the GPU
        work they launch, with ``external_id`` (the trace's "External id")."""
        self._c.push_external_id(external_id)
        try:
            yield
        finally:
            self._c.pop_external_id()

    def __enter__(self) -> "Collector":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.recording:
            self.stop()

    def __repr__(self) -> str:
        state = "recording" if self.recording else "stopped"
        return f"<daydream.cupti.Collector {state}, {self.cupti_path}>"
