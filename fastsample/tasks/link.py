"""Link prediction: a target relation's edges against drawn negatives.

Training batches come from the one loader with edge seeds (fastsample/loading/seeds.py:
negatives among the relation's destination type, the batch's edges and their reverses
excluded while picking). The model is an encoder (the built-in model or the user's, its
outputs ``--hidden`` wide: the embeddings) and a pair scorer (fastsample/nn/link.py); the
loss is binary cross-entropy over each batch's positives and negatives, and the epoch
line's train column is the pair accuracy: the share of positives scored above 0 and
negatives below it, each side weighted as one (0.5 at chance; it sits near k / (1 + k)
while every pair scores below 0). Evaluation is exact: every node embedded once by
layer-wise inference, then each held-out edge ranked against its fixed negatives (ROC-AUC,
MRR, Hits@K over the target relation).
"""

from __future__ import annotations

import math

import numpy as np

from fastsample.tasks.base import Task, fmt


class LinkTask(Task):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "link"
    help = ("link prediction on a link-split dataset (python -m fastsample.data link-split): the encoder (--model, "
            "its outputs --hidden wide) and a pair scorer (--scorer), binary cross-entropy over each batch's edges "
            "and --negatives drawn destinations, evaluated exactly (layer-wise embeddings) by ROC-AUC, MRR and "
            "Hits@K against the split's fixed negatives")
    seeds = "edges"
    # what reached test ROC-AUC 0.93 on Cora (docs/tasks.md, "Link prediction, measured")
    defaults = dict(fanouts=(10, 10), batch_size=256, hidden=128, lr=0.005)
    options = ("negatives", "negative_sampler", "exclude", "scorer", "hits")
    train_metric = "pair-acc"
    metrics = ("val_auc", "test_auc", "val_mrr", "test_mrr")  # and val_hits@K, test_hits@K for each --hits K
    score = "val_auc"
    output = "embeddings"

    def encoder_target(self, target_type):
        """A typed encoder's output type: none, every type's rows (the endpoints are of any)."""
        return None

    def read_types(self, shard) -> list[str]:
        """The target relation's endpoint types (none where the data has no link split: the
        loader says so)."""
        relation = shard.meta.get("link", {}).get("relation")
        return [relation[0], relation[2]] if relation else []

    def head(self, encoder, num_classes: int):
        """The trained model: the encoder and the pair scorer."""
        from fastsample.nn.link import LinkModel

        return LinkModel(encoder, self.config.hidden, self.config.scorer)

    def default_loss(self):
        from fastsample.nn.link import bce_loss

        return bce_loss

    def check_model(self, model) -> None:
        from fastsample.loading.layerwise import check_layerwise

        check_layerwise(model)  # evaluation embeds every node layer-wise

    def loaders(self, shard, fanouts, common: dict) -> dict:
        """The training loader only: evaluation is exact (layer-wise)."""
        from fastsample.loading import EdgeLoader

        c = self.config
        return {"train": EdgeLoader(shard, fanouts, c.batch_size, "train", negatives=c.negatives,
                                    negative_sampler=c.negative_sampler,
                                    exclude=None if c.exclude == "auto" else c.exclude, shuffle=True, seed=c.seed,
                                    max_steps=c.max_steps, cache_fraction=c.cache_fraction,
                                    cache_policy=c.cache_policy, **common)}

    def step(self, model, batch, x, loss_fn):
        """(the loss, or None for an empty batch; [loss sum, pair accuracy sum, positive edges])."""
        out = model(batch.blocks, x)
        if not len(batch):
            return None, [0.0, 0.0, 0.0]
        pos = model.score(out[batch.src], out[batch.dst])
        neg = model.score(out[batch.src, None], out[batch.neg])
        loss = loss_fn(pos, neg)
        right = float((pos > 0).sum()) + float((neg < 0).sum()) / neg.shape[1]  # each side weighted as one
        return loss, [loss.detach().item() * len(batch), right / 2, len(batch)]

    def describe(self) -> str:
        c = self.config
        return (f"task link ({c.negatives} negatives, {c.negative_sampler}, scorer {c.scorer}, "
                + (f"eval exact every {c.eval_every} epochs), " if c.eval_every else "no eval), "))

    def legend(self) -> str:
        return ("fastsample.train: the epoch line's train pair-acc is the share of positive edges scored above 0 "
                "and of negatives below it, each side weighted as one (0.5 at chance); val and test rank each "
                "held-out edge against its fixed negatives (ROC-AUC, MRR, Hits@K)")

    def evaluate(self, trainer, epoch: int) -> dict:
        """Exact measures on the held-out edges: every node embedded once (layer-wise), then
        each rank scores its share of the val and test edges against their fixed
        negatives, in batches of --eval-batch-size edges."""
        import torch

        with torch.no_grad():
            return self._evaluate(trainer)

    def _evaluate(self, trainer) -> dict:
        import torch

        from fastsample.distributed import FeatureGather
        from fastsample.loading.layerwise import layerwise
        from fastsample.nn.link import AUC_BINS, auc_from_histograms, rank_counts, score_histogram

        c, comm, model = self.config, trainer.comm, trainer.model
        loader = trainer.loaders["train"]
        emb = layerwise(model, trainer.shard, comm, c.eval_batch_size, trainer.device, progress=not c.quiet,
                        inputs=trainer.embeddings.shards() if trainer.embeddings is not None else None,
                        every_type=True)
        gather = FeatureGather(comm, trainer.shard.type_runs, emb)
        split = loader.source.edges_split
        out = {}
        for name in ("val", "test"):
            edges, negs = np.asarray(getattr(split, name)), np.asarray(getattr(split, f"{name}_neg"))
            steps = max(comm.allgather_object(math.ceil(len(edges) / c.eval_batch_size)))
            counts, hists = np.zeros(1 + len(c.hits)), np.zeros((2, AUC_BINS), dtype=np.int64)
            for step in range(steps):  # the same count on every rank: the gather is collective
                e = edges[step * c.eval_batch_size:(step + 1) * c.eval_batch_size]
                k = negs[step * c.eval_batch_size:(step + 1) * c.eval_batch_size]
                ids, inverse = np.unique(np.concatenate([e.ravel(), k.ravel()]).astype(np.int64), return_inverse=True)
                h = torch.from_numpy(gather.gather(ids).in_order()).to(trainer.device)
                if not len(e):  # this rank's share ran out before the others': it only serves rows
                    continue
                at = torch.from_numpy(inverse)
                src, dst, neg = at[0:2 * len(e):2], at[1:2 * len(e):2], at[2 * len(e):].reshape(len(e), -1)
                pos = model.score(h[src], h[dst]).float().cpu().numpy()
                neg = model.score(h[src][:, None], h[neg]).float().cpu().numpy()
                counts += rank_counts(pos, neg, c.hits)
                hists += [score_histogram(pos), score_histogram(neg.ravel())]
            total = np.concatenate([[len(edges)], counts])
            comm.all_reduce(total)
            comm.all_reduce(hists)
            n = max(total[0], 1)
            out[f"{name}_auc"] = auc_from_histograms(hists[0], hists[1])
            out[f"{name}_mrr"] = float(total[1] / n)
            out.update({f"{name}_hits@{K}": float(total[2 + i] / n) for i, K in enumerate(c.hits)})
        return {**out, "eval": "exact"}

    @classmethod
    def eval_text(cls, metrics: dict, how: str | None) -> str:
        if metrics.get("val_auc") is None:
            return ""
        hits = lambda split: "".join(f" {k.removeprefix(split + '_')} {fmt(v)}" for k, v in metrics.items()
                                     if k.startswith(split + "_hits@"))
        return (f" val auc {fmt(metrics['val_auc'])} mrr {fmt(metrics.get('val_mrr'))}{hits('val')}  test auc "
                f"{fmt(metrics.get('test_auc'))} mrr {fmt(metrics.get('test_mrr'))}{hits('test')}")

    @classmethod
    def best_text(cls, metrics: dict, epoch: int) -> str:
        hits = "  ".join(f"{k.removeprefix('test_')} {fmt(v)}" for k, v in metrics.items() if k.startswith("test_hits@"))
        return (f"val auc {fmt(metrics['val_auc'])} at epoch {epoch} (test there: auc {fmt(metrics.get('test_auc'))} "
                f"mrr {fmt(metrics.get('test_mrr'))}  {hits})")
