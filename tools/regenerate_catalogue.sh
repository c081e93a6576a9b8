#!/usr/bin/env bash
# Regenerate src/ddpkit/doctor/log/messages.json and docs/message-coverage.md (issue 24) the way
# the shipped catalogue was made, with the notes that say how each source was read.
#   NCCL_GIT   git dir of NVIDIA/nccl               (default /work/.mirror/NVIDIA+nccl/repo)
#   GLOO_GIT   git dir of facebookincubator/gloo    (default /work/.mirror/facebookincubator+gloo/repo)
#   TORCH_WHEELS  torch wheels, one per release     (default /work/cache/torch-wheels;
#                 fill it with: python tools/torchwheels.py "$TORCH_WHEELS")
#   TORCH_CPP  stored c10d .cpp files, COMMIT/PATH  (default /work/cache/torch-cpp; see torchcpp.py)
#   DEEPSPEED_GIT, HOROVOD_GIT  git dirs of deepspeedai/DeepSpeed and horovod/horovod (the
#              launchers, each read at one release tag)
#   AWS_OFI_GIT  git dir of aws/aws-ofi-nccl (NCCL's net plugin for EFA, read at the last patch
#              release of each minor, v1.0.1 .. v1.21.1)
# Extra arguments go to catalogue_messages.py (e.g. --torch PYTORCH_GIT_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
NCCL_GIT=${NCCL_GIT:-/work/.mirror/NVIDIA+nccl/repo}
GLOO_GIT=${GLOO_GIT:-/work/.mirror/facebookincubator+gloo/repo}
TORCH_WHEELS=${TORCH_WHEELS:-/work/cache/torch-wheels}
TORCH_CPP=${TORCH_CPP:-/work/cache/torch-cpp}
cpp=()
if [ -d "$TORCH_CPP" ]; then cpp=(--torch-cpp "$TORCH_CPP"); fi
python tools/catalogue_messages.py --nccl "$NCCL_GIT" --gloo "$GLOO_GIT" \
  --torch-wheels "$TORCH_WHEELS" "${cpp[@]}" "$@" \
  --note "nccl: every git tag v2.4.2-1 .. newest of NVIDIA/nccl" \
  --note "gloo: facebookincubator/gloo has no release tags: read at the last commit before each torch release date, and at the newest commit" \
  --note "torch: the last patch release of each minor 1.8 .. 2.13 (v1.8.1 .. v2.13.0, 20 releases), read from its PyPI wheel as a zip file (tools/torchwheels.py: the macOS builds, x86_64 for 1.8-1.10 and arm64 from 1.11, the smallest; the same templates as the linux wheel for 2.13.0): the Python sources of torch/distributed and the c10d headers. The macOS wheels of 1.8 and 1.9 hold no ProcessGroupNCCL/NCCLUtils headers, and torch.distributed.elastic is in torch from 1.9" \
  --note "torch: the c10d .cpp files (ProcessGroupNCCL, ProcessGroupGloo, TCPStore, socket, ...) are in no wheel, and the pytorch repository (4 GB) was too large to fetch here: labels 'git <commit>' are single stored versions of a few of them (read with the search tool's read_file, written to a COMMIT/PATH tree outside the repository and read with --torch-cpp), whose release is not known (no version.txt stored at those commits): listed after the releases, not ordered among them. --torch PYTORCH_GIT_DIR reads every release tag instead"
# The launchers, each read at one release (their templates added to the data file just written),
# and torch's own Python outside torch/distributed (torchwheels.CORE: DDP, SyncBatchNorm,
# DistributedSampler, torch.cuda, torch.multiprocessing.spawn), its launch and process-group
# Python (read again, as --add-torch-launch does alone where the full reading cannot be run) and
# the rest of torch.distributed's Python, from the same wheels
DEEPSPEED_GIT=${DEEPSPEED_GIT:-/work/.mirror/deepspeedai+DeepSpeed/repo}
HOROVOD_GIT=${HOROVOD_GIT:-/work/.mirror/horovod+horovod/repo}
AWS_OFI_GIT=${AWS_OFI_GIT:-/work/.mirror/aws+aws-ofi-nccl/repo}
ACCELERATE_GIT=${ACCELERATE_GIT:-/work/.mirror/huggingface+accelerate/repo}
LIGHTNING_GIT=${LIGHTNING_GIT:-/work/.mirror/Lightning-AI+pytorch-lightning/repo}
# accelerate: the last patch release of each minor v0.10 .. v1.14; Lightning: of each minor 1.6 .. 2.6
ACCELERATE_RELEASES=v0.10.0,v0.11.0,v0.12.0,v0.13.2,v0.14.0,v0.15.0,v0.16.0,v0.17.1,v0.18.0
ACCELERATE_RELEASES+=,v0.19.0,v0.20.3,v0.21.0,v0.22.0,v0.23.0,v0.24.1,v0.25.0,v0.26.1,v0.27.2
ACCELERATE_RELEASES+=,v0.28.0,v0.29.3,v0.30.1,v0.31.0,v0.32.1,v0.33.0,v0.34.2,v1.0.1,v1.1.1
ACCELERATE_RELEASES+=,v1.2.1,v1.3.0,v1.4.0,v1.5.2,v1.6.0,v1.7.0,v1.8.1,v1.9.0,v1.10.1,v1.11.0
ACCELERATE_RELEASES+=,v1.12.0,v1.13.0,v1.14.0
LIGHTNING_RELEASES=1.6.5,1.7.7,1.8.6,1.9.5,2.0.9,2.1.4,2.2.5,2.3.3,2.4.0,2.5.6,2.6.5
AWS_OFI_RELEASES=v1.0.1,v1.1.5,v1.2.0,v1.3.0,v1.4.0,v1.5.0-aws,v1.6.0,v1.7.4-aws,v1.8.1-aws
AWS_OFI_RELEASES+=,v1.9.2-aws,v1.10.0-aws,v1.11.1-aws,v1.12.1-aws,v1.13.2-aws,v1.14.2,v1.15.0
AWS_OFI_RELEASES+=,v1.16.3,v1.17.3,v1.18.0,v1.19.2,v1.20.0,v1.21.1
exec python tools/catalogue_messages.py --remap src/ddpkit/doctor/log/messages.json \
  --add-torch-wheels "$TORCH_WHEELS" --add-torch-launch "$TORCH_WHEELS" \
  --add-torch-distributed "$TORCH_WHEELS" \
  --add "deepspeed=$DEEPSPEED_GIT@v0.19.5:^deepspeed/launcher/[^/]+\.py$" \
  --add "horovod=$HOROVOD_GIT@v0.28.1:^horovod/runner/(?:[^/]+|common/util/[^/]+|util/[^/]+)\.py$" \
  --add "aws-ofi-nccl=$AWS_OFI_GIT@$AWS_OFI_RELEASES:^(?:src|include)/.*\.(?:c|cc|cpp|h)$" \
  --add "accelerate=$ACCELERATE_GIT@$ACCELERATE_RELEASES:^src/accelerate/(?:launchers|state|commands/launch|utils/launch)\.py$" \
  --add "lightning=$LIGHTNING_GIT@$LIGHTNING_RELEASES:^src/(?:lightning/(?:fabric|pytorch)|lightning_fabric|pytorch_lightning)/(?:strategies/launchers|plugins/environments)/[^/]+\.py$"
