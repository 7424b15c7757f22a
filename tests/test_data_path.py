"""One data path: every task, untyped and typed data, both modes and every kernel through
the same loader and Trainer (matrix_worker.py)."""

import pytest

from conftest import run_module
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
from helpers import REPO, assert_checks, mpiexec
from matrix_worker import TASKS


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    write_synthetic(root / "untyped", SynthConfig(num_nodes=1500, avg_degree=8, num_classes=4, feature_dim=8),
                    progress=False)
    write_typed_synthetic(root / "typed", TYPED_PRESETS["hetero-tiny"], progress=False)
    splits = {"untyped": [], "typed": ["--relation", "author,rev_written_by,paper"]}
    for data, flags in splits.items():
        for cmd in (("fastsample.data", "link-split", root / data, root / f"{data}-link", "--negatives", "10",
                     *flags),
                    *(("fastsample.data", "targets", root / data, root / f"{data}-{task}", "--task", task,
                       *(["--relation", "paper:cites:paper"] if data == "typed" and task != "node-regression" else []))
                      for task in ("node-regression", "edge-class", "edge-regression")),
                    *(("fastsample.partition", root / (data if task == "node" else f"{data}-{task}"),
                       root / f"{data}-{task}-2", "--parts", "2") for task in TASKS)):
            proc = run_module(*cmd)
            assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.mpi
@pytest.mark.slow
def test_every_task_data_mode_and_kernel_trains_alike_with_cache_prefetch_bf16_and_int8(matrix):
    proc = mpiexec(2, REPO / "tests" / "matrix_worker.py", matrix, timeout=900)
    assert_checks(proc, 2, [f"{t}-{d}" for t in TASKS for d in ("untyped", "typed")])
