"""The two-round gather on a typed partition: rows of every node type, each type with its
own width and dtype, in one request round and one reply round per step.

    round 1  the remote ids, ordered by (owner, node type), all_to_all (counts ride along);
             the owner reads each id's type and row in its shard from the type runs
    round 2  the rows back as bytes, in the order asked (so grouped by (source, type)):
             both sides know each id's type, so both know every segment's byte count,
             and the reply needs no count exchange
The result is one matrix per node type, rows in the order the ids of that type appear;
``index`` says where each id's row is. A featureless type (no shard) gets None.

Shards may be learnable (the rows of a sharded embedding table, fastsample/distributed/
embedding.py): ``gather`` then also returns the route the rows took, and ``send_back``
returns each such row's gradient to its owner in one more all_to_all, the reverse of
round 2 (both sides know its byte counts from round 1, so no count exchange).
Ids come from a partition's relabelled graph, where each (rank, node type) owns one run
of ids (partition.json's type_runs: run i is type i mod T, of rank i // T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastsample import bf16
from fastsample.allocator import populate
from fastsample.comm import Communicator
from fastsample.typed_block import positions_by_type


@dataclass
class Route:
    """Where one gather's rows of learnable types came from, for ``send_back``."""

    types: np.ndarray  # each id's node type
    index: np.ndarray  # each id's row in its type's output matrix
    local: np.ndarray  # positions of the ids this rank owns
    rows: np.ndarray  # each id's row in its owner's shard
    order: np.ndarray  # positions of the remote ids, in the order asked (by owner, then type)
    asked: np.ndarray  # ids asked of each rank
    wanted_types: np.ndarray  # the owner's side: the types and shard rows others asked for,
    wanted_rows: np.ndarray  # grouped by the asking rank
    wanted_counts: np.ndarray


class TypedGather:
    """Gathers per-type rows of global ids through ``comm`` (collective, as FeatureGather).

    Args:
        comm: the job's communicator; runs: (P * T + 1,) the type runs of the ids;
        shards: {type name: this rank's rows of that type, or None} in node type order;
        keep_dtype: rows come out in their stored dtype (16-bit stays 16-bit); else float32.
        learnable: the types whose shards are learnable float32 tables (their rows' gradients
            go back through send_back).
    """

    def __init__(self, comm: Communicator, runs: np.ndarray, shards: dict, keep_dtype: bool = False,
                 learnable=()):
        self.comm, self.runs = comm, np.asarray(runs, dtype=np.int64)
        self.types = list(shards)
        self.shards = [shards[t] for t in self.types]
        T = len(self.types)
        if len(self.runs) != comm.size * T + 1:
            raise ValueError(f"runs: {len(self.runs)} boundaries, expected ranks x types + 1 = {comm.size * T + 1}")
        for i, (t, shard) in enumerate(zip(self.types, self.shards)):
            rows = self.runs[comm.rank * T + i + 1] - self.runs[comm.rank * T + i]
            if shard is not None and (shard.ndim != 2 or len(shard) != rows):
                raise ValueError(f"shards[{t!r}]: {shard.shape}, expected ({rows}, width): this rank's {t} nodes")
        self.row_bytes = np.array([0 if s is None else s.shape[1] * s.itemsize for s in self.shards], dtype=np.int64)
        unknown = [t for t in learnable if t not in shards or shards[t] is None or shards[t].dtype != np.float32]
        if unknown:
            raise ValueError(f"learnable: {', '.join(map(str, unknown))}: not a float32 shard of this gather")
        self.learnable = [t in learnable for t in self.types]
        # the gradient round's bytes per row: learnable types only
        self.grad_bytes = np.where(self.learnable, self.row_bytes, 0)
        self.out_dtypes = [None if s is None else (s.dtype if keep_dtype else np.dtype(np.float32))
                           for s in self.shards]
        self.rows_local = self.rows_remote = 0  # since construction
        self.cache, self.rows_cached = None, 0  # a TypedCache (distributed/cache.py), set by build_cache's caller

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(owner rank, node type, row in the owner's shard of that type) of each id."""
        run = np.searchsorted(self.runs, ids, side="right") - 1
        T = len(self.types)
        return run // T, run % T, np.asarray(ids, dtype=np.int64) - self.runs[run]

    def __call__(self, ids: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
        """({type: its ids' rows (None if featureless)}, each id's type, each id's row index
        in its type's matrix), the matrices' rows in the order the ids of each type come."""
        return self.gather(ids)[:3]

    def gather(self, ids: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray, Route]:
        """As calling it, and the Route the rows took (for send_back). Collective."""
        ids = np.asarray(ids)
        owner, types, rows = self.locate(ids)
        T = len(self.types)
        index, counts = positions_by_type(types, T)  # each id's rank among the ids of its type
        out = {name: None if dtype is None else np.empty((counts[t], self.shards[t].shape[1]), dtype=dtype)
               for t, (name, dtype) in enumerate(zip(self.types, self.out_dtypes))}
        local = owner == self.comm.rank
        for t in range(T):
            if self.shards[t] is not None:
                at = np.flatnonzero(local & (types == t))
                out[self.types[t]][index[at]] = self._as_out(t, np.asarray(self.shards[t][rows[at]]))
        fetch = ~local
        for t, cache in (self.cache.by_type.items() if self.cache is not None else ()):
            at = np.flatnonzero(fetch & (types == t))
            slot = cache.lookup(ids[at])
            hit = slot >= 0
            out[self.types[t]][index[at[hit]]] = self._as_out(t, cache.rows[slot[hit]])
            fetch[at[hit]] = False
            self.rows_cached += int(hit.sum())
        remote = np.flatnonzero(fetch)
        self.rows_local += int(local.sum())
        self.rows_remote += len(remote)
        order = remote[np.lexsort((types[remote], owner[remote]))]  # by owner, then type
        asked = np.bincount(owner[order], minlength=self.comm.size)
        wanted, wanted_counts = self.comm.all_to_all_v(ids[order], asked)
        # the owner's side: the rows asked for, as bytes, in the order asked
        _, w_types, w_rows = self.locate(wanted)
        reply = self._pack(w_types, w_rows, wanted_counts)
        data, _ = self.comm.all_to_all_v(reply, self._segment_bytes(w_types, wanted_counts),
                                         recv_counts=self._segment_bytes(types[order], asked))
        self._unpack(data, types[order], index[order], asked, out)
        return out, types, index, Route(types, index, np.flatnonzero(local), rows, order, asked, w_types, w_rows,
                                        wanted_counts)

    def warm_up(self) -> bool:
        """Fault this rank's feature rows of every type in now (allocator.populate)."""
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
        """A TypedCache of ``ids``' rows (none uncacheable), fetched with one gather. Collective."""
        from fastsample.distributed.cache import FeatureCache, TypedCache, as_stored

        out, types, _ = self(ids)
        return TypedCache({t: FeatureCache(ids[types == t], as_stored(out[name], self.shards[t].dtype))
                           for t, name in enumerate(self.types) if np.any(types == t)})

    def send_back(self, route: Route, grads: dict) -> dict:
        """Each learnable type's gradient rows, from this rank's gather (``grads``: {type:
        (rows of its output matrix, width), or None for zeros}), summed at their owners.
        Returns {type: (rows of this rank's shard, their gradient rows)}: the rows this rank
        gathered itself first, then those other ranks did, by rank; a row asked for twice
        appears twice. Collective: every rank calls it after every gather that had learnable
        types, empty batches too."""
        T = len(self.types)
        g = [None] * T
        for t, name in enumerate(self.types):
            if self.learnable[t]:
                width = self.shards[t].shape[1]
                have = grads.get(name)
                rows = int(np.sum(route.types == t))
                g[t] = (np.zeros((rows, width), np.float32) if have is None
                        else np.ascontiguousarray(np.asarray(have, dtype=np.float32)))
                if g[t].shape != (rows, width):
                    raise ValueError(f"grads[{name!r}]: {g[t].shape}, expected ({rows}, {width}): the gathered rows")
        # the reverse of round 2: gradient rows in the order asked, as bytes, to the owners
        sent_types = route.types[route.order]
        send = np.empty(int(self.grad_bytes[sent_types].sum()), dtype=np.uint8)
        for a, b, t, at in self._runs(sent_types, route.asked, self.grad_bytes):
            if self.learnable[t]:
                block = g[t][route.index[route.order[a:b]]].view(np.uint8).ravel()
                send[at:at + len(block)] = block
        data, _ = self.comm.all_to_all_v(send, self._segment_bytes(sent_types, route.asked, self.grad_bytes),
                                         recv_counts=self._segment_bytes(route.wanted_types, route.wanted_counts,
                                                                         self.grad_bytes))
        out = {}
        for t, name in enumerate(self.types):
            if not self.learnable[t]:
                continue
            width = self.shards[t].shape[1]
            mine = route.local[route.types[route.local] == t]
            rows, values = [route.rows[mine]], [g[t][route.index[mine]]]
            for a, b, tt, at in self._runs(route.wanted_types, route.wanted_counts, self.grad_bytes):
                if tt == t:
                    rows.append(route.wanted_rows[a:b])
                    values.append(data[at:at + (b - a) * width * 4].view(np.float32).reshape(b - a, width))
            out[name] = (np.concatenate(rows), np.concatenate(values))
        return out

    def _as_out(self, t: int, block: np.ndarray) -> np.ndarray:
        """Type t's rows in its output dtype (16-bit rows widened to float32 unless kept)."""
        want = self.out_dtypes[t]
        return block if block.dtype == want else bf16.widen(block) if want == np.float32 else block.astype(want)

    def _segment_bytes(self, types: np.ndarray, per_rank: np.ndarray, row_bytes=None) -> np.ndarray:
        """Bytes of each rank's segment of rows, the segments ``per_rank`` ids long."""
        row_bytes = self.row_bytes if row_bytes is None else row_bytes
        total = np.concatenate([[0], np.cumsum(row_bytes[types])])
        ends = np.cumsum(per_rank)
        return total[ends] - total[ends - per_rank]

    def _runs(self, types: np.ndarray, per_rank: np.ndarray, row_bytes=None):
        """(first id, end id, type, first byte) of each run of one type within one rank's
        segment: the rows of a run lie back to back in the byte buffer."""
        row_bytes = self.row_bytes if row_bytes is None else row_bytes
        cut = np.flatnonzero(np.diff(types)) + 1
        bounds = np.unique(np.concatenate([[0], cut, np.cumsum(per_rank), [len(types)]]))
        first_byte = np.concatenate([[0], np.cumsum(row_bytes[types])])
        return [(a, b, int(types[a]), int(first_byte[a])) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    def _pack(self, types: np.ndarray, rows: np.ndarray, per_rank: np.ndarray) -> np.ndarray:
        out = np.empty(int(self.row_bytes[types].sum()), dtype=np.uint8)
        for a, b, t, at in self._runs(types, per_rank):
            if self.row_bytes[t]:
                block = np.ascontiguousarray(self.shards[t][rows[a:b]]).view(np.uint8).ravel()
                out[at:at + len(block)] = block
        return out

    def _unpack(self, data: np.ndarray, types: np.ndarray, index: np.ndarray, per_rank: np.ndarray,
                out: dict) -> None:
        for a, b, t, at in self._runs(types, per_rank):
            if self.row_bytes[t]:
                shard = self.shards[t]
                block = data[at:at + (b - a) * int(self.row_bytes[t])].view(shard.dtype).reshape(b - a, shard.shape[1])
                out[self.types[t]][index[a:b]] = self._as_out(t, block)
