"""Making dataset directories: the synthetic generator and the Planetoid and OGB loaders.

    python -m fastsample.data synth|planetoid|ogb|info ...   (fastsample-data)

The loaders return the dataset record (fastsample.data.graph.Dataset, in memory), which
``write()`` stores as a dataset directory. Bad input is a DatasetError naming the file or
parameter. The submodules are imported on first use, so ``import fastsample.data`` stays
cheap.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "SynthConfig": "fastsample.data.synth", "PRESETS": "fastsample.data.synth",
    "write_synthetic": "fastsample.data.synth",
    "load_planetoid": "fastsample.data.planetoid", "load_ogb": "fastsample.data.ogb",
    "edges_to_csc": "fastsample.data.edges",
    "summarize": "fastsample.data.summary", "format_summary": "fastsample.data.summary",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
