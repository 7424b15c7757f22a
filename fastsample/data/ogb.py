"""OGB node-property datasets from their raw directory layout, offline.

Two layouts, as OGB's downloader unpacks them; the one found under ``raw/`` is read:

CSV layout (most datasets, e.g. ``ogbn_products/``)::

    raw/edge.csv.gz            "src,dst" per line (0-based node ids)
    raw/num-node-list.csv.gz   one line: the node count
    raw/node-feat.csv.gz       one comma-separated float row per node
    raw/node-label.csv.gz      one label per node ("nan" = unlabelled)

npz layout (OGB's "binary" datasets, e.g. ``ogbn_papers100M/``)::

    raw/data.npz               edge_index (2, E) ints, node_feat (N, F) floats,
                               num_nodes_list [N] and num_edges_list [E] if present
                               (OGB writes them; N is node_feat's rows otherwise);
                               other members (node_year) are ignored
    raw/node-label.npz         node_label (N, 1) or (N,) floats (nan = unlabelled)

and in both::

    split/<name>/train.csv.gz, valid.csv.gz, test.csv.gz   one node id per line

If raw/data.npz exists the npz layout is read (and any CSV files beside it are ignored:
they would hold the same graph, and only the npz layout streams in bounded memory);
otherwise raw/edge.csv.gz is required. The CSV layout is parsed into memory. The npz
layout is checked up front (member headers, labels, splits), and its edges and features
are streamed from the archive straight into the output directory by ``write()``
(fastsample.data.npz reads members in blocks; edges.edges_to_csc_file builds the CSC by
destination range): memory is O(num_nodes) plus about a gigabyte, whatever the edge count.

OGB marks most node-property graphs as undirected (stored once, inverse edges added at
load time); ``symmetric=True`` does the same. ogbn-arxiv and other citation graphs are
directed: pass ``symmetric=False`` to keep only the stated direction (src -> dst).
"""

from __future__ import annotations

import gzip
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastsample.progress import progress_bar

from fastsample.data.edges import edges_to_csc, edges_to_csc_file
from fastsample.data.npz import NpyMember, open_npz
from fastsample.data.graph import CSCGraph, Dataset, DatasetError, DatasetWriter, id_dtype, offset_dtype, validate_node_data

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


def _labels(raw_labels: np.ndarray, file, num_nodes: int) -> np.ndarray:
    """OGB's float labels (nan = unlabelled) as int64 class ids, -1 = unlabelled."""
    if len(raw_labels) != num_nodes:
        raise DatasetError(f"{file}: {len(raw_labels)} labels, expected {num_nodes} (one per node)")
    labelled = ~np.isnan(raw_labels)
    if (raw_labels[labelled] < 0).any() or (raw_labels[labelled] % 1).any():
        raise DatasetError(f"{file}: labels must be non-negative integers or nan")
    return np.where(labelled, raw_labels, -1).astype(np.int64)


def _splits(where: Path, num_nodes: int) -> list[np.ndarray]:
    """The train, valid and test node ids under ``where``, sorted."""
    ids = id_dtype(num_nodes)
    splits = []
    for name in ("train", "valid", "test"):
        file = where / f"{name}.csv.gz"
        nodes = read_csv(file, np.int64, 1)[:, 0]
        if len(nodes) and (nodes.min() < 0 or nodes.max() >= num_nodes):
            raise DatasetError(f"{file}: node ids outside 0..{num_nodes - 1}")
        splits.append(np.sort(nodes).astype(ids))
    return splits


def load_ogb(root: str | Path, split: str | None = None, symmetric: bool = True) -> Dataset | OgbNpz:
    """Read an OGB node-property directory, in the CSV or the npz layout (module doc).

    Args:
        root: the directory holding raw/ and split/;
        split: the name of the split under split/ (needed only if there are several);
        symmetric: store each edge both ways (undirected graphs; False for ogbn-arxiv).
    Returns:
        CSV layout: Dataset (features float32 (N, F), labels int64 (N,));
        npz layout: OgbNpz, checked but with edges and features still in the archive.
        Either stores the dataset with ``.write(path, name=...)``. Anything inconsistent
        is one DatasetError naming the file.
    """
    root = Path(root)
    raw = root / "raw"
    if not (raw / "data.npz").is_file() and not (raw / "edge.csv.gz").is_file():
        raise DatasetError(f"{raw}: no OGB graph: expected data.npz (npz layout, e.g. ogbn-papers100M) "
                           "or edge.csv.gz with num-node-list, node-feat and node-label .csv.gz (CSV layout)")
    where = _split_dir(root, split)  # before the slow parsing: a wrong split fails at once
    if (raw / "data.npz").is_file():
        return _load_npz(raw, where, symmetric)
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
    labels = _labels(read_csv(label_file, np.float64, 1)[:, 0], label_file, num_nodes)
    num_classes = int(labels.max(initial=-1)) + 1
    return Dataset(graph, features, labels, *_splits(where, num_nodes), num_classes)


# ---------------------------------------------------------------- npz layout


@dataclass(frozen=True)
class OgbNpz:
    """An npz-layout OGB dataset, checked, whose edges and features are read only by
    ``write()``, streamed from the archive into the output (papers100M's take 26 GB and
    57 GB: more than memory).

    edge_index:  the (2, E) integer member of raw/data.npz
    node_feat:   the (N, F) float member of raw/data.npz
    num_nodes:   N
    labels:      (N,) int64 class ids, -1 = unlabelled
    train, val, test: sorted node ids (int32 where they fit)
    num_classes: max label + 1
    symmetric:   store each edge both ways
    """

    edge_index: NpyMember
    node_feat: NpyMember
    num_nodes: int
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    num_classes: int
    symmetric: bool

    def write(self, path, *, name: str, overwrite: bool = False, progress: bool = False, **extra) -> dict:
        """Store the dataset as a dataset directory (atomically), like Dataset.write.

        Args:
            path: the directory to write; name: the dataset's name;
            overwrite: replace an existing directory; progress: show progress bars
            (papers100M's conversion takes tens of minutes); extra: more meta.json fields.
        Returns:
            meta.json's contents. Edge ids out of range or a truncated member is a
            DatasetError naming the member; nothing is left on disk then.
        """
        n = self.num_nodes
        num_edges = self.edge_index.shape[1]
        ids = id_dtype(n)
        with DatasetWriter(path, overwrite=overwrite) as writer:
            with progress_bar(total=num_edges, desc="edges", unit="e", unit_scale=True, disable=not progress) as bar:
                indptr = edges_to_csc_file(self._edges(), n, writer.tmp / "indices.npy", symmetric=self.symmetric,
                                           expected_edges=(2 if self.symmetric else 1) * num_edges,
                                           progress=bar.update)
            writer.save("indptr", indptr.astype(offset_dtype(int(indptr[-1])), copy=False))
            del indptr
            # float16 stays float16 (half the disk); any other float width becomes float32
            dtype = np.dtype(np.float16 if self.node_feat.dtype == np.float16 else np.float32)
            with progress_bar(total=n, desc="features", unit="row", unit_scale=True, disable=not progress) as bar:
                writer.write_blocks("features", self.node_feat.shape, dtype, self.node_feat.blocks(0), bar.update)
            writer.save("labels", self.labels)
            for key, arr in (("train", self.train), ("val", self.val), ("test", self.test)):
                writer.save(key, arr.astype(ids, copy=False))
            return writer.commit(name=name, num_classes=self.num_classes, **extra)

    def _edges(self):
        """edge_index as (src, dst) chunks, each checked to lie in 0..num_nodes-1 before
        it reaches the (unchecked) numba kernels."""
        done = 0
        for block in self.edge_index.blocks(axis=1):
            lo, hi = int(block.min()), int(block.max())
            if lo < 0 or hi >= self.num_nodes:
                raise DatasetError(f"{self.edge_index}: node ids span [{lo}, {hi}] in edges {done}.."
                                   f"{done + block.shape[1] - 1}, outside 0..{self.num_nodes - 1}")
            done += block.shape[1]
            yield block[0], block[1]


def _member(members: dict[str, NpyMember], file: Path, name: str, kinds: str, shape: str) -> NpyMember:
    """The member ``name``, which must exist, be 1- or 2-D and of a dtype kind in ``kinds``."""
    if name not in members:
        raise DatasetError(f"{file}: member {name!r} missing (the archive has {sorted(members) or 'none'})")
    member = members[name]
    if member.dtype.kind not in kinds or len(member.shape) not in (1, 2):
        raise DatasetError(f"{member}: {member.dtype} {member.shape}, expected {shape}")
    return member


def _load_npz(raw: Path, where: Path, symmetric: bool) -> OgbNpz:
    data_file, label_file = raw / "data.npz", raw / "node-label.npz"
    members = open_npz(data_file)
    edge_index = _member(members, data_file, "edge_index", "iu", "(2, num_edges) integers")
    node_feat = _member(members, data_file, "node_feat", "f", "(num_nodes, feature_dim) floats")
    if len(edge_index.shape) != 2 or edge_index.shape[0] != 2:
        raise DatasetError(f"{edge_index}: shape {edge_index.shape}, expected (2, num_edges)")
    if len(node_feat.shape) != 2:
        raise DatasetError(f"{node_feat}: shape {node_feat.shape}, expected (num_nodes, feature_dim)")
    num_nodes = node_feat.shape[0]
    # OGB's reader takes the graph sizes from these (one graph for a node-property task)
    for key, expected in (("num_nodes_list", num_nodes), ("num_edges_list", edge_index.shape[1])):
        if key in members:
            value = _member(members, data_file, key, "iu", "[count] (one graph)").read().reshape(-1)
            if value.tolist() != [expected]:
                raise DatasetError(f"{members[key]}: {value.tolist()}, expected [{expected}] "
                                   f"(one graph, as node_feat and edge_index give)")
    node_label = _member(open_npz(label_file), label_file, "node_label", "fiu", "(num_nodes, 1) floats")
    if len(node_label.shape) == 2 and node_label.shape[1] != 1:
        raise DatasetError(f"{node_label}: shape {node_label.shape}, expected (num_nodes, 1)")
    labels = _labels(node_label.read().reshape(-1).astype(np.float64, copy=False), node_label, num_nodes)
    splits = _splits(where, num_nodes)
    num_classes = int(labels.max(initial=-1)) + 1
    files = {"labels": str(node_label), "train": where / "train.csv.gz", "val": where / "valid.csv.gz",
             "test": where / "test.csv.gz"}
    # write_dataset's checks, here because OgbNpz.write bypasses it (it never holds the arrays)
    if num_classes <= 0:
        raise DatasetError(f"{node_label}: no node is labelled")
    validate_node_data(num_nodes, num_classes, labels, dict(zip(("train", "val", "test"), splits)),
                       name=lambda key: str(files[key]))
    return OgbNpz(edge_index, node_feat, num_nodes, labels, *splits, num_classes, symmetric)
