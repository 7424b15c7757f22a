"""Edge splits for link prediction: which edges train, which are held out, and the fixed
negatives the held-out ones are ranked against.

In a dataset directory (``python -m fastsample.data link-split`` writes one) they sit
beside the node data; meta.json's ``link`` says how they were made::

    link/train.npy     (E_train, 2) int64 [src, dst]: the training positives, edges of
                       the topology (an undirected graph's once each, src < dst)
    link/val.npy       (E_val, 2) held-out positives: not in the topology (neither
    link/test.npy      (E_test, 2)  direction, when undirected) nor in train
    link/val_neg.npy   (E_val, K) int64: for held-out positive i, K destinations that its
    link/test_neg.npy  (E_test, K)  source has no edge to (OGB's citation2 protocol)

A partition (python -m fastsample.partition) keeps them per rank in new ids, each edge
with the rank that owns its destination: ``part-R/link/*.npy``, and partition.json's
``dataset.link``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fastsample.graph import CSCGraph, DatasetError, open_array

__all__ = ["EdgeSplit", "EDGE_SPLITS", "load_edge_split", "make_edge_split", "edge_keys", "check_held_out"]

EDGE_SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class EdgeSplit:
    """The edges of one dataset or one rank's share (see the module doc)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    val_neg: np.ndarray
    test_neg: np.ndarray
    undirected: bool
    meta: dict = field(default_factory=dict)

    def arrays(self) -> dict:
        """{file name under link/: array}."""
        return {k: getattr(self, k) for k in (*EDGE_SPLITS, "val_neg", "test_neg")}


def edge_keys(src, dst, num_nodes: int, undirected: bool = False) -> np.ndarray:
    """One int64 per edge (src * N + dst; undirected: of the ordered pair), for set tests."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if undirected:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    return src * num_nodes + dst


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    at = np.searchsorted(sorted_keys, keys)
    at[at == len(sorted_keys)] = 0
    return sorted_keys[at] == keys if len(sorted_keys) else np.zeros(np.shape(keys), bool)


def load_edge_split(folder, num_nodes: int, meta: dict, graph: CSCGraph | None = None,
                    mmap: bool = True) -> EdgeSplit:
    """Read and check ``folder/link/*.npy`` (a dataset directory, or a partition's part-R).

    Args:
        folder: the directory holding link/; num_nodes: the graph's node count;
        meta: the ``link`` record of meta.json (or partition.json's dataset);
        graph: the topology, to check that no held-out edge is in it (a dataset's own
            check; a partition's parts were checked when it was made); mmap: memory-map.
    Raises DatasetError naming the file: a missing or malformed array, ids out of range,
    negatives of the wrong shape, a held-out edge among the training edges or the topology.
    """
    folder = Path(folder) / "link"
    arrays = {}
    for name in (*EDGE_SPLITS, "val_neg", "test_neg"):
        arr = open_array(folder, name, mmap)
        if arr.ndim != 2 or arr.dtype.kind not in "iu":
            raise DatasetError(f"{folder / (name + '.npy')}: {arr.dtype} {arr.shape}, expected 2-D integers")
        if name in EDGE_SPLITS and arr.shape[1] != 2:
            raise DatasetError(f"{folder / (name + '.npy')}: shape {arr.shape}, expected (edges, 2): [src, dst] rows")
        if len(arr) and (int(arr.min()) < 0 or int(arr.max()) >= num_nodes):
            raise DatasetError(f"{folder / (name + '.npy')}: node ids span [{int(arr.min())}, {int(arr.max())}], "
                               f"outside 0..{num_nodes - 1}")
        arrays[name] = arr
    for split in ("val", "test"):
        neg = arrays[f"{split}_neg"]
        if len(neg) != len(arrays[split]) or (len(neg) and neg.shape[1] < 1):
            raise DatasetError(f"{folder / (split + '_neg.npy')}: shape {neg.shape}, expected ({len(arrays[split])}, "
                               f"K): K negatives for each of {split}.npy's {len(arrays[split])} edges")
    split = EdgeSplit(**arrays, undirected=bool(meta.get("undirected", False)), meta=dict(meta))
    if graph is not None:
        check_held_out(split, graph, {k: folder / f"{k}.npy" for k in EDGE_SPLITS},
                       {"train": "train.npy", "topology": "the topology (indices.npy)"})
    return split


def check_held_out(split: EdgeSplit, graph: CSCGraph, files: dict, names: dict) -> None:
    """No validation or test edge is a training edge or in the topology (either direction
    of an undirected split); else a DatasetError naming ``files[split]`` and the edge."""
    n = graph.num_nodes
    train = np.sort(edge_keys(split.train[:, 0], split.train[:, 1], n, split.undirected))
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    topology = np.sort(edge_keys(graph.indices, dst, n, split.undirected))
    for name in ("val", "test"):
        e = np.asarray(getattr(split, name))
        keys = edge_keys(e[:, 0], e[:, 1], n, split.undirected)
        for where, known in ((names["train"], train), (names["topology"], topology)):
            hit = np.flatnonzero(_contains(known, keys))
            if len(hit):
                u, v = (int(x) for x in e[hit[0]])
                raise DatasetError(f"{files[name]}: {len(hit)} held-out edges are also in {where}, e.g. {u} -> {v}: "
                                   "a model would train on what it is tested on")


def make_edge_split(graph: CSCGraph, val_fraction: float, test_fraction: float, seed: int = 0,
                    negatives: int = 100) -> tuple[CSCGraph, EdgeSplit]:
    """Hold out a seeded random ``val_fraction`` and ``test_fraction`` of the edges.

    An undirected graph (every edge stored both ways) holds out both directions of an
    edge together; every copy of a held-out edge leaves the topology; self-loops stay in
    it and are never held out or trained on. Each held-out edge gets ``negatives``
    destinations its source has no edge to (in the whole graph), drawn uniformly.
    Returns (the training topology, the split).
    """
    if graph.typed:
        raise DatasetError("link-split: typed graphs are not split yet")
    for name, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0 <= f < 1:
            raise DatasetError(f"{name}: {f}, expected a fraction in [0, 1)")
    if val_fraction + test_fraction >= 1:
        raise DatasetError(f"val_fraction + test_fraction = {val_fraction + test_fraction}: nothing left to train on")
    if negatives < 1:
        raise DatasetError(f"negatives: {negatives}, expected at least 1")
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    src = np.asarray(graph.indices, dtype=np.int64)
    forward = edge_keys(src, dst, n)
    all_keys = np.sort(forward)
    undirected = bool(np.array_equal(all_keys, np.sort(edge_keys(dst, src, n))))
    candidates = np.unique(edge_keys(src, dst, n, undirected)[src != dst])  # canonical, unique, no self-loops
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(candidates))
    nv, nt = int(val_fraction * len(candidates)), int(test_fraction * len(candidates))
    held = {"val": np.sort(candidates[order[:nv]]), "test": np.sort(candidates[order[nv:nv + nt]])}
    train = np.sort(candidates[order[nv + nt:]])
    out = np.sort(np.concatenate([held["val"], held["test"]]))
    kept = ~_contains(out, edge_keys(src, dst, n, undirected))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst[kept], minlength=n))])
    topology = CSCGraph(indptr.astype(graph.indptr.dtype), np.asarray(graph.indices)[kept])
    pairs = lambda keys: np.stack([keys // n, keys % n], axis=1)
    negs = {s: _negatives(pairs(held[s])[:, 0], negatives, n, all_keys, rng) for s in ("val", "test")}
    split = EdgeSplit(pairs(train), pairs(held["val"]), pairs(held["test"]), negs["val"], negs["test"],
                      undirected=undirected,
                      meta={"undirected": undirected, "negatives": int(negatives), "seed": int(seed),
                            "val_fraction": val_fraction, "test_fraction": test_fraction,
                            "edges": {"train": len(train), "val": nv, "test": nt}})
    return topology, split


def _negatives(src: np.ndarray, k: int, n: int, edge_keys_sorted: np.ndarray, rng) -> np.ndarray:
    """(len(src), k) destinations w != src with no edge src -> w, uniform, redrawn until so."""
    out = rng.integers(0, n, size=(len(src), k))
    for _ in range(100):
        bad = (out == src[:, None]) | _contains(edge_keys_sorted, src[:, None] * n + out)
        if not bad.any():
            return out
        out[bad] = rng.integers(0, n, size=int(bad.sum()))
    raise DatasetError("link-split: could not draw negatives: sources with an edge to (nearly) every node")
