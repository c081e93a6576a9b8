"""A training script written for torchrun: the local rank comes from LOCAL_RANK and the script takes
no local-rank option at all, so an extra argument would be rejected. Written for ddpkit's tests."""

import argparse
import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()  # anything else on the command line is an error
local_rank = int(os.environ["LOCAL_RANK"])

if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
    device, backend, ids = torch.device("cuda", local_rank), "nccl", [local_rank]
else:
    device, backend, ids = torch.device("cpu"), "gloo", None
dist.init_process_group(backend)

model = DistributedDataParallel(torch.nn.Linear(16, 1).to(device), device_ids=ids)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(args.steps):
    optimizer.zero_grad()
    model(torch.randn(8, 16, device=device)).pow(2).mean().backward()
    optimizer.step()
print(f"rank {dist.get_rank()} local_rank {local_rank} finished {args.steps} steps", flush=True)
# Free the model before the group: torch 2.13's Gloo can abort at interpreter exit otherwise
# (ddpkit's launch summary names it; tests/fixtures/tracebacks/exit-abort-torchrun.log).
del model, optimizer
gc.collect()
dist.destroy_process_group()
