"""Neighbour sampling into MFGs: one public function, three interchangeable kernels.

    from fastsample.sampling import sample
    mfgs = sample(graph, seeds, fanouts, seed=0, epoch=0, step=0, rank=0, kernel="native")

``fanouts[i]`` is the fanout of GNN layer i counted from the input layer (DGL's
convention: the seeds use ``fanouts[-1]``); -1 takes all neighbours. ``mfgs[i]`` is layer
i's MFG: ``mfgs[-1]``'s destinations are the seeds, ``mfgs[0].src_ids`` the input nodes
whose features are gathered. Sampling is without replacement and deterministic: for the
same key (seed, epoch, step, rank, layer, node) every kernel returns the same MFGs.

Kernels: "native" (C++/OpenMP, fused), "numba" (the same fused algorithm in Numba),
"twostep" (COO first, then compaction and COO->CSC: the conventional baseline), and
"auto" (native when built, else numba).

Typed graphs take fanouts per edge type (fanout_matrix); an untyped graph is the one-type
case (R = 1): the same code, its MFGs without edge types.

Link prediction: ``exclude`` (positions of edges in the graph's ``indices``, from
``edge_positions``) names edges no layer may pick; the kernels skip them while picking,
so fanouts stay full where the remaining degree allows (rng.py, sampling/exclusion.py).

Extension point: a ``Sampler`` (the protocol below) turns a step's seeds into MFGs. The
loader holds one: ``LocalSampler`` (this module's kernels on a whole topology, hybrid
mode) or ``fastsample.distributed.VanillaSampler`` (a partitioned topology, built from
``sample_neighbors`` and ``assemble``).
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from fastsample.choices import KERNELS, check_fanouts
from fastsample.data.graph import CSCGraph
from fastsample.sampling.exclusion import check_excluded, edge_positions
from fastsample.sampling.mfg import MFG
from fastsample.sampling.nodemap import node_map
from fastsample.sampling.rng import kernel_types, layer_key, layer_keys, type_keys

from fastsample.native import lib as _native

__all__ = ["MFG", "Sampler", "LocalSampler", "sample", "sample_neighbors", "assemble", "edge_positions", "layer_key",
           "layer_keys",
           "KERNELS", "resolve_kernel", "get_num_threads", "set_num_threads"]


def resolve_kernel(kernel: str) -> str:
    if kernel == "auto":
        return "native" if _native is not None else "numba"
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)} or auto (got {kernel!r})")
    if kernel == "native" and _native is None:
        raise ValueError("kernel 'native': fastsample._native is not built (installed with "
                         "FASTSAMPLE_NATIVE=OFF or without a compiler); use kernel='numba'")
    return kernel


def fanout_matrix(graph: CSCGraph, fanouts) -> np.ndarray:
    """(layers, edge types) int64: each layer's fanout per edge type. A layer's entry is an
    int (every edge type) or a mapping {relation: k} (CSCGraph.relation
    names them; "*" gives the rest; k = 0: none, -1: all). Every edge type must be given."""
    fanouts = check_fanouts(fanouts)
    R = graph.num_edge_types
    out = np.empty((len(fanouts), R), dtype=np.int64)
    for layer, f in enumerate(fanouts):
        if not isinstance(f, dict):
            out[layer] = f
            continue
        row = np.full(R, f.get("*", -2), dtype=np.int64)
        for name, k in f.items():
            if name != "*":
                try:
                    row[graph.relation(name)] = k
                except KeyError as e:
                    raise ValueError(f"fanouts: layer {layer}: {e.args[0]}") from None
        if (row == -2).any():
            missing = ", ".join(":".join(graph.edge_types[r]) for r in np.flatnonzero(row == -2))
            raise ValueError(f"fanouts: layer {layer} gives no fanout for {missing} (name them, or give the rest "
                             "with '*')")
        out[layer] = row
    return out


def _check(graph: CSCGraph, seeds, fanouts) -> tuple[np.ndarray, np.ndarray]:
    fanouts = fanout_matrix(graph, fanouts)
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (len(seeds) and seeds.dtype.kind not in "iu"):
        raise ValueError(f"seeds must be a 1-D integer array (got {seeds.dtype} {seeds.shape})")
    if len(seeds):
        lo, hi = int(seeds.min()), int(seeds.max())
        if lo < 0 or hi >= graph.num_nodes:
            raise ValueError(f"seeds span [{lo}, {hi}], outside 0..{graph.num_nodes - 1}")
    return np.ascontiguousarray(seeds, dtype=graph.indices.dtype), fanouts


def sample(graph: CSCGraph, seeds, fanouts: Sequence[int], *, seed: int = 0, epoch: int = 0,
           step: int = 0, rank: int = 0, kernel: str = "auto", exclude=None) -> list[MFG]:
    """Sample ``len(fanouts)`` layers of MFGs around ``seeds`` (see the module doc).

    Args:
        graph: the topology (its index dtypes were fixed when it was built: CSCGraph).
        seeds: unique node ids, 1-D integers.
        fanouts: neighbours per layer, input layer first; -1 takes all. On a typed graph a
            number applies to every edge type, and a layer's entry may instead map relations
            to fanouts (fanout_matrix); the MFGs then carry each edge's type.
        seed, epoch, step, rank: the RNG contract's key fields (rng.py).
        kernel: "native", "numba", "twostep" or "auto".
        exclude: sorted unique int64 positions in graph.indices of edges no layer picks
            (edge_positions gives them), or None.
    Returns:
        The MFGs, input layer first (``mfgs[-1]``'s destinations are the seeds).
    """
    kernel = resolve_kernel(kernel)
    seeds, fanouts = _check(graph, seeds, fanouts)
    exclude = check_excluded(graph, exclude)
    keys = type_keys(layer_keys(seed, epoch, step, rank, len(fanouts)), graph.num_edge_types)
    types = kernel_types(graph)
    if kernel == "native":
        return _mfgs(_native.sample_fused(graph.indptr, graph.indices, types, seeds, fanouts.ravel(), keys.ravel(),
                                          graph.num_edge_types, exclude), graph)
    from fastsample.sampling import numba_fused, twostep

    excluded = numba_fused.NO_EXCLUSION if exclude is None else exclude
    layers = numba_fused.sample_layers if kernel == "numba" else twostep.sample_layers
    with node_map(graph.num_nodes) as m:
        return _mfgs(layers(graph.indptr, graph.indices, types, seeds, fanouts, keys, m, excluded), graph)


def sample_neighbors(graph: CSCGraph, nodes: np.ndarray, fanout, key, row_offset: int = 0,
                     kernel: str = "auto", exclude=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer's choice for ``nodes``, not relabelled: the choice rule with layer key ``key``.

    Args:
        graph: the neighbour lists; node v's are row ``v - row_offset`` (a rank's share of a
            partitioned topology has its owned range's rows, sources global).
        nodes: the destinations, ``graph.indices``' dtype.
        fanout: neighbours per node (-1: all), per edge type: a fanout_matrix row ((R,)
            int64); an int on an untyped graph (R = 1).
        key: the layer key per edge type (a row of rng.type_keys: (R,) uint64); an int on
            an untyped graph (``layer_key(seed, epoch, step, rank, layer)``).
        kernel: "native" where built, else Numba ("auto"); both choose the same.
        exclude: sorted positions in graph.indices never picked, or None.
    Returns:
        (indptr int64 (len(nodes) + 1,), picked global ids in CSC order, their edge types:
        empty on an untyped graph).
    """
    kernel = resolve_kernel(kernel)
    if len(nodes) and (int(nodes.min()) < row_offset or int(nodes.max()) >= row_offset + graph.num_nodes):
        # the kernels read row node - row_offset unchecked: a bad offset would read past the rows
        raise ValueError(f"nodes span [{int(nodes.min())}, {int(nodes.max())}], outside the graph's rows "
                         f"{row_offset}..{row_offset + graph.num_nodes - 1}")
    exclude = check_excluded(graph, exclude)
    R = graph.num_edge_types
    fanout = np.ascontiguousarray(np.reshape(fanout, -1), dtype=np.int64)
    key = np.ascontiguousarray(np.reshape(np.asarray(key, dtype=np.uint64), -1))
    if len(fanout) != R or len(key) != R:
        raise ValueError(f"sample_neighbors: fanout and key need one entry per edge type ({R}; got {len(fanout)} "
                         f"and {len(key)})")
    types = kernel_types(graph)
    if kernel == "native":
        return _native.sample_neighbors(graph.indptr, graph.indices, types, nodes, fanout, key, R, int(row_offset),
                                        exclude)
    from fastsample.sampling import numba_fused

    return numba_fused.sample_csc(graph.indptr, graph.indices, types, nodes, fanout, key, max(int(fanout.max()), 1),
                                  row_offset, numba_fused.NO_EXCLUSION if exclude is None else exclude)


def assemble(seeds: np.ndarray, num_layers: int, num_nodes: int, graph: CSCGraph,
             pick: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[MFG]:
    """MFGs from a per-layer choice made elsewhere: ``pick(dst, layer)`` returns
    ``sample_neighbors``' (indptr, picked global ids, edge types) for destinations ``dst``
    from ``graph`` (a rank's share of the topology: num_nodes is the whole one's); the
    layers are relabelled exactly as the fused kernels do. Returns the MFGs, input layer first."""
    from fastsample.sampling import numba_fused

    with node_map(num_nodes) as m:
        return _mfgs(numba_fused.relabel_layers(seeds, num_layers, pick, m), graph)


def _mfgs(layers, graph: CSCGraph) -> list[MFG]:
    """The kernels' layers (top first, tuples ending with the edge types) as MFGs, input
    layer first. The one place the untyped case differs: its MFGs' edge_types are None
    (downstream code reads that as "untyped"), where the kernels gave none (empty)."""
    untyped = graph.type_per_edge is None
    return [MFG(ip, ix, src, n, None if untyped else types) for ip, ix, src, n, types in reversed(layers)]


@runtime_checkable
class Sampler(Protocol):
    """What a loader needs to turn a step's seeds into MFGs (the RNG contract fixes the draws:
    every implementation returns the same MFGs for the same key). ``sample`` is collective
    where the implementation communicates (vanilla). ``exclude``: (src, dst) global ids of
    edges no layer may pick, every copy of each, or (src, dst, etypes) for only the copies
    of edge type etypes[i] (edge_positions); None: none (link prediction; then given on
    every rank)."""

    name: str

    def sample(self, seeds: np.ndarray, fanouts: Sequence[int], *, seed: int, epoch: int, step: int,
               exclude=None) -> list[MFG]:
        ...


class LocalSampler:
    """Sampler over a whole topology in this process (hybrid mode: every rank holds it).

    Args:
        graph: the topology.
        rank: this rank (a key field of the RNG contract).
        kernel: "native", "numba", "twostep" or "auto" (resolved here).
    """

    def __init__(self, graph: CSCGraph, rank: int = 0, kernel: str = "auto"):
        self.graph, self.rank, self.name = graph, int(rank), resolve_kernel(kernel)

    def sample(self, seeds, fanouts, *, seed: int, epoch: int, step: int, exclude=None) -> list[MFG]:
        positions = None if exclude is None else edge_positions(self.graph, *exclude)
        return sample(self.graph, seeds, fanouts, seed=seed, epoch=epoch, step=step, rank=self.rank,
                      kernel=self.name, exclude=positions)


def get_num_threads() -> int:
    """The calling thread's kernel thread count (set_num_threads)."""
    import numba

    return numba.get_num_threads()


def set_num_threads(n: int) -> None:
    """Threads for every kernel: OpenMP (native) and Numba's pool (numba, twostep). Both
    settings belong to the calling thread: a new thread starts from the defaults."""
    import numba

    if n < 1 or n > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"threads must be in 1..{numba.config.NUMBA_NUM_THREADS} (got {n}); "
                         "start Python with NUMBA_NUM_THREADS/OMP_NUM_THREADS set for more")
    numba.set_num_threads(n)
    if _native is not None:
        _native.set_num_threads(n)
