"""Calibrations measured on this machine, for passes whose factors depend on
the hardware: the CPU's bf16 speed for ``amp`` on CPU-only graphs, and the
network of the communication backend in use for ``data_parallel``,
``tensor_fusion`` and ``p3``.

Example::

    ratio = daydream.calibrate.amp_cpu_ratio()   # bf16 time / fp32 time for GEMMs here
    daydream.predict(graph, opt=f"amp:cpu_gemm_factor={ratio}")

    net = daydream.calibrate_network()           # gloo between 2 local processes
    daydream.predict(graph, opt="data_parallel", world_size=2, **net.options())
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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


@dataclasses.dataclass
class NetworkCalibration:
    """A network measured with real all-reduces, read as the ring model's
    per-step latency and link bandwidth (t = 2(N-1) latency + 2(N-1)/N bytes /
    bandwidth), the parameters the communication passes take."""

    backend: str
    world_size: int
    latency_us: float
    bandwidth_gbps: float
    samples: List[Dict[str, float]]  # per message size: bytes, mean_ms, median_ms

    def options(self) -> Dict[str, float]:
        """The pass options this calibration sets."""
        return {"latency_us": self.latency_us, "bandwidth_gbps": self.bandwidth_gbps}


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
    bufs = {n: torch.ones(n // 4) for n in sizes}
    times: Dict[int, List[float]] = {n: [] for n in sizes}
    for r in range(3 + repeats):
        for n in sizes:
            t0 = time.perf_counter()
            dist.all_reduce(bufs[n])
            if r >= 3:
                times[n].append(time.perf_counter() - t0)
    samples = [(n, statistics.fmean(times[n])) for n in sizes]
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
    return {
        "latency_us": c0 / steps * 1e6,
        "bandwidth_gbps": (steps / max(world_size, 2)) / c1 / 1e9,
        "samples": [{"bytes": n, "mean_ms": t * 1e3, "median_ms": statistics.median(times[n]) * 1e3}
                    for n, t in samples],
    }


def _calibration_worker(rank: int, world_size: int, port: int, max_bytes: int, repeats: int,
                        queue: Any) -> None:
    torch = _torch()
    import torch.distributed as dist  # noqa: PLC0415

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size)
        fit = fit_all_reduce(dist, torch, world_size, max_bytes, repeats)
        dist.destroy_process_group()
        if rank == 0:
            queue.put(("ok", fit))
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
    localhost (one thread each), the CPU data-parallel setting.

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
        world = dist.get_world_size()
        fit = fit_all_reduce(dist, torch, world, max_bytes, repeats)
        return NetworkCalibration(str(dist.get_backend()), world, fit["latency_us"], fit["bandwidth_gbps"],
                                  fit["samples"])
    import torch.multiprocessing as mp  # noqa: PLC0415

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_calibration_worker, args=(r, world_size, port, max_bytes, repeats, queue),
                         daemon=True) for r in range(world_size)]
    for p in procs:
        p.start()
    result: Optional[Tuple[str, Any]] = None
    try:
        result = queue.get(timeout=timeout_s)
    except Exception:  # queue.Empty
        result = ("error", f"no result within {timeout_s:g} s")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    if result[0] != "ok":
        raise DaydreamError(f"calibrate_network: gloo between {world_size} local processes failed: {result[1]}")
    fit = result[1]
    return NetworkCalibration("gloo", world_size, fit["latency_us"], fit["bandwidth_gbps"], fit["samples"])
