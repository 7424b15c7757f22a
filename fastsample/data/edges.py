"""Edge list -> in-edge CSC, the one conversion every loader and generator uses.

Policy (the same for every source, so datasets are comparable):
  * ``symmetric=True`` (undirected input): each edge is stored in both directions.
  * duplicate edges are merged: a message-passing GNN should not weight a neighbour by
    how often the input happened to list the edge;
  * self-loops are dropped unless ``self_loops=True``: GraphSAGE already combines a node
    with itself through its root weight, so a self-loop would count it twice.
Within each node, in-neighbours are stored sorted ascending.

Passes: count in-degrees (O(E)), scatter sources into place (O(E)), sort and dedupe each
node's segment in parallel (O(E log d)), compact (O(E)). Memory: the input plus about two
output-sized index arrays; no O(E) int64 temporaries when ids are int32.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from fastsample.atomic import allocated_memmap
from fastsample.data.graph import CSCGraph, DatasetError, check_types, id_dtype, offset_dtype, type_dtype


@numba.njit(cache=True, nogil=True)
def _count(src, dst, num_nodes, symmetric, self_loops):
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        counts[v + 1] += 1
        if symmetric and u != v:
            counts[u + 1] += 1
    return counts


@numba.njit(cache=True, nogil=True)
def _scatter(src, dst, indptr, out, symmetric, self_loops):
    pos = indptr[:-1].copy()
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        out[pos[v]] = u
        pos[v] += 1
        if symmetric and u != v:
            out[pos[u]] = v
            pos[u] += 1


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_dedupe(indptr, indices):
    n = len(indptr) - 1
    unique = np.zeros(n + 1, dtype=np.int64)
    for v in numba.prange(n):
        seg = indices[indptr[v]:indptr[v + 1]]
        if len(seg) == 0:
            continue
        seg.sort()
        k = 1
        for i in range(1, len(seg)):
            if seg[i] != seg[k - 1]:
                seg[k] = seg[i]
                k += 1
        unique[v + 1] = k
    return unique


@numba.njit(cache=True, nogil=True, parallel=True)
def _compact(indptr, indices, new_indptr, out):
    for v in numba.prange(len(indptr) - 1):
        start = indptr[v]
        for i in range(new_indptr[v + 1] - new_indptr[v]):
            out[new_indptr[v] + i] = indices[start + i]


def edges_to_csc(src: np.ndarray, dst: np.ndarray, num_nodes: int, *,
                 symmetric: bool, self_loops: bool = False) -> CSCGraph:
    """Build the in-edge CSC of the edges ``src[i] -> dst[i]`` (see module doc for policy).

    Args:
        src, dst: 1-D integer arrays of equal length, ids in 0..num_nodes-1;
        num_nodes: the node count; symmetric: store each edge both ways;
        self_loops: keep edges v -> v.
    Returns:
        The CSCGraph (ids int32 where they fit). Bad input is a DatasetError (a ValueError).
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise DatasetError(f"src and dst must be 1-D of equal length (got {src.shape} and {dst.shape})")
    if len(src):
        lo = min(int(src.min()), int(dst.min()))
        hi = max(int(src.max()), int(dst.max()))
        if lo < 0 or hi >= num_nodes:
            raise DatasetError(f"edge endpoints span [{lo}, {hi}], outside 0..{num_nodes - 1}")
    ids = id_dtype(num_nodes)
    src = src.astype(ids, copy=False)
    dst = dst.astype(ids, copy=False)

    indptr = np.cumsum(_count(src, dst, num_nodes, symmetric, self_loops))
    indices = np.empty(int(indptr[-1]), dtype=ids)
    _scatter(src, dst, indptr, indices, symmetric, self_loops)
    new_indptr = np.cumsum(_sort_dedupe(indptr, indices))
    out = np.empty(int(new_indptr[-1]), dtype=ids)
    _compact(indptr, indices, new_indptr, out)
    del indices
    return CSCGraph(new_indptr.astype(offset_dtype(len(out))), out)


def typed_edges_to_csc(src: np.ndarray, dst: np.ndarray, etype: np.ndarray, node_types, node_type_offset,
                       edge_types, *, self_loops: bool = False) -> CSCGraph:
    """Build the typed in-edge CSC of the edges ``src[i] -> dst[i]`` of edge type ``etype[i]``.

    The module's policy per edge type (duplicates of one type merged, self-loops dropped
    unless ``self_loops``), and each node's in-edges sorted by (edge type, source): a
    (node, edge type) pair is one contiguous segment (CSCGraph's typed layout). No edge is
    added in reverse: a reverse relation is an edge type of its own.

    Args:
        src, dst, etype: 1-D integer arrays of equal length (global ids, edge type indices);
        node_types: the T names; node_type_offset: (T + 1,) each type's id range;
        edge_types: the canonical (src type, relation, dst type) of each edge type.
    Returns:
        The typed CSCGraph. An endpoint outside its type's range, or an unknown type, is a
        DatasetError naming the relation.
    """
    src, dst, etype = np.asarray(src), np.asarray(dst), np.asarray(etype)
    if not (src.shape == dst.shape == etype.shape) or src.ndim != 1:
        raise DatasetError(f"src, dst and etype must be 1-D of equal length (got {src.shape}, {dst.shape}, "
                           f"{etype.shape})")
    offsets = np.asarray(node_type_offset, dtype=np.int64)
    check_types(node_types, offsets, edge_types)
    n, R = int(offsets[-1]), len(edge_types)
    if len(etype) and (etype.min() < 0 or etype.max() >= R):
        raise DatasetError(f"edge types span [{etype.min()}, {etype.max()}], outside 0..{R - 1}")
    index = {t: i for i, t in enumerate(node_types)}
    for r, (s_type, _, d_type) in enumerate(edge_types):
        mine = etype == r
        for end, ids, t in (("source", src[mine], s_type), ("destination", dst[mine], d_type)):
            lo, hi = int(offsets[index[t]]), int(offsets[index[t] + 1])
            if len(ids) and (ids.min() < lo or ids.max() >= hi):
                raise DatasetError(f"relation {':'.join(edge_types[r])}: {end} ids span [{ids.min()}, {ids.max()}], "
                                   f"outside {t}'s ids {lo}..{hi - 1}")
    keep = slice(None) if self_loops else src != dst
    key = etype[keep].astype(np.int64) * n + src[keep]  # sorts and merges by (type, source) in one pass
    dst = dst[keep].astype(id_dtype(n), copy=False)
    indptr = np.cumsum(_count(key, dst, n, False, True))
    keys = np.empty(int(indptr[-1]), dtype=np.int64)
    _scatter(key, dst, indptr, keys, False, True)
    new_indptr = np.cumsum(_sort_dedupe(indptr, keys))
    out = np.empty(int(new_indptr[-1]), dtype=np.int64)
    _compact(indptr, keys, new_indptr, out)
    del keys
    types, sources = np.divmod(out, n)
    return CSCGraph(new_indptr.astype(offset_dtype(len(out))), sources.astype(id_dtype(n)),
                    type_per_edge=types.astype(type_dtype(R)), node_type_offset=offsets, node_types=tuple(node_types),
                    edge_types=tuple(tuple(e) for e in edge_types))


# ---------------------------------------------------------------- bounded memory, on disk


@numba.njit(cache=True, nogil=True)
def _directed(src, dst, symmetric, self_loops, counts):
    """The stored (dst, src) pairs of one chunk, both directions if symmetric; counts
    each destination's in-edges into counts[v + 1]."""
    n = 0
    for e in range(len(src)):
        if src[e] != dst[e] or self_loops:
            n += 2 if symmetric and src[e] != dst[e] else 1
    d = np.empty(n, dtype=src.dtype)
    s = np.empty(n, dtype=src.dtype)
    k = 0
    for e in range(len(src)):
        u, v = src[e], dst[e]
        if u == v and not self_loops:
            continue
        d[k], s[k] = v, u
        k += 1
        counts[v + 1] += 1
        if symmetric and u != v:
            d[k], s[k] = u, v
            k += 1
            counts[u + 1] += 1
    return d, s


@numba.njit(cache=True, nogil=True)
def _by_range(d, s, width, ranges):
    """(dst, src) pairs grouped by destination range (v // width), order kept within a
    range (a counting sort), as rows of an (n, 2) array, with each range's row offsets."""
    offsets = np.zeros(ranges + 1, dtype=np.int64)
    for i in range(len(d)):
        offsets[d[i] // width + 1] += 1
    for r in range(ranges):
        offsets[r + 1] += offsets[r]
    pos = offsets[:-1].copy()
    out = np.empty((len(d), 2), dtype=d.dtype)
    for i in range(len(d)):
        r = d[i] // width
        out[pos[r], 0] = d[i]
        out[pos[r], 1] = s[i]
        pos[r] += 1
    return out, offsets


@numba.njit(cache=True, nogil=True)
def _place(pairs, first, pos, out):
    # pos[v - first]: where v's next in-neighbour goes in out
    for i in range(len(pairs)):
        v = pairs[i, 0] - first
        out[pos[v]] = pairs[i, 1]
        pos[v] += 1


def shrink_npy(path, length: int) -> None:
    """Cut the 1-D .npy file at ``path`` to its first ``length`` entries, in place: the
    header is rewritten at its old size (space-padded, as the format allows) and the file
    truncated, so no copy of the data is made."""
    with open(path, "r+b") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
        data_start = f.tell()
        if len(shape) != 1 or length > shape[0]:
            raise ValueError(f"{path}: cannot shrink {shape} to ({length},)")
        prefix = 8 + (2 if version == (1, 0) else 4)  # magic + version, then the header length
        fields = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran, "shape": (length,)}
        text = "{" + "".join(f"{k!r}: {v!r}, " for k, v in fields.items()) + "}"  # as numpy writes it
        text = text.ljust(data_start - prefix - 1) + "\n"
        if len(text) != data_start - prefix:
            raise ValueError(f"{path}: header does not fit")
        f.seek(prefix)
        f.write(text.encode("latin1"))
        f.truncate(data_start + length * dtype.itemsize)


def edges_to_csc_file(chunks, num_nodes: int, indices_path, *, symmetric: bool, self_loops: bool = False,
                      expected_edges: int | None = None, budget: int = 1 << 30, progress=None,
                      types_path=None, num_types: int = 0, ranges: int | None = None) -> np.ndarray:
    """edges_to_csc for edge lists too large for memory: the same CSC, its indices written
    to the .npy file ``indices_path``, in O(num_nodes) memory plus ``budget`` bytes.

    One pass over the chunks spills each stored (dst, src) pair to the file of its
    destination range (beside indices_path); then each range is read back, placed,
    sorted and deduplicated in memory and appended to indices_path. Every write is
    sequential: scattering into a file-backed map instead made the kernel write the same
    pages back over and over (600 MB/s of writeback, 10x slower than counting).

    Args:
        chunks: an iterable of (src, dst) chunks;
        num_nodes, symmetric, self_loops: as edges_to_csc;
        indices_path: the .npy file to write (made at its largest, then cut to length);
        expected_edges: about how many pairs are stored (both directions), to size the
            ranges (default: one range, all edges in memory at once);
        budget: bytes a range may take in memory (a pair and its placed copy: 3 ids per
            stored pair, 12 bytes with int32 ids);
        progress: called with the number of input pairs of each chunk (or None).
        types_path, num_types: typed edges (typed_edges_to_csc, in bounded memory): the
            chunks are (src, dst, edge type) triples; the edge types go to the .npy file
            ``types_path``, each node's in-edges sorted by (type, source), duplicates merged
            per type; not symmetric (a reverse relation is a type of its own).
        ranges: how many destination ranges of equal width (default: as many as let
            ``expected_edges`` pairs, spread evenly over the nodes, fit ``budget``); a caller
            whose in-degrees are uneven passes more (typed_range_count: a typed graph's
            dense node types).
    Returns:
        indptr (int64, num_nodes + 1); the indices are in the file, sorted and
        deduplicated within each node exactly as edges_to_csc (typed_edges_to_csc) leaves them.
    """
    ids = id_dtype(num_nodes)
    if types_path is not None:
        if symmetric:
            raise DatasetError("typed edges are not stored symmetric: add the reverse relations as edge types")
        chunks = _typed_keys(chunks, num_nodes, self_loops)  # one int64 key per edge: type * n + source
        ids, self_loops = np.dtype(np.int64), True
    per_pair = 3 * np.dtype(ids).itemsize
    if ranges is None:
        ranges = -(-per_pair * int(expected_edges or 0) // budget)
    width = max(1, -(-num_nodes // max(1, min(num_nodes, ranges))))
    ranges = max(1, -(-num_nodes // width))  # ranges of `width` nodes, the last maybe shorter, none empty
    indices_path = Path(indices_path)
    spill = [indices_path.with_name(f"{indices_path.stem}.range{r}.tmp") for r in range(ranges)]
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    files = [open(p, "wb") for p in spill]
    try:
        for src, dst in chunks:
            d, s = _directed(src.astype(ids, copy=False), dst.astype(ids, copy=False), symmetric, self_loops, counts)
            pairs, offsets = _by_range(d, s, width, ranges)
            del d, s
            for r in range(ranges):
                pairs[offsets[r]:offsets[r + 1]].tofile(files[r])
            if progress:
                progress(len(src))
    finally:
        for f in files:
            f.close()
    indptr = np.cumsum(counts)
    del counts
    # the outputs, made at their largest (blocks reserved: a full disk fails here) and then
    # written in order through files: through the maps, the dirty pages would count as this
    # process's memory (the whole output, by the end)
    sinks = []
    try:
        for file, dtype in [(indices_path, id_dtype(num_nodes))] + \
                ([] if types_path is None else [(types_path, type_dtype(num_types))]):
            made = allocated_memmap(file, dtype, (int(indptr[-1]),))
            start = made.offset
            del made
            sinks.append((open(file, "r+b"), dtype))
            sinks[-1][0].seek(start)
        new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        written = 0
        for r, path in enumerate(spill):
            first, last = r * width, min(num_nodes, (r + 1) * width)
            pairs = np.fromfile(path, dtype=ids).reshape(-1, 2)
            path.unlink()
            local = indptr[first:last + 1] - indptr[first]
            segment = np.empty(int(local[-1]), dtype=ids)
            _place(pairs, first, local[:-1].copy(), segment)
            del pairs
            unique = _sort_dedupe(local, segment)
            kept = np.cumsum(unique)
            compact = np.empty(int(kept[-1]), dtype=ids)
            _compact(local, segment, kept, compact)
            del segment
            if types_path is not None:  # split the keys back into edge types and sources
                types, compact = np.divmod(compact, num_nodes)
                types.astype(sinks[1][1], copy=False).tofile(sinks[1][0])
                del types
            compact.astype(sinks[0][1], copy=False).tofile(sinks[0][0])
            new_indptr[first + 1:last + 1] = written + kept[1:]
            written += len(compact)
    finally:
        for f, _ in sinks:
            f.close()
    shrink_npy(indices_path, written)
    if types_path is not None:
        shrink_npy(types_path, written)
    return new_indptr


def typed_range_count(node_type_offset, pairs_into, budget: int = 1 << 30) -> int:
    """The ``ranges`` for edges_to_csc_file's typed build that keep every destination range
    within ``budget`` bytes, given ``pairs_into[t]``, the pairs whose destination is of node
    type t (taken as spread evenly over its nodes): ranges have equal width, so a type far
    denser than the rest (IGBH's papers, the targets of every citation) needs more of them
    than the total alone says. Each pair takes 3 int64 (its key and destination, then its
    placed copy)."""
    offsets = np.asarray(node_type_offset, dtype=np.int64)
    n = int(offsets[-1])
    if n == 0:
        return 1
    fits = budget / 24
    cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(pairs_into, dtype=np.float64))])
    count = max(1, int(-(-cumulative[-1] // fits)))
    while count < n:
        width = -(-n // count)
        bounds = np.minimum(np.arange(0, n + width, width), n)
        worst = np.diff(np.interp(bounds, offsets, cumulative)).max()
        if worst <= fits:
            break
        count = max(count + 1, int(count * worst / fits))
    return min(count, n)


def _typed_keys(chunks, num_nodes: int, self_loops: bool):
    """(key, dst) chunks from (src, dst, edge type) ones: key = type * num_nodes + src, so
    sorting a node's keys sorts its in-edges by (type, source) and merges duplicates per type."""
    for src, dst, etype in chunks:
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        keep = slice(None) if self_loops else src != dst
        yield np.asarray(etype, dtype=np.int64)[keep] * num_nodes + src[keep], dst[keep]
