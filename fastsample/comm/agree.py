"""The start-up agreement: every rank builds, then all learn whether any failed.

A rank that fails alone at start-up (a missing file, a bad setting) must not leave the
others waiting in the first collective, so start-up work runs under ``agree``: the ranks
learn whether any failed (Communicator.any_failed, on a channel of its own), and then
either every rank goes on or every rank raises the same StartupError, which names the
first failing rank, where it was (fastsample/phases.py), and carries its exception.

Start-up work may hold collectives (a link task's seed source counts its edges with the
other ranks). A rank that fails before one leaves the others inside it, where they cannot
join the agreement: the failing rank waits WAIT_S for them, then raises a StartupError
that is ``stranded`` (its command prints the line itself and ends the job). Work made of
collectives (layer-wise inference) passes a short ``wait_s``: a rank failing there leaves
the others inside one, and waits only for ranks failing alike, at the same point.
"""

from __future__ import annotations

import pickle
from typing import Callable, TypeVar

from fastsample import phases

__all__ = ["StartupError", "ErrorText", "agree"]

T = TypeVar("T")


WAIT_S = 10.0
ALIKE_S = 1.0  # the wait for ranks failing at the same point of collective work (see above)


class StartupError(RuntimeError):
    """Start-up failed on rank ``rank`` in phase ``where`` with ``error`` (raised on every
    rank alike; ``stranded``: on that rank alone, the others being held in a collective)."""

    def __init__(self, rank: int, error: BaseException, where: str = "start-up", stranded: bool = False):
        super().__init__(f"rank {rank}, in {where}: {error}")
        self.rank, self.error, self.where, self.stranded = rank, error, where, stranded

    def __reduce__(self):
        return StartupError, (self.rank, self.error, self.where, self.stranded)


class ErrorText(Exception):
    """An exception that could not cross ranks, as its type's name and its text."""


def _portable(error: Exception) -> Exception:
    """The exception as it can cross ranks: itself where it pickles, else its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 (any pickling failure: send the words instead)
        return ErrorText(f"{type(error).__name__}: {error}")


def agree(comm, build: Callable[[], T], wait_s: float = WAIT_S) -> T:
    """Run ``build()`` on every rank of ``comm`` and agree on the outcome. Collective.
    ``wait_s``: how long a failing rank waits for the others to join (see the module doc).

    Returns:
        build()'s result, where it succeeded on every rank; else raises StartupError (on
        every rank) for the lowest rank whose build failed.
    """
    error, result, where = None, None, None
    try:
        result = build()
    except Exception as e:  # agreed on below
        error, where = _portable(e), phases.where()
    failed = comm.any_failed(error is not None, wait_s if error is not None else None)
    if failed is None:
        raise StartupError(comm.rank, error, where, stranded=True) from error
    if not failed:
        return result
    errors = comm.allgather_object((error, where))
    for rank, (e, at) in enumerate(errors):
        if e is not None:
            raise StartupError(rank, e, at) from (error if rank == comm.rank else None)
    return result
