"""The learnable embeddings' update at their owners: torch's SparseAdam on a COO gradient
(what fastsample did before issue 36: unique, scatter-add of duplicates, a coalesced
sparse tensor, SparseAdam.step) against fastsample/distributed/row_adam.py's RowAdam (one
pass over the received rows), on the same rows and gradients.

The rows are what owners receive in training: a NodeLoader with embeddings draws real
batches of the dataset (one process), and each step's gradient rows come from the
gather's own send_back; two consecutive batches' rows are one step's, as two ranks' would
be at one owner (so rows repeat, as they do across ranks). Both updates start from the
same tables and must end equal (within float32 rounding: torch's vectorised sqrt is not
correctly rounded), and the ratio of their times is reported.

    python bench/embedding_update.py --dataset data/maglike-ds --batch-size 64 --fanouts 10,10
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
import torch

from fastsample.distributed.embedding import ShardedEmbeddings
from fastsample.distributed.row_adam import RowAdam
from fastsample.data.graph import load_dataset
from fastsample.loading import NodeLoader
from fastsample.sampling import set_num_threads
from timing import cpu_model


def steps_of(dataset: str, batch_size: int, fanouts: list, dim: int, steps: int, seed: int) -> tuple:
    """(the featureless types' table sizes, [per step: {type: (rows, gradient rows)}])."""
    ds = load_dataset(dataset)
    featureless = [t for t, f in ds.features.items() if f is None]
    if not featureless:
        raise SystemExit(f"{dataset}: every node type has features: no embeddings to update")
    emb = ShardedEmbeddings(ds.graph.node_type_offset, 0, 1, ds.graph.node_types, featureless, dim, 0.01, seed)
    loader = NodeLoader(dataset, fanouts, batch_size, split="train", embeddings=emb, shuffle=True, seed=seed)
    rng = np.random.default_rng(seed)
    out, pending = [], None
    for batch in loader:
        gather, route = batch.route
        grads = {t: rng.standard_normal(tuple(batch.x[t].shape)).astype(np.float32) * 1e-2 for t in featureless}
        got = gather.send_back(route, grads)
        if pending is None:
            pending = got
            continue
        out.append({t: (np.concatenate([pending[t][0], got[t][0]]), np.concatenate([pending[t][1], got[t][1]]))
                    for t in featureless})
        pending = None
        if len(out) == steps:
            break
    sizes = {t: (int(ds.graph.node_type_offset[i + 1] - ds.graph.node_type_offset[i]))
             for i, t in enumerate(ds.graph.node_types) if t in featureless}
    return sizes, out


def torch_sparse_adam(tables: dict, steps: list, lr: float, divisor: float) -> float:
    """The old path, timed: per type, unique + scatter-add + coalesced COO + SparseAdam."""
    opt = torch.optim.SparseAdam(list(tables.values()), lr=lr)
    t0 = time.perf_counter()
    for step in steps:
        for name, (rows, values) in step.items():
            unique, inverse = np.unique(rows, return_inverse=True)
            total = np.zeros((len(unique), values.shape[1]), np.float32)
            np.add.at(total, inverse, values)
            total /= divisor
            tables[name].grad = torch.sparse_coo_tensor(torch.from_numpy(unique)[None], torch.from_numpy(total),
                                                        tables[name].shape, is_coalesced=True,
                                                        check_invariants=False)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def row_adam(tables: dict, steps: list, lr: float, divisor: float) -> float:
    opt = RowAdam(tables, lr)
    t0 = time.perf_counter()
    for step in steps:
        for name, (rows, values) in step.items():
            opt.step(name, rows, values, divisor)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="a typed dataset with featureless node types")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--dim", type=int, default=64, help="the embeddings' width (the trainer's --embed-dim)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sizes, steps = steps_of(args.dataset, args.batch_size, fanouts, args.dim, args.steps, seed=0)
    rows = [sum(len(r) for r, _ in s.values()) for s in steps]
    print(f"{args.dataset}: featureless tables {sizes}, width {args.dim} | batch {args.batch_size}, fanouts "
          f"{fanouts}, two batches' rows per step (as two ranks'), {len(steps)} steps, {statistics.mean(rows):,.0f} "
          f"gradient rows per step | {args.threads} thread(s), {cpu_model()}")
    rng = np.random.default_rng(1)
    init = {t: rng.standard_normal((n, args.dim)).astype(np.float32) for t, n in sizes.items()}
    times = {"torch SparseAdam (COO)": [], "RowAdam": []}
    for _ in range(args.repeat):
        a = {t: torch.nn.Parameter(torch.from_numpy(v.copy())) for t, v in init.items()}
        b = {t: torch.nn.Parameter(torch.from_numpy(v.copy())) for t, v in init.items()}
        times["torch SparseAdam (COO)"].append(torch_sparse_adam(a, steps, 0.01, 2.0))
        times["RowAdam"].append(row_adam(b, steps, 0.01, 2.0))
        diff = max(float((a[t] - b[t]).abs().max()) for t in a)
        assert diff < 1e-5, f"the two updates disagree by {diff}"
    base = statistics.median(times["torch SparseAdam (COO)"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:24s} {med / len(steps) * 1e3:7.3f} ms/step  (median of {args.repeat})  "
              f"{base / med:5.2f}x")
    print(f"  tables agree within {diff:.1e} (torch's vectorised sqrt is not correctly rounded)")


if __name__ == "__main__":
    main()
