"""Re-records the CPU optimizer traces the fused_optimizer tests read.

    python tests/data/passes/record.py   # torch==2.13.0 CPU build, any machine

A three-layer MLP (64 -> 256 -> 256 -> 10, batch 32, 6 parameters) trained
with Adam, profiled by plain torch.profiler (record_shapes, no daydream
markers) for three steps after one warm-up:
  cpu_adam_mlp.pt.trace.json.gz        Adam(foreach=False): per-parameter ops
  cpu_adam_fused_mlp.pt.trace.json.gz  Adam(fused=True): one fused op per step
"""
import gzip
import os
import shutil
import tempfile

import torch


def record(path: str, **adam: bool) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **adam)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        schedule = torch.profiler.schedule(wait=0, warmup=1, active=3)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                    record_shapes=True,
                                    on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
            for _ in range(4):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
                prof.step()
        with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    record(os.path.join(here, "cpu_adam_mlp.pt.trace.json.gz"), foreach=False)
    record(os.path.join(here, "cpu_adam_fused_mlp.pt.trace.json.gz"), fused=True)
