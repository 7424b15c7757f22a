"""Hot-feature cache: each rank keeps a read-only copy of the feature rows it would
otherwise fetch most often from other ranks, so the gather requests only rows that are
neither owned nor cached. The rows are copies of the owners' rows, so training is
bitwise the same with and without a cache; only the bytes on the wire change.

Which rows (``policy``):
  degree     the non-owned nodes with the most out-edges (how often a node is some node's
             in-neighbour): cheap, needs no sampling, blind to the fanouts and the seeds.
  frequency  the non-owned nodes that appear most often among the input nodes
             (mfgs[0].src_ids) of this rank's own batches of the first whole epoch
             (pre-sampled), ties to the most out-edges. The sampler is deterministic, so
             these are exactly the batches training will draw in that epoch, and later
             epochs draw from the same distribution; where that epoch fetched fewer
             distinct rows than the cache holds (a good partition, small batches), the
             rest of the cache goes by degree, as later epochs fetch other rows.
The cache is built collectively at start-up (NodeLoader.warm_up, which supplies the
scores): each rank picks its ids, then fetches their rows with one gather. It holds the
rows of each node type at that type's width and dtype (untyped data: one type);
featureless types and learnable embedding rows (which change every step) are never
cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fastsample import bf16, int8


@dataclass(frozen=True)
class CachedRows:
    """Sorted global ids (none owned by this rank) of one node type and their rows, in that order."""

    ids: np.ndarray  # (C,) int64, sorted
    rows: np.ndarray  # (C, F), the shard's dtype

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + self.rows.nbytes

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Position of each id in the cache, -1 where it is not cached."""
        if not len(self.ids):
            return np.full(len(ids), -1, dtype=np.int64)
        if self._slots is not None:
            lo, slots = self._slots
            at = np.clip(ids, lo, lo + len(slots) - 1) - lo
            return np.where((ids >= lo) & (ids < lo + len(slots)), slots[at], -1).astype(np.int64, copy=False)
        at = np.searchsorted(self.ids, ids)
        at[at == len(self.ids)] = 0
        return np.where(self.ids[at] == ids, at, -1)

    @cached_property
    def _slots(self) -> tuple[int, np.ndarray] | None:
        """(the lowest cached id, each id's position from it on, -1 where not cached) where
        that table costs no more memory than the cached rows: a lookup is then one read per
        id in a small table, not a binary search (~30 ms a step for 350k ids)."""
        lo, hi = int(self.ids[0]), int(self.ids[-1]) + 1
        if 4 * (hi - lo) > self.rows.nbytes:
            return None
        slots = np.full(hi - lo, -1, dtype=np.int32)
        slots[self.ids - lo] = np.arange(len(self.ids), dtype=np.int32)
        return lo, slots


@dataclass(frozen=True)
class FeatureCache:
    """Per node type (its index in the gather's types; untyped data: 0) the CachedRows of that type."""

    by_type: dict

    @property
    def ids(self) -> np.ndarray:
        """Every cached id, sorted."""
        parts = [c.ids for c in self.by_type.values()]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.by_type.values())


def as_stored(rows: np.ndarray, dtype, scale: np.ndarray | None = None) -> np.ndarray:
    """Gathered rows back in the shard's dtype (a cache holds rows as the shard does; int8
    ones, which come decoded, quantized again with their ``scale``: the same integers)."""
    if rows.dtype == dtype:
        return rows
    if dtype == int8.DTYPE:
        return int8.quantize(rows, scale)
    return bf16.narrow(rows) if dtype == bf16.BITS else rows.astype(dtype)


def degree_scores(part, comm) -> np.ndarray:
    """Each node's out-degree (how often it is some node's in-neighbour), from the rank's
    share ``part``: the whole topology (hybrid), or its owned rows summed over ranks
    (vanilla; collective then)."""
    n = part.num_nodes
    if part.graph is not None:
        return np.bincount(np.asarray(part.graph.indices), minlength=n).astype(np.int64)
    counts = np.bincount(np.asarray(part.local_graph.indices), minlength=n).astype(np.int64)
    comm.all_reduce(counts)
    return counts


def frequency_scores(inputs, num_nodes: int, degrees: np.ndarray) -> np.ndarray:
    """How often each node appears in ``inputs``, an iterable of input-id arrays (the
    mfgs[0].src_ids of the batches the cache is for), ties ranked by ``degrees``
    (degree_scores): count * (max degree + 1) + degree."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    for ids in inputs:
        counts += np.bincount(ids, minlength=num_nodes)
    return counts * (int(degrees.max(initial=0)) + 1) + degrees


def build_cache(gather, scores: np.ndarray, fraction: float) -> FeatureCache:
    """This rank's cache: the ``fraction`` of all nodes (rounded down) with the highest
    ``scores`` among those this rank may cache (``gather.uncacheable()``: its own rows,
    which never cross the network, and on typed data rows without features or learnable
    ones) and would fetch (score > 0), their rows fetched through ``gather`` (a
    FeatureGather; one collective fetch, as a step's). Collective: every
    rank calls it."""
    if not 0 <= fraction < 1:
        raise ValueError(f"fraction must be in [0, 1) (got {fraction})")
    n = len(scores)
    scores = scores.copy()
    for lo, hi in gather.uncacheable():
        scores[lo:hi] = -1
    capacity = min(int(fraction * n), int(np.count_nonzero(scores >= 0)))
    # highest scores first, ties to the lower id; never a node this rank never fetches
    top = np.argsort(-scores, kind="stable")[:capacity]
    ids = np.sort(top[scores[top] > 0]).astype(np.int64)
    gather.cache = None
    return gather.cache_rows(ids)
