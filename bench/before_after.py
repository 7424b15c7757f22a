"""Before and after in one run: the same training job on an earlier commit and on the working
tree, alternating, on the same host; per-phase medians of each and their ratio.

    python bench/before_after.py --rev HEAD --ranks 2 --rounds 2 -- \\
        --data data/medium-2 --fanouts 15,10,5 --batch-size 1000 --epochs 3 --eval-every 0 --threads 1

Everything after ``--`` goes to ``python -m fastsample.train`` on both sides, with
``--log-json`` added. ``--rev`` is checked out into a temporary git worktree and run from
there. Its native module is this tree's built one (copied in): fine for changes that add
kernels or change Python, not for a change to an existing kernel's behaviour, and the
worktree refuses to start if the copy does not import. ``--own-native`` builds the old
tree's own native module instead (``pip wheel`` of it, a few minutes): for a change to a
kernel, speed included. Epoch 0 (warm-up) is left out; the table shows the medians over the
remaining epochs of every round, and the speed-up before/after per phase; a last line says
whether every run's losses (every epoch's, warm-up included) are bitwise the same. The CPU and
the job's arguments are printed with the result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from timing import cpu_model
from fastsample.trainer.runlog import read_records

REPO = Path(__file__).resolve().parents[1]
PHASES = ("epoch_s", "sample_s", "gather_s", "compute_s", "allreduce_s", "optimizer_s", "embed_grads_s",
          "embed_update_s")
# run fastsample.train from the tree in FASTSAMPLE_TREE, not from the editable install
LAUNCHER = """import os, runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.path.insert(0, os.environ["FASTSAMPLE_TREE"])
for k in [k for k in sys.modules if k.split(".")[0] == "fastsample"]:
    del sys.modules[k]
sys.argv = ["fastsample.train"] + sys.argv[1:]
runpy.run_module("fastsample.train", run_name="__main__", alter_sys=True)
"""


def build_native(where: Path) -> None:
    """Build the tree at ``where`` as its package build would (pip wheel: its pyproject's build
    backend, isolated) and put the wheel's native module into its fastsample/."""
    out = where / "wheel"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(where)],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"before_after: building the before tree's native module failed:\n{done.stderr[-3000:]}")
    with zipfile.ZipFile(next(out.glob("*.whl"))) as wheel:
        names = [n for n in wheel.namelist() if n.startswith("fastsample/_native")]
        if not names:
            sys.exit("before_after: the before tree's wheel has no fastsample/_native module")
        for name in names:
            (where / name).write_bytes(wheel.read(name))


def worktree(rev: str, where: Path, own_native: bool = False) -> Path:
    """``rev`` checked out at ``where``, with this tree's native module copied in (or, with
    ``own_native``, its own built)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev], check=True,
                   capture_output=True, text=True)
    from fastsample.native import lib

    if own_native:
        build_native(where)
    elif lib is None:
        sys.exit("before_after: the native module is not built here (make setup)")
    else:
        shutil.copy2(lib.__file__, where / "fastsample" / Path(lib.__file__).name)
    probe = subprocess.run([sys.executable, "-c", LAUNCHER.split("sys.argv")[0] + "import fastsample.native as n; "
                            "assert n.lib is not None"], env={**os.environ, "FASTSAMPLE_TREE": str(where)},
                           capture_output=True, text=True)
    if probe.returncode:
        sys.exit(f"before_after: {rev}'s tree does not import with its native module:\n{probe.stderr[-2000:]}")
    return where


def run(side: str, tree: Path | None, ranks: int, args: list[str], log: Path, timeout: float) -> list[dict]:
    from fastsample.launcher import find_mpiexec

    log.unlink(missing_ok=True)
    entry = [sys.executable, "-m", "fastsample.train"] if tree is None else [sys.executable, "-c", LAUNCHER]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    if tree is not None:
        env["FASTSAMPLE_TREE"] = str(tree)
    argv = [find_mpiexec(), "-n", str(ranks), *entry, *args, "--log-json", str(log), "--quiet"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        sys.exit(f"before_after: the {side} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return read_records(log)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rev", default="HEAD", help="the commit run as 'before' (default HEAD: the working tree's "
                   "uncommitted changes are 'after')")
    p.add_argument("--ranks", type=int, default=2, help="ranks per run (mpiexec -n)")
    p.add_argument("--rounds", type=int, default=2, help="before/after pairs, alternating")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--json", help="write every epoch record of both sides here")
    p.add_argument("--own-native", action="store_true", help="build the before tree's own native module (for a "
                   "change to a kernel) instead of copying this tree's in")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then python -m fastsample.train's arguments")
    a = p.parse_args(argv)
    args = a.train_args[1:] if a.train_args[:1] == ["--"] else a.train_args
    if not args:
        p.error("give the training job's arguments after --")
    print(f"CPU: {cpu_model()}")
    print(f"job: mpiexec -n {a.ranks} python -m fastsample.train {' '.join(args)}; before = {a.rev}, after = "
          f"the working tree; {a.rounds} rounds, alternating; medians of epochs >= 1; before's native module: "
          + ("its own, built" if a.own_native else "this tree's, copied in"), flush=True)
    records = {"before": [], "after": []}
    losses = {"before": [], "after": []}  # per run, every epoch's step losses (else its loss), warm-up included
    with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
        tree = worktree(a.rev, Path(tmp) / "tree", a.own_native)
        try:
            for r in range(a.rounds):
                for side, where in (("before", tree), ("after", None)):
                    got = run(side, where, a.ranks, args, Path(tmp) / f"{side}.jsonl", a.timeout)
                    losses[side].append([e.get("step_losses") or e["loss"] for e in got])
                    kept = [e for e in got if e["epoch"] >= 1] or got
                    records[side] += kept
                    print(f"round {r + 1} {side:6s}: epochs " + ", ".join(f"{e['epoch_s']:.2f}" for e in kept) +
                          " s (gather " + ", ".join(f"{e['gather_s']:.2f}" for e in kept) + ")", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
    print(f"\n{'phase':16s} {'before':>9s} {'after':>9s} {'before/after':>13s}")
    for k in PHASES:
        vals = {s: [e[k] for e in records[s] if e.get(k) is not None] for s in records}
        if not any(vals["before"]) and not any(vals["after"]):  # absent, or a phase the job has not (embeddings)
            continue
        b, f = statistics.median(vals["before"]), statistics.median(vals["after"])
        print(f"{k:16s} {b:9.3f} {f:9.3f} {b / f if f else float('inf'):12.2f}x")
    # JSON floats round-trip exactly: equal here is bitwise equal
    same = all(x == losses["before"][0] for x in losses["before"] + losses["after"])
    print("losses (every run, every epoch): " + ("bitwise the same before and after" if same else
          f"DIFFER: before {_firsts(losses['before'])}, after {_firsts(losses['after'])}"))
    if a.json:
        Path(a.json).write_text(json.dumps(records, indent=1))


def _firsts(runs: list) -> str:
    """Each run's epoch losses, short (the first step's where steps were logged)."""
    return "; ".join(", ".join(f"{(e[0] if isinstance(e, list) else e):.6g}" for e in run) for run in runs)


if __name__ == "__main__":
    main()
