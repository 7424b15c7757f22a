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

Everything is drawn from one numpy Generator seeded by ``seed`` in fixed-size chunks, so
the output depends only on the parameters. Memory: two int32 endpoint arrays of
num_edges / 2 entries plus the CSC (see edges.py); features are written chunk by chunk
into the output file.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
from tqdm import tqdm

from fastsample.data.edges import edges_to_csc
from fastsample.graph import DatasetError, DatasetWriter, id_dtype

CHUNK = 1 << 22


@dataclass(frozen=True)
class SynthConfig:
    """The generator's parameters (see the module docstring for the model); PRESETS holds
    named ones. Checked by validate(), which write_synthetic calls."""

    num_nodes: int = 100_000
    avg_degree: float = 20.0  # directed in-edges per node before duplicates are merged
    num_classes: int = 16
    feature_dim: int = 64
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


def generate_edges(cfg: SynthConfig, rng: np.random.Generator, progress: bool = True):
    """Undirected edge list (src, dst) in generation order, plus community of each node."""
    comm, starts = _communities(cfg, rng)
    cw = np.cumsum(_weights(cfg, rng))
    total = cw[-1]
    lo = np.concatenate([[0.0], cw])[starts[:-1]]  # cumulative weight before each community
    hi = cw[starts[1:] - 1]
    num_pairs = int(round(cfg.num_nodes * cfg.avg_degree / 2))
    ids = id_dtype(cfg.num_nodes)
    src = np.empty(num_pairs, dtype=ids)
    dst = np.empty(num_pairs, dtype=ids)
    last = cfg.num_nodes - 1
    with tqdm(total=num_pairs, desc="edges", unit="e", unit_scale=True, disable=not progress) as bar:
        for begin in range(0, num_pairs, CHUNK):
            k = min(CHUNK, num_pairs - begin)
            u = np.minimum(np.searchsorted(cw, rng.random(k) * total, side="right"), last)
            inside = rng.random(k) < cfg.intra
            r = rng.random(k)
            c = comm[u]
            target = np.where(inside, lo[c] + r * (hi[c] - lo[c]), r * total)
            v = np.minimum(np.searchsorted(cw, target, side="right"), last)
            src[begin:begin + k] = u
            dst[begin:begin + k] = v
            bar.update(k)
    return src, dst, comm


def write_synthetic(out, cfg: SynthConfig, overwrite: bool = False, progress: bool = True) -> dict:
    """Generate a synthetic dataset directory (atomically).

    Args:
        out: the directory to write; cfg: the parameters (validated first);
        overwrite: replace an existing directory; progress: show progress bars.
    Returns:
        meta.json's contents.
    """
    cfg.validate()
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    with DatasetWriter(out, overwrite=overwrite) as writer:
        src, dst, comm = generate_edges(cfg, rng, progress)
        perm = rng.permutation(cfg.num_nodes).astype(src.dtype)  # generation id -> final id
        src[:] = perm[src]
        dst[:] = perm[dst]
        labels = np.empty(cfg.num_nodes, dtype=np.int64)
        labels[perm] = comm
        del comm, perm
        if progress:
            tqdm.write("building CSC (symmetrise, merge duplicates, drop self-loops)")
        graph = edges_to_csc(src, dst, cfg.num_nodes, symmetric=True)
        del src, dst
        writer.save("indptr", graph.indptr)
        writer.save("indices", graph.indices)
        del graph

        centroids = rng.standard_normal((cfg.num_classes, cfg.feature_dim), dtype=np.float32)
        centroids *= cfg.signal
        features = writer.create("features", (cfg.num_nodes, cfg.feature_dim), np.float32)
        step = max(1, CHUNK // cfg.feature_dim)
        for begin in tqdm(range(0, cfg.num_nodes, step), desc="features", disable=not progress):
            end = min(cfg.num_nodes, begin + step)
            block = rng.standard_normal((end - begin, cfg.feature_dim), dtype=np.float32)
            block += centroids[labels[begin:end]]
            features[begin:end] = block
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
