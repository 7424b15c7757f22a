"""One (backend, P) measurement of bench/comm.py, run under mpiexec; rank 0 prints one JSON line.

    mpiexec -n P python bench/comm_worker.py BACKEND SIZES_BYTES [PARTITION FANOUTS BATCH STEPS]

Times per call are the slowest rank's (every call starts after a barrier), median of the
repetitions. With a partition, also the gather's real exchange: that partition's
training steps sampled first (untimed), then each step's feature gather timed.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from fastsample.comm import create


def timed(comm, fn, reps: int) -> float:
    """Median over reps of the slowest rank's time for fn()."""
    times = []
    for _ in range(reps):
        comm.barrier()
        t0 = time.perf_counter()
        fn()
        dt = np.array([time.perf_counter() - t0])
        comm.all_reduce(dt, op="max")
        times.append(float(dt[0]))
    return statistics.median(times)


def reps_for(nbytes: int) -> int:
    """Enough repetitions for a steady median, few for the big messages."""
    return int(min(50, max(3, 64 * 2**20 // max(nbytes, 1))))


def all_to_all(comm, sizes: list[int]) -> list[dict]:
    P, out = comm.size, []
    for size in sizes:
        n = size // 4  # float32 elements per rank pair
        send = np.ones(n * P, dtype=np.float32)
        counts = np.full(P, n, dtype=np.int64)
        comm.all_to_all_v(send, counts, recv_counts=counts)  # warm: connections, buffers
        t = timed(comm, lambda: comm.all_to_all_v(send, counts, recv_counts=counts), reps_for(size))
        # what one rank sends to the others, per second
        out.append({"op": "all_to_all_v", "bytes_per_pair": size, "seconds": t,
                    "gbps": size * (P - 1) * 8 / t / 1e9})
        del send
    return out


def gradient_all_reduce(comm, in_dim: int, classes: int) -> dict:
    from fastsample.nn.sage import GraphSAGE

    model = GraphSAGE(in_dim, 256, classes, 3, 0.5)
    n = sum(p.numel() for p in model.parameters()) + 3  # the trainer's bucket: gradients + loss stats
    bucket = np.ones(n, dtype=np.float32)
    comm.all_reduce(bucket)
    t = timed(comm, lambda: comm.all_reduce(bucket), 50)
    return {"op": "all_reduce", "bytes": bucket.nbytes, "seconds": t, "model": f"GraphSAGE {in_dim}-256-256-{classes}"}


def gather(comm, partition: str, fanouts: list[int], batch: int, steps: int) -> dict:
    from fastsample.loading import NodeLoader

    loader = NodeLoader(partition, fanouts, batch, comm=comm)  # kernel "auto": native where built
    order = loader.order()
    ids = [loader.sample(loader.seeds(order, s), s)[0].src_ids for s in range(min(steps, loader.epoch_steps))]
    loader.gather(ids[0])  # warm
    comm.counters.reset()
    times = [timed(comm, lambda i=i: loader.gather(i), 1) for i in ids]
    sent = comm.counters.reset().bytes_sent
    return {"op": "gather", "partition": partition, "fanouts": fanouts, "batch": batch, "steps": len(ids),
            "seconds": statistics.median(times), "bytes_sent_per_step_rank0": sent / len(ids),
            "input_rows_per_step_rank0": float(np.mean([len(i) for i in ids])),
            "feature_dim": loader.feature_dim, "num_classes": loader.num_classes}


def main() -> None:
    backend, sizes = sys.argv[1], [int(s) for s in sys.argv[2].split(",") if s]
    comm = create(backend)
    one_thread_per_rank()
    rows = all_to_all(comm, sizes)
    if len(sys.argv) > 3:
        partition, fanouts, batch, steps = sys.argv[3], [int(f) for f in sys.argv[4].split(",")], int(sys.argv[5]), \
            int(sys.argv[6])
        g = gather(comm, partition, fanouts, batch, steps)
        rows.append(g)
        rows.append(gradient_all_reduce(comm, g["feature_dim"], g["num_classes"]))
    else:
        rows.append(gradient_all_reduce(comm, 100, 47))
    if comm.rank == 0:
        print(json.dumps({"backend": backend, "ranks": comm.size, "rows": rows}), flush=True)


def one_thread_per_rank() -> None:
    import torch

    from fastsample.sampling import set_num_threads

    torch.set_num_threads(1)
    set_num_threads(1)


if __name__ == "__main__":
    main()
