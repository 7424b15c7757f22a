"""Where the trainer's reports go: a Reporter receives, on rank 0, the start-up summary,
start-up notes and warnings, each step's loss, each epoch's record and the run's end.

The default, ConsoleReporter, prints what ``python -m fastsample.train`` shows: the
settings lines, progress within an epoch (a bar where the user watches a terminal, else a
timed line: fastsample/progress.py), one line per epoch and a closing summary. A caller driving the Trainer from its own code passes its own
(``startup(..., reporter=...)``): a subclass of Reporter overrides what it wants; the base
class ignores everything.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from fastsample import progress as shown
from fastsample.trainer.metrics import TIMERS, EpochRecord, report_line, seconds, summary

__all__ = ["Reporter", "ConsoleReporter", "TensorBoardReporter", "Reporters"]


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
        progress: "bar", "lines" or "none" (default: a bar where the user watches a terminal,
        else lines: fastsample/progress.py);
        every: seconds between progress lines.
    """

    def __init__(self, quiet: bool = False, prefetch: bool = False, progress: str | None = None,
                 every: float = 60.0):
        self.prefetch, self.bar, self.every = prefetch, None, every
        self.progress = shown.configure(progress, every, quiet)  # layer-wise evaluation's bar follows it too
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
            self.bar = shown.progress_bar(total=steps, desc=f"epoch {epoch}", leave=False)
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


class Reporters(Reporter):
    """Several reporters, each told everything in turn (the console's and --tensorboard's)."""

    def __init__(self, *reporters: Reporter):
        self.reporters = reporters

    def started(self, description):
        for r in self.reporters:
            r.started(description)

    def note(self, text):
        for r in self.reporters:
            r.note(text)

    def warn(self, text):
        for r in self.reporters:
            r.warn(text)

    def step(self, epoch, step, steps, loss):
        for r in self.reporters:
            r.step(epoch, step, steps, loss)

    def epoch(self, record):
        for r in self.reporters:
            r.epoch(record)

    def finished(self, history):
        for r in self.reporters:
            r.finished(history)


class TensorBoardReporter(Reporter):
    """--tensorboard DIR: scalars through torch.utils.tensorboard into DIR/RUN_ID (one
    directory per run, as TensorBoard lists runs): train/loss_step at the global step (the
    step losses of the --log-json record, in double precision); per epoch, at the epoch's
    number: train/loss, train/METRIC, each measure of the task (val/..., test/...), time/PHASE
    and comm/sent_MiB. A resumed run writes on in its directory from the step it resumes at
    (purge_step: what the stopped run had logged past it is dropped). An epoch cut by a stop
    and a resume gets its evaluation alone per epoch: each part's train means and times cover
    part of it (its steps' losses are all in train/loss_step)."""

    def __init__(self, directory: str, run_id: str, first_step: int = 0):
        self.path, self.first_step, self.writer = f"{directory}/{run_id}", first_step, None

    def _writer(self):
        if self.writer is None:  # made on the first report: rank 0's alone
            from torch.utils.tensorboard import SummaryWriter

            # purge_step on the first run too: its session-start event is what a resume's restart is
            # told from (without it TensorBoard kept the stopped run's steps past the resume point)
            self.writer = SummaryWriter(self.path, purge_step=self.first_step)
        return self.writer

    def started(self, description: str) -> None:
        self._writer().add_text("settings", description.replace("\n", "  \n"))

    def step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        self._writer().add_scalar("train/loss_step", loss, epoch * steps + step, new_style=True,
                                  double_precision=True)

    def epoch(self, record: EpochRecord) -> None:
        w, e = self._writer(), record.epoch
        for key, value in record.metrics.items():
            if isinstance(value, (int, float)):
                split, _, name = key.partition("_")
                w.add_scalar(f"{split}/{name}", value, e)
        if record.partial:  # a cut epoch's parts (stopped, resumed): their means and times are not the epoch's
            w.flush()
            return
        w.add_scalar("train/loss", record.loss, e)
        w.add_scalar(f"train/{record.train_metric}", record.train_acc, e)
        for key in ("epoch_s", *TIMERS):
            value = getattr(record, key)
            if value is not None:
                w.add_scalar(f"time/{key.removesuffix('_s')}", value, e)
        w.add_scalar("comm/sent_MiB", record.bytes_sent / 2**20, e)
        w.flush()

    def finished(self, history: list[EpochRecord]) -> None:
        if self.writer is not None:
            self.writer.close()
