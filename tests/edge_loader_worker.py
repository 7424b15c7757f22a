"""Run under mpiexec by test_edge_loader.py: on each rank, EdgeLoaders over one link-split
partition in hybrid and vanilla mode and with each kernel give the same batches; no MFG
holds a batch's own edge (either direction); each destination gets min(fanout, its
in-degree less its excluded in-edges) picks."""

import sys

import numpy as np
import torch

from fastsample.comm import create
from fastsample.loading import EdgeLoader
from helpers import mfg_equal, native_built, passed, run_worker

FANOUTS = [4, 3]


def main() -> None:
    partition = sys.argv[1]
    comm = create("mpi")
    kernels = ["numba", "twostep"] + (["native"] if native_built() else [])
    loaders = [EdgeLoader(partition, FANOUTS, 64, negatives=2, comm=comm, seed=3, kernel=k) for k in kernels]
    loaders += [EdgeLoader(partition, FANOUTS, 64, negatives=2, comm=comm, seed=3, mode="vanilla", kernel=k)
                for k in ("numba", "native" if native_built() else "numba")]
    g = loaders[0].part.graph
    for step, batches in enumerate(zip(*loaders)):
        a = batches[0]
        for b in batches[1:]:
            assert np.array_equal(a.seeds, b.seeds) and np.array_equal(a.negatives, b.negatives)
            assert all(mfg_equal(x, y) for x, y in zip(a.mfgs, b.mfgs)) and torch.equal(a.x, b.x)
        banned = {(int(u), int(v)) for u, v in a.edges} | {(int(v), int(u)) for u, v in a.edges}
        for m, f in zip(a.mfgs, FANOUTS):
            d = np.repeat(np.arange(m.num_dst), np.diff(m.indptr))
            used = set(zip(m.src_ids[m.indices].tolist(), m.src_ids[d].tolist()))
            assert not used & banned
            dst = m.src_ids[:m.num_dst].astype(np.int64)
            excluded = np.array([sum(1 for u in g.indices[g.indptr[v]:g.indptr[v + 1]] if (int(u), int(v)) in banned)
                                 for v in dst])
            assert np.array_equal(np.diff(m.indptr), np.minimum(np.diff(g.indptr)[dst] - excluded, f))
        assert torch.equal(a.seeds[a.src], torch.from_numpy(a.edges[:, 0]))
        assert torch.equal(a.seeds[a.neg], torch.from_numpy(a.negatives))
        passed(comm.rank, f"step{step}")
        if step == 2:
            break


if __name__ == "__main__":
    run_worker(main)
