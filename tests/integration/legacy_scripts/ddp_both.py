"""A training script the way the seed page's users write them for `python -m torch.distributed.launch`:
the local rank comes from an argv option, both `--local_rank` and `--local-rank`.
Written for ddpkit's tests (source: the seed page's procedure, /work/shared/seed, and the usual
argparse idiom of such scripts)."""

import argparse
import gc
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1)
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
assert args.local_rank >= 0, f"no local rank was passed (got {args.local_rank})"

if torch.cuda.is_available():
    torch.cuda.set_device(args.local_rank)
    device, backend, ids = torch.device("cuda", args.local_rank), "nccl", [args.local_rank]
else:
    device, backend, ids = torch.device("cpu"), "gloo", None
dist.init_process_group(backend)
assert args.local_rank == int(os.environ["LOCAL_RANK"]), (args.local_rank, os.environ["LOCAL_RANK"])

model = DistributedDataParallel(torch.nn.Linear(16, 1).to(device), device_ids=ids)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(args.steps):
    optimizer.zero_grad()
    model(torch.randn(8, 16, device=device)).pow(2).mean().backward()
    optimizer.step()
print(f"rank {dist.get_rank()} local_rank {args.local_rank} finished {args.steps} steps", flush=True)
# Free the model before the group: torch 2.13's Gloo can abort at interpreter exit otherwise
# (ddpkit's launch summary names it; tests/fixtures/tracebacks/exit-abort-torchrun.log).
del model, optimizer
gc.collect()
dist.destroy_process_group()
