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

from fastsample.data.graph import CSCGraph, DatasetError, open_array

__all__ = ["EdgeSplit", "EDGE_SPLITS", "load_edge_split", "make_edge_split", "edge_keys", "check_held_out",
           "find_reverse", "relation_of"]

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
    k = meta.get("negatives")  # what the MRR is over: another K is another measure, not a number to compare
    for split in ("val", "test"):
        neg = arrays[f"{split}_neg"]
        if len(neg) != len(arrays[split]) or (len(neg) and neg.shape[1] < 1) or \
                (k is not None and len(neg) and neg.shape[1] != k):
            raise DatasetError(f"{folder / (split + '_neg.npy')}: shape {neg.shape}, expected ({len(arrays[split])}, "
                               f"{'K' if k is None else k}): {'K' if k is None else k} negatives for each of "
                               f"{split}.npy's {len(arrays[split])} edges" + ("" if k is None else
                                                                             f" (meta.json's negatives: {k})"))
    split = EdgeSplit(**arrays, undirected=bool(meta.get("undirected", False)), meta=dict(meta))
    if graph is not None:
        check_types(split, graph, folder)
        check_held_out(split, graph, {k: folder / f"{k}.npy" for k in EDGE_SPLITS},
                       {"train": "train.npy", "topology": "the topology (indices.npy)"})
    return split


def check_types(split: EdgeSplit, graph: CSCGraph, folder: Path) -> None:
    """Every edge's source is of its relation's source type and its destination (and each
    negative) of the destination type; else a DatasetError naming the file, the first edge
    and the type's ids (an id in range for the graph but of another type trains silently
    wrong otherwise)."""
    relation, _ = relation_of(graph, split.meta)
    src_type, _, dst_type = graph.edge_types[relation]
    ranges = {}
    for t in (src_type, dst_type):
        i = graph.node_types.index(t)
        ranges[t] = int(graph.node_type_offset[i]), int(graph.node_type_offset[i + 1])
    columns = {name: ((getattr(split, name)[:, 0], src_type, "source"), (getattr(split, name)[:, 1], dst_type,
                                                                          "destination")) for name in EDGE_SPLITS}
    columns.update({f"{s}_neg": ((getattr(split, f"{s}_neg"), dst_type, "negative"),) for s in ("val", "test")})
    for name, checks in columns.items():
        for ids, t, role in checks:
            lo, hi = ranges[t]
            bad = np.flatnonzero(((ids < lo) | (ids >= hi)).reshape(len(ids), -1).any(axis=1)) if len(ids) else []
            if len(bad):
                raise DatasetError(f"{folder / (name + '.npy')}: row {bad[0]}'s {role} is not a {t} node (relation "
                                   f"{':'.join(graph.edge_types[relation])}; {t} ids are {lo}..{hi - 1}; "
                                   f"{len(bad):,} of {len(ids):,} rows so)")


def check_held_out(split: EdgeSplit, graph: CSCGraph, files: dict, names: dict) -> None:
    """No validation or test edge is a training edge or an edge of its relation in the
    topology (either direction of an undirected split; on a typed graph, neither the
    relation's edge nor its copy in the reverse relation); else a DatasetError naming
    ``files[split]`` and the edge."""
    n = graph.num_nodes
    train = np.sort(edge_keys(split.train[:, 0], split.train[:, 1], n, split.undirected))
    relation, reverse = relation_of(graph, split.meta)
    topology = np.sort(_relation_keys(graph, relation, reverse, split.undirected))
    for name in ("val", "test"):
        e = np.asarray(getattr(split, name))
        keys = edge_keys(e[:, 0], e[:, 1], n, split.undirected)
        for where, known in ((names["train"], train), (names["topology"], topology)):
            hit = np.flatnonzero(_contains(known, keys))
            if len(hit):
                u, v = (int(x) for x in e[hit[0]])
                raise DatasetError(f"{files[name]}: {len(hit)} held-out edges are also in {where}, e.g. {u} -> {v}: "
                                   "a model would train on what it is tested on")


def relation_of(graph: CSCGraph, meta: dict) -> tuple[int, int | None]:
    """(the split's relation, its reverse relation or None) as edge type indices (untyped: 0,
    and 0 again where the graph is undirected)."""
    if "relation" not in meta:
        return 0, (0 if meta.get("undirected") else None)
    reverse = meta.get("reverse")
    return graph.relation(tuple(meta["relation"])), (graph.relation(tuple(reverse)) if reverse else None)


def _edges(graph: CSCGraph, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, positions in indices) of the edges of type r (untyped: every edge)."""
    dst = np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(graph.indptr))
    at = np.flatnonzero(graph.edge_type_array() == r)
    return np.asarray(graph.indices, dtype=np.int64)[at], dst[at], at


def _relation_keys(graph: CSCGraph, r: int, reverse: int | None, undirected: bool) -> np.ndarray:
    """The keys of relation r's edges and of the reverse relation's edges read backwards."""
    n = graph.num_nodes
    src, dst, _ = _edges(graph, r)
    keys = [edge_keys(src, dst, n, undirected)]
    if reverse is not None and reverse != r:
        rs, rd, _ = _edges(graph, reverse)
        keys.append(edge_keys(rd, rs, n, undirected))
    return np.concatenate(keys)


def find_reverse(graph: CSCGraph, r: int) -> int | None:
    """The edge type holding relation r's edges backwards: another relation from r's
    destination type to its source type with exactly those edges (ogbn-mag's rev_writes),
    else r itself where r's edges are symmetric (an undirected graph), else None."""
    n = graph.num_nodes
    src, dst, _ = _edges(graph, r)
    forward = np.sort(edge_keys(src, dst, n))
    candidates = [q for q, (s, _, d) in enumerate(graph.edge_types) if q != r and (s, d) == (
        graph.edge_types[r][2], graph.edge_types[r][0])]
    for q in candidates:
        qs, qd, _ = _edges(graph, q)
        if np.array_equal(forward, np.sort(edge_keys(qd, qs, n))):
            return q
    return r if np.array_equal(forward, np.sort(edge_keys(dst, src, n))) else None


def make_edge_split(graph: CSCGraph, val_fraction: float, test_fraction: float, seed: int = 0,
                    negatives: int = 100, relation=None) -> tuple[CSCGraph, EdgeSplit]:
    """Hold out a seeded random ``val_fraction`` and ``test_fraction`` of a relation's edges.

    ``relation`` names the split's relation on a typed graph (CSCGraph.relation: a name or a
    (src, relation, dst) triple); an untyped graph is its one relation. The relation's
    reverse edges (find_reverse: another relation holding them, or the relation itself on
    an undirected graph) leave the topology with the held-out edges; an undirected
    relation's edge is held out in both directions at once. Every copy of a held-out edge
    leaves the topology; self-loops stay in it and are never held out or trained on. Each
    held-out edge gets ``negatives`` destinations of the relation's destination type that
    its source has no edge of the relation to, drawn uniformly.
    Returns (the training topology, the split).
    """
    for name, f in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0 <= f < 1:
            raise DatasetError(f"{name}: {f}, expected a fraction in [0, 1)")
    if val_fraction + test_fraction >= 1:
        raise DatasetError(f"val_fraction + test_fraction = {val_fraction + test_fraction}: nothing left to train on")
    if negatives < 1:
        raise DatasetError(f"negatives: {negatives}, expected at least 1")
    if relation is None and graph.num_edge_types > 1:
        raise DatasetError("relation: required where the graph has several edge types (SRC:REL:DST, e.g. "
                           "author:rev_written_by:paper)")
    try:
        r = 0 if relation is None else graph.relation(relation)
    except KeyError as e:
        raise DatasetError(f"relation: {e.args[0].removeprefix('relation ')}") from None
    n = graph.num_nodes
    reverse = find_reverse(graph, r)
    undirected = reverse == r
    src, dst, at = _edges(graph, r)
    all_keys = np.sort(edge_keys(src, dst, n))
    candidates = np.unique(edge_keys(src, dst, n, undirected)[src != dst])  # canonical, unique, no self-loops
    if not len(candidates):
        raise DatasetError(f"relation: {':'.join(graph.edge_types[r])} has no edges to split (self-loops aside)")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(candidates))
    nv, nt = int(val_fraction * len(candidates)), int(test_fraction * len(candidates))
    for name, f, k in (("val_fraction", val_fraction, nv), ("test_fraction", test_fraction, nt)):
        if f > 0 and k == 0:  # an empty evaluation set measures nothing
            raise DatasetError(f"{name}: {f} of relation {':'.join(graph.edge_types[r])}'s {len(candidates):,} "
                               "distinct edges (self-loops aside) holds out none")
    held = {"val": np.sort(candidates[order[:nv]]), "test": np.sort(candidates[order[nv:nv + nt]])}
    train = np.sort(candidates[order[nv + nt:]])
    out = np.sort(np.concatenate([held["val"], held["test"]]))
    kept = np.ones(graph.num_edges, dtype=bool)
    kept[at[_contains(out, edge_keys(src, dst, n, undirected))]] = False
    if reverse is not None and reverse != r:  # the held-out edges' copies in the reverse relation
        rs, rd, rat = _edges(graph, reverse)
        kept[rat[_contains(out, edge_keys(rd, rs, n))]] = False
    all_dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(all_dst[kept], minlength=n))])
    edges = {name: np.asarray(a)[kept] for name, a in graph.edge_arrays().items()}
    topology = CSCGraph(indptr.astype(graph.indptr.dtype), edges["indices"], edges.get("type_per_edge"),
                        graph.node_type_offset, graph.node_types, graph.edge_types)
    pairs = lambda keys: np.stack([keys // n, keys % n], axis=1)
    lo, hi = _node_range(graph, r)
    negs = {s: _negatives(pairs(held[s])[:, 0], negatives, lo, hi, n, all_keys, rng) for s in ("val", "test")}
    meta = {"undirected": undirected, "negatives": int(negatives), "seed": int(seed),
            "val_fraction": val_fraction, "test_fraction": test_fraction,
            "edges": {"train": len(train), "val": nv, "test": nt}, "relation": list(graph.edge_types[r]),
            "reverse": None if reverse is None else list(graph.edge_types[reverse])}
    split = EdgeSplit(pairs(train), pairs(held["val"]), pairs(held["test"]), negs["val"], negs["test"],
                      undirected=undirected, meta=meta)
    return topology, split


def _node_range(graph: CSCGraph, r: int) -> tuple[int, int]:
    """The ids [lo, hi) of relation r's destination type (untyped: every node)."""
    t = graph.node_types.index(graph.edge_types[r][2])
    return int(graph.node_type_offset[t]), int(graph.node_type_offset[t + 1])


def _negatives(src: np.ndarray, k: int, lo: int, hi: int, n: int, edge_keys_sorted: np.ndarray, rng) -> np.ndarray:
    """(len(src), k) destinations w in [lo, hi), w != src, with no edge src -> w (keys over n
    nodes), each row's k distinct (a repeat would count twice in the rank: MRR over fewer than
    k), uniform, redrawn until so."""
    if k > hi - lo - 1:
        raise DatasetError(f"link-split: --negatives {k}: more than the {hi - lo - 1} other nodes a positive's "
                           "destination could be; give fewer")
    out = lo + rng.integers(0, hi - lo, size=(len(src), k))
    rows = np.arange(len(src))[:, None]
    for _ in range(200):
        bad = (out == src[:, None]) | _contains(edge_keys_sorted, src[:, None] * n + out)
        order = np.argsort(out, axis=1, kind="stable")
        ranked = out[rows, order]
        again = np.zeros_like(bad)
        again[rows, order[:, 1:]] = ranked[:, 1:] == ranked[:, :-1]  # every copy after a row's first
        bad |= again
        if not bad.any():
            return out
        out[bad] = lo + rng.integers(0, hi - lo, size=int(bad.sum()))
    raise DatasetError("link-split: could not draw negatives: sources with an edge to (nearly) every node")
