"""IGB's heterogeneous dataset (IGBH, the graph of MLPerf's R-GAT benchmark) in its
processed layout, offline, as a typed dataset::

    ROOT/SIZE/processed/                 SIZE: tiny, small, medium, large or full
      TYPE/node_feat.npy                 float (nodes, F) features of each node type: paper,
                                         author, institute, fos (+ journal, conference for
                                         large and full); a type's node count is its rows
      SRC__REL__DST/edge_index.npy       (E, 2) integer (source, destination) rows, ids
                                         local to each type: paper__cites__paper,
                                         paper__written_by__author,
                                         author__affiliated_to__institute, paper__topic__fos
                                         (+ paper__published__journal,
                                         paper__venue__conference for large and full)
      paper/node_label_19.npy, node_label_2K.npy   one label per paper

ROOT may also be ROOT/SIZE or the processed directory itself (the first of ROOT/SIZE/
processed, ROOT/processed and ROOT that holds a paper/ directory is read). For large and
full IGB ships paper's and author's node_feat.npy, and the labels, as headerless float32
arrays (np.memmap's files); a file without .npy's header is read as one, its node count
MLPerf's (PAPER_NODES, AUTHOR_NODES; the labels: the paper count) and its width what the
file's size gives. Node types are those of KNOWN_TYPES whose node_feat.npy exists, in
that order; the relations are the ones the reference reads for SIZE, each required, and a
relation whose type has no node_feat.npy is refused (its node count is unknown).

What MLPerf's reference (mlcommons/training, retired_benchmarks/rgat: dataset.py,
split_seeds.py) makes of these files, this makes too:
  * the edge types, in the reference's order: paper:cites:paper, the forward relations,
    then rev_written_by, rev_affiliated_to, rev_topic (and for large and full published,
    venue, rev_published, rev_venue): each reverse holds its relation's edges backwards;
  * cites is ``add_self_loops(remove_self_loops(cites))`` in both directions, one edge
    type: every citation both ways, plus a self-loop on every paper. The reference
    concatenates the two directions, so it holds each self-loop twice (and a citation given
    both ways, or repeated, several times); here, as for every source
    (fastsample/data/edges.py), duplicates of one edge type are merged: each (source,
    destination) pair once, one self-loop per paper. Sampling without replacement over a
    node's in-edges then picks among distinct neighbours, the paper itself at most once.
    (The reference adds loops to papers 0..the largest id in the file, PyG's default; here
    to every paper: the same wherever the file names the last paper);
  * the split (split_seeds.py): ``torch.manual_seed(42)``, ``shuffled =
    torch.randperm(n)`` with n the labelled papers (the paper count; full: 157,675,969 with
    the 2K labels, 227,130,858 with the 19, the papers 0..n-1), train = shuffled[:int(0.6
    n)], val = the next int(validation_frac n), with validation_frac 0.005, split_seeds.py's
    command-line default, the one its README runs (its class default, 0.01, is not used by
    the benchmark). Stored sorted, as every split. The reference has no test split: test
    is empty unless ``test_rest``, then it is the remaining labelled papers. Full's papers
    past n are unlabelled (-1), as the reference never reads their labels.
Labels are the reference's 2K (2,983 classes; its default) or 19; nan is unlabelled;
num_classes is the largest label + 1.

Memory: the headers and labels are read up front (O(papers)); the edges are read in
blocks (fastsample.data.npz: sequential reads, no memory map) and built into the typed
CSC by destination range on disk (edges.edges_to_csc_file, its ranges sized for the
densest type: typed_range_count), the outputs written sequentially, and the features
copied in blocks. Peak: BOUND (measured: 1.95 GiB converting 10.1M nodes and 224M stored
edges, 2.0 GiB for 20.1M nodes and 160M edges; IGBH-full's ~547M nodes: about 23 GB).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastsample.progress import progress_bar

from fastsample.data.edges import edges_to_csc_file, typed_range_count
from fastsample.data.npz import NpyMember, has_npy_header, open_npy, raw_array
from fastsample.data.ogb import _labels
from fastsample.data.graph import DatasetError, DatasetWriter, id_dtype, offset_dtype, validate_node_data

__all__ = ["SIZES", "LABELS", "KNOWN_TYPES", "PAPER_NODES", "AUTHOR_NODES", "LABELLED_FULL", "IgbLayout", "load_igb",
           "processed_dir", "edge_types", "BOUND"]

SIZES = ("tiny", "small", "medium", "large", "full")
LABELS = ("2K", "19")  # node_label_2K.npy (2,983 classes; the reference's default), node_label_19.npy
KNOWN_TYPES = ("paper", "author", "institute", "fos", "journal", "conference")
# the reference's hard-coded counts, for the headerless files of large and full
PAPER_NODES = {"tiny": 100_000, "small": 1_000_000, "medium": 10_000_000, "large": 100_000_000, "full": 269_346_174}
AUTHOR_NODES = {"tiny": 357_041, "small": 1_926_066, "medium": 15_544_654, "large": 116_959_896,
                "full": 277_220_883}
LABELLED_FULL = {"2K": 157_675_969, "19": 227_130_858}  # split_seeds.py: full's labelled papers
SEED, TRAIN_FRACTION, VALIDATION_FRACTION = 42, 0.6, 0.005
CITES = ("paper", "cites", "paper")
_RELATIONS = (("paper", "written_by", "author"), ("author", "affiliated_to", "institute"), ("paper", "topic", "fos"))
_LARGE = (("paper", "published", "journal"), ("paper", "venue", "conference"))
BOUND = "at most about 1.6 GiB + 32 bytes per node + 24 per labelled paper, whatever the edge count"


def _reverse(e):
    return e[2], f"rev_{e[1]}", e[0]


def edge_types(size: str) -> list[tuple[str, str, str]]:
    """The reference's edge types for ``size``, in its order (dataset.py's edge_dict)."""
    types = [CITES, *_RELATIONS, *map(_reverse, _RELATIONS)]
    if size in ("large", "full"):
        types += [*_LARGE, *map(_reverse, _LARGE)]
    return types


def processed_dir(root: str | Path, size: str) -> Path:
    """The processed directory of ``size`` under ``root``: ROOT/SIZE/processed, ROOT/processed
    or ROOT, the first that holds a paper/ directory."""
    root = Path(root)
    for folder in (root / size / "processed", root / "processed", root):
        if (folder / "paper").is_dir():
            return folder
    raise DatasetError(f"{root}: no IGB layout: expected {root / size / 'processed' / 'paper'}/ (ROOT may also be "
                       f"ROOT/{size} or the processed directory itself)")


def _array(file: Path, kinds: str, what: str, rows: int | None = None, *, vector: bool = False) -> NpyMember:
    """``file``: a .npy array of a dtype kind in ``kinds``, 2-D (or, ``vector``, 1-D or (n,
    1)); or, without .npy's header, a float32 array of ``rows`` rows (None: a header is
    required): (rows, what the size gives), or (rows,) if ``vector``."""
    if not file.is_file():
        raise DatasetError(f"{file}: missing ({what})")
    if has_npy_header(file):
        arr = open_npy(file)
        if arr.dtype.kind not in kinds or (arr.shape[1:] not in ((), (1,)) if vector else len(arr.shape) != 2):
            raise DatasetError(f"{file}: {arr.dtype} {arr.shape}, expected {what}")
        return arr
    if rows is None:
        raise DatasetError(f"{file}: not a .npy file (no header), expected {what}")
    size = file.stat().st_size
    width = size // (4 * rows) if rows else 0
    if not width or size != 4 * rows * width or (vector and width != 1):
        raise DatasetError(f"{file}: no .npy header, and its {size} bytes are not {rows} "
                           f"{'' if vector else 'rows of '}float32 ({what})")
    return raw_array(file, (rows,) if vector else (rows, width), np.float32)


@dataclass(frozen=True)
class IgbLayout:
    """An IGBH processed directory, checked, with labels and splits read and edges and
    features still in their files; ``write()`` streams them into a typed dataset.

    folder:     the processed directory; size: tiny .. full; label_set: "2K" or "19"
    node_types: the node types read, in id order; counts: {type: node count}
    features:   {type: its node_feat.npy, located}
    relations:  [(edge_index.npy located, forward edge type index, reverse's or None)]
    edge_types: the canonical edge types (edge_types(size))
    labels:     (papers,) int64, -1 = unlabelled; train, val, test: sorted paper ids
    num_classes: the largest label + 1; labelled: the papers the split draws from
    """

    folder: Path
    size: str
    label_set: str
    node_types: tuple[str, ...]
    counts: dict
    features: dict
    relations: list
    edge_types: list
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    num_classes: int
    labelled: int

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([self.counts[t] for t in self.node_types])]).astype(np.int64)

    def pairs_into(self) -> dict:
        """{node type: the (source, destination) pairs into it handed to the CSC builder}:
        each relation both ways, plus a self-loop per paper (before duplicates are merged)."""
        into = dict.fromkeys(self.node_types, 0)
        into["paper"] += self.counts["paper"]
        for rel, fwd, _ in self.relations:
            s_type, _, d_type = self.edge_types[fwd]
            into[s_type] += rel.shape[0]
            into[d_type] += rel.shape[0]
        return into

    def write(self, path, *, name: str, overwrite: bool = False, progress: bool = False, feature_dtype=None,
              **extra) -> dict:
        """Store the typed dataset (atomically; a failure leaves nothing).

        Args:
            path: the directory to write; name: the dataset's name; overwrite: replace an
            existing directory; progress: show progress bars; feature_dtype: float32 or
            float16 (default: float16 where the file's is, else float32); extra: more
            meta.json fields.
        Returns:
            meta.json's contents. Edge ids out of their types' ranges are a DatasetError
            naming the file and the rows.
        """
        offsets = self.offsets
        n, into = int(offsets[-1]), self.pairs_into()
        # ranges sized for the densest type (papers take most pairs): each within the budget
        ranges = typed_range_count(offsets, [into[t] for t in self.node_types])
        with DatasetWriter(path, overwrite=overwrite) as writer:
            with progress_bar(total=sum(into.values()), desc="typed edges", unit="e", unit_scale=True,
                      disable=not progress) as bar:
                indptr = edges_to_csc_file(self._edges(offsets), n, writer.tmp / "indices.npy", symmetric=False,
                                           self_loops=True, ranges=ranges, progress=bar.update,
                                           types_path=writer.tmp / "type_per_edge.npy",
                                           num_types=len(self.edge_types))
            writer.save("indptr", indptr.astype(offset_dtype(int(indptr[-1])), copy=False))
            del indptr
            for t in self.node_types:
                feat = self.features[t]
                dtype = np.dtype(feature_dtype or (np.float16 if feat.dtype == np.float16 else np.float32))
                with progress_bar(total=self.counts[t], desc=f"{t} features", unit="row", unit_scale=True,
                          disable=not progress) as bar:
                    writer.write_blocks(f"features/{t}", feat.shape, dtype, feat.blocks(0), bar.update)
            writer.save("labels", self.labels)
            ids = id_dtype(n)
            for key in ("train", "val", "test"):
                writer.save(key, getattr(self, key).astype(ids, copy=False))
            schema = {"node_types": self.node_types, "node_type_offset": offsets, "edge_types": self.edge_types,
                      "target_type": "paper"}
            return writer.commit(name=name, num_classes=self.num_classes, schema=schema, **extra)

    def _edges(self, offsets: np.ndarray):
        """(src, dst, edge type) chunks of global ids: each relation's rows and their
        reverse, cites both ways plus a self-loop per paper; each block's ids checked
        against its types' counts before they reach the (unchecked) numba kernels."""
        start = dict(zip(self.node_types, offsets[:-1].tolist()))
        for rel, fwd, rev in self.relations:
            s_type, _, d_type = self.edge_types[fwd]
            done = 0
            for block in rel.blocks(0):
                for col, t in ((0, s_type), (1, d_type)):
                    lo, hi = int(block[:, col].min()), int(block[:, col].max())
                    if lo < 0 or hi >= self.counts[t]:
                        raise DatasetError(f"{rel}: {t} ids (column {col}) span [{lo}, {hi}] in rows {done}.."
                                           f"{done + len(block) - 1}, outside 0..{self.counts[t] - 1} "
                                           f"({self.counts[t]} {t} nodes, as {self.features[t]} has)")
                src = block[:, 0].astype(np.int64) + start[s_type]
                dst = block[:, 1].astype(np.int64) + start[d_type]
                done += len(block)
                del block
                yield src, dst, np.full(len(src), fwd, np.int64)
                yield dst, src, np.full(len(src), fwd if rev is None else rev, np.int64)
        papers, step = self.counts["paper"], 1 << 22
        for a in range(0, papers, step):  # cites' self-loops (ones given in the file merge with these)
            loops = np.arange(start["paper"] + a, start["paper"] + min(papers, a + step), dtype=np.int64)
            yield loops, loops, np.full(len(loops), self.edge_types.index(CITES), np.int64)


def load_igb(root: str | Path, size: str, labels: str = "2K", validation_frac: float = VALIDATION_FRACTION,
             test_rest: bool = False, seed: int = SEED, headerless_counts: dict | None = None) -> IgbLayout:
    """Check an IGBH processed directory (module doc) and read its labels; make the split.

    Args:
        root: ROOT, ROOT/SIZE or the processed directory; size: one of SIZES;
        labels: "2K" or "19" (node_label_2K.npy or node_label_19.npy);
        validation_frac: val's share of the labelled papers (split_seeds.py's
            --validation_frac); test_rest: test = the labelled papers in neither train
            nor val (default: empty, as the reference); seed: torch.manual_seed's;
        headerless_counts: {type: count} for headerless node_feat.npy files (default:
            MLPerf's PAPER_NODES and AUTHOR_NODES of ``size``).
    Returns:
        The IgbLayout (``write()`` stores it). Anything missing or inconsistent is one
        DatasetError naming the file.
    """
    if size not in SIZES:
        raise DatasetError(f"size {size!r}: expected one of {', '.join(SIZES)}")
    if labels not in LABELS:
        raise DatasetError(f"labels {labels!r}: expected one of {', '.join(LABELS)}")
    if not 0 <= validation_frac <= 1 - TRAIN_FRACTION:
        raise DatasetError(f"validation_frac must be in [0, {1 - TRAIN_FRACTION:g}] (train takes "
                           f"{TRAIN_FRACTION:g}), got {validation_frac}")
    folder = processed_dir(root, size)
    known = {"paper": PAPER_NODES[size], "author": AUTHOR_NODES[size]} if headerless_counts is None \
        else dict(headerless_counts)
    features, counts = {}, {}
    for t in KNOWN_TYPES:
        file = folder / t / "node_feat.npy"
        if t != "paper" and not file.is_file():
            continue  # absent: refused below if a relation needs it
        what = f"{t} features, float (nodes, width)"
        features[t] = _array(file, "f", what, known.get(t))
        counts[t] = features[t].shape[0]
    node_types = tuple(features)
    types = edge_types(size)
    relations = []
    for e in types:
        if e[1].startswith("rev_"):
            continue
        d = folder / "__".join(e)
        for t in (e[0], e[2]):
            if t not in features:
                raise DatasetError(f"{d}: relation {':'.join(e)} needs {t} nodes, but {folder / t / 'node_feat.npy'} "
                                   f"is missing (a type's node count comes from its features)")
        rel = _array(d / "edge_index.npy", "iu", f"relation {':'.join(e)}, integer (edges, 2) (src, dst) rows")
        if rel.shape[1:] != (2,):
            raise DatasetError(f"{rel}: {rel.dtype} {rel.shape}, expected (edges, 2) (src, dst) rows")
        rev = _reverse(e)
        relations.append((rel, types.index(e), types.index(rev) if rev in types else None))

    papers = counts["paper"]
    file = folder / "paper" / f"node_label_{labels}.npy"
    raw = _array(file, "fiu", f"({papers},) numbers: a label per paper", papers, vector=True)
    if raw.shape[0] != papers:
        raise DatasetError(f"{file}: {raw.dtype} {raw.shape}, expected ({papers},) labels: one per paper "
                           f"({papers} in {features['paper']})")
    labelled = LABELLED_FULL[labels] if size == "full" else papers
    if labelled > papers:
        raise DatasetError(f"{features['paper']}: {papers} papers, but IGB full's {labels} labels cover the first "
                           f"{labelled}")
    values = raw.read().reshape(-1)
    y = np.full(papers, -1, dtype=np.int64)
    y[:labelled] = _labels(values[:labelled].astype(np.float64), file, labelled)  # full: the rest unlabelled
    del values
    num_classes = int(y.max(initial=-1)) + 1
    if num_classes <= 0:
        raise DatasetError(f"{file}: no paper is labelled")

    import torch  # the reference's generator, so the ids are the reference's

    shuffled = torch.randperm(labelled, generator=torch.Generator().manual_seed(seed)).numpy()
    n_train, n_val = int(labelled * TRAIN_FRACTION), int(labelled * validation_frac)
    ids = id_dtype(int(sum(counts.values())))  # paper is the first type: its local ids are global
    splits = {"train": shuffled[:n_train], "val": shuffled[n_train:n_train + n_val],
              "test": shuffled[n_train + n_val:] if test_rest else shuffled[:0]}
    splits = {k: np.sort(v).astype(ids) for k, v in splits.items()}
    del shuffled
    validate_node_data(papers, num_classes, y, splits, first=0,
                       name=lambda key: str(file) if key == "labels" else
                       f"{key} split (split_seeds.py's rule, seed {seed}, {labelled} labelled papers)")
    return IgbLayout(folder, size, labels, node_types, counts, features, relations, types, y, splits["train"],
                     splits["val"], splits["test"], num_classes, labelled)
