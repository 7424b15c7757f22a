"""A typed Block's bookkeeping (fastsample/nn/block.py): sources' positions within their
types and the per-relation CSCs, native and numpy alike, and a malformed MFG refused."""

import numpy as np
import pytest

from fastsample.nn import block as block_module
from fastsample.nn.block import Block, positions_by_type
from fastsample.sampling import MFG

from helpers import native_built

needs_native = pytest.mark.skipif(not native_built(), reason="native module not built")

NODE_TYPES = ["a", "b", "c"]
EDGE_TYPES = [("a", "r0", "a"), ("b", "r1", "a"), ("a", "r2", "b"), ("c", "r3", "b"), ("b", "r4", "a")]


def typed_mfg(rng, num_src: int, num_dst: int, etype_dtype) -> tuple[MFG, np.ndarray]:
    src_type = rng.integers(0, 3, num_src).astype(np.int8)
    indptr, indices, etypes = [0], [], []
    for d in range(num_dst):
        for r, (s, _, t) in enumerate(EDGE_TYPES):  # a destination's edges in relation order
            if NODE_TYPES[src_type[d]] != t:
                continue
            of = np.flatnonzero(src_type == NODE_TYPES.index(s))
            picked = rng.choice(of, size=min(len(of), int(rng.integers(0, 5))), replace=False)
            indices += picked.tolist()
            etypes += [r] * len(picked)
        indptr.append(len(indices))
    mfg = MFG(np.array(indptr, np.int64), np.array(indices, np.int32), np.arange(num_src, dtype=np.int64), num_dst,
              np.array(etypes, etype_dtype))
    return mfg, src_type


@needs_native
@pytest.mark.parametrize("types_dtype", [np.int8, np.int64, np.int32])
def test_positions_by_type_native_equal_numpys(types_dtype, monkeypatch):
    types = np.random.default_rng(0).integers(0, 4, 1000).astype(types_dtype)
    native = positions_by_type(types, 4)
    monkeypatch.setattr(block_module, "_native", None)
    want = positions_by_type(types, 4)
    assert all(np.array_equal(a, b) for a, b in zip(native, want))
    assert [int(types[:i][types[:i] == types[i]].size) for i in (0, 10, 999)] == [native[0][i] for i in (0, 10, 999)]


@needs_native
@pytest.mark.parametrize("etype_dtype", [np.uint8, np.int16])
def test_the_relations_csc_native_equal_numpys(etype_dtype, monkeypatch):
    mfg, src_type = typed_mfg(np.random.default_rng(1), 300, 90, etype_dtype)
    native = Block.from_mfg(mfg, "cpu", src_type, NODE_TYPES, EDGE_TYPES)
    monkeypatch.setattr(block_module, "_native", None)
    want = Block.from_mfg(mfg, "cpu", src_type, NODE_TYPES, EDGE_TYPES)
    assert native.num_dst_dict == want.num_dst_dict and native.num_src_dict == want.num_src_dict
    for r, e in enumerate(EDGE_TYPES):
        (ip, idx), (want_ip, want_idx) = native.csc(r), want.csc(r)
        assert ip.dtype == want_ip.dtype == np.int64 and idx.dtype == want_idx.dtype == np.int32
        assert np.array_equal(ip, want_ip) and np.array_equal(idx, want_idx)
        assert len(ip) == native.num_dst_dict[e[2]] + 1 and ip[-1] == np.sum(mfg.edge_types == r)


@needs_native
def test_an_mfg_that_does_not_fit_its_relations_is_refused():
    mfg, src_type = typed_mfg(np.random.default_rng(2), 100, 30, np.uint8)
    bad = MFG(mfg.indptr, mfg.indices, mfg.src_ids, mfg.num_dst, np.full_like(mfg.edge_types, 9))
    with pytest.raises(ValueError, match="does not fit the relations' counts"):
        Block.from_mfg(bad, "cpu", src_type, NODE_TYPES, EDGE_TYPES)
    with pytest.raises(ValueError, match="a type outside"):
        positions_by_type(np.array([0, 3], np.int8), 3)
