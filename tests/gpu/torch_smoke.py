#!/usr/bin/env python3
"""torch_smoke.py OUTDIR -- PyTorch under the collector, with torch.profiler in the middle.

30 steps of a 2048x2048 matmul, each in an NVTX range "step"; steps 0-9 run, then a 3 s pause
(the collector drains CUPTI every 2 s), steps 10-19 run inside torch.profiler.profile(), steps
20-29 after it. Writes OUTDIR/kineto.json (torch.profiler's own trace) and prints one line
"torch: ..." with what torch.profiler saw, for tests/gpu/check.py. Exit 3 when torch or CUDA is
missing (the check says SKIP).
"""
import json
import os
import sys
import time

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
    print("torch: unavailable (%s)" % e)
    sys.exit(3)
if not torch.cuda.is_available():
    print("torch: CUDA unavailable (torch %s)" % torch.__version__)
    sys.exit(3)

out = sys.argv[1]
x = torch.randn(2048, 2048, device="cuda")


def step():
    torch.cuda.nvtx.range_push("step")
    y = x @ x
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return y


for _ in range(10):
    step()
time.sleep(3)
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts) as prof:
    for _ in range(10):
        step()
for _ in range(10):
    step()
torch.cuda.synchronize()
path = os.path.join(out, "kineto.json")
prof.export_chrome_trace(path)
with open(path) as f:
    evs = json.load(f).get("traceEvents", [])
kernels = [e for e in evs if e.get("cat") == "kernel"]
print("torch: version %s kineto_kernels %d kineto_events %d" % (torch.__version__, len(kernels), len(evs)))
