"""One rank of bench/inference.py: time one evaluation mode, print one JSON line.

    mpiexec -n P python bench/inference_worker.py PARTITION MODE FANOUTS BATCH EVAL_BATCH HIDDEN THREADS
"""

import json
import math
import resource
import sys
import time

import numpy as np
import torch

from fastsample.allocator import retain_freed_memory
from fastsample.comm import create
from fastsample.loading.layerwise import layerwise
from fastsample.loading import NodeLoader
from fastsample.nn.sage import GraphSAGE
from fastsample.sampling import set_num_threads


def sampled(model, loader, ids, batch_size, comm) -> int:
    """Sampled evaluation of `ids` (this rank's), the same step count on every rank."""
    steps = max(comm.allgather_object(math.ceil(len(ids) / batch_size)))
    correct = 0
    for step in range(steps):
        batch = loader.batch(ids[step * batch_size:(step + 1) * batch_size], step)
        if len(batch):
            correct += int((model(batch.blocks, batch.x).argmax(1) == batch.y).sum())
    return correct


def main() -> None:
    part, mode, fanouts, batch, eval_batch, hidden, threads = sys.argv[1:8]
    fanouts, batch, eval_batch, hidden, threads = [int(f) for f in fanouts.split(",")], int(batch), int(eval_batch), \
        int(hidden), int(threads)
    retain_freed_memory()  # as the trainer runs
    torch.set_num_threads(threads)
    set_num_threads(threads)
    comm = create("mpi")
    loader = NodeLoader(part, fanouts, batch, "val", seed=1, comm=comm)
    torch.manual_seed(0)
    model = GraphSAGE(loader.feature_dim, hidden, loader.num_classes, len(fanouts), dropout=0.5).eval()
    lo, hi = int(loader.part.offsets[comm.rank]), int(loader.part.offsets[comm.rank + 1])
    if mode == "full":
        ids = np.arange(lo, hi)
    elif mode == "sampled-all":
        ids = np.arange(lo, hi, dtype=loader.part.graph.indices.dtype)
    else:
        ids = np.sort(np.concatenate([np.asarray(loader.part.val), np.asarray(loader.part.test)]))
    comm.barrier()
    t0 = time.perf_counter()
    with torch.no_grad():
        if mode == "full":
            layerwise(model, loader.part, comm, eval_batch)
        else:
            sampled(model, loader, ids, batch, comm)
    comm.barrier()
    seconds = time.perf_counter() - t0
    rows = comm.allgather_object({"rank": comm.rank, "mode": mode, "nodes": len(ids), "seconds": seconds,
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    if comm.rank == 0:  # one writer: ranks' lines would interleave
        print(json.dumps(rows), flush=True)


if __name__ == "__main__":
    main()
