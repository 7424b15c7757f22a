"""bfloat16 feature rows in numpy, which has no bfloat16 dtype: a uint16 array holds the
bits (the high half of each float32), and `to_tensor` views it as torch.bfloat16 without a
copy. `--precision bf16` narrows float32 features once (`narrow`), so the gather, the
all_to_all and the hot-feature cache move half the bytes and the model's first layer reads
them as they are (fastsample/nn/sage.py); float16 features are used as stored.
"""

from __future__ import annotations

import numpy as np
import torch

BITS = np.dtype(np.uint16)  # the numpy dtype of bfloat16 bits
_CHUNK = 1 << 16  # rows narrowed at a time: bounded temporaries on a big shard


def narrow(a: np.ndarray) -> np.ndarray:
    """float32 rows -> bfloat16 bits (round to nearest even, as torch's conversion)."""
    out = np.empty(a.shape, dtype=BITS)
    for i in range(0, len(a), _CHUNK):
        block = torch.from_numpy(np.array(a[i:i + _CHUNK], dtype=np.float32))  # a writable copy
        out[i:i + _CHUNK] = block.to(torch.bfloat16).view(torch.uint16).numpy()
    return out


def widen(a: np.ndarray) -> np.ndarray:
    """Feature rows of any stored dtype (bfloat16 bits included) as float32."""
    if a.dtype == BITS:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a, dtype=np.float32)


def to_tensor(a: np.ndarray) -> torch.Tensor:
    """A torch view of feature rows: bfloat16 bits as torch.bfloat16, others as they are."""
    t = torch.from_numpy(a)
    return t.view(torch.bfloat16) if a.dtype == BITS else t


def bits(t: torch.Tensor) -> torch.Tensor:
    """What the native kernels take for output rows: a torch.bfloat16 tensor as its bits
    (uint16, a view), float32 as it is (they round as torch rounds: native/aggregate.cpp)."""
    return t.view(torch.uint16) if t.dtype == torch.bfloat16 else t
