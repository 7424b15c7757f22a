"""Distributed pieces across real ranks (mpiexec)."""

import pytest

from conftest import CCL
from fastsample.data.synth import SynthConfig, write_synthetic
from fastsample.partition import partition_dataset
from helpers import REPO, assert_checks, mpiexec, native_built

pytestmark = pytest.mark.mpi


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
    assert_checks(proc, 3, ["mixed_owners", "own_rows", "no_rows"])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_vanilla_sampling_equals_hybrid_with_two_rounds_per_lower_layer(partitioned, backend):
    proc = mpiexec(3, REPO / "tests" / "vanilla_worker.py", partitioned / "p3", backend)
    kernels = ["numba", "twostep"] + (["native"] if native_built() else [])
    owners = ["numba"] + (["native"] if native_built() else [])
    assert_checks(proc, 3, [f"{owner}-step{step}-{check}" for owner in owners for step in range(3)
                            for check in ["rounds", *kernels]])
