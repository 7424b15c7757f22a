"""The trainer's per-step losses and accuracies, recorded from a trainer known to be right,
so that every later change to the training path is checked against them
(tests/test_trainer_reference.py).

    python tests/trainer_reference.py --record     # rewrite tests/data/trainer_reference.json

Record only from a trainer known to be right: the file is the contract. Dense kernels
round differently on another CPU, so the file names the CPU it was recorded on (cpu_model:
name, family, model, stepping and vector units); on that CPU with the same torch the test
compares bitwise, elsewhere losses within rtol 1e-4 / atol 1e-5 and accuracies within 0.01
(a prediction may flip).
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from fastsample.trainer.runlog import read_records

HERE = Path(__file__).resolve().parent
FILE = HERE / "data" / "trainer_reference.json"
# --matmul blas: the products' engine the reference was recorded with (auto may pick oneDNN
# on some CPU, which rounds otherwise; tests/test_matmul.py holds the engines to 1e-5)
ARGS = ["--fanouts", "4,3", "--batch-size", "40", "--hidden", "16", "--epochs", "2", "--quiet", "--threads", "1",
        "--eval-every", "1", "--matmul", "blas"]
RUNS = {  # name: (ranks, extra arguments)
    "p1-hybrid-native": (1, ["--mode", "hybrid", "--sampler", "native"]),
    "p2-hybrid-native": (2, ["--mode", "hybrid", "--sampler", "native"]),
    "p2-vanilla": (2, ["--mode", "vanilla"]),
    "p3-hybrid-numba": (3, ["--mode", "hybrid", "--sampler", "numba", "--dropout", "0.3"]),
}


def cpu_model() -> str:
    """The CPU, precisely enough that two hosts with one name but other vector units (the
    dense kernels round by them) do not pass for the same: name, family, model, stepping,
    and the widest vector extensions present."""
    fields, flags = {}, set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "cpu family", "model", "stepping") and key not in fields:
            fields[key] = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    if not fields:
        return platform.processor()
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')} "
            f"stepping {fields.get('stepping', '?')}; {' '.join(vector) or 'no avx2'})")


def build(root: Path) -> None:
    from fastsample.data.synth import SynthConfig, write_synthetic
    from fastsample.partition import partition_dataset

    write_synthetic(root / "g", SynthConfig(num_nodes=3000, avg_degree=8, num_classes=4, feature_dim=8,
                                            train_frac=0.1, seed=9), progress=False)
    for p in sorted({r for r, _ in RUNS.values()}):
        partition_dataset(root / "g", root / f"p{p}", p, progress=False)


KEYS = ("step_losses", "loss", "train_acc", "val_acc", "test_acc")  # what a run records, per epoch


def run(root: Path, name: str, mpiexec) -> dict:
    """One recorded run: what its --log-json says, per epoch."""
    ranks, extra = RUNS[name]
    log = root / f"{name}.jsonl"
    log.unlink(missing_ok=True)
    args = ["-m", "fastsample.train", "--data", root / f"p{ranks}", "--log-json", log, *ARGS, *extra]
    proc = mpiexec(ranks, *args)
    if proc.returncode != 0:
        raise AssertionError(f"{name}: exited {proc.returncode}\n{proc.stdout}{proc.stderr}")
    records = read_records(log)
    return {k: [r[k] for r in records] for k in KEYS}


if __name__ == "__main__":
    import tempfile

    from helpers import mpiexec

    if sys.argv[1:] != ["--record"]:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as d:
        build(Path(d))
        runs = {name: run(Path(d), name, lambda n, *args: mpiexec(n, *args, timeout=300)) for name in RUNS}
    import torch

    FILE.write_text(json.dumps({"cpu": cpu_model(), "torch": torch.__version__, "args": ARGS,
                                "runs": {k: {"extra": RUNS[k][1], **v} for k, v in runs.items()}}, indent=1) + "\n")
    print(f"wrote {FILE}")
