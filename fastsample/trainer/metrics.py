"""What an epoch measured: EpochRecord (the trainer's JSON log line, bench/epoch.py's input),
its one-line report and the run's closing summary (the --log-json file: runlog.py)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from fastsample.progress import seconds  # re-exported: one home for how a duration reads
from fastsample.tasks import task_class

__all__ = ["EpochRecord", "TIMERS", "json_line", "seconds", "report_line", "summary"]

TIMERS = ("sample_s", "gather_s", "wait_s", "compute_s", "allreduce_s", "optimizer_s", "embed_grads_s",
          "embed_update_s")


def _finite(obj):
    """``obj`` with each NaN or infinite float made None, in nested dicts and lists too."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def json_line(obj: dict) -> str:
    """``obj`` as strict JSON, on one line: a NaN or infinite value (a loss gone NaN with
    --on-nan skip or continue) is written null, since JSON has none (Python would write a bare
    NaN, which jq and every other strict reader refuse: the whole file would be unreadable)."""
    return json.dumps(_finite(obj), default=str, allow_nan=False)


@dataclass
class EpochRecord:
    """One epoch on rank 0: accuracies over all ranks; times, bytes and hits of rank 0.

    remote_input_fraction: of the input rows rank 0 gathered, the share owned by other
    ranks (before the cache: what the partition's quality decides).
    sample_s, gather_s: time spent making the batches (in the prefetch thread, with
    --prefetch); wait_s: the part the training loop waited for; compute_s: forward and
    backward; allreduce_s: the gradient all-reduce; optimizer_s: the optimizer step (None in
    logs written before it was measured apart: there allreduce_s includes it); embed_grads_s,
    embed_update_s: typed data's learnable embeddings: their gradient rows sent to the
    owners (one all_to_all, packing included), and the owners' update of those rows (0
    without embeddings; None in logs before they were measured apart: there optimizer_s
    holds both).
    bytes_sent, rounds_per_step: what rank 0 sent, and the rounds per step, in the
    all_to_all collectives (the gather's two rounds per step; vanilla sampling's two per
    lower layer); the gradient all-reduce is not counted.
    products_flop, products_floor_s: rank 0's matrix-product FLOPs in the epoch, counted
    from the MFGs its model ran, and the time they take at the throughput measured on
    those shapes on this CPU (fastsample/nn/roofline.py; None for a model that does not list
    its products, and the floor off the CPU).
    """

    epoch: int
    loss: float
    train_acc: float  # the task's train metric (train_metric): node accuracy, or link pair accuracy
    task: str = "node"  # the --task that trained it (fastsample/tasks/): what ``metrics`` holds
    # the task's evaluation measures (its ``metrics``: val_acc and test_acc, val_auc, ..., val_hits@K),
    # flat in the JSON record; empty where no evaluation ran this epoch
    metrics: dict = field(default_factory=dict)
    epoch_s: float = 0.0
    sample_s: float = 0.0
    gather_s: float = 0.0
    wait_s: float = 0.0
    compute_s: float = 0.0
    allreduce_s: float = 0.0
    optimizer_s: float | None = None
    embed_grads_s: float | None = None
    embed_update_s: float | None = None
    bytes_sent: int = 0
    rounds_per_step: float = 0.0
    net_modelled_s: float | None = None
    products_flop: int | None = None
    products_floor_s: float | None = None
    step_losses: list[float] = field(default_factory=list)
    cache_hit_rate: float | None = None
    remote_input_fraction: float = 0.0  # of rank 0's input rows, the share fetched from other ranks
    # a resumed mid-epoch checkpoint's epoch starts at first_step; a preempted one is not
    # complete; steps: how many steps the record covers (None in logs written before it was kept)
    first_step: int = 0
    complete: bool = True
    train_metric: str = "acc"
    steps: int | None = None
    steps_per_epoch: int | None = None
    # how val/test were measured: sampled, full (layer-wise) or exact (link); "steps": the score
    # (val_acc) is the epoch's last --eval-every-steps result (no epoch-end evaluation, no test_acc)
    eval: str | None = None
    # --eval-every-steps: [{"step": step in this epoch, the task's score (val_acc), "s": seconds since
    # the run's first step}]
    step_evals: list = field(default_factory=list)
    # --target-val-acc: the target, and where the run reached it (None: not in this epoch)
    target_val_acc: float | None = None
    time_to_target_s: float | None = None
    stopped_early: bool = False  # --early-stop ended the run after this epoch
    # there: the best score's epoch (a resumed run's may be before its own epochs), its score, the
    # checkpoint kept for it (None without --checkpoint-dir)
    early_best: dict | None = None
    # a resumed run's records: its best evaluated epoch before the resume ({epoch, score,
    # metrics}), which the closing line weighs with its own (None: not resumed, or none evaluated)
    best_before: dict | None = None

    @property
    def partial(self) -> bool:
        """Covers only part of its epoch (resumed mid-epoch, or stopped): its time is not an epoch's."""
        return self.first_step > 0 or not self.complete

    def add(self, measured: dict) -> None:
        """Set a task's evaluation fields ({val_acc: ..., "eval": how}: "eval" is the record's
        own field, the rest go to ``metrics``)."""
        measured = dict(measured)
        if "eval" in measured:
            self.eval = measured.pop("eval")
        self.metrics.update(measured)

    def to_json(self) -> str:
        record = dataclasses.asdict(self)
        measured = record.pop("metrics")  # every field the task declares, null where not measured
        # "record": what the line is, as a header's "run" says (jq 'select(.record == "epoch")')
        return json_line({"record": "epoch", **record, **dict.fromkeys(task_class(self.task).metrics), **measured})

    @classmethod
    def from_json(cls, line: str) -> "EpochRecord":
        """A --log-json line: the record's fields, and the task's measures (val_*, test_*) into ``metrics``."""
        names = {f.name for f in dataclasses.fields(cls)}
        fields = json.loads(line)
        metrics = {k: v for k, v in fields.items() if k not in names and k.startswith(("val_", "test_"))}
        # a loss written null was not finite (json_line): NaN again, as the run had it
        nan = float("nan")
        if fields.get("loss", 0.0) is None:
            fields["loss"] = nan
        fields["step_losses"] = [nan if x is None else x for x in fields.get("step_losses", [])]
        return cls(**{k: v for k, v in fields.items() if k in names and k != "metrics"}, metrics=metrics)

    @property
    def score(self) -> float | None:
        """What the best epoch is chosen by: its task's score (validation accuracy, ROC-AUC, ...)."""
        return self.metrics.get(task_class(self.task).score)


def report_line(r: EpochRecord, prefetch: bool = False) -> str:
    """The epoch's line on the console."""
    acc = task_class(r.task).eval_text(r.metrics, r.eval)
    part = ""
    if r.partial:  # its loss, time and bytes are those of these steps only
        last = r.first_step + (r.steps if r.steps is not None else len(r.step_losses))
        end = ", resumed" if r.first_step else ""
        end += "" if r.complete else ", reached the target" if r.time_to_target_s is not None else ", stopped"
        part = f" (steps {r.first_step}..{last - 1}" + (f" of {r.steps_per_epoch}" if r.steps_per_epoch else "") + \
            f"{end})"
    return (f"epoch {r.epoch:3d}{part}  loss {r.loss:.4f}  train {r.train_metric} {r.train_acc:.4f}{acc}  "
            f"{seconds(r.epoch_s)} (sample {seconds(r.sample_s)} gather {seconds(r.gather_s)} "
            + (f"(waited {seconds(r.wait_s)}) " if prefetch else "") +
            f"compute {seconds(r.compute_s)} allreduce {seconds(r.allreduce_s)}"
            + (f" optimizer {seconds(r.optimizer_s)}" if r.optimizer_s is not None else "")
            + (f" embeddings: grads {seconds(r.embed_grads_s)} update {seconds(r.embed_update_s)}"
               if r.embed_update_s else "") + ")  "
            + (f"products floor {seconds(r.products_floor_s)} ({r.epoch_s / r.products_floor_s:.2f}x)  "
               if r.products_floor_s else "") +
            f"sent {r.bytes_sent / 2**20:.1f} MiB (rank 0, this epoch)  "
            + (f"cache hits {r.cache_hit_rate:.1%}  " if r.cache_hit_rate is not None else "") +
            f"{r.rounds_per_step:.0f} rounds/step" + _step_evals(r))


def _step_evals(r: EpochRecord) -> str:
    """The epoch's --eval-every-steps results and --target-val-acc's outcome, if any."""
    out = ""
    score = task_class(r.task).score
    accs = [e[score] for e in r.step_evals if e.get(score) is not None]
    if accs:
        out += f"  step evals {len(accs)} (val last {accs[-1]:.4f} best {max(accs):.4f})"
    if r.time_to_target_s is not None:
        out += f"  reached val {r.target_val_acc} after {r.time_to_target_s:.1f}s"
    return out


def summary(history: list[EpochRecord]) -> str:
    """One closing line: best validation accuracy, the test accuracy at that epoch, mean epoch time
    (over whole epochs only: a resumed or stopped epoch's time is a part's)."""
    whole = [r.epoch_s for r in history if not r.partial]
    mean = seconds(sum(whole) / len(whole)) if whole else "n/a (no whole epoch in this run)"
    span = f"epochs {history[0].epoch}..{history[-1].epoch}"
    evaluated = [r for r in history if r.score is not None]
    best = max(evaluated, key=lambda r: r.score) if evaluated else None  # the first epoch that reached it
    early, last = "", history[-1]
    before = last.best_before
    if before is not None and (best is None or before["score"] > best.score):  # the epochs before a resume's
        best = EpochRecord(epoch=before["epoch"], loss=math.nan, train_acc=math.nan, task=last.task,
                           metrics=before["metrics"])
        best_text = task_class(best.task).best_text(best.metrics, best.epoch) + ", before the resume"
    else:
        best_text = task_class(best.task).best_text(best.metrics, best.epoch) if best else None
    if best is None:
        # none asked for, or nothing to measure it on (every labelled row in train)
        why = "--eval-every 0" if all(r.eval is None for r in history) else "no validation rows to score"
        return f"done: {span}, mean epoch {mean}, no evaluation ({why}){_target(history)}"
    if last.stopped_early:
        at = last.early_best or {"epoch": best.epoch, "score": best.score, "kept": None}
        early = (f"; stopped early: no better {task_class(best.task).score} than epoch {at['epoch']}'s "
                 f"{at['score']:.4f} for the last {last.epoch - at['epoch']} epochs"
                 + (f", {at['kept']} kept" if at.get("kept") else ""))
    return f"done: {span}, best {best_text}, mean epoch {mean}{_target(history)}{early}"


def _target(history: list[EpochRecord]) -> str:
    """--target-val-acc's outcome for the closing line ("" without a target)."""
    wanted = history[-1].target_val_acc
    if wanted is None:
        return ""
    hit = next((r for r in history if r.time_to_target_s is not None), None)
    if hit is None:
        return f"; target val acc {wanted} not reached"
    return f"; time to target (val acc {wanted}): {hit.time_to_target_s:.1f}s, at epoch {hit.epoch}"
