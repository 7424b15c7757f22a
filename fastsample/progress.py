"""Progress on long work, as the user sees it: a bar redrawn in place, timed lines, or nothing.

Every command takes ``--progress bar|lines|none`` and ``--progress-every SECONDS``
(configure). The default is a bar where the user watches a terminal, else lines: under
mpiexec no rank's stderr is a terminal (the launcher forwards it through a pipe), so a
rank looks at its launcher's instead (interactive). Lines carry the count, the rate and
the ETA, one every ``--progress-every`` seconds (none before the first interval: short
work stays quiet), so a Slurm log or a file stays readable.

progress_bar() is a tqdm where the mode is bar, else an object with the same small
interface (update, set_postfix, close, iteration, a context manager).
"""

from __future__ import annotations

import os
import sys
import time

from tqdm import tqdm

__all__ = ["MODES", "configure", "mode", "interactive", "progress_bar", "seconds"]

MODES = ("bar", "lines", "none")
_chosen: str | None = None  # configure()'s; None: decided on first use
_every = 60.0
_columns: int | None = None  # the launcher's terminal's width, where the bar is drawn through it

# processes that forward a rank's output to the terminal they were started from
LAUNCHERS = {"mpiexec", "mpiexec.hydra", "mpirun", "hydra_pmi_proxy", "orterun", "prterun", "prted", "orted",
             "srun", "mpirun.real"}


def seconds(t: float) -> str:
    """A duration with sensible precision: 3.2ms, 640ms, 12.34s, 2m05s."""
    if t != t:  # NaN: unknown
        return "?"
    if t >= 120:
        return f"{int(t // 60)}m{int(t % 60):02d}s"
    return f"{t * 1e3:.1f}ms" if t < 0.01 else f"{t * 1e3:.0f}ms" if t < 1 else f"{t:.2f}s"


def configure(choice: str | None = None, every: float = 60.0, quiet: bool = False) -> str:
    """Set this process's mode from a command's flags (``choice`` None: bar where the user
    watches a terminal, else lines; ``quiet``: none) and the interval of lines; returns the mode."""
    global _chosen, _every
    _chosen = "none" if quiet else choice or ("bar" if interactive() else "lines")
    _every = every
    return _chosen


def mode() -> str:
    """The mode in force (configure's, else the default's)."""
    return _chosen if _chosen is not None else configure()


def _stat(pid: int) -> tuple[str, int]:
    """(command name, parent pid) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    name = text[text.index("(") + 1:text.rindex(")")]
    return name, int(text[text.rindex(")") + 2:].split()[1])


def interactive() -> bool:
    """Whether the user watches this process's progress on a terminal: its stderr is one, or
    a launcher above it (mpiexec, mpirun, srun) writes to one, through which this rank's
    output is forwarded. Notes that terminal's width for the bar."""
    global _columns
    if sys.stderr.isatty():
        return True
    try:
        pid = os.getppid()
        for _ in range(6):  # rank -> (supervisor) -> proxy -> mpiexec; no further than the shell
            name, parent = _stat(pid)
            if name in LAUNCHERS:
                where = os.readlink(f"/proc/{pid}/fd/2")
                if where.startswith(("/dev/pts/", "/dev/tty")):
                    try:
                        fd = os.open(where, os.O_RDONLY | os.O_NOCTTY)
                        try:
                            _columns = os.get_terminal_size(fd).columns or None  # 0: unknown
                        finally:
                            os.close(fd)
                    except OSError:
                        _columns = None
                    return True
            elif name in ("bash", "sh", "zsh", "dash", "fish", "tcsh", "csh", "ksh", "slurmstepd", "init", "systemd"):
                return False
            if parent <= 1:
                return False
            pid = parent
    except (OSError, ValueError):
        pass
    return False


class _Lines:
    """A bar's small interface, printed as a line every ``every`` seconds."""

    def __init__(self, iterable, total, desc, unit, unit_scale, every):
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.unit_scale, self.every, self.n, self.postfix = unit_scale, every, 0, ""
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            self.total = len(iterable)
        self.t0 = self.last = time.monotonic()
        self.shown = False

    def _count(self, n: float) -> str:
        return tqdm.format_sizeof(n, divisor=1000) if self.unit_scale else f"{n:,.0f}"

    def update(self, n: float = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every and not (self.total and self.n >= self.total):  # done: close() says so
            self.last = now
            self._line(now)

    def _line(self, now: float, done: bool = False) -> None:
        elapsed = max(now - self.t0, 1e-9)
        rate = self.n / elapsed
        head = f"{self.desc}: " if self.desc else ""
        count = self._count(self.n) + (f"/{self._count(self.total)}" if self.total else "")
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        if done:
            tail = f"  done in {seconds(elapsed)}"
        else:
            eta = (self.total - self.n) / rate if self.total and rate > 0 else float("nan")
            tail = f"  {self._count(rate)} {self.unit}/s" + (f"  ETA {seconds(eta)}" if self.total else "")
        print(f"{head}{count} {self.unit}{share}{tail}{self.postfix}", file=sys.stderr, flush=True)
        self.shown = True

    def set_postfix(self, **values) -> None:
        self.postfix = "".join(f"  {k} {v}" for k, v in values.items())

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def close(self) -> None:
        if self.shown:  # a line said it was under way: one more says it is done
            self._line(time.monotonic(), done=True)
            self.shown = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update()
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress_bar(iterable=None, *, total=None, desc: str = "", unit: str = "it", unit_scale: bool = False,
                 disable: bool = False, leave: bool = True):
    """A progress display in the mode in force: a tqdm bar, timed lines, or a disabled tqdm."""
    shown = mode()
    if disable or shown == "none":
        return tqdm(iterable, total=total, disable=True)
    if shown == "bar":
        return tqdm(iterable, total=total, desc=desc, unit=unit, unit_scale=unit_scale, leave=leave,
                    ncols=_columns if not sys.stderr.isatty() else None)
    return _Lines(iterable, total, desc, unit, unit_scale, _every)
