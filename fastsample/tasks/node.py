"""Node classification: the target type's labelled nodes, cross-entropy, accuracy.

Evaluation is sampled (the val/test nodes with the training fanouts, in a key space of its
own: fast, noisy) or exact (``--eval full``: layer-wise inference over all neighbours,
fastsample/loading/layerwise.py), each giving val_acc and test_acc.
"""

from __future__ import annotations

import numpy as np

from fastsample.tasks.base import Task, fmt

EVAL_SALT = 0x5EED  # eval draws its samples from a key space of its own


class NodeTask(Task):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "node"
    help = "node classification (the target type's labels; cross-entropy, accuracy)"
    seeds = "nodes"
    # the paper's (GraphSAGE on ogbn-products)
    defaults = dict(fanouts=(15, 10, 5), batch_size=1000, hidden=256, lr=0.006)
    options = ("eval", "eval_every_steps", "target_val_acc")
    train_metric = "acc"
    metrics = ("val_acc", "test_acc")
    score = "val_acc"
    output = "logits"

    def out_width(self, num_classes: int) -> int:
        """The model's output width: one logit per class."""
        return num_classes

    def default_loss(self):
        import torch

        return torch.nn.functional.cross_entropy

    def check_model(self, model) -> None:
        if self.config.eval == "full":
            from fastsample.loading.layerwise import check_layerwise

            check_layerwise(model)

    def loaders(self, shard, fanouts, common: dict) -> dict:
        """The training loader (it builds the feature cache when it warms up; the others
        share it) and the sampled evaluation's val and test loaders."""
        from fastsample.loading import NodeLoader

        c = self.config
        loaders = {"train": NodeLoader(shard, fanouts, c.batch_size, "train", shuffle=True, seed=c.seed,
                                       max_steps=c.max_steps, cache_fraction=c.cache_fraction,
                                       cache_policy=c.cache_policy, **common)}
        for split in ("val", "test"):
            loaders[split] = NodeLoader(shard, fanouts, c.batch_size, split, shuffle=False, seed=c.seed + EVAL_SALT,
                                        **common)
        return loaders

    def step(self, model, batch, x, loss_fn):
        """(the loss to backpropagate, or None for an empty batch; [loss sum, correct, count])."""
        out = model(batch.blocks, x)
        if not len(batch):
            return None, [0.0, 0.0, 0.0]
        loss = loss_fn(out, batch.y)
        return loss, [loss.detach().item() * len(batch), float((out.argmax(1) == batch.y).sum()), len(batch)]

    def describe(self) -> str:
        c = self.config
        evals = [f"{c.eval} every {c.eval_every} epochs"] if c.eval_every else []
        evals += [f"val every {c.eval_every_steps} steps"] if c.eval_every_steps else []
        target = f", target val acc {c.target_val_acc}" if c.target_val_acc is not None else ""
        return f"task node (eval {' and '.join(evals)}{target}), " if evals else "task node (no eval), "

    def evaluate(self, trainer, epoch: int) -> dict:
        """{val_acc, test_acc}: exact with --eval full, else sampled."""
        if self.config.eval == "full":
            return {**self._exact(trainer), "eval": "full"}
        return {**{f"{split}_acc": self._sampled(trainer, split, epoch) for split in ("val", "test")}, "eval": "sampled"}

    def validate(self, trainer, epoch: int) -> float | None:
        """Validation accuracy alone, sampled (--eval-every-steps: within an epoch)."""
        return self._sampled(trainer, "val", epoch)  # the next step puts the model back in training mode

    def _sampled(self, trainer, split: str, epoch: int) -> float | None:
        import torch

        trainer.model.eval()
        loader = trainer.loaders[split]
        loader.set_epoch(epoch)
        stats = np.zeros(2)
        with torch.no_grad():
            for batch in loader:
                if len(batch):
                    pred = trainer.model(batch.blocks, trainer.input(batch)).argmax(1)
                    stats += [int((pred == batch.y).sum()), len(batch)]
        trainer.comm.all_reduce(stats)
        return float(stats[0] / stats[1]) if stats[1] else None  # None: an empty split (IGBH's test)

    def _exact(self, trainer) -> dict:
        """Validation and test accuracy from exact layer-wise inference (one pass for both)."""
        from fastsample.loading.layerwise import layerwise

        shard = trainer.shard
        out = layerwise(trainer.model, shard, trainer.comm, self.config.eval_batch_size, trainer.device,
                        progress=not self.config.quiet,
                        inputs=trainer.embeddings.shards() if trainer.embeddings is not None else None)
        pred, lo = out.argmax(1), trainer.loaders["val"].lo  # row 0: the first owned node with a label
        stats = np.zeros(4)
        for k, split in enumerate(("val", "test")):
            ids = np.asarray(getattr(shard, split)) - lo
            stats[2 * k:2 * k + 2] = [(pred[ids] == shard.labels[ids]).sum(), len(ids)]
        trainer.comm.all_reduce(stats)
        return {"val_acc": float(stats[0] / stats[1]) if stats[1] else None,
                "test_acc": float(stats[2] / stats[3]) if stats[3] else None}

    def warn_single_step(self, trainer) -> str | None:
        """A start-up warning when an epoch is one step (one update per epoch)."""
        c = self.config
        if trainer.steps_per_epoch != 1 or c.max_steps is not None:
            return None
        most = max(trainer.shard.split_sizes("train"))
        return (f"fastsample.train: warning: an epoch is a single step (at most {most:,} training nodes per rank, "
                f"--batch-size {c.batch_size}); the model gets one update per epoch. Use a smaller --batch-size on "
                "small graphs (e.g. 32-64 for Cora).")

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
