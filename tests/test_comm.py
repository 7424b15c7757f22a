"""Every collective, on the MPI, gloo and oneCCL backends, across 3 ranks."""

import sys

import pytest

from conftest import CCL
from helpers import REPO, assert_checks, mpiexec

COLLECTIVES = ["all_to_all_v", "reply_with_known_counts", "int64_ids", "wire_types", "large_uneven", "all_reduce",
               "broadcast_object", "allgather_object", "barrier"]  # what comm_worker.py checks, in order


@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["mpi", "gloo", CCL])
def test_collectives_on_three_ranks(backend):
    proc = mpiexec(3, REPO / "tests" / "comm_worker.py", backend)
    assert_checks(proc, 3, COLLECTIVES)


def test_single_copy_is_asked_of_mpich_only_where_the_host_allows_it_and_a_users_value_stays(monkeypatch, tmp_path):
    from fastsample.comm import mpi

    yama = tmp_path / "ptrace_scope"
    yama.write_text("1\n")  # Ubuntu's default: only a parent may read a process
    assert not mpi.cross_memory_attach(str(yama))
    yama.write_text("0\n")
    assert mpi.cross_memory_attach(str(yama)) == mpi.cross_memory_attach(str(tmp_path / "no-yama"))
    monkeypatch.setattr(mpi, "cross_memory_attach", lambda: True)
    monkeypatch.setenv(mpi.CMA_ENV, "0")
    mpi.enable_single_copy()
    assert mpi.os.environ[mpi.CMA_ENV] == "0"
    monkeypatch.delenv(mpi.CMA_ENV)
    mpi.enable_single_copy()
    assert mpi.os.environ[mpi.CMA_ENV] == "1"
    monkeypatch.setattr(mpi, "cross_memory_attach", lambda: False)
    monkeypatch.delenv(mpi.CMA_ENV)
    mpi.enable_single_copy()
    assert mpi.CMA_ENV not in mpi.os.environ


def test_missing_backend_packages_are_named(monkeypatch):
    import fastsample
    from fastsample.comm import CommError, create

    monkeypatch.setitem(sys.modules, "fastsample._ccl", None)  # as where it was never built
    monkeypatch.delattr(fastsample, "_ccl", raising=False)
    with pytest.raises(CommError, match="^backend 'ccl': fastsample was built without oneCCL; install it with "
                       "scripts/install-ccl.sh") as err:
        create("ccl")
    assert isinstance(err.value, RuntimeError) and "--" not in str(err.value), err.value  # a parameter, not a flag
    with pytest.raises(CommError, match="backend must be one of mpi, gloo, ccl, nccl or local") as err:
        create("tcp")
    assert isinstance(err.value, ValueError)


@pytest.mark.mpi
def test_network_model_charges_its_formula_on_every_rank():
    proc = mpiexec(2, REPO / "tests" / "netmodel_worker.py")
    assert_checks(proc, 2, ["modelled_time", "wall_time_charged", "all_reduce"])


def test_a_backend_that_cannot_start_is_one_comm_error(monkeypatch):
    import sys

    from fastsample.comm import CommError, create

    monkeypatch.setitem(sys.modules, "fastsample.comm.mpi", None)  # as when mpi4py finds no MPI library
    with pytest.raises(CommError, match=r"backend 'mpi' cannot start here \((ModuleNotFound|Import)Error"):
        create("mpi")


def test_an_aborting_rank_releases_only_the_mpi_librarys_segments(tmp_path):
    # comm/mpi.py's abort and the supervisor unlink the MPI segments a dying rank maps
    # (else they pile up in /dev/shm); a file of the user's there (a dataset on a ramdisk) stays
    import mmap
    import os
    from pathlib import Path

    from fastsample.comm.mpi import shared_memory

    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    mine, mpi = shm / f"user-data-{os.getpid()}.npy", shm / f"mpich_shm_test{os.getpid()}_0"
    maps = []
    try:
        for path in (mine, mpi):
            path.write_bytes(b"\0" * 4096)
            with open(path, "r+b") as f:
                maps.append(mmap.mmap(f.fileno(), 4096))
        assert shared_memory() == {str(mpi)}
    finally:
        for m in maps:
            m.close()
        mine.unlink(missing_ok=True)
        mpi.unlink(missing_ok=True)
