"""Block: one layer's MFG as a model consumes it, the argument every model's forward takes.

The model signature, the same for the built-in models and for a user's model
(``python -m fastsample.train --model FILE:build``)::

    forward(blocks: list[Block], x) -> Tensor

``blocks[i]`` feeds GNN layer i, input layer first; ``x`` holds the input nodes' features
(``blocks[0].num_src`` rows); the result has one row per seed (``blocks[-1].num_dst``).
Within a block the first ``num_dst`` source rows are the destinations themselves, so a
layer's destination input is ``h[:block.num_dst]``. For PyTorch Geometric layers::

    h = conv((h, h[:block.num_dst]), block.edge_index, size=block.size)

A block is typed the same way whether the graph has one type or many: node types, and
edge lists per relation (untyped data: one node type, one relation, whose edge list is
the whole block). On typed data ``x`` is {node type: rows} and a heterogeneous model
(PyG's ``HeteroConv``, ``to_hetero``, the built-in R-GCN) reads one feature matrix per
node type and one edge list per relation, indexed within the types. Those follow from
each source's node type and its position among the sources of that type; destinations
keep their positions (they are the first sources), so layer i's output rows of type t
are layer i + 1's input rows of type t, in order::

    h_dict = x_dict                                   # batch.x: {node type: rows}
    for conv, block in zip(convs, batch.blocks):
        h_dict = conv(h_dict, block.edge_index_dict)  # PyG HeteroConv, per relation
    logits = h_dict[target_type][:batch.blocks[-1].num_dst_dict[target_type]]

``edge_index_dict[(src type, relation, dst type)]`` is (2, E_r) int64: row 0 the source's
position among the sources of its type, row 1 the destination's among the destinations
of its type; ``csc(relation)`` gives the same edges as CSC (the native kernels' input).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from fastsample.data.graph import EDGE, NODE
from fastsample.native import lib as _native
from fastsample.sampling import MFG
from fastsample.rows import RowTable


def positions_by_type(types: np.ndarray, num_types: int) -> tuple[np.ndarray, np.ndarray]:
    """(each entry's position among the entries of its type, the count of each type)."""
    if num_types == 1:  # the one-type case: positions are the entries' own
        return np.arange(len(types), dtype=np.int64), np.array([len(types)], dtype=np.int64)
    if _native is not None:  # one pass (numpy's way below needs a stable argsort)
        types = types if types.dtype in (np.int8, np.int64) else types.astype(np.int64)
        pos, counts = np.empty(len(types), dtype=np.int64), np.empty(num_types, dtype=np.int64)
        _native.positions_by_type(np.ascontiguousarray(types), num_types, pos, counts)
        return pos, counts
    counts = np.bincount(types, minlength=num_types)
    order = np.argsort(types, kind="stable")
    pos = np.empty(len(types), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    pos[order] = np.arange(len(types)) - np.repeat(starts[:-1], counts)
    return pos, counts


def split_relations(mfg: MFG, src_pos: np.ndarray, num_dst: list[int]) -> dict:
    """{relation index: (indptr over its destination type's destinations, int32 source
    positions)} of a typed MFG, positions within the node types (``src_pos``); ``num_dst``:
    each relation's destination type's destinations. Each relation's edges in the MFG's order."""
    R = len(num_dst)
    etypes = np.asarray(mfg.edge_types)
    if _native is not None and etypes.dtype in (np.uint8, np.int16):
        indptr = np.ascontiguousarray(mfg.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(mfg.indices, dtype=np.int32)
        rel_num_dst = np.asarray(num_dst, dtype=np.int64)
        indptr_at = np.concatenate([[0], np.cumsum(rel_num_dst + 1)]).astype(np.int64)
        indices_at = np.empty(R + 1, dtype=np.int64)  # each relation's edges, counted by the kernel
        rel_indptr = np.empty(int(indptr_at[-1]), dtype=np.int64)
        rel_indices = np.empty(len(indices), dtype=np.int32)
        _native.split_relations(indptr, indices, np.ascontiguousarray(etypes), src_pos, rel_num_dst, indptr_at[:-1],
                                indices_at, rel_indptr, rel_indices)
        return {r: (rel_indptr[indptr_at[r]:indptr_at[r + 1]], rel_indices[indices_at[r]:indices_at[r + 1]])
                for r in range(R)}
    dst_of_edge = np.repeat(np.arange(mfg.num_dst, dtype=np.int64), np.diff(mfg.indptr))
    csc = {}
    for r in range(R):
        e = np.flatnonzero(etypes == r)  # grouped by destination, in destination order
        ip = np.zeros(num_dst[r] + 1, dtype=np.int64)
        np.cumsum(np.bincount(src_pos[dst_of_edge[e]], minlength=num_dst[r]), out=ip[1:])
        csc[r] = (ip, src_pos[np.asarray(mfg.indices)[e]].astype(np.int32))
    return csc


@dataclass
class Block:
    """An MFG as tensors' companion: CSC over num_dst destinations, num_src sources, and
    its edges per relation (see the module doc)."""

    indptr: np.ndarray  # (num_dst + 1,) int64
    indices: np.ndarray  # (num_edges,) int32 local source positions
    num_dst: int
    num_src: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    node_types: tuple[str, ...] = (NODE,)
    edge_types: tuple[tuple[str, str, str], ...] = (EDGE,)
    src_type: np.ndarray | None = None  # (num_src,) node type index of each source; None: all type 0
    src_pos: np.ndarray | None = None  # (num_src,) its position among the sources of its type
    num_src_dict: dict | None = None
    num_dst_dict: dict | None = None
    _csc: dict | None = None  # relation index -> (indptr over its destination type's dsts, source positions)
    # the input layer's block: {node type: int64 tensor, each input node's index among all nodes
    # of its type} (what an embedding table of a featureless type is indexed by); the loader
    # sets a function that makes it, called on the first read (most models never read it)
    _input_index: object = None
    _adj: torch.Tensor | None = None
    _edge_index: torch.Tensor | None = None
    _edge_index_dict: dict | None = None

    def __post_init__(self):
        if self._csc is None:  # one relation: its edges are the block's
            self._csc = {0: (self.indptr, self.indices)}
            self.num_src_dict = {self.node_types[0]: self.num_src}
            self.num_dst_dict = {self.node_types[0]: self.num_dst}

    @classmethod
    def from_mfg(cls, mfg: MFG, device="cpu", src_type: np.ndarray | None = None, node_types=None,
                 edge_types=None, positions: tuple | None = None) -> "Block":
        """The block of ``mfg``; on typed data ``src_type`` is the node type index of each of
        mfg.src_ids, and the MFG carries its edges' types. ``positions``: (each source's
        position among its type's, the count of each type) where the caller has them (the
        gather's, for the input block); else they are counted here."""
        indptr = np.ascontiguousarray(mfg.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(mfg.indices, dtype=np.int32)
        if src_type is None or (len(node_types), len(edge_types)) == (1, 1):  # one relation: its edges are the block's
            return cls(indptr, indices, mfg.num_dst, mfg.num_src, torch.device(device), *(
                () if src_type is None else (tuple(node_types), tuple(tuple(e) for e in edge_types))))
        T = len(node_types)
        src_pos, src_counts = positions if positions is not None else positions_by_type(src_type, T)
        dst_counts = np.bincount(src_type[:mfg.num_dst], minlength=T)
        index = {t: i for i, t in enumerate(node_types)}
        csc = split_relations(mfg, src_pos, [int(dst_counts[index[d]]) for _, _, d in edge_types])
        return cls(indptr, indices, mfg.num_dst, mfg.num_src, torch.device(device), tuple(node_types),
                   tuple(tuple(e) for e in edge_types), np.asarray(src_type), src_pos,
                   {t: int(c) for t, c in zip(node_types, src_counts)},
                   {t: int(c) for t, c in zip(node_types, dst_counts)}, csc)

    @property
    def input_index(self) -> dict | None:
        if callable(self._input_index):
            self._input_index = self._input_index()
        return self._input_index

    @input_index.setter
    def input_index(self, value) -> None:
        self._input_index = value

    def rows_in_dst_order(self, h: dict) -> torch.Tensor:
        """{node type: its destinations' rows} as one tensor in the destinations' order."""
        if self.src_type is None:
            return h[self.node_types[0]]
        kinds = self.src_type[:self.num_dst]  # the destinations of each type come in their order
        first = next(iter(h.values()))
        out = first.new_empty(self.num_dst, first.shape[1])
        for k, t in enumerate(self.node_types):
            out[torch.from_numpy(np.flatnonzero(kinds == k)).to(out.device)] = h[t]
        return out

    @property
    def size(self) -> tuple[int, int]:
        """(num_src, num_dst), PyG's ``size`` of a bipartite message passing."""
        return self.num_src, self.num_dst

    def csc(self, relation=0) -> tuple[np.ndarray, np.ndarray]:
        """(indptr int64 over the relation's destinations, int32 source positions) of one
        relation (its index or canonical triple), positions within the node types."""
        r = relation if isinstance(relation, (int, np.integer)) else self.edge_types.index(tuple(relation))
        return self._csc[int(r)]

    def relation_size(self, relation) -> tuple[int, int]:
        """(sources of the relation's source type, destinations of its destination type)."""
        s, _, d = self.edge_types[relation] if isinstance(relation, (int, np.integer)) else tuple(relation)
        return self.num_src_dict[s], self.num_dst_dict[d]

    def relation_block(self, relation) -> "Block":
        """One relation's edges as a block of their own (within the node types' positions)."""
        s, _, d = self.edge_types[relation] if isinstance(relation, (int, np.integer)) else tuple(relation)
        indptr, indices = self.csc(relation)
        return Block(indptr, indices, self.num_dst_dict[d], self.num_src_dict[s], self.device)

    @property
    def edge_index(self) -> torch.Tensor:
        """(2, num_edges) int64 on the block's device, PyG's layout: row 0 the source
        position (0..num_src-1), row 1 the destination position (0..num_dst-1), edges
        grouped by destination."""
        if self._edge_index is None:
            self._edge_index = _edge_index(self.indptr, self.indices, self.device)
        return self._edge_index

    @property
    def edge_index_dict(self) -> dict:
        """{canonical edge type: (2, E_r) int64} on the block's device (PyG's layout)."""
        if self._edge_index_dict is None:
            self._edge_index_dict = {et: _edge_index(*self._csc[r], self.device) for r, et in enumerate(self.edge_types)}
        return self._edge_index_dict

    @property
    def adj(self) -> torch.Tensor:
        """Sparse CSR (num_dst, num_src) with entries 1/in-degree (the reference path)."""
        if self._adj is None:
            indptr = torch.from_numpy(self.indptr)
            degree = torch.diff(indptr)
            weights = (1.0 / degree.clamp(min=1).to(torch.float32)).repeat_interleave(degree)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
                # torch >= 2.11 warns once that it skips the checks we turned off ourselves
                warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
                self._adj = torch.sparse_csr_tensor(indptr, torch.from_numpy(self.indices.astype(np.int64)),
                                                    weights, size=(self.num_dst, self.num_src),
                                                    check_invariants=False).to(self.device)
        return self._adj

    def mean(self, h: torch.Tensor) -> torch.Tensor:
        """The reference mean: sparse CSR x dense."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return self.adj @ h


def typed_inputs(x: dict, node_types) -> dict:
    """A typed model's input rows {node type: float32 rows, or a row table as it is
    (fastsample/rows.py)}: every type must have rows (a featureless type's come from its
    learnable embeddings; one clear error where not)."""
    missing = [t for t in node_types if x.get(t) is None]
    if missing:
        raise ValueError(f"x: no rows for node types {', '.join(missing)} (featureless: the loader needs "
                         "embeddings)")
    return {t: x[t] if isinstance(x[t], RowTable) else x[t].float() for t in node_types}


def check_widths(in_dims: dict) -> None:
    """A typed model's input widths: a featureless type needs its embeddings' width."""
    missing = [t for t, d in in_dims.items() if d is None]
    if missing:
        raise ValueError(f"in_dims: node types {', '.join(missing)} have no width: give featureless types "
                         "embeddings (fastsample.distributed.embedding.ShardedEmbeddings) and their width")


def _edge_index(indptr: np.ndarray, indices: np.ndarray, device) -> torch.Tensor:
    dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    return torch.from_numpy(np.stack([indices.astype(np.int64), dst])).to(device)
