import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Set before anything loads OpenMP (torch, Numba's omp layer, fastsample._native), so that this
# process and every process a test starts (mpiexec passes it to the ranks) read it: idle OpenMP
# threads sleep instead of spinning. Spinning is libgomp's default; with two ranks on two cores,
# each rank's idle pool spins on the core the other rank needs, and every step's collectives
# wait for the scheduler (test_data_path.py's matrix: 69 s spinning, 12 s sleeping). Where the
# threads wait decides no result: every loss a test compares is the same bit for bit.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Tests that compare one and two threads bitwise (test_rgat) run torch's products too: on Intel
# CPUs MKL splits a weight gradient's sum by thread count (differences of ~1e-8 in a 16 x 16
# R-GAT weight's gradient on a Xeon with AVX-512). Its strict conditional numerical
# reproducibility keeps that sum's order fixed whatever the threads. Intel's only: on an AMD
# EPYC (Zen 5) MKL's default path keeps the order, and any MKL_CBWR value (AUTO,STRICT,
# COMPATIBLE, AVX2,STRICT) takes a path that splits it by thread count instead.
if "GenuineIntel" in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""):
    os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np
import pytest

from fastsample.data.edges import edges_to_csc
from fastsample.data.graph import write_dataset
# launching ranks lives in helpers.py; re-exported for the tests that import it from here
from helpers import REPO, mpiexec, run_module, train_records  # noqa: F401
# the raw Planetoid files (ind.cora.*): FASTSAMPLE_PLANETOID, else beside the clone in shared/
PLANETOID = Path(os.environ.get("FASTSAMPLE_PLANETOID", REPO.parent / "shared" / "data" / "planetoid"))

# The matmul engine choice is cached per host (fastsample/nn/matmul.py): a session of its own,
# so a user's cache never steers the tests and the runs a test compares share one choice.
_CACHE = tempfile.mkdtemp(prefix="fastsample-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)
# The runs a test compares must match bitwise, and the cores are busy: a plan measured
# unsteady (BLAS) is re-measured at the next start-up elsewhere, which could choose oneDNN for
# a later run of a compared pair. Here the session's first plan, steady or not, decides them all.
os.environ["FASTSAMPLE_MATMUL_KEEP_UNSTEADY"] = "1"


def ccl_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("fastsample._ccl") is not None


# the oneCCL backend is an optional build (scripts/install-ccl.sh; CI installs it)
CCL = pytest.param("ccl", marks=pytest.mark.skipif(not ccl_available(),
                                                   reason="fastsample built without oneCCL (scripts/install-ccl.sh)"))


@pytest.fixture(scope="session")
def train_parts(tmp_path_factory) -> Path:
    """The 3,000-node graph of the training tests, partitioned for 1, 2 and 3 ranks (p1..p3),
    built once by tests/trainer_reference.py, whose recorded reference was made on it."""
    from trainer_reference import build

    root = tmp_path_factory.mktemp("train-parts")
    build(root)
    return root


@pytest.fixture(scope="session")
def planetoid_dir() -> Path:
    if not (PLANETOID / "ind.cora.graph").is_file():
        pytest.skip(f"raw Cora files not found at {PLANETOID}")
    return PLANETOID


def make_small_dataset(path: Path, num_nodes=50, num_edges=200, feature_dim=4, classes=3, seed=0):
    """A small random dataset written through the public writer."""
    rng = np.random.default_rng(seed)
    graph = edges_to_csc(rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges),
                         num_nodes, symmetric=True)
    features = rng.standard_normal((num_nodes, feature_dim)).astype(np.float32)
    labels = rng.integers(0, classes, num_nodes)
    order = rng.permutation(num_nodes).astype(np.int32)
    write_dataset(path, graph, features, labels, np.sort(order[:10]), np.sort(order[10:15]),
                  np.sort(order[15:25]), name="small", num_classes=classes)
    return path


@pytest.fixture
def small_dataset(tmp_path) -> Path:
    return make_small_dataset(tmp_path / "small")
