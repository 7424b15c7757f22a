"""Distributed pieces: the hybrid feature gather (2 rounds per step) and the gradient average."""

from fastsample.distributed.gather import FeatureGather
from fastsample.distributed.gradients import average_gradients

__all__ = ["FeatureGather", "average_gradients"]
