"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from the raw ``ind.<name>.*`` files.

The raw files are Python 2 pickles. Unpickling can run arbitrary code, so they are read
with an unpickler that admits only the handful of types those files contain (numpy
arrays and dtypes, SciPy CSR matrices, ``defaultdict(list)``) and refuses anything else.
CSR matrices are decoded into a small holder, so SciPy is not needed.

Processing follows the Planetoid convention (as PyG and DGL do): nodes are ``allx`` then
``tx``; the test rows are put back in the order of ``ind.<name>.test.index``; train is the
first ``len(y)`` nodes, val the next 500, test the ids in ``test.index``. CiteSeer's test
ids leave gaps (ids with no row anywhere): those nodes get zero features and label -1.
The citation graph is undirected: both directions are stored, duplicates and self-loops
dropped (see edges.py).
"""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import numpy as np

from fastsample.data.edges import edges_to_csc
from fastsample.data.graph import CSCGraph, Dataset, DatasetError, id_dtype

NAMES = ("cora", "citeseer", "pubmed")
NUM_VAL = 500


class _CSRMatrix:
    """What a pickled scipy.sparse.csr_matrix carries: data, indices, indptr, shape."""

    def __setstate__(self, state: dict) -> None:
        self.state = state

    def toarray(self) -> np.ndarray:
        s = self.state
        shape = s.get("_shape") or s.get("shape")
        indptr = np.asarray(s["indptr"], dtype=np.int64)
        out = np.zeros(shape, dtype=np.float32)
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        out[rows, np.asarray(s["indices"], dtype=np.int64)] = s["data"]
        return out


_ALLOWED = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # numpy's own reconstructors, taken from the objects rather than private modules
    ("numpy.core.multiarray", "_reconstruct"): np.ndarray((0,)).__reduce__()[0],
    ("numpy._core.multiarray", "_reconstruct"): np.ndarray((0,)).__reduce__()[0],
    ("numpy.core.multiarray", "scalar"): np.float64(0).__reduce__()[0],
    ("numpy._core.multiarray", "scalar"): np.float64(0).__reduce__()[0],
    ("scipy.sparse.csr", "csr_matrix"): _CSRMatrix,
    ("scipy.sparse._csr", "csr_matrix"): _CSRMatrix,
    ("collections", "defaultdict"): collections.defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path):
        super().__init__(file, encoding="latin1")
        self.path = path

    def find_class(self, module: str, name: str):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise DatasetError(
                f"{self.path}: refused to unpickle {module}.{name}; Planetoid files may only "
                "contain numpy arrays, SciPy CSR matrices and defaultdict(list)") from None


def _unpickle(path: Path):
    if not path.is_file():
        raise DatasetError(f"{path}: missing")
    try:
        with open(path, "rb") as f:
            return _RestrictedUnpickler(f, path).load()
    except DatasetError:
        raise
    except Exception as e:
        raise DatasetError(f"{path}: not a readable Planetoid pickle ({type(e).__name__}: {e})") from e


def _matrix(obj, path: Path) -> np.ndarray:
    try:
        arr = obj.toarray() if isinstance(obj, _CSRMatrix) else obj
    except Exception as e:  # a CSR whose fields disagree (truncated, swapped)
        raise DatasetError(f"{path}: not a consistent sparse matrix ({type(e).__name__}: {e})") from e
    if not isinstance(arr, np.ndarray) or arr.ndim != 2 or arr.dtype.kind not in "biuf":
        raise DatasetError(f"{path}: expected a 2-D numeric matrix, got {type(obj).__name__}"
                           + (f" {arr.dtype} {arr.shape}" if isinstance(arr, np.ndarray) else ""))
    return arr


def _edges(graph, path: Path, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The adjacency dict {node: [neighbours]} as (src, dst) arrays, checked."""
    if not isinstance(graph, dict):
        raise DatasetError(f"{path}: expected an adjacency dict, got {type(graph).__name__}")
    try:
        src = np.fromiter((u for u, nbrs in graph.items() for _ in nbrs), dtype=np.int64)
        dst = np.fromiter((v for nbrs in graph.values() for v in nbrs), dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as e:
        raise DatasetError(f"{path}: expected integer node ids mapping to lists of ids ({e})") from e
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise DatasetError(f"{path}: node ids span [{min(src.min(), dst.min())}, {max(src.max(), dst.max())}], "
                           f"outside 0..{num_nodes - 1}")
    return src, dst


def _labels(onehot: np.ndarray) -> np.ndarray:
    """Class ids from one-hot rows; an all-zero row is unlabelled (-1)."""
    return np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1).astype(np.int64)


def load_planetoid(raw_dir: str | Path, name: str) -> Dataset:
    """Read ``ind.<name>.*`` from raw_dir.

    Nodes are ``allx``'s rows, then ids ``len(allx)`` up to the largest test id; row i of
    ``tx``/``ty`` belongs to node ``test.index[i]``. Ids in that range that the test index
    leaves out (CiteSeer has 15) are isolated nodes with zero features and no label.
    Anything inconsistent is one DatasetError naming the file.

    Args:
        raw_dir: the directory holding the ``ind.<name>.*`` files;
        name: cora, citeseer or pubmed (any case).
    Returns:
        Dataset (features float32 (N, F), labels int64 (N,); ``.write(path, name=...)``
        stores it).
    """
    raw_dir = Path(raw_dir)
    if name.lower() not in NAMES:
        raise DatasetError(f"name {name!r}: expected one of {', '.join(NAMES)}")
    name = name.lower()
    file = {k: raw_dir / f"ind.{name}.{k}" for k in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")}
    m = {k: _matrix(_unpickle(file[k]), file[k]) for k in ("x", "tx", "allx", "y", "ty", "ally")}
    graph = _unpickle(file["graph"])
    if not file["test.index"].is_file():
        raise DatasetError(f"{file['test.index']}: missing")
    try:
        test_index = np.array([int(t) for t in file["test.index"].read_text().split()], dtype=np.int64)
    except (ValueError, UnicodeDecodeError) as e:
        raise DatasetError(f"{file['test.index']}: expected one integer per line ({e})") from e

    # every check names the file whose contents disagree with the others
    num_features, num_classes = m["allx"].shape[1], m["ally"].shape[1]
    for k, width, what in (("x", num_features, "features"), ("tx", num_features, "features"),
                           ("y", num_classes, "classes"), ("ty", num_classes, "classes")):
        if m[k].shape[1] != width:
            base = "allx" if what == "features" else "ally"
            raise DatasetError(f"{file[k]}: {m[k].shape[1]} columns, but {file[base].name} has {width} {what}")
    for rows, labels_of in (("x", "y"), ("allx", "ally"), ("tx", "ty")):
        if len(m[rows]) != len(m[labels_of]):
            raise DatasetError(f"{file[labels_of]}: {len(m[labels_of])} rows, but {file[rows].name} has "
                               f"{len(m[rows])}")
    if len(m["x"]) > len(m["allx"]):
        raise DatasetError(f"{file['x']}: {len(m['x'])} training rows, more than the {len(m['allx'])} of "
                           f"{file['allx'].name}")
    num_known = len(m["allx"])
    if len(test_index) != len(m["tx"]):
        raise DatasetError(f"{file['test.index']}: {len(test_index)} ids, but {file['tx'].name} has "
                           f"{len(m['tx'])} rows")
    if len(np.unique(test_index)) != len(test_index):
        raise DatasetError(f"{file['test.index']}: repeats a node id")
    if len(test_index) and test_index.min() < num_known:
        raise DatasetError(f"{file['test.index']}: id {test_index.min()} falls among the {num_known} nodes of "
                           f"{file['allx'].name} (test ids must follow them)")
    if len(m["x"]) + NUM_VAL > num_known:
        raise DatasetError(f"{file['allx']}: {num_known} rows, too few for {len(m['x'])} training and "
                           f"{NUM_VAL} validation nodes")

    num_nodes = max(num_known, int(test_index.max()) + 1 if len(test_index) else 0)
    features = np.zeros((num_nodes, num_features), dtype=np.float32)
    features[:num_known] = m["allx"]
    features[test_index] = m["tx"]
    labels = np.full(num_nodes, -1, dtype=np.int64)
    labels[:num_known] = _labels(m["ally"])
    labels[test_index] = _labels(m["ty"])

    src, dst = _edges(graph, file["graph"], num_nodes)
    csc: CSCGraph = edges_to_csc(src, dst, num_nodes, symmetric=True)

    ids = id_dtype(num_nodes)
    train = np.arange(len(m["y"]), dtype=ids)
    val = np.arange(len(m["y"]), len(m["y"]) + NUM_VAL, dtype=ids)
    test = np.sort(test_index)
    test = test[labels[test] >= 0].astype(ids)
    return Dataset(csc, features, labels, train, val, test, int(num_classes))
