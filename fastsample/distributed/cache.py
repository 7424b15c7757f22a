"""Hot-feature cache: each rank keeps a read-only copy of the feature rows it would
otherwise fetch most often from other ranks, so the gather requests only rows that are
neither owned nor cached. The rows are copies of the owners' rows, so training is
bitwise the same with and without a cache; only the bytes on the wire change.

Which rows (``policy``):
  degree     the non-owned nodes with the most out-edges (how often a node is some node's
             in-neighbour): cheap, needs no sampling, blind to the fanouts and the seeds.
  frequency  the non-owned nodes that appear most often among the input nodes
             (mfgs[0].src_ids) of this rank's own training batches of the first
             ``presample_epochs`` whole epochs. The sampler is deterministic, so these
             are exactly the batches training will draw in those epochs, and later
             epochs draw from the same distribution.
The cache is built collectively at start-up: each rank picks its ids, then fetches their
rows with one gather.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastsample import bf16

POLICIES = ("degree", "frequency")


@dataclass(frozen=True)
class FeatureCache:
    """Sorted global ids (none owned by this rank) and their feature rows, in that order."""

    ids: np.ndarray  # (C,) int64, sorted
    rows: np.ndarray  # (C, F), the features' dtype

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + self.rows.nbytes

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id in the cache, -1 where it is not cached."""
        if not len(self.ids):
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.searchsorted(self.ids, ids)
        at[at == len(self.ids)] = 0
        return np.where(self.ids[at] == ids, at, -1)


def _scores(loader, policy: str, presample_epochs: int) -> np.ndarray:
    """How often this rank is expected to fetch each node, per node id."""
    part = loader.part
    n = part.num_nodes
    if policy == "degree":
        if part.graph is not None:
            return np.bincount(np.asarray(part.graph.indices), minlength=n).astype(np.int64)
        # vanilla: each rank holds its nodes' in-edges; the out-degrees are their sum
        counts = np.bincount(np.asarray(part.local_graph.indices), minlength=n).astype(np.int64)
        loader.comm.all_reduce(counts)
        return counts
    counts = np.zeros(n, dtype=np.int64)
    epoch = loader.epoch
    try:
        for e in range(presample_epochs):  # the same collective calls on every rank (vanilla samples collectively)
            loader.set_epoch(e)
            order = loader.order()
            for step in range(loader.epoch_steps):  # a whole epoch, whatever max_steps caps
                mfgs = loader.sample(loader.seeds(order, step), step)
                counts += np.bincount(mfgs[0].src_ids, minlength=n)
    finally:
        loader.set_epoch(epoch)
    return counts


def build_cache(loader, fraction: float, policy: str = "frequency", presample_epochs: int = 1) -> FeatureCache:
    """Choose and fetch this rank's cache: ``fraction`` of all nodes (rounded down), the
    non-owned ones this rank is most likely to fetch. Collective: every rank calls it.

    Args:
        loader: the training NodeLoader (its partition, sampler and gather).
        fraction: share of the graph's nodes to cache on every rank, in [0, 1).
        policy: "degree" or "frequency" (see the module doc).
        presample_epochs: epochs of batches the frequency policy counts.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)} (got {policy!r})")
    if not 0 <= fraction < 1:
        raise ValueError(f"fraction must be in [0, 1) (got {fraction})")
    if presample_epochs < 1:
        raise ValueError(f"presample_epochs must be positive (got {presample_epochs})")
    part = loader.part
    lo, hi = int(part.offsets[loader.rank]), int(part.offsets[loader.rank + 1])
    scores = _scores(loader, policy, presample_epochs)
    scores[lo:hi] = -1  # owned rows never cross the network
    capacity = min(int(fraction * part.num_nodes), part.num_nodes - (hi - lo))
    # highest scores first, ties to the lower id; never a node this rank never fetches
    top = np.argsort(-scores, kind="stable")[:capacity]
    ids = np.sort(top[scores[top] > 0]).astype(np.int64)
    loader.gather.cache = None
    rows = loader.gather(ids)  # one collective fetch, as a step's
    stored = loader.gather.shard.dtype  # the cache holds rows as the shard does
    if rows.dtype != stored:
        rows = bf16.narrow(rows) if stored == bf16.BITS else rows.astype(stored)
    return FeatureCache(ids, rows)
