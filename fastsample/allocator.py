"""Page faults off the training steps: freed heap kept mapped, mapped files faulted in at once.

Every step allocates and frees the same tens-of-MB tensors (layer outputs, gradients,
gathered features). glibc serves blocks above its mmap threshold (at most 32 MiB) with
fresh mmaps and unmaps them on free, so every step pays a page fault per 4 KiB page of
them: ~3 us each on the VMs measured here, 20-30 % of the model's forward/backward
(bench/README.md, "Model"). With mmap off for malloc and no heap trimming, freed blocks
are reused (after a few steps: aligned requests need a little more than a freed block
until neighbours coalesce). The price: the process keeps its peak heap until it exits.

Only glibc's malloc is tuned; under another allocator (jemalloc/tcmalloc by LD_PRELOAD)
or libc this does nothing. The same setting from outside a process:
GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647 (up to 2 GiB
of free heap top is kept; mallopt takes an int).

The feature shards are memory-mapped files: the first step to read a page of one pays a
fault for it (the medium preset's first 3 steps spent ~0.3 s more in the gather than the
rest), and every random row read through 4 KiB pages a TLB miss. ``resident`` reads a
shard that fits into anonymous memory at start-up (what the loaders do); ``populate``
maps a file's pages in one call, for a mapping kept.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import platform

import numpy as np

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
MADV_POPULATE_READ = 22  # Linux 5.14+; Python's mmap module does not name it
NO_TRIM = 2**31 - 1  # mallopt's value is an int
TUNABLES = f"glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold={NO_TRIM}"


def retain_freed_memory() -> bool:
    """Tune glibc's malloc as described above; True if it took effect."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, NO_TRIM))


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none): what the
    trainer's feature cache and the partitioner's method choice are sized against."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _file_mapping(array):
    """The mmap.mmap under a memory-mapped ``array`` (np.load's mmap_mode, or a view of one), or None."""
    mapping = array
    while mapping is not None and not isinstance(mapping, mmap.mmap):
        mapping = getattr(mapping, "_mmap", None) or getattr(mapping, "base", None)
    return mapping


def resident(array, share: float = 0.5):
    """A memory-mapped ``array`` read into anonymous memory in one sequential pass, huge
    pages asked for (MADV_HUGEPAGE), read-only like the mapping; the array as it is when
    it is not a file mapping or is larger than ``share`` of the available memory.

    Why: the gathered rows are read at random (the input layer reads them where they are,
    fastsample/rows.py), and a file mapping's 4 KiB pages (the page cache has no huge
    pages here) miss the TLB on nearly every row: on medium's rows of one step the input
    layer's mean took 76 ms through the mapping, 51 ms from anonymous memory (Zen 3). The
    page cache's copy stays reclaimable; the rank holds the shard's bytes once."""
    if _file_mapping(array) is None or not isinstance(array, np.ndarray):
        return array
    free = available_memory()
    if free is not None and array.nbytes > share * free:
        return array
    buffer = mmap.mmap(-1, max(array.nbytes, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # shared memory: no huge pages
    with contextlib.suppress(AttributeError, OSError):  # no MADV_HUGEPAGE: small pages, still no file mapping
        buffer.madvise(mmap.MADV_HUGEPAGE)
    out = np.frombuffer(buffer, dtype=array.dtype, count=array.size).reshape(array.shape)
    flat, src = out.reshape(-1), np.asarray(array).reshape(-1)
    step = max(1, (64 << 20) // max(array.itemsize, 1))  # 64 MiB at a time
    for i in range(0, len(flat), step):
        flat[i:i + step] = src[i:i + step]
    out.flags.writeable = False
    return out


def populate(array, share: float = 0.5) -> bool:
    """Map the pages of a memory-mapped ``array`` (np.load's mmap_mode) into this process
    now, in one madvise(MADV_POPULATE_READ), reading from disk what the page cache lacks:
    one sequential pass in place of a fault per page at random later. True if done;
    False, and nothing done, for an array that is not a file mapping, for a mapping larger
    than ``share`` of the available memory (it would evict what the job needs, and be
    evicted in turn), and where the kernel does not know the advice."""
    mapping = _file_mapping(array)
    if mapping is None:
        return False
    free = available_memory()
    if free is not None and len(mapping) > share * free:
        return False
    try:
        mapping.madvise(MADV_POPULATE_READ)
    except (OSError, ValueError):
        return False
    return True
