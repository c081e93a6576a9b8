"""Run one node's share of a multi-node job through torchrun, with the right interface."""
