"""Vanilla distributed sampling: the topology is partitioned too.

A rank holds only the in-edges of the nodes it owns. The top layer's destinations are
its own training seeds, so that layer is sampled locally. Every lower layer needs the
neighbours of nodes owned elsewhere:

    round 1  bucket the non-owned destinations by owner; all_to_all their ids
             each owner picks their neighbours with the *requester's* key (same choice
             rule, so the same picks as hybrid sampling on the whole graph)
    round 2  all_to_all back, per owner: the pick counts of the requested nodes, then
             the picks, then their edge types (none on an untyped graph), in one int64 buffer
then the requester assembles the layer in destination order and relabels as the fused
kernels do. With the feature gather's 2 rounds that is 2L rounds for L layers (hybrid: 2).
The picks are made by ``fastsample.sampling.sample_neighbors`` (native where built) and
relabelled by ``fastsample.sampling.assemble``: the same code as hybrid sampling.
An untyped graph is the one-type case: fanouts and keys per edge type, R = 1.
Excluded edges (link prediction): every rank's (src, dst) pairs, with their edge types
where given, go to every rank once per step (one allgather), and each owner skips, for a
requester, that requester's edges into the nodes it owns, so the picks are hybrid's.
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.comm import Communicator
from fastsample.data.graph import CSCGraph
from fastsample.partition import owner_of
from fastsample.sampling import (MFG, assemble, edge_positions, fanout_matrix, layer_key, resolve_kernel,
                                 sample_neighbors)
from fastsample.sampling.rng import type_keys


@numba.njit(nogil=True, cache=True)
def _scatter_rows(out_indptr, rows, src_indptr, picks, types, out, out_types):
    """out's segment for rows[k] <- picks[src_indptr[k]:src_indptr[k + 1]], and out_types'
    <- types' alike (on an untyped graph there are none: types and out_types are empty)."""
    for k in range(len(rows)):
        r = rows[k]
        n = src_indptr[k + 1] - src_indptr[k]
        for j in range(n):
            out[out_indptr[r] + j] = picks[src_indptr[k] + j]
            if len(types):
                out_types[out_indptr[r] + j] = types[src_indptr[k] + j]


class VanillaSampler:
    """A Sampler (fastsample.sampling) over a partitioned topology; ``sample`` is collective.

    Args:
        comm: the job's communicator (every rank calls ``sample`` for every step).
        offsets: (P + 1,) the owned ranges: rank r owns ids offsets[r]..offsets[r + 1]-1.
        local_graph: in-edges of the owned range (rows local, sources global).
        kernel: the owner side's choice kernel: "native", "numba" or "auto".
        own_seeds: the seeds are always the rank's own nodes (node classification), so the
            top layer needs no communication; False (link prediction: an edge's endpoints
            and negatives are anyone's): every layer asks the owners, 2 more rounds.
    """

    def __init__(self, comm: Communicator, offsets: np.ndarray, local_graph: CSCGraph, kernel: str = "auto",
                 own_seeds: bool = True):
        self.comm = comm
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.local = local_graph
        self.lo = int(self.offsets[comm.rank])
        self.num_nodes = int(self.offsets[-1])
        self.own_seeds = bool(own_seeds)
        kernel = resolve_kernel(kernel)
        self.kernel = "numba" if kernel == "twostep" else kernel  # twostep picks as numba does
        self.name = f"vanilla ({self.kernel})"

    def _pick_local(self, nodes, fanout, keys, excluded=None):
        """(indptr, picks, edge types) of owned ``nodes``."""
        nodes = np.ascontiguousarray(nodes, dtype=self.local.indices.dtype)
        return sample_neighbors(self.local, nodes, fanout, keys, self.lo, self.kernel, excluded)

    def _keys(self, seed, epoch, step, rank, layer):
        """The layer's key per edge type for ``rank``'s draws."""
        return type_keys([layer_key(seed, epoch, step, rank, layer)], self.local.num_edge_types)[0]

    def _excluded(self, exclude) -> list:
        """Per rank, the positions in this rank's share of that rank's excluded edges
        (collective: one allgather of the (src, dst[, etypes]) arrays); None without exclusion."""
        if exclude is None:
            return [None] * self.comm.size
        hi = int(self.offsets[self.comm.rank + 1])
        out = []
        for src, dst, *etypes in self.comm.allgather_object(tuple(np.asarray(a, dtype=np.int64) for a in exclude)):
            mine = (dst >= self.lo) & (dst < hi)
            out.append(edge_positions(self.local, src[mine], dst[mine], *(t[mine] for t in etypes), row_offset=self.lo))
        return out

    def sample(self, seeds, fanouts, *, seed: int, epoch: int, step: int, exclude=None) -> list[MFG]:
        comm = self.comm
        excluded = self._excluded(exclude)
        seeds = np.ascontiguousarray(seeds, dtype=self.local.indices.dtype)
        if self.own_seeds and len(seeds) and (owner_of(self.offsets, seeds) != comm.rank).any():
            raise ValueError(f"rank {comm.rank}: vanilla seeds must be owned by the rank")
        fanouts = fanout_matrix(self.local, fanouts)  # (layers, edge types)
        top = len(fanouts) - 1 if self.own_seeds else None

        def pick(dst, layer):
            fanout = fanouts[layer]
            key = self._keys(seed, epoch, step, comm.rank, layer)
            if layer == top:  # own seeds: no communication
                return self._pick_local(dst, fanout, key, excluded[comm.rank])
            owner = owner_of(self.offsets, dst)
            mine = np.flatnonzero(owner == comm.rank)
            remote = np.flatnonzero(owner != comm.rank)
            remote = remote[np.argsort(owner[remote], kind="stable")]
            counts = np.bincount(owner[remote], minlength=comm.size)
            asked, asked_counts = comm.all_to_all_v(dst[remote], counts)
            replies, reply_counts, start = [], [], 0
            for source, n in enumerate(asked_counts):
                ids = asked[start:start + n]
                start += n
                ip, picks, types = self._pick_local(ids, fanout, self._keys(seed, epoch, step, source, layer),
                                                    excluded[source])
                replies.append(np.concatenate([np.diff(ip), picks.astype(np.int64), types.astype(np.int64)]))
                reply_counts.append(len(replies[-1]))
            got, got_counts = comm.all_to_all_v(np.concatenate(replies), reply_counts)

            degree = np.empty(len(dst), dtype=np.int64)
            local_ip, local_picks, local_types = self._pick_local(dst[mine], fanout, key, excluded[comm.rank])
            degree[mine] = np.diff(local_ip)
            remote_deg, remote_picks, remote_types, at = [], [], [], 0
            for n_req, n_got in zip(counts, got_counts):
                block = got[at:at + n_got]
                at += n_got
                remote_deg.append(block[:n_req])
                k = int(block[:n_req].sum())
                remote_picks.append(block[n_req:n_req + k])
                remote_types.append(block[n_req + k:])
            remote_deg = np.concatenate(remote_deg)
            degree[remote] = remote_deg
            out_indptr = np.zeros(len(dst) + 1, dtype=np.int64)
            np.cumsum(degree, out=out_indptr[1:])
            remote_ip = np.zeros(len(remote) + 1, dtype=np.int64)
            np.cumsum(remote_deg, out=remote_ip[1:])
            remote_types = np.concatenate(remote_types).astype(local_types.dtype)
            picked = np.empty(out_indptr[-1], dtype=dst.dtype)
            picked_types = np.empty(len(local_types) + len(remote_types), dtype=local_types.dtype)  # none: untyped
            _scatter_rows(out_indptr, mine, local_ip, local_picks, local_types, picked, picked_types)
            _scatter_rows(out_indptr, remote, remote_ip, np.concatenate(remote_picks).astype(dst.dtype), remote_types,
                          picked, picked_types)
            return out_indptr, picked, picked_types

        return assemble(seeds, len(fanouts), self.num_nodes, self.local, pick)
