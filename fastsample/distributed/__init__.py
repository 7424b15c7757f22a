"""Distributed pieces: the hybrid feature gather (2 rounds per step), vanilla mode's
sampler (2 rounds per lower layer) and the gradient average."""

from fastsample.distributed.gather import FeatureGather
from fastsample.distributed.gradients import average_gradients
from fastsample.distributed.vanilla import VanillaSampler

__all__ = ["FeatureGather", "VanillaSampler", "average_gradients"]
