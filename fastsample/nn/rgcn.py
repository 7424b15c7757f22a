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

from fastsample.nn import matmul
from fastsample.nn.block import Block
from fastsample.native import lib as _native


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
        target_type: the node type whose outputs are returned (None: every type's, a link encoder);
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
        # a destination sums one term per relation into its type: each starts at 1/sqrt(that
        # many) of nn.Linear's scale, so the sum starts at one relation's (ogbn-mag's papers
        # have 4 relations in; unscaled, the first loss was ~2x ln(classes) on the generator)
        fan_in = {t: max(sum(e[2] == t for e in self.edge_types), 1) for t in dims}
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            out = num_classes if i == num_layers - 1 else hidden
            self.layers.append(nn.ModuleDict({
                "__".join(e): _RelationConv(dims[e[0]], dims[e[2]], out, fan_in[e[2]] ** -0.5)
                for e in self.edge_types}))
            dims = dict.fromkeys(dims, out)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def products(self, blocks: list[Block], batch=None) -> list[tuple[str, str, int, int, int]]:
        """A training step's matrix products, (layer, op, rows, k, n) each (fastsample/nn/roofline.py):
        per layer and relation into a computed type, W_self over its destinations' rows and
        W_neigh over their means: the forward, the weight gradient, and the input gradient
        where the input takes one (above the input layer; there, a learnable embedding's)."""
        learnable = {t for t, v in (batch.x.items() if batch is not None else ()) if v is not None and v.requires_grad}
        out = []
        for i, block in enumerate(blocks):
            for e in self.edge_types:
                s, _, d = e
                if d not in self._computed(i):
                    continue
                conv, rows = self.layers[i]["__".join(e)], block.num_dst_dict[d]
                for name, lin, grad in (("self", conv.self_lin, i > 0 or d in learnable),
                                        ("neigh", conv.neigh_lin, i > 0 or s in learnable)):
                    n, k = lin.weight.shape
                    out += [(f"{i}:{':'.join(e)}:{name}", op, rows, k, n) for op in matmul.OPS[:3 if grad else 2]]
        return out

    def _computed(self, i: int) -> list[str]:
        """The node types layer i computes: all of them, but only the target type at the last
        layer (every type where the model has no target type: a link encoder's)."""
        return [self.target_type] if i == len(self.layers) - 1 and self.target_type is not None else self.node_types

    def forward(self, blocks: list[Block], x: dict) -> torch.Tensor:
        """The target type's outputs for the last block's destinations of that type; without
        a target type, every destination's, in their order (a link encoder's embeddings)."""
        h = self._inputs(x)
        last = len(self.layers) - 1
        for i, block in enumerate(blocks):
            h = self._conv(i, block, h)
            if i < last:
                h = {t: self.dropout(torch.relu(v)) for t, v in h.items()}
        if self.target_type is not None:
            return h[self.target_type]
        return blocks[-1].rows_in_dst_order(h)

    def layer(self, i: int, block: Block, h: dict) -> dict:
        """Layer i alone as in eval mode (ReLU below the last layer, no dropout), {node type:
        its destinations' rows}; the last layer gives the target type only. In eval mode
        forward is these in turn, which layer-wise inference (fastsample/loading/layerwise.py) needs."""
        out = self._conv(i, block, self._inputs(h))
        return out if i == len(self.layers) - 1 else {t: torch.relu(v) for t, v in out.items()}

    def _inputs(self, x: dict) -> dict:
        missing = [t for t in self.node_types if x.get(t) is None]
        if missing:
            raise ValueError(f"x: no rows for node types {', '.join(missing)} (featureless: the loader needs "
                             "embeddings)")
        return {t: x[t].float() for t in self.node_types}

    def _conv(self, i: int, block: Block, h: dict) -> dict:
        """Layer i before its activation: per destination type, the sum over its relations."""
        layer = self.layers[i]
        out = {t: None for t in self._computed(i)}
        for r, e in enumerate(block.edge_types):
            s, _, d = e
            if d not in out:
                continue
            y = layer["__".join(e)](block.relation_block(r), h[s], h[d][:block.num_dst_dict[d]])
            out[d] = y if out[d] is None else out[d] + y
        width = layer["__".join(self.edge_types[0])].self_lin.out_features
        return {t: (v if v is not None else torch.zeros(block.num_dst_dict[t], width)) for t, v in out.items()}


class _RelationConv(nn.Module):
    """One relation's SAGEConv (mean): W_self h_dst + b + W_neigh mean(h_src)."""

    def __init__(self, src_dim: int, dst_dim: int, out_dim: int, scale: float = 1.0):
        super().__init__()
        self.self_lin = nn.Linear(dst_dim, out_dim)
        self.neigh_lin = nn.Linear(src_dim, out_dim, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                p.mul_(scale)

    def forward(self, block: Block, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.self_lin(h_dst) + self.neigh_lin(mean(block, h_src))
