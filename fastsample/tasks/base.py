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
    options              the TrainConfig fields that serve this task only (the flag checks
                         refuse them elsewhere, see ``check``)
    train_metric         what the epoch line's train column is
    metrics, score       the record fields its evaluation adds (flat in the --log-json
                         record) and the one the best epoch is chosen by (higher is better)
    output               what inference writes for its nodes: "logits" or "embeddings"

and implements its head around the encoder, its loss, one step's statistics, its
evaluation and its lines. Class-level parts are read by the settings (TrainConfig) before
torch loads, so a task module imports torch and the loaders inside its methods only.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["Task", "fmt"]


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

    def out_width(self, num_classes: int) -> int:
        """The encoder's output width (node tasks: one per class or target; edge tasks: the
        embeddings', --hidden)."""
        return self.config.hidden

    def encoder_target(self, target_type):
        """A typed encoder's output type: the labelled one, or None for every type's rows."""
        return target_type

    def head(self, encoder):
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
        """A start-up warning on the run's shape, if any."""
        return None

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
