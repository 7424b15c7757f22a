"""Link prediction through the trainer: the built-in encoder (GraphSAGE; R-GCN on typed data) against a
feature-only MLP encoder (bench/mlp_encoder.py) on the same link-split partition, same
flags and seeds; reported: test ROC-AUC and MRR at the best validation AUC, per seed
and the mean.

    python bench/link_accuracy.py --data data/small-link-2 --ranks 2 --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from fastsample.launcher import find_mpiexec
from fastsample.trainer.runlog import read_records

HERE = Path(__file__).resolve().parent


def run(args, seed: int, model: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        cmd = [find_mpiexec(), "-n", str(args.ranks), sys.executable, "-m", "fastsample.train", "--data", args.data,
               "--task", "link", "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--hidden",
               str(args.hidden), "--epochs", str(args.epochs), "--lr", str(args.lr), "--negatives", str(args.negatives),
               "--scorer", args.scorer, "--seed", str(seed), "--threads", "1", "--quiet", "--log-json", str(log)]
        if model:
            cmd += ["--model", model]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        records = read_records(log)
    return max(records, key=lambda r: r["val_auc"])  # the first epoch that reached it


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a link-split partition")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--negatives", type=int, default=3)
    p.add_argument("--scorer", default="mlp")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{args.data}: {args.ranks} ranks, fanouts {args.fanouts}, batch {args.batch_size} edges/rank, hidden "
          f"{args.hidden}, {args.epochs} epochs, lr {args.lr}, {args.negatives} negatives, scorer {args.scorer}, "
          f"seeds {seeds}", flush=True)
    for name, model in (("built-in encoder", None), ("MLP encoder (own features)", f"{HERE / 'mlp_encoder.py'}:build")):
        best = [run(args, s, model) for s in seeds]
        auc = [b["test_auc"] for b in best]
        mrr = [b["test_mrr"] for b in best]
        print(f"  {name:<28} test auc {sum(auc) / len(auc):.3f} (seeds: {', '.join(f'{a:.3f}' for a in auc)})  "
              f"mrr {sum(mrr) / len(mrr):.3f}", flush=True)


if __name__ == "__main__":
    main()
