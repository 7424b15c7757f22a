"""The learning-rate schedule: a factor of the base rate as a function of the global step
alone (epoch x steps per epoch + step), so a resumed run, mid-epoch included, continues it
exactly with nothing saved.

    none     1
    cosine   0.5 (1 + cos(pi t / T)) over the steps after the warm-up (T of them)
    step     1, then 0.1 from half the steps, 0.01 from three quarters
A warm-up of W steps ramps linearly first: (s + 1) / W at step s < W.
"""

from __future__ import annotations

import math

SCHEDULES = ("none", "cosine", "step")


def lr_factor(schedule: str, warmup: int, step: int, total: int) -> float:
    """The factor at global step ``step`` of ``total`` (``warmup`` of them the warm-up)."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "none":
        return 1.0
    t, T = step - warmup, max(total - warmup, 1)
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * min(t, T) / T))
    return 1.0 if t < T / 2 else 0.1 if t < 3 * T / 4 else 0.01
