"""Run under mpiexec by test_cache.py: each rank builds its loader's feature cache (both
policies, both modes) and checks what it holds against the dataset itself, printing one
line per case that passed (helpers.passed)."""

import sys

import numpy as np

from fastsample.comm import create
from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from helpers import passed, run_worker


def main() -> None:
    dataset, partition = sys.argv[1:3]
    comm = create("mpi")
    ds = load_dataset(dataset)
    orig_ids = np.load(f"{partition}/orig_ids.npy")
    reference = np.asarray(ds.features)[orig_ids]  # every node's row, under the partition's ids
    for mode in ("hybrid", "vanilla"):
        for policy in ("degree", "frequency"):
            loader = NodeLoader(partition, [5, 4], 40, comm=comm, mode=mode, cache_fraction=0.1, cache_policy=policy)
            loader.warm_up()
            cache, n = loader.cache, loader.part.num_nodes
            lo, hi = int(loader.part.offsets[comm.rank]), int(loader.part.offsets[comm.rank + 1])
            ids = cache.ids
            assert np.all(np.diff(ids) > 0), "ids sorted and unique"
            assert not np.any((ids >= lo) & (ids < hi)), f"{mode} {policy}: caches rows rank {comm.rank} owns"
            assert np.array_equal(cache.by_type[0].rows, reference[ids]), f"{mode} {policy}: rows differ from the owners'"
            # what the policy promised: no node left out scores higher than one kept
            degree = np.bincount(orig_to_new_degree(ds, orig_ids), minlength=n)
            scores = degree
            if policy == "frequency":  # the first epoch's input nodes, ties (unseen ones too) by degree
                counts = np.zeros(n, dtype=np.int64)
                order = loader.order()
                for step in range(loader.epoch_steps):
                    counts += np.bincount(loader.sample(loader.seeds(order, step), step)[0].src_ids, minlength=n)
                scores = counts * (degree.max() + 1) + degree
            fetched = np.count_nonzero(np.delete(scores, np.arange(lo, hi)) > 0)  # nodes this rank would fetch
            assert len(ids) == min(int(0.1 * n), fetched), f"{mode} {policy}: {len(ids)} rows cached"
            others = np.setdiff1d(np.setdiff1d(np.arange(n), np.arange(lo, hi)), ids)
            assert scores[ids].min() >= scores[others].max(), f"{mode} {policy}: a better row was left out"
            # the gather then fetches only rows neither owned nor cached, with the same result
            want = np.arange(n)
            before = loader.gather_counts()
            got = loader.gather(want)
            after = loader.gather_counts()
            assert np.array_equal(got, reference)
            assert after["cached"] - before["cached"] == len(ids)
            assert after["remote"] - before["remote"] == n - (hi - lo) - len(ids)
            passed(comm.rank, f"{mode}-{policy}")


def orig_to_new_degree(ds, orig_ids):
    """Every edge's source, under the partition's ids (out-degree counts by node)."""
    new_of_old = np.empty(len(orig_ids), dtype=np.int64)
    new_of_old[orig_ids] = np.arange(len(orig_ids))
    return new_of_old[np.asarray(ds.graph.indices)]


if __name__ == "__main__":
    run_worker(main)
