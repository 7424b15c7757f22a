"""R-GAT (the MLPerf GNN benchmark's model on IGBH) from PyTorch Geometric, on fastsample's
typed data path: MLPerf's reference RGNN(model="rgat") over typed blocks.

    python -m fastsample.data synth --preset hetero-small data/hetero
    python -m fastsample.partition data/hetero data/hetero-2 --parts 2
    mpiexec -n 2 python -m fastsample.train --data data/hetero-2 --model examples/pyg_rgat.py:build
Needs torch_geometric: pip install ".[pyg]".

The architecture is the reference's (mlcommons/training, retired_benchmarks/rgat/rgnn.py):
per layer a HeteroConv of GATConv(d_in, hidden // heads, heads, add_self_loops=False) per
relation, summed; LeakyReLU and dropout between layers; a Linear on the target type. The
built-in ``--model rgat`` (fastsample/nn/rgat.py) is the same model on native kernels
(bench/rgat.py compares the two on the same weights). Featureless node types arrive in
``x`` as rows of the trainer's sharded learnable embeddings (``--embed-dim`` wide), like
any other type's features; a relation between types of unequal widths gets GATConv's two
projections, (d_src, d_dst).
"""

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, HeteroConv


class RGAT(torch.nn.Module):
    def __init__(self, in_dims, hidden, num_classes, edge_types, target_type, layers=2, heads=4, dropout=0.2):
        super().__init__()
        self.target_type = target_type
        self.dropout = torch.nn.Dropout(dropout)
        dims = dict(in_dims)
        self.convs = torch.nn.ModuleList()
        for _ in range(layers):
            self.convs.append(HeteroConv({
                tuple(e): GATConv(dims[e[0]] if dims[e[0]] == dims[e[2]] else (dims[e[0]], dims[e[2]]),
                                  hidden // heads, heads=heads, add_self_loops=False)
                for e in edge_types}, aggr="sum"))
            dims = dict.fromkeys(dims, hidden)
        self.lin = torch.nn.Linear(hidden, num_classes)

    def forward(self, blocks, x):  # fastsample's typed signature: typed blocks, {node type: rows}
        h = x
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            h = conv(h, block.edge_index_dict)
            h = {t: v[:block.num_dst_dict[t]] for t, v in h.items()}  # this layer's destinations
            if i < len(self.convs) - 1:
                h = {t: self.dropout(F.leaky_relu(v)) for t, v in h.items()}
        return self.lin(h[self.target_type])


def build(in_dims, num_classes, args):
    """The factory --model calls on typed data: in_dims is {node type: input width}."""
    from fastsample.data.graph import read_meta
    from fastsample.partition import read_partition_meta

    try:  # the schema: a partition's dataset record, or a dataset directory's meta.json
        meta = read_partition_meta(args.data)["dataset"]
    except ValueError:
        meta = read_meta(args.data)
    return RGAT(in_dims, args.hidden, num_classes, meta["edge_types"], meta["target_type"], args.layers,
                heads=args.heads, dropout=args.dropout)
