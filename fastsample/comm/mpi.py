"""Communicator over mpi4py: collectives straight on numpy buffers."""

from __future__ import annotations

import os
import time

import numpy as np

from fastsample import phases
from fastsample.comm.base import Communicator


ABORT_GRACE_S = 1.0


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
    """End every rank of the job now, after this rank has said why."""
    phases.ending()
    release(shared_memory())
    # MPI_Abort has the launcher kill every rank, and under load that kill can beat its
    # forwarding of what this rank just wrote to stderr (the job then ends with no
    # reason given: seen with mpiexec on a busy 2-core machine). Give it a moment.
    time.sleep(ABORT_GRACE_S)
    mpi_comm.Abort(code)


def _displacements(counts: np.ndarray) -> np.ndarray:
    d = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=d[1:])
    return d


class MPICommunicator(Communicator):
    name = "mpi"

    def __init__(self, comm=None):
        super().__init__()
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
