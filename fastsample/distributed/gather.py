"""The feature gather: the one per-step exchange of hybrid mode, in two rounds, for rows of
every node type at once (untyped data is the one-type case).

    round 1  the remote ids, ordered by (owner, node type), all_to_all (counts ride along);
             each owner reads each id's type and row in its shard from the type runs
    round 2  the rows back in the order asked (so grouped by (source, type)): both sides
             know each id's type, so both know every segment's size, and the reply needs
             no count exchange
Rows this rank owns never cross the communicator, and neither do rows in the rank's
hot-feature cache (distributed/cache.py). Nothing is copied into one matrix: the result is
one row table per node type (fastsample/rows.py), rows in the order the ids of that type
come, each read where it is (the shard, the cache, round 2's receive buffer), as the
built-in models' input layers read them; ``rows`` makes the matrices on first access.
``index`` says where each id's row is (the one-type case: the ids' own order). A featureless type (no shard)
gets None. Rows travel in the shards' dtype when they share one (every untyped gather:
the native row copies and any backend's element types), else as bytes.

Shards may be learnable (the rows of a sharded embedding table, fastsample/distributed/
embedding.py): ``send_back`` returns each such row's gradient to its owner in one more
all_to_all, the reverse of round 2 (both sides know its sizes from round 1).
Ids come from a partition's relabelled graph, where each (rank, node type) owns one run of
ids (the type runs: run i is type i mod T, of rank i // T; untyped: the owned ranges).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fastsample import bf16, int8
from fastsample.allocator import populate
from fastsample.nn.block import positions_by_type
from fastsample.data.graph import by_type, unwrap_one_type
from fastsample.comm import Communicator
from fastsample.phases import phase

from fastsample.native import lib as _native
from fastsample.rows import RowTable


_ROWS = {np.dtype(np.float32): np.float32, np.dtype(np.float16): np.uint16, bf16.BITS: np.uint16,
         int8.DTYPE: np.int8}


def copy_rows(src: np.ndarray, rows: np.ndarray, dst: np.ndarray, dst_rows: np.ndarray | None = None) -> None:
    """dst[dst_rows] = src[rows] (dst[:len(rows)] without dst_rows), in one pass; 16-bit
    rows are widened when dst is float32.

    The native copy prefetches the random rows (numpy's fancy indexing waits on each
    miss, and `out[mask] = shard[ids]` also makes a temporary): ~2x less time here."""
    view = _ROWS.get(src.dtype) if src.dtype == dst.dtype else None
    native = (_native is not None and view is not None and src.ndim == dst.ndim == 2
              and src.flags.c_contiguous and dst.flags.c_contiguous)
    if native:
        _native.copy_rows(src.view(view), np.ascontiguousarray(rows, dtype=np.int64), dst.view(view),
                          None if dst_rows is None else np.ascontiguousarray(dst_rows, dtype=np.int64))
        return
    block = np.asarray(src[rows])
    if block.dtype != dst.dtype:
        block = bf16.widen(block) if dst.dtype == np.float32 else block.astype(dst.dtype)
    if dst_rows is None:
        dst[: len(rows)] = block
    else:
        dst[dst_rows] = block


def _slices(per_run: np.ndarray, types) -> list[dict]:
    """Per rank p, {type t: (first, end)} of the (rank, type) groups of an array laid out by
    rank, then type, ``per_run[p, t]`` long each."""
    P, T = per_run.shape
    bounds = np.concatenate([[0], np.cumsum(per_run.ravel())])
    return [{t: (int(bounds[p * T + t]), int(bounds[p * T + t + 1])) for t in types} for p in range(P)]


@dataclass
class Route:
    """Where one gather's rows came from, for ``send_back``."""

    index: np.ndarray  # each id's row in its type's output matrix
    counts: np.ndarray  # ids of each type
    which: list  # per type, in index order: each row's source (0: this rank's shard) and
    offset: list  # byte offset there
    order: np.ndarray  # positions of the remote ids, in the order asked (by owner, then type)
    per_run: np.ndarray  # how many of them of each (owner, type)
    wanted_rows: np.ndarray  # the owner's side: the shard rows others asked for, by asking rank, then type
    wanted_per_run: np.ndarray  # (ranks, types): how many of each


@dataclass
class Gathered:
    """One gather's result: ``tables`` {node type: where its ids' rows are (a RowTable), or
    None}, each id's node type index (``types``) and row in its type's table (``index``),
    the ids of each type (``counts``) and the ``route``; ``rows`` the tables as matrices
    (float32 unless the gather keeps 16-bit rows 16-bit), made on first access."""

    tables: dict
    types: np.ndarray
    index: np.ndarray
    counts: np.ndarray
    route: Route

    @functools.cached_property
    def rows(self) -> dict:
        return {t: None if rows is None else rows.materialize() for t, rows in self.tables.items()}

    def in_order(self) -> np.ndarray:
        """Every id's row, in the ids' order, as one matrix (the types' rows equally wide)."""
        if len(self.rows) == 1:
            return next(iter(self.rows.values()))
        first = next(r for r in self.rows.values() if r is not None)
        out = np.empty((len(self.types), first.shape[1]), dtype=first.dtype)
        for t, rows in enumerate(self.rows.values()):
            mine = np.flatnonzero(self.types == t)
            if len(mine):
                out[mine] = rows[self.index[mine]]
        return out


class FeatureGather:
    """Gathers rows of global ids through ``comm``; collective (see the module doc).

    Args:
        comm: the job's communicator.
        runs: (P * T + 1,) the type runs of the ids (untyped: the (P + 1,) owned ranges).
        shards: {node type: this rank's rows of that type, or None} in node type order; or
            one array, the rows of untyped data (``__call__`` then returns one matrix).
        keep_dtype: rows come out in their stored dtype (16-bit stays 16-bit); else float32.
            int8 rows travel as int8 and always come out decoded (float32).
        learnable: the types whose shards are learnable float32 tables, all of one width
            (their rows' gradients go back through send_back).
        scales: {node type: its columns' scales} for each int8 shard (fastsample/int8.py).
    """

    def __init__(self, comm: Communicator, runs: np.ndarray, shards, keep_dtype: bool = False, learnable=(),
                 scales=None):
        self.comm, self.runs = comm, np.asarray(runs, dtype=np.int64)
        shards = by_type(shards)
        self.types = list(shards)
        self.shards = [shards[t] for t in self.types]
        scales = by_type(scales) if scales is not None else {}
        self.scales = [scales.get(t) if s is not None and s.dtype == int8.DTYPE else None
                       for t, s in zip(self.types, self.shards)]
        for t, s, scale in zip(self.types, self.shards, self.scales):
            if s is not None and s.dtype == int8.DTYPE and (scale is None or np.shape(scale) != (s.shape[1],)):
                raise ValueError(f"scales[{t!r}]: the int8 shard's column scales ({s.shape[1]}) are missing")
        T = len(self.types)
        if len(self.runs) != comm.size * T + 1:
            raise ValueError(f"runs: {len(self.runs)} boundaries, expected ranks x types + 1 = {comm.size * T + 1}")
        for i, (t, shard) in enumerate(zip(self.types, self.shards)):
            rows = self.runs[comm.rank * T + i + 1] - self.runs[comm.rank * T + i]
            if shard is not None and (shard.ndim != 2 or len(shard) != rows):
                raise ValueError(f"shards[{t!r}]: {shard.shape}, expected ({rows}, width): this rank's {t} nodes")
        self._run_owner = np.arange(comm.size * T, dtype=np.int64) // T
        self._run_type = (np.arange(comm.size * T) % T).astype(np.int8 if T <= 127 else np.int64)
        self.row_bytes = np.array([0 if s is None else s.shape[1] * s.itemsize for s in self.shards], dtype=np.int64)
        # the wire's element: the shards' dtype when they share one, else a byte
        dtypes = {s.dtype for s in self.shards if s is not None}
        self.unit = dtypes.pop() if len(dtypes) == 1 and dtypes != {int8.DTYPE} else np.dtype(np.uint8)
        self.row_units = self.row_bytes // self.unit.itemsize
        unknown = [t for t in learnable if t not in shards or shards[t] is None or shards[t].dtype != np.float32]
        if unknown:
            raise ValueError(f"learnable: {', '.join(map(str, unknown))}: not a float32 shard of this gather")
        self.learnable = np.array([t in learnable for t in self.types], dtype=bool)
        widths = {shards[t].shape[1] for t in learnable}
        if len(widths) > 1:  # one width: the gradient rows travel as one matrix (send_back)
            raise ValueError(f"learnable: tables of widths {sorted(widths)}; expected one width")
        self.grad_width = widths.pop() if widths else 0
        self.out_dtypes = [None if s is None else (s.dtype if keep_dtype else np.dtype(np.float32))
                           for s in self.shards]
        self.cache = None  # a FeatureCache (distributed/cache.py), set by build_cache's caller
        self.rows_local = self.rows_cached = self.rows_remote = 0  # since construction

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner rank, node type (int8 up to 127 types), row in the owner's shard of that type) of each id."""
        run, rows = self._runs_of(ids)
        return self._run_owner[run], self._run_type[run], rows

    def _runs_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the type run of each id (owner * T + type), its row in that run); an id outside
        every run is an error (a foreign id would otherwise read another type's rows)."""
        if _native is not None and ids.dtype in (np.int32, np.int64):
            run, rows = np.empty(len(ids), dtype=np.int32), np.empty(len(ids), dtype=np.int64)
            bad = _native.locate_runs(np.ascontiguousarray(ids), self.runs, run, rows)
        else:
            runs = self.runs
            if ids.dtype == np.int32 and runs[-1] <= np.iinfo(np.int32).max:
                runs = runs.astype(np.int32)  # searchsorted casts every id otherwise (~2x slower)
            run = np.searchsorted(runs, ids, side="right") - 1
            outside = np.flatnonzero((run < 0) | (run >= len(self.runs) - 1))
            bad = int(outside[0]) if len(outside) else -1
            run = np.clip(run, 0, len(self.runs) - 2)
            rows = ids - self.runs[run]  # int64
        if bad >= 0:
            self._outside(ids, bad)
        return run, rows

    def _outside(self, ids: np.ndarray, bad: int):
        raise ValueError(f"ids: {ids[bad]} is not a node of this partition "
                         f"(ids in [{self.runs[0]}, {self.runs[-1]}))")

    def __call__(self, ids: np.ndarray):
        """Rows of ``ids``: for a gather over one array, (len(ids), width) in the ids' order;
        else as gather's ``rows``. Collective."""
        got = self.gather(ids)
        return unwrap_one_type(got.rows)

    def gather(self, ids: np.ndarray) -> Gathered:
        """The rows of the global ``ids`` (see the module doc). Collective."""
        ids = np.asarray(ids)
        T = len(self.types)
        # where each row is (which: 0 the shard, 1 the cache, 2 round 2's receive buffer) and
        # its byte offset there, first in the ids' order, then placed by type (type t's rows
        # from the count of the types before it, in index order) in flat arrays whose pieces
        # are the types' tables
        run, rows, types, index, counts, which, offset = self._route(ids)
        local = which == 0
        fetch = ~local
        cached = {}
        for t, held in (self.cache.by_type.items() if self.cache is not None else ()):
            at = self._of_type(fetch, types, t)
            slot = held.lookup(ids[at])
            hit = at[slot >= 0]
            which[hit] = 1
            offset[hit] = slot[slot >= 0] * self.row_bytes[t]
            fetch[hit] = False
            cached[t] = held.rows
            self.rows_cached += len(hit)
        order, per_run = self._by_run(run, fetch)  # the remote ids' positions by owner, then type
        per_run = per_run.reshape(self.comm.size, T)
        self.rows_local += int(local.sum())
        self.rows_remote += len(order)
        with phase("gather1"):
            wanted, wanted_counts = self.comm.all_to_all_v(ids[order], per_run.sum(1))
        # the owner's side: the rows asked for, in the order asked, so by type within each
        # asker's part: the rows of one (asker, type) lie back to back
        with phase("gather2"):
            w_run, w_rows = self._runs_of(wanted)
            w_per_run = self._per_run(w_run, wanted_counts)
            data, _ = self.comm.all_to_all_v(self._pack(w_rows, w_per_run), w_per_run @ self.row_units,
                                             recv_counts=per_run @ self.row_units)
        which, offset = self._place(order, types, index, counts, which, offset)
        base = np.concatenate([[0], np.cumsum(counts)])
        which = [which[base[t]:base[t + 1]] for t in range(T)]
        offset = [offset[base[t]:base[t + 1]] for t in range(T)]
        empty = np.empty(0, np.uint8)
        tables = {name: None if shard is None else
                  RowTable(shard.dtype, shard.shape[1], (shard, cached.get(t, empty), data), which[t], offset[t],
                           self.out_dtypes[t], self.scales[t])
                  for t, (name, shard) in enumerate(zip(self.types, self.shards))}
        return Gathered(tables, types, index, counts, Route(index, counts, which, offset, order, per_run, w_rows,
                                                            w_per_run))

    def warm_up(self) -> bool:
        """Fault this rank's rows of every type in now (allocator.populate)."""
        return all([populate(s) for s in self.shards if s is not None])

    def uncacheable(self) -> list[tuple[int, int]]:
        """Id ranges a cache must not hold: this rank's own, and every rank's runs of types
        without rows or with learnable ones (they change every step)."""
        T, r = len(self.types), self.comm.rank
        out = [(int(self.runs[r * T]), int(self.runs[(r + 1) * T]))]
        for q in range(self.comm.size):
            out += [(int(self.runs[q * T + t]), int(self.runs[q * T + t + 1])) for t in range(T)
                    if self.shards[t] is None or self.learnable[t]]
        return out

    def cache_rows(self, ids: np.ndarray):
        """A FeatureCache of ``ids``' rows (none uncacheable), fetched with one gather. Collective."""
        from fastsample.distributed.cache import CachedRows, FeatureCache, as_stored

        got = self.gather(ids)
        by_type = {}
        for t, name in enumerate(self.types):
            mine = got.types == t
            if np.any(mine):
                by_type[t] = CachedRows(ids[mine], as_stored(got.rows[name][got.index[mine]], self.shards[t].dtype,
                                                             self.scales[t]))
        return FeatureCache(by_type)

    def send_back(self, route: Route, grads: dict) -> dict:
        """Each learnable type's gradient rows, from this rank's gather (``grads``: {type:
        (rows of its output matrix, width), or None for zeros}), summed at their owners.
        Returns {type: (rows of this rank's shard, their gradient rows)}: the rows this rank
        gathered itself first, then those other ranks did, by rank; a row asked for twice
        appears twice. The gradient rows are a RowTable (fastsample/rows.py): each read where
        it is, this rank's own in ``grads``, the others' in the receive buffer (RowAdam reads
        them there; ``materialize`` makes the matrix). Collective: every rank calls it after
        every gather that had learnable types, empty batches too."""
        T, P, width = len(self.types), self.comm.size, self.grad_width
        learn = np.flatnonzero(self.learnable)
        g = {}  # type -> its gradient rows
        for t in learn:
            name, rows = self.types[t], int(route.counts[t])
            have = grads.get(name)
            g[t] = (np.zeros((rows, width), np.float32) if have is None
                    else np.ascontiguousarray(np.asarray(have, dtype=np.float32)))
            if g[t].shape != (rows, width):
                raise ValueError(f"grads[{name!r}]: {g[t].shape}, expected ({rows}, {width}): the gathered rows")
        # the reverse of round 2: gradient rows in the order asked, to the owners. Both sides'
        # rows come grouped by (rank, type), so each learnable type's are a slice per rank
        # (row copies that prefetch, straight from each type's rows; no pass over all ids)
        asked, wanted = _slices(route.per_run, learn), _slices(route.wanted_per_run, learn)
        sent, received = route.per_run[:, learn].sum(1), route.wanted_per_run[:, learn].sum(1)
        send = np.empty((int(sent.sum()), width), np.float32)
        at = 0
        for p in range(P):
            for t in learn:
                a, b = asked[p][t]
                copy_rows(g[t], route.index[route.order[a:b]], send[at:at + b - a])
                at += b - a
        data, _ = self.comm.all_to_all_v(send.ravel(), sent * width, recv_counts=received * width)
        data = data.reshape(-1, width)
        out, starts = {}, np.concatenate([[0], np.cumsum(received)])
        for t in learn:
            mine = np.flatnonzero(route.which[t] == 0)  # this rank's own rows of type t, by index
            # the rows others sent of type t: in rank p's part of data, after the types before t
            theirs = []
            for p in range(P):
                skip = route.wanted_per_run[p, learn[learn < t]].sum()
                a, b = wanted[p][t]
                theirs.append((starts[p] + skip, b - a, a))
            # where each contribution lies: this rank's own rows in g[t] (source 0), the others'
            # in data (source 1), in that order; no copy into one matrix
            row_bytes = width * 4
            which = np.concatenate([np.zeros(len(mine), np.int8)] + [np.ones(n, np.int8) for _, n, _ in theirs])
            offset = np.concatenate([mine * row_bytes] + [(first + np.arange(n)) * row_bytes for first, n, _ in theirs])
            values = RowTable(np.float32, width, (g[t], data), which, offset)
            own = route.offset[t][mine] // self.row_bytes[t]
            out[self.types[t]] = (np.concatenate([own] + [route.wanted_rows[a:a + n] for _, n, a in theirs]), values)
        return out

    def _route(self, ids: np.ndarray) -> tuple:
        """(run, row in it, node type, position among the ids of its type, the counts of
        each type, source (0 own, 2 remote), byte offset in the owner's shard) of each id."""
        T, n = len(self.types), len(ids)
        if _native is not None and ids.dtype in (np.int32, np.int64) and T <= 127:  # one pass
            run, rows, index, offset = (np.empty(n, np.int32), np.empty(n, np.int64), np.empty(n, np.int64),
                                        np.empty(n, np.int64))
            types, which, counts = np.empty(n, np.int8), np.empty(n, np.int8), np.empty(T, np.int64)
            bad = _native.route_ids(np.ascontiguousarray(ids), self.runs, T, self.comm.rank, self.row_bytes, run, rows,
                                    types, index, counts, which, offset)
            if bad >= 0:
                self._outside(ids, bad)
            return run, rows, types, index, counts, which, offset
        run, rows = self._runs_of(ids)
        types = self._run_type[run]
        index, counts = positions_by_type(types, T)
        which = np.where(self._run_owner[run] == self.comm.rank, 0, 2).astype(np.int8)
        return run, rows, types, index, counts, which, rows * self.row_bytes[types]

    def _place(self, order, types, index, counts, which, offset) -> tuple[np.ndarray, np.ndarray]:
        """(which, offset) with the received rows' offsets (back to back in the order asked),
        by type (type t's from the count of the types before it, each at its index)."""
        T = len(self.types)
        if _native is not None and types.dtype == np.int8:
            out = (np.empty_like(which), np.empty_like(offset)) if T > 1 else (None, None)
            _native.place_rows(order, types, index, counts, self.row_bytes, offset, which, *out)
            return (which, offset) if T == 1 else out
        sizes = self.row_bytes[types[order]]
        offset[order] = np.cumsum(sizes) - sizes
        if T == 1:
            return which, offset
        slot = np.concatenate([[0], np.cumsum(counts)])[types] + index
        out = np.empty_like(which), np.empty_like(offset)
        out[0][slot], out[1][slot] = which, offset
        return out

    def _by_run(self, run: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the positions where ``keep`` holds, grouped by run (owner, then type), in order
        within a run; how many of each run): a stable counting sort, the runs being few."""
        counts = np.zeros(len(self.runs) - 1, dtype=np.int64)
        if _native is not None:
            order = np.empty(len(run) + 1, dtype=np.int64)  # + 1: the kernel's scratch slot
            k = _native.group_by_run(run, keep.view(np.uint8), order, counts)
            return order[:k], counts
        at = np.flatnonzero(keep)
        counts += np.bincount(run[at], minlength=len(counts))
        return at[np.argsort(run[at], kind="stable")], counts

    def _of_type(self, mask: np.ndarray, types: np.ndarray, t: int) -> np.ndarray:
        """Positions where ``mask`` holds and the id is of type t (one type: where it holds)."""
        return np.flatnonzero(mask if len(self.types) == 1 else mask & (types == t))

    def _per_run(self, run: np.ndarray, per_rank: np.ndarray) -> np.ndarray:
        """(ranks, types): how many of each type in each rank's part of ``run`` (this rank's
        runs, ascending within a part: each rank asks by owner, then type)."""
        T, ends = len(self.types), np.cumsum(per_rank)
        mine = (self.comm.rank * T + np.arange(T + 1)).astype(run.dtype)
        out = np.stack([np.diff(np.searchsorted(run[end - n:end], mine)) for n, end in zip(per_rank, ends)])
        if not np.array_equal(out.sum(1), per_rank):  # a rank asked for rows another owns
            raise RuntimeError(f"gather: rank {self.comm.rank} was asked for ids it does not own")
        return out.reshape(len(per_rank), T)

    def _rows_of(self, data: np.ndarray, t: int, at: int, n: int) -> np.ndarray:
        """Type t's n rows in the wire buffer ``data`` from element ``at``, as its shard's dtype."""
        shard = self.shards[t]
        return data[at:at + n * int(self.row_units[t])].view(shard.dtype).reshape(n, shard.shape[1])

    def _pack(self, rows: np.ndarray, per_run: np.ndarray) -> np.ndarray:
        """The shard rows ``rows``, laid out by asking rank, then type (``per_run[p, t]`` of
        each), back to back in one wire buffer."""
        out = np.empty(int((per_run @ self.row_units).sum()), dtype=self.unit)
        a = at = 0
        for t, n in zip(np.tile(np.arange(len(self.types)), len(per_run)), per_run.ravel()):
            if n and self.row_units[t]:
                copy_rows(self.shards[t], rows[a:a + n], self._rows_of(out, t, at, n))
            a, at = a + n, at + n * int(self.row_units[t])
        return out
