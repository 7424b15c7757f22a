"""Boundary refinement within the stated balance (balance.py): after ``balance`` has brought
a partition within its caps, recover cut without leaving them.

Local search on the boundary only (nodes with a neighbour in another part), in passes:
  * moves: a node goes to the part holding most of its neighbours when that cuts fewer
    edges and the part has room for its group and its in-edges (gains recounted at the
    move, best first);
  * swaps: two nodes of one group, each in the part the other wants, trade places when
    together (less twice the edges between them) they cut fewer edges and the in-edges
    fit; a swap keeps every count, so groups held exactly (the splits) improve too.
Every accepted step lowers the cut, so passes end; they stop when one gains under 0.01 %
of the edges. Fixed order, ties by node id: deterministic.
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.data.graph import CSCGraph
from fastsample.partition.balance import Caps, _connections, _gain_to, _gains, _ordered, _state

__all__ = ["refine"]


@numba.njit(nogil=True, cache=True)
def _moves(ptr, idx, in_ptr, part, group, count, load, low, high, edge_cap, order):
    """Single moves that cut fewer edges into parts with room (gains fresh at the move)."""
    P = count.shape[1]
    conn = np.zeros(P, np.int64)
    moved = gained = 0
    for v in order:
        g, p, d = group[v], part[v], in_ptr[v + 1] - in_ptr[v]
        if count[g, p] <= low[g, p]:
            continue
        _connections(ptr, idx, part, v, conn)
        q, c = -1, conn[p]
        for r in range(P):
            if r != p and conn[r] > c and count[g, r] < high[g, r] and load[r] + d <= edge_cap:
                q, c = r, conn[r]
        if q < 0:
            continue
        gained += c - conn[p]
        part[v] = q
        count[g, p] -= 1
        count[g, q] += 1
        load[p] -= d
        load[q] += d
        moved += 1
    return moved, gained


@numba.njit(nogil=True, cache=True)
def _swaps(ptr, idx, in_ptr, part, load, edge_cap, nodes, gain, starts, G, P):
    """Swaps of two nodes of one group between parts p and q: ``nodes`` sorted by (group,
    part, best other part), then gain (highest first); bucket k = (g * P + p) * P + q spans
    starts[k]..starts[k + 1]. Pairs the best of each side while together (gains fresh,
    less twice the edges between the two) they cut fewer edges and the in-edges fit."""
    swapped = gained = 0
    for g in range(G):
        for p in range(P):
            for q in range(p + 1, P):
                i, i_end = starts[(g * P + p) * P + q], starts[(g * P + p) * P + q + 1]
                j, j_end = starts[(g * P + q) * P + p], starts[(g * P + q) * P + p + 1]
                gu = gv = -1  # fresh gains, recounted when the pointer moves (a hub's only once)
                fresh_i = fresh_j = -1
                while i < i_end and j < j_end and gain[i] + gain[j] > 0:
                    u, v = nodes[i], nodes[j]
                    if part[u] != p:
                        i += 1
                        continue
                    if part[v] != q:
                        j += 1
                        continue
                    if fresh_i != i:
                        gu, fresh_i = _gain_to(ptr, idx, part, u, q), i
                    if fresh_j != j:
                        gv, fresh_j = _gain_to(ptr, idx, part, v, p), j
                    total = gu + gv
                    if total > 0:
                        a, b = (u, v) if ptr[u + 1] - ptr[u] <= ptr[v + 1] - ptr[v] else (v, u)
                        for k in range(ptr[a], ptr[a + 1]):  # an edge between them stays cut
                            total -= 2 * (idx[k] == b)
                    du, dv = in_ptr[u + 1] - in_ptr[u], in_ptr[v + 1] - in_ptr[v]
                    fits = (load[p] - du + dv <= max(edge_cap, load[p])
                            and load[q] - dv + du <= max(edge_cap, load[q]))
                    if total > 0 and fits:
                        part[u], part[v] = q, p
                        load[p] += dv - du
                        load[q] += du - dv
                        swapped += 1
                        gained += total
                        i += 1
                        j += 1
                    elif gu < gv:
                        i += 1
                    else:
                        j += 1
    return swapped, gained


def refine(adj: CSCGraph, in_ptr: np.ndarray, part: np.ndarray, c: Caps, passes: int = 10) -> tuple[int, int]:
    """Boundary local search within the caps (module doc), ``passes`` at most, stopping
    once a pass gains under 0.01 % of the edges. Returns (moves, swaps)."""
    G, P = c.high.shape
    nodes = np.arange(len(part), dtype=np.int64)
    moves = swaps = 0
    for _ in range(passes):
        count, load = _state(c.group, part, in_ptr, G, P)
        best, gain = _gains(adj.indptr, adj.indices, part, nodes, P)
        better = np.flatnonzero(gain > 0)
        m, gained = _moves(adj.indptr, adj.indices, in_ptr, part, c.group, count, load, c.low, c.high, c.edge_cap,
                           _ordered(better, gain[better]))
        best, gain = _gains(adj.indptr, adj.indices, part, nodes, P)
        edge = np.flatnonzero(best >= 0)  # the boundary: a neighbour in another part
        bucket = (c.group[edge].astype(np.int64) * P + part[edge]) * P + best[edge]
        order = np.lexsort((edge, -gain[edge], bucket))
        starts = np.searchsorted(bucket[order], np.arange(G * P * P + 1))
        s, swap_gain = _swaps(adj.indptr, adj.indices, in_ptr, part, load, c.edge_cap, edge[order],
                              gain[edge][order], starts, G, P)
        moves, swaps = moves + m, swaps + s
        if gained + swap_gain < 1e-4 * max(adj.num_edges, 1):
            break
    return moves, swaps
