"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from the raw ``ind.<name>.*`` files.

The raw files are Python 2 pickles. Unpickling can run arbitrary code, so they are read
with an unpickler that admits only the handful of types those files contain (numpy
arrays and dtypes, SciPy CSR matrices, ``defaultdict(list)``) and refuses anything else.
CSR matrices are decoded into a small holder, so SciPy is not needed.

Processing follows the Planetoid convention (as PyG and DGL do): nodes are ``allx`` then
``tx``; the test rows are put back in the order of ``ind.<name>.test.index``; train is the
first ``len(y)`` nodes, val the next 500, test the ids in ``test.index``. CiteSeer has test
ids with no feature row: they get zero features and label -1. The citation graph is
undirected: both directions are stored, duplicates and self-loops dropped (see edges.py).
"""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import numpy as np

from fastsample.data.edges import edges_to_csc
from fastsample.graph import CSCGraph, DatasetError, id_dtype

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


def _dense(obj, path: Path) -> np.ndarray:
    arr = obj.toarray() if isinstance(obj, _CSRMatrix) else obj
    if not isinstance(arr, np.ndarray) or arr.ndim != 2:
        raise DatasetError(f"{path}: expected a 2-D matrix, got {type(obj).__name__}")
    return arr


def load_planetoid(raw_dir: str | Path, name: str):
    """Read ``ind.<name>.*`` from raw_dir.

    Returns (graph, features float32 (N, F), labels int64 (N,), train, val, test, num_classes).
    """
    raw_dir = Path(raw_dir)
    name = name.lower()
    if name not in NAMES:
        raise DatasetError(f"--name {name!r}: expected one of {', '.join(NAMES)}")
    file = {k: raw_dir / f"ind.{name}.{k}" for k in ("x", "tx", "allx", "y", "ty", "ally", "graph")}
    x, tx, allx, y, ty, ally = (_dense(_unpickle(file[k]), file[k])
                                for k in ("x", "tx", "allx", "y", "ty", "ally"))
    graph = _unpickle(file["graph"])
    if not isinstance(graph, dict):
        raise DatasetError(f"{file['graph']}: expected an adjacency dict, got {type(graph).__name__}")
    index_file = raw_dir / f"ind.{name}.test.index"
    if not index_file.is_file():
        raise DatasetError(f"{index_file}: missing")
    try:
        test_index = np.loadtxt(index_file, dtype=np.int64, ndmin=1)
    except ValueError as e:
        raise DatasetError(f"{index_file}: expected one integer per line ({e})") from e

    sorted_test = np.sort(test_index)
    if len(tx) != len(test_index) or len(ty) != len(test_index):
        # CiteSeer: some test ids have no row; give them zero features and no label.
        span = int(sorted_test[-1] - sorted_test[0] + 1)
        tx_ext = np.zeros((span, tx.shape[1]), dtype=np.float32)
        ty_ext = np.zeros((span, ty.shape[1]), dtype=ty.dtype)
        tx_ext[sorted_test - sorted_test[0]] = tx
        ty_ext[sorted_test - sorted_test[0]] = ty
        tx, ty = tx_ext, ty_ext

    features = np.concatenate([allx, tx]).astype(np.float32)
    onehot = np.concatenate([ally, ty])
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1).astype(np.int64)
    features[test_index] = features[sorted_test]
    labels[test_index] = labels[sorted_test]
    num_nodes = len(labels)

    src, dst = [], []
    for u, nbrs in graph.items():
        src.extend([u] * len(nbrs))
        dst.extend(nbrs)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if len(src) and max(src.max(), dst.max()) >= num_nodes:
        raise DatasetError(f"{file['graph']}: node id {max(src.max(), dst.max())} >= {num_nodes} nodes")
    csc: CSCGraph = edges_to_csc(src, dst, num_nodes, symmetric=True)

    ids = id_dtype(num_nodes)
    train = np.arange(len(y), dtype=ids)
    val = np.arange(len(y), len(y) + NUM_VAL, dtype=ids)
    test = sorted_test[labels[sorted_test] >= 0].astype(ids)
    return csc, features, labels, train, val, test, int(onehot.shape[1])
