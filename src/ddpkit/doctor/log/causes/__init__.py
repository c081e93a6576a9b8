"""Causes that reason from facts: one file per cause, one table (:mod:`registry`)."""
