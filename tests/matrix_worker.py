"""Run under mpiexec by test_data_path.py: on 2 ranks, the Trainer over every cell of
TASKS x {untyped, typed} x {hybrid, vanilla} x {native, numba, twostep}. In each
data and task, every mode and kernel gives bitwise the same per-step losses; in every
cell --prefetch 1 (the sampler runs on the prefetch thread) gives bitwise the losses without
it; in each mode --cache-fraction 0.2 gives bitwise the losses without it, --precision
bf16 trains (finite losses), with the same losses over gloo, and --precision int8 trains, with
the same losses in both modes, fetched ahead and cached, and evaluated layer-wise.
The cache and the precisions run once per mode, not per kernel: every kernel samples the
same batches (their losses agree bitwise above), so the cache and the reduced rows would
see the same ids whichever kernel drew them. Typed link batches use no
edge the exclusion rule names, in any layer, and neither do typed edge-class batches. One line per (task, data) that passed
(helpers.passed)."""

import dataclasses
import math
import sys

import numpy as np

from fastsample.comm import create
from fastsample.sampling import resolve_kernel
from fastsample.trainer import TrainConfig, Trainer
from fastsample.trainer.report import Reporter
from helpers import passed, run_worker

KERNELS = ["numba", "twostep"] + (["native"] if resolve_kernel("auto") == "native" else [])
TASKS = ("node", "node-regression", "link", "edge-class", "edge-regression")  # test_data_path.py makes their data


def losses(config, comm) -> list[float]:
    return [x for r in Trainer(config, comm, reporter=Reporter()).run() for x in r.step_losses]


def check_exclusion(trainer) -> None:
    """No layer of a typed edge batch holds one of its edges of the relation, or its reverse."""
    loader = trainer.loaders["train"]
    source = loader.source
    loader.set_epoch(0)
    for batch in loader:
        banned = {(int(s), int(d), source.relation) for s, d in batch.edges}
        banned |= {(int(d), int(s), source.reverse) for s, d in batch.edges}
        for m in batch.mfgs:
            dst = np.repeat(m.src_ids[:m.num_dst], np.diff(m.indptr))
            used = set(zip(m.src_ids[m.indices].tolist(), dst.tolist(), m.edge_types.tolist()))
            assert not used & banned, "an excluded edge was sampled"


def main() -> None:
    root = sys.argv[1]
    comm, gloo = create("mpi"), create("gloo")
    for task in TASKS:
        for data in ("untyped", "typed"):
            base = TrainConfig(data=f"{root}/{data}-{task}-2", task=task, fanouts=(4, 3), batch_size=48, hidden=8,
                               epochs=1, max_steps=3, eval_every=0, quiet=True, threads=1, matmul="blas",
                               embed_dim=8, **({"negatives": 2} if task == "link" else {}))
            want = losses(base, comm)
            assert want and all(math.isfinite(x) for x in want), want
            quantized = []
            for mode in ("hybrid", "vanilla"):
                for kernel in KERNELS:
                    cell = dataclasses.replace(base, mode=mode, sampler=kernel)
                    for extra in ({}, {"prefetch": 1}):
                        got = losses(dataclasses.replace(cell, **extra), comm)
                        assert got == want, (task, data, mode, kernel, extra, got, want)
                    if task in ("link", "edge-class") and data == "typed":  # edge seeds: none of theirs picked
                        check_exclusion(Trainer(cell, comm, reporter=Reporter()))
                # once per mode, on the default kernel: the cache and bf16 gather in each mode's own way
                cell = dataclasses.replace(base, mode=mode)
                got = losses(dataclasses.replace(cell, cache_fraction=0.2, cache_policy="degree"), comm)
                assert got == want, (task, data, mode, "cache", got, want)
                bf16 = losses(dataclasses.replace(cell, precision="bf16"), comm)
                assert len(bf16) == len(want) and all(math.isfinite(x) for x in bf16), bf16
                quantized.append(losses(dataclasses.replace(cell, precision="int8"), comm))
                # combinations that once failed where each option alone passed: int8 rows fetched
                # ahead and from the cache (a batch with no rows of a type), bf16 rows over gloo
                got = losses(dataclasses.replace(cell, precision="int8", prefetch=1, cache_fraction=0.2), comm)
                assert got == quantized[-1], (task, data, mode, "int8 prefetched and cached", got, quantized[-1])
                got = losses(dataclasses.replace(cell, precision="bf16", backend="gloo"), gloo)
                assert got == bf16, (task, data, mode, "bf16 over gloo", got, bf16)
            assert len(quantized[0]) == len(want) and all(math.isfinite(x) for x in quantized[0]), quantized
            assert quantized[0] == quantized[1], (task, data, "int8", quantized)
            if task in ("node", "node-regression"):  # int8 evaluated layer-wise (its shards' scales)
                got = losses(dataclasses.replace(base, precision="int8", eval_every=1, eval="full"), comm)
                assert got == quantized[0], (task, data, "int8 --eval full", got, quantized[0])
            passed(comm.rank, f"{task}-{data}")


if __name__ == "__main__":
    run_worker(main)
