"""ddpkit: multi-node PyTorch training on ordinary rented GPU instances, first time."""

__version__ = "0.1.0"
