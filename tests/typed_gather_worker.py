"""Run under mpiexec by test_typed_partition.py: every rank gathers rows of every node type
of a typed partition in two rounds, checks them against the dataset and checks the bytes
it sent exactly, printing one line per case that passed (helpers.passed)."""

import sys

import numpy as np

from fastsample.comm import create
from fastsample.distributed import FeatureGather
from fastsample.data.graph import load_dataset
from fastsample.partition import load_partition
from helpers import passed, run_worker


def main() -> None:
    dataset, partition = sys.argv[1:3]
    comm = create("mpi")
    part = load_partition(partition, comm.rank, comm.size)
    ds = load_dataset(dataset)
    orig = np.load(f"{partition}/orig_ids.npy")
    runs = np.asarray(part.layout["type_runs"])
    n = part.num_nodes

    def cases_of(rank: int) -> dict:  # every rank's requests, so each knows what it serves
        rng = np.random.default_rng(rank)
        return {"mixed": rng.permutation(n)[: 300 + 100 * rank],
                "own": np.arange(part.offsets[rank], part.offsets[rank + 1])[:40],
                "none": np.empty(0, dtype=np.int64)}

    gather = FeatureGather(comm, runs, part.features)
    everyone = [cases_of(r) for r in range(comm.size)]
    for name, ids in everyone[comm.rank].items():
        comm.counters.reset()
        got = gather.gather(ids)
        out, types, index = got.rows, got.types, got.index
        c = comm.counters.reset()
        assert c.rounds == 2, c
        for t, tname in enumerate(part.graph.node_types):
            mine = types == t
            want_type = ds.graph.node_type_of(orig[ids[mine]])
            assert np.all(want_type == t), "types from the runs are the dataset's"
            if ds.features[tname] is None:
                assert out[tname] is None
                continue
            rows = orig[ids[mine]] - ds.graph.node_type_offset[t]
            assert out[tname].dtype == np.float32 and np.array_equal(out[tname][index[mine]],
                                                                     ds.features[tname][rows]), tname
            assert len(out[tname]) == mine.sum()
        row_bytes = gather.row_bytes
        owner, t_ids, _ = gather.locate(ids)
        asked = int((owner != comm.rank).sum()) * ids.itemsize
        served = 0
        for r, e in enumerate(everyone):
            if r != comm.rank:
                o, t_other, _ = gather.locate(e[name])
                served += int(row_bytes[t_other[o == comm.rank]].sum())
        assert c.bytes_sent == asked + served, (c.bytes_sent, asked, served)
        passed(comm.rank, name)
    # 16-bit shards travel in 16 bits (half the bytes) and come out widened, or kept
    half = {t: None if f is None else np.asarray(f, dtype=np.float16) for t, f in part.features.items()}
    for keep in (False, True):
        ids = everyone[comm.rank]["mixed"]
        got = FeatureGather(comm, runs, half, keep_dtype=keep).gather(ids)
        out, types, index = got.rows, got.types, got.index
        for t, tname in enumerate(part.graph.node_types):
            if half[tname] is None:
                continue
            mine = types == t
            want = ds.features[tname][orig[ids[mine]] - ds.graph.node_type_offset[t]].astype(np.float16)
            assert out[tname].dtype == (np.float16 if keep else np.float32)
            assert np.array_equal(out[tname][index[mine]], want.astype(out[tname].dtype)), (tname, keep)
    passed(comm.rank, "float16")


if __name__ == "__main__":
    run_worker(main)
