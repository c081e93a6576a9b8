"""Cluster mode of ``ddpkit doctor``: every node runs the same command and they check each other.

Pure parts: :mod:`.model` (what nodes tell each other, as JSON), :mod:`.matrix` (probe answers to
path results, the all-pairs matrix), :mod:`.fingerprint` (the side-by-side diff of versions, GPUs,
hostnames and NCCL_*/GLOO_* env), :mod:`.verdict` (one interface per node that reaches every
peer, and the exact command lines) and :mod:`.report` (everything together, the JSON payload).

I/O at the edges: :mod:`.sockets` (the echo listener and the probes, stdlib only) and
:mod:`.session` (the meeting in torch's c10d TCPStore on the master, and this node's facts).
Import the submodules directly; only :mod:`.session` imports torch, and only when it runs.
"""
