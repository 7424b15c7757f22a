"""The message-flow graph (MFG) of one GNN layer: a bipartite graph in CSC form."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MFG:
    """Edges from ``num_src`` source nodes into ``num_dst`` destination nodes.

    indptr:  (num_dst + 1,) int64. The sampled in-neighbours of destination i are
             indices[indptr[i]:indptr[i + 1]], in the order of their position in the
             graph's neighbour list.
    indices: (num_edges,) int32 *local* source positions, in 0..num_src-1.
    src_ids: (num_src,) graph id dtype, *global* node ids. The first num_dst entries are
             the destination nodes, in order (as DGL's to_block); nodes new to this layer
             follow in order of first appearance in ``indices``.
    edge_types: typed graphs: (num_edges,) the edge type of each sampled edge (a
             destination's edges are in edge-type order); None for an untyped graph.
    """

    indptr: np.ndarray
    indices: np.ndarray
    src_ids: np.ndarray
    num_dst: int
    edge_types: np.ndarray | None = None

    @property
    def num_src(self) -> int:
        return len(self.src_ids)

    @property
    def num_edges(self) -> int:
        return len(self.indices)

    @property
    def dst_ids(self) -> np.ndarray:
        """(num_dst,) global ids of the destination nodes (a view of src_ids)."""
        return self.src_ids[: self.num_dst]
