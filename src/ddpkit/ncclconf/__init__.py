"""NCCL's own configuration: nccl.conf files, where each NCCL variable comes from, safe edits.

NCCL reads a variable from the process environment first, then from ``$NCCL_CONF_FILE`` if that is
set and non-empty, otherwise from ``~/.nccl.conf``, then from ``/etc/nccl.conf``; a variable that is
already set is never overwritten. Everything here takes the environment, the home directory and
the paths as arguments, so nothing reads this process's state behind the caller's back.
"""
