"""GraphSAGE from PyTorch Geometric on fastsample's distributed data path.

Its own training loop (NodeLoader + average_gradients), on 2 ranks:
    mpiexec -n 2 python examples/pyg_sage.py data/cora-2 --epochs 30
The same model under the built-in trainer (checkpoints, logs, --resume, --eval):
    mpiexec -n 2 python -m fastsample.train --data data/cora-2 --model examples/pyg_sage.py:build
Needs torch_geometric: pip install ".[pyg]".
"""

import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv


class SAGE(torch.nn.Module):
    def __init__(self, in_dim, hidden, num_classes, layers=2, dropout=0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [num_classes]
        self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, blocks, x):  # fastsample's model signature (fastsample/nn/block.py)
        for i, block in enumerate(blocks):
            x = self.layer(i, block, x)
            if i < self.num_layers - 1:
                x = F.dropout(x, self.dropout, self.training)
        return x

    # what exact layer-wise inference needs (fastsample/loading/layerwise.py): layer i alone, as in eval mode
    num_layers = property(lambda self: len(self.convs))

    def layer(self, i, block, x):
        x = self.convs[i]((x, x[:block.num_dst]), block.edge_index, size=block.size)
        return F.relu(x) if i < self.num_layers - 1 else x


def build(in_dim, num_classes, args):
    """The factory --model calls: args are python -m fastsample.train's."""
    return SAGE(in_dim, args.hidden, num_classes, args.layers, args.dropout)


if __name__ == "__main__":
    from loop import main

    main(build, hidden=64, lr=0.01, weight_decay=5e-4)
