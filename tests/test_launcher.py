"""What the launcher tells a process before MPI starts, and what start-up does with it: idle
OpenMP threads sleep where a node's ranks x threads exceed its cores (they spin otherwise,
on the core another rank needs)."""

import os
import re

import pytest

from fastsample import launcher
from helpers import mpiexec

LAUNCHER_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_SIZE",
                      "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_ID", "SLURM_STEP_TASKS_PER_NODE",
                      "OMP_WAIT_POLICY", "OMP_NUM_THREADS")


@pytest.fixture
def node(monkeypatch):
    """A node with `cores` cores, this process bound to `bound` of them (all by default)."""
    for var in LAUNCHER_VARIABLES:
        monkeypatch.delenv(var, raising=False)

    def make(cores, bound=None):
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(bound or cores)))
    return make


@pytest.mark.parametrize("env, expected", [
    ({}, 1),
    ({"MPI_LOCALNRANKS": "3"}, 3),                      # MPICH / Intel MPI (Hydra)
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, 4),           # Open MPI
    ({"SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x3),5"}, 5),  # srun: the largest count
    ({"SLURM_STEP_TASKS_PER_NODE": "8"}, 1),            # a batch script, not a step
])
def test_local_ranks_as_the_launcher_said(node, monkeypatch, env, expected):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert launcher.local_ranks() == expected


@pytest.mark.parametrize("cores, bound, ranks, threads, passive", [
    (2, None, 2, 2, True),     # the tests' case: two ranks' pools on two cores
    (2, None, 1, 4, True),     # one rank, more threads than cores
    (2, None, 2, 1, False),    # one thread a rank: no pool to idle
    (8, None, 4, 2, False),    # fits
    (64, 4, 16, 4, False),     # each rank bound to its own 4 cores: only its own threads count
    (64, 4, 16, 8, True),      # ... and 8 threads on them is oversubscribed
])
def test_idle_threads_sleep_only_where_oversubscribed(node, monkeypatch, cores, bound, ranks, threads, passive):
    node(cores, bound)
    monkeypatch.setenv("MPI_LOCALNRANKS", str(ranks))
    note = launcher.sleep_idle_threads_if_oversubscribed(threads)
    assert (os.environ.get("OMP_WAIT_POLICY") == "PASSIVE") is passive
    assert (note is not None) is passive


def test_threads_default_to_omp_num_threads_then_the_nodes_cores_shared_among_its_ranks(node, monkeypatch):
    # the samplers' pool took every core where torch's (Intel OpenMP under MPI) took a share:
    # 2 ranks x 2 threads on 2 cores, and a note about it, by default
    node(8)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert launcher.default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert launcher.default_threads() == 4
    monkeypatch.setenv("MPI_LOCALNRANKS", "16")
    assert launcher.default_threads() == 1
    node(2)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    assert launcher.default_threads() == 1 and launcher.sleep_idle_threads_if_oversubscribed(None) is None
    node(64, 4)  # bound to 4 cores of 64: they are this rank's
    assert launcher.default_threads() == 4


def test_a_users_wait_policy_is_kept(node, monkeypatch):
    node(2)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert launcher.sleep_idle_threads_if_oversubscribed(4) is None
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


def test_under_mpiexec_every_rank_sleeps_and_rank_0_says_so():
    """Real launcher variables (Hydra's), the start-up call the commands make before torch loads."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    code = ("import os; from fastsample import cli; cli.settle_threads('prog', len(os.sched_getaffinity(0))); "
            "os.write(1, f\"<{os.environ.get('OMP_WAIT_POLICY')}>\".encode())")
    proc = mpiexec(2, "-c", code, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    # every core a rank, so two ranks exceed them on any node
    # mpiexec forwards the ranks' output in whatever pieces it reads, so each value is bracketed
    assert re.findall(r"<([^<>]*)>", proc.stdout) == ["PASSIVE", "PASSIVE"], proc.stdout
    assert proc.stderr.count("idle OpenMP threads sleep rather than spin") == 1, proc.stderr
