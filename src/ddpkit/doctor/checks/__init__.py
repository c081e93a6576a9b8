"""Preflight checks of this node for ``ddpkit doctor`` (without ``--log``).

:mod:`.facts` gathers what the checks need (the only I/O: files under /proc, /sys and /dev,
``nvidia-smi -L``, the hostname resolver, a local bind); :mod:`.local` turns those facts into
pass/warn/fail rows (pure); :mod:`.network` adds the interface, route and NCCL-settings rows from
:mod:`ddpkit.net` and :mod:`ddpkit.ncclconf`. Nothing here imports torch or initialises CUDA.
"""
