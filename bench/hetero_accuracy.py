"""Typed-graph models against a homogeneous GraphSAGE and an MLP on a typed graph, through the trainer.

Each model trains with ``python -m fastsample.train`` on P ranks, with the same flags
(fanouts, batch, hidden, epochs, lr, dropout, heads) and seeds; reported: the test accuracy
at the best validation epoch, per seed and the mean. --models picks among:
  rgcn       R-GCN: the typed dataset as it is (--model sage, the built-in model for typed data)
  rgat       R-GAT: the built-in one on native kernels (--model rgat)
  pyg-rgat   R-GAT: PyG's, MLPerf's reference architecture (--model examples/pyg_rgat.py:build)
  sage       GraphSAGE on the same graph with the types ignored: one node set, every edge
             kept (no edge types), each type's features in one matrix (a featureless
             type's rows zero), labels on the same nodes
  mlp        GraphSAGE on the same nodes with no edges: a node's own features only

    python bench/hetero_accuracy.py --dataset data/hetero --ranks 2 --seeds 0,1,2
    python bench/hetero_accuracy.py --dataset data/hetero --models rgat,pyg-rgat,rgcn --dropout 0.2
    python bench/hetero_accuracy.py --dataset data/hetero --models rgcn --precisions fp32,bf16,int8

--precisions trains each model once per precision (--precision), a row each.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from fastsample.choices import PRECISIONS
from fastsample.data.graph import CSCGraph, load_dataset, write_dataset
from fastsample.launcher import find_mpiexec
from fastsample.partition import partition_dataset
from fastsample.trainer.runlog import read_records


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


HERE = Path(__file__).resolve().parent
MODELS = {  # name: (what the table calls it, --model, trained on: typed, sage or mlp data)
    "rgcn": ("R-GCN (built-in, --model sage)", "sage", "typed"),
    "rgat": ("R-GAT (built-in, --model rgat)", "rgat", "typed"),
    "pyg-rgat": ("R-GAT (PyG's, examples/pyg_rgat.py)", f"{HERE.parent / 'examples' / 'pyg_rgat.py'}:build", "typed"),
    "sage": ("GraphSAGE (types ignored)", "sage", "sage"),
    "mlp": ("MLP (own features)", "sage", "mlp"),
}


def train(partition: Path, ranks: int, seed: int, args, log: Path, model: str, precision: str = "fp32") -> float:
    cmd = [find_mpiexec() or "mpiexec", "-n", str(ranks), sys.executable, "-m", "fastsample.train", "--data",
           str(partition), "--model", model, "--precision", precision, "--fanouts", args.fanouts, "--batch-size",
           str(args.batch_size),
           "--hidden", str(args.hidden), "--epochs", str(args.epochs), "--lr", str(args.lr), "--dropout",
           str(args.dropout), "--seed", str(seed), "--threads", "1", "--quiet", "--log-json", str(log)]
    if model != "sage":  # the R-GATs' (the trainer refuses a flag the model does not read)
        cmd += ["--heads", str(args.heads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    records = read_records(log)
    best = max(records, key=lambda r: r["val_acc"])  # the first epoch that reached it
    return best["test_acc"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="a typed dataset directory")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--heads", type=int, default=4, help="R-GAT's attention heads (must divide --hidden)")
    p.add_argument("--models", default="rgcn,sage,mlp", help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--precisions", default="fp32", help=f"comma-separated, of {', '.join(PRECISIONS)}: a row each")
    args = p.parse_args(argv)
    models, precisions = args.models.split(","), args.precisions.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)} (known: {', '.join(MODELS)})")
    if any(x not in PRECISIONS for x in precisions):
        raise SystemExit(f"--precisions {args.precisions!r}: comma-separated, of {', '.join(PRECISIONS)}")
    ds = load_dataset(args.dataset)
    if not ds.typed:
        raise SystemExit(f"{args.dataset}: not a typed dataset")
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{ds.name}: {ds.graph.num_nodes:,} nodes, {ds.graph.num_edges:,} edges, {ds.graph.num_edge_types} edge "
          f"types, {len(ds.train):,} training {ds.target_type} nodes | {args.ranks} ranks, fanouts {args.fanouts}, "
          f"batch {args.batch_size}/rank, hidden {args.hidden}, {args.epochs} epochs, lr {args.lr}, dropout "
          f"{args.dropout}, heads {args.heads}, seeds {seeds}, precisions {precisions}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sources, parts = {"typed": Path(args.dataset), "sage": tmp / "sage", "mlp": tmp / "mlp"}, {}
        for name in models:
            label, model, data = MODELS[name]
            if data not in parts:
                if data != "typed":
                    untyped(ds, sources[data], edges=data == "sage")
                parts[data] = tmp / f"part-{data}"
                partition_dataset(sources[data], parts[data], args.ranks, method="random", progress=False)
            for precision in precisions:
                accs = [train(parts[data], args.ranks, s, args, tmp / f"log-{name}-{precision}-{s}.jsonl", model,
                              precision) for s in seeds]
                row = label if len(precisions) == 1 else f"{label}, {precision}"
                print(f"  {row:44s} test {np.mean(accs):.3f}  (seeds: {', '.join(f'{a:.3f}' for a in accs)})",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
