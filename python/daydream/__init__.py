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
from . import cupti
from .calibrate import NetworkCalibration, calibrate_network
from .capture import Profiler, profile
from .prediction import Prediction, passes, predict
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
    "profile",
    "replay",
    "simulate",
]
