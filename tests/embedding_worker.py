"""Run under mpiexec by test_typed_loader.py: sharded embeddings of a featureless type.
Each batch's embedding rows are the owners' current rows; send_back delivers every row's
gradient to its owner, and only there; a step updates exactly the rows gathered; and
with prefetch the rows still carry every update made before the step (no stale rows)."""

import sys

import numpy as np
import torch

from fastsample.comm import create
from fastsample.distributed.embedding import ShardedEmbeddings
from fastsample.loading import NodeLoader
from fastsample.partition import read_partition_meta
from helpers import passed, run_worker
from test_typed_loader import FANOUTS

TYPE = "institute"


def whole_table(comm, emb) -> np.ndarray:
    """Every rank's shard of TYPE, in rank order: row i is the type's node of index i."""
    return np.concatenate(comm.allgather_object(emb.shards()[TYPE].copy()))


def main() -> None:
    partition, mode = sys.argv[1:3]
    comm = create("mpi")
    meta = read_partition_meta(partition)
    types, runs = meta["dataset"]["node_types"], meta["type_runs"]
    make = lambda: ShardedEmbeddings(runs, comm.rank, comm.size, types, [TYPE], dim=4, lr=0.1, seed=5)
    plain, ahead = make(), make()
    loaders = [NodeLoader(partition, FANOUTS, 40, comm=comm, mode=mode, seed=2, embeddings=e, prefetch=p)
               for e, p in ((plain, 0), (ahead, 1))]
    T, base = len(types), None
    t = types.index(TYPE)
    mine = runs[comm.rank * T + t], runs[comm.rank * T + t + 1]
    base = sum(runs[r * T + t + 1] - runs[r * T + t] for r in range(comm.rank))  # my rows' first type index
    for step, (a, b) in enumerate(zip(*loaders)):
        index = a.blocks[0].input_index[TYPE].numpy()
        before = whole_table(comm, plain)
        assert np.array_equal(a.x[TYPE].detach().numpy(), before[index])  # the owners' current rows
        assert torch.equal(a.x[TYPE], b.x[TYPE]), "prefetch served rows from before an update"
        # the gradient of each row: its type index in every column, so the owner can tell whose it is
        grads = {TYPE: np.repeat(index[:, None].astype(np.float32), 4, axis=1)}
        gather, route = a.route
        got = gather.send_back(route, grads)
        rows, values = got[TYPE]
        values = values.materialize()
        assert np.all((rows >= 0) & (rows < mine[1] - mine[0]))
        assert np.array_equal(values, np.repeat((base + rows)[:, None].astype(np.float32), 4, axis=1))
        asked = comm.allgather_object(index)  # every rank's rows of TYPE, by type index
        want = np.sort(np.concatenate([i[(i >= base) & (i < base + mine[1] - mine[0])] for i in asked]) - base)
        assert np.array_equal(np.sort(rows), want)
        passed(comm.rank, f"send_back{step}")
        # a step with those gradients changes exactly the rows some rank gathered
        for batch in (a, b):
            batch.x[TYPE].grad = torch.from_numpy(np.repeat(index[:, None].astype(np.float32) + 1, 4, axis=1))
        plain.step(a)
        ahead.step(b)
        after = whole_table(comm, plain)
        touched = np.unique(np.concatenate(asked))
        changed = np.flatnonzero(np.any(after != before, axis=1))
        assert np.array_equal(changed, touched), (changed, touched)
        assert np.array_equal(after, whole_table(comm, ahead))
        passed(comm.rank, f"step{step}")
        if step == 3:
            break


if __name__ == "__main__":
    run_worker(main)
