"""The trainer against its recorded reference (tests/trainer_reference.py): per-step losses
and accuracies, bitwise on the CPU and torch the reference was recorded with."""

import json

import numpy as np
import pytest
import torch

from trainer_reference import ARGS, FILE, KEYS, RUNS, cpu_model
from helpers import native_built, train_many


@pytest.fixture(scope="module")
def runs(train_parts, tmp_path_factory) -> dict:
    """Every RUNS run this build can run (trainer_reference.run's arguments), the runs of one
    rank count in one launch (helpers.train_many: the command's main() per run):
    {name: what its --log-json says, per epoch}."""
    out = tmp_path_factory.mktemp("reference-runs")
    runnable = {name: run for name, run in RUNS.items() if "native" not in run[1] or native_built()}
    got = {}
    for ranks in sorted({ranks for ranks, _ in runnable.values()}):
        records = train_many(train_parts / f"p{ranks}", ranks, {
            name: (out / f"{name}.jsonl", [*ARGS, *extra]) for name, (r, extra) in runnable.items() if r == ranks},
            timeout=300)
        got |= {name: {k: [r[k] for r in epochs] for k in KEYS} for name, epochs in records.items()}
    return got


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_trainer_matches_its_recorded_reference(runs, name):
    if "native" in RUNS[name][1] and not native_built():
        pytest.skip("the native module is not built")
    ref = json.loads(FILE.read_text())
    want = ref["runs"][name]
    got = runs[name]
    same_host = ref["cpu"] == cpu_model() and ref["torch"] == torch.__version__
    for key in ("step_losses", "loss", "train_acc", "val_acc", "test_acc"):
        if same_host:
            assert got[key] == want[key], f"{name}: {key} differs from the reference"
        else:  # other dense kernels round otherwise: losses close, a prediction may flip
            tol = dict(rtol=1e-4, atol=1e-5) if "loss" in key else dict(rtol=0, atol=0.01)
            assert np.allclose(np.array(got[key], dtype=float), np.array(want[key], dtype=float), **tol), \
                f"{name}: {key} differs from the reference"
