"""daydream: how fast will one training iteration be after an optimization you
have not built yet?

It reads a PyTorch profiler trace (or records one), builds a dependency graph
of every CPU op, runtime call, GPU kernel, copy and collective, and replays it
in an event simulator.

Example::

    import daydream
    result = daydream.replay("rank0.pt.trace.json.gz")
    print(result)                      # measured vs replayed, per iteration
    result.timeline("replayed.json")   # open in https://ui.perfetto.dev
"""

from ._core import DaydreamError, Graph, Schedule, Trace, TimelineWriter, __version__
from .api import (
    IterationResult,
    Job,
    JobReplayResult,
    ReplayResult,
    build_graph,
    load_job,
    load_trace,
    replay,
    simulate,
)

__all__ = [
    "DaydreamError",
    "Graph",
    "IterationResult",
    "Job",
    "JobReplayResult",
    "Prediction",
    "Profiler",
    "ReplayResult",
    "Schedule",
    "TimelineWriter",
    "Trace",
    "__version__",
    "NetworkCalibration",
    "build_graph",
    "calibrate_network",
    "cupti",
    "load_job",
    "load_trace",
    "passes",
    "predict",
    "predict_many",
    "profile",
    "replay",
    "simulate",
]

# Recording, calibration and prediction load on first use: `daydream replay`
# and `import daydream` need only the reader and the simulator, and the
# command line starts that much sooner (docs/performance.md).
_LAZY = {
    "NetworkCalibration": "calibrate",
    "calibrate_network": "calibrate",
    "Profiler": "capture",
    "profile": "capture",
    "Prediction": "prediction",
    "passes": "prediction",
    "predict": "prediction",
    "predict_many": "prediction",
}
_LAZY_MODULES = ("calibrate", "capture", "cupti", "prediction")


def __getattr__(name):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_LAZY_MODULES))
