"""The choice rule: which neighbours a node gets, as a pure function of its key.

Every kernel (native C++, Numba fused, Numba two-step, and the owner side of vanilla
distributed sampling) implements exactly this, so for the same key they return the same
neighbours. The C++ twin is native/choice.hpp; keep the two in step.

  layer_key = fold(run seed, epoch, step, rank, layer)       (computed here, in Python)
  type_key  = layer_key for edge type 0; for type r > 0,     (typed graphs; here too)
              mix64(layer_key + (r + TYPE_SALT) * GOLDEN)
  node_key  = mix64(type_key ^ (node * GOLDEN))
  draw(i)   = mix64(node_key + (i + 1) * GOLDEN)              (splitmix64 stream)

On a typed graph each node's in-edges are sorted by edge type, and each (node, edge type)
segment is sampled alone with its type's fanout and key. A one-type graph has only edge
type 0, whose key is the layer key: its samples are those of the untyped rule, bitwise.

Excluded edges (link prediction: a batch's target edges, given as positions in the
graph's ``indices``): a segment's candidates (a node's in-edges; on a typed graph, one
(node, edge type) segment of them) are its positions minus the excluded ones, in order,
and the rule below runs on those d' = d - x as on a whole list, with the segment's fanout
and key, its chosen ranks mapped back to positions (remap_positions). With none excluded
nothing changes.

A node with degree d <= fanout (or fanout == -1) keeps all its neighbours. Otherwise
Robert Floyd's algorithm picks a uniform k-subset of the positions 0..d-1 with exactly k
draws: for i, j in enumerate(range(d - k, d)): t = uniform(0..j) from draw(i); take t
unless already taken, else j. The chosen positions are sorted ascending, so neighbours
keep the graph's order. uniform(0..j) = ((draw >> 32) * (j + 1)) >> 32 (Lemire's
multiply-shift; its bias, under j / 2**32, is far below any test's resolution).

All arithmetic is on uint64 modulo 2**64.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def mix64_py(z: int) -> int:
    """splitmix64's finaliser on Python ints (the reference for the jitted versions)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def layer_key(seed: int, epoch: int, step: int, rank: int, layer: int) -> int:
    """Fold the key fields into one uint64; each must be a non-negative integer."""
    key = 0
    for name, value in (("seed", seed), ("epoch", epoch), ("step", step), ("rank", rank),
                        ("layer", layer)):
        if not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"sampling key: {name} must be a non-negative integer (got {value!r})")
        key = mix64_py(key + GOLDEN + int(value))
    return key


def layer_keys(seed: int, epoch: int, step: int, rank: int, num_layers: int) -> np.ndarray:
    """(num_layers,) uint64 keys, entry i for GNN layer i (0 = the input layer)."""
    return np.array([layer_key(seed, epoch, step, rank, i) for i in range(num_layers)], dtype=np.uint64)


TYPE_SALT = 0x7E7E  # keeps edge type r's key stream apart from other uses of the layer key


def type_key(key: int, etype: int) -> int:
    """The key of edge type ``etype``'s segments in a layer of key ``key`` (type 0: ``key`` itself)."""
    return int(key) if etype == 0 else mix64_py(int(key) + (int(etype) + TYPE_SALT) * GOLDEN)


def type_keys(keys, num_types: int) -> np.ndarray:
    """(len(keys), num_types) uint64: row l holds layer l's key for each edge type."""
    return np.array([[type_key(k, r) for r in range(num_types)] for k in keys], dtype=np.uint64).reshape(
        len(keys), num_types)


# ---------------------------------------------------------------- jitted twins

_G = np.uint64(GOLDEN)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)


@numba.njit(inline="always")
def mix64(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@numba.njit(inline="always")
def node_key(key, node):
    return mix64(key ^ (np.uint64(node) * _G))


@numba.njit(inline="always")
def num_picks(degree, fanout):
    return degree if fanout < 0 or degree <= fanout else fanout


BITSET_MAX_DEGREE = 4096  # up to here, a bitset tracks the subset (as in choice.hpp)
BITSET_WORDS = BITSET_MAX_DEGREE // 64


@numba.njit(inline="always")
def uniform_upto(nkey, i, j):
    """Draw i of the node's stream, mapped to 0..j."""
    r = mix64(nkey + np.uint64(i + 1) * _G)
    return np.int64(((r >> _S32) * np.uint64(j + 1)) >> _S32)


@numba.njit(inline="always")
def choose_positions(nkey, degree, k, out, bits):
    """Floyd's k-subset of 0..degree-1 into out[:k], sorted ascending (k < degree).

    Like choice.hpp: a bitset (``bits``, BITSET_WORDS uint64) up to BITSET_MAX_DEGREE,
    else a linear scan and an insertion sort; both give the same positions.
    """
    if degree <= BITSET_MAX_DEGREE:
        words = (degree + 63) >> 6
        for w in range(words):
            bits[w] = 0
        for i in range(k):
            j = degree - k + i
            t = uniform_upto(nkey, i, j)
            if (bits[t >> 6] >> np.uint64(t & 63)) & np.uint64(1):
                t = j
            bits[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
        n = 0
        for w in range(words):
            b = bits[w]
            while b:
                out[n] = (w << 6) + trailing_zeros(b)
                n += 1
                b &= b - np.uint64(1)
        return
    for i in range(k):
        j = degree - k + i
        t = uniform_upto(nkey, i, j)
        for q in range(i):
            if out[q] == t:
                t = j
                break
        out[i] = t
    for i in range(1, k):
        x = out[i]
        q = i - 1
        while q >= 0 and out[q] > x:
            out[q + 1] = out[q]
            q -= 1
        out[q + 1] = x


@numba.njit(inline="always")
def pick_segment(indices, start, degree, node, fanout, key, scratch, bits, out, at):
    """The choice rule on the ``degree`` neighbours indices[start:start + degree] of
    ``node`` (all of its in-edges, or one edge type's segment of them): the chosen ones
    to out[at:at + k]; returns k."""
    k = num_picks(degree, fanout)
    if k == degree:
        for i in range(degree):
            out[at + i] = indices[start + i]
    else:
        choose_positions(node_key(key, node), degree, k, scratch, bits)
        for i in range(k):
            out[at + i] = indices[start + scratch[i]]
    return k


@numba.njit(inline="always")
def excluded_range(ex, start, end):
    """[lo, hi) of the sorted excluded positions ``ex`` that fall in [start, end); with none
    excluded (most calls) no search: a typed node asks once per edge type."""
    if len(ex) == 0:
        return 0, 0
    return np.searchsorted(ex, start), np.searchsorted(ex, end)


@numba.njit(inline="always")
def remap_positions(pos, k, ex, lo, hi, start):
    """Ranks pos[:k] (sorted) among the remaining in-edges -> positions in the whole list,
    skipping the excluded ex[lo:hi] (sorted, absolute; the list starts at ``start``)."""
    j = 0
    for i in range(k):
        p = pos[i] + j
        while j < hi - lo and ex[lo + j] - start <= p:
            j += 1
            p = pos[i] + j
        pos[i] = p


@numba.njit(inline="always")
def pick_excluding(indices, start, degree, node, fanout, key, scratch, bits, out, at, ex):
    """pick_segment with the excluded positions ``ex`` (sorted) never picked; returns k."""
    lo, hi = excluded_range(ex, start, start + degree)
    if lo == hi:
        return pick_segment(indices, start, degree, node, fanout, key, scratch, bits, out, at)
    avail = degree - (hi - lo)
    k = num_picks(avail, fanout)
    if k == avail:
        j, n = lo, 0
        for p in range(start, start + degree):
            if j < hi and ex[j] == p:
                j += 1
            else:
                out[at + n] = indices[p]
                n += 1
    else:
        choose_positions(node_key(key, node), avail, k, scratch, bits)
        remap_positions(scratch, k, ex, lo, hi, start)
        for i in range(k):
            out[at + i] = indices[start + scratch[i]]
    return k


UNTYPED = np.empty(0, dtype=np.uint8)


def kernel_types(graph) -> np.ndarray:
    """A CSCGraph's edge types as every kernel takes them: each in-edge's type, aligned with
    ``indices``, or none (empty) on an untyped graph, the one-type case (``segment``)."""
    return graph.type_per_edge if graph.type_per_edge is not None else UNTYPED


@numba.njit(inline="always")
def segment(types, s, e):
    """(end, edge type) of the segment that starts at s within [s, e), a node's in-edges:
    the run of type types[s] (sorted by type there; its end is the first position whose
    type is greater). An untyped graph (``types`` empty) is the one-type case: the whole
    list, of type 0."""
    if len(types) == 0:
        return e, 0
    r = types[s]
    lo, hi = s + 1, e
    while lo < hi:
        mid = (lo + hi) >> 1
        if types[mid] <= r:
            lo = mid + 1
        else:
            hi = mid
    return lo, np.int64(r)
