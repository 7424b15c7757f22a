"""The tasks beyond node classification against a feature-only MLP, through the trainer.

For each task and graph: the labels python -m fastsample.data targets derives (a node
regression target that is a smooth function of the neighbourhood's features; edge classes
and values that depend on both endpoints' classes), then the built-in model (GraphSAGE, or
the R-GCN on typed data) and bench/mlp_encoder.py's MLP with the same settings and seeds;
reported: the best validation score (R² or accuracy) and the test score there, per seed.

    python bench/task_accuracy.py --work /tmp/tasks --seeds 0,1 --epochs 12
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MLP = f"{HERE / 'mlp_encoder.py'}:build"
TASKS = ("node-regression", "edge-class", "edge-regression")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", help="where the graphs go (default: a temporary folder)")
    p.add_argument("--seeds", default="0", help="comma-separated training seeds")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--tasks", default=",".join(TASKS))
    args = p.parse_args(argv)
    from fastsample.comm.local import LocalCommunicator
    from fastsample.trainer import TrainConfig, Trainer
    from fastsample.trainer.report import Reporter

    work = Path(args.work or tempfile.mkdtemp(prefix="fastsample-tasks-"))
    graphs = {"untyped (synth tiny, 2,000 nodes)": ("synth", "--preset", "tiny"),
              "typed (hetero-tiny, 5,250 nodes)": ("synth", "--preset", "hetero-tiny")}
    settings = dict(fanouts=(10, 10), hidden=32, threads=1, quiet=True, matmul="blas", epochs=args.epochs)
    print(f"settings: fanouts 10,10, hidden 32, epochs {args.epochs}, 1 process, batch 64 (node) / 256 (edge), "
          f"seeds {args.seeds}")
    print("| task | graph | model | seed | best val | test there |\n|---|---|---|---|---|---|")
    for i, (g, cmd) in enumerate(graphs.items()):
        base = work / f"g{i}"
        if not base.exists():
            subprocess.run([sys.executable, "-m", "fastsample.data", *cmd, str(base), "--quiet"], check=True,
                           capture_output=True)
        for task in args.tasks.split(","):
            data = work / f"g{i}-{task}"
            relation = ["--relation", "paper:cites:paper"] if "hetero" in g and task != "node-regression" else []
            if not data.exists():
                subprocess.run([sys.executable, "-m", "fastsample.data", "targets", str(base), str(data), "--task",
                                task, *relation, "--quiet"], check=True, capture_output=True)
            for model, spec in (("gnn", "sage"), ("mlp", MLP)):
                for seed in map(int, args.seeds.split(",")):
                    config = TrainConfig(data=str(data), task=task, model=spec, seed=seed,
                                         batch_size=64 if task.startswith("node") else 256,
                                         **({"eval": "full"} if task.startswith("node") else {}), **settings)
                    history = Trainer(config, LocalCommunicator(), reporter=Reporter()).run()
                    best = max(history, key=lambda r: r.score)
                    test = best.metrics.get("test_r2", best.metrics.get("test_acc"))
                    print(f"| {task} | {g} | {model} | {seed} | {best.score:.4f} | {test:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
