"""KaMinPar (shared-memory multilevel partitioner; ``pip install fastsample[kaminpar]``)
for graphs METIS cannot hold in memory (which method when: partition/memory.py).

KaMinPar's Python bindings read a graph file, so the symmetric adjacency is written in
ParHIP's binary format, in chunks (one header, byte offsets, 64-bit neighbour ids, 64-bit
node weights), and loaded with graph compression and the memory-lean ``terapart``
context. It balances the one weight METIS gets too (assign.node_weights: in-degree + 1);
balance.py then brings every node type, split and the in-edges to the stated balance, as
for METIS.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from fastsample.data.graph import CSCGraph

__all__ = ["available", "kaminpar_parts", "write_parhip"]

_CHUNK = 1 << 24  # entries per write: bounded extra memory (128 MiB of uint64)


def available() -> bool:
    """Whether the kaminpar package is installed."""
    import importlib.util

    return importlib.util.find_spec("kaminpar") is not None


def write_parhip(path: str | Path, adj: CSCGraph, weights: np.ndarray) -> None:
    """Write a symmetric adjacency and int64 node weights in ParHIP's binary format, in chunks."""
    n, m = adj.num_nodes, adj.num_edges
    version = 1  # bit 0: no edge weights; bit 1 clear: node weights; 64-bit ids, offsets and weights
    base = 24 + (n + 1) * 8
    with open(path, "wb") as f:
        np.array([version, n, m], dtype=np.uint64).tofile(f)
        for lo in range(0, n + 1, _CHUNK):
            (base + np.asarray(adj.indptr[lo:lo + _CHUNK], dtype=np.uint64) * np.uint64(8)).tofile(f)
        for lo in range(0, m, _CHUNK):
            np.asarray(adj.indices[lo:lo + _CHUNK], dtype=np.uint64).tofile(f)
        np.asarray(weights, dtype=np.int64).tofile(f)


def kaminpar_parts(adj: CSCGraph, weights: np.ndarray, parts: int, seed: int = 0, threads: int | None = None,
                   eps: float = 0.03, scratch: str | Path | None = None) -> np.ndarray:
    """(num_nodes,) int32 part of each node from KaMinPar on the symmetric adjacency ``adj``.

    Args:
        adj: both directions of every edge, no self-loops (assign.symmetric_adjacency).
        weights: int64 node weights to balance (assign.node_weights).
        parts: blocks; seed: KaMinPar's seed; threads: default all cores; eps: imbalance;
        scratch: the directory for the ParHIP file (8 bytes per edge, 16 per node;
        default: the system's temporary directory).
    """
    import kaminpar

    n = adj.num_nodes
    if parts == 1:
        return np.zeros(n, dtype=np.int32)
    with tempfile.TemporaryDirectory(prefix="fastsample-kaminpar-", dir=scratch) as tmp:
        file = Path(tmp) / "graph.parhip"
        write_parhip(file, adj, weights)
        del weights  # the file holds them (the caller passes its only reference: 8 bytes a node freed)
        graph = kaminpar.load_graph(str(file), kaminpar.GraphFileFormat.PARHIP, compress=True)
    kaminpar.reseed(seed)
    solver = kaminpar.KaMinPar(threads or os.cpu_count() or 1, kaminpar.terapart_context())
    return np.asarray(solver.compute_partition(graph, parts, eps), dtype=np.int32)
