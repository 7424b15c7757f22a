"""Where the trainer's reports go: a Reporter receives, on rank 0, the start-up summary,
start-up notes and warnings, each step's loss, each epoch's record and the run's end.

The default, ConsoleReporter, prints what ``python -m fastsample.train`` shows: the
settings line, a progress bar (only on a terminal, so Slurm logs stay clean), one line per
epoch and a closing summary. A caller driving the Trainer from its own code passes its own
(``startup(..., reporter=...)``): a subclass of Reporter overrides what it wants; the base
class ignores everything.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from fastsample.trainer.metrics import EpochRecord, report_line, seconds, summary

__all__ = ["Reporter", "ConsoleReporter"]


class Reporter:
    """Receives the trainer's reports; every method is called on rank 0 only, and does
    nothing here."""

    def started(self, description: str) -> None:
        """The resolved settings, once every rank is ready."""

    def note(self, text: str) -> None:
        """A fact of start-up worth a line (e.g. the feature cache built)."""

    def warn(self, text: str) -> None:
        """Something the user probably wants to change."""

    def step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        """Step ``step`` of ``steps`` in ``epoch`` is done, with this global mean loss."""

    def epoch(self, record: EpochRecord) -> None:
        """An epoch is done (and evaluated, if it was due)."""

    def finished(self, history: list[EpochRecord]) -> None:
        """The run is done; ``history`` holds this run's epochs."""


class ConsoleReporter(Reporter):
    """The command line's lines: stdout for reports, stderr for the bar and warnings.

    Args:
        quiet: no progress; prefetch: the epoch lines say how long the loop waited;
        progress: "bar", "lines" or "none" (default: a bar on a terminal, else lines);
        every: seconds between progress lines.
    """

    def __init__(self, quiet: bool = False, prefetch: bool = False, progress: str | None = None,
                 every: float = 60.0):
        self.prefetch, self.bar, self.every = prefetch, None, every
        self.progress = "none" if quiet else progress or ("bar" if sys.stderr.isatty() else "lines")
        self.since = None  # lines: (the epoch, when its first step here ended, that step, the last line's time)

    def started(self, description: str) -> None:
        print(description, flush=True)

    def note(self, text: str) -> None:
        print(text, flush=True)

    def warn(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        if self.progress == "lines":
            self._line(epoch, step, steps, loss)
        if self.progress != "bar":
            return
        if self.bar is None:
            self.bar = tqdm(total=steps, desc=f"epoch {epoch}", leave=False)
        self.bar.update()
        self.bar.set_postfix(loss=f"{loss:.4f}")

    def _line(self, epoch: int, step: int, steps: int, loss: float) -> None:
        """A line every ``every`` seconds (none before the first interval: short runs stay quiet)."""
        now = time.monotonic()
        if self.since is None or self.since[0] != epoch:
            self.since = (epoch, now, step, now)
            return
        _, t0, first, last = self.since
        if now - last < self.every:
            return
        rate = (step - first) / max(now - t0, 1e-9)
        eta = (steps - 1 - step) / rate if rate > 0 else float("nan")
        print(f"epoch {epoch} step {step + 1}/{steps}  {rate:.2f} steps/s  ETA {seconds(eta)}  loss {loss:.4f}",
              file=sys.stderr, flush=True)
        self.since = (epoch, t0, first, now)

    def epoch(self, record: EpochRecord) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        tqdm.write(report_line(record, prefetch=self.prefetch))

    def finished(self, history: list[EpochRecord]) -> None:
        if history:
            print(summary(history), flush=True)
