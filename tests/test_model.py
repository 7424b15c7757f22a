"""The native mean aggregation matches the plain-PyTorch reference, values and gradients."""

import numpy as np
import pytest
import torch

from fastsample.data.edges import edges_to_csc
from fastsample.nn import matmul
from fastsample.nn.block import Block
from fastsample.nn.sage import GraphSAGE
from fastsample.sampling import sample
from helpers import native_built

pytestmark = pytest.mark.skipif(not native_built(), reason="fastsample._native not built")


def blocks_for(fanouts, seed=0):
    rng = np.random.default_rng(seed)
    n = 400
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n // 2, 3000)  # nodes >= 200: no in-edges
    graph = edges_to_csc(src, dst, n, symmetric=False)
    seeds = rng.permutation(n)[:60]
    return [Block.from_mfg(m) for m in sample(graph, seeds, fanouts, kernel="numba")]


ENGINES = ["blas"] + (["onednn"] if matmul.onednn_available() else [])


@pytest.mark.parametrize("fanouts,dropout", [([5, 3], 0.0), ([-1, 4], 0.0), ([3, -1], 0.0), ([4, 3, 2], 0.0),
                                             ([4, 3, 2], 0.5), ([-1, 3], 0.3)])
@pytest.mark.parametrize("input_grad", [True, False])
@pytest.mark.parametrize("engine", ENGINES)
def test_native_outputs_and_gradients_match_reference(fanouts, dropout, input_grad, engine):
    # The native layers fuse ReLU + dropout into their forward and fold their backward
    # into the next layer's input gradient; with dropout the masks must be the very same
    # draws as nn.Dropout's (same seed) and the keep-scale must reach the gradient. Without
    # an input gradient (features: what training does) the input layer's output gradient
    # is made transposed for its weight gradient: the same gradients on either engine.
    blocks = blocks_for(fanouts)
    assert any((np.diff(b.indptr) == 0).any() for b in blocks), "want isolated destinations"
    x = torch.randn(blocks[0].num_src, 7, dtype=torch.float32)
    runs = {}
    previous = matmul.use(matmul.Plan(engines=dict.fromkeys(matmul.OPS, engine)))
    try:
        for agg in ("torch", "native"):
            torch.manual_seed(1)
            model = GraphSAGE(7, 16, 5, len(fanouts), dropout=dropout, aggregation=agg)
            xi = x.clone().requires_grad_(input_grad)
            out = model(blocks, xi)
            (out ** 2).sum().backward()
            runs[agg] = (out.detach(), xi.grad, [p.grad for p in model.parameters()])
    finally:
        matmul.use(previous)
    (o1, g1, p1), (o2, g2, p2) = runs["torch"], runs["native"]
    assert o1.abs().sum() > 0
    torch.testing.assert_close(o2, o1, rtol=1e-5, atol=1e-6)
    if input_grad:
        assert g1.abs().sum() > 0
        torch.testing.assert_close(g2, g1, rtol=1e-5, atol=1e-6)
    else:
        assert g1 is None and g2 is None
    for a, b in zip(p2, p1):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_native_eval_mode_ignores_dropout():
    blocks = blocks_for([4, 3])
    x = torch.randn(blocks[0].num_src, 7)
    torch.manual_seed(1)
    native = GraphSAGE(7, 16, 5, 2, dropout=0.5, aggregation="native").eval()
    reference = GraphSAGE(7, 16, 5, 2, dropout=0.5, aggregation="torch").eval()
    reference.load_state_dict(native.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(native(blocks, x), reference(blocks, x), rtol=1e-5, atol=1e-6)


def test_empty_batch_runs():
    blocks = [Block(np.zeros(1, np.int64), np.zeros(0, np.int32), 0, 0) for _ in range(2)]
    model = GraphSAGE(4, 8, 3, 2)
    assert model(blocks, torch.zeros(0, 4)).shape == (0, 3)


def _keep_bits(seed: int, p: float, k: np.ndarray) -> np.ndarray:
    """native/activation.cpp's keep rule, written out in numpy's uint64."""
    def lowbias32(x):
        x = x & 0xFFFFFFFF
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    k = k.astype(np.uint64)
    high = (seed >> 32) ^ (((k >> 32) * 0x9E3779B9) & 0xFFFFFFFF)
    return (lowbias32(lowbias32((k & 0xFFFFFFFF) ^ (seed & 0xFFFFFFFF)) + high) >> 8) >= int(p * 16777216.0 + 0.5)


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_dropout_keep_bits_follow_the_documented_rule(p):
    # the masks are part of the training contract (recorded losses depend on them); the
    # kernels compute them in vectorised 32-bit lanes, this is the rule in plain uint64
    from fastsample.native import lib

    seed = 0x1234_5678_9ABC_DEF1
    mask = np.empty((1001, 333), np.float32)
    lib.dropout_mask(mask, p, seed)
    keep = _keep_bits(seed, p, np.arange(mask.size)).reshape(mask.shape)
    np.testing.assert_array_equal(mask, np.where(keep, np.float32(1 / (1 - p)), np.float32(0)))
    assert abs(keep.mean() - (1 - p)) < 0.01
    # the torch form (GPUs; CPUs without the native module) draws the same bits
    from fastsample.nn.sage import keep_mask

    np.testing.assert_array_equal(keep_mask(torch.from_numpy(mask), p, seed).numpy(), mask)
    x = np.random.default_rng(0).standard_normal((257, 129)).astype(np.float32)
    bias = np.random.default_rng(1).standard_normal(129).astype(np.float32)
    out, kept = x.copy(), np.empty((257, 17), np.uint8)
    lib.bias_relu_dropout(out, bias, p, seed, kept)
    keep = _keep_bits(seed, p, np.arange(x.size)).reshape(x.shape)
    np.testing.assert_array_equal(out, np.maximum(x + bias, 0) * np.where(keep, np.float32(1 / (1 - p)), np.float32(0)))
    # the bits the backward reads: one per output, set where it is kept (> 0), 7 padding bits zero
    np.testing.assert_array_equal(kept, packed_kept(out))
    with pytest.raises(ValueError, match="kept"):
        lib.bias_relu_dropout(x.copy(), bias, p, seed, np.empty((257, 16), np.uint8))


def packed_kept(y):
    """y > 0, one bit each (native/kept_bits.hpp's layout: bit f % 8 of byte f / 8 per row)."""
    return np.packbits(np.asarray(y) > 0, axis=1, bitorder="little")


@pytest.mark.skipif(not native_built(), reason="the native module is not built")
def test_backward_column_sums_are_the_gradients_sums_on_any_thread_count():
    # The lower layer's bias gradient comes from the upper layer's backward pass (in
    # double, in blocks of rows): it must be grad_h.sum(0), the same on 1 and 2 threads.
    from fastsample.native import lib
    from fastsample.sampling import get_num_threads, set_num_threads

    rng = np.random.default_rng(3)
    n = 3000  # several blocks of rows
    graph = edges_to_csc(rng.integers(0, n, 40000), rng.integers(0, n, 40000), n, symmetric=True)
    block = Block.from_mfg(sample(graph, rng.permutation(n)[:700], [6], kernel="numba")[0])
    width = 24
    g = torch.randn(block.num_dst, 2 * width)  # [grad_self | grad_agg]
    kept = torch.from_numpy(packed_kept(rng.random((block.num_src, width)) > 0.4))
    sums, before = [], get_num_threads()
    for threads in (1, 2):
        set_num_threads(threads)
        grad_h, col_sum = torch.empty(block.num_src, width), torch.empty(width)
        lib.mean_aggregate_backward(block.indptr, block.indices, g[:, width:], g[:, :width], kept, 2.0, grad_h,
                                    col_sum)
        torch.testing.assert_close(col_sum, grad_h.double().sum(0).float(), rtol=1e-6, atol=1e-6)
        sums.append(col_sum)
    set_num_threads(before)
    assert block.num_src > 2 * 256 and torch.equal(sums[0], sums[1])


@pytest.mark.parametrize("num_src,width", [(3001, 64), (2999, 33), (7, 5)])
def test_gradients_through_kept_bits_and_written_transposed_are_the_masks(num_src, width):
    # The backward of ReLU + dropout reads one kept bit per output (native/kept_bits.hpp), and
    # a gradient written transposed is copied out in runs with streaming stores on whole cache
    # lines, plain ones at the ends (native/transpose.hpp): at any width (not a multiple of 8)
    # and alignment (num_src not a multiple of 16), on 2 threads, every value must be the plain
    # mask-times-scale product's.
    from fastsample.native import lib
    from fastsample.sampling import get_num_threads, set_num_threads

    rng = np.random.default_rng(num_src)
    num_dst, fanout, scale = max(1, num_src // 4), 5, 1.25
    indptr = torch.arange(0, num_dst * fanout + 1, fanout, dtype=torch.int64)
    indices = torch.from_numpy(rng.integers(0, num_src, num_dst * fanout).astype(np.int32))
    g = torch.randn(num_dst, 2 * width)
    y = torch.relu(torch.randn(num_src, width))  # a ReLU/dropout output
    kept, mask = torch.from_numpy(packed_kept(y)), (y > 0).float() * scale
    before = get_num_threads()
    set_num_threads(2)
    try:
        rows, cols = torch.empty(num_src, width), torch.empty(width, num_src)
        sums = torch.empty(width), torch.empty(width)
        lib.mean_aggregate_backward(indptr, indices, g[:, width:], g[:, :width], None, 1.0, rows, None, False)
        expected = rows * mask
        lib.mean_aggregate_backward(indptr, indices, g[:, width:], g[:, :width], kept, scale, rows, sums[0], False)
        lib.mean_aggregate_backward(indptr, indices, g[:, width:], g[:, :width], kept, scale, cols, sums[1], True)
        assert torch.equal(rows, expected) and torch.equal(cols.t(), rows) and torch.equal(*sums)
        # ReLU/dropout's backward: into rows, columns, or both at once, with the column sums
        up = torch.randn(num_src, width)
        rows, cols = torch.empty(num_src, width), torch.empty(width, num_src)
        lib.relu_dropout_backward(up, kept, scale, rows)
        lib.relu_dropout_backward(up, kept, scale, None, cols, sums[0])
        assert torch.equal(rows, up * mask) and torch.equal(cols.t(), rows) and rows.abs().sum() > 0
        both = torch.empty(num_src, width), torch.empty(width, num_src)
        lib.relu_dropout_backward(up, kept, scale, *both, sums[1])
        assert torch.equal(both[0], rows) and torch.equal(both[1], cols) and torch.equal(*sums)
        torch.testing.assert_close(sums[0], rows.double().sum(0).float(), rtol=1e-6, atol=1e-6)
        with pytest.raises(ValueError, match="at least one"):
            lib.relu_dropout_backward(up, kept, scale, None)
    finally:
        set_num_threads(before)
