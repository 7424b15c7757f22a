"""fastsample: distributed mini-batch GNN training on CPUs (fused sampling, hybrid partitioning).

The public entry points are importable from here; each is loaded on first use, so
``import fastsample`` does not import torch, numba or mpi4py::

    from fastsample import load_dataset, sample, NodeLoader, GraphSAGE

Command lines: ``python -m fastsample.data`` (fastsample-data), ``python -m
fastsample.partition`` (fastsample-partition), ``python -m fastsample.plan``
(fastsample-plan), ``python -m fastsample.train`` (fastsample-train), and ``python -m
fastsample.infer`` (exact layer-wise inference from a checkpoint).
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_LAZY = {
    "CSCGraph": "fastsample.data.graph", "Dataset": "fastsample.data.graph", "DatasetError": "fastsample.data.graph",
    "load_dataset": "fastsample.data.graph", "write_dataset": "fastsample.data.graph",
    "sample": "fastsample.sampling",
    "PartitionError": "fastsample.partition", "partition_dataset": "fastsample.partition",
    "load_partition": "fastsample.partition",
    "CommError": "fastsample.comm", "Communicator": "fastsample.comm",
    "NodeLoader": "fastsample.loading", "EdgeLoader": "fastsample.loading",
    "GraphSAGE": "fastsample.nn.sage",
    "average_gradients": "fastsample.distributed",
    "layerwise": "fastsample.loading.layerwise",
}

__all__ = ["__version__", *_LAZY]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~50 ms: only when asked

    try:
        return version("fastsample")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
