"""Injected faults, for the tests of what a job does when one rank fails. NOT FOR PRODUCTION:
nothing here runs unless the environment asks for it.

    FASTSAMPLE_FAULT=PHASE:RANK:KIND[:N]   the fault, on launch rank RANK, the N-th time
                                           (from 0; default 0) it enters PHASE
    FASTSAMPLE_FAULT_MARK=FILE             where to note the fault's time (time.time())

PHASE is a key of fastsample.phases.NAMES; KIND one of
    raise     a Python exception (InjectedFault) in that phase
    kill      SIGKILL to the rank itself (as kill -9, or the out-of-memory killer)
    stall     SIGSTOP to the rank itself (a rank that stops answering: the watchdog's case)
    diskfull  the phase's next file write fails with ENOSPC, partway (writers call written())
    term      SIGTERM to the rank itself (a preemption arriving then)
"""

from __future__ import annotations

import errno
import os
import signal
import time

KINDS = ("raise", "kill", "stall", "diskfull", "term")


class InjectedFault(RuntimeError):
    """The exception of KIND raise."""


def _plan():
    spec = os.environ.get("FASTSAMPLE_FAULT")
    if not spec:
        return None
    from fastsample.launcher import launch_rank

    parts = spec.split(":")
    if len(parts) not in (3, 4) or not parts[1].isdigit() or parts[2] not in KINDS or \
            (len(parts) == 4 and not parts[3].isdigit()):
        raise SystemExit(f"FASTSAMPLE_FAULT={spec}: expected PHASE:RANK:KIND[:N] (PHASE a key of "
                         f"fastsample.phases.NAMES; KIND one of {', '.join(KINDS)})")
    if int(parts[1]) != launch_rank():
        return None
    return parts[0], parts[2], int(parts[3]) if len(parts) == 4 else 0


_PLAN = _plan()
armed = _PLAN is not None  # phases.phase() calls reached() only then
phase = _PLAN[0] if _PLAN else None
_seen: dict[str, int] = {}
_disk_full = False


def _mark() -> None:
    mark = os.environ.get("FASTSAMPLE_FAULT_MARK")
    if mark:
        with open(mark, "w") as f:
            f.write(repr(time.time()))


def reached(key: str) -> None:
    """Called on entering phase ``key`` (fastsample/phases.py, which checks the plan's phase
    against its names): the armed fault, if this is its time."""
    global armed, _disk_full
    where, kind, nth = _PLAN
    if key != where:
        return
    _seen[key] = _seen.get(key, 0) + 1
    if _seen[key] - 1 != nth:
        return
    armed = False
    _mark()
    if kind == "raise":
        raise InjectedFault(f"injected fault (FASTSAMPLE_FAULT={os.environ['FASTSAMPLE_FAULT']})")
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "stall":
        os.kill(os.getpid(), signal.SIGSTOP)
    if kind == "term":
        os.kill(os.getpid(), signal.SIGTERM)
    if kind == "diskfull":
        _disk_full = True


def written(path) -> None:
    """Called by a writer with part of ``path`` written: ENOSPC there, once, if a diskfull
    fault was reached."""
    global _disk_full
    if _disk_full:
        _disk_full = False
        raise OSError(errno.ENOSPC, "No space left on device (injected)", str(path))
