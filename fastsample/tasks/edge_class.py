"""Edge classification: a relation's labelled edges (fastsample/data/edge_labels.py), each
predicted from its endpoints' embeddings; cross-entropy, accuracy (the Classes mixin).

Training batches come from the one loader with labelled edge seeds (fastsample/loading/
seeds.py): each step's edges, their unique endpoints as the MFGs' seeds, the edges (and
their reverses) excluded while picking, as link prediction does, so no training layer
reads the edge it is asked about. The model is an encoder (the built-in model or the user's,
its outputs --hidden wide) and a head over [a, b, a * b] of the endpoints' embeddings
(fastsample/nn/link.py's EdgeModel). Evaluation is exact: every node embedded once by
layer-wise inference over the whole graph, then each held-out edge predicted from its
endpoints' rows. Those embeddings read every edge, the held-out ones too (one pass serves
every edge: excluding each would take a pass per edge), as inference on a new edge's graph
would: where an edge's presence tells its label, evaluation sees what training did not.
"""

from __future__ import annotations

import math

import numpy as np

from fastsample.tasks.base import Classes, Task, check_labels


class EdgeClassTask(Classes, Task):
    """See the module doc; ``config``: the run's TrainConfig."""

    name = "edge-class"
    help = ("edge classification on a dataset's labelled edges of one relation (an encoder and a head over the "
            "endpoints' embeddings; cross-entropy, accuracy; evaluated exactly, layer-wise)")
    seeds = "edges"
    defaults = dict(fanouts=(10, 10), batch_size=256, hidden=128, lr=0.005)
    options = ("exclude",)
    output = "embeddings"  # inference writes the encoder's rows; the head is applied per edge

    def encoder_target(self, target_type):
        """None: every type's rows (an edge's endpoints may be of any type)."""
        return None

    def read_types(self, shard) -> list[str]:
        """The labelled relation's endpoint types (none where the data has no labelled edges:
        ``classes`` says so)."""
        relation = (shard.meta.get("edge_labels") or {}).get("relation")
        return [relation[0], relation[2]] if relation else []

    def classes(self, shard) -> int:
        """The labelled edges' classes (0: float targets)."""
        meta = shard.layout["dataset"].get("edge_labels")
        if meta is None:
            raise ValueError(f"{shard.path}: no labelled edges (an edge task's data: its meta.json's edge_labels; "
                             "python -m fastsample.data targets makes some)")
        return int(meta["num_classes"])

    def head(self, encoder, num_classes: int):
        """The encoder (its outputs --hidden wide) and the head over the endpoints' rows."""
        from fastsample.nn.link import EdgeModel

        return EdgeModel(encoder, self.config.hidden, self.label_width(num_classes))

    def check_model(self, model) -> None:
        from fastsample.loading.layerwise import check_layerwise

        check_layerwise(model)  # evaluation embeds every node layer-wise

    def loaders(self, shard, fanouts, common: dict) -> dict:
        """The training loader only: evaluation is exact (layer-wise)."""
        import functools

        from fastsample.loading import Loader
        from fastsample.loading.seeds import LabelledEdgeSeeds

        c = self.config
        seeds = functools.partial(LabelledEdgeSeeds, exclude=None if c.exclude == "auto" else c.exclude)
        loader = Loader(shard, fanouts, c.batch_size, "train", seeds=seeds, shuffle=True, seed=c.seed,
                        max_steps=c.max_steps, cache_fraction=c.cache_fraction, cache_policy=c.cache_policy, **common)
        check_labels(self, loader.source.labels, f"{shard.path} (its labelled edges)")
        return {"train": loader}

    def step(self, model, batch, x, loss_fn):
        """(the loss, or None for an empty batch; [loss sum, train metric sum, edges])."""
        out = model(batch.blocks, x)
        if not len(batch):
            return None, [0.0, 0.0, 0.0]
        pred = model.predict(out[batch.src], out[batch.dst])
        loss = loss_fn(pred, batch.y)
        return loss, [loss.detach().item() * len(batch), self.train_sum(pred, batch.y), len(batch)]

    def describe(self) -> str:
        c = self.config
        return (f"task {self.name} (exclude {c.exclude}, " +
                (f"eval exact every {c.eval_every} epochs), " if c.eval_every else "no eval), "))

    def evaluate(self, trainer, epoch: int) -> dict:
        """Exact measures on the held-out edges: every node embedded once (layer-wise), then
        each rank predicts its share of the val and test edges, in batches of
        --eval-batch-size edges."""
        import torch

        with torch.no_grad():
            return {**self._evaluate(trainer), "eval": "exact"}

    def _evaluate(self, trainer) -> dict:
        import torch

        from fastsample.distributed import FeatureGather
        from fastsample.loading.layerwise import layerwise

        c, comm, model = self.config, trainer.comm, trainer.model
        labelled = trainer.loaders["train"].source.labelled
        emb = layerwise(model, trainer.shard, comm, c.eval_batch_size, trainer.device, progress=not c.quiet,
                        inputs=trainer.embeddings.shards() if trainer.embeddings is not None else None,
                        every_type=True)
        gather = FeatureGather(comm, trainer.shard.type_runs, emb)
        out = {}
        for split in ("val", "test"):
            edges, labels = np.asarray(labelled.edges[split]), np.asarray(labelled.labels[split])
            steps = max(comm.allgather_object(math.ceil(len(edges) / c.eval_batch_size)))
            total = self.sums(np.zeros((0, model.mlp[-1].out_features), np.float32), labels[:0])
            for step in range(steps):  # the same count on every rank: the gather is collective
                e = edges[step * c.eval_batch_size:(step + 1) * c.eval_batch_size]
                ids, inverse = np.unique(e.ravel().astype(np.int64), return_inverse=True)
                h = torch.from_numpy(gather.gather(ids).in_order()).to(trainer.device)
                if not len(e):  # this rank's share ran out before the others': it only serves rows
                    continue
                at = torch.from_numpy(inverse.reshape(-1, 2))
                pred = model.predict(h[at[:, 0]], h[at[:, 1]]).float().cpu().numpy()
                total += self.sums(pred, labels[step * c.eval_batch_size:(step + 1) * c.eval_batch_size])
            comm.all_reduce(total)
            out.update(self.measures(total, split))
        return out
