"""Partitioning: who owns which node, and the hybrid / vanilla layouts on disk.

    python -m fastsample.partition DATASET OUT --parts P [--method metis|random]
                                   [--mode hybrid|vanilla|both]     (fastsample-partition)

Hybrid mode replicates the (relabelled) topology on every rank and shards features,
labels and splits; vanilla mode shards the topology too (each rank stores the in-edges of
the nodes it owns). Typed and untyped datasets are balanced alike (balance.py: every
split of every node type exact to a node, every type and the in-edges within 5 % of the
mean), each (rank, node type) one contiguous id run (layout.py). ``partition_dataset(dataset, out, parts)`` writes a partition;
``load_partition(path, rank, world_size, mode)`` opens one rank's share. Bad arguments and
damaged or mismatched partitions are a PartitionError (a ValueError) naming the parameter
or file.
"""

from fastsample.partition.layout import (
    PartitionError, RankPartition, load_partition, partition_dataset, read_partition_meta,
)
from fastsample.partition.relabel import owner_of

__all__ = ["PartitionError", "RankPartition", "load_partition", "partition_dataset", "read_partition_meta", "owner_of"]
