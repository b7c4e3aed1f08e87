"""Two-process DDP (gloo) run under daydream.Profiler; writes one trace per
rank into the folder given on the command line, and in its measured/
folder what each Profiler measured (rankN.json). Used by test_capture.py."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import daydream


def run(rank: int, world: int, out_dir: str, port: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    # Small buckets: several all-reduces per iteration.
    ddp = DDP(model, bucket_cap_mb=0.5)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(16, 128), torch.randint(0, 10, (16,))
    prof = daydream.Profiler(wait=3, warmup=1, active=2, model=ddp, optimizer=opt)
    with prof:
        for _ in range(6):
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
            prof.step()
    prof.save_trace(os.path.join(out_dir, f"rank{rank}.pt.trace.json"))
    # What the Profiler measured beside the trace, and how a tensor_fusion
    # prediction takes it.
    graph = prof.graph
    prediction = daydream.predict(prof, opt="tensor_fusion:bucket_mb=25,comm_cpu_share=0.5")
    os.makedirs(os.path.join(out_dir, "measured"), exist_ok=True)  # not a trace: beside the folder's traces
    with open(os.path.join(out_dir, "measured", f"rank{rank}.json"), "w") as f:
        json.dump({"plain_forward_ms": prof.plain_forward_ms, "plain_step_ms": prof.plain_step_ms,
                   "recorded_cpu_wait_ms": prof.recorded_cpu_wait_ms,
                   "plain_cpu_wait_after_forward_ms": prof.plain_cpu_wait_after_forward_ms, "fit": prof.overhead.fit_text(),
                   "iterations": len(graph.iterations), "opts": prediction.opts, "notes": prediction.notes}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1]
    port = sys.argv[2] if len(sys.argv) > 2 else "29541"
    mp.spawn(run, args=(2, out, port), nprocs=2, join=True)
