"""A partition's quality as training pays for it: edge cut, balance per node type and
in-edges, and the bytes each rank's feature gather receives per step.

    python bench/partition_quality.py PARTITION [PARTITION ...] [--fanouts 15,10,5]
                                      [--batch-size 1000] [--steps 20] [--embed-dim 64]

The gather is counted, not timed: for each rank, ``--steps`` batches of its own training
nodes are sampled on the replicated topology with the trainer's sampler (the trainer's
defaults: fanouts 15,10,5 per edge type, batch 1000), and every input node another rank
owns is one row received: a featured type's row at its width and dtype, a featureless
type's learnable embedding row at --embed-dim float32 (the trainer's default 64). Ids
and the embedding gradients' return are not counted. Reads any partition directory, so
layouts written before the per-type balance was recorded are measured the same way.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from fastsample.data.graph import describe_types
from fastsample.partition import load_partition
from fastsample.sampling import sample


def gather_bytes(path: Path, fanouts: list[int], batch: int, steps: int, embed_dim: int) -> tuple[float, float]:
    """(bytes received per step per rank, share of input rows that are remote), means over ranks and steps."""
    meta = json.loads((path / "partition.json").read_text())
    P = meta["num_parts"]
    specs = describe_types(meta["dataset"])["features"]
    row = np.array([embed_dim * 4 if s is None else s["dim"] * np.dtype(s["dtype"]).itemsize
                    for s in specs.values()], dtype=np.float64)
    T = len(row)
    received, remote_rows, rows = [], 0, 0
    for r in range(P):
        share = load_partition(path, r, P, "hybrid")
        g, runs = share.graph, share.type_runs
        train = np.asarray(share.train)
        order = np.random.default_rng(r).permutation(len(train))
        lo, hi = share.offsets[r], share.offsets[r + 1]
        for step in range(min(steps, max(len(train) // batch, 1))):
            seeds = np.sort(train[order[step * batch:(step + 1) * batch]])
            ids = sample(g, seeds, fanouts, seed=0, step=step, rank=r)[0].src_ids
            far = ids[(ids < lo) | (ids >= hi)]
            types = (np.searchsorted(runs, far, side="right") - 1) % T
            received.append(float(row[types].sum()))
            remote_rows += len(far)
            rows += len(ids)
    return float(np.mean(received)), remote_rows / max(rows, 1)


def summary(path: Path) -> dict:
    """Cut and balance from partition.json (per-type counts from every part's record)."""
    meta = json.loads((path / "partition.json").read_text())
    counts = np.array([p["node_types"] for p in meta["parts"]], dtype=np.float64)
    names = describe_types(meta["dataset"])["node_types"]
    return {"parts": meta["num_parts"], "method": meta["method"], "edge_cut": meta["edge_cut_fraction"],
            "types": {n: float(c.max() / c.mean()) for n, c in zip(names, counts.T) if c.mean()},
            "in_edges": meta["balance"]["edges"], "seconds": meta["seconds"]}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("partitions", nargs="+", type=Path)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--embed-dim", type=int, default=64)
    a = p.parse_args(argv)
    fanouts = [int(f) for f in a.fanouts.split(",")]
    for path in a.partitions:
        s = summary(path)
        b, share = gather_bytes(path, fanouts, a.batch_size, a.steps, a.embed_dim)
        types = "  ".join(f"{k} {v:.3f}" for k, v in s["types"].items())
        print(f"{str(path):40s} P={s['parts']} cut {s['edge_cut']:.1%}  types max/mean {types}  in-edges "
              f"{s['in_edges']:.3f}  gather {b / 2**20:.2f} MiB/step/rank ({share:.1%} of input rows remote)  "
              f"partition {s['seconds']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
