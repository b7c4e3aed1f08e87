"""Calibrations measured on this machine, for passes whose factors depend on
the hardware: the CPU's bf16 speed for ``amp`` on CPU-only graphs.

Example::

    ratio = daydream.calibrate.amp_cpu_ratio()   # bf16 time / fp32 time for GEMMs here
    daydream.predict(graph, opt=f"amp:cpu_gemm_factor={ratio}")
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable, List, Sequence, Tuple

from ._core import DaydreamError


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover
        raise DaydreamError("calibration needs PyTorch: pip install torch") from e
    return torch


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    for _ in range(3):
        fn()
    times: List[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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

            ratios.append(_median_time(bf16, repeats) / _median_time(fp32, repeats))
    return float(statistics.median(ratios))
