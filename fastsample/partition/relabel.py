"""Renumber nodes so each part owns one contiguous id range.

New ids list part 0's nodes, then part 1's, ..., each part's in original id order, so
``offsets[k]:offsets[k+1]`` is part k's range and ``owner(gid)`` is a binary search over
``offsets`` (``owner_of``). ``orig_ids[new] = old`` maps back (predictions, checkpoints).
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.atomic import allocated_memmap
from fastsample.data.graph import CSCGraph, offset_dtype


def relabel_order(part: np.ndarray, parts: int) -> tuple[np.ndarray, np.ndarray]:
    """(orig_ids: new -> old, offsets: (parts + 1,) int64)."""
    orig_ids = np.argsort(part, kind="stable").astype(np.int64)
    offsets = np.zeros(parts + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(part, minlength=parts))
    return orig_ids, offsets


def owner_of(offsets: np.ndarray, gids) -> np.ndarray:
    """Part owning each (new) global id: the one home of the owner lookup.

    Args:
        offsets: (parts + 1,) the parts' id ranges; gids: new global ids (array or scalar).
    Returns:
        The owning part of each id.
    """
    return np.searchsorted(offsets, gids, side="right") - 1


@numba.njit(nogil=True, cache=True, parallel=True)
def _permute(indptr, indices, types, orig_ids, new_of_old, new_indptr, out, out_types):
    """Rows orig_ids under new ids, each node's in-edges sorted by (edge type, new source
    id); ``types`` empty: the one-type case, sorted by source alone (its fast path)."""
    n = np.int64(len(new_of_old))
    for i in numba.prange(len(orig_ids)):
        o = orig_ids[i]
        start, k = new_indptr[i], indptr[o + 1] - indptr[o]
        if len(types) == 0:
            for j in range(k):
                out[start + j] = new_of_old[indices[indptr[o] + j]]
            out[start:start + k].sort()
            continue
        key = np.empty(k, dtype=np.int64)
        for j in range(k):
            key[j] = np.int64(types[indptr[o] + j]) * n + new_of_old[indices[indptr[o] + j]]
        key.sort()
        for j in range(k):
            out_types[start + j] = key[j] // n
            out[start + j] = key[j] % n


CHUNK_EDGES = 1 << 26  # relabel_graph_to's rows per pass hold about this many edges (256 MiB of int32)


def _new_indptr(graph: CSCGraph, orig_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = graph.indices.dtype
    new_of_old = np.empty(len(orig_ids), dtype=ids)
    new_of_old[orig_ids] = np.arange(len(orig_ids), dtype=ids)
    degree = np.diff(np.asarray(graph.indptr, dtype=np.int64))[orig_ids]
    new_indptr = np.zeros(len(orig_ids) + 1, dtype=np.int64)
    np.cumsum(degree, out=new_indptr[1:])
    return new_of_old, new_indptr


def relabel_graph_to(graph: CSCGraph, orig_ids: np.ndarray, folder, type_runs: np.ndarray | None = None) -> CSCGraph:
    """The same graph under new ids (node i here is node orig_ids[i] there, each node's
    in-neighbours sorted), written to ``folder``/indptr.npy and indices.npy row block by row
    block (about CHUNK_EDGES edges each): O(num_nodes) memory plus a block, and sequential
    writes. Returns the graph memory-mapped from those files. A typed graph keeps each
    node's in-edges sorted by edge type (type_per_edge.npy too); ``type_runs`` is its new
    node type table (CSCGraph.node_type_offset: runs of ids, run i of type i mod T)."""
    new_of_old, new_indptr = _new_indptr(graph, orig_ids)
    n, e = len(orig_ids), int(new_indptr[-1])
    np.save(f"{folder}/indptr.npy", new_indptr.astype(offset_dtype(e)))
    arrays = {name: allocated_memmap(f"{folder}/{name}.npy", arr.dtype, (e,))
              for name, arr in graph.edge_arrays().items()}
    types_in = graph.edge_arrays().get("type_per_edge", np.empty(0, np.uint8))
    lo = 0
    while lo < n:
        # the rows up to ~CHUNK_EDGES edges on (at least one row: a hub may hold more)
        hi = max(lo + 1, int(np.searchsorted(new_indptr, new_indptr[lo] + CHUNK_EDGES, side="right")) - 1)
        hi = min(hi, n)
        base = int(new_indptr[lo])
        size = int(new_indptr[hi]) - base
        block = {name: np.empty(size if len(arr) else 0, dtype=arr.dtype)
                 for name, arr in (("indices", graph.indices), ("type_per_edge", types_in))}
        _permute(graph.indptr, graph.indices, types_in, orig_ids[lo:hi], new_of_old, new_indptr[lo:hi + 1] - base,
                 block["indices"], block["type_per_edge"])
        for name, out in arrays.items():
            out[base:base + size] = block[name]
        lo = hi
    for out in arrays.values():
        out.flush()
    loaded = {name: np.load(f"{folder}/{name}.npy", mmap_mode="r") for name in ("indptr", *arrays)}
    del arrays, out
    return CSCGraph(loaded["indptr"], loaded["indices"], loaded.get("type_per_edge"), type_runs, graph.node_types,
                    graph.edge_types)