"""Labelled edges: the seeds of edge classification and edge regression.

A dataset directory may hold the labelled edges of one relation (``python -m fastsample.data
targets`` derives some; the tables builder reads them from an edge table's label column);
meta.json's ``edge_labels`` says which relation and what the labels are::

    edge_labels/train.npy          (E_train, 2) int64 [src, dst]: edges of the relation, in the
    edge_labels/val.npy            (E_val, 2)    topology (a task excludes a batch's own edges,
    edge_labels/test.npy           (E_test, 2)   and their reverses, while sampling)
    edge_labels/train_labels.npy   (E_train,) int64 classes 0..num_classes-1, or float32
    edge_labels/val_labels.npy     values (finite), aligned with the edges
    edge_labels/test_labels.npy

    "edge_labels": {"relation": [src type, relation, dst type], "reverse": the relation
                    holding its edges backwards or null, "kind": "classes" | "values",
                    "num_classes": C (0 for values), "edges": {split: count}}

A partition keeps them per rank in new ids, each edge with the rank that owns its
destination (``part-R/edge_labels/``), as link prediction's splits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fastsample.data.edge_splits import EDGE_SPLITS, edge_keys
from fastsample.data.graph import CSCGraph, DatasetError, open_array

__all__ = ["EdgeLabels", "FOLDER", "load_edge_labels", "edge_label_arrays"]

FOLDER = "edge_labels"
KINDS = {"classes": ("int64",), "values": ("float32",)}


@dataclass(frozen=True)
class EdgeLabels:
    """The labelled edges of one dataset or one rank's share (see the module doc): {split:
    (E, 2) edges} and {split: (E,) labels}."""

    edges: dict
    labels: dict
    meta: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.meta["kind"]


def edge_label_arrays(labels: EdgeLabels) -> dict:
    """{file name under edge_labels/ without .npy: array}."""
    return {**{s: labels.edges[s] for s in EDGE_SPLITS}, **{f"{s}_labels": labels.labels[s] for s in EDGE_SPLITS}}


def load_edge_labels(folder, num_nodes: int, meta: dict, graph: CSCGraph | None = None,
                     mmap: bool = True) -> EdgeLabels:
    """Read and check ``folder/edge_labels/*.npy`` (a dataset directory, or a partition's part-R).

    Args:
        folder: the directory holding edge_labels/; num_nodes: the graph's node count;
        meta: the ``edge_labels`` record of meta.json (or partition.json's dataset);
        graph: the topology, to check that every edge is of the relation (a dataset's own
            check; a partition's parts were checked when it was made); mmap: memory-map.
    Raises DatasetError naming the file: a missing or malformed array, ids out of range,
    labels of the wrong kind, length or range, an edge that is not the relation's.
    """
    folder = Path(folder) / FOLDER
    kind = meta.get("kind")
    if kind not in KINDS:
        raise DatasetError(f"{folder}: edge_labels kind {kind!r}, expected one of {', '.join(KINDS)}")
    edges, labels = {}, {}
    for split in EDGE_SPLITS:
        file = folder / f"{split}.npy"
        e = open_array(folder, split, mmap)
        if e.ndim != 2 or e.shape[1] != 2 or e.dtype.kind not in "iu":
            raise DatasetError(f"{file}: {e.dtype} {e.shape}, expected (edges, 2) integers: [src, dst] rows")
        if len(e) and (int(e.min()) < 0 or int(e.max()) >= num_nodes):
            raise DatasetError(f"{file}: node ids span [{int(e.min())}, {int(e.max())}], outside 0..{num_nodes - 1}")
        y = open_array(folder, f"{split}_labels", mmap)
        yfile = folder / f"{split}_labels.npy"
        if y.dtype.name not in KINDS[kind] or y.shape != (len(e),):
            raise DatasetError(f"{yfile}: {y.dtype} {y.shape}, expected {KINDS[kind][0]} ({len(e)},): one "
                               f"{kind[:-2] if kind == 'classes' else 'value'} per edge of {split}.npy")
        if len(y) and kind == "classes" and (int(y.min()) < 0 or int(y.max()) >= meta.get("num_classes", 0)):
            raise DatasetError(f"{yfile}: labels span [{int(y.min())}, {int(y.max())}], expected "
                               f"0..{meta.get('num_classes', 0) - 1}")
        if len(y) and kind == "values" and not np.isfinite(y).all():
            raise DatasetError(f"{yfile}: {int((~np.isfinite(y)).sum())} labels are not finite (NaN or inf)")
        edges[split], labels[split] = e, y
    out = EdgeLabels(edges, labels, dict(meta))
    if graph is not None:
        _check_in_topology(out, graph, folder)
    return out


def _check_in_topology(labels: EdgeLabels, graph: CSCGraph, folder: Path) -> None:
    """Every labelled edge is an edge of the relation, and none is labelled twice."""
    r = graph.relation(tuple(labels.meta["relation"]))
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    at = np.flatnonzero(graph.edge_type_array() == r)
    known = np.sort(edge_keys(np.asarray(graph.indices, dtype=np.int64)[at], dst[at], graph.num_nodes))
    seen = []
    for split in EDGE_SPLITS:
        e = np.asarray(labels.edges[split], dtype=np.int64)
        keys = edge_keys(e[:, 0], e[:, 1], graph.num_nodes)
        pos = np.minimum(np.searchsorted(known, keys), max(len(known) - 1, 0))
        bad = np.flatnonzero(known[pos] != keys) if len(known) else np.arange(len(keys))
        if len(bad):
            u, v = (int(x) for x in e[bad[0]])
            raise DatasetError(f"{folder / (split + '.npy')}: {len(bad):,} edges are not edges of relation "
                               f"{':'.join(graph.edge_types[r])} in the topology, e.g. row {bad[0]}: {u} -> {v}")
        seen.append(keys)
    keys = np.sort(np.concatenate(seen))
    if len(keys) and (np.diff(keys) == 0).any():
        raise DatasetError(f"{folder}: an edge is labelled twice (in one split or two)")
