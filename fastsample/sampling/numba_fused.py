"""Fused sampling in Numba: the same passes as native/fused_sample.cpp.

Per layer, from the top (the seeds) down:
  1. count:   picks per destination = min(degree, fanout)           parallel over dst
              (typed: summed over its (node, edge type) segments)
  2. offsets: exclusive prefix sum -> the MFG's indptr
  3. sample:  the choice rule writes chosen neighbours (global ids)  parallel over dst
              straight into the CSC slots
  4. relabel: walk the edges in order; a node seen for the first time gets the next
              local id, is appended to src_ids, and its edge slot gets its local id
              (serial here; the C++ kernel overlaps it with pass 3 of later chunks)
The node map holds local ids across layers: layer l's destinations are layer l+1's
sources in the same order, so the map is already right for the next layer and is reset
(touched entries only) once, at the end. Work and memory are O(output), never O(|V|).
"""

from __future__ import annotations

import numba
import numpy as np

from fastsample.sampling.rng import BITSET_WORDS, excluded_range, num_picks, pick_excluding, segment

_CHUNK = 256  # destinations per parallel task; one scratch buffer per task


@numba.njit(nogil=True, cache=True)
def seed_map(seeds, m):
    """Enter seeds as local ids 0..S-1; returns the index of a duplicate seed, or -1."""
    for i in range(len(seeds)):
        s = seeds[i]
        if m[s] != -1:
            for q in range(i):
                m[seeds[q]] = -1
            return i
        m[s] = i
    return -1


@numba.njit(nogil=True, cache=True, parallel=True)
def reset_map(ids, m):
    for i in numba.prange(len(ids)):
        m[ids[i]] = -1


NO_EXCLUSION = np.empty(0, dtype=np.int64)


@numba.njit(nogil=True, cache=True, parallel=True)
def sample_csc(indptr, indices, types, dst, fanouts, keys, max_pick, row_offset, excluded):
    """Passes 1-3: (mfg indptr, chosen global source ids in CSC order, their edge types).

    Node dst[i]'s neighbours are row dst[i] - row_offset of (indptr, indices). ``types``
    (aligned with ``indices``; a node's in-edges sorted by type) splits them into (node,
    edge type) segments, each sampled alone with fanouts[r] and keys[r] for type r; empty
    for an untyped graph: one segment per node, fanouts and keys of length 1, and no edge
    types come back. ``excluded``: sorted positions in ``indices`` never picked
    (rng.py). ``max_pick``: at least the largest fanout (scratch per segment)."""
    n = len(dst)
    counts = np.empty(n + 1, dtype=np.int64)
    counts[0] = 0
    for i in numba.prange(n):
        v = dst[i] - row_offset
        s, e, c = indptr[v], indptr[v + 1], 0
        while s < e:
            end, r = segment(types, s, e)
            lo, hi = excluded_range(excluded, s, end)
            c += num_picks(end - s - (hi - lo), fanouts[r])
            s = end
        counts[i + 1] = c
    out_indptr = np.cumsum(counts)
    picked = np.empty(out_indptr[-1], dtype=indices.dtype)
    picked_types = np.empty(out_indptr[-1] if len(types) else 0, dtype=types.dtype)
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        scratch = np.empty(max_pick, dtype=np.int64)
        bits = np.empty(BITSET_WORDS, dtype=np.uint64)
        for i in range(c * _CHUNK, min(n, (c + 1) * _CHUNK)):
            v = dst[i] - row_offset
            s, e, at = indptr[v], indptr[v + 1], out_indptr[i]
            while s < e:
                end, r = segment(types, s, e)
                k = pick_excluding(indices, s, end - s, dst[i], fanouts[r], keys[r], scratch, bits, picked, at,
                                   excluded)
                if len(picked_types):
                    picked_types[at:at + k] = r
                at += k
                s = end
    return out_indptr, picked, picked_types


@numba.njit(nogil=True, cache=True)
def relabel(dst, picked, m):
    """Pass 4: local ids in place of global ones; returns src_ids (dst first, then new)."""
    src = np.empty(len(dst) + len(picked), dtype=dst.dtype)
    src[: len(dst)] = dst
    local = np.empty(len(picked), dtype=np.int32)
    nxt = len(dst)
    for e in range(len(picked)):
        # branch-free, as in the C++ kernel: whether u is new is unpredictable
        u = picked[e]
        x = m[u]
        seen = x >= 0
        x = x if seen else nxt
        m[u] = x
        src[nxt] = u
        nxt += 1 - seen
        local[e] = x
    return local, src[:nxt].copy()


def sample_layers(indptr, indices, types, seeds, fanouts, keys, m, excluded=NO_EXCLUSION):
    """All layers, top first: [(indptr, indices, src_ids, num_dst, edge_types)] for layers
    L-1 .. 0; fanouts and keys (L, R), per layer and edge type (sample_csc: types)."""
    def pick(dst, layer):
        return sample_csc(indptr, indices, types, dst, fanouts[layer], keys[layer], max(int(fanouts[layer].max()), 1),
                          0, excluded)

    return relabel_layers(seeds, len(fanouts), pick, m)


def relabel_layers(seeds, num_layers, pick, m):
    """Layers num_layers-1 .. 0 from ``pick(dst, layer)`` -> (mfg indptr, global picks,
    their edge types), relabelled (pass 4), each layer (indptr, local, src_ids, num_dst,
    edge_types); ``pick`` may find the neighbour lists anywhere (vanilla sampling)."""
    dup = seed_map(seeds, m)
    if dup >= 0:
        raise ValueError(f"seeds must be unique: node {seeds[dup]} appears more than once")
    layers = []
    dst = seeds
    try:
        for layer in range(num_layers - 1, -1, -1):
            out_indptr, picked, types = pick(dst, layer)
            local, src = relabel(dst, picked, m)
            layers.append((out_indptr, local, src, len(dst), types))
            dst = src
    finally:
        reset_map(dst, m)
    return layers
