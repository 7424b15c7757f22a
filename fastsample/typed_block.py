"""TypedBlock: one layer's typed MFG as a heterogeneous model consumes it.

A typed MFG (fastsample.sampling, on a graph with edge types) keeps the MFG convention:
its sources start with its destinations, and each sampled edge carries its type. A
heterogeneous model (PyG's ``HeteroConv``, ``to_hetero``) wants instead one feature matrix
per node type and one edge list per relation, indexed within the types. Those follow
from two small arrays, each source's node type and its position among the sources of
that type; positions of destinations are the same (they are the first sources), so layer
i's output rows of type t are layer i + 1's input rows of type t, in order::

    h_dict = x_dict                                   # batch.x: {node type: rows}
    for conv, block in zip(convs, batch.blocks):
        h_dict = conv(h_dict, block.edge_index_dict)  # PyG HeteroConv, per relation
    logits = h_dict[target_type][:batch.blocks[-1].num_dst_dict[target_type]]

``edge_index_dict[(src type, relation, dst type)]`` is (2, E_r) int64: row 0 the source's
position among the sources of its type, row 1 the destination's among the destinations
of its type; ``csc(relation)`` gives the same edges as CSC (the native kernels' input).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fastsample.sampling import MFG


def positions_by_type(types: np.ndarray, num_types: int) -> tuple[np.ndarray, np.ndarray]:
    """(each entry's position among the entries of its type, the count of each type)."""
    counts = np.bincount(types, minlength=num_types)
    order = np.argsort(types, kind="stable")
    pos = np.empty(len(types), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    pos[order] = np.arange(len(types)) - np.repeat(starts[:-1], counts)
    return pos, counts


@dataclass
class TypedBlock:
    """One typed layer: per-type counts, per-relation edge lists (see the module doc)."""

    node_types: tuple[str, ...]
    edge_types: tuple[tuple[str, str, str], ...]
    src_type: np.ndarray  # (num_src,) node type index of each source
    src_pos: np.ndarray  # (num_src,) its position among the sources of its type
    num_src_dict: dict
    num_dst_dict: dict
    _csc: dict  # relation index -> (indptr over its destination type's dsts, source positions)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _edge_index: dict | None = None
    # the input layer's block only: {node type: int64 tensor, each input node's index among
    # all nodes of its type} (what an embedding table of a featureless type is indexed by)
    input_index: dict | None = None

    @classmethod
    def from_mfg(cls, mfg: MFG, src_type: np.ndarray, node_types, edge_types, device="cpu") -> "TypedBlock":
        """``src_type``: the node type index of each of mfg.src_ids."""
        T = len(node_types)
        src_pos, src_counts = positions_by_type(src_type, T)
        dst_counts = np.bincount(src_type[:mfg.num_dst], minlength=T)
        dst_of_edge = np.repeat(np.arange(mfg.num_dst, dtype=np.int64), np.diff(mfg.indptr))
        index = {t: i for i, t in enumerate(node_types)}
        csc = {}
        for r, (_, _, d) in enumerate(edge_types):
            e = np.flatnonzero(mfg.edge_types == r)  # grouped by destination, in destination order
            dst = src_pos[dst_of_edge[e]]
            indptr = np.zeros(dst_counts[index[d]] + 1, dtype=np.int64)
            np.cumsum(np.bincount(dst, minlength=dst_counts[index[d]]), out=indptr[1:])
            csc[r] = (indptr, src_pos[mfg.indices[e]].astype(np.int32))
        return cls(tuple(node_types), tuple(tuple(e) for e in edge_types), src_type, src_pos,
                   {t: int(c) for t, c in zip(node_types, src_counts)},
                   {t: int(c) for t, c in zip(node_types, dst_counts)}, csc, torch.device(device))

    def csc(self, relation) -> tuple[np.ndarray, np.ndarray]:
        """(indptr int64 over the relation's destinations, int32 source positions) of one
        relation (its index or canonical triple)."""
        r = relation if isinstance(relation, (int, np.integer)) else self.edge_types.index(tuple(relation))
        return self._csc[int(r)]

    def size(self, relation) -> tuple[int, int]:
        """(sources of the relation's source type, destinations of its destination type)."""
        s, _, d = self.edge_types[relation] if isinstance(relation, (int, np.integer)) else tuple(relation)
        return self.num_src_dict[s], self.num_dst_dict[d]

    @property
    def edge_index_dict(self) -> dict:
        """{canonical edge type: (2, E_r) int64} on the block's device (PyG's layout)."""
        if self._edge_index is None:
            self._edge_index = {}
            for r, et in enumerate(self.edge_types):
                indptr, src = self._csc[r]
                dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
                self._edge_index[et] = torch.from_numpy(np.stack([src.astype(np.int64), dst])).to(self.device)
        return self._edge_index
