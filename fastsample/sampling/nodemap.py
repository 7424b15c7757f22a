"""Reusable global-id -> local-id maps for the Numba kernels.

Relabelling needs a map over all node ids. Allocating and filling one per call would cost
O(|V|) per mini-batch, so maps are kept in a pool: each is an int64 array of -1 that a
kernel fills for the nodes it touches and resets to -1 before handing it back. The pool
hands a map to one call at a time, so concurrent calls (the kernels release the GIL) never
share one. The C++ kernels keep their own pool on the same principle.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

_lock = threading.Lock()
_free: list[np.ndarray] = []


@contextmanager
def node_map(num_nodes: int):
    with _lock:
        fits = [i for i, m in enumerate(_free) if len(m) >= num_nodes]
        m = _free.pop(fits[0]) if fits else None
    if m is None:
        m = np.full(num_nodes, -1, dtype=np.int64)
    try:
        yield m
    except BaseException:
        m = None  # a kernel that failed may have left entries set: drop the map
        raise
    finally:
        if m is not None:
            with _lock:
                _free.append(m)
