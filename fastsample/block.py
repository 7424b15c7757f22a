"""Block: one layer's MFG as a model consumes it, the argument every model's forward takes.

The model signature, the same for the built-in GraphSAGE and for a user's model
(``python -m fastsample.train --model FILE:build``)::

    forward(blocks: list[Block], x: Tensor) -> Tensor

``blocks[i]`` feeds GNN layer i, input layer first; ``x`` holds the input nodes' features
(``blocks[0].num_src`` rows); the result has one row per seed (``blocks[-1].num_dst``).
Within a block the first ``num_dst`` source rows are the destinations themselves, so a
layer's destination input is ``h[:block.num_dst]``. For PyTorch Geometric layers::

    h = conv((h, h[:block.num_dst]), block.edge_index, size=block.size)
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from fastsample.sampling import MFG


@dataclass
class Block:
    """An MFG as tensors' companion: CSC over num_dst destinations, num_src sources."""

    indptr: np.ndarray  # (num_dst + 1,) int64
    indices: np.ndarray  # (num_edges,) int32 local source positions
    num_dst: int
    num_src: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _adj: torch.Tensor | None = None
    _edge_index: torch.Tensor | None = None

    @classmethod
    def from_mfg(cls, mfg: MFG, device="cpu") -> "Block":
        return cls(np.ascontiguousarray(mfg.indptr, dtype=np.int64),
                   np.ascontiguousarray(mfg.indices, dtype=np.int32), mfg.num_dst, mfg.num_src,
                   torch.device(device))

    @property
    def size(self) -> tuple[int, int]:
        """(num_src, num_dst), PyG's ``size`` of a bipartite message passing."""
        return self.num_src, self.num_dst

    @property
    def edge_index(self) -> torch.Tensor:
        """(2, num_edges) int64 on the block's device, PyG's layout: row 0 the source
        position (0..num_src-1), row 1 the destination position (0..num_dst-1), edges
        grouped by destination."""
        if self._edge_index is None:
            dst = np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.indptr))
            self._edge_index = torch.from_numpy(np.stack([self.indices.astype(np.int64), dst])).to(self.device)
        return self._edge_index

    @property
    def adj(self) -> torch.Tensor:
        """Sparse CSR (num_dst, num_src) with entries 1/in-degree (the reference path)."""
        if self._adj is None:
            indptr = torch.from_numpy(self.indptr)
            degree = torch.diff(indptr)
            weights = (1.0 / degree.clamp(min=1).to(torch.float32)).repeat_interleave(degree)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
                self._adj = torch.sparse_csr_tensor(indptr, torch.from_numpy(self.indices.astype(np.int64)),
                                                    weights, size=(self.num_dst, self.num_src),
                                                    check_invariants=False).to(self.device)
        return self._adj

    def mean(self, h: torch.Tensor) -> torch.Tensor:
        """The reference mean: sparse CSR x dense."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return self.adj @ h
