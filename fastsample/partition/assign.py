"""Which part owns each node: METIS or random (KaMinPar: kaminpar.py), before balance.py.

METIS (through pymetis, k-way) partitions the symmetrised graph for a minimum edge cut
under one balance constraint, in-degree + 1 (``node_weights``, KaMinPar's too).
The stated balance (every node type and split, and in-edges: balance.py) is then reached
by balance.py's boundary moves and swaps, which keep METIS's locality.

``random`` deals the nodes out uniformly at random in equal shares: the naive baseline,
cutting about (P-1)/P of the edges.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numba
import numpy as np

from fastsample.data.edges import edges_to_csc_file
from fastsample.data.graph import CSCGraph, Dataset
from fastsample.launcher import die_with

_ADJ_CHUNK = 1 << 24  # edges read from the CSC at a time while symmetrising


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


def node_weights(in_degrees: np.ndarray) -> np.ndarray:
    """The one weight both partitioners balance: in-degree + 1 (a part's in-edges, plus one
    per node so none is free). One weight, not a constraint per node type: pymetis's
    multi-constraint METIS leaves types far over their mean (hetero-small's papers 1.73x),
    while this one it holds to 3 % and each type lands near even (balance.py). The in-edges
    dominate it because they cut lower after balancing than in-degree + mean degree, which
    weighs node count as much (measured, 2 parts: hetero-small 28.5 against 29.7 %,
    hetero-medium 31.3 against 33.9 %; untyped small preset, 4 parts: 16.8 against 18.0 %)."""
    return np.asarray(in_degrees, dtype=np.int64) + 1


def metis_parts(adj: CSCGraph, weights: np.ndarray, parts: int, seed: int = 0) -> np.ndarray:
    """(num_nodes,) int32 part of each node: METIS k-way on the symmetric adjacency ``adj``
    (symmetric_adjacency) balancing ``weights`` (node_weights).

    METIS runs in a child process. While it runs it takes SIGTERM (and SIGABRT) as its own
    error signals (GKlib's gk_sigtrap): in this process a scheduler's SIGTERM became a
    partial partition, written, exit 0, or a longjmp on another thread. Here SIGTERM ends
    this process as it would anywhere (the child dies with it, PR_SET_PDEATHSIG), and a
    child that returns a partition with an empty part is refused. Its failures (an
    allocation, with its text on fd 2) come back as this process's MemoryError/RuntimeError."""
    import mmap
    import os

    import pymetis

    if parts == 1:
        return np.zeros(adj.num_nodes, dtype=np.int32)
    xadj = np.asarray(adj.indptr, dtype=np.int64)
    adjncy = np.asarray(adj.indices, dtype=np.int64)
    shared = mmap.mmap(-1, 4 * max(adj.num_nodes, 1))  # MAP_SHARED: the child writes the parts here
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: METIS, its parts into `shared`, or its error's name and text into the pipe
        status = 0
        try:
            os.close(read)
            die_with(os.getppid())
            _, membership = pymetis.part_graph(parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=weights,
                                               recursive=False, options=pymetis.Options(seed=seed))
            np.frombuffer(shared, dtype=np.int32, count=adj.num_nodes)[:] = membership
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent
            os.write(write, f"{type(e).__name__}\n{e}".encode(errors="replace"))
            status = 1
        os._exit(status)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as f:
            said = f.read().decode(errors="replace")
        status = os.waitpid(pid, 0)[1]
    except BaseException:
        os.kill(pid, 9)
        raise
    if said:
        name, _, text = said.partition("\n")
        raise (MemoryError if name == "MemoryError" else RuntimeError)(text)
    if status:
        raise RuntimeError(f"METIS's process ended with status {os.waitstatus_to_exitcode(status)}")
    membership = np.frombuffer(shared, dtype=np.int32, count=adj.num_nodes).copy()
    counts = np.bincount(membership, minlength=parts) if membership.min(initial=0) >= 0 else None
    if counts is None or len(counts) != parts or (counts == 0).any():
        raise RuntimeError(f"METIS returned no valid partition into {parts} parts (an empty or unknown part)")
    return membership



def random_parts(n: int, parts: int, seed: int = 0) -> np.ndarray:
    """(n,) int32: a uniformly random assignment in equal shares (sizes differ by <= 1)."""
    out = np.empty(n, dtype=np.int32)
    out[np.random.default_rng(seed).permutation(n)] = np.arange(n) % parts
    return out


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
