"""The start-up agreement: every rank builds, then all learn whether any failed.

A rank that fails alone at start-up (a missing file, a bad setting) must not leave the
others waiting in the first collective, so start-up work runs under ``agree``: one
allgather of the outcome, and then either every rank goes on or every rank raises the
same StartupError, which names the first failing rank and carries its exception.
"""

from __future__ import annotations

import pickle
from typing import Callable, TypeVar

__all__ = ["StartupError", "ErrorText", "agree"]

T = TypeVar("T")


class StartupError(RuntimeError):
    """Start-up failed on rank ``rank`` with ``error`` (raised on every rank alike)."""

    def __init__(self, rank: int, error: BaseException):
        super().__init__(f"rank {rank}: {error}")
        self.rank, self.error = rank, error


class ErrorText(Exception):
    """An exception that could not cross ranks, as its type's name and its text."""


def _portable(error: Exception) -> Exception:
    """The exception as it can cross ranks: itself where it pickles, else its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 (any pickling failure: send the words instead)
        return ErrorText(f"{type(error).__name__}: {error}")


def agree(comm, build: Callable[[], T]) -> T:
    """Run ``build()`` on every rank of ``comm`` and agree on the outcome. Collective.

    Returns:
        build()'s result, where it succeeded on every rank; else raises StartupError (on
        every rank) for the lowest rank whose build failed.
    """
    error, result = None, None
    try:
        result = build()
    except Exception as e:  # agreed on below
        error = _portable(e)
    errors = comm.allgather_object(error)
    for rank, e in enumerate(errors):
        if e is not None:
            raise StartupError(rank, e) from (error if rank == comm.rank else None)
    return result
