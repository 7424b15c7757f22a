"""NodeLoader: mini-batches of sampled MFGs and gathered input features, the one data path
(the built-in trainer's too).

    from fastsample.loader import NodeLoader
    loader = NodeLoader("data/cora", fanouts=[10, 10], batch_size=64)     # one process
    loader = NodeLoader("data/cora-2", fanouts=[10, 10], batch_size=64,    # under mpiexec/srun
                        comm=fastsample.comm.create("mpi"))
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:    # the same number of batches on every rank
            out = model(batch.blocks, batch.x)
            loss = cross_entropy(out, batch.y)

Each step a rank takes its next ``batch_size`` nodes of the split (shuffled per epoch
when ``shuffle``), samples the MFGs around them (hybrid: locally on the replicated
topology; vanilla: 2 rounds per lower layer) and gathers the input rows (2 rounds).
Sampling follows the RNG contract (fastsample/sampling/rng.py): the same
(seed, epoch, step, rank) gives the same batch with every kernel and mode. Every rank runs
``len(loader)`` steps, the most any rank needs; a rank whose split runs out first gets
empty batches (zero seeds) but still takes part in the collectives.

With ``prefetch=depth`` a background thread samples and gathers up to ``depth`` steps
ahead (fastsample/prefetch.py) on a duplicate of ``comm``, so the caller's own
collectives (the gradient all-reduce) never interleave with the loader's. The batches
are the same, bitwise; only when their time is spent changes. Stopping early (``break``)
must happen after the same step on every rank, as with any collective loop.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fastsample import bf16
from fastsample.allocator import available_memory
from fastsample.block import Block
from fastsample.choices import CACHE_POLICIES, MODES, PRECISIONS, check_choice, check_fanouts
from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.config import ConfigError
from fastsample.distributed import FeatureGather
from fastsample.distributed.cache import FeatureCache, build_cache, degree_scores, frequency_scores
from fastsample.distributed.typed_gather import TypedGather
from fastsample.graph import SPLITS, load_dataset
from fastsample.partition import RankPartition, load_partition
from fastsample.prefetch import Prefetcher
from fastsample.sampling import MFG, LocalSampler, Sampler, get_num_threads, set_num_threads
from fastsample.typed_block import TypedBlock


@dataclass
class Batch:
    """One step's data on one rank.

    seeds:  int64 (B,) global ids of the nodes whose outputs are trained (B may be 0)
    x:      (blocks[0].num_src, F) input features, writable, on the loader's device: float32, or
            with precision "bf16" 16-bit (bfloat16; float16 where the features are stored so).
            Typed data: {node type: (its input nodes, its width) float32}; a featureless
            type's rows are its learnable embeddings (a leaf tensor that takes a gradient)
            when the loader has ``embeddings``, else None
    y:      int64 (B,) labels of the seeds, on the loader's device
    mfgs:   the sampled MFGs (numpy, global ids in src_ids), input layer first
    blocks: the same as Blocks, what a model's forward takes (see fastsample/block.py);
            typed data: TypedBlocks (fastsample/typed_block.py: per-relation edge lists)
    sample_s, gather_s: seconds this rank spent sampling and gathering for it
    wait_s: seconds the caller waited for it: all of the above without prefetch, only
            what the prefetch did not hide with it
    route:  (gather, route) of the embedding rows in x, for ShardedEmbeddings.step; else None
    """

    seeds: torch.Tensor
    x: torch.Tensor | dict
    y: torch.Tensor
    mfgs: list[MFG]
    blocks: list
    sample_s: float
    gather_s: float
    wait_s: float = 0.0
    route: tuple | None = None

    def edge_index(self, i: int) -> torch.Tensor:
        """Layer i's edges, PyG's layout: (2, E_i) int64, row 0 source position, row 1 destination position."""
        return self.blocks[i].edge_index

    def size(self, i: int) -> tuple[int, int]:
        """Layer i's (num_src, num_dst)."""
        return self.blocks[i].size

    def __len__(self) -> int:
        return len(self.seeds)


def open_data(data, comm: Communicator, mode: str = "hybrid") -> RankPartition:
    """This rank's share of ``data``: a partition directory (python -m fastsample.partition)
    built for ``comm.size`` ranks, or, for one process, a dataset directory."""
    if isinstance(data, RankPartition):
        return data
    path = Path(data)
    if (path / "partition.json").is_file():
        return load_partition(path, comm.rank, comm.size, mode)
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"{path}: neither a partition (partition.json) nor a dataset (meta.json)")
    if comm.size != 1:
        raise ValueError(f"{path}: a dataset directory serves one process; for {comm.size} ranks "
                         f"partition it first (python -m fastsample.partition {path} OUT --parts {comm.size})")
    return RankPartition.whole(load_dataset(path))


def narrow_features(part: RankPartition) -> RankPartition:
    """``part`` with its float32 features narrowed to bfloat16 (in memory, half the bytes);
    16-bit features are returned as they are (on typed data, per node type)."""
    narrow = lambda f: bf16.narrow(f) if f is not None and f.dtype == np.float32 else f
    if part.typed:
        return dataclasses.replace(part, features={t: narrow(f) for t, f in part.features.items()})
    return part if part.features.dtype != np.float32 else dataclasses.replace(part, features=narrow(part.features))


class NodeLoader:
    """Batches of ``split`` nodes with their sampled MFGs and input features; see the module doc.

    Args:
        data: a partition directory (a job: one part per rank), a dataset directory (one
            process), or an already opened RankPartition (to share it between loaders).
        fanouts: neighbours per layer, input layer first; -1 takes all of them.
        batch_size: seeds per rank per step.
        split: "train", "val" or "test".
        shuffle: a new order every epoch (default: for "train" only).
        seed: the sampling and shuffling seed (the RNG contract's ``seed``).
        comm: the job's communicator (fastsample.comm.create); None for one process.
        kernel: the sampling kernel: "native", "numba", "twostep" or "auto" (vanilla mode's
            owner side: native or numba).
        sampler: a Sampler (fastsample.sampling) to use instead of the one ``mode`` and
            ``kernel`` name.
        mode: "hybrid" (topology replicated) or "vanilla" (topology partitioned).
        device: where batch.x, batch.y and the blocks' tensors go.
        max_steps: cap on the steps per epoch.
        prefetch: steps made ahead in a background thread (0: none; 1 or 2 is enough).
        precision: "fp32" (batch.x float32) or "bf16": the features are gathered and sent in
            16 bits (float32 ones narrowed to bfloat16 once, here; float16 ones as stored)
            and batch.x keeps them so (fastsample/bf16.py). Pass the same opened partition
            (open_data, then narrow_features) to several loaders to narrow it once.
        cache_fraction: keep a copy of this fraction of all nodes' feature rows, those
            this rank would fetch most (fastsample/distributed/cache.py), built by
            ``warm_up`` (or the first iteration); 0: none. Same batches; fewer bytes on the wire.
        cache_policy: "frequency" or "degree": which rows the cache keeps.
        embeddings: typed data: the featureless types' sharded tables
            (fastsample/distributed/embedding.py): their input rows are gathered with the
            features, in the same two rounds (with prefetch, at the step instead, in two
            of their own, so that they carry every update before it), and batch.route lets
            ``embeddings.step(batch)`` send the rows' gradients back.
    """

    def __init__(self, data, fanouts, batch_size: int, split: str = "train", shuffle: bool | None = None,
                 seed: int = 0, comm: Communicator | None = None, kernel: str = "auto", mode: str = "hybrid",
                 device="cpu", max_steps: int | None = None, prefetch: int = 0, sampler: Sampler | None = None,
                 precision: str = "fp32", cache_fraction: float = 0.0, cache_policy: str = "frequency",
                 embeddings=None):
        check_choice(split, SPLITS, "split")
        check_choice(mode, MODES, "mode")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer (got {batch_size!r})")
        self.fanouts = check_fanouts(fanouts)
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be positive (got {max_steps})")
        if not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
            raise ValueError(f"prefetch must be a non-negative integer (got {prefetch!r})")
        check_choice(precision, PRECISIONS, "precision")
        check_choice(cache_policy, CACHE_POLICIES, "cache_policy")
        if not 0 <= cache_fraction < 1:
            raise ConfigError("cache_fraction", f"must be in [0, 1) (got {cache_fraction!r})")
        self.comm = comm if comm is not None else LocalCommunicator()
        self.part = open_data(data, self.comm, mode)
        if precision == "bf16":
            self.part = narrow_features(self.part)
        self.split, self.batch_size, self.seed, self.mode = split, int(batch_size), int(seed), mode
        self.shuffle = split == "train" if shuffle is None else bool(shuffle)
        self.device = torch.device(device)
        self.rank = self.comm.rank
        self.ids = np.asarray(getattr(self.part, split))
        self.lo = int(self.part.offsets[self.rank])  # the global id of labels' first row
        self.prefetch = int(prefetch)
        # the data path's collectives: on their own communicator when a thread runs them
        data_comm = self.comm.dup() if self.prefetch else self.comm
        if self.part.typed:
            runs = np.asarray(self.part.layout["type_runs"], dtype=np.int64)
            topology = self.part.graph if self.part.graph is not None else self.part.local_graph
            self.schema = (topology.node_types, topology.edge_types)
            T = len(self.schema[0])
            self.lo = int(runs[self.rank * T + self.schema[0].index(self.part.target_type)])
            self.embeddings = embeddings
            tables = self._check_embeddings(embeddings)
            # without prefetch, the tables' rows ride in the features' two rounds; with it,
            # the rows come at the step (_fill_embeddings), never from before an update
            shards = {**self.part.features, **(tables if not self.prefetch else {})}
            self.gather = TypedGather(data_comm, runs, shards, keep_dtype=precision == "bf16",
                                      learnable=() if self.prefetch else tables)
            self.embed_gather = (TypedGather(self.comm, runs, {t: tables.get(t) for t in shards}, learnable=tables)
                                 if self.prefetch and tables else None)
            # a node's index among all nodes of its type = its id + its run's base
            sizes = np.diff(runs).reshape(-1, T)
            before = np.cumsum(sizes, axis=0) - sizes  # nodes of the type in earlier ranks' runs
            self.run_base = before.reshape(-1) - runs[:-1]
        else:
            if embeddings is not None:
                raise ValueError(f"{self.part.path}: embeddings: the data is not typed (its nodes all have features)")
            self.embeddings = self.embed_gather = None
            self.gather = FeatureGather(data_comm, self.part.offsets, self.part.features,
                                        keep_dtype=precision == "bf16")
        if sampler is not None:
            if not isinstance(sampler, Sampler):
                raise TypeError(f"sampler must implement fastsample.sampling.Sampler (got {type(sampler).__name__})")
            self.sampler = sampler
        elif mode == "hybrid":
            self.sampler = LocalSampler(self.part.graph, self.rank, kernel)
        else:
            from fastsample.distributed.vanilla import VanillaSampler

            self.sampler = VanillaSampler(data_comm, self.part.offsets, self.part.local_graph, kernel)
        # every rank runs the same number of steps: the most any rank needs
        self.epoch_steps = max(math.ceil(k / self.batch_size) for k in self.part.split_sizes(split))
        self.steps = self.epoch_steps if max_steps is None else min(self.epoch_steps, max_steps)
        self.epoch, self.first_step = 0, 0
        self.cache_fraction, self.cache_policy = float(cache_fraction), cache_policy
        if self.cache_fraction:
            f = self.part.features
            row = (max((v.shape[1] * v.dtype.itemsize for v in f.values() if v is not None), default=0)
                   if self.part.typed else f.shape[1] * f.dtype.itemsize)  # typed: at most the widest type's
            need = int(self.cache_fraction * self.part.num_nodes) * row
            available = available_memory()
            if available is not None and need > available // 2:
                raise ConfigError("cache_fraction", f"{self.cache_fraction}: the cache needs {need / 2**20:,.0f} MiB "
                                  f"per rank, over half of the {available / 2**20:,.0f} MiB available; lower it")

    def _check_embeddings(self, embeddings) -> dict:
        """{type: shard} of the tables, each a featureless type's rows of this rank."""
        if embeddings is None:
            return {}
        runs, T = self.part.layout["type_runs"], len(self.schema[0])
        shards = embeddings.shards()
        for t, shard in shards.items():
            if t not in self.part.features or self.part.features[t] is not None:
                raise ValueError(f"embeddings: {t!r} is not a featureless node type of {self.part.path}")
            i = self.schema[0].index(t)
            rows = runs[self.rank * T + i + 1] - runs[self.rank * T + i]
            if len(shard) != rows:
                raise ValueError(f"embeddings: table {t!r} holds {len(shard)} rows, rank {self.rank} owns {rows}")
        return shards

    @property
    def num_classes(self) -> int:
        return int(self.part.num_classes)

    @property
    def feature_dim(self) -> int:
        return self.part.feature_dim

    def set_epoch(self, epoch: int, first_step: int = 0) -> None:
        """The epoch whose order and samples the next iteration gives (as DistributedSampler),
        from step ``first_step`` on (the rest of an epoch a checkpoint stopped inside)."""
        self.epoch, self.first_step = int(epoch), int(first_step)

    def __len__(self) -> int:
        return self.steps

    def order(self) -> np.ndarray:
        """This epoch's order of the rank's split nodes: step k takes the k-th batch_size of them."""
        if not self.shuffle:
            return self.ids
        return self.ids[np.random.default_rng([self.seed, self.epoch, self.rank]).permutation(len(self.ids))]

    def seeds(self, order: np.ndarray, step: int) -> np.ndarray:
        """Step ``step``'s seeds from an epoch's ``order``: its batch_size nodes, sorted."""
        return np.sort(order[step * self.batch_size:(step + 1) * self.batch_size])

    def __iter__(self):
        self._ensure_cache()  # here at the latest (warm_up builds it before anything is timed)
        if not self.prefetch:
            yield from self._batches()
            return
        with Prefetcher(self._batches(get_num_threads()), self.prefetch, f"fastsample-prefetch-{self.split}") as ahead:
            for batch in ahead:
                if self.embed_gather is not None:
                    self._fill_embeddings(batch)
                yield batch

    def _batches(self, threads: int | None = None):
        if threads is not None:  # in the prefetch thread: the kernels' thread counts are per thread
            set_num_threads(threads)
        order = self.order()
        for step in range(self.first_step, self.steps):
            yield self.batch(self.seeds(order, step), step)

    def sample(self, seeds: np.ndarray, step: int, seed: int | None = None) -> list[MFG]:
        """The MFGs around ``seeds`` for (seed, this epoch, step, this rank). Collective in vanilla mode."""
        seed = self.seed if seed is None else seed
        return self.sampler.sample(seeds, self.fanouts, seed=seed, epoch=self.epoch, step=step)

    def batch(self, seeds: np.ndarray, step: int) -> Batch:
        """The batch of ``seeds`` (this rank's own nodes) at ``step``. Collective."""
        t0 = time.perf_counter()
        mfgs = self.sample(seeds, step)
        t1 = time.perf_counter()
        route = None
        if self.part.typed:
            rows, src_type, _, route = self.gather.gather(mfgs[0].src_ids)
            x = self._typed_x(rows)
            route = (self.gather, route) if self.embeddings is not None and not self.prefetch else None
            t2 = time.perf_counter()
            blocks = self._typed_blocks(mfgs, src_type)
        else:
            x = bf16.to_tensor(self.gather(mfgs[0].src_ids))
            t2 = time.perf_counter()
            blocks = [Block.from_mfg(m, self.device) for m in mfgs]
        y = torch.from_numpy(np.asarray(self.part.labels[np.asarray(seeds) - self.lo], dtype=np.int64))
        if self.device.type == "cuda" and not self.part.typed:  # pinned memory: the copies run asynchronously
            x = x.pin_memory().to(self.device, non_blocking=True)
            y = y.to(self.device)
        return Batch(torch.from_numpy(np.asarray(seeds, dtype=np.int64)), x, y, mfgs, blocks, t1 - t0, t2 - t1,
                     wait_s=time.perf_counter() - t0, route=route)

    def _typed_x(self, rows: dict) -> dict:
        """batch.x of typed rows: the tables' rows as leaf tensors that take a gradient."""
        tables = self.embeddings.tables if self.embeddings is not None else {}
        return {t: None if r is None else bf16.to_tensor(r).to(self.device).requires_grad_(t in tables)
                for t, r in rows.items()}

    def _fill_embeddings(self, batch: Batch) -> None:
        """With prefetch: the tables' rows of a prefetched batch, gathered now (after every
        update before this step), in two rounds on the caller's communicator."""
        t0 = time.perf_counter()
        rows, _, _, route = self.embed_gather.gather(batch.mfgs[0].src_ids)
        batch.x.update(self._typed_x({t: rows[t] for t in self.embeddings.tables}))
        batch.route = (self.embed_gather, route)
        dt = time.perf_counter() - t0
        batch.gather_s += dt
        batch.wait_s += dt

    def _typed_blocks(self, mfgs: list[MFG], input_types: np.ndarray) -> list:
        """TypedBlocks; each layer's source types are the next-lower layer's first rows' (its
        destinations are the next layer's sources), so the input layer's types serve all."""
        node_types, edge_types = self.schema
        blocks = []
        for m in mfgs:
            blocks.append(TypedBlock.from_mfg(m, input_types[:m.num_src], node_types, edge_types, self.device))
        ids = np.asarray(mfgs[0].src_ids, dtype=np.int64)
        index = ids + self.run_base[np.searchsorted(self.gather.runs, ids, side="right") - 1]
        blocks[0].input_index = {t: torch.from_numpy(index[input_types == i]).to(self.device)
                                 for i, t in enumerate(node_types)}
        return blocks

    def warm_up(self) -> None:
        """Load the kernels and touch the maps before anything is timed (samples one node
        with a key of its own, so no batch's draws are used; faults the feature shards in),
        and build the feature cache if one was asked for and none is attached. Collective
        in vanilla mode, and with a cache."""
        self.sample(self.ids[:1], 0, seed=self.seed ^ 0x3A3A3A)
        self.gather.warm_up()
        self._ensure_cache()

    def _ensure_cache(self) -> None:
        """Build the feature cache asked for, unless one is there. Collective."""
        if self.cache_fraction and self.gather.cache is None:
            if self.cache_policy == "degree":
                scores = degree_scores(self.part, self.gather.comm)
            else:  # the input nodes of this rank's whole first epoch (whatever max_steps caps)
                scores = frequency_scores(self._epoch_inputs(0), self.part.num_nodes)
            self.gather.cache = build_cache(self.gather, scores, self.cache_fraction)

    def _epoch_inputs(self, epoch: int):
        """The input ids (mfgs[0].src_ids) of every step of ``epoch``; the same collective
        calls on every rank (vanilla samples collectively)."""
        current = (self.epoch, self.first_step)
        try:
            self.set_epoch(epoch)
            order = self.order()
            for step in range(self.epoch_steps):
                yield self.sample(self.seeds(order, step), step)[0].src_ids
        finally:
            self.set_epoch(*current)

    @property
    def cache(self) -> FeatureCache | None:
        """The feature cache the gather uses (None: none)."""
        return self.gather.cache

    def attach_cache(self, cache: FeatureCache | None) -> None:
        """Use ``cache`` (e.g. another loader's over the same partition) instead of building
        one: the gather then requests only rows neither owned nor in it."""
        self.gather.cache = cache

    def gather_counts(self) -> dict[str, int]:
        """Input rows this loader's gather has served since it was made: ``local`` (owned),
        ``cached`` (from the cache) and ``remote`` (fetched from other ranks)."""
        g = self.gather
        return {"local": g.rows_local, "cached": g.rows_cached, "remote": g.rows_remote}
