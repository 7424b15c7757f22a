"""Edge list -> in-edge CSC, the one conversion every loader and generator uses.

Policy (the same for every source, so datasets are comparable):
  * ``symmetric=True`` (undirected input): each edge is stored in both directions.
  * duplicate edges are merged: a message-passing GNN should not weight a neighbour by
    how often the input happened to list the edge;
  * self-loops are dropped unless ``self_loops=True``: GraphSAGE already combines a node
    with itself through its root weight, so a self-loop would count it twice.
Within each node, in-neighbours are stored sorted ascending.

Passes: count in-degrees (O(E)), scatter sources into place (O(E)), sort and dedupe each
node's segment in parallel (O(E log d)), compact (O(E)). Memory: the input plus about two
output-sized index arrays; no O(E) int64 temporaries when ids are int32.
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.graph import CSCGraph, DatasetError, id_dtype, offset_dtype


@numba.njit(cache=True, nogil=True)
def _count(src, dst, num_nodes, symmetric, self_loops):
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        counts[v + 1] += 1
        if symmetric and u != v:
            counts[u + 1] += 1
    return counts


@numba.njit(cache=True, nogil=True)
def _scatter(src, dst, indptr, out, symmetric, self_loops):
    pos = indptr[:-1].copy()
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        out[pos[v]] = u
        pos[v] += 1
        if symmetric and u != v:
            out[pos[u]] = v
            pos[u] += 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_dedupe(indptr, indices):
    n = len(indptr) - 1
    unique = np.zeros(n + 1, dtype=np.int64)
    for v in numba.prange(n):
        seg = indices[indptr[v]:indptr[v + 1]]
        if len(seg) == 0:
            continue
        seg.sort()
        k = 1
        for i in range(1, len(seg)):
            if seg[i] != seg[k - 1]:
                seg[k] = seg[i]
                k += 1
        unique[v + 1] = k
    return unique


@numba.njit(cache=True, nogil=True, parallel=True)
def _compact(indptr, indices, new_indptr, out):
    for v in numba.prange(len(indptr) - 1):
        start = indptr[v]
        for i in range(new_indptr[v + 1] - new_indptr[v]):
            out[new_indptr[v] + i] = indices[start + i]


def edges_to_csc(src: np.ndarray, dst: np.ndarray, num_nodes: int, *,
                 symmetric: bool, self_loops: bool = False) -> CSCGraph:
    """Build the in-edge CSC of the edges ``src[i] -> dst[i]`` (see module doc for policy).

    Args:
        src, dst: 1-D integer arrays of equal length, ids in 0..num_nodes-1;
        num_nodes: the node count; symmetric: store each edge both ways;
        self_loops: keep edges v -> v.
    Returns:
        The CSCGraph (ids int32 where they fit). Bad input is a DatasetError (a ValueError).
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise DatasetError(f"src and dst must be 1-D of equal length (got {src.shape} and {dst.shape})")
    if len(src):
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0 or hi >= num_nodes:
            raise DatasetError(f"edge endpoints span [{lo}, {hi}], outside 0..{num_nodes - 1}")
    ids = id_dtype(num_nodes)
    src = src.astype(ids, copy=False)
    dst = dst.astype(ids, copy=False)

    indptr = np.cumsum(_count(src, dst, num_nodes, symmetric, self_loops))
    indices = np.empty(int(indptr[-1]), dtype=ids)
    _scatter(src, dst, indptr, indices, symmetric, self_loops)
    new_indptr = np.cumsum(_sort_dedupe(indptr, indices))
    out = np.empty(int(new_indptr[-1]), dtype=ids)
    _compact(indptr, indices, new_indptr, out)
    del indices
    return CSCGraph(new_indptr.astype(offset_dtype(len(out))), out)


# ---------------------------------------------------------------- bounded memory, on disk


@numba.njit(cache=True, nogil=True)
def _count_into(src, dst, counts, symmetric, self_loops):
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        counts[v + 1] += 1
        if symmetric and u != v:
            counts[u + 1] += 1


@numba.njit(cache=True, nogil=True)
def _scatter_into(src, dst, pos, out, symmetric, self_loops):
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        out[pos[v]] = u
        pos[v] += 1
        if symmetric and u != v:
            out[pos[u]] = v
            pos[u] += 1


@numba.njit(cache=True, nogil=True)
def _compact_left(indptr, indices, new_indptr):
    # new_indptr[v] <= indptr[v] for every v: moving segments left, in order, never
    # overwrites a value still to be read
    for v in range(len(indptr) - 1):
        start, dest = indptr[v], new_indptr[v]
        for i in range(new_indptr[v + 1] - dest):
            indices[dest + i] = indices[start + i]


def shrink_npy(path, length: int) -> None:
    """Cut the 1-D .npy file at ``path`` to its first ``length`` entries, in place: the
    header is rewritten at its old size (space-padded, as the format allows) and the file
    truncated, so no copy of the data is made."""
    with open(path, "r+b") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        data_start = f.tell()
        if len(shape) != 1 or length > shape[0]:
            raise ValueError(f"{path}: cannot shrink {shape} to ({length},)")
        prefix = 8 + (2 if version == (1, 0) else 4)  # magic + version, then the header length
        fields = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran, "shape": (length,)}
        text = "{" + "".join(f"{k!r}: {v!r}, " for k, v in fields.items()) + "}"  # as numpy writes it
        text = text.ljust(data_start - prefix - 1) + "\n"
        if len(text) != data_start - prefix:
            raise ValueError(f"{path}: header does not fit")
        f.seek(prefix)
        f.write(text.encode("latin1"))
        f.truncate(data_start + length * dtype.itemsize)


def edges_to_csc_file(chunks, num_nodes: int, indices_path, *, symmetric: bool, self_loops: bool = False,
                      progress=None) -> np.ndarray:
    """edges_to_csc for edge lists too large for memory: the same CSC, with the indices
    written to the .npy file ``indices_path`` (memory-mapped, so the kernel pages it out)
    and O(num_nodes) arrays in memory besides one chunk.

    Args:
        chunks: a function returning an iterable of (src, dst) chunks; it is called twice
            (count, then place) and must give the same chunks both times;
        num_nodes, symmetric, self_loops: as edges_to_csc;
        indices_path: the .npy file to write (created, then cut to the final length);
        progress: called with the number of pairs of each chunk, per pass (or None).
    Returns:
        indptr (int64, num_nodes + 1); the indices are in the file, sorted and deduplicated
        within each node exactly as edges_to_csc leaves them.
    """
    ids = id_dtype(num_nodes)
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    for src, dst in chunks():
        _count_into(src.astype(ids, copy=False), dst.astype(ids, copy=False), counts, symmetric, self_loops)
        if progress:
            progress(len(src))
    indptr = np.cumsum(counts)
    del counts
    indices = np.lib.format.open_memmap(indices_path, mode="w+", dtype=ids, shape=(int(indptr[-1]),))
    pos = indptr[:-1].copy()
    for src, dst in chunks():
        _scatter_into(src.astype(ids, copy=False), dst.astype(ids, copy=False), pos, indices, symmetric, self_loops)
        if progress:
            progress(len(src))
    del pos
    new_indptr = np.cumsum(_sort_dedupe(indptr, indices))
    _compact_left(indptr, indices, new_indptr)
    indices.flush()
    del indices
    shrink_npy(indices_path, int(new_indptr[-1]))
    return new_indptr
