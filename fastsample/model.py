"""GraphSAGE (mean aggregator) over MFGs.

Layer l maps source rows h_src (num_src, d_in) to destination rows (num_dst, d_out):

    out = W_self h_src[:num_dst] + W_neigh mean_{u in N(v)} h_src[u] + b

(DGL's SAGEConv 'mean', same weights, same outputs.) The mean is taken before the
projection, at width d_in, with no per-edge message tensors and no Python loops:
  * "native": the C++/OpenMP kernel (native/aggregate.cpp) as an autograd Function,
    forward and backward, deterministic, skipping the input gradient when none is needed;
  * "torch": a sparse CSR x dense product, the plain-PyTorch reference (also the path on
    GPUs and without the native module).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from fastsample.sampling import MFG

try:
    from fastsample import _native
except ImportError:
    _native = None

AGGREGATIONS = ("auto", "native", "torch")


class _NativeMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, block):
        out = torch.empty(block.num_dst, h.shape[1], dtype=h.dtype)
        _native.mean_aggregate(block.indptr, block.indices, h.contiguous(), out)
        ctx.block, ctx.num_src = block, h.shape[0]
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if not ctx.needs_input_grad[0]:
            return None, None
        grad_h = torch.empty(ctx.num_src, grad_out.shape[1], dtype=grad_out.dtype)
        _native.mean_aggregate_backward(ctx.block.indptr, ctx.block.indices, grad_out.contiguous(), grad_h)
        return grad_h, None


@dataclass
class Block:
    """An MFG as the model consumes it (CSC over num_dst destinations)."""

    indptr: np.ndarray  # (num_dst + 1,) int64
    indices: np.ndarray  # (num_edges,) int32 local source positions
    num_dst: int
    num_src: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _adj: torch.Tensor | None = None

    @classmethod
    def from_mfg(cls, mfg: MFG, device="cpu") -> "Block":
        return cls(np.ascontiguousarray(mfg.indptr, dtype=np.int64),
                   np.ascontiguousarray(mfg.indices, dtype=np.int32), mfg.num_dst, mfg.num_src,
                   torch.device(device))

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

    def mean(self, h: torch.Tensor, aggregation: str = "auto") -> torch.Tensor:
        native = aggregation == "native" or (aggregation == "auto" and _native is not None)
        if native and h.device.type == "cpu" and h.dtype == torch.float32:
            if _native is None:
                raise RuntimeError("aggregation 'native': fastsample._native is not built")
            return _NativeMean.apply(h, self)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return self.adj @ h


class SAGEConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, aggregation: str = "auto"):
        super().__init__()
        self.self_lin = nn.Linear(in_dim, out_dim)
        self.neigh_lin = nn.Linear(in_dim, out_dim, bias=False)
        self.aggregation = aggregation

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        return self.self_lin(h_src[: block.num_dst]) + self.neigh_lin(block.mean(h_src, self.aggregation))


class GraphSAGE(nn.Module):
    def __init__(self, in_dim: int, hidden: int, num_classes: int, num_layers: int, dropout: float = 0.5,
                 aggregation: str = "auto"):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"--layers must be >= 1 (got {num_layers})")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)} (got {aggregation!r})")
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(SAGEConv(a, b, aggregation) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks: list[Block], x: torch.Tensor) -> torch.Tensor:
        """blocks[i] feeds layer i (blocks[0] consumes the input features x)."""
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(torch.relu(h))
        return h
