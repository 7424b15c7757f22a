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


GATHER = ["mixed_owners", "own_rows", "no_rows"]  # gather_worker.py's cases
KERNELS = ["numba", "twostep"] + (["native"] if native_built() else [])
OWNERS = ["numba"] + (["native"] if native_built() else [])
VANILLA = [f"{owner}-step{step}-{check}" for owner in OWNERS for step in range(3) for check in ["rounds", *KERNELS]]


@pytest.fixture(scope="module")
def launched(partitioned):
    """backend -> the 3-rank launch of tests/distributed_worker.py (the gather cases, then the
    vanilla sampling steps, on one communicator), made once per backend for both tests."""
    done = {}

    def launch(backend):
        if backend not in done:
            done[backend] = mpiexec(3, REPO / "tests" / "distributed_worker.py", partitioned / "g", partitioned / "p3",
                                    backend)
        return done[backend]
    return launch


@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_feature_gather_returns_the_right_rows_in_two_rounds(launched, backend):
    assert_checks(launched(backend), 3, GATHER, among=VANILLA)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_vanilla_sampling_equals_hybrid_with_two_rounds_per_lower_layer(launched, backend):
    assert_checks(launched(backend), 3, VANILLA, among=GATHER)
