"""Synthetic graphs for tests and benchmarks: heavy-tailed degrees with community structure.

Model (a degree-corrected stochastic block model, Chung-Lu style):
  * every node gets a community (= its class label); community sizes are skewed
    (size of community k proportional to (k + 1) ** -0.8), like real label distributions;
  * every node gets a weight from a Pareto law with tail exponent ``exponent`` (degree
    distribution P(d) ~ d ** -exponent), capped at ``max_degree``; its expected degree is
    proportional to its weight, so degrees are heavy-tailed (hubs of thousands);
  * each of ``num_nodes * avg_degree / 2`` undirected edges picks one endpoint by weight;
    with probability ``intra`` the other endpoint is drawn by weight from the same
    community, otherwise from the whole graph;
  * features are ``signal * centroid[community] + N(0, 1)`` noise: a node's own features
    identify its class only weakly, its neighbourhood's average identifies it well, so a
    GNN beats an MLP (bench/synth_quality.py measures it);
  * node ids are randomly permuted at the end, so ids reveal no community structure.

Everything is drawn from one numpy stream seeded by ``seed``, so the output depends only
on the parameters. The edges come in fixed-size chunks, each from that stream advanced to
its start (EdgeStream), and the endpoint lookups run on all cores; the graph is the same
for any thread count. Memory: O(num_nodes) arrays, a chunk, and one destination range of edges at a
time (edges.edges_to_csc_file spills the edges by range to disk and builds the CSC range
by range); features are written chunk by chunk.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numba
import numpy as np
from fastsample.progress import progress_bar

from fastsample.data.edges import edges_to_csc_file
from fastsample.data.graph import FEATURE_DTYPES, DatasetError, DatasetWriter, id_dtype, offset_dtype

CHUNK = 1 << 22


@dataclass(frozen=True)
class SynthConfig:
    """The generator's parameters (see the module docstring for the model); PRESETS holds
    named ones. Checked by validate(), which write_synthetic calls."""

    num_nodes: int = 100_000
    avg_degree: float = 20.0  # directed in-edges per node before duplicates are merged
    num_classes: int = 16
    feature_dim: int = 64
    feature_dtype: str = "float32"  # or float16: half the disk and page cache (large graphs)
    exponent: float = 2.3  # power-law exponent of the degree distribution
    max_degree: int | None = None  # cap on expected degree; default 400 x avg_degree
    intra: float = 0.8  # fraction of edges inside a community
    signal: float = 0.3  # centroid scale vs unit noise in the features
    train_frac: float = 0.08
    val_frac: float = 0.02
    test_frac: float = 0.10
    seed: int = 0

    def validate(self) -> None:
        """Raise DatasetError (a ValueError) naming the first parameter out of range."""
        fracs = (self.train_frac, self.val_frac, self.test_frac)
        rules = [
            ("num_nodes", self.num_nodes >= 2, ">= 2", self.num_nodes),
            ("avg_degree", self.avg_degree > 0, "> 0", self.avg_degree),
            ("num_classes", 1 <= self.num_classes <= self.num_nodes, f"in 1..{self.num_nodes} (the node count)",
             self.num_classes),
            ("feature_dim", self.feature_dim >= 1, ">= 1", self.feature_dim),
            ("feature_dtype", self.feature_dtype in FEATURE_DTYPES, f"one of {', '.join(FEATURE_DTYPES)}",
             self.feature_dtype),
            ("exponent", self.exponent > 2, "> 2 (a finite mean degree)", self.exponent),
            ("max_degree", self.max_degree is None or self.max_degree >= 1, ">= 1", self.max_degree),
            ("intra", 0 <= self.intra <= 1, "in [0, 1]", self.intra),
            ("signal", self.signal >= 0, ">= 0", self.signal),
            ("train_frac, val_frac and test_frac", min(fracs) >= 0 and sum(fracs) <= 1,
             ">= 0 and sum to at most 1", fracs),
        ]
        for name, ok, rule, value in rules:
            if not ok:
                raise DatasetError(f"synthetic graph: {name} must be {rule} (got {value!r})")


# Named presets; `products` is ogbn-products scale (2.4M nodes, ~120M directed edges);
# `medium` (500k nodes, ~10M edges) is the model/epoch benchmark workload (bench/model.py);
# its 25% training split gives ~63 steps per epoch for 2 ranks x batch 1000, about what
# the DistDGL reference figure of that workload implies (16.5 s of ~0.27 s steps).
PRESETS = {
    "tiny": SynthConfig(num_nodes=2_000, avg_degree=10, num_classes=4, feature_dim=16),
    "small": SynthConfig(),
    "medium": SynthConfig(num_nodes=500_000, avg_degree=22, num_classes=47, feature_dim=100, train_frac=0.25),
    "products": SynthConfig(num_nodes=2_400_000, avg_degree=52, num_classes=47, feature_dim=100),
    # >= 1.0B stored directed edges (papers100M has 3.2B): 16M nodes, float16 features of
    # papers100M's width and classes, its ~1 % training split; 7.7 GiB on disk
    "large": SynthConfig(num_nodes=16_000_000, avg_degree=68, num_classes=172, feature_dim=128,
                         feature_dtype="float16", train_frac=0.01, val_frac=0.002, test_frac=0.004),
}


def _communities(cfg: SynthConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Community of each node in generation order (sorted), and community start offsets."""
    share = (np.arange(cfg.num_classes) + 1.0) ** -0.8
    sizes = np.maximum(1, np.floor(share / share.sum() * cfg.num_nodes)).astype(np.int64)
    sizes[0] += cfg.num_nodes - sizes.sum()  # rounding remainder to the largest
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return np.repeat(np.arange(cfg.num_classes), sizes), starts


def _weights(cfg: SynthConfig, rng: np.random.Generator) -> np.ndarray:
    tail = cfg.exponent - 1.0  # Pareto tail index of the weight (= degree) law
    w = (1.0 - rng.random(cfg.num_nodes)) ** (-1.0 / tail)
    cap = cfg.max_degree or 400 * cfg.avg_degree
    cap = min(cap, cfg.num_nodes / 4)
    # expected degree ~ avg_degree * w / mean(w); cap it (the mean moves little)
    return np.minimum(w, cap * w.mean() / cfg.avg_degree)


BUCKETS_PER_NODE = 0.25  # lookup-table size for _sample_ids (a quarter entry per node)


@numba.njit(cache=True, nogil=True, parallel=True)
def _sample_ids(cw, bounds, first, x, out):
    """out[i] = min(searchsorted(cw, x[i], side="right"), len(cw) - 1), exactly, in parallel.

    np.searchsorted misses the cache at every level of its search (~0.5 us a key on a
    2.4M-node table); here a bucket table narrows each search to the few entries between
    first[b] and first[b + 1], where b is the bucket of x[i] (bounds[b] <= x[i] <
    bounds[b + 1], fixed up where rounding put x[i] in a neighbour)."""
    last = len(cw) - 1
    buckets = len(bounds) - 1
    scale = buckets / bounds[-1]
    for i in numba.prange(len(x)):
        key = x[i]
        b = min(max(int(key * scale), 0), buckets - 1)
        while b > 0 and key < bounds[b]:
            b -= 1
        while b < buckets - 1 and key >= bounds[b + 1]:
            b += 1
        lo, hi = first[b], first[b + 1]  # the answer lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if cw[mid] > key:
                hi = mid
            else:
                lo = mid + 1
        out[i] = min(lo, last)


class EdgeStream:
    """The undirected edges of ``cfg``, in generation order, as chunks (src, dst) of final
    (permuted) ids: any chunk can be made alone, in any order.

    Chunk c's draws come from the seed's one stream, advanced to where the sequential
    generator would be (PCG64 advances in O(1); the weights take N draws, each pair 3),
    and the endpoint lookups are exact, so the graph is bitwise what the earlier
    single-threaded generator made, whatever the thread count. The lookups, the costly
    part, run on all of numba's threads.
    """

    def __init__(self, cfg: SynthConfig):
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        self.comm, starts = _communities(cfg, rng)
        self.cw = np.cumsum(_weights(cfg, rng))
        self.total = self.cw[-1]
        self.lo = np.concatenate([[0.0], self.cw])[starts[:-1]]  # cumulative weight before each community
        self.hi = self.cw[starts[1:] - 1]
        buckets = max(1, int(cfg.num_nodes * BUCKETS_PER_NODE))
        self.bounds = np.arange(buckets + 1) * (self.total / buckets)
        self.bounds[-1] = self.total
        self.first = np.searchsorted(self.cw, self.bounds, side="right")
        self.num_pairs = int(round(cfg.num_nodes * cfg.avg_degree / 2))
        rng.bit_generator.advance(3 * self.num_pairs)  # past every pair's draws: what follows them
        self.after = rng
        self.perm = rng.permutation(cfg.num_nodes).astype(id_dtype(cfg.num_nodes))  # generation id -> final id

    def __len__(self) -> int:
        return -(-self.num_pairs // CHUNK)

    def _ids(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(len(x), dtype=np.int64)
        _sample_ids(self.cw, self.bounds, self.first, x, out)
        return out

    def chunk(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.cfg
        begin = c * CHUNK
        k = min(CHUNK, self.num_pairs - begin)
        rng = np.random.default_rng(cfg.seed)
        rng.bit_generator.advance(cfg.num_nodes + 3 * begin)
        u = self._ids(rng.random(k) * self.total)
        inside = rng.random(k) < cfg.intra
        r = rng.random(k)
        comm = self.comm[u]
        v = self._ids(np.where(inside, self.lo[comm] + r * (self.hi[comm] - self.lo[comm]), r * self.total))
        return self.perm[u], self.perm[v]

    def chunks(self):
        return (self.chunk(c) for c in range(len(self)))

    def labels(self) -> np.ndarray:
        labels = np.empty(self.cfg.num_nodes, dtype=np.int64)
        labels[self.perm] = self.comm
        return labels


def write_synthetic(out, cfg: SynthConfig, overwrite: bool = False, progress: bool = True,
                    threads: int | None = None) -> dict:
    """Generate a synthetic dataset directory (atomically).

    Args:
        out: the directory to write; cfg: the parameters (validated first);
        overwrite: replace an existing directory; progress: show progress bars;
        threads: numba's threads for the edges (default: all cores; the output does not depend on it).
    Returns:
        meta.json's contents.
    """
    cfg.validate()
    t0 = time.perf_counter()
    with DatasetWriter(out, overwrite=overwrite) as writer:
        if threads:
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        edges = EdgeStream(cfg)
        rng = edges.after  # the rest (centroids, features, splits) continues the stream
        labels = edges.labels()
        with progress_bar(total=edges.num_pairs, desc="edges", unit="e", unit_scale=True, disable=not progress) as bar:
            indptr = edges_to_csc_file(edges.chunks(), cfg.num_nodes, writer.tmp / "indices.npy", symmetric=True,
                                       expected_edges=2 * edges.num_pairs, progress=bar.update)
        del edges
        writer.save("indptr", indptr.astype(offset_dtype(int(indptr[-1])), copy=False))
        del indptr

        centroids = rng.standard_normal((cfg.num_classes, cfg.feature_dim), dtype=np.float32)
        centroids *= cfg.signal
        features = writer.create("features", (cfg.num_nodes, cfg.feature_dim), np.dtype(cfg.feature_dtype))
        step = max(1, CHUNK // cfg.feature_dim)
        for begin in progress_bar(range(0, cfg.num_nodes, step), desc="features", disable=not progress):
            end = min(cfg.num_nodes, begin + step)
            block = rng.standard_normal((end - begin, cfg.feature_dim), dtype=np.float32)
            block += centroids[labels[begin:end]]
            features[begin:end] = block  # (rounded to float16 here when that is the dtype)
        features.flush()
        del features
        writer.save("labels", labels)

        order = rng.permutation(cfg.num_nodes)
        n_train = int(cfg.train_frac * cfg.num_nodes)
        n_val = int(cfg.val_frac * cfg.num_nodes)
        n_test = int(cfg.test_frac * cfg.num_nodes)
        bounds = np.cumsum([0, n_train, n_val, n_test])
        ids = id_dtype(cfg.num_nodes)
        for i, split in enumerate(("train", "val", "test")):
            writer.save(split, np.sort(order[bounds[i]:bounds[i + 1]]).astype(ids))
        return writer.commit(
            name=f"synthetic-{cfg.num_nodes}", num_classes=cfg.num_classes,
            source={"generator": "fastsample.data.synth", **asdict(cfg)},
            symmetric=True, self_loops=False,
            build_seconds=round(time.perf_counter() - t0, 2))
