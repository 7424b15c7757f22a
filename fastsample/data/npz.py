"""Arrays inside a .npz archive, read in bounded memory.

``np.load`` of a .npz member decompresses the whole array into memory: 26 GB for
ogbn-papers100M's edge_index. Here a member is opened once to parse its .npy header
(numpy.lib.format) and is then read in blocks of about CHUNK_BYTES, from streams
positioned inside its data:

  * a member stored uncompressed (np.savez) is read from the archive file itself,
    seeking to any offset at no cost;
  * a deflated member (np.savez_compressed) is decompressed by zipfile; a stream that
    starts inside the data decompresses and drops what comes before (zipfile's seek).

A 2-D array sliced across its storage order (the columns of a C-order array, or the
rows of a Fortran-order one) is read by one stream per storage row: edge_index (2, E)
in C order holds all sources, then all destinations, so its edges come from two streams,
the second starting E entries in (for a deflated member that costs decompressing the
source row twice). Every problem (not a zip, a member missing, truncated or corrupt) is a
DatasetError naming the archive and the member. Deflated members are CRC-checked (zipfile
does it as the last stream reaches the end); stored ones only for their length, as a
plain .npy file would be.
"""

from __future__ import annotations

import contextlib
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from fastsample.data.graph import DatasetError

CHUNK_BYTES = 1 << 26  # bytes per block (all streams together); tests shrink it

# what zipfile, zlib and struct raise on a truncated or damaged archive
_READ_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, struct.error)


@dataclass(frozen=True)
class NpyMember:
    """One .npy array inside a .npz archive, located but not read.

    archive:    the .npz file
    name:       the member's array name (its file name without ``.npy``)
    shape, dtype, fortran: from the .npy header
    data_start: offset of the array data within the member (after the .npy header)
    stored_at:  offset of the member's bytes in the archive file if stored uncompressed,
                else None (deflated: read through zipfile)
    plain:      ``archive`` is a plain .npy file or a headerless raw array (open_npy,
                raw_array), not a .npz: stored_at is 0, and messages name just the file
    """

    archive: Path
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    data_start: int
    stored_at: int | None
    plain: bool = False

    def __str__(self) -> str:
        return str(self.archive) if self.plain else f"{self.archive}: member {self.name!r}"

    def blocks(self, axis: int = 0) -> Iterator[np.ndarray]:
        """Consecutive slices of the array along ``axis`` (0 or 1, or 0 of a 1-D array),
        each of about CHUNK_BYTES, in order; together they are the whole array."""
        shape = self.shape if len(self.shape) == 2 else (self.shape[0], 1)
        if len(self.shape) not in (1, 2) or axis not in (0, 1) or (len(self.shape) == 1 and axis):
            raise ValueError(f"{self}: cannot slice shape {self.shape} along axis {axis}")
        # The data is a C-order (outer, inner) array: the shape itself, or its transpose
        # if Fortran order. Slicing along outer needs one stream; along inner, one per outer row.
        outer, inner = shape[::-1] if self.fortran else shape
        along_outer = axis == (1 if self.fortran else 0)
        size = self.dtype.itemsize
        length = outer if along_outer else inner  # entries along axis
        across = inner if along_outer else outer  # entries per slice position
        step = max(1, CHUNK_BYTES // max(1, across * size))
        starts = [0] if along_outer else [r * inner for r in range(outer)]
        try:
            with contextlib.ExitStack() as stack:
                streams = [self._stream(stack, start * size) for start in starts]
                for begin in range(0, length, step):
                    k = min(step, length - begin)
                    storage = np.empty((k, inner) if along_outer else (outer, k), dtype=self.dtype)
                    for f, row in zip(streams, [storage] if along_outer else storage):
                        self._read_into(f, row)
                    block = storage.T if self.fortran else storage  # back to the array's axes
                    yield block.reshape(-1) if len(self.shape) == 1 else block
                if self.stored_at is None and streams and streams[-1].read(1):
                    raise DatasetError(f"{self}: more data than its header describes")
        except DatasetError:
            raise
        except _READ_ERRORS as e:  # zipfile checks the CRC when the last stream hits the end
            raise DatasetError(f"{self}: truncated or corrupt ({type(e).__name__}: {e})") from e

    def read(self) -> np.ndarray:
        """The whole array (for members of O(num_nodes) size)."""
        out = np.empty(self.shape, self.dtype)
        done = 0
        for block in self.blocks(0):
            out[done:done + len(block)] = block
            done += len(block)
        return out

    def _stream(self, stack: contextlib.ExitStack, offset: int):
        """A binary file positioned ``offset`` bytes into the array data."""
        if self.stored_at is not None:
            f = stack.enter_context(open(self.archive, "rb"))
            f.seek(self.stored_at + self.data_start + offset)
        else:
            zf = stack.enter_context(zipfile.ZipFile(self.archive))
            f = stack.enter_context(zf.open(self.name + ".npy"))
            f.seek(self.data_start + offset)
        return f

    def _read_into(self, f, out: np.ndarray) -> None:
        want = out.nbytes
        got = f.readinto(memoryview(out.reshape(-1).view(np.uint8)))
        if got != want:
            raise DatasetError(f"{self}: truncated (a read of {want} bytes got {got})")


def _header(f, where: str):
    """The .npy header at ``f``'s position: (shape, fortran, dtype, data start); DatasetError
    naming ``where`` if it is none or describes Python objects."""
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except ValueError as e:
        raise DatasetError(f"{where}: not a .npy array ({e})") from e
    if dtype.hasobject:
        raise DatasetError(f"{where}: holds Python objects (pickled), not numbers")
    return tuple(shape), fortran, dtype, f.tell()


def has_npy_header(path: str | Path) -> bool:
    """Whether the file ``path`` starts with .npy's magic string (else: a headerless raw array)."""
    with open(path, "rb") as f:
        return f.read(len(np.lib.format.MAGIC_PREFIX)) == np.lib.format.MAGIC_PREFIX


def open_npy(path: str | Path) -> NpyMember:
    """A plain .npy file, located but not read: its header parsed, its data read in blocks
    by ``blocks()`` from the file (sequential reads, not a memory map, whose pages would
    count in the process's resident memory). DatasetError naming the file if it is
    missing, not a .npy array, pickled, or shorter than its header says."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: missing")
    try:
        with open(path, "rb") as f:
            shape, fortran, dtype, data_start = _header(f, str(path))
            size = f.seek(0, 2)
    except OSError as e:
        raise DatasetError(f"{path}: unreadable ({e})") from e
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < data_start + nbytes:
        raise DatasetError(f"{path}: truncated ({size - data_start} bytes of data, its header {shape} {dtype} "
                           f"needs {nbytes})")
    return NpyMember(path, path.stem, shape, dtype, fortran, data_start, 0, plain=True)


def raw_array(path: str | Path, shape: tuple[int, ...], dtype) -> NpyMember:
    """A headerless file holding exactly one C-order array of ``shape`` and ``dtype`` (what
    np.memmap writes), read in blocks like open_npy's; DatasetError naming the file if its
    size is not that array's."""
    path, dtype = Path(path), np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = path.stat().st_size
    if size != nbytes:
        raise DatasetError(f"{path}: {size} bytes, but a headerless {dtype} array of shape {tuple(shape)} "
                           f"takes {nbytes}")
    return NpyMember(path, path.stem, tuple(shape), dtype, False, 0, 0, plain=True)


def open_npz(path: str | Path) -> dict[str, NpyMember]:
    """Locate every .npy member of the archive ``path`` and parse its header (no data is
    read). Raises DatasetError naming the file (missing, not a zip, a member not a .npy
    array or shorter than its header says)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: missing")
    members = {}
    try:
        with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
            archive_size = raw.seek(0, 2)
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                name = info.filename[:-4]
                with zf.open(info) as f:
                    shape, fortran, dtype, data_start = _header(f, f"{path}: member {name!r}")
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if info.file_size < data_start + nbytes:
                    raise DatasetError(f"{path}: member {name!r}: truncated ({info.file_size - data_start} bytes "
                                       f"of data, its header {shape} {dtype} needs {nbytes})")
                stored_at = None
                if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 1:  # not encrypted
                    # the member's bytes follow its local header, whose extra field may
                    # differ from the central directory's: read its lengths there
                    raw.seek(info.header_offset)
                    local = raw.read(30)
                    if len(local) < 30 or local[:4] != b"PK\x03\x04":
                        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
                    name_len, extra_len = struct.unpack("<HH", local[26:30])
                    stored_at = info.header_offset + 30 + name_len + extra_len
                    if archive_size < stored_at + data_start + nbytes:
                        raise DatasetError(f"{path}: member {name!r}: truncated (the file ends inside it)")
                members[name] = NpyMember(path, name, tuple(shape), dtype, fortran, data_start, stored_at)
    except DatasetError:
        raise
    except (*_READ_ERRORS, ValueError) as e:  # ValueError: e.g. zipfile on a damaged directory
        raise DatasetError(f"{path}: not a readable zip archive, truncated or corrupt "
                           f"({type(e).__name__}: {e})") from e
    return members
