"""``ddpkit doctor``: diagnosis of failed runs from their logs, and preflight checks.

Log diagnosis: :func:`ddpkit.doctor.log.diagnose.diagnose` (paths in, findings out), built from
:mod:`.logscan` (streaming reader: bytes to events), :mod:`.patterns` (the line table),
:mod:`.rules` with :mod:`.net_rules`, :mod:`.job_rules` and :mod:`.simple_rules` (events to
findings), :mod:`.catalogue` (every finding id, explained) and :mod:`.findings` (the data types).

Import the submodules directly; this package module stays empty so the ``--log`` path never pays
for the preflight checks (or torch).
"""
