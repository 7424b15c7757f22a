"""Learnable embedding tables for the featureless node types of a typed partition, sharded
as features are: rank r holds the rows of its own run of each such type (partition.json's
type_runs), so the tables cost O(N/P) per rank, however large the type.

Each step the loader's typed gather fetches the input nodes' rows in its two rounds, as
if they were features (fastsample/distributed/gather.py); the model reads them as
leaf tensors; after backward, ``step`` sends every row's gradient back to its owner (one
all_to_all, the reverse of the gather's reply) and the owner updates only those rows, in
place, straight from the received rows (fastsample/distributed/row_adam.py: SparseAdam's
rule without its COO gradient). A row several ranks gathered gets their summed gradients;
as the dense gradients, the sum is divided by the ranks (the job's loss is the mean of
the ranks' losses). Checkpoints hold each rank's shard and optimizer state (state_dict).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from fastsample.distributed.row_adam import RowAdam

__all__ = ["ShardedEmbeddings"]


class ShardedEmbeddings:
    """This rank's shards of the embedding tables (see the module doc).

    Args:
        runs: (P * T + 1,) the partition's type runs; rank, num_parts: this rank's place;
        node_types: the graph's node types (order of the runs); featureless: the types that get a table;
        dim: the embeddings' width; lr: Adam's learning rate (RowAdam: SparseAdam's rule);
        seed: the initial rows are N(0, 1) draws keyed by (seed, type, rank);
        order: what identifies which node each row is (node_order: a digest of the rows'
            dataset ids), saved with the state and checked on loading, so that a shard saved
            on one partition is never read as another's rows (None: not checked).
    """

    def __init__(self, runs, rank: int, num_parts: int, node_types, featureless, dim: int, lr: float, seed: int,
                 order: str | None = None):
        self.order = order
        runs = np.asarray(runs, dtype=np.int64)
        T = len(node_types)
        if dim < 1:
            raise ValueError(f"dim must be positive (got {dim})")
        self.dim, self.num_parts = int(dim), int(num_parts)
        self.tables = {}
        for t, name in enumerate(node_types):
            if name in featureless:
                rows = int(runs[rank * T + t + 1] - runs[rank * T + t])
                values = np.random.default_rng([seed, 0xE3B, t, rank]).standard_normal((rows, self.dim), np.float32)
                self.tables[name] = torch.nn.Parameter(torch.from_numpy(values))
        self.optimizer = RowAdam(self.tables, lr) if self.tables else None
        self.seconds = (0.0, 0.0)  # the last step's (gradient all_to_all, update), for the epoch record

    def warm_up(self) -> None:
        """Before anything is timed: load the update's compiled code."""
        if self.optimizer is not None:
            self.optimizer.warm_up()

    def shards(self) -> dict:
        """{type: this rank's rows, as a numpy view the gather reads (updates show through)}."""
        return {t: p.detach().numpy() for t, p in self.tables.items()}

    @property
    def nbytes(self) -> int:
        """This rank's bytes: the rows and Adam's two moments of each."""
        return 3 * sum(p.numel() * 4 for p in self.tables.values())

    def step(self, batch) -> None:
        """Send the gradients of the rows ``batch`` gathered (batch.inputs[type].grad; none: zeros)
        to their owners and update those rows. Collective: every rank, every training step,
        after backward, also when its batch was empty."""
        gather, route = batch.route
        rows = batch.inputs  # learnable rows' .grad: a leaf tensor's, or LearnableRows' (set by the model)
        grads = {t: None if rows[t].grad is None else rows[t].grad.detach().cpu().numpy() for t in self.tables}
        t0 = time.perf_counter()
        received = gather.send_back(route, grads)
        t1 = time.perf_counter()
        for name, (rows, values) in received.items():
            # a row's contributions come in a fixed order (this rank's first, then by rank)
            # and RowAdam sums them in it, so every mode and rerun adds them alike
            self.optimizer.step(name, rows, values, divisor=self.num_parts)
        self.seconds = (t1 - t0, time.perf_counter() - t1)  # (gradients to their owners, the owners' update)

    def state_dict(self) -> dict:
        return {"tables": {t: p.detach().clone() for t, p in self.tables.items()},
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None, "order": self.order}

    def load_state_dict(self, state: dict) -> None:
        saved = state.get("order")  # None: saved before shards said their nodes' order
        if saved is not None and self.order is not None and saved != self.order:
            raise ValueError("saved on another partition of the graph (its rows are other nodes): use the partition "
                             "the run trained on")
        tables = state["tables"]
        if set(tables) != set(self.tables):
            raise ValueError(f"embedding tables {sorted(tables)}, expected {sorted(self.tables)}")
        for t, p in self.tables.items():
            if tables[t].shape != p.shape:
                raise ValueError(f"embedding table {t!r}: {tuple(tables[t].shape)}, expected {tuple(p.shape)}")
            with torch.no_grad():
                p.copy_(tables[t])  # in place: the gather's numpy views stay valid
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
