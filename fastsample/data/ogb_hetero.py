"""OGB's heterogeneous node-property layout (ogbn-mag's), offline, as a typed dataset::

    raw/num-node-dict.csv.gz                   a header of node type names, then one row:
                                               each type's node count
    raw/relations/SRC___REL___DST/edge.csv.gz  "src,dst" per line, ids local to each type
    raw/relations/.../num-edge-list.csv.gz     one line: that relation's edge count
                                               (checked where present)
    raw/node-feat/TYPE/node-feat.csv.gz        one float row per node of TYPE; a type
                                               without one is featureless
    raw/node-label/TYPE/node-label.csv.gz      one label per node of TYPE (nan =
                                               unlabelled): TYPE is the target type
    split/NAME/TYPE/{train,valid,test}.csv.gz  target-type ids, local to TYPE

Node types take global ids in num-node-dict's order, each one contiguous range; relations
are edge types in the order of their directory names. ogbn-mag ships one direction per
relation, so ``reverse=True`` (the default) adds ``rev_REL`` (DST -> SRC) after each, as
DGL's and PyG's ogbn-mag examples do; ``reverse=False`` keeps exactly the relations given.
Other files (edge_reltype, node_year) are ignored. Every error names the file and the type.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from fastsample.data.edges import typed_edges_to_csc
from fastsample.data.ogb import _labels, _split_dir, read_csv, _columns
from fastsample.data.graph import Dataset, DatasetError, id_dtype

__all__ = ["is_hetero", "load_ogb_hetero"]


def is_hetero(root: str | Path) -> bool:
    """Whether ``root`` holds OGB's heterogeneous layout (raw/num-node-dict.csv.gz)."""
    return (Path(root) / "raw" / "num-node-dict.csv.gz").is_file()


def _node_counts(file: Path) -> dict[str, int]:
    try:
        with gzip.open(file, "rt") as f:
            lines = [line.strip() for line in f if line.strip()]
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise DatasetError(f"{file}: not a readable gzip file ({e})") from e
    if len(lines) != 2:
        raise DatasetError(f"{file}: expected a header of node types and one row of counts, got {len(lines)} lines")
    names, counts = lines[0].split(","), lines[1].split(",")
    if len(names) != len(counts) or len(set(names)) != len(names):
        raise DatasetError(f"{file}: {len(names)} distinct node types expected to match {len(counts)} counts")
    try:
        values = [int(float(c)) for c in counts]
    except ValueError as e:
        raise DatasetError(f"{file}: counts must be integers ({e})") from e
    if min(values) < 0:
        raise DatasetError(f"{file}: negative node count")
    return dict(zip(names, values))


def load_ogb_hetero(root: str | Path, split: str | None = None, reverse: bool = True) -> Dataset:
    """Read the layout above into a typed Dataset (in memory; ``write()`` stores it).

    Args:
        root: the OGB dataset directory (raw/ and split/); split: the split's directory
        name under split/ (needed if there are several); reverse: add rev_REL for each
        relation.
    Returns:
        The typed Dataset (features float32 per type, None where a type has none; labels
        of the target type, -1 = unlabelled). Bad input is a DatasetError naming the file
        and the type.
    """
    root = Path(root)
    raw = root / "raw"
    counts = _node_counts(raw / "num-node-dict.csv.gz")
    node_types = list(counts)
    offsets = np.concatenate([[0], np.cumsum([counts[t] for t in node_types])]).astype(np.int64)
    start = {t: int(offsets[i]) for i, t in enumerate(node_types)}
    rel_dirs = sorted(p for p in (raw / "relations").iterdir() if p.is_dir()) if (raw / "relations").is_dir() else []
    if not rel_dirs:
        raise DatasetError(f"{raw / 'relations'}: no relation directories (SRC___REL___DST)")
    src, dst, etype, edge_types = [], [], [], []
    for d in rel_dirs:
        parts = d.name.split("___")
        if len(parts) != 3 or not all(parts):
            raise DatasetError(f"{d}: a relation directory is named SRC___RELATION___DST")
        s_type, rel, d_type = parts
        for end, t in (("source", s_type), ("destination", d_type)):
            if t not in counts:
                raise DatasetError(f"{d}: its {end} type {t!r} is not in {raw / 'num-node-dict.csv.gz'} "
                                   f"({', '.join(node_types)})")
        edges = read_csv(d / "edge.csv.gz", np.int64, 2)
        listed = d / "num-edge-list.csv.gz"
        if listed.is_file() and int(read_csv(listed, np.int64, 1)[0, 0]) != len(edges):
            raise DatasetError(f"{listed}: says {int(read_csv(listed, np.int64, 1)[0, 0])} edges, "
                               f"{d / 'edge.csv.gz'} has {len(edges)}")
        for col, t in ((0, s_type), (1, d_type)):
            if len(edges) and (edges[:, col].min() < 0 or edges[:, col].max() >= counts[t]):
                raise DatasetError(f"{d / 'edge.csv.gz'}: {t} ids span [{edges[:, col].min()}, "
                                   f"{edges[:, col].max()}], outside 0..{counts[t] - 1} ({counts[t]} {t} nodes)")
        s, t_ = edges[:, 0] + start[s_type], edges[:, 1] + start[d_type]
        for a, b, et in ((s, t_, (s_type, rel, d_type)),) + (((t_, s, (d_type, f"rev_{rel}", s_type)),) if reverse
                                                             else ()):
            if et in edge_types:
                raise DatasetError(f"{d}: edge type {':'.join(et)} appears twice")
            src.append(a)
            dst.append(b)
            etype.append(np.full(len(a), len(edge_types), dtype=np.int16))
            edge_types.append(et)
    graph = typed_edges_to_csc(np.concatenate(src), np.concatenate(dst), np.concatenate(etype), node_types, offsets,
                               edge_types)
    del src, dst, etype

    features = {}
    for t in node_types:
        file = raw / "node-feat" / t / "node-feat.csv.gz"
        if not file.is_file():
            features[t] = None
            continue
        rows = read_csv(file, np.float32, _columns(file))
        if len(rows) != counts[t]:
            raise DatasetError(f"{file}: {len(rows)} rows, but {t} has {counts[t]} nodes")
        features[t] = rows
    labelled = sorted(p.name for p in (raw / "node-label").iterdir() if p.is_dir()) \
        if (raw / "node-label").is_dir() else []
    if len(labelled) != 1 or labelled[0] not in counts:
        raise DatasetError(f"{raw / 'node-label'}: expected labels for one node type of {', '.join(node_types)}, "
                           f"found {labelled or 'none'}")
    target = labelled[0]
    file = raw / "node-label" / target / "node-label.csv.gz"
    labels = _labels(read_csv(file, np.float64, 1)[:, 0], file, counts[target])
    where = _split_dir(root, split) / target
    ids = id_dtype(int(offsets[-1]))
    splits = []
    for name in ("train", "valid", "test"):
        f = where / f"{name}.csv.gz"
        local = read_csv(f, np.int64, 1)[:, 0]
        if len(local) and (local.min() < 0 or local.max() >= counts[target]):
            raise DatasetError(f"{f}: {target} ids span [{local.min()}, {local.max()}], outside "
                               f"0..{counts[target] - 1}")
        splits.append((np.sort(local) + start[target]).astype(ids))
    if len(labels) and labels.max() < 0:
        raise DatasetError(f"{file}: no {target} node is labelled")
    return Dataset(graph, features, labels, *splits, num_classes=int(labels.max()) + 1, target_type=target)
