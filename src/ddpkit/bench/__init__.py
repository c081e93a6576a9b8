"""Benchmark arithmetic: units, nccl-tests bandwidth formulas, and the `ddpkit plan` model.

Importing this package imports nothing heavy (no torch): ``ddpkit.bench.formulas`` is stdlib-only so
the worker programs under :mod:`ddpkit.workers` can share it.
"""
