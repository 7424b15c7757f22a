"""Gathered rows read where they landed: a row table.

A step's input rows come from up to three places: this rank's feature shard (the rows it
owns), its hot-feature cache, and the buffer the gather's second round received the rest
in. Copying them all into one matrix before the input layer reads them writes every row
once more, and reads it once more (on DistDGL's workload that pass was about half the
gather). A RowTable records where each row is instead, its source array and byte offset,
and the built-in models' input layers read the rows there through their addresses
(native/aggregate.cpp, mean_aggregate_at): the same sums in the same order, so the same
bits. ``materialize`` makes the one matrix for whoever wants it (Batch.x on first access, a
user's model, a GPU, a learnable table's leaf).

What it costs: x held the rows in the order the sampler first met them, so the mean over
x read mostly in sequence; in place every read is a random row of the shard. On medium
(Zen 3) the two come out even per step (bench/README.md, "Gathered rows read where they
land"); the copy's memory (one row per input node) is saved. With prefetch the loader's
background thread still makes x, where the copy is hidden.

The table keeps its sources alive; they must not change while it is read (feature shards
and caches do not). Learnable tables change at each step's update, after the backward:
their rows come as LearnableRows, row tables that take a gradient, read in place during the
step by a model that says so (``reads_learnable_rows``, the R-GCN: its backward sets
``grad``), made a leaf tensor for any other (Batch.x).
"""

from __future__ import annotations

import numpy as np
import torch

from fastsample import bf16, int8
from fastsample.native import lib as _native

# the native kernels' element kinds (native/aggregate.hpp, RowKind)
KINDS = {np.dtype(np.float32): 0, bf16.BITS: 1, np.dtype(np.float16): 2, int8.DTYPE: 3}


class RowTable:
    """``n`` rows of ``width`` elements of ``dtype``, row i at byte ``offset[i]`` of
    ``sources[which[i]]`` (C-contiguous arrays of any shape; which None: all in sources[0]);
    ``materialize`` gives them as ``out_dtype`` (default ``dtype``; float32 widens 16-bit rows).
    int8 rows (fastsample/int8.py) come with their columns' ``scale`` and are always read as
    their decoded float32 values."""

    def __init__(self, dtype, width: int, sources, which: np.ndarray | None, offset: np.ndarray, out_dtype=None,
                 scale: np.ndarray | None = None):
        self.dtype, self.width = np.dtype(dtype), int(width)
        self.out_dtype = self.dtype if out_dtype is None else np.dtype(out_dtype)
        self.scale = None
        if self.dtype == int8.DTYPE:
            self.scale = np.ascontiguousarray(scale, dtype=np.float32) if scale is not None else None
            if self.scale is None or self.scale.shape != (self.width,):
                raise ValueError(f"scale: int8 rows take one scale per column ({self.width})")
            self.out_dtype = np.dtype(np.float32)
        self.sources = tuple(sources)
        if which is not None and len(which) and np.asarray(which).dtype != np.int8:
            if np.min(which) < 0 or np.max(which) >= len(self.sources):  # before int8 could wrap it
                raise ValueError(f"which: sources are 0..{len(self.sources) - 1}")
        self.which = None if which is None else np.ascontiguousarray(which, dtype=np.int8)
        self.offset = np.ascontiguousarray(offset, dtype=np.int64)
        self.row_bytes = self.width * self.dtype.itemsize
        for s, src in enumerate(self.sources):
            if not src.flags.c_contiguous:
                raise ValueError(f"sources[{s}]: not C-contiguous")
        self._addr, self._aligned = None, False
        bad = self._first_outside()  # an offset outside its source would read memory not ours
        if bad >= 0:
            s = 0 if which is None else int(self.which[bad])
            where = f"sources[{s}] ({self.sources[s].nbytes} bytes)" if 0 <= s < len(self.sources) else "every source"
            raise ValueError(f"offset: row {bad} (at byte {self.offset[bad]}) outside {where}")

    def _first_outside(self) -> int:
        """The first row not wholly inside its source, or -1; natively, in the same pass,
        each row's address and whether all are aligned to the element (what ``readable`` asks)."""
        if _native is not None:
            sizes = np.array([src.nbytes for src in self.sources], dtype=np.int64)
            bases = np.array([src.ctypes.data for src in self.sources], dtype=np.int64)
            addr = np.empty(len(self.offset), dtype=np.int64)
            bad, self._aligned = _native.row_addresses(self.which, self.offset, bases, sizes, self.row_bytes,
                                                       self.dtype.itemsize, addr)
            self._addr = addr if bad < 0 else None
            return bad
        s = np.zeros(len(self.offset), dtype=np.int64) if self.which is None else self.which.astype(np.int64)
        sizes = np.array([src.nbytes for src in self.sources] + [-1], dtype=np.int64)
        out = (s < 0) | (s >= len(self.sources)) | (self.offset < 0)
        out |= self.offset + self.row_bytes > sizes[np.clip(s, 0, len(self.sources))]
        bad = np.flatnonzero(out)
        return int(bad[0]) if len(bad) else -1

    def __len__(self) -> int:
        return len(self.offset)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self), self.width

    @property
    def readable(self) -> bool:
        """Whether the native kernels can read the rows in place (the module is built, the
        dtype is one they read, every row aligned to its element)."""
        return _native is not None and self.dtype in KINDS and self._aligned

    def addresses(self) -> np.ndarray:
        """int64 (n,): each row's address (valid while this table lives)."""
        if self._addr is None:
            base = np.array([s.ctypes.data for s in self.sources], dtype=np.int64)
            self._addr = self.offset + (base[0] if self.which is None else base[self.which])
        return self._addr

    def materialize(self, stop: int | None = None) -> np.ndarray:
        """Rows [0, stop) (all by default) as one (rows, width) matrix of ``out_dtype``."""
        n = len(self) if stop is None else int(stop)
        if self.scale is not None and self.readable:  # int8: decoded in the one pass that copies
            out = np.empty((n, self.width), dtype=np.float32)
            _native.decode_rows_at(self.addresses()[:n], self.scale, out)
            return out
        out = np.empty((n, self.width), dtype=self.dtype)
        flat = out.view(np.uint8).reshape(n, self.row_bytes)
        if _native is not None:
            _native.copy_rows_at(self.addresses()[:n], flat)
        else:
            cols = np.arange(self.row_bytes, dtype=np.int64)
            for s, src in enumerate(self.sources):
                at = np.arange(n) if self.which is None else np.flatnonzero(self.which[:n] == s)
                flat[at] = src.reshape(-1).view(np.uint8)[self.offset[at, None] + cols]
        if self.scale is not None:
            return int8.decode(out, self.scale)
        return out if self.out_dtype == self.dtype else bf16.widen(out).astype(self.out_dtype, copy=False)

    def copy_into(self, out: torch.Tensor) -> None:
        """``out`` = rows [0, len(out)), float32 or bfloat16 (converted as torch converts);
        ``out`` may be a column block of a wider matrix (a product's input), written in place
        rather than through a copy of the rows where their dtype is out's."""
        same = self.dtype == np.float32 and out.dtype == torch.float32 or \
            self.dtype == bf16.BITS and out.dtype == torch.bfloat16
        native = self.readable and out.device.type == "cpu"
        if native and same:
            _native.copy_rows_at(self.addresses()[:len(out)], bf16.bits(out))
        elif native and self.scale is not None and out.dtype in (torch.float32, torch.bfloat16):
            _native.decode_rows_at(self.addresses()[:len(out)], self.scale, bf16.bits(out))
        else:
            out.copy_(tensor_of(self, len(out)))

    def mean_into(self, indptr: torch.Tensor, indices: torch.Tensor, out: torch.Tensor, with_self: bool) -> None:
        """out = [row i | mean of its sources' rows] (with_self) or the mean alone, per
        destination of a CSC (indptr int64, indices int32), summed in fp32 and stored as out's
        dtype (float32 or bfloat16): mean_aggregate_at."""
        _native.mean_aggregate_at(indptr, indices, torch.from_numpy(self.addresses()), KINDS[self.dtype],
                                  bf16.bits(out), with_self, self.scale)


class LearnableRows(RowTable):
    """The rows of a learnable table (an embedding's) that a step gathered, read in place
    like any row table; a model that reads them (``reads_learnable_rows``) sets ``grad``
    (float32 (n, width), or leaves it None: zeros) in its backward, where a leaf tensor
    would have taken it, and the update reads it there (distributed/embedding.py). Saves
    the leaf's copy of every row each step; the rows must not change before the backward
    ends (the update comes after it)."""

    def __init__(self, table: RowTable):
        self.__dict__.update(table.__dict__)  # the same rows, checked when ``table`` was made
        self.grad = None


def takes_grad(rows) -> bool:
    """Whether a batch's input rows take a gradient: a leaf tensor that does, or LearnableRows."""
    return isinstance(rows, LearnableRows) or (isinstance(rows, torch.Tensor) and rows.requires_grad)


def tensor_of(rows, stop: int | None = None) -> torch.Tensor:
    """A RowTable's rows (or a tensor's) [0, stop) as a tensor, bfloat16 bits as torch.bfloat16."""
    if isinstance(rows, RowTable):
        return bf16.to_tensor(rows.materialize(stop))
    return rows if stop is None else rows[:stop]


def in_place(x) -> bool:
    """Whether ``x`` (a batch's input rows, or a dict of them) holds a row table."""
    return any(isinstance(v, RowTable) for v in (x.values() if isinstance(x, dict) else (x,)))
