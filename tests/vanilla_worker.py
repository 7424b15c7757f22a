"""Run under mpiexec by test_typed_partition.py (with TYPED) and test_exclusion.py (and by
test_distributed.py through distributed_worker.py, which calls check()): vanilla
sampling equals hybrid sampling. Each rank prints one line per step and kernel that passed
(helpers.passed). With ``exclude`` (test_exclusion.py) every step excludes edges: some of
the seeds' in-edges and random others, given as (src, dst) or, typed, (src, dst, etypes).

    mpiexec -n P python tests/vanilla_worker.py PARTITION BACKEND [typed] [exclude]
"""

import sys

import numpy as np

from fastsample.comm import create
from fastsample.distributed.vanilla import VanillaSampler
from fastsample.partition import load_partition
from fastsample.sampling import LocalSampler, sample
from helpers import mfg_equal, native_built, passed


def main() -> None:
    partition, backend = sys.argv[1:3]
    check(create(backend), partition, typed="typed" in sys.argv[3:], excluding="exclude" in sys.argv[3:])


def check(comm, partition, typed=False, excluding=False) -> None:
    """The steps on ``comm``'s ranks (distributed_worker.py runs them on a communicator it shares)."""
    hybrid = load_partition(partition, comm.rank, comm.size, mode="hybrid")
    vanilla = load_partition(partition, comm.rank, comm.size, mode="vanilla")
    kernels = ["numba", "twostep"] + (["native"] if native_built() else [])
    owners = ["numba"] + (["native"] if native_built() else [])  # the owner side's choice kernel
    for owner in owners:
        sampler = VanillaSampler(comm, vanilla.offsets, vanilla.local_graph, kernel=owner)
        steps = [(5, 3), (4, 3, 2), (-1, 2)] if not typed else \
            [(5, 3), ({"cites": 3, "rev_cites": 2, "*": 1}, 3, 2), (-1, {"written_by": 0, "*": 2})]
        for step, fanouts in enumerate(steps):
            seeds = np.asarray(vanilla.train)[step * 7: step * 7 + 20 + comm.rank]
            exclude = excluded_edges(hybrid.graph, seeds, typed, step * 10 + comm.rank) if excluding else None
            comm.counters.reset()
            got = sampler.sample(seeds, fanouts, seed=3, epoch=1, step=step, exclude=exclude)
            rounds = comm.counters.reset().rounds
            assert rounds == 2 * (len(fanouts) - 1), rounds
            passed(comm.rank, f"{owner}-step{step}-rounds")
            for kernel in kernels:
                want = LocalSampler(hybrid.graph, comm.rank, kernel).sample(seeds, fanouts, seed=3, epoch=1, step=step,
                                                                            exclude=exclude)
                for layer, (a, b) in enumerate(zip(got, want)):
                    same = mfg_equal(a, b) and (not typed or np.array_equal(a.edge_types, b.edge_types))
                    assert same, f"rank {comm.rank} step {step} layer {layer}: vanilla ({owner}) != {kernel}"
                passed(comm.rank, f"{owner}-step{step}-{kernel}")
            if excluding:
                plain = sample(hybrid.graph, seeds, fanouts, seed=3, epoch=1, step=step, rank=comm.rank)
                assert not all(mfg_equal(a, b) for a, b in zip(got, plain)), "the exclusion took effect"


def excluded_edges(graph, seeds, typed, seed):
    """A third of the seeds' in-edges and 300 random edges of the whole topology, as
    (src, dst), or typed (src, dst, etypes)."""
    rng = np.random.default_rng(seed)
    into_seeds = np.concatenate([np.arange(graph.indptr[s], graph.indptr[s + 1]) for s in seeds])
    pos = np.concatenate([rng.choice(into_seeds, len(into_seeds) // 3, replace=False),
                          rng.choice(graph.num_edges, 300, replace=False)])
    dst = np.searchsorted(graph.indptr, pos, side="right") - 1
    pairs = (graph.indices[pos], dst)
    return (*pairs, graph.type_per_edge[pos]) if typed else pairs

if __name__ == "__main__":
    main()
