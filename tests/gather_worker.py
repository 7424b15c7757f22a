"""Run under mpiexec by test_distributed.py: every rank gathers random rows and checks them,
printing one line per case that passed (helpers.passed); test_distributed.py names the cases."""

import sys

import numpy as np

from fastsample.comm import create
from fastsample.distributed import FeatureGather
from fastsample.graph import load_dataset
from fastsample.partition import load_partition, owner_of
from helpers import passed


def main() -> None:
    dataset, partition, backend = sys.argv[1:4]
    comm = create(backend)
    shard = load_partition(partition, comm.rank, comm.size)
    reference = np.asarray(load_dataset(dataset).features)[np.load(f"{partition}/orig_ids.npy")]
    gather = FeatureGather(comm, shard.offsets, shard.features)
    rng = np.random.default_rng(comm.rank)
    n = shard.num_nodes
    cases = {"mixed_owners": rng.permutation(n)[: 200 * (comm.rank + 1)],  # sizes differ by rank
             "own_rows": np.arange(shard.offsets[comm.rank], shard.offsets[comm.rank + 1])[:50],
             "no_rows": np.empty(0, dtype=np.int64)}
    half = FeatureGather(comm, shard.offsets, np.asarray(shard.features, dtype=np.float16))  # numpy path
    for name, ids in cases.items():
        rows = half(ids)
        assert rows.dtype == np.float32 and np.array_equal(rows, reference[ids].astype(np.float16)), \
            f"rank {comm.rank}: wrong float16 rows"
        comm.counters.reset()
        rows = gather(ids)
        assert np.array_equal(rows, reference[ids]), f"rank {comm.rank}: wrong rows"
        c = comm.counters.reset()
        assert c.rounds == 2, c
        own = owner_of(shard.offsets, ids) == comm.rank
        assert c.bytes_sent <= 8 * (len(ids) - own.sum()) + 4 * reference.shape[1] * n, c
        passed(comm.rank, name)


if __name__ == "__main__":
    main()
