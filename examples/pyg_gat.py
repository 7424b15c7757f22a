"""GAT from PyTorch Geometric on fastsample's distributed data path.

    mpiexec -n 2 python examples/pyg_gat.py data/cora-2 --epochs 30
    mpiexec -n 2 python -m fastsample.train --data data/cora-2 --model examples/pyg_gat.py:build
Needs torch_geometric: pip install ".[pyg]".
"""

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv


class GAT(torch.nn.Module):
    def __init__(self, in_dim, hidden, num_classes, layers=2, heads=8, dropout=0.6):
        super().__init__()
        dims = [in_dim] + [hidden * heads] * (layers - 1)
        self.convs = torch.nn.ModuleList(GATConv(d, hidden, heads=heads, dropout=dropout) for d in dims)
        self.convs[-1] = GATConv(dims[-1], num_classes, heads=1, dropout=dropout)
        self.dropout = dropout

    def forward(self, blocks, x):  # fastsample's model signature (fastsample/nn/block.py)
        for i, block in enumerate(blocks):
            x = self.layer(i, block, F.dropout(x, self.dropout, self.training))
        return x

    # what exact layer-wise inference needs (fastsample/loading/layerwise.py): layer i alone, as in eval mode
    num_layers = property(lambda self: len(self.convs))

    def layer(self, i, block, x):
        # the first num_dst sources are the destinations, so GAT's self-loops pair each
        # destination with itself
        x = self.convs[i]((x, x[:block.num_dst]), block.edge_index, size=block.size)
        return F.elu(x) if i < self.num_layers - 1 else x


def build(in_dim, num_classes, args):
    """The factory --model calls: args are python -m fastsample.train's. The widths are the GAT
    paper's for Cora (8 heads of 8, dropout 0.6), whatever --hidden and --dropout say (the
    start-up line's "hidden" is the flag's): use args.hidden here to take the flag's."""
    return GAT(in_dim, 8, num_classes, args.layers)


if __name__ == "__main__":
    from loop import main

    main(build, hidden=8, lr=0.005, weight_decay=5e-4)
