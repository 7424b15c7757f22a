"""python -m fastsample.plan: memory per rank and per machine for a graph size and a cluster, before anything is built.

Every figure is an expected value for the trainer's defaults (python -m fastsample.train),
from the sizes alone; what each term counts, and where it was measured, is below.

Persistent, per rank
  topology        hybrid: indptr (N+1) and indices (E) of the whole in-edge CSC, memory-mapped,
                  so the R ranks of a machine share one copy through the page cache (it is
                  counted once per machine); vanilla: the rank's own rows, (n+1) + e, the
                  largest part's nodes n and in-edges e under the partitioner's balance.
                  Dtypes by graph.py's rule: ids int32 while N < 2^31, indptr int32 while
                  E < 2^31, else int64 (and int64 whenever the ids are).
  feature shard   the largest part's rows x F x the bytes of a value: the stored dtype's
                  (read into the rank's memory at start-up where it fits in half the available
                  memory, allocator.resident; else memory-mapped), or --precision bf16's 2 and
                  int8's 1 (narrowed or quantized into memory at start-up); private to its
                  rank; the cache's rows and the gather's buffers the same; plus labels
                  (int64) and the rank's split ids. The partitioner
                  holds every node type and the in-edges within 5 % of the mean per part
                  (fastsample/partition/balance.py) and uses that room to keep its cut, so
                  the largest part's rows of a type are 1.05 x N_type/P (type_cap), not
                  ceil(N_type/P); the same for the in-edges (in_edge_cap).
  feature cache   --cache-fraction f: floor(f N) rows and their int64 ids (distributed/cache.py);
                  its start-up build holds ~4 int64 arrays of N (frequency policy; 3 for degree).
  node map        the fused sampler's global -> local map (native/node_map.hpp): up to 8M nodes
                  one uint64 per node (at most 64 MiB); above, a hash table sized by the batch:
                  8 B x the power of two >= 2 x the batch's input nodes (at least 4096),
                  grown to the largest batch and kept. (The Numba kernels' map, used only
                  where the native module is not built, is one int64 per node.)
  model state     GraphSAGE: per layer W_self, W_neigh (d_in x d_out) and a bias (d_out); fp32
                  parameters, gradients, Adam's two moments, the forward's [W_self | W_neigh]
                  copy and the all-reduce's flat bucket: 6 copies.
  runtime         Python, torch, MPI and fastsample themselves (RUNTIME_BYTES per rank, measured),
                  and the shared libraries' pages (LIBRARY_BYTES, once per machine).

Per step, per rank (expected: see "Sampled sizes")
  MFGs            per layer indptr (dst+1) int64, indices (edges) int32, src_ids (dst+edges)
                  ids: the native kernel allocates src for the worst case, dst + edges.
  gathered input  x: src_0 x F float32 rows (an upper bound: the built-in models read the rows
                  where the gather left them, fastsample/rows.py, and x is made only with
                  --prefetch or for another model), plus the gather's buffers: the rows this rank
                  sends and receives ((P-1)/P of the inputs each way, a random partition's
                  share; METIS keeps more local) and ~5 int64 per input node of bookkeeping.
  activations     per layer Z = [h_dst | mean] (dst x 2 d_in, fp32) and the output (dst x d_out);
                  backward adds the output's gradient, Z's gradient and the input's (src x d_in).
  peak            the larger of: the compute peak (inputs + saved tensors + one layer's backward,
                  + --prefetch DEPTH batches made ahead), and the gather of the next batch
                  while the current one is still referenced (two batches' inputs).
  allocator       the per-step blocks vary in size from step to step, so the heap a process
                  keeps is larger than the logical peak: the larger of the compute phase's and
                  the gather phase's peak, each x HEAP_FRAGMENTATION[--allocator] (retain, the
                  trainer's default, keeps freed memory mapped: 1.8 and 1.1; system: 1.3 and
                  1.0; fitted on medium P=1, 2 and products P=4, flat after ~40 steps with
                  --matmul blas). With oneDNN products (--matmul auto picks them where faster)
                  the heap grew on for hundreds of steps in our runs (ideep's per-shape
                  primitive cache, LRU_CACHE_CAPACITY); the plan does not model that growth.

Sampled sizes. The degree distribution is modelled as the synthetic generator's
(fastsample/data/synth.py): Chung-Lu with power-law weights of exponent --degree-exponent
(default 2.3), mean E/N, a node's degree Poisson around its weight. Seeds are uniform; a node
reached through an edge is degree-biased, and keeps min(degree, fanout) neighbours. Picks are
modelled as independent draws proportional to degree, so after T picks the expected number
of distinct nodes is sum_v 1 - (1 - d_v/E)^T (duplicates, and hubs saturating, are what
bring it below T). Community structure adds some overlap that independent draws miss: the
inputs come out up to 7 % high on the 100k-2.4M-node synthetic graphs, +0.2 % at 4M nodes.
Calibration against the real sampler: tests/test_plan.py and docs/cluster.md ("Calibration").

Typed graphs (--dataset of a typed dataset): the feature shard is each node type's rows
over P at its own width and dtype; the topology adds a byte (two past 256 edge types) per
edge of edge types; the model is the R-GCN (per layer and relation a self and a neighbour
weight and a bias: 5 copies, as GraphSAGE's less the concatenated weight) plus the
embedding tables of featureless types, sharded over the ranks (--embed-dim wide; the rows
and Adam's two moments: 3 copies of N_type / P rows);
each fanout applies per (node, edge type), modelled as R / T relations into each node.
Measured on hetero-large (18.3M nodes, 324M edges, P = 4 on one machine): 1.8 GiB per
rank predicted against 1.85-1.91 GiB private measured, 8.7 GiB per machine against a
9.3 GiB PSS sum (bench/README.md), when the shard was an even split; with each type's
rows at the partitioner's 5 % cap, about 58 MiB more per rank.

Partitioning (python -m fastsample.partition, on one machine): METIS's and KaMinPar's
estimated peaks and the --method auto choice are fastsample/partition/memory.py's own.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fastsample import cli
from fastsample import options as cfg
from fastsample.choices import FEATURE_DTYPES
from fastsample.allocator import available_memory
from fastsample.atomic import format_bytes
from fastsample.data.graph import NODE, describe_types, id_dtype, offset_dtype
from fastsample.job import JobShape, positive

__all__ = ["PlanConfig", "LayerSizes", "expected_mfgs", "plan", "format_plan", "main", "parse_size",
           "RUNTIME_BYTES", "LIBRARY_BYTES", "HEAP_FRAGMENTATION"]

PROG = "python -m fastsample.plan"

# Measured on this project's machines (docs/cluster.md, "Planning memory"):
RUNTIME_BYTES = 280 * 2**20  # a rank's own memory before its data: Python, torch, MPI, fastsample, start-up
LIBRARY_BYTES = 140 * 2**20  # the shared libraries' pages, once per machine
# the heap a process keeps / the logical peak of (the compute phase, the gather phase), by --allocator
HEAP_FRAGMENTATION = {"retain": (1.8, 1.1), "system": (1.3, 1.0)}

_GRID = 1536  # quantile cells of the degree model
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6, "mib": 2**20,
          "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12, "tib": 2**40}


def parse_size(text: str) -> int:
    """Bytes from "512G", "1.5TiB", "64GB", "1000000" (K/M/G/T alone are binary). ValueError if not a size."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _is_size(text: str) -> bool:
    try:
        return parse_size(text) > 0
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class PlanConfig(JobShape):
    """The settings of python -m fastsample.plan (its command line is generated from them):
    the graph and the cluster, and the job's shape as the trainer takes it (JobShape)."""

    GROUPS = (  # --help's sections (fastsample/cli.py)
        ("the graph", "From a dataset or partition directory (--dataset), or given by size.",
         ("dataset", "nodes", "edges", "feature_dim", "feature_dtype", "classes", "degree_exponent")),
        ("the cluster", None, ("ranks", "ranks_per_machine", "memory")),
        ("the job's shape", "As python -m fastsample.train takes it.",
         ("mode", "fanouts", "batch_size", "hidden", "layers", "embed_dim", "precision", "cache_fraction",
          "cache_policy", "prefetch", "allocator")),
        ("output", None, ("json",)),
    )

    dataset: str | None = cfg.option(None, "a dataset directory to plan for, or a partition of one (python -m "
                                     "fastsample.partition; its parts are then the default --ranks): its nodes, "
                                     "edges, features (per node type on a typed dataset, whose featureless types get "
                                     "the R-GCN's embedding tables) and classes, in place of the flags", metavar="DIR")
    nodes: int | None = cfg.option(None, "nodes (N)", check=(lambda v: v >= 2, "must be at least 2"))
    edges: int | None = cfg.option(None, "stored directed edges (E): what the in-edge CSC holds; an undirected graph of M "
                            "edges is stored with both directions, E = 2M (python -m fastsample.data info prints it)",
                            check=(lambda v: v >= 0, "must be >= 0"))
    feature_dim: int | None = cfg.option(None, "feature width (F)", check=(positive, "must be positive"))
    feature_dtype: str = cfg.option("float32", "how the features are stored", choices=FEATURE_DTYPES)
    classes: int = cfg.option(47, "output classes (the last layer's width)", check=(positive, "must be positive"))
    ranks: int | None = cfg.option(None, "ranks in the job (P) (default: a partition's parts, else 1)",
                                   check=(positive, "must be positive"))
    ranks_per_machine: int = cfg.option(1, "ranks on one machine (R); they share its copy of the topology in "
                                        "hybrid mode", check=(positive, "must be positive"))
    memory: str | None = cfg.option(None, "memory per machine, e.g. 256G, 512GiB or a byte count (default: this "
                                    "machine's MemAvailable)", metavar="SIZE",
                                    check=(_is_size, "must be a size such as 256G, 512GiB or a byte count"))
    degree_exponent: float = cfg.option(2.3, "power-law exponent of the degree model (the synthetic generator's "
                                        "default; real graphs are mostly 2-3)",
                                        check=(lambda v: v > 2, "must be > 2 (a finite mean degree)"))
    json: bool = cfg.option(False, "print the plan as JSON")

    def __post_init__(self):
        parts = None
        if self.dataset is not None:  # the dataset's sizes, as python -m fastsample.data info reads them
            from fastsample.data.graph import DatasetError
            from fastsample.partition import PartitionError

            try:
                meta, parts = dataset_meta(self.dataset)
            except (DatasetError, PartitionError) as e:
                raise cfg.ConfigError("dataset", f": {e}") from None
            object.__setattr__(self, "nodes", meta["num_nodes"])
            object.__setattr__(self, "edges", meta["num_edges"])
            object.__setattr__(self, "classes", meta["num_classes"])
            specs = [s for s in describe_types(meta)["features"].values() if s]
            object.__setattr__(self, "feature_dim", max([meta["feature_dim"]] + [s["dim"] for s in specs]) or 1)
            object.__setattr__(self, "feature_dtype", meta["dtypes"]["features"] or specs[0]["dtype"])
        if self.ranks is None:
            object.__setattr__(self, "ranks", parts or 1)
        for name in ("nodes", "edges", "feature_dim"):
            if getattr(self, name) is None:
                raise cfg.ConfigError(name, "is required (or give --dataset)")
        super().__post_init__()
        if self.ranks_per_machine > self.ranks:
            raise cfg.ConfigError("ranks_per_machine", f"must be at most the ranks, {self.ranks} "
                                  f"(got {self.ranks_per_machine})")
        if self.ranks > self.nodes:
            raise cfg.ConfigError("ranks", f"must be at most the nodes, {self.nodes:,} (got {self.ranks})")

    @property
    def memory_bytes(self) -> int | None:
        return parse_size(self.memory) if self.memory is not None else available_memory()


# ---------------------------------------------------------------------------------------------
# The degree model and the expected MFG sizes


class _Degrees:
    """The Chung-Lu power-law degree model on a quantile grid: cell j holds a share
    ``mass[j]`` of the nodes, each with expected degree ``lam[j]`` (mean: E/N)."""

    def __init__(self, num_nodes: int, num_edges: int, exponent: float):
        n, mean = num_nodes, num_edges / num_nodes
        tail = exponent - 1.0  # the weights' Pareto index (synth.py's _weights)
        # cells in the upper-tail probability q = 1 - u, log-spaced down to one node
        q = np.concatenate([[0.0], np.geomspace(0.5 / n, 1.0, _GRID)])
        self.mass = np.diff(q)
        mid = np.sqrt(np.maximum(q[:-1], 0.25 / n) * q[1:])
        w = mid ** (-1.0 / tail)
        w_mean = float(self.mass @ w)
        cap = min(400 * mean, n / 4) if mean > 0 else 1.0  # synth.py's default cap on the expected degree
        w = np.minimum(w, cap * w_mean / max(mean, 1e-12))
        self.lam = mean * w / float(self.mass @ w)
        self.n, self.mean = n, mean

    def picks(self, fanout: int, biased: bool) -> np.ndarray:
        """E[min(D, fanout)] per cell; D ~ Poisson(lam), or 1 + Poisson(lam) for a node reached
        through an edge (size-biased); fanout -1: E[D]."""
        lam = self.lam
        if fanout == -1:
            return lam + 1.0 if biased else lam.copy()
        # E[min(D, f)] = sum_{k<f} P(D > k); D' = 1 + D: sum_{k<f} P(D' > k) = 1 + sum_{k<f-1} P(D > k)
        terms = fanout - 1 if biased else fanout
        pmf = np.exp(-lam)
        cdf = pmf.copy()
        total = np.zeros_like(lam)
        for k in range(terms):
            total += 1.0 - cdf
            pmf = pmf * lam / (k + 1)
            cdf = cdf + pmf
        return total + (1.0 if biased else 0.0)

    def reached(self, picks: float) -> np.ndarray:
        """Per cell, the probability that a node is among ``picks`` degree-biased draws."""
        if self.mean == 0:
            return np.zeros_like(self.lam)
        return -np.expm1(picks * np.log1p(-np.minimum(self.lam / (self.n * self.mean), 1.0)))


@dataclass(frozen=True)
class LayerSizes:
    """One layer's expected MFG: destinations, sampled edges, sources (destinations included)."""

    num_dst: float
    num_edges: float
    num_src: float


DIRECT_MAP_NODES = 8 << 20  # native/node_map.hpp's direct_map_nodes


def node_map_bytes(num_nodes: int, batch_nodes: float) -> int:
    """The native sampler's map for a graph of ``num_nodes`` and batches of ``batch_nodes``
    distinct nodes (see the module doc)."""
    if num_nodes <= DIRECT_MAP_NODES:
        return 8 * num_nodes
    return 8 * max(4096, 1 << math.ceil(math.log2(max(2 * batch_nodes, 1))))


def expected_mfgs(num_nodes: int, num_edges: int, fanouts, batch_size: int,
                  exponent: float = 2.3) -> list[LayerSizes]:
    """Expected MFG sizes of one step (input layer first, as fastsample.sampling.sample's).

    Args:
        num_nodes, num_edges: the graph (stored directed edges); fanouts: per layer, input
        layer first; batch_size: seeds (uniform over the graph); exponent: the degree
        model's power law.
    """
    deg = _Degrees(num_nodes, num_edges, exponent)
    seeds = float(min(batch_size, num_nodes))
    layers, dst, picked = [], seeds, 0.0
    for f in reversed([int(f) for f in fanouts]):
        p = deg.reached(picked)  # the non-seed destinations: nodes reached so far
        per_reached = float(deg.mass @ (p * deg.picks(f, True))) / float(deg.mass @ p) if picked else 0.0
        edges = seeds * float(deg.mass @ deg.picks(f, False)) + (dst - seeds) * per_reached
        picked += edges
        distinct = num_nodes * float(deg.mass @ deg.reached(picked))  # among every pick so far
        src = min(float(num_nodes), max(dst, seeds + distinct))
        layers.append(LayerSizes(dst, edges, src))
        dst = src
    return layers[::-1]


# ---------------------------------------------------------------------------------------------
# The plan


def _itemsize(dtype) -> int:
    return np.dtype(dtype).itemsize


def _held(dtype, precision: str) -> int:
    """The bytes a feature value of the stored ``dtype`` takes in a job of ``precision``:
    bf16 narrows float32 to 2, int8 holds 1 (fastsample/int8.py), fp32 keeps the dtype's."""
    return {"bf16": min(2, _itemsize(dtype)), "int8": 1}.get(precision, _itemsize(dtype))


def dataset_meta(path) -> tuple[dict, int | None]:
    """A dataset directory's meta.json, or a partition's copy of it and its parts (else None)."""
    from fastsample.data.graph import read_meta
    from fastsample.partition import read_partition_meta

    if (Path(path) / "partition.json").is_file():
        meta = read_partition_meta(path)
        return meta["dataset"], meta["num_parts"]
    return read_meta(path), None


def _types(c: PlanConfig) -> dict:
    """The node and edge types' terms: per-type feature rows and row bytes, the target type's
    rows, the bytes per edge of edge types, the relations into a node per type, the model's
    parameters and the (sharded) embedding tables. A typed --dataset's from its meta.json;
    else the one-type case the flags describe (GraphSAGE is the one-relation R-GCN: the
    same parameters)."""
    from fastsample.data.graph import type_dtype
    from fastsample.partition.balance import type_cap

    meta = dataset_meta(c.dataset)[0] if c.dataset is not None else {
        "num_nodes": c.nodes, "feature_dim": c.feature_dim, "dtypes": {"features": np.dtype(c.feature_dtype).name}}
    types = describe_types(meta)
    counts = dict(zip(types["node_types"], np.diff(types["node_type_offset"]).tolist()))
    specs, edge_types = types["features"], types["edge_types"]
    featured = [(counts[t], s["dim"] * _held(s["dtype"], c.precision)) for t, s in specs.items() if s]
    dims = {t: (s["dim"] if s else c.embed_dim) for t, s in specs.items()}
    params = 0
    for i in range(c.layers):  # per layer and relation: W_self (dst), W_neigh (src), bias
        out = c.classes if i == c.layers - 1 else c.hidden
        params += sum((dims[s] + dims[d]) * out + out for s, _, d in edge_types)
        dims = dict.fromkeys(dims, out)
    target = types["target_type"] or NODE
    return {"node_types": counts, "featured": featured, "target_rows": counts[target],
            "type_bytes": type_dtype(len(edge_types)).itemsize * ("type_per_edge" in meta["dtypes"]),
            "relations_per_type": len(edge_types) / len(counts), "params": params,
            # the built-in model: GraphSAGE for the one-type case (6 state copies: its concatenated weight's
            # too), else the R-GCN (5)
            **({"model": "GraphSAGE", "state_copies": 6} if types["target_type"] is None
               else {"model": "R-GCN", "state_copies": 5}),
            "embedding_values": sum(counts[t] for t, s in specs.items() if not s) * c.embed_dim,
            "embedding_rank_values": sum(type_cap(counts[t], c.ranks) for t, s in specs.items() if not s)
            * c.embed_dim}


def plan(c: PlanConfig) -> dict:
    """Every figure of the plan (bytes, expected values), as the report and --json show it."""
    from fastsample.partition import memory as pm
    from fastsample.partition.assign import symmetric_edges
    from fastsample.partition.balance import in_edge_cap, type_cap

    n, e, P, R = c.nodes, c.edges, c.ranks, c.ranks_per_machine
    machines = math.ceil(P / R)
    ids = id_dtype(n)
    offs = np.dtype(np.int64) if ids == np.int64 else offset_dtype(e)
    idb, offb, fb = _itemsize(ids), _itemsize(offs), _held(c.feature_dtype, c.precision)
    shard_rows = [n // P + (r < n % P) for r in range(P)]  # an even split: what the parts hold on average
    types = _types(c)
    # the largest part's rows: each type at its cap under the partitioner's balance
    owned = min(n, sum(type_cap(rows, P) for rows in types["node_types"].values()))
    edges_owned = in_edge_cap(e, P)

    topology = (n + 1) * offb + e * idb
    rank_topology = (owned + 1) * offb + edges_owned * idb  # vanilla: the rank's rows
    # a fanout applies per (node, edge type): about R / T relations into each node
    fanouts = [f if f < 0 else f * types["relations_per_type"] for f in c.fanouts]
    mfgs = expected_mfgs(n, e, fanouts, c.batch_size, c.degree_exponent)
    dims = [c.feature_dim] + [c.hidden] * (c.layers - 1) + [c.classes]

    # persistent, per rank
    # per-type shards at their widths; labels (int64) and the split ids (at most one per target-type node)
    shard = sum(type_cap(rows, P) * width for rows, width in types["featured"])
    labels = type_cap(types["target_rows"], P) * (8 + idb)
    topology += e * types["type_bytes"]
    rank_topology += edges_owned * types["type_bytes"]
    cached_rows = min(int(c.cache_fraction * n), n - owned) if c.cache_fraction else 0
    cache = cached_rows * (c.feature_dim * fb + 8)
    cache_build = (4 if c.cache_policy == "frequency" else 3) * 8 * n if c.cache_fraction else 0
    node_map = node_map_bytes(n, mfgs[0].num_src)
    params = types["params"]
    model_state = types["state_copies"] * 4 * params + 3 * 4 * types["embedding_rank_values"]  # + Adam's

    # per step, per rank
    mfg_bytes = sum((m.num_dst + 1) * 8 + m.num_edges * 4 + (m.num_dst + m.num_edges) * idb for m in mfgs)
    inputs = mfgs[0].num_src
    x = inputs * c.feature_dim * 4
    remote = inputs * (P - 1) / P
    gather_buffers = 2 * remote * c.feature_dim * fb + inputs * 5 * 8
    if c.mode == "vanilla":  # requests and picks of every lower layer, both ways
        mfg_bytes += sum(2 * (m.num_dst + m.num_edges) * 8 for m in mfgs[:-1])
    batch = mfg_bytes + x + c.batch_size * 16  # + seeds and labels
    z = [m.num_dst * 2 * a * 4 for m, a in zip(mfgs, dims[:-1])]
    out = [m.num_dst * b * 4 for m, b in zip(mfgs, dims[1:])]
    # layer i's backward: saved Z_0..Z_i and outputs below it, its output's gradient, and (not for the
    # input layer, whose input needs none) Z's gradient and the input's
    backward = [sum(z[:i + 1]) + sum(out[:i]) + out[i] + (z[i] + mfgs[i].num_src * dims[i] * 4 if i else 0)
                for i in range(len(mfgs))]
    forward_end = sum(z) + sum(out) + 2 * c.batch_size * c.classes * 4
    activations = max(max(backward), forward_end)
    compute_peak = batch + activations + c.prefetch * batch + (gather_buffers if c.prefetch else 0)
    gather_peak = 2 * batch + gather_buffers
    step_peak = max(compute_peak, gather_peak)
    f_compute, f_gather = HEAP_FRAGMENTATION[c.allocator]
    heap = max(f_compute * compute_peak, f_gather * gather_peak, cache_build)

    rank_fixed = RUNTIME_BYTES + shard + labels + cache + node_map + model_state
    rank_total = rank_fixed + heap + (rank_topology if c.mode == "vanilla" else 0)
    machine_topology = topology if c.mode == "hybrid" else 0
    machine_total = machine_topology + LIBRARY_BYTES + R * rank_total
    memory = c.memory_bytes

    # the partitioner's own count of the symmetric adjacency (what --method auto sizes METIS by)
    sym = symmetric_edges(e, symmetric=False)
    method, why = pm.choose_method(n, sym, memory) if P > 1 else ("metis", "one part: nothing to partition")
    return {
        "config": asdict(c),
        "graph": {"nodes": n, "edges": e, "avg_degree": e / n, "id_dtype": ids.name, "indptr_dtype": offs.name,
                  "types": types},
        "machines": machines,
        "memory_per_machine": memory,
        "memory_source": "--memory" if c.memory is not None else "this machine's MemAvailable",
        "mfgs": [asdict(m) for m in mfgs],
        "model": {"dims": dims, "parameters": params, "kind": types["model"],
                  "embedding_values": types["embedding_values"]},
        "per_rank": {
            "feature_shard": shard, "shard_rows": shard_rows, "labels_and_splits": labels, "feature_cache": cache,
            "cache_rows": cached_rows, "cache_build_transient": cache_build, "node_map": node_map,
            "model_state": model_state,
            "runtime": RUNTIME_BYTES, "topology_part": rank_topology if c.mode == "vanilla" else 0,
            "step": {"mfgs": mfg_bytes, "gathered_features": x, "gather_buffers": gather_buffers,
                     "activations": activations, "prefetched_batches": c.prefetch * batch,
                     "compute_peak": compute_peak, "gather_peak": gather_peak, "peak": step_peak},
            "heap": heap,
            "total": rank_total,
        },
        "per_machine": {"ranks": R, "topology": machine_topology, "libraries": LIBRARY_BYTES, "total": machine_total,
                        "fits": None if memory is None else machine_total <= memory},
        "topology_bytes": topology,
        "partition": {"symmetric_edges": sym, "metis_peak": pm.metis_peak_bytes(n, sym),
                      "kaminpar_peak": pm.kaminpar_peak_bytes(n, sym),
                      "metis_peak_if_symmetric": pm.metis_peak_bytes(n, e),
                      "kaminpar_peak_if_symmetric": pm.kaminpar_peak_bytes(n, e),
                      "auto": method, "why": why},
    }


def _b(v: float) -> str:
    return format_bytes(float(v))


def format_plan(p: dict) -> str:
    """plan()'s dict as the report the CLI prints."""
    c, g, r, m, s = p["config"], p["graph"], p["per_rank"], p["per_machine"], p["per_rank"]["step"]
    hybrid = c["mode"] == "hybrid"
    lines = [
        f"graph       {g['nodes']:,} nodes, {g['edges']:,} stored directed edges (mean in-degree "
        f"{g['avg_degree']:.1f}), ids {g['id_dtype']}, indptr {g['indptr_dtype']}; {c['feature_dim']} features "
        f"{c['feature_dtype']}, {c['classes']} classes",
        f"job         {c['ranks']} rank{'s' * (c['ranks'] > 1)}, {c['ranks_per_machine']} per machine "
        f"({p['machines']} machine{'s' * (p['machines'] > 1)}), mode "
        f"{c['mode']}; {p['model']['kind']} {'-'.join(map(str, p['model']['dims']))}, fanouts "
        f"{','.join(map(str, c['fanouts']))}, batch {c['batch_size']}/rank"
        + (f", precision {c['precision']} (features held in {'8' if c['precision'] == 'int8' else '16'} bits)"
           if c["precision"] != "fp32" else "")
        + (f", cache {c['cache_fraction']:g} ({c['cache_policy']})" if c["cache_fraction"] else "")
        + (f", prefetch {c['prefetch']}" if c["prefetch"] else ""),
        "expected MFGs per step (input layer first; degree model exponent "
        f"{c['degree_exponent']:g}):",
    ]
    lines += [f"  layer {i}   {x['num_dst']:>12,.0f} dst {x['num_edges']:>13,.0f} edges {x['num_src']:>12,.0f} src"
              for i, x in enumerate(p["mfgs"])]
    row = "  {:<34} {:>11}"
    lines += ["per rank (expected; the largest shard)"]
    lines += [row.format(k, _b(v)) for k, v in [
        ("feature shard (1.05 N/P x F)", r["feature_shard"]),
        ("labels + split ids", r["labels_and_splits"]),
        (f"feature cache ({r['cache_rows']:,} rows)", r["feature_cache"]),
        ("sampler node map", r["node_map"]),
        (f"model: {p['model']['parameters']:,} params x 6" if not p["model"]["embedding_values"] else
         f"model: {p['model']['parameters']:,} params x 5, embeddings/P x 3",
         r["model_state"]),
        ("runtime (Python, torch, MPI)", r["runtime"]),
    ] + ([("topology part (vanilla)", r["topology_part"])] if not hybrid else [])]
    lines += ["  step:"]
    lines += [row.format("  " + k, _b(v)) for k, v in [
        ("MFGs", s["mfgs"]),
        ("gathered input features (fp32)", s["gathered_features"]),
        ("gather send/receive buffers", s["gather_buffers"]),
        ("activations + gradients (peak)", s["activations"]),
        ("batches made ahead (--prefetch)", s["prefetched_batches"]),
        ("step peak", s["peak"]),
    ]]
    fc, fg = HEAP_FRAGMENTATION[c["allocator"]]
    lines += [row.format("  compute / gather phase", f"{_b(s['compute_peak'])} / {_b(s['gather_peak'])}"),
              row.format(f"heap kept (x {fc:g} / x {fg:g}, {c['allocator']})", _b(r["heap"])),
              row.format("rank total", _b(r["total"]))]
    lines += [f"per machine ({m['ranks']} ranks)"]
    if hybrid:
        lines += [row.format("topology (shared, page cache)", _b(m["topology"]))]
    lines += [row.format("shared libraries", _b(m["libraries"])),
              row.format(f"{m['ranks']} x rank total", _b(m["ranks"] * r["total"])),
              row.format("machine total", _b(m["total"]))]
    mem = p["memory_per_machine"]
    if mem is None:
        lines += ["  memory per machine unknown (pass --memory): cannot say whether it fits"]
    else:
        verdict = "fits" if m["fits"] else "DOES NOT FIT"
        lines += [f"  {verdict} in {_b(mem)} ({p['memory_source']}): {m['total'] / mem:.0%} of it"]
    q = p["partition"]
    lines += [
        "partitioning (python -m fastsample.partition, one machine; estimated peak, symmetric adjacency "
        f"<= 2E = {q['symmetric_edges']:,} edges as --method auto counts; an undirected graph's is E, half):",
        f"  METIS     {_b(q['metis_peak']):>11}   ({_b(q['metis_peak_if_symmetric'])} if already symmetric)",
        f"  KaMinPar  {_b(q['kaminpar_peak']):>11}   ({_b(q['kaminpar_peak_if_symmetric'])} if already symmetric)",
        f"  --method auto: {q['auto']} ({q['why']})",
    ]
    return "\n".join(lines)


EPILOG = """\
examples:
  python -m fastsample.plan --nodes 2400000 --edges 117957736 --feature-dim 100 --ranks 4
  python -m fastsample.plan --nodes 111059956 --edges 3231371744 --feature-dim 128 --classes 172 \\
      --ranks 16 --ranks-per-machine 4 --memory 256G

Figures are expected values (the MFGs' sizes vary from step to step by a few per cent);
fastsample/plan.py says what each counts and docs/cluster.md how they compare with measurements.
"""


def build_parser():
    return cli.parser(PlanConfig, PROG, __doc__.split(":", 1)[1].split("\n\n")[0].strip(), EPILOG)


def main(argv=None) -> int:
    """The command line (``python -m fastsample.plan``). Returns 0; a bad flag exits 2 naming it."""
    parser = build_parser()
    config = cli.parse(PlanConfig, parser, argv)
    p = plan(config)
    print(json.dumps(p, indent=2) if config.json else format_plan(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
