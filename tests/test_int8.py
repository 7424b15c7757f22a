"""int8 features (fastsample/int8.py): one power-of-two scale per column, the same on every
rank; values decode exactly, within half a step of what was stored."""

import numpy as np
import pytest
import torch

from fastsample import int8


class Ranks:
    """rank 0's view of an allgather among ranks whose messages were recorded before."""

    def __init__(self, others=()):
        self.others, self.sent = list(others), None

    def allgather_object(self, obj):
        self.sent = obj
        return [obj, *self.others]


def columns(rng, n: int, width: int) -> np.ndarray:
    """Values whose columns span very different magnitudes (2^-30 .. 2^30), one column all zeros."""
    x = rng.standard_normal((n, width)).astype(np.float32) * (2.0 ** rng.integers(-30, 30, width)).astype(np.float32)
    x[:, 3] = 0
    return x


def test_the_scales_cover_every_rank_and_are_the_smallest_powers_of_two_that_do():
    rng = np.random.default_rng(0)
    mine, theirs = columns(rng, 500, 16), columns(rng, 300, 16)
    theirs[7, 5] = 1e6  # a column's largest value on the other rank only
    other = Ranks()
    int8.scales({"paper": theirs, "author": None}, other)
    got = int8.scales({"paper": mine, "author": None}, Ranks([other.sent]))
    assert list(got) == ["paper"]  # a featureless type takes none
    assert got["paper"].dtype == np.float32
    s = got["paper"].astype(np.float64)
    mantissa, _ = np.frexp(s)
    assert np.all(mantissa == 0.5)  # powers of two
    absmax = np.abs(np.concatenate([mine, theirs])).max(0).astype(np.float64)
    assert np.all(absmax <= 127 * s)
    nonzero = absmax > 0
    assert np.all(absmax[nonzero] > 127 * s[nonzero] / 2)  # half the scale would not cover it
    assert s[3] == 1.0  # an all-zero column


def test_values_decode_exactly_within_half_a_step_and_grid_values_round_trip():
    rng = np.random.default_rng(1)
    x = columns(rng, 400, 12)
    s = int8.scales({"t": x}, Ranks())["t"]
    q = int8.quantize(x, s)
    assert q.dtype == np.int8 and q.min() >= -127
    back = int8.decode(q, s)
    assert np.all(np.abs(back.astype(np.float64) - x) <= s / 2)
    assert np.array_equal(int8.quantize(back, s), q)  # decoded values are on the grid: the same integers again
    # the decoded values are exact in bfloat16 as well (|q| < 2^7, s a power of two)
    assert torch.equal(torch.from_numpy(back).to(torch.bfloat16).float(), torch.from_numpy(back))
    # and float16 rows quantize as their float32 values do
    half = rng.standard_normal((100, 12)).astype(np.float16)
    s = int8.scales({"t": half}, Ranks())["t"]
    assert np.array_equal(int8.quantize(half, s), int8.quantize(half.astype(np.float32), s))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_feature_is_refused_on_every_rank(bad):
    rng = np.random.default_rng(2)
    clean, dirty = columns(rng, 50, 4), columns(rng, 50, 4)
    dirty[10, 2] = bad
    other = Ranks()
    with pytest.raises(ValueError):
        int8.scales({"author": dirty}, other)  # the rank that holds it (its message recorded)
    for comm, shard in ((Ranks([other.sent]), clean), (Ranks(), dirty)):  # one that does not, and it
        with pytest.raises(ValueError, match="the features of node type author: NaN or infinite values; "
                                             "--precision int8 needs finite features"):
            int8.scales({"author": shard}, comm)
