"""R-GCN against a homogeneous GraphSAGE and an MLP on a typed graph, through the trainer.

Each model trains with ``python -m fastsample.train`` on P ranks, with the same fanouts,
batch, epochs and seeds; reported: the test accuracy at the best validation epoch, per
seed and the mean.
  R-GCN      the typed dataset as it is (the built-in model for typed data)
  GraphSAGE  the same graph with the types ignored: one node set, every edge kept (no
             edge types), each type's features in one matrix (a featureless type's rows
             zero), labels on the same nodes
  MLP        GraphSAGE on the same nodes with no edges: a node's own features only

    python bench/hetero_accuracy.py --dataset data/hetero --ranks 2 --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from fastsample.graph import CSCGraph, load_dataset, write_dataset
from fastsample.launcher import find_mpiexec
from fastsample.partition import partition_dataset


def untyped(ds, path: Path, edges: bool) -> None:
    """The typed dataset ``ds`` with its types ignored (edges=False: no edges at all)."""
    g = ds.graph
    width = max(f.shape[1] for f in ds.features.values() if f is not None)
    x = np.zeros((g.num_nodes, width), dtype=np.float32)
    for i, t in enumerate(g.node_types):
        f = ds.features[t]
        if f is not None:
            x[g.node_type_offset[i]:g.node_type_offset[i + 1], :f.shape[1]] = f
    labels = np.full(g.num_nodes, -1, dtype=np.int64)
    lo = int(ds.graph.node_type_offset[ds.target_index])
    labels[lo:lo + len(ds.labels)] = ds.labels
    graph = CSCGraph(np.asarray(g.indptr), np.asarray(g.indices)) if edges else \
        CSCGraph(np.zeros(g.num_nodes + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    write_dataset(path, graph, x, labels, ds.train, ds.val, ds.test, name=f"{ds.name}-untyped",
                  num_classes=ds.num_classes, overwrite=True)


def train(partition: Path, ranks: int, seed: int, args, log: Path) -> float:
    cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks), sys.executable, "-m", "fastsample.train", "--data",
           str(partition), "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--hidden",
           str(args.hidden), "--epochs", str(args.epochs), "--lr", str(args.lr), "--seed", str(seed), "--threads",
           "1", "--quiet", "--log-json", str(log)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    best = max(records, key=lambda r: r["val_acc"])  # the first epoch that reached it
    return best["test_acc"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="a typed dataset directory")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.005)
    args = p.parse_args(argv)
    ds = load_dataset(args.dataset)
    if not ds.typed:
        raise SystemExit(f"{args.dataset}: not a typed dataset")
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{ds.name}: {ds.graph.num_nodes:,} nodes, {ds.graph.num_edges:,} edges, {ds.graph.num_edge_types} edge "
          f"types, {len(ds.train):,} training {ds.target_type} nodes | {args.ranks} ranks, fanouts {args.fanouts}, "
          f"batch {args.batch_size}/rank, hidden {args.hidden}, {args.epochs} epochs, lr {args.lr}, seeds {seeds}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        untyped(ds, tmp / "sage", edges=True)
        untyped(ds, tmp / "mlp", edges=False)
        results = {}
        for name, source in (("R-GCN", Path(args.dataset)), ("GraphSAGE (types ignored)", tmp / "sage"),
                             ("MLP (own features)", tmp / "mlp")):
            part = tmp / f"part-{len(results)}"
            partition_dataset(source, part, args.ranks, method="random", progress=False)
            results[name] = [train(part, args.ranks, s, args, tmp / f"log-{len(results)}-{s}.jsonl") for s in seeds]
            print(f"  {name:26s} test {np.mean(results[name]):.3f}  (seeds: "
                  f"{', '.join(f'{a:.3f}' for a in results[name])})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
