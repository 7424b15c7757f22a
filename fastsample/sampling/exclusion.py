"""Excluded edges (link prediction): the edges a batch trains on, which no layer of its
MFGs may use (else the model sees the answer). The kernels take them as the sorted
positions, in the graph's ``indices``, of every copy of each edge src -> dst (rng.py
says how the choice rule skips them)."""

from __future__ import annotations

import numba
import numpy as np

from fastsample.graph import CSCGraph


@numba.njit(nogil=True, cache=True)
def _positions(indptr, indices, src, dst, row_offset):
    count = 0
    for e in range(len(src)):
        v = dst[e] - row_offset
        for p in range(indptr[v], indptr[v + 1]):
            count += indices[p] == src[e]
    out = np.empty(count, dtype=np.int64)
    n = 0
    for e in range(len(src)):
        v = dst[e] - row_offset
        for p in range(indptr[v], indptr[v + 1]):
            if indices[p] == src[e]:
                out[n] = p
                n += 1
    return out


def edge_positions(graph: CSCGraph, src, dst, row_offset: int = 0) -> np.ndarray:
    """Sorted unique int64 positions in ``graph.indices`` of every edge src[i] -> dst[i]
    (a pair that is no edge adds none). Node v's in-edges are row v - row_offset (a vanilla
    share of the topology); every dst must lie in those rows."""
    src, dst = np.asarray(src), np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise ValueError(f"exclude: src and dst must be 1-D and alike (got {src.shape} and {dst.shape})")
    if len(dst) and (int(dst.min()) < row_offset or int(dst.max()) >= row_offset + graph.num_nodes):
        raise ValueError(f"exclude: destinations span [{int(dst.min())}, {int(dst.max())}], outside the graph's rows "
                         f"{row_offset}..{row_offset + graph.num_nodes - 1}")
    found = _positions(graph.indptr, graph.indices, src.astype(np.int64), dst.astype(np.int64), int(row_offset))
    return np.unique(found)


def check_excluded(graph: CSCGraph, excluded) -> np.ndarray | None:
    """``excluded`` as the kernels take it (sorted unique int64 positions), or None."""
    if excluded is None:
        return None
    if graph.typed:
        raise ValueError("exclude: typed graphs do not take excluded edges yet")
    excluded = np.ascontiguousarray(excluded, dtype=np.int64)
    if excluded.ndim != 1:
        raise ValueError(f"exclude: positions must be 1-D (got shape {excluded.shape})")
    if len(excluded) and (excluded[0] < 0 or excluded[-1] >= graph.num_edges or np.any(np.diff(excluded) <= 0)):
        raise ValueError(f"exclude: positions must be sorted, unique and in 0..{graph.num_edges - 1}")
    return excluded
