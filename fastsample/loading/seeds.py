"""Seed sources: what a loader's step trains on, as the node ids its MFGs grow from.

The loader (fastsample/loading/loader.py) is one data path; a seed source is the one thing
that differs between tasks (as GraphBolt's node and link ``seeds``, PyG's node and link
neighbour loaders over one sampler):

  NodeSeeds  a split of the target type's nodes, each rank its own; a step's seeds are its
             next batch_size of them, sorted, and the batch carries their labels.
  EdgeSeeds  a split of a target relation's edges (python -m fastsample.data link-split),
             each rank those whose destination it owns; a step takes its next batch_size
             positive edges, draws k negative destinations among the relation's
             destination type for each, and seeds the MFGs with the unique endpoints. The
             batch's target edges (and their reverses) are excluded while picking, so no
             layer sees the answer and fanouts stay full (fastsample/sampling/exclusion.py).
  LabelledEdgeSeeds  a split of a relation's labelled edges (fastsample/data/edge_labels.py),
             each rank those whose destination it owns; a step takes its next batch_size
             edges, seeds the MFGs with their unique endpoints and carries their labels;
             the batch's edges (and their reverses) are excluded while picking, as above.

Both are deterministic functions of (seed, epoch, step, rank): every kernel and mode gives
the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import torch

from fastsample.choices import check_choice
from fastsample.data.edge_splits import EDGE_SPLITS, EdgeSplit, load_edge_split, relation_of
from fastsample.data.graph import SPLITS
from fastsample.sampling.rng import kernel_types

EXCLUDE = ("none", "self", "reverse")
NEGATIVE_SAMPLERS = ("uniform", "degree")
_SALT = 0x4E454753  # link orders and negatives draw from a key space of their own


@dataclass
class StepSeeds:
    """One step's seeds: ``nodes`` (unique, sorted: the last MFG's destinations), the edges
    no layer may pick (``exclude``: (src, dst, edge type) global ids, or None), how many
    items the step trains on, and the fields it adds to the Batch (its source's ``fields``)."""

    nodes: np.ndarray
    size: int
    exclude: tuple | None = None
    fields: dict = field(default_factory=dict)


def _excluded(src, dst, relation: int, reverse: int | None, mode: str) -> tuple | None:
    """The (src, dst, edge type) global ids no layer may pick for a step's edges: none, the
    edges themselves ("self"), or also their reverse edges ("reverse")."""
    if mode == "none":
        return None
    pairs = [(src, dst, relation)] + ([(dst, src, reverse)] if mode == "reverse" else [])
    return tuple(np.concatenate(c) for c in zip(*[(a, b, np.full(len(src), r, np.int64)) for a, b, r in pairs]))


def _order(n: int, key: list, shuffle: bool) -> np.ndarray:
    return np.random.default_rng(key).permutation(n) if shuffle else np.arange(n)


class NodeSeeds:
    """A split of the target type's nodes (see the module doc); ``part``: the rank's share."""

    kind = "nodes"
    own = True  # the seeds are this rank's own nodes (vanilla mode samples their top layer locally)
    fields = ("y",)  # what its StepSeeds add to the Batch

    def __init__(self, part, split: str, comm):
        check_choice(split, SPLITS, "split")
        self.part, self.split, self.rank = part, split, comm.rank
        self.ids = np.asarray(getattr(part, split))
        # the global id of labels' first row: this rank's first node of the target type
        self.lo = int(part.type_runs[self.rank * len(part.node_type_names) + part.target_index])

    def sizes(self) -> list[int]:
        """Every rank's number of items."""
        return self.part.split_sizes(self.split)

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        """This epoch's order of the rank's split nodes (ids)."""
        return self.ids[_order(len(self.ids), [seed, epoch, self.rank], shuffle)] if shuffle else self.ids

    def items(self, order: np.ndarray, step: int, batch_size: int) -> np.ndarray:
        """Step ``step``'s nodes: the step-th batch_size of ``order``, sorted."""
        return np.sort(order[step * batch_size:(step + 1) * batch_size])

    def of(self, nodes: np.ndarray, seed: int, epoch: int, step: int) -> StepSeeds:
        """The StepSeeds of this rank's ``nodes`` (sorted): themselves, with their labels."""
        labels = self.part.labels[np.asarray(nodes) - self.lo]  # class ids, or float targets (regression)
        y = torch.from_numpy(np.asarray(labels, dtype=np.float32 if labels.dtype.kind == "f" else np.int64))
        return StepSeeds(np.asarray(nodes), len(nodes), None, {"y": y})


def open_edge_split(part) -> EdgeSplit:
    """This share's edges: a partition part's link/ (its destinations' edges), or a dataset's."""
    meta = part.layout["dataset"].get("link")
    if meta is None:
        partitioned = (Path(part.path) / "partition.json").is_file()
        raise ValueError(f"{part.path}: no edge split (make one: python -m fastsample.data link-split DATASET OUT"
                         + (", then partition OUT: python -m fastsample.partition OUT OUT-P --parts P, and train on "
                            "that)" if partitioned else ")"))
    if (Path(part.path) / "partition.json").is_file():
        return load_edge_split(Path(part.path) / f"part-{part.rank}", part.num_nodes, meta)
    return load_edge_split(part.path, part.num_nodes, meta, graph=part.graph)


@numba.njit(nogil=True, cache=True)
def has_edge(indptr, indices, types, etype, src, dst):
    """Whether src[i] -> dst[i] is an edge of type ``etype`` (dst's in-edges hold src; an
    empty ``types``: an untyped graph)."""
    out = np.zeros(len(src), dtype=np.bool_)
    for e in range(len(src)):
        for p in range(indptr[dst[e]], indptr[dst[e] + 1]):
            if indices[p] == src[e] and (len(types) == 0 or types[p] == etype):
                out[e] = True
                break
    return out


class _RelationEdges:
    """What the edge seed sources share: a split's edges of one relation (rows [src, dst],
    global ids), the relation and its reverse as edge types, the exclusion rule, and an
    epoch's order of the rows."""

    def _relation(self, part, split: str, comm, edges, meta: dict, exclude: str | None) -> None:
        """Set the split's rows, its relation and reverse (``meta``: the split's record, a
        link split's or labelled edges', both naming "relation" and "reverse") and the
        exclusion rule (default: reverse where the relation has reverse edges, else self)."""
        check_choice(split, EDGE_SPLITS, "split")
        if exclude is not None:
            check_choice(exclude, EXCLUDE, "exclude")
        self.part, self.split, self.rank = part, split, comm.rank
        self.edges = np.asarray(edges, dtype=np.int64)
        topology = part.graph if part.graph is not None else part.local_graph
        # the relation and the one its reverse edges are in (untyped: the one edge type)
        self.relation, self.reverse = relation_of(topology, meta)
        self.exclude = exclude if exclude is not None else ("reverse" if self.reverse is not None else "self")
        if self.exclude == "reverse" and self.reverse is None:
            raise ValueError(f"{part.path}: exclude reverse: the split's edges have no reverse edges (a directed graph "
                             "without a reverse relation); use self or none")

    def sizes(self) -> list[int]:
        """Every rank's number of edges (exchanged once, when the source was made)."""
        return self._sizes

    def order(self, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
        """This epoch's order of the rank's edges (rows of ``edges``)."""
        return _order(len(self.edges), [seed, epoch, self.rank, _SALT], shuffle)


class EdgeSeeds(_RelationEdges):
    """A split of a target relation's edges with negatives (see the module doc).

    Args:
        part: the rank's share of a link-split dataset; split: "train", "val" or "test";
        comm: the job's communicator (the ranks' edge counts are exchanged once, here);
        negatives: k, negative destinations per positive edge;
        negative_sampler: "uniform" over the destination type's nodes, or "degree"
            (in-degree^0.75, as word2vec and PinSage);
        strict: redraw a negative that is an edge of the relation (needs the whole topology);
        exclude: "self", "reverse" (the default where the split has reverse edges: an
            undirected graph's, or a typed relation's reverse relation) or "none".
    """

    kind = "edges"
    own = False  # an edge's endpoints and negatives are anyone's nodes
    fields = ("src", "dst", "neg", "edges", "negatives")

    def __init__(self, part, split: str, comm, negatives: int = 1, negative_sampler: str = "uniform",
                 strict: bool = False, exclude: str | None = None):
        check_choice(split, EDGE_SPLITS, "split")
        check_choice(negative_sampler, NEGATIVE_SAMPLERS, "negative_sampler")
        if not isinstance(negatives, (int, np.integer)) or negatives < 1:
            raise ValueError(f"negatives must be a positive integer (got {negatives!r})")
        self.k, self.negative_sampler, self.strict = int(negatives), negative_sampler, bool(strict)
        if strict and part.graph is None:
            raise ValueError("strict: negatives are checked against the whole topology, which vanilla mode does not "
                             "hold (use mode hybrid, or strict=False)")
        self.edges_split = open_edge_split(part)
        self._relation(part, split, comm, getattr(self.edges_split, split), self.edges_split.meta, exclude)
        topology = part.graph if part.graph is not None else part.local_graph
        node_types = list(part.node_type_names)
        edge_types = topology.edge_types
        # the destination type's nodes: the k-th of them is in one of its runs (one per rank)
        T = len(node_types)
        dst_type = node_types.index(edge_types[self.relation][2])
        runs = part.type_runs
        self.dst_runs = np.stack([runs[dst_type:-1:T], runs[dst_type + 1::T]], axis=1)
        self.dst_before = np.concatenate([[0], np.cumsum(self.dst_runs[:, 1] - self.dst_runs[:, 0])])
        self.types = kernel_types(topology)
        self._cumulative = self._degree_weights(comm, topology) if negative_sampler == "degree" else None
        self._sizes = comm.allgather_object(len(self.edges))

    def _degree_weights(self, comm, topology) -> np.ndarray:
        """Cumulative in-degree^0.75 over the destination type's nodes, in their order
        (vanilla: the owned ranges' degrees gathered)."""
        if self.part.graph is not None:
            degree = np.diff(np.asarray(self.part.graph.indptr, dtype=np.int64))
        else:
            degree = np.concatenate(comm.allgather_object(np.diff(np.asarray(topology.indptr, dtype=np.int64))))
        degree = np.concatenate([degree[a:b] for a, b in self.dst_runs])
        weights = np.cumsum(degree.astype(np.float64) ** 0.75)
        if not len(weights) or weights[-1] <= 0:
            raise ValueError(f"{self.part.path}: negative_sampler degree: the relation's destinations have no edges")
        return weights / weights[-1]

    def draw_negatives(self, src: np.ndarray, seed: int, epoch: int, step: int) -> np.ndarray:
        """(B, k) negative destinations (global ids of the destination type) for sources ``src``."""
        n = int(self.dst_before[-1])
        rng = np.random.default_rng([seed, epoch, step, self.rank, _SALT])
        draw = ((lambda size: rng.integers(0, n, size=size)) if self._cumulative is None else
                (lambda size: np.minimum(np.searchsorted(self._cumulative, rng.random(size), side="right"), n - 1)))
        out = self._ids(draw((len(src), self.k)))
        if self.strict:
            g = self.part.graph
            for _ in range(100):
                s = np.repeat(src, self.k)
                bad = (has_edge(g.indptr, g.indices, self.types, self.relation, s.astype(g.indices.dtype),
                                out.ravel().astype(g.indices.dtype)) | (out.ravel() == s)).reshape(out.shape)
                if not bad.any():
                    break
                out[bad] = self._ids(draw(int(bad.sum())))
            else:
                raise ValueError("strict negatives: could not draw non-edges for some sources in 100 rounds")
        return out.astype(np.int64)

    def _ids(self, k: np.ndarray) -> np.ndarray:
        """The global ids of the destination type's k-th nodes (untyped: k itself)."""
        run = np.searchsorted(self.dst_before, k, side="right") - 1
        return k - self.dst_before[run] + self.dst_runs[run, 0]

    def items(self, order: np.ndarray, step: int, batch_size: int) -> np.ndarray:
        """Step ``step``'s positive edges (B, 2): the step-th batch_size rows of ``order``."""
        return self.edges[order[step * batch_size:(step + 1) * batch_size]]

    def of(self, edges: np.ndarray, seed: int, epoch: int, step: int) -> StepSeeds:
        """The StepSeeds of positive ``edges`` (B, 2) at ``step``: their negatives, the
        unique endpoints, and the edges to exclude."""
        src, dst = edges[:, 0], edges[:, 1]
        B = len(edges)
        neg = self.draw_negatives(src, seed, epoch, step)
        nodes, inverse = np.unique(np.concatenate([src, dst, neg.ravel()]), return_inverse=True)
        exclude = _excluded(src, dst, self.relation, self.reverse, self.exclude)
        at = torch.from_numpy(inverse.astype(np.int64))
        return StepSeeds(nodes, B, exclude, {"src": at[:B], "dst": at[B:2 * B], "neg": at[2 * B:].reshape(B, self.k),
                                             "edges": edges, "negatives": neg})


def open_edge_labels(part):
    """This share's labelled edges: a partition part's edge_labels/ (its destinations'), or a dataset's."""
    from fastsample.data.edge_labels import load_edge_labels

    meta = part.layout["dataset"].get("edge_labels")
    if meta is None:
        raise ValueError(f"{part.path}: no labelled edges (an edge task's data: its meta.json's edge_labels; "
                         "python -m fastsample.data targets makes some)")
    if (Path(part.path) / "partition.json").is_file():
        return load_edge_labels(Path(part.path) / f"part-{part.rank}", part.num_nodes, meta)
    return load_edge_labels(part.path, part.num_nodes, meta, graph=part.graph)


class LabelledEdgeSeeds(_RelationEdges):
    """A split of a relation's labelled edges (see the module doc).

    Args:
        part: the rank's share of a dataset with labelled edges; split: "train", "val" or
        "test"; comm: the job's communicator (the ranks' edge counts are exchanged once);
        exclude: "self" (the batch's edges), "reverse" (and their reverse edges: the default
            where the relation has a reverse, an undirected graph's own or a typed reverse
            relation) or "none".
    """

    kind = "edges"
    own = False  # an edge's endpoints are anyone's nodes
    fields = ("src", "dst", "y", "edges")

    def __init__(self, part, split: str, comm, exclude: str | None = None):
        self.labelled = open_edge_labels(part)
        check_choice(split, EDGE_SPLITS, "split")
        self._relation(part, split, comm, self.labelled.edges[split], self.labelled.meta, exclude)
        self.labels = np.asarray(self.labelled.labels[split])
        self._sizes = comm.allgather_object(len(self.edges))

    def items(self, order: np.ndarray, step: int, batch_size: int) -> np.ndarray:
        """Step ``step``'s edges: the step-th batch_size rows of ``order`` (indices into ``edges``)."""
        return order[step * batch_size:(step + 1) * batch_size]

    def of(self, rows: np.ndarray, seed: int, epoch: int, step: int) -> StepSeeds:
        """The StepSeeds of edge rows ``rows``: the unique endpoints, the edges to exclude, the labels."""
        edges = self.edges[rows]
        src, dst = edges[:, 0], edges[:, 1]
        B = len(edges)
        nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        exclude = _excluded(src, dst, self.relation, self.reverse, self.exclude)
        at = torch.from_numpy(inverse.astype(np.int64))
        y = self.labels[rows]
        y = torch.from_numpy(np.asarray(y, dtype=np.float32 if y.dtype.kind == "f" else np.int64))
        return StepSeeds(nodes, B, exclude, {"src": at[:B], "dst": at[B:], "y": y, "edges": edges})
