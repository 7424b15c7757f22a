"""Distributed pieces: the hybrid feature gather (2 rounds per step)."""

from fastsample.distributed.gather import FeatureGather

__all__ = ["FeatureGather"]
