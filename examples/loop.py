"""A training loop on fastsample's data path, for any model with the signature
forward(blocks, x) (fastsample/nn/block.py): sampling, feature gather and equal step counts
come from NodeLoader, the gradient average from average_gradients. Run by the examples:
    mpiexec -n 2 python examples/pyg_sage.py PARTITION [--epochs N]
"""

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from fastsample.comm import create
from fastsample.distributed import average_gradients
from fastsample.loading import NodeLoader


def accuracy(model, loader, comm):
    model.eval()
    hits = np.zeros(2)
    with torch.no_grad():
        for batch in loader:
            if len(batch):
                hits += [int((model(batch.blocks, batch.x).argmax(1) == batch.y).sum()), len(batch)]
    comm.all_reduce(hits)  # over every rank's nodes
    return hits[0] / max(hits[1], 1)


def main(build, hidden, lr, weight_decay):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="partition directory (or a dataset directory for one process)")
    p.add_argument("--epochs", type=int, default=30, help="epochs to train")
    p.add_argument("--batch-size", type=int, default=32, help="seeds per rank per step")
    a = p.parse_args()
    comm = create("mpi")
    train = NodeLoader(a.data, fanouts=[10, 10], batch_size=a.batch_size, split="train", seed=0, comm=comm)
    val, test = (NodeLoader(train.part, [10, 10], 256, split, comm=comm) for split in ("val", "test"))
    torch.manual_seed(0)  # the same initial weights on every rank
    model = build(train.feature_dim, train.num_classes, argparse.Namespace(hidden=hidden, layers=2, dropout=0.5))
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    best = (-1.0, 0.0, -1)
    for epoch in range(a.epochs):
        train.set_epoch(epoch)
        model.train()
        for batch in train:
            opt.zero_grad()
            if len(batch):  # a rank may run out of seeds first; it still averages (zeros)
                F.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
            average_gradients(model, comm)
            opt.step()
        scores = (accuracy(model, val, comm), accuracy(model, test, comm), epoch)
        best = max(best, scores)
    if comm.rank == 0:
        print(f"best val {best[0]:.4f} at epoch {best[2]}, test there {best[1]:.4f}")
