"""Distributed pieces across real ranks (mpiexec)."""

import pytest

from conftest import CCL, REPO, mpiexec
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.partition import partition_dataset


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    write_synthetic(root / "g", SynthConfig(num_nodes=4000, avg_degree=10, num_classes=4, feature_dim=6,
                                            seed=5), progress=False)
    partition_dataset(root / "g", root / "p3", 3, progress=False)
    return root


@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_feature_gather_returns_the_right_rows_in_two_rounds(partitioned, backend):
    proc = mpiexec(3, REPO / "tests" / "gather_worker.py", partitioned / "g", partitioned / "p3", backend)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": ok") == 3, proc.stdout


@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_vanilla_sampling_equals_hybrid_with_two_rounds_per_lower_layer(partitioned, backend):
    proc = mpiexec(3, REPO / "tests" / "vanilla_worker.py", partitioned / "p3", backend)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": ok") == 3, proc.stdout
