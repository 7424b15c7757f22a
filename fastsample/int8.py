"""int8 feature rows: `--precision int8` stores, gathers and sends features in 8 bits, a
quarter of float32's bytes and half of bfloat16's.

Each column f of a node type's features has one scale s_f = 2^e_f, the smallest power of
two with |x| <= 127 s_f for every value of the column on every rank (so the same on all of
them: ``scales`` is collective), and a value x is stored as q = round(x / s_f), an int8 in
[-127, 127]. Why a power of two: a row decodes to q s_f exactly, in float32 and in bfloat16
alike (|q| has 7 bits), and a column's decoded values are multiples of s_f, so their sums
are exact in any order (up to 2^24 s_f). So every reader, the native kernels summing the
8-bit rows where they are, torch over a decoded matrix, a GPU, sees the same numbers: the
decoded features, to which the precision's one loss is the rounding of q (at most s_f / 2,
between 1/254 and 1/128 of the column's largest magnitude).
"""

from __future__ import annotations

import numpy as np

DTYPE = np.dtype(np.int8)
_CHUNK = 1 << 16  # rows at a time: bounded temporaries on a big shard
# e_f's range: s_f and every q s_f normal floats (exactness above), s_f finite
_E_MIN, _E_MAX = -120, 120


def _column_absmax(a: np.ndarray) -> np.ndarray:
    """Each column's largest magnitude (NaN where the column has one), from its largest and
    smallest values in the rows' own dtype (exact; no widened copy of the rows)."""
    out = np.zeros(a.shape[1], dtype=np.float64)
    for i in range(0, len(a), _CHUNK):
        block = np.asarray(a[i:i + _CHUNK])
        if len(block):
            out = np.maximum(out, np.maximum(block.max(axis=0).astype(np.float64),
                                             -block.min(axis=0).astype(np.float64)))
    return out


def scales(shards: dict, comm, labels: dict | None = None) -> dict:
    """{node type: float32 (width,) column scales} of the featured types of ``shards``
    ({type: this rank's rows, or None}), the same on every rank (collective: every rank
    calls it, with its shard of each type). A non-finite value is an error, on every rank,
    naming the features as ``labels`` does ({type: a name}; default: by node type)."""
    mine = {t: None if a is None else _column_absmax(a) for t, a in shards.items()}
    bad = sorted(str(t) for t, m in mine.items() if m is not None and not np.all(np.isfinite(m)))
    everyone = comm.allgather_object((mine, bad))
    bad = sorted({t for _, b in everyone for t in b})
    if bad:
        what = "; ".join((labels or {}).get(t, f"the features of node type {t}") for t in bad)
        raise ValueError(f"{what}: NaN or infinite values; --precision int8 needs finite features")
    out = {}
    for t, a in shards.items():
        if a is None:
            continue
        absmax = np.max([m[t] for m, _ in everyone if m.get(t) is not None], axis=0)
        with np.errstate(divide="ignore"):
            e = np.ceil(np.log2(absmax / 127.0))
        e = np.clip(np.where(absmax > 0, e, 0), _E_MIN, _E_MAX).astype(np.int32)
        s = np.ldexp(np.float32(1), e).astype(np.float32)
        # log2's rounding must not leave a value above 127 s: one exponent up where it would
        s[absmax > 127.0 * s.astype(np.float64)] *= 2
        out[t] = s
    return out


def quantize(a: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Rows (float32 or float16) -> int8 q = round(x / scale) (to nearest even), per column."""
    scale = np.asarray(scale, dtype=np.float32)
    out = np.empty(a.shape, dtype=DTYPE)
    inv = (1.0 / scale.astype(np.float64)).astype(np.float32)  # a power of two: exact
    for i in range(0, len(a), _CHUNK):
        block = np.asarray(a[i:i + _CHUNK], dtype=np.float32) * inv
        out[i:i + _CHUNK] = np.clip(np.rint(block), -127, 127)
    return out


def decode(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int8 rows -> their float32 values, q * scale (exact)."""
    return q.astype(np.float32) * np.asarray(scale, dtype=np.float32)
