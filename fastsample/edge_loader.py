"""EdgeLoader: mini-batches for link prediction, beside NodeLoader and through the same
sampler protocol and gather.

    from fastsample.edge_loader import EdgeLoader
    loader = EdgeLoader("data/cora-link-2", fanouts=[10, 10], batch_size=256, negatives=1, comm=comm)
    for batch in loader:
        h = encoder(batch.blocks, batch.x)          # one row per node of batch.seeds
        pos = score(h[batch.src], h[batch.dst])     # (B,)
        neg = score(h[batch.src, None], h[batch.neg])   # (B, k)

Each step a rank takes its next ``batch_size`` positive edges of the split (the edges
whose destination it owns; python -m fastsample.data link-split made them), draws ``k``
negative destinations for each (uniform, or by in-degree^0.75 as word2vec and PinSage;
deterministic under the step's key; ``strict`` redraws a negative that is an edge, checked
against the replicated topology), and samples the MFGs around every endpoint with the
batch's own edges excluded *while picking* (exclude "self": src -> dst; "reverse": and
dst -> src; "none"), so a fanout stays full and no target edge leaks into its own
messages (fastsample/sampling/exclusion.py). Every kernel and both modes give the same
batches. Every rank runs ``len(loader)`` steps, the most any rank needs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import torch

from fastsample import bf16
from fastsample.block import Block
from fastsample.choices import MODES, check_choice, check_fanouts
from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.distributed import FeatureGather
from fastsample.edge_splits import EDGE_SPLITS, EdgeSplit, load_edge_split
from fastsample.loader import open_data
from fastsample.partition import RankPartition
from fastsample.sampling import MFG, LocalSampler

EXCLUDE = ("none", "self", "reverse")
NEGATIVE_SAMPLERS = ("uniform", "degree")
_SALT = 0x4E454753  # negatives draw from a key space of their own


@dataclass
class EdgeBatch:
    """One step's link-prediction data on one rank.

    src, dst: int64 (B,) positions in ``seeds`` of the positive edges' endpoints
    neg:      int64 (B, k) positions in ``seeds`` of each positive's negative destinations
    edges:    int64 (B, 2) the positive edges (global ids); negatives: (B, k) global ids
    seeds:    the unique endpoints, sorted: the last MFG's destinations (the encoder's rows)
    x, mfgs, blocks, sample_s, gather_s, wait_s: as NodeLoader's Batch
    """

    src: torch.Tensor
    dst: torch.Tensor
    neg: torch.Tensor
    edges: np.ndarray
    negatives: np.ndarray
    seeds: np.ndarray
    x: torch.Tensor
    mfgs: list[MFG]
    blocks: list
    sample_s: float
    gather_s: float
    wait_s: float = 0.0

    def __len__(self) -> int:
        return len(self.edges)


def open_edge_split(part: RankPartition) -> EdgeSplit:
    """This share's edges: a partition part's link/ (its destinations' edges), or a dataset's."""
    meta = part.layout["dataset"].get("link")
    if meta is None:
        raise ValueError(f"{part.path}: no edge split (make one: python -m fastsample.data link-split DATASET OUT)")
    if (Path(part.path) / "partition.json").is_file():
        return load_edge_split(Path(part.path) / f"part-{part.rank}", part.num_nodes, meta)
    return load_edge_split(part.path, part.num_nodes, meta, graph=part.graph)


@numba.njit(nogil=True, cache=True)
def has_edge(indptr, indices, src, dst):
    """Whether src[i] -> dst[i] is an edge (dst's in-edges hold src)."""
    out = np.zeros(len(src), dtype=np.bool_)
    for e in range(len(src)):
        for p in range(indptr[dst[e]], indptr[dst[e] + 1]):
            if indices[p] == src[e]:
                out[e] = True
                break
    return out


class EdgeLoader:
    """Batches of ``split`` edges with negatives, MFGs and input features; see the module doc.

    Args:
        data: a partition directory of a link-split dataset (one part per rank), its dataset
            directory (one process), or an opened RankPartition.
        fanouts, batch_size (positive edges per rank per step), comm, kernel, mode, device,
            max_steps: as NodeLoader's.
        split: "train", "val" or "test" (the held-out splits' own fixed negatives are for
            exact evaluation; here they get drawn ones as training does).
        negatives: k, negative destinations per positive edge.
        negative_sampler: "uniform" over all nodes, or "degree" (in-degree^0.75).
        strict: redraw a negative that is an edge of the topology (hybrid mode).
        exclude: "self", "reverse" (the default for an undirected split) or "none".
        shuffle, seed: the epoch order and the sampling key, as NodeLoader's.
    """

    def __init__(self, data, fanouts, batch_size: int, split: str = "train", negatives: int = 1,
                 negative_sampler: str = "uniform", strict: bool = False, exclude: str | None = None,
                 shuffle: bool | None = None, seed: int = 0, comm: Communicator | None = None, kernel: str = "auto",
                 mode: str = "hybrid", device="cpu", max_steps: int | None = None):
        check_choice(split, EDGE_SPLITS, "split")
        check_choice(mode, MODES, "mode")
        check_choice(negative_sampler, NEGATIVE_SAMPLERS, "negative_sampler")
        if exclude is not None:
            check_choice(exclude, EXCLUDE, "exclude")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer (got {batch_size!r})")
        if not isinstance(negatives, (int, np.integer)) or negatives < 1:
            raise ValueError(f"negatives must be a positive integer (got {negatives!r})")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be positive (got {max_steps})")
        self.fanouts = check_fanouts(fanouts)
        self.comm = comm if comm is not None else LocalCommunicator()
        self.part = open_data(data, self.comm, mode)
        if self.part.typed:
            raise ValueError(f"{self.part.path}: typed data: link prediction takes untyped graphs for now")
        if strict and mode == "vanilla":
            raise ValueError("strict: negatives are checked against the whole topology, which vanilla mode does not "
                             "hold (use mode hybrid, or strict=False)")
        self.edges_split = open_edge_split(self.part)
        self.edges = np.asarray(getattr(self.edges_split, split), dtype=np.int64)
        self.exclude = exclude if exclude is not None else ("reverse" if self.edges_split.undirected else "self")
        self.split, self.batch_size, self.k = split, int(batch_size), int(negatives)
        self.negative_sampler, self.strict, self.seed, self.mode = negative_sampler, bool(strict), int(seed), mode
        self.shuffle = split == "train" if shuffle is None else bool(shuffle)
        self.device = torch.device(device)
        self.rank, self.epoch, self.first_step = self.comm.rank, 0, 0
        self.gather = FeatureGather(self.comm, self.part.offsets, self.part.features)
        if mode == "hybrid":
            self.sampler = LocalSampler(self.part.graph, self.rank, kernel)
        else:
            from fastsample.distributed.vanilla import VanillaSampler

            self.sampler = VanillaSampler(self.comm, self.part.offsets, self.part.local_graph, kernel, own_seeds=False)
        self._cumulative = self._degree_weights() if negative_sampler == "degree" else None
        sizes = self.comm.allgather_object(len(self.edges))
        self.epoch_steps = max(math.ceil(k / self.batch_size) for k in sizes)
        self.steps = self.epoch_steps if max_steps is None else min(self.epoch_steps, max_steps)

    def _degree_weights(self) -> np.ndarray:
        """Cumulative in-degree^0.75 over all nodes (vanilla: the owned ranges' gathered)."""
        if self.part.graph is not None:
            degree = np.diff(np.asarray(self.part.graph.indptr, dtype=np.int64))
        else:
            degree = np.concatenate(self.comm.allgather_object(np.diff(np.asarray(self.part.local_graph.indptr,
                                                                                  dtype=np.int64))))
        weights = np.cumsum(degree.astype(np.float64) ** 0.75)
        if weights[-1] <= 0:
            raise ValueError(f"{self.part.path}: negative_sampler degree: the graph has no edges")
        return weights / weights[-1]

    def set_epoch(self, epoch: int, first_step: int = 0) -> None:
        """The epoch the next iteration gives, from step ``first_step`` on (as NodeLoader's)."""
        self.epoch, self.first_step = int(epoch), int(first_step)

    def __len__(self) -> int:
        return self.steps

    def order(self) -> np.ndarray:
        """This epoch's order of the rank's edges (rows of ``edges``)."""
        if not self.shuffle:
            return np.arange(len(self.edges))
        return np.random.default_rng([self.seed, self.epoch, self.rank, _SALT]).permutation(len(self.edges))

    def __iter__(self):
        order = self.order()
        for step in range(self.first_step, self.steps):
            yield self.batch(self.edges[order[step * self.batch_size:(step + 1) * self.batch_size]], step)

    def draw_negatives(self, src: np.ndarray, step: int) -> np.ndarray:
        """(B, k) negative destinations for sources ``src`` at ``step`` (this epoch, this rank)."""
        n = self.part.num_nodes
        rng = np.random.default_rng([self.seed, self.epoch, step, self.rank, _SALT])
        draw = ((lambda size: rng.integers(0, n, size=size)) if self._cumulative is None else
                (lambda size: np.minimum(np.searchsorted(self._cumulative, rng.random(size), side="right"), n - 1)))
        out = draw((len(src), self.k))
        if self.strict:
            g = self.part.graph
            for _ in range(100):
                s = np.repeat(src, self.k)
                bad = (has_edge(g.indptr, g.indices, s.astype(g.indices.dtype), out.ravel().astype(g.indices.dtype))
                       | (out.ravel() == s)).reshape(out.shape)
                if not bad.any():
                    break
                out[bad] = draw(int(bad.sum()))
            else:
                raise ValueError("strict negatives: could not draw non-edges for some sources in 100 rounds")
        return out.astype(np.int64)

    def sample(self, edges: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[MFG]]:
        """The sampling half of a batch of positive ``edges`` (B, 2) at ``step``: (negatives
        (B, k), the unique endpoints, each endpoint's position in them (src, dst, then the
        negatives), the MFGs). Collective in vanilla mode."""
        src, dst = edges[:, 0], edges[:, 1]
        neg = self.draw_negatives(src, step)
        seeds, inverse = np.unique(np.concatenate([src, dst, neg.ravel()]), return_inverse=True)
        exclude = None
        if self.exclude == "self":
            exclude = (src, dst)
        elif self.exclude == "reverse":
            exclude = (np.concatenate([src, dst]), np.concatenate([dst, src]))
        mfgs = self.sampler.sample(seeds.astype(self._id_dtype()), self.fanouts, seed=self.seed, epoch=self.epoch,
                                   step=step, exclude=exclude)
        return neg, seeds, inverse, mfgs

    def batch(self, edges: np.ndarray, step: int) -> EdgeBatch:
        """The batch of positive ``edges`` (B, 2) at ``step``. Collective."""
        t0 = time.perf_counter()
        neg, seeds, inverse, mfgs = self.sample(edges, step)
        B = len(edges)
        t1 = time.perf_counter()
        x = bf16.to_tensor(self.gather(mfgs[0].src_ids))
        t2 = time.perf_counter()
        blocks = [Block.from_mfg(m, self.device) for m in mfgs]
        at = torch.from_numpy(inverse.astype(np.int64))
        return EdgeBatch(at[:B], at[B:2 * B], at[2 * B:].reshape(B, self.k), edges, neg, seeds, x.to(self.device),
                         mfgs, blocks, t1 - t0, t2 - t1, wait_s=time.perf_counter() - t0)

    def gather_counts(self) -> dict[str, int]:
        """Input rows the gather has served: ``local`` (owned) and ``remote`` (as NodeLoader's)."""
        g = self.gather
        return {"local": g.rows_local, "cached": g.rows_cached, "remote": g.rows_remote}

    @property
    def cache(self):
        return None

    def _id_dtype(self):
        g = self.part.graph if self.part.graph is not None else self.part.local_graph
        return g.indices.dtype

    def warm_up(self) -> None:
        """Load the kernels and fault the feature shard in before anything is timed (a key of
        its own). Collective in vanilla mode."""
        self.gather.warm_up()
        seeds = np.asarray(self.part.offsets[self.rank:self.rank + 1], dtype=self._id_dtype())
        seeds = seeds if self.part.offsets[self.rank + 1] > seeds[0] else seeds[:0]
        self.sampler.sample(seeds, self.fanouts, seed=self.seed ^ 0x3A3A3A, epoch=0, step=0)
