"""The data path: seed sources (nodes; edges with negatives and exclusion) feeding one
loader that samples, gathers and batches (fastsample/loading/loader.py)."""

from fastsample.loading.loader import (Batch, EdgeLoader, Loader, NodeLoader, narrow_features, open_data,
                                      quantize_features)
from fastsample.loading.seeds import EdgeSeeds, NodeSeeds, StepSeeds

__all__ = ["Batch", "EdgeLoader", "EdgeSeeds", "Loader", "NodeLoader", "NodeSeeds", "StepSeeds", "narrow_features",
           "open_data", "quantize_features"]
