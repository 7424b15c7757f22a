"""Run under mpiexec by test_typed_loader.py: on each rank, a hybrid and a vanilla NodeLoader
over the same typed partition, and a hybrid one with a feature cache, give the same
batches, and each batch is right (test_typed_loader.check_batch against the dataset);
the cache holds no row this rank owns and none of a featureless type."""

import sys

import numpy as np
import torch

from fastsample.comm import create
from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from helpers import passed, run_worker
from test_typed_loader import FANOUTS, check_batch


def main() -> None:
    dataset, partition = sys.argv[1:3]
    comm = create("mpi")
    ds = load_dataset(dataset)
    orig = np.load(f"{partition}/orig_ids.npy")
    loaders = [NodeLoader(partition, FANOUTS, 40, comm=comm, mode=m, seed=2) for m in ("hybrid", "vanilla")]
    cached = NodeLoader(partition, FANOUTS, 40, comm=comm, seed=2, cache_fraction=0.3)
    cached.warm_up()
    ids = cached.cache.ids
    g = cached.part.graph
    lo, hi = cached.part.offsets[comm.rank], cached.part.offsets[comm.rank + 1]
    featureless = [i for i, t in enumerate(g.node_types) if ds.features[t] is None]
    assert len(ids) and not np.any((ids >= lo) & (ids < hi)) and not np.isin(g.node_type_of(ids), featureless).any()
    for step, (a, b, c) in enumerate(zip(*loaders, cached)):
        check_batch(a, ds, orig)
        assert all((a.x[t] is None and c.x[t] is None) or torch.equal(a.x[t], c.x[t]) for t in a.x)
        assert torch.equal(a.seeds, b.seeds) and torch.equal(a.y, b.y)
        assert all((a.x[t] is None and b.x[t] is None) or torch.equal(a.x[t], b.x[t]) for t in a.x)
        for x, y in zip(a.blocks, b.blocks):
            assert all(torch.equal(x.edge_index_dict[k], y.edge_index_dict[k]) for k in x.edge_index_dict)
        passed(comm.rank, f"step{step}")
        if step == 2:
            break
    assert cached.gather_counts()["cached"] > 0


if __name__ == "__main__":
    run_worker(main)
