"""A feature-only encoder (an MLP of each node's own features, no messages), for the
benchmarks' "does the graph help" baselines: --model bench/mlp_encoder.py:build.

It has fastsample's model signature (forward(blocks, x) -> a row per last-layer
destination) and layer-wise inference's (num_layers, layer(i, block, h)); every layer
reads only its destinations' own rows, which come first in a block's sources. On typed
data (x: {node type: rows}) each node type has an MLP of its own (a featureless type's
input is its learnable embedding), and the rows come out in the destinations' order."""

import numpy as np
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, in_dim: int, hidden: int, out: int, layers: int, dropout: float):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = nn.Dropout(dropout)

    @property
    def num_layers(self) -> int:
        return len(self.lins)

    def layer(self, i, block, h):
        h = self.lins[i](h[:block.num_dst].float())
        return h if i == len(self.lins) - 1 else torch.relu(h)

    def forward(self, blocks, x):
        h = x.float()
        for i, block in enumerate(blocks):
            h = self.layer(i, block, h)
            if i < len(self.lins) - 1:
                h = self.dropout(h)
        return h


class TypedMLP(nn.Module):
    """One MLP per node type; forward gives every last-layer destination's row in order."""

    def __init__(self, in_dims: dict, hidden: int, out: int, layers: int, dropout: float):
        super().__init__()
        self.mlps = nn.ModuleDict({t: MLP(d, hidden, out, layers, dropout) for t, d in in_dims.items()})

    @property
    def num_layers(self) -> int:
        return next(iter(self.mlps.values())).num_layers

    def layer(self, i, block, h):
        return {t: mlp.layer(i, _Rows(block.num_dst_dict[t]), h[t]) for t, mlp in self.mlps.items()}

    def forward(self, blocks, x):
        last = blocks[-1]
        kinds = last.src_type[:last.num_dst]
        rows = {t: mlp([_Rows(last.num_dst_dict[t])] * mlp.num_layers, x[t][:last.num_dst_dict[t]])
                for t, mlp in self.mlps.items()}
        out = next(iter(rows.values())).new_empty(last.num_dst, next(iter(rows.values())).shape[1])
        for k, t in enumerate(last.node_types):
            out[torch.from_numpy(np.flatnonzero(kinds == k))] = rows[t]
        return out


class _Rows:
    """What an MLP layer reads of a block: how many destination rows come first."""

    def __init__(self, num_dst):
        self.num_dst = num_dst


def build(in_dim, num_classes, config):
    if isinstance(in_dim, dict):
        return TypedMLP(in_dim, config.hidden, num_classes, config.layers, config.dropout)
    return MLP(in_dim, config.hidden, num_classes, config.layers, config.dropout)
