"""The conventional two-step sampler, kept as the baseline the fused kernel is measured
against (DGL's sample_neighbors + to_block, done well):

  step 1, sample:  per destination, the choice rule picks sources; (src, dst) pairs
                   as COO with global ids                           parallel over dst
  step 2, compact: map dst ids, then src ids in edge order, to local ids (a reused node
                   map, reset after each layer: no O(|V|) work)
          convert: COO -> CSC by a stable counting sort on the local dst ids
Same choice rule and relabelling order as the fused kernels, so the MFGs are identical;
the difference is the COO intermediate, the extra passes and the per-layer map rebuild.
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.sampling.numba_fused import NO_EXCLUSION, reset_map, sample_csc, seed_map


def sample_coo(indptr, indices, types, seeds, fanouts, keys, excluded=NO_EXCLUSION):
    """Step 1: (src, dst, edge types) of the sampled edges, global ids, grouped by
    destination; fanouts and keys per edge type, edge types empty for an untyped graph
    (numba_fused.sample_csc). The picks come from the same pass as the fused kernel's (one
    choice rule); the destination column is what makes it COO."""
    offsets, src, etypes = sample_csc(indptr, indices, types, seeds, fanouts, keys, max(int(fanouts.max()), 1), 0,
                                      excluded)
    return src, np.repeat(seeds, np.diff(offsets)), etypes


@numba.njit(nogil=True, cache=True)
def compact(seeds, src, dst, m):
    """Global COO -> local COO; returns (local src, local dst, src_ids)."""
    ids = np.empty(len(seeds) + len(src), dtype=seeds.dtype)
    ids[: len(seeds)] = seeds
    nxt = len(seeds)
    lsrc = np.empty(len(src), dtype=np.int32)
    ldst = np.empty(len(dst), dtype=np.int32)
    for e in range(len(src)):
        ldst[e] = m[dst[e]]
        u = src[e]
        x = m[u]
        if x < 0:
            x = nxt
            m[u] = x
            ids[nxt] = u
            nxt += 1
        lsrc[e] = x
    return lsrc, ldst, ids[:nxt].copy()


@numba.njit(nogil=True, cache=True)
def coo_to_csc(lsrc, ldst, num_dst, etypes):
    """A stable counting sort by destination; ``etypes`` (empty: untyped) follow their edges."""
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    for e in range(len(ldst)):
        indptr[ldst[e] + 1] += 1
    for i in range(num_dst):
        indptr[i + 1] += indptr[i]
    pos = indptr[:-1].copy()
    out = np.empty(len(lsrc), dtype=np.int32)
    out_types = np.empty(len(etypes), dtype=etypes.dtype)
    for e in range(len(ldst)):
        d = ldst[e]
        out[pos[d]] = lsrc[e]
        if len(etypes):
            out_types[pos[d]] = etypes[e]
        pos[d] += 1
    return indptr, out, out_types


def sample_layers(indptr, indices, types, seeds, fanouts, keys, m, excluded=NO_EXCLUSION):
    """All layers, top first: [(indptr, indices, src_ids, num_dst, edge_types)] for layers
    L-1 .. 0; fanouts and keys (L, R), per layer and edge type (numba_fused.sample_csc)."""
    layers = []
    dst = seeds
    for layer in range(len(fanouts) - 1, -1, -1):
        dup = seed_map(dst, m)
        if dup >= 0:
            raise ValueError(f"seeds must be unique: node {dst[dup]} appears more than once")
        try:
            coo_src, coo_dst, coo_types = sample_coo(indptr, indices, types, dst, fanouts[layer], keys[layer],
                                                     excluded)
            lsrc, ldst, src_ids = compact(dst, coo_src, coo_dst, m)
        finally:
            reset_map(dst, m)
        reset_map(src_ids[len(dst):], m)
        out_indptr, out_indices, out_types = coo_to_csc(lsrc, ldst, len(dst), coo_types)
        layers.append((out_indptr, out_indices, src_ids, len(dst), out_types))
        dst = src_ids
    return layers
