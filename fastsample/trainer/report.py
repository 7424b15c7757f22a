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

from tqdm import tqdm

from fastsample.trainer.metrics import EpochRecord, report_line, summary

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
        quiet: no progress bar; prefetch: the epoch lines say how long the loop waited.
    """

    def __init__(self, quiet: bool = False, prefetch: bool = False):
        self.quiet, self.prefetch, self.bar = quiet, prefetch, None

    def started(self, description: str) -> None:
        print(description, flush=True)

    def note(self, text: str) -> None:
        print(text, flush=True)

    def warn(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        # a bar only on a terminal: in a file (a Slurm log) its redraws are noise
        if self.quiet or not sys.stderr.isatty():
            return
        if self.bar is None:
            self.bar = tqdm(total=steps, desc=f"epoch {epoch}", leave=False)
        self.bar.update()
        self.bar.set_postfix(loss=f"{loss:.4f}")

    def epoch(self, record: EpochRecord) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        tqdm.write(report_line(record, prefetch=self.prefetch))

    def finished(self, history: list[EpochRecord]) -> None:
        if history:
            print(summary(history), flush=True)
