"""Run under mpiexec (by test_distributed.py through distributed_worker.py, which calls check()
on a communicator it shares): every rank gathers random rows and checks them, printing one
line per case that passed (helpers.passed); test_distributed.py names the cases."""

import sys

import numpy as np

from fastsample.comm import create
from fastsample.distributed import FeatureGather
from fastsample.data.graph import load_dataset
from fastsample.partition import load_partition, owner_of
from helpers import passed


def main() -> None:
    dataset, partition, backend = sys.argv[1:4]
    check(create(backend), dataset, partition)


def check(comm, dataset, partition) -> None:
    """The cases on ``comm``'s ranks (distributed_worker.py runs them on a communicator it shares)."""
    shard = load_partition(partition, comm.rank, comm.size)
    reference = np.asarray(load_dataset(dataset).features)[np.load(f"{partition}/orig_ids.npy")]
    gather = FeatureGather(comm, shard.offsets, shard.features)
    n = shard.num_nodes

    def cases_of(rank: int) -> dict:  # every rank's requests, so each knows what it must serve
        rng = np.random.default_rng(rank)
        return {"mixed_owners": rng.permutation(n)[: 200 * (rank + 1)],  # sizes differ by rank
                "own_rows": np.arange(shard.offsets[rank], shard.offsets[rank + 1])[:50],
                "no_rows": np.empty(0, dtype=np.int64)}

    cases, everyone = cases_of(comm.rank), [cases_of(r) for r in range(comm.size)]
    half = FeatureGather(comm, shard.offsets, np.asarray(shard.features, dtype=np.float16))  # numpy path
    width = shard.features.shape[1] * shard.features.dtype.itemsize
    for name, ids in cases.items():
        rows = half(ids)
        assert rows.dtype == np.float32 and np.array_equal(rows, reference[ids].astype(np.float16)), \
            f"rank {comm.rank}: wrong float16 rows"
        comm.counters.reset()
        rows = gather(ids)
        assert np.array_equal(rows, reference[ids]), f"rank {comm.rank}: wrong rows"
        c = comm.counters.reset()
        assert c.rounds == 2, c
        # exactly: round 1 the ids this rank asks others for, round 2 the rows others ask it for
        asked = int((owner_of(shard.offsets, ids) != comm.rank).sum())
        served = sum(int((owner_of(shard.offsets, e[name]) == comm.rank).sum())
                     for r, e in enumerate(everyone) if r != comm.rank)
        assert c.bytes_sent == asked * ids.itemsize + served * width, (c.bytes_sent, asked, served)
        passed(comm.rank, name)


if __name__ == "__main__":
    main()
