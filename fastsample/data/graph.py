"""The graph type and the on-disk dataset format.

A dataset directory holds ``meta.json`` and one ``.npy`` file per array::

    meta.json      format_version, name, num_nodes, num_edges, feature_dim,
                   num_classes, dtypes, split sizes, provenance
    indptr.npy     (num_nodes + 1,)  int32, or int64 when num_edges >= 2**31
    indices.npy    (num_edges,)      int32 node ids, or int64 when num_nodes >= 2**31
    features.npy   (num_nodes, feature_dim) float32 or float16
    labels.npy     (num_nodes,)      int64 class ids, -1 marks an unlabelled node; or float32
                                     targets (node regression; num_classes 0), NaN unlabelled
    train.npy, val.npy, test.npy     node ids (same dtype as indices), disjoint

The topology is CSC of in-edges: ``indices[indptr[v]:indptr[v + 1]]`` are the sources
of the edges into ``v``. Arrays are opened with ``mmap_mode="r"`` so that ranks on one
machine share the pages. Writes are atomic (fastsample.atomic): an interrupted write
never looks like a dataset.

A typed (heterogeneous) dataset is format_version 2; a one-type dataset is written as
version 1, as before. Its meta.json adds ``node_types`` (names), ``node_type_offset``
(node type t holds the global ids offset[t]..offset[t+1]-1), ``edge_types`` (canonical
[source type, relation, destination type], edge type r at entry r), ``target_type`` (the
node type with labels and splits) and ``features`` ({type: {"dim", "dtype"}, or null for
a featureless type}); its arrays differ thus::

    type_per_edge.npy  (num_edges,)   uint8 edge type of each in-edge (int16 past 256
                                      types); each node's in-edges sorted by it
    features/TYPE.npy  (nodes of TYPE, its dim)   per node type that has features
    labels.npy         (nodes of the target type,) int64; row i is node offset[target] + i
    train.npy, ...     global ids of target-type nodes
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fastsample.atomic import AtomicDirectory, allocated_memmap, check_space
from fastsample.choices import FEATURE_DTYPES

__all__ = ["NODE", "EDGE", "FORMAT_VERSION", "SPLITS", "FEATURE_DTYPES", "CSCGraph", "Dataset", "DatasetError", "DatasetWriter",
           "id_dtype", "offset_dtype", "load_dataset", "read_meta", "write_dataset", "open_array", "expect_array",
           "read_json", "describe_types", "by_type", "unwrap_one_type", "open_types", "validate_csc", "validate_node_data", "check_types", "validate_typed_edges", "type_dtype",
           "TYPED_FORMAT_VERSION", "carried"]

FORMAT_VERSION = 1  # a one-type dataset's; a typed one is TYPED_FORMAT_VERSION
# the names of untyped data's one node type and one relation (the one-type case)
NODE, EDGE = "_N", ("_N", "_E", "_N")
TYPED_FORMAT_VERSION = 2
SPLITS = ("train", "val", "test")
LABEL_DTYPE = np.dtype(np.int64)  # classes; float32 labels are targets (VALUE_DTYPE)
VALUE_DTYPE = np.dtype(np.float32)
_INT32_MAX = np.iinfo(np.int32).max


class DatasetError(ValueError):
    """Bad input to the dataset layer (fastsample.data.graph, fastsample.data): a file that is
    missing, malformed or inconsistent, or an argument out of range; the message names the
    file or the parameter."""


def id_dtype(num_nodes: int) -> np.dtype:
    """dtype of node ids: int32 while every id fits, else int64."""
    return np.dtype(np.int32 if num_nodes <= _INT32_MAX else np.int64)


def offset_dtype(num_edges: int) -> np.dtype:
    """dtype of indptr: int32 while every offset fits, else int64."""
    return np.dtype(np.int32 if num_edges <= _INT32_MAX else np.int64)


def type_dtype(num_types: int) -> np.dtype:
    """dtype of an edge-type array: uint8 up to 256 edge types, else int16."""
    if not 1 <= num_types <= 32767:
        raise DatasetError(f"edge types: {num_types}, expected 1..32767")
    return np.dtype(np.uint8 if num_types <= 256 else np.int16)


@dataclass(frozen=True)
class CSCGraph:
    """In-edge CSC topology, untyped or typed.

    indptr:  (num_nodes + 1,) int32/int64, monotone, indptr[0] == 0, indptr[-1] == num_edges
    indices: (num_edges,) int32/int64 global node ids; the in-neighbours (sources) of node v
             are indices[indptr[v]:indptr[v + 1]]
    The types (untyped data is the one-type case: type NODE, relation EDGE):
    type_per_edge:    (num_edges,) uint8/int16 edge type of each in-edge, aligned with
                      indices; each node's in-edges sorted by it, so a (node, edge type)
                      pair is one contiguous segment; None with one edge type (every edge's
                      is 0, and the kernels take their one-type fast path)
    node_type_offset: (T + 1,) int64: node type t holds the ids offset[t]..offset[t+1]-1 (a
                      partition's relabelled graph: (P * T + 1,) runs, run i of type i mod T:
                      each rank's nodes grouped by type); default [0, num_nodes]
    node_types:       the T node type names; default (NODE,)
    edge_types:       the canonical edge types (src type, relation, dst type); edge type
                      r is entry r; default (EDGE,)
    """

    indptr: np.ndarray
    indices: np.ndarray
    type_per_edge: np.ndarray | None = None
    node_type_offset: np.ndarray | None = None
    node_types: tuple[str, ...] = ()
    edge_types: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self):
        self._fix_dtypes()
        node_types, edge_types = tuple(self.node_types) or (NODE,), tuple(tuple(e) for e in self.edge_types) or (EDGE,)
        offsets = [0, self.num_nodes] if self.node_type_offset is None else self.node_type_offset
        object.__setattr__(self, "node_type_offset", np.asarray(offsets, dtype=np.int64))
        object.__setattr__(self, "node_types", node_types)
        object.__setattr__(self, "edge_types", edge_types)
        types = None if self.type_per_edge is None else np.asarray(self.type_per_edge)
        if types is not None and (types.dtype != type_dtype(len(edge_types)) or not types.flags.c_contiguous):
            object.__setattr__(self, "type_per_edge", np.ascontiguousarray(types, dtype=type_dtype(len(edge_types))))

    @property
    def typed(self) -> bool:
        """Whether the edges carry types (False: the one-type case, type_per_edge None)."""
        return self.type_per_edge is not None

    @property
    def num_edge_types(self) -> int:
        return len(self.edge_types)

    def edge_type_array(self) -> np.ndarray:
        """Every edge's type (the one-type case: zeros, made on the call)."""
        return np.zeros(self.num_edges, np.uint8) if self.type_per_edge is None else np.asarray(self.type_per_edge)

    def edges_per_type(self) -> np.ndarray:
        """(R,) int64: each edge type's edge count (the one-type case: every edge, no pass)."""
        if self.type_per_edge is None:
            return np.array([self.num_edges], dtype=np.int64)
        return np.bincount(np.asarray(self.type_per_edge), minlength=self.num_edge_types)

    def edge_arrays(self) -> dict:
        """The per-edge arrays: {"indices": ..., "type_per_edge": ...}, the latter only where
        edges carry types (what a topology's files hold)."""
        return {"indices": self.indices, **({} if self.type_per_edge is None else {"type_per_edge": self.type_per_edge})}

    def node_type_of(self, ids) -> np.ndarray:
        """The node type index of each id (typed graphs)."""
        return (np.searchsorted(self.node_type_offset, ids, side="right") - 1) % len(self.node_types)

    def relation(self, name) -> int:
        """The edge type index of ``name``: a relation name (unique among the edge types), a
        "src:relation:dst" string or a (src, relation, dst) triple; KeyError naming it and the
        known ones otherwise."""
        triple = tuple(name.split(":")) if isinstance(name, str) and name.count(":") == 2 else name
        if isinstance(triple, (tuple, list)) and tuple(triple) in self.edge_types:
            return self.edge_types.index(tuple(triple))
        matches = [r for r, (_, rel, _) in enumerate(self.edge_types) if rel == name]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(":".join(e) for e in self.edge_types)
        why = "names several edge types; write it as src:relation:dst" if matches else "is not an edge type"
        shown = ":".join(map(str, name)) if isinstance(name, (tuple, list)) else repr(name)
        raise KeyError(f"relation {shown} {why} (the graph's: {known})")

    def _fix_dtypes(self):
        # The dtype policy, applied once here: the kernels take int32 or int64 ids with
        # offsets at least as wide (native/module.cpp refuses anything else rather than
        # copying per call). Another combination is converted now, with a warning.
        indptr, indices = np.asarray(self.indptr), np.asarray(self.indices)
        if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
            raise TypeError(f"CSCGraph: indptr and indices must be integer arrays (got {indptr.dtype}, {indices.dtype})")
        ids = indices.dtype if indices.dtype in (np.int32, np.int64) else id_dtype(len(indptr) - 1)
        offsets = indptr.dtype if indptr.dtype in (np.int32, np.int64) else np.dtype(np.int64)
        if ids == np.int64:
            offsets = np.dtype(np.int64)
        for name, arr, dtype in (("indptr", indptr, offsets), ("indices", indices, ids)):
            if arr.dtype != dtype or not arr.flags.c_contiguous:
                warnings.warn(f"CSCGraph: {name} ({arr.dtype}, {len(arr):,} entries) converted once to contiguous "
                              f"{dtype} (the kernels take int32/int64 ids with offsets at least as wide)",
                              stacklevel=4)
                object.__setattr__(self, name, np.ascontiguousarray(arr, dtype=dtype))

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        return len(self.indices)

    def in_degrees(self) -> np.ndarray:
        return np.diff(self.indptr)


@dataclass(frozen=True, eq=False)
class Dataset:
    """The one record of a dataset: its topology and node data. A dataset directory gives
    one (load_dataset: memory-mapped, read-only), a converter returns one (in memory;
    ``write`` stores it), and one rank's share of a partition is one with the node data cut
    to what the rank owns (fastsample.partition.RankPartition adds where it sits).

    graph:       the in-edge CSC topology (None in a vanilla rank's share); typed or not
    features:    (rows, F) float32 or float16: every node's, or the rows a share owns;
                 typed: {node type: its rows, or None for a featureless type}
    labels:      (rows,) int64 class ids, -1 = unlabelled; typed: the target type's rows
    train, val, test: node ids (disjoint, labelled; typed: of the target type)
    num_classes: the number of classes
    name:        the dataset's name
    meta:        meta.json's fields (empty for a dataset not yet written)
    path:        the directory it was read from (None in memory)
    target_type: typed: the node type that has labels and splits; None when untyped
    """

    graph: CSCGraph | None
    features: np.ndarray
    labels: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    num_classes: int
    name: str = ""
    meta: dict = field(default_factory=dict)
    path: Path | None = None
    target_type: str | None = None

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def typed(self) -> bool:
        return self.target_type is not None

    @property
    def feature_dim(self) -> int:
        """The width of the features (typed: the target type's; 0 if it has none)."""
        f = self.shards[self.node_type_names[self.target_index]]
        return 0 if f is None else int(f.shape[1])

    @property
    def shards(self) -> dict:
        """{node type: its feature rows, or None where featureless} (untyped: {NODE: features})."""
        return by_type(self.features)

    @property
    def node_type_names(self) -> tuple[str, ...]:
        """The node types, in id order (untyped: the one type, NODE)."""
        return tuple(self.meta.get("node_types") or (NODE,))

    @property
    def target_index(self) -> int:
        """The index of the node type with labels and splits (untyped: 0)."""
        return list(self.meta.get("node_types") or [None]).index(self.target_type)

    def write(self, path, *, name: str | None = None, overwrite: bool = False, **extra) -> dict:
        """Store the dataset as a dataset directory (write_dataset: checked, atomic).

        Args:
            path: the directory to write; name: the dataset's name (default: its own);
            overwrite: replace an existing directory; extra: more meta.json fields.
        Returns:
            meta.json's contents.
        """
        return write_dataset(path, self.graph, self.features, self.labels, self.train, self.val, self.test,
                             name=name or self.name, num_classes=self.num_classes, target_type=self.target_type,
                             overwrite=overwrite, **extra)


# ---------------------------------------------------------------- loading


def open_array(path: Path, name: str, mmap: bool = True) -> np.ndarray:
    """Open ``path/name.npy``; a missing, truncated or unreadable file is a DatasetError.

    Args:
        path: the directory; name: the array's name without ``.npy``;
        mmap: memory-map read-only (the default) instead of reading it into memory.
    Returns:
        The array.
    """
    file = path / f"{name}.npy"
    if not file.is_file():
        raise DatasetError(f"{file}: missing")
    try:
        return np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except Exception as e:  # numpy reports truncation as ValueError, EOFError or OSError
        raise DatasetError(f"{file}: unreadable or truncated .npy file ({e})") from e


def expect_array(file: Path, arr: np.ndarray, shape: tuple, dtypes: tuple[str, ...],
                 source: str = "meta.json", error=DatasetError) -> None:
    """Raise ``error`` naming ``file`` unless ``arr`` has one of ``dtypes`` and ``shape``
    (as ``source``, the describing JSON file, implies)."""
    if arr.dtype.name not in dtypes:
        raise error(f"{file}: dtype {arr.dtype.name}, expected {' or '.join(dtypes)} as {source} implies")
    if arr.shape != shape:
        raise error(f"{file}: shape {arr.shape}, expected {shape} as {source} implies")


def read_json(file: Path, error=DatasetError) -> dict:
    """Parse a JSON object from ``file``; anything else is ``error`` naming the file."""
    try:
        value = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{file}: not valid JSON ({e})") from e
    if not isinstance(value, dict):
        raise error(f"{file}: expected a JSON object, got {type(value).__name__}")
    return value


def read_meta(path: str | os.PathLike) -> dict:
    """Read and check a dataset directory's ``meta.json`` (not its arrays; see load_dataset).

    Args:
        path: the dataset directory.
    Returns:
        meta.json's contents. Raises DatasetError naming the file.
    """
    path = Path(path)
    file = path / "meta.json"
    if not path.is_dir():
        raise DatasetError(f"{path}: not a dataset directory ({'a file' if path.exists() else 'does not exist'})")
    if not file.is_file():
        raise DatasetError(f"{file}: missing; is {path} a fastsample dataset directory?")
    meta = read_json(file)
    required = {
        "format_version": int, "name": str, "num_nodes": int, "num_edges": int,
        "feature_dim": int, "num_classes": int, "dtypes": dict,
    }
    for key, typ in required.items():
        if not isinstance(meta.get(key), typ):
            raise DatasetError(f"{file}: field {key!r} missing or not {typ.__name__}")
    if meta["format_version"] not in (FORMAT_VERSION, TYPED_FORMAT_VERSION):
        raise DatasetError(f"{file}: format_version {meta['format_version']}, this fastsample reads "
                           f"{FORMAT_VERSION} and {TYPED_FORMAT_VERSION}")
    if (meta["format_version"] == TYPED_FORMAT_VERSION) != ("node_types" in meta):
        raise DatasetError(f"{file}: format_version {meta['format_version']} "
                           f"{'needs' if 'node_types' not in meta else 'has no'} node_types")
    if "node_types" in meta:
        for key, typ in (("node_types", list), ("node_type_offset", list), ("edge_types", list),
                         ("target_type", str), ("features", dict)):
            if not isinstance(meta.get(key), typ):
                raise DatasetError(f"{file}: field {key!r} missing or not {typ.__name__} (a typed dataset)")
        check_types(meta["node_types"], meta["node_type_offset"], meta["edge_types"], where=str(file))
        if meta["target_type"] not in meta["node_types"]:
            raise DatasetError(f"{file}: target_type {meta['target_type']!r} is not a node type "
                               f"({', '.join(meta['node_types'])})")
        unknown = set(meta["features"]) ^ set(meta["node_types"])
        if unknown:
            raise DatasetError(f"{file}: features must list every node type once, null where it has none "
                               f"(differs in {', '.join(sorted(unknown))})")
    for key in ("num_nodes", "num_edges", "feature_dim", "num_classes"):
        if meta[key] < 0:
            raise DatasetError(f"{file}: field {key!r} is negative ({meta[key]})")
    return meta


def load_dataset(path: str | os.PathLike, mmap: bool = True) -> Dataset:
    """Open a dataset directory, validating every array against ``meta.json``.

    Raises DatasetError naming the offending file. Validation reads each array once
    (O(num_nodes + num_edges)), which is small next to any training run.

    Args:
        path: the dataset directory (python -m fastsample.data, or write_dataset).
        mmap: memory-map the arrays read-only (the default), so ranks share the pages.
    Returns:
        The Dataset.
    """
    path = Path(path)
    meta = read_meta(path)
    n, m = meta["num_nodes"], meta["num_edges"]
    dtypes = meta["dtypes"]

    indptr = open_array(path, "indptr", mmap)
    expect_array(path / "indptr.npy", indptr, (n + 1,), (offset_dtype(m).name, "int64"))
    indices = open_array(path, "indices", mmap)
    expect_array(path / "indices.npy", indices, (m,), (id_dtype(n).name, "int64"))
    schema = describe_types(meta)
    node_types, offsets = schema["node_types"], np.asarray(schema["node_type_offset"], dtype=np.int64)
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if dtypes.get(name) != arr.dtype.name:
            raise DatasetError(f"{path / (name + '.npy')}: dtype {arr.dtype.name} but meta.json says {dtypes.get(name)}")
    validate_csc(indptr, indices, n, where=path)
    types = open_types(path, meta, m, mmap=mmap)
    graph = CSCGraph(indptr, indices, types, offsets, node_types, schema["edge_types"])
    if types is not None:
        validate_typed_edges(graph, name=lambda k: str(path / ("meta.json" if k == "meta" else f"{k}.npy")))
    features = {}
    for i, (t, spec) in enumerate(schema["features"].items()):
        if spec is None:
            features[t] = None
            continue
        file = path / f"{spec['file']}.npy"
        arr = open_array(file.parent, file.stem, mmap)
        expect_array(file, arr, (int(offsets[i + 1] - offsets[i]), spec.get("dim")), (spec.get("dtype"),))
        if spec["dtype"] not in FEATURE_DTYPES:
            raise DatasetError(f"{file}: dtype {spec['dtype']}, expected {' or '.join(FEATURE_DTYPES)}")
        features[t] = arr
    target = node_types.index(schema["target_type"] or NODE)
    lo, hi = int(offsets[target]), int(offsets[target + 1])
    labels = open_array(path, "labels", mmap)
    kind = dtypes.get("labels", LABEL_DTYPE.name)  # class ids, or float targets
    expect_array(path / "labels.npy", labels, (hi - lo,), (kind if kind in (LABEL_DTYPE.name, VALUE_DTYPE.name)
                                                           else LABEL_DTYPE.name,))
    splits = {name: open_array(path, name, mmap) for name in SPLITS}
    for name, ids in splits.items():
        expected = meta.get("splits", {}).get(name)
        if expected is not None and expected != len(ids):
            raise DatasetError(f"{path / (name + '.npy')}: {len(ids)} ids but meta.json says {expected}")
    validate_node_data(hi - lo, meta["num_classes"], labels, splits, name=lambda k: str(path / f"{k}.npy"), first=lo)
    return Dataset(graph, unwrap_one_type(features), labels, **splits, num_classes=meta["num_classes"], name=meta["name"],
                   meta=meta, path=path, target_type=schema["target_type"])


def by_type(value) -> dict:
    """{node type: value}: a dict as it is, the one-type case's one value (untyped data's
    features array) as {NODE: value}. unwrap_one_type is its inverse."""
    return value if isinstance(value, dict) else {NODE: value}


def unwrap_one_type(by_type: dict):
    """{node type: value} as the API shows it: the one-type case's one value (untyped data's
    features array, its input width), else the dict."""
    return by_type[NODE] if set(by_type) == {NODE} else by_type


def open_types(folder: Path, meta: dict, num_edges: int, mmap: bool = True, error=DatasetError) -> np.ndarray | None:
    """``folder``/type_per_edge.npy, checked against the dataset meta.json ``meta``; None
    where the edges carry no types (format 1: the one-type case stores none)."""
    if "type_per_edge" not in meta["dtypes"]:
        return None
    types = open_array(folder, "type_per_edge", mmap)
    expect_array(folder / "type_per_edge.npy", types, (num_edges,), (type_dtype(len(meta["edge_types"])).name,),
                 error=error)
    return types


def describe_types(meta: dict) -> dict:
    """The node and edge types a dataset's meta.json describes, in either format (format 1
    is the one-type case: type NODE, relation EDGE, target_type None): node_types,
    node_type_offset, edge_types, target_type and features {type: {"file" (no .npy),
    "dim", "dtype"}, or None where featureless}."""
    if "node_types" in meta:
        keys = ("node_types", "node_type_offset", "edge_types", "target_type")
        return {**{k: meta[k] for k in keys}, "edge_types": [tuple(e) for e in meta["edge_types"]],
                "features": {t: None if f is None else {"file": feature_file(t), **f}
                             for t, f in meta["features"].items()}}
    return {"node_types": [NODE], "node_type_offset": [0, meta["num_nodes"]], "edge_types": [EDGE],
            "target_type": None,
            "features": {NODE: {"file": feature_file(NODE), "dim": meta["feature_dim"],
                                "dtype": meta["dtypes"]["features"]}}}


def unreached_types(meta: dict) -> list[str]:
    """The node types that are no relation's destination: a GNN layer gives their rows no
    messages, so a model's output for them is its bias alone (or zeros)."""
    types = describe_types(meta)
    into = {d for _, _, d in types["edge_types"]}
    return [t for t in types["node_types"] if t not in into]


def feature_file(node_type: str) -> str:
    """A node type's feature file in a dataset or part directory, without .npy: features
    (format 1, the one-type case) or features/TYPE."""
    return "features" if node_type == NODE else f"features/{node_type}"


def validate_csc(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, where="graph", name=None) -> None:
    """Check that (indptr, indices) is a CSC over num_nodes nodes; raise DatasetError
    naming the array by ``name(key)`` (default: its file under ``where``)."""
    name = name or (lambda key: str(Path(where) / f"{key}.npy"))
    if len(indptr) != num_nodes + 1:
        raise DatasetError(f"{name('indptr')}: length {len(indptr)}, expected {num_nodes + 1}")
    if indptr[0] != 0 or indptr[-1] != len(indices):
        raise DatasetError(
            f"{name('indptr')}: must start at 0 and end at len(indices)={len(indices)} "
            f"(got {indptr[0]} .. {indptr[-1]})")
    if num_nodes and (np.diff(indptr) < 0).any():
        raise DatasetError(f"{name('indptr')}: not monotone non-decreasing")
    if len(indices):
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= num_nodes:
            raise DatasetError(f"{name('indices')}: node ids span [{lo}, {hi}], outside 0..{num_nodes - 1}")


def check_types(node_types, node_type_offset, edge_types, where: str = "meta.json") -> None:
    """A typed graph's schema: unique node type names, their id ranges (T + 1 offsets from 0,
    non-decreasing), canonical edge types naming existing node types. DatasetError naming
    ``where`` and the type otherwise."""
    names = list(node_types)
    offsets = np.asarray(node_type_offset)
    if not names or len(set(names)) != len(names) or not all(isinstance(t, str) and t for t in names):
        raise DatasetError(f"{where}: node_types must be distinct non-empty names (got {names})")
    if offsets.shape != (len(names) + 1,) or offsets[0] != 0 or (np.diff(offsets) < 0).any():
        raise DatasetError(f"{where}: node_type_offset must be {len(names) + 1} non-decreasing offsets from 0 "
                           f"(got {offsets.tolist()})")
    if not edge_types:
        raise DatasetError(f"{where}: a typed graph needs at least one edge type")
    seen = set()
    for e in edge_types:
        if len(e) != 3 or not all(isinstance(x, str) and x for x in e):
            raise DatasetError(f"{where}: edge type {e!r} is not (source type, relation, destination type)")
        for end, t in (("source", e[0]), ("destination", e[2])):
            if t not in names:
                raise DatasetError(f"{where}: relation {':'.join(e)}: its {end} type {t!r} does not exist "
                                   f"(node types: {', '.join(names)})")
        if tuple(e) in seen:
            raise DatasetError(f"{where}: edge type {':'.join(e)} is listed twice")
        seen.add(tuple(e))


def validate_typed_edges(graph: CSCGraph, name=None, block: int = 1 << 24) -> None:
    """A typed CSC's edges against its schema: types in range, each node's in-edges sorted
    by type, every edge's source in its relation's source type and its destination (the
    node) in the destination type. Blocks of ``block`` edges; DatasetError naming the array
    (``name(key)``) and the relation."""
    name = name or (lambda key: key)
    check_types(graph.node_types, graph.node_type_offset, graph.edge_types, where=name("meta"))
    types, indptr, offsets = graph.type_per_edge, np.asarray(graph.indptr), graph.node_type_offset
    index = {t: i for i, t in enumerate(graph.node_types)}
    src_type = np.array([index[s] for s, _, _ in graph.edge_types])
    dst_type = np.array([index[d] for _, _, d in graph.edge_types])
    if len(types) != graph.num_edges:
        raise DatasetError(f"{name('type_per_edge')}: {len(types)} entries, expected one per edge ({graph.num_edges})")
    if offsets[-1] != graph.num_nodes:
        raise DatasetError(f"{name('meta')}: node_type_offset ends at {offsets[-1]}, but the graph has "
                           f"{graph.num_nodes} nodes")
    for a in range(0, graph.num_edges, block):
        b = min(graph.num_edges, a + block)
        c = min(graph.num_edges, b + 1)  # one edge past the block: the order across its end
        t = np.asarray(types[a:c]).astype(np.int64)
        if len(t) and t.max() >= len(graph.edge_types):
            raise DatasetError(f"{name('type_per_edge')}: edge type {t.max()}, but meta.json lists "
                               f"{len(graph.edge_types)}")
        node = np.searchsorted(indptr, np.arange(a, c), side="right") - 1  # each edge's destination
        falls = np.flatnonzero((np.diff(t) < 0) & (node[1:] == node[:-1]))
        if len(falls):
            raise DatasetError(f"{name('type_per_edge')}: node {node[falls[0]]}'s in-edges are not sorted by "
                               "edge type")
        t, node = t[:b - a], node[:b - a]
        src = np.asarray(graph.indices[a:b])
        for ids, want, end in ((src, src_type[t], "source"), (node, dst_type[t], "destination")):
            bad = np.flatnonzero((ids < offsets[want]) | (ids >= offsets[want + 1]))
            if len(bad):
                e, r = a + bad[0], t[bad[0]]
                key = "indices" if end == "source" else "indptr"
                tname = graph.node_types[want[bad[0]]]
                raise DatasetError(f"{name(key)}: edge {e} of relation {':'.join(graph.edge_types[r])} has {end} "
                                   f"{ids[bad[0]]}, outside {tname}'s ids {offsets[want[bad[0]]]}.."
                                   f"{offsets[want[bad[0]] + 1] - 1}")


def validate_node_data(num_nodes: int, num_classes: int, labels: np.ndarray, splits: dict, name,
                       first: int | None = None) -> None:
    """The checks every dataset passes, on load and before a write: labels are -1 or a
    class (or float targets: finite, or NaN where unlabelled, with num_classes 0), splits
    are 1-D integer ids in range, disjoint and labelled. ``labels`` covers
    the ``num_nodes`` ids first..first+num_nodes-1 (a typed dataset's target type; None:
    an untyped dataset's, from 0). Raises
    DatasetError naming the array by ``name(key)``."""
    values = labels.dtype.kind == "f"
    if values and num_classes:
        raise DatasetError(f"{name('labels')}: float labels are regression targets, but num_classes is {num_classes} "
                           "(expected 0)")
    if values and len(labels) and np.isinf(labels).any():
        raise DatasetError(f"{name('labels')}: {int(np.isinf(labels).sum())} targets are infinite (NaN marks an "
                           "unlabelled node)")
    if not values and num_nodes and len(labels):
        lo, hi = int(labels.min()), int(labels.max())
        if lo < -1 or hi >= num_classes:
            raise DatasetError(f"{name('labels')}: labels span [{lo}, {hi}], expected -1 (unlabelled) "
                               f"or 0..{num_classes - 1}")
    where = "" if first is None else " (the target type's ids)"
    first = first or 0
    seen, checked = np.zeros(num_nodes, dtype=bool), 0
    for split in SPLITS:
        ids = splits[split]
        if ids.ndim != 1 or (len(ids) and ids.dtype.kind not in "iu"):  # an empty list is an empty split
            raise DatasetError(f"{name(split)}: expected a 1-D integer array, got {ids.dtype} {ids.shape}")
        if len(ids):
            lo, hi = int(ids.min()), int(ids.max())
            if lo < first or hi >= first + num_nodes:
                raise DatasetError(f"{name(split)}: node ids span [{lo}, {hi}], outside {first}.."
                                   f"{first + num_nodes - 1}{where}")
            ids = np.asarray(ids) - first
            if seen[ids].any():
                raise DatasetError(f"{name(split)}: overlaps an earlier split")
            seen[ids] = True
            if int(np.count_nonzero(seen)) != checked + len(ids):  # marked fewer than it holds: a repeat within it
                raise DatasetError(f"{name(split)}: repeats a node id")
            checked += len(ids)
            if (np.isnan(labels[ids]) if values else labels[ids] < 0).any():
                raise DatasetError(f"{name(split)}: contains unlabelled nodes (label {'NaN' if values else -1})")


# ---------------------------------------------------------------- writing


class DatasetWriter(AtomicDirectory):
    """Write a dataset directory atomically (see fastsample.atomic).

    Arrays go into the temporary directory; ``commit`` writes meta.json from them and
    moves the directory into place.
    """

    def save(self, name: str, array: np.ndarray) -> None:
        """Save ``array`` as NAME.npy (a name with a slash, such as features/paper, in a subdirectory)."""
        (self.tmp / f"{name}.npy").parent.mkdir(parents=True, exist_ok=True)
        array = np.ascontiguousarray(array)
        check_space(self.tmp, array.nbytes + 4096, f"{self.path.name}/{name}.npy")
        np.save(self.tmp / f"{name}.npy", array, allow_pickle=False)

    def write_blocks(self, name: str, shape: tuple, dtype, blocks, progress=None) -> None:
        """Write NAME.npy of ``shape`` and ``dtype`` from ``blocks``, consecutive row blocks
        (each converted to ``dtype``), in sequential writes: a memmap's dirty pages would
        count as this process's memory. ``progress`` is called with each block's row count.
        Rows that do not add up to shape[0] are a DatasetError."""
        file = self.tmp / f"{name}.npy"
        file.parent.mkdir(parents=True, exist_ok=True)
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        check_space(self.tmp, nbytes + 4096, f"{self.path.name}/{name}.npy")
        rows = 0
        with open(file, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                     "fortran_order": False, "shape": tuple(shape)})
            for block in blocks:
                np.ascontiguousarray(block, dtype=dtype).tofile(f)
                rows += len(block)
                if progress:
                    progress(len(block))
        if rows != shape[0]:
            raise DatasetError(f"{self.path.name}/{name}.npy: {rows} rows written, expected {shape[0]}")

    def create(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """A writable memmap for arrays produced in chunks (e.g. large feature matrices)."""
        (self.tmp / f"{name}.npy").parent.mkdir(parents=True, exist_ok=True)
        return allocated_memmap(self.tmp / f"{name}.npy", dtype, shape)

    def commit(self, *, name: str, num_classes: int, schema: dict | None = None, **extra) -> dict:
        """Write meta.json from the saved arrays and move the directory into place.

        schema: a typed dataset's node_types, node_type_offset, edge_types and target_type
        (its features are saved as features/TYPE.npy, a type without that file is featureless).
        """
        indptr = np.load(self.tmp / "indptr.npy", mmap_mode="r")
        indices = np.load(self.tmp / "indices.npy", mmap_mode="r")
        if schema is None:
            features = np.load(self.tmp / "features.npy", mmap_mode="r")
            width, dtype, typed = int(features.shape[1]), features.dtype.name, {}
        else:
            specs = {}
            for t in schema["node_types"]:
                file = self.tmp / "features" / f"{t}.npy"
                arr = np.load(file, mmap_mode="r") if file.is_file() else None
                specs[t] = None if arr is None else {"dim": int(arr.shape[1]), "dtype": arr.dtype.name}
                del arr
            target = specs[schema["target_type"]]
            width, dtype = (target["dim"], target["dtype"]) if target else (0, None)
            typed = {"node_types": list(schema["node_types"]),
                     "node_type_offset": [int(o) for o in schema["node_type_offset"]],
                     "edge_types": [list(e) for e in schema["edge_types"]], "target_type": schema["target_type"],
                     "features": specs}
            features = None
        meta = {
            "format_version": TYPED_FORMAT_VERSION if schema else FORMAT_VERSION,
            "name": name,
            "num_nodes": len(indptr) - 1,
            "num_edges": len(indices),
            "feature_dim": width,
            "num_classes": int(num_classes),
            "dtypes": {"indptr": indptr.dtype.name, "indices": indices.dtype.name,
                       "features": dtype, "labels": np.load(self.tmp / "labels.npy", mmap_mode="r").dtype.name},
            "splits": {s: len(np.load(self.tmp / f"{s}.npy", mmap_mode="r")) for s in SPLITS},
            **typed,
            **extra,
        }
        if schema:
            meta["dtypes"]["type_per_edge"] = np.load(self.tmp / "type_per_edge.npy", mmap_mode="r").dtype.name
        del indptr, indices, features
        (self.tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        super().commit()
        return meta


def carried(ds: "Dataset") -> dict:
    """write_dataset's keyword arguments that carry what describes ``ds`` beyond its arrays
    into a dataset derived from it (link-split, targets): its graph's shape (symmetric,
    self_loops, reverse_relations), and a dataset from tables' id maps and their record."""
    out = {k: ds.meta[k] for k in ("symmetric", "self_loops", "reverse_relations", "tables") if k in ds.meta}
    if ds.path is not None and (Path(ds.path) / "id_maps").is_dir():
        out["copy"] = {"id_maps": Path(ds.path) / "id_maps"}
    return out


def write_dataset(path, graph: CSCGraph, features, labels, train, val, test, *,
                  name: str, num_classes: int, target_type: str | None = None, overwrite: bool = False,
                  arrays: dict | None = None, copy: dict | None = None, inputs=(), **extra) -> dict:
    """Validate in-memory arrays, then write them as a dataset directory (atomically).

    The checks are load_dataset's (shapes, dtypes, ids in range, disjoint labelled
    splits, labels below num_classes); a rejected write raises DatasetError naming the
    argument and leaves nothing on disk. Ids and offsets are stored as int32 where they
    fit (see id_dtype, offset_dtype).

    Args:
        path: the directory to write; graph: the in-edge CSC topology;
        features: (N, F) float32 or float16; labels: (N,) integers, -1 = unlabelled;
        train, val, test: disjoint labelled node ids; name: the dataset's name;
        num_classes: classes (labels are below it); overwrite: replace an existing directory
            (never one that is, or holds, the working directory or one of ``inputs``);
        arrays: more arrays to store, {relative name without .npy: array}, checked by their
            owner (e.g. fastsample/data/edge_splits.py's link/*); copy: {relative name: a file or
            folder} to copy in as they are (carried: a source's id maps); extra: more meta.json
            fields (e.g. provenance).
        A typed graph (graph.typed) also needs ``target_type``, features as {node type:
        (its nodes, F_type) or None}, and labels for the target type's nodes only.
    Returns:
        meta.json's contents.
    """
    def arg(key):
        return f"write_dataset({key}=...)"

    values = np.asarray(labels).dtype.kind == "f"  # regression targets: num_classes 0
    if not isinstance(num_classes, (int, np.integer)) or num_classes < 0 or (num_classes == 0) != values:
        raise DatasetError(f"{arg('num_classes')}: expected a positive integer for class labels, 0 for float "
                           f"targets (labels {np.asarray(labels).dtype}), got {num_classes!r}")
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    for key, arr in (("graph.indptr", indptr), ("graph.indices", indices)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise DatasetError(f"{arg(key)}: expected a 1-D integer array, got {arr.dtype} {arr.shape}")
    n = len(indptr) - 1
    if n < 0:
        raise DatasetError(f"{arg('graph.indptr')}: empty; a graph of N nodes has N + 1 offsets")
    validate_csc(indptr, indices, n, name=lambda key: arg(f"graph.{key}"))
    # the format rule: the one-type case (no edge types, no target_type) is format 1, features
    # one array and no schema; anything else format 2 (describe_types reads both)
    schema = None if graph.type_per_edge is None and target_type is None else {
        "node_types": graph.node_types, "node_type_offset": graph.node_type_offset, "edge_types": graph.edge_types,
        "target_type": target_type}
    if schema is not None:
        if target_type not in graph.node_types or graph.type_per_edge is None:
            raise DatasetError(f"{arg('target_type')}: {target_type!r} is not a node type "
                               f"({', '.join(graph.node_types)}); a typed graph (CSCGraph with type_per_edge) needs "
                               "its target type, and only it has one")
        validate_typed_edges(graph, name=lambda key: arg("graph" if key == "meta" else f"graph.{key}"))
    shards = {NODE: features} if schema is None else features
    if not isinstance(shards, dict) or set(shards) != set(graph.node_types):
        raise DatasetError(f"{arg('features')}: a typed graph takes {{node type: array or None}} for every node "
                           f"type ({', '.join(graph.node_types)})")
    offsets = graph.node_type_offset
    for i, (t, f) in enumerate(shards.items()):
        count, key = int(offsets[i + 1] - offsets[i]), "features" if t == NODE else f"features[{t!r}]"
        if f is not None and (np.asarray(f).dtype.name not in FEATURE_DTYPES or np.ndim(f) != 2 or len(f) != count):
            f = np.asarray(f)
            raise DatasetError(f"{arg(key)}: {f.dtype} {f.shape}, expected {' or '.join(FEATURE_DTYPES)} "
                               f"({count}, feature_dim) for the {count} nodes of type {t}")
    target = graph.node_types.index(target_type or NODE)
    lo, hi = int(offsets[target]), int(offsets[target + 1])
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) != hi - lo or labels.dtype.kind not in "iuf":
        raise DatasetError(f"{arg('labels')}: {labels.dtype} {labels.shape}, expected integers (or float targets) "
                           f"({hi - lo},) for the {hi - lo} nodes of the target type {target_type or NODE}")
    labels = labels.astype(VALUE_DTYPE if values else LABEL_DTYPE, copy=False)
    splits = {"train": np.asarray(train), "val": np.asarray(val), "test": np.asarray(test)}
    validate_node_data(hi - lo, int(num_classes), labels, splits, name=arg, first=lo if target_type else None)
    ids = id_dtype(n)
    with DatasetWriter(path, overwrite=overwrite, inputs=inputs) as writer:
        writer.save("indptr", indptr.astype(offset_dtype(len(indices)), copy=False))
        writer.save("indices", indices.astype(ids, copy=False))
        for t, f in shards.items():
            if f is not None:
                writer.save(feature_file(t), np.asarray(f))
        writer.save("labels", labels)
        for k, v in splits.items():
            writer.save(k, v.astype(ids, copy=False))
        for key, arr in (arrays or {}).items():
            writer.save(key, arr)
        for key, source in (copy or {}).items():
            (shutil.copytree if Path(source).is_dir() else shutil.copyfile)(source, writer.tmp / key)
        if schema is not None:
            writer.save("type_per_edge", graph.type_per_edge)
        return writer.commit(name=name, num_classes=int(num_classes), schema=schema, **extra)

