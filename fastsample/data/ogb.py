"""OGB node-property datasets from their raw directory layout, offline.

Expected layout (what OGB's downloader unpacks, e.g. ``ogbn_products/``)::

    raw/edge.csv.gz            "src,dst" per line (0-based node ids)
    raw/num-node-list.csv.gz   one line: the node count
    raw/node-feat.csv.gz       one comma-separated float row per node
    raw/node-label.csv.gz      one label per node ("nan" = unlabelled)
    split/<name>/train.csv.gz, valid.csv.gz, test.csv.gz   one node id per line

OGB marks most node-property graphs as undirected (stored once, inverse edges added at
load time); ``symmetric=True`` does the same. ogbn-arxiv and other citation graphs are
directed: pass ``symmetric=False`` to keep only the stated direction (src -> dst).
"""

from __future__ import annotations

import gzip
import warnings
import zlib
from pathlib import Path

import numpy as np

from fastsample.data import DatasetArrays
from fastsample.data.edges import edges_to_csc
from fastsample.graph import CSCGraph, DatasetError, id_dtype

_BLOCK = 1 << 26  # bytes of text parsed at a time


def read_csv(path: Path, dtype, columns: int) -> np.ndarray:
    """Parse a gzip'd numeric CSV without a header into a (rows, columns) array."""
    if not path.is_file():
        raise DatasetError(f"{path}: missing")
    parts, tail = [], b""
    try:
        with gzip.open(path, "rb") as f, warnings.catch_warnings():
            # numpy only warns when text stops parsing early; make that an error
            warnings.simplefilter("error", DeprecationWarning)
            while True:
                block = f.read(_BLOCK)
                text = tail + block
                cut = text.rfind(b"\n") + 1 if block else len(text)
                text, tail = text[:cut], text[cut:]
                if text.strip():
                    parts.append(np.fromstring(text.replace(b",", b" "), dtype=dtype, sep=" "))
                if not block:
                    break
    except (OSError, EOFError, zlib.error) as e:
        raise DatasetError(f"{path}: not a readable gzip file ({e})") from e
    except (ValueError, DeprecationWarning) as e:
        raise DatasetError(f"{path}: non-numeric content ({e})") from e
    flat = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    if len(flat) % columns:
        raise DatasetError(f"{path}: {len(flat)} values do not form rows of {columns} columns")
    return flat.reshape(-1, columns)


def _columns(path: Path) -> int:
    if not path.is_file():
        raise DatasetError(f"{path}: missing")
    try:
        with gzip.open(path, "rt") as f:
            first = f.readline()
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: not a readable gzip file ({e})") from e
    return len(first.strip().split(",")) if first.strip() else 0


def _split_dir(root: Path, split: str | None) -> Path:
    base = root / "split"
    if split is not None:
        if not (base / split).is_dir():
            raise DatasetError(f"{base / split}: missing (split={split!r})")
        return base / split
    names = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    if len(names) != 1:
        raise DatasetError(f"{base}: expected one split directory, found {names or 'none'}; "
                           "choose one with split=NAME")
    return base / names[0]


def load_ogb(root: str | Path, split: str | None = None, symmetric: bool = True) -> DatasetArrays:
    """Read an OGB node-property directory.

    Args:
        root: the directory holding raw/ and split/;
        split: the name of the split under split/ (needed only if there are several);
        symmetric: store each edge both ways (undirected graphs; False for ogbn-arxiv).
    Returns:
        DatasetArrays (features float32 (N, F), labels int64 (N,); ``.write(path, name=...)``
        stores it). Anything inconsistent is one DatasetError naming the file.
    """
    root = Path(root)
    raw = root / "raw"
    where = _split_dir(root, split)  # before the slow parsing: a wrong split fails at once
    num_nodes = int(read_csv(raw / "num-node-list.csv.gz", np.int64, 1).sum())
    edges = read_csv(raw / "edge.csv.gz", np.int64, 2)
    if len(edges) and (edges.min() < 0 or edges.max() >= num_nodes):
        raise DatasetError(f"{raw / 'edge.csv.gz'}: node ids span [{edges.min()}, {edges.max()}], "
                           f"outside 0..{num_nodes - 1}")
    graph: CSCGraph = edges_to_csc(edges[:, 0], edges[:, 1], num_nodes, symmetric=symmetric)
    del edges

    feat_file = raw / "node-feat.csv.gz"
    features = read_csv(feat_file, np.float32, _columns(feat_file))
    if len(features) != num_nodes:
        raise DatasetError(f"{feat_file}: {len(features)} rows, expected {num_nodes}")
    label_file = raw / "node-label.csv.gz"
    raw_labels = read_csv(label_file, np.float64, 1)[:, 0]
    if len(raw_labels) != num_nodes:
        raise DatasetError(f"{label_file}: {len(raw_labels)} rows, expected {num_nodes}")
    labelled = ~np.isnan(raw_labels)
    if (raw_labels[labelled] < 0).any() or (raw_labels[labelled] % 1).any():
        raise DatasetError(f"{label_file}: labels must be non-negative integers or nan")
    labels = np.where(labelled, raw_labels, -1).astype(np.int64)

    ids = id_dtype(num_nodes)
    splits = []
    for name in ("train", "valid", "test"):
        file = where / f"{name}.csv.gz"
        nodes = read_csv(file, np.int64, 1)[:, 0]
        if len(nodes) and (nodes.min() < 0 or nodes.max() >= num_nodes):
            raise DatasetError(f"{file}: node ids outside 0..{num_nodes - 1}")
        splits.append(np.sort(nodes).astype(ids))
    num_classes = int(labels.max()) + 1 if labelled.any() else 0
    return DatasetArrays(graph, features, labels, *splits, num_classes)
