"""Excluded edges (link prediction): the edges a batch trains on, which no layer of its
MFGs may use (else the model sees the answer). The kernels take them as the sorted
positions, in the graph's ``indices``, of every copy of each edge src -> dst, or on a
typed graph, if the edge types are given, of its copies of that type (rng.py says how the
choice rule skips them, per (node, edge type) segment)."""

from __future__ import annotations

import numba
import numpy as np

from fastsample.data.graph import CSCGraph
from fastsample.sampling.rng import kernel_types


@numba.njit(nogil=True, cache=True)
def _positions(indptr, indices, types, src, dst, etypes, row_offset):
    """Positions of the edges src[e] -> dst[e] (of type etypes[e]; any type where etypes
    is empty, or where the graph has no types: there every edge is type 0)."""
    count = 0
    for e in range(len(src)):
        v = dst[e] - row_offset
        for p in range(indptr[v], indptr[v + 1]):
            count += indices[p] == src[e] and (len(etypes) == 0 or len(types) == 0 or types[p] == etypes[e])
    out = np.empty(count, dtype=np.int64)
    n = 0
    for e in range(len(src)):
        v = dst[e] - row_offset
        for p in range(indptr[v], indptr[v + 1]):
            if indices[p] == src[e] and (len(etypes) == 0 or len(types) == 0 or types[p] == etypes[e]):
                out[n] = p
                n += 1
    return out


_ANY = np.empty(0, dtype=np.int64)


def edge_positions(graph: CSCGraph, src, dst, etypes=None, row_offset: int = 0) -> np.ndarray:
    """Sorted unique int64 positions in ``graph.indices`` of every edge src[i] -> dst[i]
    (a pair that is no edge adds none); with ``etypes`` (edge type indices, one per pair)
    only the copies of edge type etypes[i]. Node v's in-edges are row v - row_offset (a
    vanilla share of the topology); every dst must lie in those rows."""
    src, dst = np.asarray(src), np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise ValueError(f"exclude: src and dst must be 1-D and alike (got {src.shape} and {dst.shape})")
    if len(dst) and (int(dst.min()) < row_offset or int(dst.max()) >= row_offset + graph.num_nodes):
        raise ValueError(f"exclude: destinations span [{int(dst.min())}, {int(dst.max())}], outside the graph's rows "
                         f"{row_offset}..{row_offset + graph.num_nodes - 1}")
    if etypes is not None:
        etypes = np.asarray(etypes)
        if etypes.shape != src.shape or (len(etypes) and etypes.dtype.kind not in "iu"):
            raise ValueError(f"exclude: etypes must be integers, one per pair (got {etypes.dtype} {etypes.shape})")
        if len(etypes) and (int(etypes.min()) < 0 or int(etypes.max()) >= graph.num_edge_types):
            raise ValueError(f"exclude: edge types span [{int(etypes.min())}, {int(etypes.max())}], outside the "
                             f"graph's 0..{graph.num_edge_types - 1}")
    found = _positions(graph.indptr, graph.indices, kernel_types(graph), src.astype(np.int64), dst.astype(np.int64),
                       _ANY if etypes is None else etypes.astype(np.int64), int(row_offset))
    return np.unique(found)


def check_excluded(graph: CSCGraph, excluded) -> np.ndarray | None:
    """``excluded`` as the kernels take it (sorted unique int64 positions), or None."""
    if excluded is None:
        return None
    excluded = np.ascontiguousarray(excluded, dtype=np.int64)
    if excluded.ndim != 1:
        raise ValueError(f"exclude: positions must be 1-D (got shape {excluded.shape})")
    if len(excluded) and (excluded[0] < 0 or excluded[-1] >= graph.num_edges or np.any(np.diff(excluded) <= 0)):
        raise ValueError(f"exclude: positions must be sorted, unique and in 0..{graph.num_edges - 1}")
    return excluded
