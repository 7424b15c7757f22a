"""Which part owns each node: METIS or random, then balance.

METIS (through pymetis, k-way) partitions the symmetrised graph for a minimum edge cut
under three balance constraints: node count, in-edge count (the topology a vanilla rank
stores and the sampling work it serves) and training nodes. METIS treats balance as a
soft goal and on power-law graphs with strong communities leaves parts 10-100% over the
mean (measured), so ``rebalance`` then moves nodes until nodes and in-edges are within
5% of the mean. Validation and test nodes are not METIS constraints: as extra
constraints they made the node/edge balance worse, and ``balance_splits`` evens them out
exactly anyway.

``random`` deals the nodes out uniformly at random in equal shares: the naive baseline,
cutting about (P-1)/P of the edges.

``balance_splits`` finally makes every part hold exactly floor(|split| / P) nodes of
each split, or one more, so that all ranks run the same number of synchronous steps.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numba
import numpy as np

from fastsample.data.edges import edges_to_csc_file
from fastsample.graph import SPLITS, CSCGraph, Dataset

_ADJ_CHUNK = 1 << 24  # edges read from the CSC at a time while symmetrising


def _mask(n: int, ids) -> np.ndarray:
    m = np.zeros(n, dtype=np.int64)
    m[np.asarray(ids)] = 1
    return m


def is_symmetric(ds: Dataset) -> bool:
    """Whether ds stores every edge both ways and no self-loops (its meta says so)."""
    return bool(ds.meta.get("symmetric")) and not ds.meta.get("self_loops")


def symmetric_edges(num_edges: int, symmetric: bool) -> int:
    """The directed edges of the symmetric adjacency, at most: what the partitioners'
    memory scales with (a symmetric graph's own; else up to both ways of each)."""
    return num_edges if symmetric else 2 * num_edges


def symmetric_adjacency(ds: Dataset, scratch: str | Path | None = None, budget: int = 1 << 30) -> CSCGraph:
    """The graph as the partitioners want it: both directions of every edge, no self-loops.

    A symmetric dataset is its own. Any other (a directed graph such as ogbn-papers100M,
    whose adjacency is twice its edges) is built by destination range into a file under
    ``scratch`` (default: the system's temporary directory) and returned memory-mapped, the
    file already unlinked: O(num_nodes) memory plus ``budget`` bytes, whatever the edge
    count (edges.edges_to_csc_file; the same CSC as edges_to_csc in memory).
    """
    g = ds.graph
    if is_symmetric(ds):
        return g
    n = g.num_nodes
    # node ranges of about _ADJ_CHUNK in-edges each (a high-degree node may make one longer)
    bounds = np.unique(np.searchsorted(g.indptr, np.arange(0, g.num_edges, _ADJ_CHUNK), side="right") - 1)
    bounds = np.append(bounds[bounds < n], n)

    def chunks():
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            indptr = np.asarray(g.indptr[lo:hi + 1], dtype=np.int64)
            src = np.asarray(g.indices[indptr[0]:indptr[-1]])
            yield src, np.repeat(np.arange(lo, hi, dtype=src.dtype), np.diff(indptr))

    with tempfile.TemporaryDirectory(prefix="fastsample-adjacency-", dir=scratch) as tmp:
        file = Path(tmp) / "indices.npy"
        indptr = edges_to_csc_file(chunks(), n, file, symmetric=True, expected_edges=2 * g.num_edges,
                                   budget=budget)
        indices = np.load(file, mmap_mode="r")  # the mapping outlives the file's name
    return CSCGraph(indptr, indices)


def metis_parts(ds: Dataset, parts: int, seed: int = 0, scratch: str | Path | None = None) -> np.ndarray:
    """(num_nodes,) int32 part of each node, from multi-constraint METIS (scratch: as
    symmetric_adjacency)."""
    import pymetis

    n = ds.graph.num_nodes
    if parts == 1:
        return np.zeros(n, dtype=np.int32)
    adj = symmetric_adjacency(ds, scratch)
    xadj = np.asarray(adj.indptr, dtype=np.int64)
    adjncy = np.asarray(adj.indices, dtype=np.int64)
    # node count per node type (one constraint each; the one-type case: every node), in-edges, training nodes
    offsets = ds.graph.node_type_offset
    constraints = [_mask(n, np.arange(a, b)) for a, b in zip(offsets[:-1], offsets[1:]) if b > a]
    constraints.append(np.maximum(np.diff(np.asarray(ds.graph.indptr, np.int64)), 1))
    if len(ds.train):
        constraints.append(_mask(n, ds.train))
    vweights = np.stack(constraints, axis=1).reshape(-1)
    _, membership = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=vweights,
                                       recursive=False, options=pymetis.Options(seed=seed))
    return np.asarray(membership, dtype=np.int32)


@numba.njit(nogil=True, cache=True, parallel=True)
def _best_targets(indptr, indices, part, nodes, parts):
    """For each node: the other part holding most of its neighbours, and the cut change
    of moving it there (neighbours there minus neighbours at home; higher is better)."""
    best = np.empty(len(nodes), dtype=np.int32)
    gain = np.empty(len(nodes), dtype=np.int64)
    for i in numba.prange(len(nodes)):
        v = nodes[i]
        conn = np.zeros(parts, dtype=np.int64)
        for j in range(indptr[v], indptr[v + 1]):
            conn[part[indices[j]]] += 1
        own = part[v]
        b, bc = -1, -1
        for q in range(parts):
            if q != own and conn[q] > bc:
                b, bc = q, conn[q]
        best[i] = b
        gain[i] = bc - conn[own]
    return best, gain


@numba.njit(nogil=True, cache=True)
def _shed(part, nodes, best, order, degree, load, limit, c):
    """Move nodes, in ``order``, out of parts over limit[c] (c = 0 nodes, 1 edges) into
    their best part, else the part with the most room; the receiver must stay within the
    edge limit, and in phase c = 0 within the node limit too."""
    moved = 0
    for i in order:
        v = nodes[i]
        p = part[v]
        if load[p, c] <= limit[c]:
            continue
        d = degree[v]
        q = best[i]
        if q < 0 or load[q, 1] + d > limit[1] or (c == 0 and load[q, 0] + 1 > limit[0]):
            q = -1
            room = -1.0
            for r in range(load.shape[0]):
                spare = (limit[1] - load[r, 1] - d) / limit[1]
                if c == 0:
                    spare = min(spare, (limit[0] - load[r, 0] - 1) / limit[0])
                if r != p and spare >= 0 and spare > room:
                    q, room = r, spare
            if q < 0:
                continue
        part[v] = q
        load[p, 0] -= 1
        load[q, 0] += 1
        load[p, 1] -= d
        load[q, 1] += d
        moved += 1
    return moved


def rebalance(part: np.ndarray, ds: Dataset, parts: int, tolerance: float = 0.05, passes: int = 10) -> int:
    """Bring every part within (1 + tolerance) x the mean in in-edges and in nodes.

    METIS treats balance as a soft goal, and on power-law graphs with strong communities
    its multi-constraint partitions stay 10-100% over the mean (measured). Phase 1 sheds
    edges: nodes of edge-heavy parts move, in order of the cut they add per edge they
    take along, to the part holding most of their neighbours when it has room. Phase 2
    sheds nodes the same way, best cut change first, so mostly low-degree nodes move and
    the edge balance holds. Returns the number of nodes moved.
    """
    g = ds.graph
    degree = np.diff(np.asarray(g.indptr, dtype=np.int64))
    limit = np.array([len(part), degree.sum()], dtype=np.float64) / parts * (1 + tolerance)
    moved = 0
    for c in (1, 0):
        for _ in range(passes):
            load = np.stack([np.bincount(part, minlength=parts),
                             np.bincount(part, weights=degree, minlength=parts)], axis=1).astype(np.float64)
            over = np.flatnonzero(load[:, c] > limit[c])
            if len(over) == 0:
                break
            nodes = np.flatnonzero(np.isin(part, over)).astype(np.int64)
            best, gain = _best_targets(g.indptr, g.indices, part, nodes, parts)
            score = gain / np.maximum(degree[nodes], 1) if c == 1 else gain.astype(np.float64)
            order = np.argsort(-score, kind="stable")
            step = _shed(part, nodes, best, order, degree, load, limit, c)
            moved += int(step)
            if step == 0:
                break
    return moved


def random_parts(n: int, parts: int, seed: int = 0) -> np.ndarray:
    """(n,) int32: a uniformly random assignment in equal shares (sizes differ by <= 1)."""
    out = np.empty(n, dtype=np.int32)
    out[np.random.default_rng(seed).permutation(n)] = np.arange(n) % parts
    return out


def balance_splits(part: np.ndarray, ds: Dataset, parts: int) -> dict:
    """Reassign the fewest nodes so each part holds floor(|s|/P) or one more of every split s
    (and on a typed graph, of each node type's nodes outside the splits, so that every type
    is balanced to within a few nodes too).

    Rule, per group: the P - |s| mod P parts with the fewest nodes of the group get target
    floor(|s|/P), the others one more (so the targets sit as close to the current counts
    as possible, and the number of moves, the total surplus, is the minimum). A part over
    its target gives away its surplus, lowest-degree nodes first (ties by id: they carry
    the fewest edges, so the cut and the edge balance move least), to the parts under
    their target, in part order. Groups are disjoint, so fixing one never disturbs another.
    Modifies ``part`` in place; returns the number of nodes moved per group.
    """
    degree = np.diff(np.asarray(ds.graph.indptr, dtype=np.int64))
    groups = {s: np.asarray(getattr(ds, s), dtype=np.int64) for s in SPLITS}
    if len(ds.graph.node_types) > 1:  # and each type's other nodes (one type: rebalance balanced them all)
        in_split = np.zeros(len(part), dtype=bool)
        for ids in groups.values():
            in_split[ids] = True
        for t, a, b in zip(ds.graph.node_types, ds.graph.node_type_offset[:-1], ds.graph.node_type_offset[1:]):
            groups[t] = np.arange(a, b, dtype=np.int64)[~in_split[a:b]]
    moved = {}
    for s, ids in groups.items():
        counts = np.bincount(part[ids], minlength=parts)
        base, extra = divmod(len(ids), parts)
        target = np.full(parts, base)
        target[np.argsort(-counts, kind="stable")[:extra]] += 1  # largest counts keep the +1
        receivers = [p for p in range(parts) for _ in range(max(0, target[p] - counts[p]))]
        taken = []
        for p in range(parts):
            surplus = counts[p] - target[p]
            if surplus > 0:
                mine = ids[part[ids] == p]
                order = np.lexsort((mine, degree[mine]))
                taken.append(mine[order[:surplus]])
        taken = np.concatenate(taken) if taken else np.empty(0, np.int64)
        part[taken] = np.asarray(receivers, dtype=part.dtype)
        moved[s] = int(len(taken))
    return moved


@numba.njit(nogil=True, cache=True, parallel=True)
def _cut(indptr, indices, part):
    total = 0
    for v in numba.prange(len(indptr) - 1):
        pv = part[v]
        for j in range(indptr[v], indptr[v + 1]):
            total += part[indices[j]] != pv
    return total


def edge_cut(graph: CSCGraph, part: np.ndarray) -> int:
    """Number of (directed) edges whose endpoints lie in different parts."""
    return int(_cut(graph.indptr, graph.indices, part))
