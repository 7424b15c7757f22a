"""A feature-only encoder (an MLP of each node's own features, no messages), for the
benchmarks' "does the graph help" baselines: --model bench/mlp_encoder.py:build.

It has fastsample's model signature (forward(blocks, x) -> a row per last-layer
destination) and layer-wise inference's (num_layers, layer(i, block, h)); every layer
reads only its destinations' own rows, which come first in a block's sources."""

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


def build(in_dim, num_classes, config):
    return MLP(in_dim, config.hidden, num_classes, config.layers, config.dropout)
