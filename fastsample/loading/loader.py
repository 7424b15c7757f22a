"""The loader: mini-batches of sampled MFGs and gathered input rows, the one data path (the
built-in trainer's, inference's neighbours, a user's own loop), for node and link tasks,
untyped and typed data alike.

    from fastsample.loading import NodeLoader, EdgeLoader
    loader = NodeLoader("data/cora", fanouts=[10, 10], batch_size=64)     # one process
    loader = NodeLoader("data/cora-2", fanouts=[10, 10], batch_size=64,    # under mpiexec/srun
                        comm=fastsample.comm.create("mpi"))
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:    # the same number of batches on every rank
            out = model(batch.blocks, batch.x)
            loss = cross_entropy(out, batch.y)

    links = EdgeLoader("data/cora-link-2", fanouts=[10, 10], batch_size=256, negatives=1, comm=comm)
    for batch in links:
        h = encoder(batch.blocks, batch.x)          # one row per node of batch.seeds
        pos = score(h[batch.src], h[batch.dst])     # (B,)
        neg = score(h[batch.src, None], h[batch.neg])   # (B, k)

Each step a rank takes its next seeds from its seed source (fastsample/loading/seeds.py:
nodes of a split, or edges of a split with negatives and the edges to exclude), samples
the MFGs around them (hybrid: locally on the replicated topology; vanilla: 2 rounds per
layer the rank cannot sample alone) and gathers the input rows of every node type in 2
rounds (fastsample/distributed/gather.py). Sampling follows the RNG contract
(fastsample/sampling/rng.py): the same (seed, epoch, step, rank) gives the same batch with
every kernel and mode. Every rank runs ``len(loader)`` steps, the most any rank needs; a
rank whose split runs out first gets empty batches but still takes part in the collectives.

With ``prefetch=depth`` a background thread samples and gathers up to ``depth`` steps
ahead (fastsample/loading/prefetch.py) on a duplicate of ``comm``, so the caller's own
collectives (the gradient all-reduce) never interleave with the loader's. The batches
are the same, bitwise; only when their time is spent changes. Stopping early (``break``)
must happen after the same step on every rank, as with any collective loop.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fastsample.phases import phase
from fastsample import bf16, int8
from fastsample import allocator
from fastsample.allocator import available_memory
from fastsample.nn.block import Block
from fastsample.choices import CACHE_POLICIES, MODES, PRECISIONS, check_choice, check_fanouts
from fastsample.comm import Communicator
from fastsample.comm.local import LocalCommunicator
from fastsample.options import ConfigError
from fastsample.distributed import FeatureGather
from fastsample.distributed.cache import FeatureCache, build_cache, degree_scores, frequency_scores
from fastsample.data.graph import NODE, load_dataset, unwrap_one_type
from fastsample.loading.seeds import EdgeSeeds, NodeSeeds, StepSeeds
from fastsample.partition import RankPartition, load_partition
from fastsample.rows import LearnableRows, RowTable
from fastsample.loading.prefetch import Prefetcher
from fastsample.sampling import MFG, LocalSampler, Sampler, get_num_threads, set_num_threads


@dataclass
class Batch:
    """One step's data on one rank.

    seeds:  int64 (S,) global ids of the last MFG's destinations: the nodes trained on (a
            node batch), or a link batch's unique endpoints, sorted (S may be 0)
    x:      (blocks[0].num_src, F) input features, writable, on the loader's device: float32, or
            with precision "bf16" 16-bit (bfloat16; float16 where the features are stored so);
            with "int8" float32, the 8-bit rows decoded (fastsample/int8.py).
            Typed data: {node type: (its input nodes, its width)}; a featureless type's rows
            are its learnable embeddings (a leaf tensor that takes a gradient) when the
            loader has ``embeddings``, else None. Made on first access from
    inputs: the same rows as the gather left them: on the CPU, row tables (fastsample/rows.py)
            that the built-in models' input layers read where the rows are, without x's copy
            (learnable rows as LearnableRows, which take the gradient a leaf would); rows on a
            GPU, and learnable rows gathered by a prefetching loader, are x's tensors already
    mfgs:   the sampled MFGs (numpy, global ids in src_ids), input layer first
    blocks: the same as Blocks, what a model's forward takes (fastsample/nn/block.py; typed
            data: with per-relation edge lists)
    sample_s, gather_s: seconds this rank spent sampling and gathering for it
    wait_s: seconds the caller waited for it: all of the above without prefetch, only
            what the prefetch did not hide with it
    route:  (gather, route) of the embedding rows in x, for ShardedEmbeddings.step; else None
    num_items: the items trained on (len(batch)): nodes, or positive edges
    fields: what the seed source (fastsample/loading/seeds.py) declares of its items, read as
            attributes (tensors on the loader's device): node seeds' ``batch.y``, int64 (S,)
            labels of the seeds; edge seeds' ``batch.src``, ``batch.dst`` (B,) and ``batch.neg``
            (B, k), positions in ``seeds`` of the edges' endpoints and negatives, and
            ``batch.edges`` (B, 2), ``batch.negatives`` (B, k), their global ids
    """

    seeds: torch.Tensor
    inputs: torch.Tensor | RowTable | dict
    mfgs: list[MFG]
    blocks: list
    sample_s: float
    gather_s: float
    wait_s: float = 0.0
    route: tuple | None = None
    num_items: int = 0
    fields: dict = dataclasses.field(default_factory=dict)

    def __getattr__(self, name: str):
        """A field of the seed source's (batch.y, batch.src, ...); AttributeError naming them otherwise."""
        fields = self.__dict__.get("fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (its seed source's fields: "
                             f"{', '.join(fields or ()) or 'none'})")

    @property
    def x(self) -> torch.Tensor | dict:
        """The input rows as tensors (see the class doc): ``inputs`` with each row table
        (fastsample/rows.py: rows still where the gather found them, as the built-in models
        read them) made a tensor, on first access, and kept."""
        return self._as_tensors(RowTable)

    def learnable_as_leaves(self) -> torch.Tensor | dict:
        """``inputs`` with each LearnableRows made a leaf tensor, on first call, and kept: what
        a model that reads row tables but not learnable ones (``reads_learnable_rows``) takes."""
        return self._as_tensors(LearnableRows)

    def _as_tensors(self, kind: type) -> torch.Tensor | dict:
        """``inputs`` with each row table of ``kind`` a tensor; learnable rows become leaves
        that take a gradient (the update reads their .grad)."""
        cpu = torch.device("cpu")
        if isinstance(self.inputs, kind):
            self.inputs = as_tensor(self.inputs.materialize(), cpu)
        elif isinstance(self.inputs, dict):
            self.inputs.update({t: as_tensor(v.materialize(), cpu, isinstance(v, LearnableRows))
                                for t, v in self.inputs.items() if isinstance(v, kind)})
        return self.inputs

    def edge_index(self, i: int) -> torch.Tensor:
        """Layer i's edges, PyG's layout: (2, E_i) int64, row 0 source position, row 1 destination position."""
        return self.blocks[i].edge_index

    def size(self, i: int) -> tuple[int, int]:
        """Layer i's (num_src, num_dst)."""
        return self.blocks[i].size

    def __len__(self) -> int:
        return self.num_items


def open_data(data, comm: Communicator, mode: str = "hybrid", precision: str = "fp32") -> RankPartition:
    """This rank's share of ``data``: a partition directory (python -m fastsample.partition)
    built for ``comm.size`` ranks, or, for one process, a dataset directory; an opened one
    as it is. Its features as ``precision`` holds them: fp32's shards that fit are read into
    memory (allocator.resident: the gathered rows are read in place, at random; a file
    mapping's small pages slow that); bf16 and int8 narrow or quantize them into memory
    (reduce_features; collective for int8), an opened partition too where not yet done."""
    if precision != "fp32":
        return reduce_features(data if isinstance(data, RankPartition) else open_share(Path(data), comm, mode),
                               precision, comm)
    if isinstance(data, RankPartition):
        return data
    part = open_share(Path(data), comm, mode)
    return dataclasses.replace(part, features=unwrap_one_type(
        {t: None if f is None else allocator.resident(f) for t, f in part.shards.items()}))


def open_share(path: Path, comm: Communicator, mode: str) -> RankPartition:
    """This rank's share of a partition directory, or a dataset directory whole (one process);
    its features as stored."""
    if (path / "partition.json").is_file():
        return load_partition(path, comm.rank, comm.size, mode)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such directory (a partition or a dataset directory)")
    if not (path / "meta.json").is_file():
        raise FileNotFoundError(f"{path}: neither a partition (partition.json) nor a dataset (meta.json)")
    if comm.size != 1:
        raise ValueError(f"{path}: a dataset directory serves one process; for {comm.size} ranks "
                         f"partition it first (python -m fastsample.partition {path} OUT --parts {comm.size})")
    return RankPartition.whole(load_dataset(path))


def narrow_features(part: RankPartition) -> RankPartition:
    """``part`` with its float32 features narrowed to bfloat16 (in memory, half the bytes);
    16-bit features are returned as they are (per node type)."""
    narrow = lambda f: bf16.narrow(f) if f is not None and f.dtype == np.float32 else f
    return dataclasses.replace(part, features=unwrap_one_type({t: narrow(f) for t, f in part.shards.items()}))


def quantize_features(part: RankPartition, comm: Communicator) -> RankPartition:
    """``part`` with its features quantized to int8 (in memory, a quarter of float32's
    bytes), each column with a power-of-two scale shared by every rank (fastsample/int8.py;
    collective: every rank calls it); an already quantized one as it is."""
    if part.scales:
        return part
    shards = part.shards
    scales = int8.scales(shards, comm, labels={NODE: "the node features"})  # untyped data's one type
    quantized = {t: None if f is None else int8.quantize(f, scales[t]) for t, f in shards.items()}
    return dataclasses.replace(part, features=unwrap_one_type(quantized), scales=scales)


def reduce_features(part: RankPartition, precision: str, comm: Communicator) -> RankPartition:
    """``part``'s features as ``precision`` keeps them in memory: bf16 narrowed, int8
    quantized, fp32 as they are (collective for int8)."""
    if precision == "bf16":
        return narrow_features(part)
    if precision == "int8":
        return quantize_features(part, comm)
    return part


def as_tensor(rows: np.ndarray, device: torch.device, learnable: bool = False) -> torch.Tensor:
    """Gathered rows as a tensor on ``device`` (pinned first on CUDA: the copy runs
    asynchronously); a learnable table's rows as a leaf that takes a gradient."""
    t = bf16.to_tensor(rows)
    if device.type == "cuda":
        t = t.pin_memory().to(device, non_blocking=True)
    return t.requires_grad_(learnable)


def inputs_of(gather: FeatureGather, got, mfgs: list[MFG], device, node_types=(), edge_types=(),
              learnable=(), in_place: bool = False) -> tuple:
    """(x, blocks) a model takes, from a gather's rows around ``mfgs``: {node type: rows}
    (``learnable`` types' as leaves that take a gradient; untyped data's one matrix, as
    unwrap_one_type shows it) and blocks with each source's type (each layer's source types
    are the input layer's first rows': its destinations are the next layer's sources).
    ``in_place``: on the CPU, the rows stay row tables (Batch.inputs), ``learnable`` types'
    as LearnableRows."""
    device = torch.device(device)
    keep = in_place and device.type == "cpu"
    x = {t: None if r is None else (LearnableRows(r) if t in learnable else r) if keep
         else as_tensor(r.materialize(), device, t in learnable) for t, r in got.tables.items()}
    return unwrap_one_type(x), [Block.from_mfg(m, device, got.types[:m.num_src], node_types, edge_types,
                                               (got.index, got.counts) if m.num_src == len(got.types) else None)
                                for m in mfgs]


class Loader:
    """Batches of a seed source's items with their sampled MFGs and input rows; see the module doc.

    Args:
        data: a partition directory (a job: one part per rank), a dataset directory (one
            process), or an already opened RankPartition (to share it between loaders).
        fanouts: neighbours per layer, input layer first; -1 takes all of them; on typed
            data a layer may map relations to fanouts (fastsample.sampling.fanout_matrix).
        batch_size: items (nodes, or positive edges) per rank per step.
        split: "train", "val" or "test".
        seeds: the seed source's factory, (part, split, comm) -> NodeSeeds or EdgeSeeds
            (fastsample/loading/seeds.py); NodeLoader and EdgeLoader pass theirs.
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
            and batch.x keeps them so (fastsample/bf16.py); or "int8": held, gathered and sent
            in 8 bits with a power-of-two scale per column, read decoded (fastsample/int8.py).
            Pass the same opened partition (open_data with the precision) to several
            loaders to narrow or quantize it once.
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

    def __init__(self, data, fanouts, batch_size: int, split: str = "train", seeds=NodeSeeds,
                 shuffle: bool | None = None, seed: int = 0, comm: Communicator | None = None, kernel: str = "auto",
                 mode: str = "hybrid", device="cpu", max_steps: int | None = None, prefetch: int = 0,
                 sampler: Sampler | None = None, precision: str = "fp32", cache_fraction: float = 0.0,
                 cache_policy: str = "frequency", embeddings=None):
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
        self.part = open_data(data, self.comm, mode, precision)
        self.source = seeds(self.part, split, self.comm)
        self.split, self.batch_size, self.seed, self.mode = split, int(batch_size), int(seed), mode
        self.shuffle = split == "train" if shuffle is None else bool(shuffle)
        self.device = torch.device(device)
        self.rank = self.comm.rank
        self.prefetch = int(prefetch)
        topology = self.part.graph if self.part.graph is not None else self.part.local_graph
        self.id_dtype = topology.indices.dtype
        self.node_types, self.edge_types = topology.node_types, topology.edge_types
        # the data path's collectives: on their own communicator when a thread runs them
        data_comm = self.comm.dup() if self.prefetch else self.comm
        runs = self.part.type_runs
        self.embeddings = embeddings
        tables = self._check_embeddings(embeddings)
        # without prefetch, the tables' rows ride in the features' two rounds; with it,
        # the rows come at the step (_fill_embeddings), never from before an update
        shards = self.part.features
        if tables and not self.prefetch:
            shards = {**shards, **tables}
        self.gather = FeatureGather(data_comm, runs, shards, keep_dtype=precision != "fp32", scales=self.part.scales,
                                    learnable=() if self.prefetch else tables)
        self.embed_gather = (FeatureGather(self.comm, runs, {t: tables.get(t) for t in shards}, learnable=tables)
                             if self.prefetch and tables else None)
        # a node's index among all nodes of its type = its id + its run's base
        T = len(self.gather.types)
        sizes = np.diff(runs).reshape(-1, T)
        before = np.cumsum(sizes, axis=0) - sizes  # nodes of the type in earlier ranks' runs
        self.run_base = before.reshape(-1) - runs[:-1]
        if sampler is not None:
            if not isinstance(sampler, Sampler):
                raise TypeError(f"sampler must implement fastsample.sampling.Sampler (got {type(sampler).__name__})")
            self.sampler = sampler
        elif mode == "hybrid":
            self.sampler = LocalSampler(self.part.graph, self.rank, kernel)
        else:
            from fastsample.distributed.vanilla import VanillaSampler

            self.sampler = VanillaSampler(data_comm, self.part.offsets, self.part.local_graph, kernel,
                                          own_seeds=self.source.own)
        # every rank runs the same number of steps: the most any rank needs
        self.epoch_steps = max(math.ceil(k / self.batch_size) for k in self.source.sizes())
        self.steps = self.epoch_steps if max_steps is None else min(self.epoch_steps, max_steps)
        self.epoch, self.first_step = 0, 0
        self.cache_fraction, self.cache_policy = float(cache_fraction), cache_policy
        if self.cache_fraction:
            row = int(self.gather.row_bytes.max(initial=0))  # at most the widest type's
            need = int(self.cache_fraction * self.part.num_nodes) * row
            available = available_memory()
            if available is not None and need > available // 2:
                raise ConfigError("cache_fraction", f"{self.cache_fraction}: the cache needs {need / 2**20:,.0f} MiB "
                                  f"per rank, over half of the {available / 2**20:,.0f} MiB available; lower it")

    def _check_embeddings(self, embeddings) -> dict:
        """{type: shard} of the tables, each a featureless type's rows of this rank."""
        if embeddings is None:
            return {}
        features = self.part.shards
        runs, T = self.part.type_runs, len(features)
        shards = embeddings.shards()
        for t, shard in shards.items():
            if features.get(t, 0) is not None:
                raise ValueError(f"embeddings: {t!r} is not a featureless node type of {self.part.path}")
            i = list(features).index(t)
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

    @property
    def lo(self) -> int:
        """Node seeds: the global id of the labels' first row on this rank."""
        return self.source.lo

    def set_epoch(self, epoch: int, first_step: int = 0) -> None:
        """The epoch whose order and samples the next iteration gives (as DistributedSampler),
        from step ``first_step`` on (the rest of an epoch a checkpoint stopped inside)."""
        self.epoch, self.first_step = int(epoch), int(first_step)

    def __len__(self) -> int:
        return self.steps

    def order(self) -> np.ndarray:
        """This epoch's order of the rank's items: step k takes the k-th batch_size of them."""
        return self.source.order(self.seed, self.epoch, self.shuffle)

    def step_seeds(self, order: np.ndarray, step: int) -> StepSeeds:
        """Step ``step``'s seeds from an epoch's ``order``."""
        return self.source.of(self.source.items(order, step, self.batch_size), self.seed, self.epoch, step)

    def seeds(self, order: np.ndarray, step: int) -> np.ndarray:
        """Step ``step``'s seed nodes (sorted) from an epoch's ``order``."""
        return self.step_seeds(order, step).nodes

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
            batch = self.batch(self.step_seeds(order, step), step)
            if threads is not None:
                # in the background, the copy into x is hidden, and the input layer then reads
                # x in the order the sampler met the rows, faster than at random in the shard
                t0 = time.perf_counter()
                batch.x
                batch.gather_s += time.perf_counter() - t0
            yield batch

    def sample(self, seeds: np.ndarray, step: int, seed: int | None = None, exclude=None) -> list[MFG]:
        """The MFGs around ``seeds`` for (seed, this epoch, step, this rank), without the
        edges ``exclude`` names. Collective in vanilla mode."""
        seed = self.seed if seed is None else seed
        excluding = {} if exclude is None else {"exclude": exclude}  # a user's node-task sampler may not take it
        return self.sampler.sample(np.asarray(seeds).astype(self.id_dtype, copy=False), self.fanouts, seed=seed,
                                   epoch=self.epoch, step=step, **excluding)

    def batch(self, seeds: StepSeeds | np.ndarray, step: int) -> Batch:
        """The batch of a step's ``seeds`` at ``step``: a StepSeeds, or the seed source's
        items (this rank's own nodes, sorted; positive edges (B, 2)). Collective."""
        if not isinstance(seeds, StepSeeds):
            seeds = self.source.of(np.asarray(seeds), self.seed, self.epoch, step)
        t0 = time.perf_counter()
        with phase("sample"):
            mfgs = self.sample(seeds.nodes, step, exclude=seeds.exclude)
        t1 = time.perf_counter()
        got = self.gather.gather(mfgs[0].src_ids)
        x, blocks = self._inputs(got, mfgs)
        t2 = time.perf_counter()
        route = (self.gather, got.route) if self.embeddings is not None and not self.prefetch else None
        fields = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in seeds.fields.items()}
        return Batch(torch.from_numpy(np.asarray(seeds.nodes, dtype=np.int64)), x, mfgs, blocks, t1 - t0, t2 - t1,
                     wait_s=time.perf_counter() - t0, route=route, num_items=seeds.size, fields=fields)

    def _inputs(self, got, mfgs: list[MFG]) -> tuple:
        """(batch.x, batch.blocks) of a gather's rows (inputs_of); the input block says each
        input node's index among its type's (what embeddings are indexed by), made when read."""
        tables = self.embeddings.tables if self.embeddings is not None else {}
        x, blocks = inputs_of(self.gather, got, mfgs, self.device, self.node_types, self.edge_types, tables,
                              in_place=True)

        def input_index():
            ids = np.asarray(mfgs[0].src_ids, dtype=np.int64)
            index = ids + self.run_base[np.searchsorted(self.gather.runs, ids, side="right") - 1]
            return {t: torch.from_numpy(index[got.types == i]).to(self.device) for i, t in enumerate(self.node_types)}

        blocks[0].input_index = input_index
        return x, blocks

    def _fill_embeddings(self, batch: Batch) -> None:
        """With prefetch: the tables' rows of a prefetched batch, gathered now (after every
        update before this step), in two rounds on the caller's communicator."""
        t0 = time.perf_counter()
        got = self.embed_gather.gather(batch.mfgs[0].src_ids)
        batch.inputs.update({t: as_tensor(got.rows[t], self.device, True) for t in self.embeddings.tables})
        batch.route = (self.embed_gather, got.route)
        dt = time.perf_counter() - t0
        batch.gather_s += dt
        batch.wait_s += dt

    def warm_up(self) -> None:
        """Load the kernels and touch the maps before anything is timed (samples one node
        this rank owns, with a key of its own, so no batch's draws are used; faults the
        feature shards in), and build the feature cache if one was asked for and none is
        attached. Collective in vanilla mode, and with a cache."""
        lo, hi = int(self.part.offsets[self.rank]), int(self.part.offsets[self.rank + 1])
        self.sample(np.arange(lo, min(hi, lo + 1)), 0, seed=self.seed ^ 0x3A3A3A)
        self.gather.warm_up()
        self._ensure_cache()

    def _ensure_cache(self) -> None:
        """Build the feature cache asked for, unless one is there. Collective."""
        if self.cache_fraction and self.gather.cache is None:
            scores = degree_scores(self.part, self.gather.comm)
            if self.cache_policy == "frequency":  # the input nodes of this rank's whole first epoch
                scores = frequency_scores(self._epoch_inputs(0), self.part.num_nodes, scores)
            self.gather.cache = build_cache(self.gather, scores, self.cache_fraction)

    def _epoch_inputs(self, epoch: int):
        """The input ids (mfgs[0].src_ids) of every step of ``epoch``; the same collective
        calls on every rank (vanilla samples collectively)."""
        current = (self.epoch, self.first_step)
        try:
            self.set_epoch(epoch)
            order = self.order()
            for step in range(self.epoch_steps):
                s = self.step_seeds(order, step)
                yield self.sample(s.nodes, step, exclude=s.exclude)[0].src_ids
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


class NodeLoader(Loader):
    """The loader over a split of the target type's nodes (NodeSeeds); arguments as Loader's."""

    def __init__(self, data, fanouts, batch_size: int, split: str = "train", **options):
        super().__init__(data, fanouts, batch_size, split, seeds=NodeSeeds, **options)


class EdgeLoader(Loader):
    """The loader over a split of a target relation's edges (EdgeSeeds: negatives, the
    edges excluded while picking); ``negatives``, ``negative_sampler``, ``strict`` and
    ``exclude`` are EdgeSeeds', the rest Loader's."""

    def __init__(self, data, fanouts, batch_size: int, split: str = "train", negatives: int = 1,
                 negative_sampler: str = "uniform", strict: bool = False, exclude: str | None = None, **options):
        seeds = functools.partial(EdgeSeeds, negatives=negatives, negative_sampler=negative_sampler, strict=strict,
                                  exclude=exclude)
        super().__init__(data, fanouts, batch_size, split, seeds=seeds, **options)

    @property
    def edges(self) -> np.ndarray:
        return self.source.edges

    @property
    def edges_split(self):
        return self.source.edges_split

    @property
    def exclude(self) -> str:
        return self.source.exclude
