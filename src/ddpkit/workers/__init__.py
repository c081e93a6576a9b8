"""Programs that run inside ranks under torchrun (the test program, the collective sweep).

They import only the standard library and torch (the collective sweep also uses the stdlib-only
:mod:`ddpkit.bench.formulas`), read their rank and rendezvous from the environment torchrun gives
them, and write results as versioned JSON documents.
"""
