"""Node classification: the target type's labelled nodes, cross-entropy, accuracy.

Evaluation is sampled (the val/test nodes with the training fanouts, in a key space of its
own: fast, noisy) or exact (``--eval full``: layer-wise inference over all neighbours,
fastsample/loading/layerwise.py), each giving val_acc and test_acc (the measures are the
Classes mixin's, fastsample/tasks/base.py: a node task of another kind of label keeps this
loop and mixes in its own).
"""

from __future__ import annotations

import numpy as np

from fastsample.tasks.base import Classes, Task, check_labels

EVAL_SALT = 0x5EED  # eval draws its samples from a key space of its own


class NodeTask(Classes, Task):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "node"
    help = "node classification (the target type's labels; cross-entropy, accuracy)"
    seeds = "nodes"
    # the paper's (GraphSAGE on ogbn-products)
    defaults = dict(fanouts=(15, 10, 5), batch_size=1000, hidden=256, lr=0.006)
    options = ("eval", "eval_every_steps", "target_val_acc")

    def out_width(self, num_classes: int) -> int:
        """The model's output: the labels' (a logit per class, or the value)."""
        return self.label_width(num_classes)

    width: int | None = None  # out_width of the run's labels, set by the trainer: what check_output expects

    def check_output(self, out, rows: int) -> None:
        """A ConfigError naming --model unless ``out`` is ``rows`` x ``width`` (a value task's
        may be one value per row): a model of another width or depth (hidden rows as logits)
        trained on, silently, cross-entropy taking any width."""
        width = self.width or (out.shape[1] if out.dim() == 2 else 1)
        if out.shape[0] != rows or out.numel() != rows * width or (out.dim() == 2 and out.shape[1] != width):
            from fastsample.options import ConfigError

            raise ConfigError("model", f"{self.config.model}: its output is {tuple(out.shape)}, expected ({rows}, "
                              f"{width}): a row per seed (the last block's destinations) and {width} "
                              f"{'logits (one per class)' if width > 1 or self.labels == 'classes' else 'value'}; "
                              "its layers must match --layers (one block each)")

    def check_model(self, model) -> None:
        if self.config.eval == "full":
            from fastsample.loading.layerwise import check_layerwise

            check_layerwise(model)

    def loaders(self, shard, fanouts, common: dict) -> dict:
        """The training loader (it builds the feature cache when it warms up; the others
        share it) and the sampled evaluation's val and test loaders."""
        from fastsample.loading import NodeLoader

        check_labels(self, shard.labels, shard.path)
        c = self.config
        loaders = {"train": NodeLoader(shard, fanouts, c.batch_size, "train", shuffle=True, seed=c.seed,
                                       max_steps=c.max_steps, cache_fraction=c.cache_fraction,
                                       cache_policy=c.cache_policy, **common)}
        for split in ("val", "test"):
            loaders[split] = NodeLoader(shard, fanouts, c.batch_size, split, shuffle=False, seed=c.seed + EVAL_SALT,
                                        **common)
        return loaders

    def step(self, model, batch, x, loss_fn):
        """(the loss to backpropagate, or None for an empty batch; [loss sum, train metric sum, count])."""
        out = model(batch.blocks, x)
        if not len(batch):
            return None, [0.0, 0.0, 0.0]
        self.check_output(out, len(batch))
        loss = loss_fn(out, batch.y)
        return loss, [loss.detach().item() * len(batch), self.train_sum(out, batch.y), len(batch)]

    def describe(self) -> str:
        c = self.config
        evals = [f"{c.eval} every {c.eval_every} epochs"] if c.eval_every else []
        evals += [f"val every {c.eval_every_steps} steps"] if c.eval_every_steps else []
        target = f", target val acc {c.target_val_acc}" if c.target_val_acc is not None else ""
        return f"task {self.name} (eval {' and '.join(evals)}{target}), " if evals else f"task {self.name} (no eval), "

    def evaluate(self, trainer, epoch: int) -> dict:
        """The val and test measures (``metrics``): exact with --eval full, else sampled."""
        if self.config.eval == "full":
            return {**self._exact(trainer), "eval": "full"}
        return {**self._sampled(trainer, "val", epoch), **self._sampled(trainer, "test", epoch), "eval": "sampled"}

    def validate(self, trainer, epoch: int) -> float | None:
        """The validation score alone, sampled (--eval-every-steps: within an epoch)."""
        return self._sampled(trainer, "val", epoch)[self.score]  # the next step puts the model back in training

    def _sampled(self, trainer, split: str, epoch: int) -> dict:
        import torch

        trainer.model.eval()
        loader = trainer.loaders[split]
        loader.set_epoch(epoch)
        total = None
        with torch.no_grad():
            for batch in loader:
                if len(batch):
                    out = trainer.model(batch.blocks, trainer.input(batch)).float().cpu().numpy()
                    sums = self.sums(out, batch.y.cpu().numpy())
                    total = sums if total is None else total + sums
        total = total if total is not None else self.sums(np.zeros((0, 1), np.float32), np.zeros(0))
        trainer.comm.all_reduce(total)
        return self.measures(total, split)

    def _exact(self, trainer) -> dict:
        """The val and test measures from exact layer-wise inference (one pass for both)."""
        from fastsample.loading.layerwise import layerwise

        shard = trainer.shard
        out = layerwise(trainer.model, shard, trainer.comm, self.config.eval_batch_size, trainer.device,
                        progress=not self.config.quiet,
                        inputs=trainer.embeddings.shards() if trainer.embeddings is not None else None)
        lo = trainer.loaders["val"].lo  # row 0: the first owned node with a label
        sums = [self.sums(out[ids], shard.labels[ids]) for ids in
                (np.asarray(getattr(shard, split)) - lo for split in ("val", "test"))]
        total = np.concatenate(sums)
        trainer.comm.all_reduce(total)
        val, test = total[:len(sums[0])], total[len(sums[0]):]
        return {**self.measures(val, "val"), **self.measures(test, "test")}
