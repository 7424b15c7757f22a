"""R-GCN over typed blocks: the built-in model for typed (heterogeneous) data.

Each layer is DGL's ``HeteroGraphConv({relation: SAGEConv(mean)}, aggregate="sum")``,
numerically: for a destination node v of type t,

    h'_v = sum over relations r into t of  W_self_r h_v + W_neigh_r mean_{u in N_r(v)} h_u + b_r

followed, below the last layer, by ReLU and dropout. Node types without features take
their rows from learnable embedding tables that live outside the model, sharded over the
ranks and updated sparsely (fastsample/distributed/embedding.py; the loader gathers
their rows into ``x`` as it does features). The means run on the native kernels (an autograd function over mean_aggregate and its
backward) on the CPU where built, else on a sparse product; both give the same numbers.
The last layer computes the target type only.
"""

from __future__ import annotations

import torch
from torch import nn

from fastsample.block import Block
from fastsample.native import lib as _native
from fastsample.typed_block import TypedBlock


class _NativeMean(torch.autograd.Function):
    """mean_{u in N(v)} h[u] per destination on the native kernels, and its backward."""

    @staticmethod
    def forward(ctx, h, block):
        out = torch.empty(block.num_dst, h.shape[1], dtype=torch.float32)
        _native.mean_aggregate(block.indptr, block.indices, h.contiguous(), out)
        ctx.block, ctx.num_src = block, h.shape[0]
        return out

    @staticmethod
    def backward(ctx, g):
        grad = torch.empty(ctx.num_src, g.shape[1], dtype=torch.float32)
        _native.mean_aggregate_backward(ctx.block.indptr, ctx.block.indices, g.contiguous(), None, None, 1.0, grad)
        return grad, None


def mean(block: Block, h: torch.Tensor) -> torch.Tensor:
    """The mean of each destination's in-neighbours' rows of ``h`` (0 without edges)."""
    if _native is not None and h.device.type == "cpu" and h.dtype == torch.float32:
        return _NativeMean.apply(h, block)
    return block.mean(h)


class RGCN(nn.Module):
    """R-GCN (see the module doc).

    Args:
        in_dims: {node type: its input width (an embedding's for a featureless type)} in node type order;
        hidden: width of the hidden layers; num_classes: the output width;
        num_layers: layers, one per block; edge_types: the canonical edge types;
        target_type: the node type whose outputs are returned;
        dropout: probability after each hidden layer.
    """

    def __init__(self, in_dims: dict, hidden: int, num_classes: int, num_layers: int, edge_types, target_type: str,
                 dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1 (got {num_layers})")
        missing = [t for t, d in in_dims.items() if d is None]
        if missing:
            raise ValueError(f"in_dims: node types {', '.join(missing)} have no width: give featureless types "
                             "embeddings (fastsample.distributed.embedding.ShardedEmbeddings) and their width")
        self.node_types, self.edge_types = list(in_dims), [tuple(e) for e in edge_types]
        self.target_type, self.dropout = target_type, nn.Dropout(dropout)
        dims = dict(in_dims)
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            out = num_classes if i == num_layers - 1 else hidden
            self.layers.append(nn.ModuleDict({
                "__".join(e): _RelationConv(dims[e[0]], dims[e[2]], out) for e in self.edge_types}))
            dims = dict.fromkeys(dims, out)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def forward(self, blocks: list[TypedBlock], x: dict) -> torch.Tensor:
        """The target type's logits for the last block's destinations of that type."""
        h = self._inputs(x)
        last = len(self.layers) - 1
        for i, block in enumerate(blocks):
            h = self._conv(i, block, h)
            if i < last:
                h = {t: self.dropout(torch.relu(v)) for t, v in h.items()}
        return h[self.target_type]

    def layer(self, i: int, block: TypedBlock, h: dict) -> dict:
        """Layer i alone as in eval mode (ReLU below the last layer, no dropout), {node type:
        its destinations' rows}; the last layer gives the target type only. In eval mode
        forward is these in turn, which layer-wise inference (fastsample/inference.py) needs."""
        out = self._conv(i, block, self._inputs(h))
        return out if i == len(self.layers) - 1 else {t: torch.relu(v) for t, v in out.items()}

    def _inputs(self, x: dict) -> dict:
        missing = [t for t in self.node_types if x.get(t) is None]
        if missing:
            raise ValueError(f"x: no rows for node types {', '.join(missing)} (featureless: the loader needs "
                             "embeddings)")
        return {t: x[t].float() for t in self.node_types}

    def _conv(self, i: int, block: TypedBlock, h: dict) -> dict:
        """Layer i before its activation: per destination type, the sum over its relations."""
        layer = self.layers[i]
        wanted = [self.target_type] if i == len(self.layers) - 1 else self.node_types
        out = {t: None for t in wanted}
        for r, e in enumerate(block.edge_types):
            s, _, d = e
            if d not in out:
                continue
            indptr, indices = block.csc(r)
            rel = Block(indptr, indices, block.num_dst_dict[d], block.num_src_dict[s], block.device)
            y = layer["__".join(e)](rel, h[s], h[d][:block.num_dst_dict[d]])
            out[d] = y if out[d] is None else out[d] + y
        width = layer["__".join(self.edge_types[0])].self_lin.out_features
        return {t: (v if v is not None else torch.zeros(block.num_dst_dict[t], width)) for t, v in out.items()}


class _RelationConv(nn.Module):
    """One relation's SAGEConv (mean): W_self h_dst + b + W_neigh mean(h_src)."""

    def __init__(self, src_dim: int, dst_dim: int, out_dim: int):
        super().__init__()
        self.self_lin = nn.Linear(dst_dim, out_dim)
        self.neigh_lin = nn.Linear(src_dim, out_dim, bias=False)

    def forward(self, block: Block, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.self_lin(h_dst) + self.neigh_lin(mean(block, h_src))
