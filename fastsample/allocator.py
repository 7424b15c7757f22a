"""Keep freed heap memory mapped, so each training step reuses pages instead of faulting them in.

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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
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
