"""Making dataset directories: the synthetic generator and the Planetoid and OGB loaders.

    python -m fastsample.data synth|planetoid|ogb|info ...   (fastsample-data)

The loaders return a DatasetArrays record, which ``write()`` stores as a dataset directory
(fastsample.graph). Bad input is a DatasetError naming the file or parameter. The
submodules are imported on first use, so ``import fastsample.data`` stays cheap.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from fastsample.graph import CSCGraph, write_dataset

_LAZY = {
    "SynthConfig": "fastsample.data.synth", "PRESETS": "fastsample.data.synth",
    "write_synthetic": "fastsample.data.synth",
    "load_planetoid": "fastsample.data.planetoid", "load_ogb": "fastsample.data.ogb",
    "edges_to_csc": "fastsample.data.edges",
    "summarize": "fastsample.data.summary", "format_summary": "fastsample.data.summary",
}

__all__ = ["DatasetArrays", *_LAZY]


@dataclass(frozen=True)
class DatasetArrays:
    """A dataset held in memory, as a loader of a foreign format returns it.

    graph:       the in-edge CSC topology
    features:    (N, F) float32
    labels:      (N,) int64 class ids, -1 = unlabelled
    train, val, test: node ids (disjoint, labelled)
    num_classes: the number of classes
    """

    graph: CSCGraph
    features: np.ndarray
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    num_classes: int

    def write(self, path, *, name: str, overwrite: bool = False, **extra) -> dict:
        """Store the arrays as a dataset directory (fastsample.graph.write_dataset).

        Args:
            path: the directory to write; name: the dataset's name;
            overwrite: replace an existing directory; extra: more meta.json fields.
        Returns:
            meta.json's contents.
        """
        return write_dataset(path, self.graph, self.features, self.labels, self.train, self.val, self.test,
                             name=name, num_classes=self.num_classes, overwrite=overwrite, **extra)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
