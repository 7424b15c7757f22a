"""OGB link-property datasets (ogbl-*) from their raw layout, offline, into a link-split
dataset (fastsample/data/edge_splits.py)::

    raw/edge.csv.gz            the training graph, "src,dst" per line
    raw/num-node-list.csv.gz   one line: the node count
    raw/node-feat.csv.gz       one float row per node
    split/<name>/train.pt, valid.pt, test.pt     the edge splits

The split files are torch-saved dicts of tensors, read with torch's weights-only loader
(tensors and plain values only: nothing in the file runs). An ``.npz`` with the same
keys may stand in for any of them, read by numpy without pickle. Keys:

    train        ``source_node`` and ``target_node`` (E,), or ``edge`` (E, 2)
    valid, test  ``source_node``, ``target_node`` (E,) and ``target_node_neg`` (E, K):
                 each held-out edge ranked against its own K negatives (ogbl-citation2's
                 protocol, the one fastsample evaluates)

ogbl-collab's, -ppa's and -ddi's valid/test hold ``edge`` and ``edge_neg``, one shared set
of negative edges that every positive is ranked against. That protocol is not read yet:
it is one clear error. Link datasets have no node labels; the dataset is written with
every node unlabelled and empty node splits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fastsample.data.edges import edges_to_csc
from fastsample.data.ogb import _columns, _split_dir, read_csv
from fastsample.data.edge_splits import EdgeSplit, check_held_out
from fastsample.data.graph import Dataset, DatasetError, id_dtype

__all__ = ["is_link", "load_ogb_link"]

_FILES = {"train": "train", "val": "valid", "test": "test"}


def is_link(root) -> bool:
    """Whether ``root`` holds OGB's link layout (split files train.pt or train.npz)."""
    split = Path(root) / "split"
    return split.is_dir() and any((d / "train.pt").is_file() or (d / "train.npz").is_file()
                                  for d in split.iterdir() if d.is_dir())


def _read_split(where: Path, name: str) -> tuple[dict, Path]:
    """{key: numpy array} of split file ``name`` (.pt, else .npz), and the file."""
    pt, npz = where / f"{name}.pt", where / f"{name}.npz"
    if pt.is_file():
        import torch

        try:
            state = torch.load(pt, map_location="cpu", weights_only=True)
        except Exception as e:
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise DatasetError(f"{pt}: not a plain torch file of tensors ({why})") from None
        if not isinstance(state, dict):
            raise DatasetError(f"{pt}: expected a dict of tensors, got {type(state).__name__}")
        return {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in state.items()}, pt
    if npz.is_file():
        try:
            with np.load(npz, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}, npz
        except (OSError, ValueError) as e:
            raise DatasetError(f"{npz}: not a readable npz file ({e})") from None
    raise DatasetError(f"{where}: missing {name}.pt (or {name}.npz)")


def _edges(arrays: dict, file: Path, num_nodes: int) -> np.ndarray:
    """(E, 2) int64 [src, dst] from source_node/target_node or edge."""
    if "source_node" in arrays and "target_node" in arrays:
        src, dst = np.asarray(arrays["source_node"]).ravel(), np.asarray(arrays["target_node"]).ravel()
        if len(src) != len(dst):
            raise DatasetError(f"{file}: source_node has {len(src)} entries, target_node {len(dst)}")
        edges = np.stack([src, dst], axis=1)
    elif "edge" in arrays:
        edges = np.asarray(arrays["edge"])
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise DatasetError(f"{file}: edge has shape {edges.shape}, expected (edges, 2)")
    else:
        raise DatasetError(f"{file}: expected source_node and target_node, or edge (keys: {sorted(arrays)})")
    if edges.dtype.kind not in "iuf" or (edges.dtype.kind == "f" and np.any(edges % 1)):
        raise DatasetError(f"{file}: node ids must be integers (got {edges.dtype})")
    edges = edges.astype(np.int64)
    if len(edges) and (edges.min() < 0 or edges.max() >= num_nodes):
        raise DatasetError(f"{file}: node ids span [{edges.min()}, {edges.max()}], outside 0..{num_nodes - 1}")
    return edges


def load_ogb_link(root, split: str | None = None, symmetric: bool = True) -> tuple[Dataset, EdgeSplit]:
    """Read an OGB link-property directory (module doc).

    Args:
        root: the directory holding raw/ and split/; split: the name under split/ (needed
            only if there are several); symmetric: store each graph edge both ways (an
            undirected graph; False keeps src -> dst, e.g. ogbl-citation2).
    Returns:
        (the dataset: the training graph and features, no labels; its edge split). Anything
        inconsistent is one DatasetError naming the file.
    """
    root = Path(root)
    raw = root / "raw"
    where = _split_dir(root, split)
    num_nodes = int(read_csv(raw / "num-node-list.csv.gz", np.int64, 1).sum())
    edges = read_csv(raw / "edge.csv.gz", np.int64, 2)
    if len(edges) and (edges.min() < 0 or edges.max() >= num_nodes):
        raise DatasetError(f"{raw / 'edge.csv.gz'}: node ids span [{edges.min()}, {edges.max()}], "
                           f"outside 0..{num_nodes - 1}")
    graph = edges_to_csc(edges[:, 0], edges[:, 1], num_nodes, symmetric=symmetric)
    feat_file = raw / "node-feat.csv.gz"
    if not feat_file.is_file():
        raise DatasetError(f"{feat_file}: missing; fastsample's encoders need node features (ogbl-ddi has none)")
    features = read_csv(feat_file, np.float32, _columns(feat_file))
    if len(features) != num_nodes:
        raise DatasetError(f"{feat_file}: {len(features)} rows, expected {num_nodes}")
    out = {}
    for key, name in _FILES.items():
        arrays, file = _read_split(where, name)
        if key != "train" and "edge_neg" in arrays:
            raise DatasetError(f"{file}: edge_neg is one shared set of negative edges (ogbl-collab's, -ppa's and "
                               "-ddi's protocol), not read yet: fastsample ranks each held-out edge against its own "
                               "negatives (target_node_neg, ogbl-citation2's)")
        out[key] = _edges(arrays, file, num_nodes)
        if key != "train":
            neg = np.asarray(arrays.get("target_node_neg", np.empty((0, 0))))
            if neg.ndim != 2 or len(neg) != len(out[key]) or neg.shape[1] < 1:
                raise DatasetError(f"{file}: target_node_neg has shape {neg.shape}, expected ({len(out[key])}, K): "
                                   "K negatives for each held-out edge")
            if neg.min() < 0 or neg.max() >= num_nodes:
                raise DatasetError(f"{file}: target_node_neg spans [{neg.min()}, {neg.max()}], outside "
                                   f"0..{num_nodes - 1}")
            out[f"{key}_neg"] = neg.astype(np.int64)
    meta = {"undirected": bool(symmetric), "negatives": int(out["val_neg"].shape[1]), "source": "ogb",
            "edges": {k: len(out[k]) for k in _FILES}}
    split = EdgeSplit(**out, undirected=bool(symmetric), meta=meta)
    check_held_out(split, graph, {k: where / f"{_FILES[k]}.pt" for k in _FILES},
                   {"train": f"{where / 'train.pt'}'s edges", "topology": f"{raw / 'edge.csv.gz'}'s graph"})
    empty = np.empty(0, dtype=id_dtype(num_nodes))
    dataset = Dataset(graph, features, np.full(num_nodes, -1, dtype=np.int64), empty, empty, empty, 1)
    return dataset, split
