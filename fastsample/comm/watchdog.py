"""The watchdog: a collective that does not complete in time ends the job, saying whom it waited for.

MPI has no collective timeout: a rank that stops answering (stopped, swapped out, hung in
a driver) leaves the others blocked in their next collective until the job's wall-clock
limit. ``watched(comm, limit)`` wraps the job's communicator so every collective notes when
it started, per thread (the trainer's, the prefetching loader's). A thread on each rank
looks every half second; when a collective has waited longer than the limit, that rank
sends its state (phase, step: fastsample/phases.py) to every other rank over a communicator
of its own, and any rank that gets one answers with its own. After GRACE_S the rank prints

    python -m fastsample.train: error: rank 0: stalled 30 s in gather round 1 (the ids) (epoch 1, step 3),
    waiting for rank 1 (no answer: stopped, or hung outside Python); ending the job (--stall-timeout 30)

and aborts the job (exit STALLED). Every live rank stalls in the same collective, so each
says so. A checkpoint is written whole or not at all, so the last complete one stays valid.

A stop signal (SIGTERM, SIGUSR1: preemption, or a launcher ending the job after another
rank died, as srun --kill-on-bad-exit does) is acted on at the end of a step, which a rank
held in a collective by a dead peer never reaches; its Python handler does not even run
until the collective returns. The thread sees the signal (signal.set_wakeup_fd) and, if the
main thread has been in a collective for SIGNAL_GRACE_S since, asks the others; when one
does not answer, it ends the job at once instead of waiting for the launcher's SIGKILL.

The limit: --stall-timeout, else 10x the slowest step seen so far, at least FLOOR_S (a
rank may legitimately spend minutes reading its partition before the first collective).
A normal step pays one clock read per collective.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import numpy as np

from fastsample import phases
from fastsample.comm.base import Communicator
from fastsample.comm.mpi import abort
from fastsample.launcher import say
from fastsample.progress import seconds

FLOOR_S = 300.0
GRACE_S = 2.0
SIGNAL_GRACE_S = 2.0
POLL_S = 0.5
STALLED = 4  # the job's exit status when the watchdog ended it
_STOPS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_TAG = 7305
_main_thread = threading.main_thread().ident


class Watchdog:
    def __init__(self, mpi_comm, limit: float | None, prog: str):
        self.side = mpi_comm.Dup()  # collective: its messages never match the job's
        self.rank, self.size = self.side.Get_rank(), self.side.Get_size()
        self.fixed, self.prog = limit, prog
        self.since = [0.0, 0.0]  # per slot (phases.MAIN, LOADER): when its collective began; 0: in none
        self._wake, write = os.pipe()
        os.set_blocking(self._wake, False)
        os.set_blocking(write, False)
        try:
            self._write, self._wakeup_before = write, signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: signals go unseen here
            self._write, self._wakeup_before = write, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fastsample-watchdog", daemon=True)
        self._thread.start()

    def limit(self) -> float:
        return self.fixed if self.fixed is not None else max(FLOOR_S, 10 * phases.slowest_step)

    def enter(self) -> int:
        slot = phases.MAIN if threading.get_ident() == _main_thread else phases.LOADER
        self.since[slot] = time.monotonic()
        return slot

    def close(self) -> None:
        """Stop watching (before MPI finalises); idempotent."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.side.Free()
            if self._wakeup_before is not None:
                signal.set_wakeup_fd(self._wakeup_before)
            os.close(self._wake)
            os.close(self._write)

    # ------------------------------------------------------------ the thread

    def _state(self) -> dict:
        now = time.monotonic()
        return {"rank": self.rank, "board": phases.board.copy(),
                "waiting": [now - t if t else None for t in self.since]}

    def _run(self) -> None:
        heard: dict[int, dict] = {}
        signalled, asked = None, False
        while not self._stop.wait(POLL_S):
            self._listen(heard, answer=True)
            now, limit = time.monotonic(), self.limit()
            for slot, t in enumerate(self.since):
                if t and now - t > limit:
                    self._stalled(slot, now - t, limit, heard)
                    return
            if signalled is None and self._signalled():
                signalled = now
            t = self.since[phases.MAIN]
            if signalled is not None and not asked and t and now - max(t, signalled) > SIGNAL_GRACE_S:
                asked = True  # once: the peers that answer now will reach the step's end
                silent = [r for r in self._ask(heard) if r not in heard]
                if silent:
                    say(f"{self.prog}: rank {self.rank}: stopping at once: the step cannot end, rank"
                        f"{'s' if len(silent) > 1 else ''} {', '.join(map(str, silent))} do"
                        f"{'' if len(silent) > 1 else 'es'} not answer (ended or stopped)")
                    abort(self.side, STALLED)

    def _signalled(self) -> bool:
        """Whether a stop signal arrived since the last look (the wakeup pipe's bytes)."""
        try:
            return any(b in _STOPS for b in os.read(self._wake, 512))
        except BlockingIOError:
            return False

    def _ask(self, heard: dict) -> list[int]:
        """Send this rank's state to every rank not heard from, and listen GRACE_S (less once
        every rank answered); returns the other ranks."""
        mine = self._state()
        for r in range(self.size):
            if r != self.rank and r not in heard:
                self.side.isend(mine, dest=r, tag=_TAG)
        deadline = time.monotonic() + GRACE_S
        while len(heard) < self.size - 1 and time.monotonic() < deadline:
            self._listen(heard, answer=False)
            time.sleep(0.05)
        return [r for r in range(self.size) if r != self.rank]

    def _listen(self, heard: dict, answer: bool) -> None:
        """Take the states peers sent; answer each sender once."""
        from mpi4py import MPI

        while self.side.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG):
            state = self.side.recv(source=MPI.ANY_SOURCE, tag=_TAG)
            first = state["rank"] not in heard
            heard[state["rank"]] = state
            if answer and first:
                self.side.isend(self._state(), dest=state["rank"], tag=_TAG)

    def _stalled(self, slot: int, waited: float, limit: float, heard: dict) -> None:
        mine = self._state()
        blamed = []
        for r in self._ask(heard):
            state = heard.get(r)
            if state is None:
                blamed.append(f"rank {r} (no answer: stopped, or hung outside Python)")
            elif state["waiting"][slot] is None:
                blamed.append(f"rank {r} (busy in {phases.where(state['board'])}, in no collective)")
        if not blamed:
            blamed = ["every other rank, each in a collective too (ranks in different collectives: "
                      + "; ".join(f"rank {r} in {phases.where(s['board'])}" for r, s in sorted(heard.items())) + ")"]
        setting = f"--stall-timeout {limit:g}" if self.fixed is not None else \
            f"--stall-timeout default: 10x the slowest step, at least {FLOOR_S:g} s"
        say(f"{self.prog}: error: rank {self.rank}: stalled {seconds(waited)} in {phases.where(mine['board'])}, "
            f"waiting for {', '.join(blamed)}; ending the job ({setting})")
        abort(self.side, STALLED)


class Watched(Communicator):
    """``inner``'s collectives, each noted with the watchdog while it runs."""

    def __init__(self, inner: Communicator, dog: Watchdog):
        self.inner, self.dog = inner, dog
        self.rank, self.size, self.name = inner.rank, inner.size, inner.name
        self.counters = inner.counters  # one count, whichever layer adds to it (a modelled network charges its own)

    def _dup(self):
        return Watched(self.inner.dup(), self.dog)

    def _watch(self, collective, *args):
        """``collective(*args)``, noted with the watchdog while it runs."""
        slot = self.dog.enter()
        try:
            return collective(*args)
        finally:
            self.dog.since[slot] = 0.0

    def _exchange_counts(self, send_counts):
        return self._watch(self.inner._exchange_counts, send_counts)

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        self._watch(self.inner._all_to_all_v, send, send_elems, recv, recv_elems)

    def all_reduce(self, array: np.ndarray, op: str = "sum") -> None:
        self._watch(self.inner.all_reduce, array, op)

    def broadcast_object(self, obj, root: int = 0):
        return self._watch(self.inner.broadcast_object, obj, root)

    def allgather_object(self, obj) -> list:
        return self._watch(self.inner.allgather_object, obj)

    def barrier(self) -> None:
        self._watch(self.inner.barrier)

    def any_failed(self, failed: bool, wait_s: float | None = None):
        return self._watch(self.inner.any_failed, failed, wait_s)

    def abort(self, code: int = 1) -> None:
        self.inner.abort(code)


def stall_option():
    """The --stall-timeout field of the commands that run a job."""
    from fastsample.options import option

    return option(None, "seconds a collective may wait before the job ends, naming the ranks it waited for (the "
                  f"watchdog; default: 10x the slowest step so far, at least {FLOOR_S:g}; 0: none); ends with exit "
                  f"status {STALLED}", shared=False, metavar="SECONDS", check=(lambda v: v >= 0, "must be >= 0"))


def _mpi_of(comm):
    """The mpi4py communicator under ``comm`` (every backend but local keeps one), or None."""
    while comm is not None and not hasattr(comm, "comm"):
        comm = getattr(comm, "inner", None)
    return getattr(comm, "comm", None)


@contextlib.contextmanager
def watched(comm: Communicator, limit: float | None, prog: str):
    """``comm`` watched while the block runs, for a job of several ranks (``comm`` itself
    alone, or with ``limit`` 0: no watchdog). Collective."""
    mpi = _mpi_of(comm)
    if comm.size == 1 or mpi is None or limit == 0:
        yield comm
        return
    dog = Watchdog(mpi, limit, prog)
    try:
        yield Watched(comm, dog)
    finally:
        dog.close()
