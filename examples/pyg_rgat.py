"""R-GAT (the MLPerf GNN benchmark's model on IGBH) from PyTorch Geometric, on fastsample's
typed data path: a HeteroConv of GATConv per relation, summed, on typed blocks.

    python -m fastsample.data synth --preset hetero-small data/hetero
    python -m fastsample.partition data/hetero data/hetero-2 --parts 2
    mpiexec -n 2 python -m fastsample.train --data data/hetero-2 --model examples/pyg_rgat.py:build
Needs torch_geometric: pip install ".[pyg]".

Featureless node types arrive in ``x`` as rows of the trainer's sharded learnable
embeddings (``--embed-dim`` wide), like any other type's features.
"""

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, HeteroConv


class RGAT(torch.nn.Module):
    def __init__(self, in_dims, hidden, num_classes, edge_types, target_type, layers=2, heads=4, dropout=0.2):
        super().__init__()
        self.target_type, self.dropout = target_type, dropout
        dims = dict(in_dims)
        self.convs = torch.nn.ModuleList()
        for i in range(layers):
            out, h = (num_classes, 1) if i == layers - 1 else (hidden, heads)
            # a (source, destination) width per relation; no self-loops across types
            self.convs.append(HeteroConv({tuple(e): GATConv((dims[e[0]], dims[e[2]]), out, heads=h, concat=False,
                                                            add_self_loops=False) for e in edge_types}, aggr="sum"))
            dims = dict.fromkeys(dims, out)

    def forward(self, blocks, x):  # fastsample's typed signature: typed blocks, {node type: rows}
        h = x
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            h = conv({t: F.dropout(v, self.dropout, self.training) for t, v in h.items()}, block.edge_index_dict)
            h = {t: v[:block.num_dst_dict[t]] for t, v in h.items()}  # this layer's destinations
            if i < len(self.convs) - 1:
                h = {t: F.elu(v) for t, v in h.items()}
        return h[self.target_type]


def build(in_dims, num_classes, args):
    """The factory --model calls on typed data: in_dims is {node type: input width}."""
    from fastsample.graph import read_meta
    from fastsample.partition import read_partition_meta

    try:  # the schema: a partition's dataset record, or a dataset directory's meta.json
        meta = read_partition_meta(args.data)["dataset"]
    except ValueError:
        meta = read_meta(args.data)
    return RGAT(in_dims, args.hidden, num_classes, meta["edge_types"], meta["target_type"], args.layers)
