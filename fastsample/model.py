"""GraphSAGE (mean aggregator) over MFGs.

Layer l maps source rows h_src (num_src, d_in) to destination rows (num_dst, d_out):

    out = W_self h_src[:num_dst] + W_neigh mean_{u in N(v)} h_src[u] + b

The mean is one sparse CSR x dense product with the MFG's own indptr/indices (weights
1/degree; an isolated destination gets 0), so there are no per-edge message tensors and
no Python loops over nodes; projecting after aggregating keeps the product at d_in.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fastsample.sampling import MFG


@dataclass
class Block:
    """An MFG as the model consumes it: the row-normalised adjacency and num_dst."""

    adj: torch.Tensor  # sparse CSR (num_dst, num_src), entries 1/in-degree
    num_dst: int

    @classmethod
    def from_mfg(cls, mfg: MFG, device="cpu") -> "Block":
        indptr = torch.from_numpy(np.asarray(mfg.indptr, dtype=np.int64))
        degree = torch.diff(indptr)
        weights = (1.0 / degree.clamp(min=1).to(torch.float32)).repeat_interleave(degree)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            adj = torch.sparse_csr_tensor(indptr, torch.from_numpy(np.asarray(mfg.indices, dtype=np.int64)),
                                          weights, size=(mfg.num_dst, mfg.num_src), check_invariants=False)
        return cls(adj.to(device), mfg.num_dst)


class SAGEConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.self_lin = nn.Linear(in_dim, out_dim)
        self.neigh_lin = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            neigh = block.adj @ h_src
        return self.self_lin(h_src[: block.num_dst]) + self.neigh_lin(neigh)


class GraphSAGE(nn.Module):
    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int, dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"--layers must be >= 1 (got {num_layers})")
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        """blocks[i] feeds layer i (blocks[0] consumes the input features x)."""
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(torch.relu(h))
        return h
