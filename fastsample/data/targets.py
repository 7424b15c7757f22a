"""Derived targets: a dataset's copy with the labels of another task, made from its own
graph, features and classes, so that the tasks beyond node classification have data with a
known structure to learn (tests, benchmarks, accuracy checks).

    node-regression   each labelled node of the target type gets y = tanh(z) standardised,
                      z the mean over its in-neighbours of the target type of x_u . w (a
                      fixed random direction w): a smooth function of the neighbourhood,
                      which the node's own features tell only in part; nodes without such
                      a neighbour are unlabelled (NaN) and leave the splits
    edge-class        the edges of one relation whose endpoints are both labelled nodes of
                      the target type get class M[class(src), class(dst)], M a seeded
                      random table of --classes classes (symmetric on an undirected
                      relation): it depends on both endpoints' classes, and neither
                      endpoint's alone decides it
    edge-regression   the same edges get V[class(src), class(dst)] + noise, V a seeded
                      standard normal table

The edges are split into train/val/test by seeded random fractions (an undirected
relation's edge once, in its src < dst direction) and stay in the topology: the edge tasks
exclude a batch's own edges while sampling (fastsample/data/edge_labels.py).
"""

from __future__ import annotations

import numpy as np

from fastsample.data.edge_labels import FOLDER, edge_label_arrays, EdgeLabels
from fastsample.data.edge_splits import edge_keys, find_reverse
from fastsample.data.graph import SPLITS, DatasetError, carried, write_dataset

__all__ = ["TARGETS", "derive_targets"]

TARGETS = ("node-regression", "edge-class", "edge-regression")


def derive_targets(ds, out, target: str, relation=None, classes: int = 4, fractions=(0.8, 0.1, 0.1),
                   seed: int = 0, overwrite: bool = False) -> dict:
    """Write ``ds`` (a loaded Dataset) to ``out`` with ``target``'s labels (see the module
    doc). ``relation`` names the edge tasks' relation (required where the graph has several);
    ``classes``: edge-class's; ``fractions``: the edges' train, val and test shares.
    Returns the new meta.json. Bad arguments are a DatasetError naming the parameter."""
    if target not in TARGETS:
        raise DatasetError(f"target: {target!r}, expected one of {', '.join(TARGETS)}")
    if ds.num_classes < 1 or np.asarray(ds.labels).dtype.kind == "f":
        raise DatasetError(f"{ds.path}: derived targets start from class labels; its labels are values")
    rng = np.random.default_rng(seed)
    g = ds.graph
    t = ds.target_index
    lo, hi = int(g.node_type_offset[t]), int(g.node_type_offset[t + 1])
    common = dict(name=f"{ds.name}-{target}", target_type=ds.target_type, overwrite=overwrite,
                  source={"loader": "targets", "target": target, "dataset": str(ds.path), "seed": seed},
                  inputs=(ds.path,), **carried(ds))
    if target == "node-regression":
        y = _neighbourhood_target(ds, lo, hi, rng)
        keep = lambda ids: np.asarray(ids)[~np.isnan(y[np.asarray(ids, dtype=np.int64) - lo])]
        return write_dataset(out, g, ds.features, y, *(keep(getattr(ds, s)) for s in SPLITS), num_classes=0,
                             **common)
    labels = _edge_targets(ds, target, relation, classes, fractions, rng, lo, hi)
    return write_dataset(out, g, ds.features, ds.labels, ds.train, ds.val, ds.test, num_classes=ds.num_classes,
                         arrays={f"{FOLDER}/{k}": v for k, v in edge_label_arrays(labels).items()},
                         edge_labels=labels.meta, **common)


def _neighbourhood_target(ds, lo: int, hi: int, rng) -> np.ndarray:
    g = ds.graph
    x = ds.shards[ds.node_type_names[ds.target_index]]
    if x is None:
        raise DatasetError(f"{ds.path}: node-regression targets are made from the target type's features; "
                           f"{ds.target_type} has none")
    w = rng.standard_normal(x.shape[1]) / np.sqrt(x.shape[1])
    s = np.concatenate([np.asarray(x[a:a + (1 << 20)], dtype=np.float64) @ w for a in range(0, hi - lo, 1 << 20)])
    indptr = np.asarray(g.indptr, dtype=np.int64)
    src = np.asarray(g.indices[indptr[lo]:indptr[hi]], dtype=np.int64)
    dst = np.repeat(np.arange(hi - lo), np.diff(indptr[lo:hi + 1]))
    inside = (src >= lo) & (src < hi)  # neighbours of the target type (they have its features)
    total = np.bincount(dst[inside], weights=s[src[inside] - lo], minlength=hi - lo)
    count = np.bincount(dst[inside], minlength=hi - lo)
    y = np.full(hi - lo, np.nan)
    has = (count > 0) & (np.asarray(ds.labels) >= 0)
    if not has.any():
        raise DatasetError(f"{ds.path}: no labelled node of {ds.target_type or 'the graph'} has an in-neighbour of "
                           "its own type: no node-regression target to make")
    z = total[has] / count[has]
    y[has] = np.tanh(z / (z.std() or 1.0)) + 0.05 * rng.standard_normal(int(has.sum()))
    y[has] = (y[has] - y[has].mean()) / (y[has].std() or 1.0)
    return y.astype(np.float32)


def _edge_targets(ds, target: str, relation, classes: int, fractions, rng, lo: int, hi: int) -> EdgeLabels:
    g = ds.graph
    if relation is None and g.num_edge_types > 1:
        raise DatasetError("relation: required where the graph has several edge types (SRC:REL:DST)")
    try:
        r = 0 if relation is None else g.relation(relation)
    except KeyError as e:
        raise DatasetError(f"relation: {e.args[0].removeprefix('relation ')}") from None
    if target == "edge-class" and not 2 <= classes <= 256:
        raise DatasetError(f"classes: {classes}, expected 2..256")
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-9 or not fractions[0]:
        raise DatasetError(f"fractions: {list(fractions)}, expected train, val and test shares summing to 1 "
                           "(train's positive)")
    s, _, d = g.edge_types[r]
    target_type = g.node_types[ds.target_index]
    if (s, d) != (target_type, target_type):
        raise DatasetError(f"relation: {':'.join(g.edge_types[r])}: derived edge targets depend on both endpoints' "
                           f"classes, so both must be of the labelled type {target_type}")
    indptr = np.asarray(g.indptr, dtype=np.int64)
    at = np.flatnonzero(g.edge_type_array()[indptr[lo]:indptr[hi]] == r) + indptr[lo]
    src = np.asarray(g.indices, dtype=np.int64)[at]
    dst = np.searchsorted(indptr, at, side="right") - 1
    reverse = find_reverse(g, r)
    undirected = reverse == r
    labels = np.asarray(ds.labels)
    keep = (src != dst) & (labels[src - lo] >= 0) & (labels[dst - lo] >= 0)
    if undirected:
        keep &= src < dst
    keys = np.unique(edge_keys(src[keep], dst[keep], g.num_nodes))
    if len(keys) < 3:
        raise DatasetError(f"relation: {':'.join(g.edge_types[r])} has {len(keys)} edges between labelled nodes: "
                           "too few to split")
    src, dst = keys // g.num_nodes, keys % g.num_nodes
    K = ds.num_classes
    cs, cd = labels[src - lo], labels[dst - lo]
    if target == "edge-class":
        table = rng.integers(0, classes, size=(K, K))
        y = table[np.minimum(cs, cd), np.maximum(cs, cd)] if undirected else table[cs, cd]
        y = y.astype(np.int64)
    else:
        table = rng.standard_normal((K, K))
        y = (table[np.minimum(cs, cd), np.maximum(cs, cd)] if undirected else table[cs, cd])
        y = (y + 0.1 * rng.standard_normal(len(y))).astype(np.float32)
    order = rng.permutation(len(keys))
    bounds = np.cumsum([0, round(fractions[0] * len(keys)), round(fractions[1] * len(keys))])
    parts = {"train": order[:bounds[1]], "val": order[bounds[1]:bounds[2]], "test": order[bounds[2]:]}
    parts = {k: np.sort(v) for k, v in parts.items()}
    edges = {k: np.stack([src[v], dst[v]], axis=1) for k, v in parts.items()}
    meta = {"relation": list(g.edge_types[r]), "reverse": None if reverse is None else list(g.edge_types[reverse]),
            "kind": "classes" if target == "edge-class" else "values",
            "num_classes": int(classes) if target == "edge-class" else 0,
            "edges": {k: len(v) for k, v in edges.items()}}
    return EdgeLabels(edges, {k: y[v] for k, v in parts.items()}, meta)
