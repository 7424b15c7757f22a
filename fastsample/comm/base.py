"""The Communicator interface: the few collectives fastsample needs, nothing else.

All exchanges are collective: every rank calls the same operations in the same order.
There is no point-to-point traffic and no RPC. Buffers are numpy arrays (torch CPU
tensors convert without copies); an all-to-all takes one contiguous buffer whose rows are
grouped by destination rank plus the row count per destination, so callers bucket once
and nothing is concatenated on the way.
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod

import numpy as np


class CommError(RuntimeError, ValueError):
    """Bad input to the communication layer: an unknown or unavailable backend (RuntimeError,
    as a backend that cannot start always was) or a bad argument (ValueError); the message
    names the parameter."""


class Counters:
    """Traffic since the last reset: data rounds (all-to-all exchanges), bytes sent, and the
    time a modelled network charged for them (comm/netmodel.py; 0 without one). A
    communicator and its duplicates (dup()) share one Counters, which two threads may
    update at once (the prefetching loader's and the trainer's), hence the lock."""

    def __init__(self, rounds: int = 0, bytes_sent: int = 0, modelled_s: float = 0.0):
        self.rounds, self.bytes_sent, self.modelled_s = rounds, bytes_sent, modelled_s
        self._lock = threading.Lock()

    def add(self, sent: int) -> None:
        with self._lock:
            self.rounds += 1
            self.bytes_sent += sent

    def charge(self, seconds: float) -> None:
        with self._lock:
            self.modelled_s += seconds

    @contextlib.contextmanager
    def excluded(self):
        """What runs inside is not counted (an evaluation inside a training epoch)."""
        kept = self.reset()
        try:
            yield
        finally:
            with self._lock:
                self.rounds, self.bytes_sent, self.modelled_s = kept.rounds, kept.bytes_sent, kept.modelled_s

    def reset(self) -> "Counters":
        with self._lock:
            snapshot = Counters(self.rounds, self.bytes_sent, self.modelled_s)
            self.rounds = self.bytes_sent = 0
            self.modelled_s = 0.0
        return snapshot


def as_bytes(send: np.ndarray, send_elems: np.ndarray, recv: np.ndarray, recv_elems: np.ndarray) -> tuple:
    """_all_to_all_v's arguments with the rows as bytes and the counts in bytes: for a backend
    whose types lack some the rows come in (gloo has no 16-bit integers, which bf16 rows travel
    as; oneCCL no 8- or 16-bit integers, which int8 rows and a mixed gather's bytes are)."""
    k = send.dtype.itemsize
    return send.reshape(-1).view(np.uint8), send_elems * k, recv.reshape(-1).view(np.uint8), recv_elems * k


class Communicator(ABC):
    """The collectives of one rank of a job (fastsample.comm.create makes one).

    Attributes:
        rank, size: this rank and the rank count; name: the backend;
        counters: the traffic since the last reset (Counters).
    """

    rank: int
    size: int
    name: str

    def __init__(self) -> None:
        self.counters = Counters()

    def all_to_all_v(self, send: np.ndarray, send_counts: np.ndarray,
                     recv_counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Send rows send[offsets[r]:offsets[r+1]] to rank r; returns (received rows grouped
        by source rank, rows received from each rank). ``recv_counts``, when the caller
        knows them (a reply to a request), saves the count exchange. One data round."""
        send = np.ascontiguousarray(send)
        send_counts = np.asarray(send_counts, dtype=np.int64)
        if recv_counts is None:
            recv_counts = self._exchange_counts(send_counts)
        recv_counts = np.asarray(recv_counts, dtype=np.int64)
        recv = np.empty((int(recv_counts.sum()),) + send.shape[1:], dtype=send.dtype)
        row = int(np.prod(send.shape[1:], dtype=np.int64)) if send.ndim > 1 else 1
        self._all_to_all_v(send, send_counts * row, recv, recv_counts * row)
        self.counters.add(send.nbytes)
        return recv, recv_counts

    def dup(self) -> "Communicator":
        """A communicator over the same ranks whose collectives never match this one's, so
        two threads can each run their own sequence of collectives at once (the
        prefetching loader's gather beside the trainer's all-reduce). Collective. It
        shares this one's counters."""
        other = self._dup()
        other.counters = self.counters
        return other

    @abstractmethod
    def _dup(self) -> "Communicator": ...

    @abstractmethod
    def _exchange_counts(self, send_counts: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _all_to_all_v(self, send: np.ndarray, send_elems: np.ndarray, recv: np.ndarray,
                      recv_elems: np.ndarray) -> None: ...

    @abstractmethod
    def all_reduce(self, array: np.ndarray, op: str = "sum") -> None:
        """Reduce ``array`` over ranks in place: op "sum" or "max"."""

    @abstractmethod
    def broadcast_object(self, obj, root: int = 0): ...

    @abstractmethod
    def allgather_object(self, obj) -> list: ...

    @abstractmethod
    def barrier(self) -> None: ...

    def any_failed(self, failed: bool, wait_s: float | None = None) -> bool | None:
        """Whether ``failed`` holds on any rank. Collective, on a channel of its own, so it
        never matches a collective a peer is still inside. With ``wait_s`` (a rank that
        failed), None where not every rank joined within that time: some are held in a
        collective this rank will never join, and only ending the job frees them."""
        return failed

    @abstractmethod
    def abort(self, code: int = 1) -> None:
        """End every rank of the job now (used when one rank fails)."""
