"""A rank that dies without a word (kill -9, the out-of-memory killer, a crash in native code)
still gets one line naming it, its phase and the cause.

Under a launcher, ``python -m fastsample.train`` (and ``infer``) forks first: the child is
the rank, the parent stays small and waits for it. Signals the parent receives (mpiexec
forwards SIGTERM and SIGINT to it; Slurm's go to both) are passed on. When the child is
killed by a signal, the parent reads the phase it was in from the board they share
(fastsample/phases.py), prints

    python -m fastsample.train: error: rank 1: killed by SIGKILL in gather round 1 (epoch 1, step 3) (...)

and exits 128 + the signal, so the launcher ends the job as it would have. The child dies
with the parent (PR_SET_PDEATHSIG), so a launcher killing the parent kills the rank.
"""

from __future__ import annotations

import mmap
import os
import signal
import time

from fastsample import phases
from fastsample.comm.mpi import abort, release, shared_memory
from fastsample.launcher import die_with, launch_rank, launched, say

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGQUIT)
_HINTS = {signal.SIGKILL: "kill -9, a launcher or scheduler ending it, or the kernel's out-of-memory killer: "
                          "see dmesg",
          signal.SIGSEGV: "a crash in native code", signal.SIGBUS: "a crash in native code, or a mapped file "
                                                                   "that shrank or a full disk under a memory map",
          signal.SIGABRT: "a native library aborted"}
_SI_KERNEL = 0x80  # a terminal's Ctrl-C: the rank got it from the terminal too


def supervised(main, prog: str) -> int:
    """Run ``main()`` in a supervised child under a launcher (alone: in this process);
    returns the exit status to leave with."""
    if not launched() or os.environ.get("FASTSAMPLE_SUPERVISED"):
        return main()
    shared = mmap.mmap(-1, 64)  # MAP_SHARED | MAP_ANONYMOUS: the child's stores are seen here
    phases.share(shared)
    wanted = {*FORWARDED, signal.SIGCHLD}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        die_with(parent)  # a launcher killing what it started kills the rank
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        os.environ["FASTSAMPLE_SUPERVISED"] = "1"
        return main()
    segments = set()
    while True:
        info = signal.sigtimedwait(wanted, 1.0)
        if info is not None and info.si_signo != signal.SIGCHLD:
            if not (info.si_signo == signal.SIGINT and info.si_code == _SI_KERNEL):
                os.kill(child, info.si_signo)
            continue
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == 0:
            segments |= shared_memory(child)
            if phases.board[phases.SEGMENTS] == 1:  # the rank's ask (segments_made): answered, read
                phases.board[phases.SEGMENTS] = 2
            continue
        if status:  # MPI did not finalise: its shared memory would stay in /dev/shm
            release(segments)
        before_mpi = status and not segments and phases.board[phases.SEGMENTS] == 0
        if os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        else:
            sig = os.WTERMSIG(status)
            code = 128 + sig
            if not phases.board[phases.ENDING]:  # else it had said why and was ending the job
                try:
                    name = signal.Signals(sig).name
                except ValueError:
                    name = f"signal {sig}"
                hint = _HINTS.get(sig)
                say(f"{prog}: error: rank {launch_rank()}: killed by {name} in {phases.where()}"
                    + (f" ({hint})" if hint else ""))
        if before_mpi:
            _abort_in_its_place(code)
        return code


def _abort_in_its_place(code: int) -> None:
    """The rank failed before MPI started (killed as it imported, an error one node alone
    has): MPICH's launcher, and srun, then wait for it forever, the other ranks held in
    MPI_Init. This process, which the launcher started, starts MPI in its place and aborts
    the job (where every rank failed alike, all do, and it ends at once as it did). MPI's own
    abort banner is not printed: the rank's line said what happened."""
    try:
        from mpi4py import MPI

        abort(MPI.COMM_WORLD, code)  # with what MPI_Init made here: nobody else would remove it
    except Exception:  # no MPI here (another launcher): the launcher ends the job as before
        pass


def segments_made(wait_s: float = 2.0) -> None:
    """Called by a rank once its communicator exists: has its supervisor read the shared
    memory the MPI library just made, before the rank goes on. The supervisor's own look,
    once a second, misses the segments of a rank killed sooner, and they stay in /dev/shm
    (a later job whose segment name hashes alike fails to start). Wakes the supervisor with
    SIGCHLD (its wait takes that as "look at the child") and waits for its answer on the
    board, at most ``wait_s``; nothing without a supervisor."""
    if not phases.shared:
        return
    phases.board[phases.SEGMENTS] = 1
    os.kill(os.getppid(), signal.SIGCHLD)
    deadline = time.monotonic() + wait_s
    while phases.board[phases.SEGMENTS] != 2 and time.monotonic() < deadline:
        time.sleep(0.001)
