"""Run under mpiexec by test_typed_loader.py: on each rank, a hybrid and a vanilla NodeLoader
over the same typed partition give the same batches, and each batch is right
(test_typed_loader.check_batch against the dataset)."""

import sys

import numpy as np
import torch

from fastsample.comm import create
from fastsample.graph import load_dataset
from fastsample.loader import NodeLoader
from helpers import passed, run_worker
from test_typed_loader import FANOUTS, check_batch


def main() -> None:
    dataset, partition = sys.argv[1:3]
    comm = create("mpi")
    ds = load_dataset(dataset)
    orig = np.load(f"{partition}/orig_ids.npy")
    loaders = [NodeLoader(partition, FANOUTS, 40, comm=comm, mode=m, seed=2) for m in ("hybrid", "vanilla")]
    for step, (a, b) in enumerate(zip(*loaders)):
        check_batch(a, ds, orig)
        assert torch.equal(a.seeds, b.seeds) and torch.equal(a.y, b.y)
        assert all((a.x[t] is None and b.x[t] is None) or torch.equal(a.x[t], b.x[t]) for t in a.x)
        for x, y in zip(a.blocks, b.blocks):
            assert all(torch.equal(x.edge_index_dict[k], y.edge_index_dict[k]) for k in x.edge_index_dict)
        passed(comm.rank, f"step{step}")
        if step == 2:
            break


if __name__ == "__main__":
    run_worker(main)
