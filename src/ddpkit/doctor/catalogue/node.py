"""Findings about one machine, or machines that differ: GPUs, /dev/shm, versions, P2P, memory."""

from __future__ import annotations

from ddpkit.doctor.catalogue.base import Entry
from ddpkit.i18n import _

ENTRIES = (
    Entry(
        "duplicate-gpu", "error",
        _("Two ranks on one node use the same GPU"),
        _("NCCL found two ranks bound to the same CUDA device. Usually the training script never "
        "calls torch.cuda.set_device(local_rank), or --nproc-per-node exceeds the GPUs visible "
        "(CUDA_VISIBLE_DEVICES)."),
        _("Bind each rank to its own GPU before init_process_group:\n"
        "  torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
        "and keep --nproc-per-node at most the number of GPUs in `nvidia-smi -L`."),
        "`NCCL WARN Duplicate GPU detected : rank X and rank Y both on CUDA device Z` (also "
        "posted bare, without the NCCL WARN prefix); processes of one machine whose NCCL line "
        "prefixes (`host:pid:tid [dev]`) name the same device, in a run NCCL refused as "
        "ncclInvalidUsage, unless their `Init COMPLETE` lines' busId tell the GPUs apart.",
        94,
    ),
    Entry(
        "shm", "error",
        _("Shared memory (/dev/shm) is too small or not writable"),
        _("NCCL (and DataLoader workers) put buffers in /dev/shm. Containers default to a 64 MB "
        "/dev/shm, which is too small for NCCL's intra-node transport."),
        _("In a rented container: export NCCL_SHM_DISABLE=1 (NCCL then leaves /dev/shm alone, a "
        "little slower), use fewer DataLoader workers (num_workers), and ask the provider for a "
        "larger /dev/shm.\n"
        "If you start the container yourself: docker run --shm-size=16g (or --ipc host); on a "
        "host: mount -o remount,size=16G /dev/shm"),
        "`misc/shmutils.cc ... Error while creating shared memory segment`, `failed to extend "
        "/dev/shm/...`, DataLoader's `insufficient shared memory (shm)`, `No space left on device` "
        "for /dev/shm or torch_ files; Ray's warning that /dev/shm has only N bytes available "
        "for its object store (a warning, where nothing else failed).",
        93,
    ),
    Entry(
        "version-mismatch", "error",
        _("Builds that differ between nodes or do not fit this one"),
        _("The ranks do not all run the same NCCL or torch build, or a build does not fit the "
        "node: its CUDA runtime needs a newer driver than the node has, or the CUDA or NCCL "
        "libraries it loads are not the ones it was built against. NCCL requires the same "
        "version on every rank, and each torch build bundles its own; mixed versions fail or "
        "hang during init."),
        _("Install the same torch build on every node (it bundles NCCL), e.g. pip install "
        "torch==<same version>\n"
        "Compare nodes: python -c 'import torch; print(torch.__version__, "
        "torch.cuda.nccl.version())'\n"
        "or let ddpkit diff them: ddpkit doctor --nnodes <N> --node-rank <R> --master-addr <addr>"),
        "`NCCL INFO NCCL version X` lines that differ between hosts/files; torch builds that "
        "differ between machines or files (collect_env's `PyTorch version: X`, a `torch==X` pip "
        "line; a warning while nothing failed); `CUDA driver version is insufficient for CUDA "
        "runtime version`; a library the build links that the loader cannot load (glibc's "
        "`cannot open shared object file`, macOS dyld's `Library not loaded:`): CUDA's, "
        "NCCL's, and MPI's, UCC's or UCX's for a build with the MPI backend; a library or "
        "extension the loader finds without a CUDA or NCCL function, one of torch's own symbols "
        "or the C++ runtime's (`undefined symbol:`), or needing a newer libstdc++ or glibc "
        "(``version `GLIBCXX_...' not found``).",
        92,
    ),
    Entry(
        "p2p", "error",
        _("Intra-node GPU peer-to-peer fails or hangs"),
        _("Direct GPU-to-GPU transfers inside one machine (CUDA P2P/IPC) failed, or a single-node "
        "multi-GPU job hung in its first collectives: on many cloud VMs and consumer boards P2P "
        "is broken by IOMMU/ACS settings or unsupported between the GPUs."),
        _("Confirm by disabling P2P: export NCCL_P2P_DISABLE=1\n"
        "Inspect the topology: nvidia-smi topo -m (and check ACS/IOMMU on bare metal)"),
        "`NCCL WARN` lines from transport/p2p.cc, `peer access is not supported`, CUDA IPC "
        "failures; a watchdog timeout in a job whose NCCL comms report `nNodes 1`; an NCCL init "
        "that started (`Init START`, or from 2.4 to 2.11 the tree layout, `Trees [0] "
        "-1/-1/-1->1->0`) and never completed, with nothing failing and every rank on one machine (its "
        "ranks' init lines, or nccl-tests' `Rank 0 ... on HOST` table).",
        87,
    ),
    Entry(
        "out-of-memory", "error",
        _("A rank ran out of memory"),
        _("A rank exhausted GPU memory (CUDA out of memory) or host memory (allocator failure or "
        "the kernel's OOM killer), and the job went down with it."),
        _("Lower the per-GPU batch size or sequence length, use gradient checkpointing or mixed "
        "precision, and try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "For host memory: fewer DataLoader workers; check dmesg -T | grep -i oom"),
        "`CUDA out of memory`, `OutOfMemoryError`, `Cuda failure 'out of memory'`, "
        "`DefaultCPUAllocator: can't allocate memory`, `Out of memory: Killed process`; a rank "
        "killed by SIGKILL (`exitcode: -9`, the shell's `Killed`, zsh's `zsh: killed`) while "
        "no rank printed any error (the OOM killer's "
        "signature, named as the likely cause), also beside its peers' lost connections where "
        "DeepSpeed's launcher reports it; the other accelerators' `HIP`, `XPU`, `NPU` or `MPS "
        "backend out of memory`.",
        86,
    ),
    Entry(
        "cuda-error", "error",
        _("A CUDA call failed on a rank"),
        _("NCCL or torch reported a CUDA runtime error (NCCL's `Cuda failure '...'`, "
        "ncclUnhandledCudaError), torch found no usable GPU, or a worker stuck in the GPU "
        "driver survived SIGKILL. The CUDA error in the line names the failure; the usual "
        "causes are a GPU in a bad state (Xid errors in dmesg), a GPU another process holds, or "
        "CUDA_VISIBLE_DEVICES hiding the GPUs. (A driver older than the build's CUDA runtime, "
        "or a CUDA or NCCL library that does not fit the build, is version-mismatch.)"),
        _("Check the GPUs and the driver on that node: nvidia-smi (and dmesg -T | grep -i xid)\n"
        "Compare the driver's CUDA version (nvidia-smi's header) with the build's: python -c "
        "'import torch; print(torch.version.cuda, torch.cuda.is_available())'\n"
        "Check CUDA_VISIBLE_DEVICES in the ranks' environment (e.g. CUDA_VISIBLE_DEVICES=0,1 "
        "for two GPUs); a wedged GPU needs a reset or a reboot."),
        "NCCL's `Cuda failure 'X'` (src/include/checks.h, ncclUnhandledCudaError), torchrun's "
        "`Cuda is not available.` (--nproc-per-node gpu), a worker that `did not exit after "
        "SIGKILL`: catalogued templates, when no more specific finding (out of memory, P2P) "
        "holds. NCCL's `Failed to bind NVLink SHARP (NVLS) Multicast memory ... CUDA error N` "
        "(src/transport/nvls.cc; its advice line where a post wrapped it) names the Fabric "
        "Manager, whatever CUDA's error. CUDA's `invalid device ordinal` where a rank selects "
        "its GPU (`set_device`) or several ranks fail: more processes per node than GPUs; "
        "Ascend's runtime's invalid device id (`error code is 107001`, `runtime result = "
        "107001`), the same on NPUs.",
        85,
    ),
    Entry(
        "node-mismatch", "warning",
        _("Nodes are configured differently"),
        _("The nodes do not look alike: they use different NCCL transports or plugins, different "
        "NCCL_* settings, or two different machines share one hostname (torchrun's c10d "
        "rendezvous and MASTER_ADDR go by hostname)."),
        _("Diff the nodes side by side: ddpkit doctor --nnodes <N> --node-rank <R> --master-addr "
        "<addr>\n"
        "Give every node the same NCCL_*/GLOO_* settings (ddpkit nccl-conf show) and a unique "
        "hostname (hostnamectl set-hostname node1)."),
        "`Using network IB` on one node and `Using network Socket` on another (before NCCL 2.5 "
        "`Using internal Network IB`), in one log's host-prefixed lines or across files; a net "
        "plugin loaded on one node (`NET/Plugin: Loaded net plugin ...`, `Plugin Path : ...`) and "
        "the internal one on another, in a job that failed or hung; `NCCL_* set by environment` "
        "lines that differ; one hostname seen with different addresses; two ranks on one GPU "
        "under one hostname in NCCL's P2P/SHM ring lines; a connection whose send uses "
        "GPUDirect RDMA and whose receive does not (`N[..] -> M[..] [send] via NET/IB/0/GDRDMA`, "
        "`[receive] via NET/IB/1`). A transport or plugin difference in a failed or hung job is "
        "an error, ranked above the failure it explains.",
        80,
    ),
)
