"""The loader's public names where the README and users' code import them (the loader
lives in fastsample/loading/)."""

from fastsample.loading import Batch, EdgeLoader, Loader, NodeLoader, narrow_features, open_data

__all__ = ["Batch", "EdgeLoader", "Loader", "NodeLoader", "narrow_features", "open_data"]
