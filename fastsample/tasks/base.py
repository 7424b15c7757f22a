"""The task protocol: everything a training run knows of what it optimises and measures.

A task is one file in fastsample/tasks/ holding a subclass of Task, registered by name in
fastsample/tasks/__init__.py. The loop (fastsample/trainer/), the loader, the gather and the
models do not know which task runs: they ask it. A task declares

    name, help           its --task value and what --help says of it
    seeds                its seed kind: "nodes" (a split of the target type's labelled
                         nodes) or "edges" (a split of a relation's edges); its loaders
                         build the seed source (fastsample/loading/seeds.py)
    defaults             the settings whose good value depends on the task (fanouts, batch
                         size, width, learning rate): a flag left out takes the task's
    options              the TrainConfig fields that serve only some tasks, this one among
                         them (TrainConfig refuses such a field set for a task that does not
                         list it); ``check`` refuses anything else it cannot serve
    train_metric         what the epoch line's train column is
    metrics, score       the record fields its evaluation adds (flat in the --log-json
                         record) and the one the best epoch is chosen by (higher is better)
    output               what inference writes for its nodes: "logits", "predictions" or
                         "embeddings"
    labels               what it trains on: "classes" (integer labels) or "values" (float
                         targets); the mixins Classes and Values bring each kind's width,
                         loss, measures and lines

and implements how many classes its labels have (``classes``: an edge task's are its
edges'), its head around the encoder, its loss, one step's statistics, its evaluation and
its lines. Class-level parts are read by the settings (TrainConfig) before
torch loads, so a task module imports torch and the loaders inside its methods only.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

__all__ = ["Task", "Classes", "Values", "check_labels", "fmt"]


def fmt(value) -> str:
    """A metric as the epoch lines show it (n/a: not measured, e.g. an empty split)."""
    return "n/a" if value is None else f"{value:.4f}"


class Task:
    """The protocol, with the behaviour most tasks share; see the module doc.

    ``config``: the run's TrainConfig."""

    name: ClassVar[str]
    help: ClassVar[str]
    seeds: ClassVar[str]  # "nodes" or "edges"
    defaults: ClassVar[dict]
    options: ClassVar[tuple[str, ...]] = ()
    train_metric: ClassVar[str]
    metrics: ClassVar[tuple[str, ...]]
    score: ClassVar[str]
    output: ClassVar[str] = "logits"

    def __init__(self, config):
        self.config = config

    # ------------------------------------------------------------ settings

    @classmethod
    def check(cls, config) -> None:
        """Refuse settings this task cannot serve beyond its ``options`` (which TrainConfig
        checks: another task's option set here is refused there); a ConfigError naming the field."""

    # ------------------------------------------------------------ the model

    def classes(self, shard) -> int:
        """How many classes the labels this task trains on have (0: float targets): the
        dataset's node classes by default."""
        return int(shard.num_classes)

    def out_width(self, num_classes: int) -> int:
        """The encoder's output width (node tasks: their label_width; edge tasks: the
        embeddings', --hidden)."""
        return self.config.hidden

    def read_types(self, shard) -> list[str]:
        """The node types whose output rows the task reads (node tasks: the target type's;
        edge tasks: their relation's endpoints')."""
        from fastsample.data.graph import NODE, describe_types

        return [describe_types(shard.meta)["target_type"] or NODE]

    def encoder_target(self, target_type):
        """A typed encoder's output type: the labelled one, or None for every type's rows."""
        return target_type

    def head(self, encoder, num_classes: int):
        """The trained model around the built encoder (default: the encoder itself)."""
        return encoder

    def default_loss(self):
        raise NotImplementedError

    def check_model(self, model) -> None:
        """Refuse a model this task cannot run (e.g. one without layer-wise inference where
        evaluation needs it)."""

    # ------------------------------------------------------------ training

    def loaders(self, shard, fanouts, common: dict) -> dict:
        """{"train": its loader, and any the evaluation needs}, over ``shard``."""
        raise NotImplementedError

    def step(self, model, batch, x, loss_fn):
        """(the loss to backpropagate, or None for an empty batch; [loss sum, train metric
        sum, items]) of one batch."""
        raise NotImplementedError

    # ------------------------------------------------------------ evaluation

    def evaluate(self, trainer, epoch: int) -> dict:
        """The evaluation's fields ({name in ``metrics``: value}; "eval": how it was measured)."""
        raise NotImplementedError

    def validate(self, trainer, epoch: int) -> float | None:
        """The validation score alone, within an epoch (tasks whose options take --eval-every-steps)."""
        raise NotImplementedError

    # ------------------------------------------------------------ lines

    def describe(self) -> str:
        """The start-up line's part on the task, e.g. 'task node (eval sampled every 1 epochs), '."""
        c = self.config
        return f"task {self.name} (" + (f"eval every {c.eval_every} epochs), " if c.eval_every else "no eval), ")

    def legend(self) -> str | None:
        """A start-up note on what the epoch line's columns mean, where not obvious."""
        return None

    def warn_single_step(self, trainer) -> str | None:
        """A start-up warning when an epoch is one step (one update per epoch)."""
        c = self.config
        if trainer.steps_per_epoch != 1 or c.max_steps is not None:
            return None
        most = max(trainer.loaders["train"].source.sizes())
        return (f"fastsample.train: warning: an epoch is a single step (at most {most:,} training {self.seeds} per "
                f"rank, --batch-size {c.batch_size}); the model gets one update per epoch. Use a smaller --batch-size "
                "on small graphs (e.g. 32-64 for Cora's nodes).")

    @classmethod
    def eval_text(cls, metrics: dict, how: str | None) -> str:
        """The epoch line's evaluation part (``how``: the record's eval field); default: each
        measured field, named."""
        shown = [f"{k} {fmt(v)}" for k, v in metrics.items() if v is not None]
        return ("  " + " ".join(shown)) if shown else ""

    @classmethod
    def best_text(cls, metrics: dict, epoch: int) -> str:
        """The closing line's part on the best epoch ('best ' precedes it); default: its score
        and the test measures there."""
        test = "  ".join(f"{k.removeprefix('test_')} {fmt(v)}" for k, v in metrics.items() if k.startswith("test_"))
        return f"{cls.score.replace('_', ' ')} {fmt(metrics.get(cls.score))} at epoch {epoch} (test there: {test})"


class Classes:
    """What a task predicting classes measures (mixed in before Task): one logit per class,
    cross-entropy, accuracy. The dataset's labels are integers (-1: unlabelled)."""

    labels = "classes"
    train_metric = "acc"
    metrics = ("val_acc", "test_acc")
    score = "val_acc"
    output = "logits"

    def label_width(self, num_classes: int) -> int:
        """One logit per class."""
        return num_classes

    def default_loss(self):
        import torch

        return torch.nn.functional.cross_entropy

    def train_sum(self, out, y) -> float:
        """The step's train metric summed over its items: the right predictions."""
        return float((out.argmax(1) == y).sum())

    def sums(self, out, y) -> np.ndarray:
        """What a split's measures are made of, summed over batches and ranks: [correct, count]."""
        return np.array([(np.asarray(out).argmax(1) == np.asarray(y)).sum(), len(y)], dtype=np.float64)

    def measures(self, sums: np.ndarray, split: str) -> dict:
        """{the split's measures} from the summed ``sums`` (None: an empty split, IGBH's test)."""
        return {f"{split}_acc": float(sums[0] / sums[1]) if sums[1] else None}

    @classmethod
    def eval_text(cls, metrics: dict, how: str | None) -> str:
        if metrics.get("val_acc") is None:
            return ""
        test = "" if metrics.get("test_acc") is None else f" test {fmt(metrics['test_acc'])}"
        return f" val {fmt(metrics['val_acc'])}{test} ({how or 'sampled'})"

    @classmethod
    def best_text(cls, metrics: dict, epoch: int) -> str:
        test = "" if metrics.get("test_acc") is None else f" (test there {fmt(metrics['test_acc'])})"
        return f"val {fmt(metrics['val_acc'])} at epoch {epoch}{test}"


class Values:
    """What a task predicting a float target measures (mixed in before Task): one output,
    mean squared error; R², MAE and RMSE, the best epoch by validation R². The dataset's
    labels are float32 (NaN: unlabelled)."""

    labels = "values"
    train_metric = "mae"
    metrics = ("val_r2", "test_r2", "val_mae", "test_mae", "val_rmse", "test_rmse")
    score = "val_r2"
    output = "predictions"

    def label_width(self, num_classes: int) -> int:
        """One output, the value."""
        return 1

    def default_loss(self):
        import torch

        return lambda out, y: torch.nn.functional.mse_loss(out.reshape(-1), y)

    def train_sum(self, out, y) -> float:
        """The step's absolute errors, summed."""
        return float((out.detach().reshape(-1) - y).abs().sum())

    def sums(self, out, y) -> np.ndarray:
        """[count, sum y, sum y^2, squared error sum, absolute error sum], in float64."""
        y = np.asarray(y, dtype=np.float64)
        e = np.asarray(out, dtype=np.float64).reshape(-1) - y
        return np.array([len(y), y.sum(), (y * y).sum(), (e * e).sum(), np.abs(e).sum()])

    def measures(self, sums: np.ndarray, split: str) -> dict:
        n, sy, syy, see, sae = sums
        if not n:
            return dict.fromkeys((f"{split}_r2", f"{split}_mae", f"{split}_rmse"))
        spread = syy - sy * sy / n  # the targets' squared deviations from their mean
        return {f"{split}_r2": float(1 - see / spread) if spread > 0 else None, f"{split}_mae": float(sae / n),
                f"{split}_rmse": float(np.sqrt(see / n))}

    @classmethod
    def eval_text(cls, metrics: dict, how: str | None) -> str:
        if metrics.get("val_mae") is None:
            return ""
        side = lambda s: (f"{s} r2 {fmt(metrics.get(s + '_r2'))} mae {fmt(metrics.get(s + '_mae'))} "
                          f"rmse {fmt(metrics.get(s + '_rmse'))}")
        return f" {side('val')}  {side('test')} ({how or 'sampled'})"

    @classmethod
    def best_text(cls, metrics: dict, epoch: int) -> str:
        return (f"val r2 {fmt(metrics.get('val_r2'))} at epoch {epoch} (test there: r2 {fmt(metrics.get('test_r2'))} "
                f"mae {fmt(metrics.get('test_mae'))} rmse {fmt(metrics.get('test_rmse'))})")


def check_labels(task, labels, where) -> None:
    """ValueError naming ``where`` unless ``labels`` are what ``task`` trains on (its ``labels``:
    "classes", integers, or "values", floats)."""
    kind = "values" if np.asarray(labels).dtype.kind == "f" else "classes"
    if kind != task.labels:
        raise ValueError(f"{where}: its labels are {kind} ({np.asarray(labels).dtype}); --task {task.name} "
                         f"trains on {task.labels}")
