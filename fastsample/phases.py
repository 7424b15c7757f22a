"""Where a rank is in its run: the phase of its main thread and of its loader thread, and
the step. Read by the lines that say where a job failed: the command's own (an
exception), the supervisor's (a rank killed: fastsample/supervisor.py) and the watchdog's
(a stalled collective: fastsample/comm/watchdog.py).

    with phase("gather1"):      # this thread is in gather round 1 until the block ends
        ...
    position(epoch, step)       # the step the main thread works on (AFTER_STEPS: the epoch's end)

The board is eight int64 in memory the supervisor shares with the rank it forked (it
reads them after the rank died); without a supervisor, in this process's own memory.
Entering a phase costs two stores, and a check for a test's injected fault
(fastsample/faults.py) only when one is armed.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time

import numpy as np

from fastsample import faults

# key -> how the lines name it; the keys are also what FASTSAMPLE_FAULT names (faults.py)
NAMES = {
    "idle": "start-up",
    "startup": "start-up checks",
    "read": "reading the data",
    "prepare": "warm-up and the feature cache",
    "train": "training",
    "sample": "sampling",
    "gather1": "gather round 1",
    "gather2": "gather round 2",
    "forward": "forward/backward",
    "allreduce": "the gradient all-reduce",
    "optimizer": "the optimizer step",
    "embedding": "the embedding update",
    "checkpoint": "a checkpoint save",
    "log": "writing the log",
    "evaluation": "evaluation",
    "layerwise": "layer-wise inference",
    "output": "writing the output",
    "done": "the job's end, its work done",
}
if faults.phase is not None and faults.phase not in NAMES:
    raise SystemExit(f"FASTSAMPLE_FAULT: no phase {faults.phase!r} (one of {', '.join(NAMES)})")
KEYS = tuple(NAMES)
_CODE = {k: i for i, k in enumerate(KEYS)}
MAIN, LOADER, EPOCH, STEP, ENDING, SEGMENTS = 0, 1, 2, 3, 4, 5  # SEGMENTS: fastsample/supervisor.py's handshake
_main_thread = threading.main_thread().ident

board = np.zeros(8, dtype=np.int64)  # the supervisor points this at its shared block
board[EPOCH] = board[STEP] = -1
# board[STEP] beside a step's index: an evaluation's batches (whose gathers are the training
# steps' phases), and the epoch's work after its last step (the log, a checkpoint)
EVALUATING, AFTER_STEPS = -2, -3


shared = False  # whether a supervisor reads the board (set before it forks the rank)


def share(buffer) -> None:
    """Keep the board in ``buffer`` (8 int64 of memory shared with a supervisor)."""
    global board, shared
    board = np.frombuffer(buffer, dtype=np.int64, count=8)
    shared = True
    reset()


@contextlib.contextmanager
def phase(key: str):
    """This thread is in phase ``key`` (one of NAMES) until the block ends."""
    slot = MAIN if threading.get_ident() == _main_thread else LOADER
    before, step = board[slot], board[STEP]
    board[slot] = _CODE[key]
    if key == "evaluation" and slot == MAIN and step != -1:
        board[STEP] = EVALUATING
    if faults.armed:
        faults.reached(key)
    try:
        yield
    except Exception:  # the board keeps the phase that failed, for the line that reports it
        raise
    except BaseException:  # a generator closed, an interrupt: not a failure of this phase
        board[slot], board[STEP] = before, step
        raise
    board[slot] = before
    if key == "evaluation" and slot == MAIN:
        board[STEP] = step


def reset() -> None:
    """A new run in this process (a command's main(), called again by a test): no phase, no step."""
    global slowest_step, _last
    board[:] = 0
    board[EPOCH] = board[STEP] = -1
    slowest_step, _last = 0.0, (-1, 0.0)


slowest_step = 0.0  # seconds, the longest between two position() calls of one epoch (the watchdog's scale)
_last = (-1, 0.0)


def in_phase(key: str):
    """A function that runs in phase ``key`` (a decorator)."""
    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with phase(key):
                return fn(*args, **kwargs)
        return run
    return wrap


def position(epoch: int, step: int) -> None:
    """The main thread starts ``step`` of ``epoch`` (shown beside the phase)."""
    global slowest_step, _last
    now = time.monotonic()
    if _last[0] == epoch:
        slowest_step = max(slowest_step, now - _last[1])
    _last = (epoch, now)
    board[EPOCH], board[STEP] = epoch, step


def done() -> None:
    """This rank's work is done (what follows is the job's end: MPI's finalize): no phase, no
    step, where a kill is reported."""
    board[MAIN], board[EPOCH], board[STEP] = _CODE["done"], -1, -1


def ending() -> None:
    """This rank has said why the job ends and is ending it (an abort): what kills it from
    now on (the abort itself, the launcher) is not news (the supervisor stays silent)."""
    board[ENDING] = 1


def where(of=None) -> str:
    """The phase as the lines say it, e.g. 'gather round 1 (epoch 1, step 3)';
    with a loader thread busy elsewhere, its phase too. ``of``: a board's copy (a peer's)."""
    b = board if of is None else of
    text = NAMES[KEYS[int(b[MAIN])]]
    if b[LOADER] and b[LOADER] != b[MAIN]:
        text += f" (loader: {NAMES[KEYS[int(b[LOADER])]]})"
    if b[EPOCH] >= 0:
        step = int(b[STEP])
        text += f" (epoch {int(b[EPOCH])}, " + ("evaluation)" if step == EVALUATING else "after its steps)"
                                                  if step == AFTER_STEPS else f"step {step})")
    return text


def blame(rank: int, of=None) -> str:
    """How a line names a rank and where it was: 'rank 1, in gather round 1 (epoch 1, step 3)'."""
    return f"rank {rank}, in {where(of)}"
