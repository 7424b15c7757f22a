"""Communicator over mpi4py: collectives straight on numpy buffers."""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from fastsample import phases
from fastsample.comm.base import Communicator


ABORT_GRACE_S = 1.0
CMA_ENV = "MPIR_CVAR_CH4_CMA_ENABLE"  # MPICH's single-copy transfers between ranks of a host
YAMA = "/proc/sys/kernel/yama/ptrace_scope"


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def cross_memory_attach(yama: str = YAMA) -> bool:
    """Whether ranks of this host may read each other's memory with process_vm_readv (Linux's
    cross-memory attach): no Yama restriction (ptrace_scope absent or 0; at 1, Ubuntu's
    default, only a parent may), and the call itself allowed (container seccomp profiles
    refuse it without CAP_SYS_PTRACE; a kernel may lack it): tried on this process."""
    try:
        with open(yama) as f:
            if f.read().strip() != "0":
                return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        src, dst = ctypes.create_string_buffer(b"fastsamp", 8), ctypes.create_string_buffer(8)
        local, remote = _IoVec(ctypes.addressof(dst), 8), _IoVec(ctypes.addressof(src), 8)
        read = libc.process_vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    except (OSError, AttributeError):
        return False
    return read == 8 and dst.raw == src.raw


def enable_single_copy() -> None:
    """Before MPI starts: MPICH's single-copy protocol for large messages between ranks of
    one host (CMA: the receiver reads the sender's buffer; off by default in MPICH, whose
    default copies through shared memory twice), where cross_memory_attach says it works.
    A 17 MB all-to-all between 2 ranks here: 4.0 -> 1.4 ms. A value the user set stays;
    other MPI libraries ignore the variable (Open MPI's shared memory uses CMA where it can)."""
    if CMA_ENV not in os.environ and cross_memory_attach():
        os.environ[CMA_ENV] = "1"


# The MPI libraries' own segments in /dev/shm (MPICH, Open MPI's vader and sm, PSM2, UCX);
# nothing else there is ours to remove (a dataset may live on /dev/shm).
_MPI_SEGMENTS = ("mpich_shm_", "vader_segment.", "sm_segment.", "psm2_shm.", "ucx_shm_posix_")


def shared_memory(pid="self") -> set[str]:
    """The MPI library's shared-memory segments process ``pid`` maps. A rank that dies or
    aborts leaves them in /dev/shm, and a later job whose segment name hashes alike (Slurm's
    job ids restart with a fresh controller) fails to start."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    except OSError:
        return set()
    return {p for p in paths if os.path.dirname(p) == "/dev/shm" and os.path.basename(p).startswith(_MPI_SEGMENTS)}


def release(paths) -> None:
    """Unlink shared-memory files (their mappings stay valid while they last)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def abort(mpi_comm, code: int) -> None:
    """End every rank of the job now, after this rank has said why (every caller does, in one
    line): without MPI's own banner ("Abort(N) on node 0 ... application called MPI_Abort"),
    which would only repeat the exit status in MPI's words."""
    phases.ending()
    release(shared_memory())
    # MPI_Abort has the launcher kill every rank, and under load that kill can beat its
    # forwarding of what this rank just wrote to stderr (the job then ends with no
    # reason given: seen with mpiexec on a busy 2-core machine). Give it a moment.
    time.sleep(ABORT_GRACE_S)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    mpi_comm.Abort(code)


def _displacements(counts: np.ndarray) -> np.ndarray:
    d = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=d[1:])
    return d


class MPICommunicator(Communicator):
    name = "mpi"

    def __init__(self, comm=None):
        super().__init__()
        enable_single_copy()
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self._agreement = self.comm.Dup() if comm is None else None  # any_failed's channel (the world's only)

    def _dup(self):
        return MPICommunicator(self.comm.Dup())

    def _exchange_counts(self, send_counts):
        recv = np.empty(self.size, dtype=np.int64)
        self.comm.Alltoall(send_counts, recv)
        return recv

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        self.comm.Alltoallv([send.reshape(-1), (send_elems, _displacements(send_elems))],
                            [recv.reshape(-1), (recv_elems, _displacements(recv_elems))])

    def all_reduce(self, array, op="sum"):
        self.comm.Allreduce(self.MPI.IN_PLACE, array, op={"sum": self.MPI.SUM, "max": self.MPI.MAX}[op])

    def broadcast_object(self, obj, root=0):
        return self.comm.bcast(obj, root=root)

    def allgather_object(self, obj):
        return self.comm.allgather(obj)

    def barrier(self):
        self.comm.Barrier()

    def any_failed(self, failed, wait_s=None):
        if self._agreement is None:
            raise RuntimeError("any_failed runs on the job's communicator, not on a dup()")
        flag = np.array([int(bool(failed))], dtype=np.int64)
        request = self._agreement.Iallreduce(self.MPI.IN_PLACE, flag, op=self.MPI.SUM)
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while not request.Test():
            if deadline is not None and time.monotonic() > deadline:
                return None  # the request stays posted: the job is about to be ended
            time.sleep(0.01)
        return bool(flag[0])

    def abort(self, code=1):
        abort(self.comm, code)
