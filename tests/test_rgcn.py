"""The R-GCN's native step (fastsample/nn/rgcn.py): each mean written into its columns of the
product's input, input gradients only for the spans that take one, ReLU and dropout in one
pass; the same bits as the plain composition of torch ops it replaces."""

import numpy as np
import pytest
import torch

from fastsample.nn import matmul, rgcn
from fastsample.nn.block import Block
from fastsample.nn.rgcn import RGCN
from fastsample.nn.sage import dropout
from fastsample.rows import LearnableRows, RowTable
from fastsample.sampling import MFG

from helpers import native_built

needs_native = pytest.mark.skipif(not native_built(), reason="native module not built")

NODE_TYPES = ["paper", "author", "venue"]
EDGE_TYPES = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("venue", "hosts", "paper"),
              ("paper", "written_by", "author")]
WIDTHS = {"paper": 12, "author": 10, "venue": 6}  # venue: a learnable embedding's


def typed_block(rng, src_types: np.ndarray, num_dst: int, edge_types=EDGE_TYPES) -> Block:
    """A random typed block over sources of ``src_types`` (destinations first), a destination's
    edges in relation order, every edge of a relation into the destination's type."""
    indptr, indices, etypes = [0], [], []
    for d in range(num_dst):
        into = [r for r, e in enumerate(edge_types) if e[2] == NODE_TYPES[src_types[d]]]
        for r in into:
            of = np.flatnonzero(src_types == NODE_TYPES.index(edge_types[r][0]))
            picked = rng.choice(of, size=min(int(rng.integers(0, 4)), len(of)), replace=False)
            indices += picked.tolist()
            etypes += [r] * len(picked)
        indptr.append(len(indices))
    mfg = MFG(np.array(indptr, np.int64), np.array(indices, np.int32), np.arange(len(src_types), dtype=np.int64),
              num_dst, np.array(etypes, np.uint8))
    return Block.from_mfg(mfg, "cpu", src_types, NODE_TYPES, edge_types)


def two_blocks(rng, edge_types=EDGE_TYPES):
    top = np.array([0] * 8 + [1] * 12 + [2] * 3 + [0] * 9, np.int8)  # the output block's sources
    below = np.concatenate([top, rng.integers(0, 3, 60).astype(np.int8)])
    return [typed_block(rng, below, len(top), edge_types), typed_block(rng, top, 8, edge_types)]


def plain(model: RGCN, blocks, x: dict, mean) -> torch.Tensor:
    """The module doc's R-GCN in plain torch: per destination type, cat([h, means]) times the
    relations' weights side by side, ReLU, dropout; ``mean(block, h)`` makes the means."""
    h = x
    for i, block in enumerate(blocks):
        out = {}
        for t in model._computed(i):
            into = [(r, e) for r, e in enumerate(block.edge_types) if e[2] == t]
            convs = [model.layers[i]["__".join(e)] for _, e in into]
            if not into:  # nothing flows into the type (venues here)
                out[t] = torch.zeros(block.num_dst_dict[t], 5 if i == len(blocks) - 1 else 16)
                continue
            z = torch.cat([h[t][:block.num_dst_dict[t]]] + [mean(block.relation_block(r), h[e[0]]) for r, e in into],
                          dim=1)
            w = torch.cat([sum(c.self_lin.weight for c in convs)] + [c.neigh_lin.weight for c in convs], dim=1)
            out[t] = torch.nn.functional.linear(z, w, sum(c.self_lin.bias for c in convs))
        h = out if i == len(blocks) - 1 else {t: dropout(torch.relu(v), model.dropout) for t, v in out.items()}
    return h[model.target_type]


@pytest.fixture(params=["blas"] + (["onednn"] if matmul.onednn_available() else []))
def engine(request):
    """Each product engine in turn, whatever an earlier test in this process chose: on oneDNN
    the ReLU's backward also makes the weight gradient's g^T (sage._ReluDropout's link)."""
    previous = matmul.use(matmul.Plan(engines=dict.fromkeys(matmul.OPS, request.param)))
    yield request.param
    matmul.use(previous)


@needs_native
@pytest.mark.parametrize("means", ["native", "sparse"])
def test_the_native_step_equals_the_plain_one(means, engine):
    # with the same means (rgcn.mean: the native kernels), bit for bit; with the sparse
    # products' means (the reference Block.mean), to rounding; on each product engine
    rng = np.random.default_rng(0)
    blocks = two_blocks(rng)
    num = blocks[0].num_src_dict
    feats = {t: torch.from_numpy(rng.standard_normal((num[t], WIDTHS[t])).astype(np.float32)) for t in NODE_TYPES}
    torch.manual_seed(0)
    model = RGCN(WIDTHS, 16, 5, 2, EDGE_TYPES, "paper", dropout=0.5)
    results = []
    mean = rgcn.mean if means == "native" else Block.mean
    for forward in (model, lambda b, x: plain(model, b, x, mean)):
        x = {t: v.clone().requires_grad_(t == "venue") for t, v in feats.items()}  # venue: learnable
        model.zero_grad()
        torch.manual_seed(7)  # the same dropout draws
        out = forward(blocks, x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None],
                        x["venue"].grad.clone()))
    (out, grads, venue), (want, want_grads, want_venue) = results
    close = lambda a, b: torch.allclose(a, b, rtol=1e-5, atol=1e-6)  # noqa: E731
    # (bit for bit on BLAS, whose forward is linear()'s addmm; oneDNN's rounds its own way)
    assert (torch.equal if means == "native" and engine == "blas" else close)(out, want)
    # the weight gradients to rounding: the product plan takes g^T z as (z^T g)^T (faster in
    # MKL, fastsample/nn/matmul.py), linear()'s autograd as g^T z
    assert len(grads) == len(want_grads) and all(close(a, b) for a, b in zip(grads, want_grads))
    # the embedding's gradient to rounding either way: its span's product g @ w[:, span] is
    # narrower than linear()'s g @ w, and BLAS may order a narrower product's sums otherwise
    assert torch.allclose(venue, want_venue, rtol=1e-5, atol=1e-7) and venue.abs().sum() > 0


@needs_native
@pytest.mark.parametrize("learnable", [True, False])
def test_the_relus_backward_made_in_the_layer_above_gives_its_bits(engine, learnable, monkeypatch):
    # the ReLU/dropout's backward made in the last pass of the layer above's mean backward
    # (rgcn._activation), where sage._ReluDropout made it in a pass of its own: the same
    # outputs, weight and bias gradients and embedding gradient, bit for bit. A second
    # relation from paper into paper makes that pass add to the first's; without a learnable
    # venue every product below is weight-only (its gradient made transposed, alone when one
    # pass makes it); on oneDNN the weight gradient also reads the transpose beside the rows
    edge_types = EDGE_TYPES + [("paper", "cited_by", "paper")]
    rng = np.random.default_rng(4)
    blocks = two_blocks(rng, edge_types)
    num = blocks[0].num_src_dict
    feats = {t: torch.from_numpy(rng.standard_normal((num[t], WIDTHS[t])).astype(np.float32)) for t in NODE_TYPES}
    torch.manual_seed(0)
    model = RGCN(WIDTHS, 16, 5, 2, edge_types, "paper", dropout=0.5)
    made, activation = [], rgcn._activation

    def counted(*args):
        act = activation(*args)
        made.append(act is not None)
        return act

    results = []
    for fused in (counted, lambda *args: None):
        monkeypatch.setattr(rgcn, "_activation", fused)
        x = {t: v.clone().requires_grad_(learnable and t == "venue") for t, v in feats.items()}
        model.zero_grad()
        torch.manual_seed(7)
        out = model(blocks, x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None],
                        x["venue"].grad))
    assert made.count(True) == 2  # paper's (two passes) and author's (one)
    (out, grads, venue), (want, want_grads, want_venue) = results
    assert torch.equal(out, want) and len(grads) == len(want_grads)
    assert all(torch.equal(a, b) for a, b in zip(grads, want_grads))
    assert (venue is None and want_venue is None) if not learnable else torch.equal(venue, want_venue)


@needs_native
def test_only_the_spans_that_take_a_gradient_get_an_input_gradient():
    rng = np.random.default_rng(1)
    blocks = two_blocks(rng)
    num = blocks[0].num_src_dict
    x = {t: torch.randn(num[t], WIDTHS[t], requires_grad=t == "venue") for t in NODE_TYPES}

    class Batch:  # what products() reads
        inputs = x

    model = RGCN(WIDTHS, 16, 5, 2, EDGE_TYPES, "paper")
    listed = {(layer, op): (m, k, n) for layer, op, m, k, n in model.products(blocks, Batch)}
    n_paper = blocks[0].num_dst_dict["paper"]
    # layer 0 into papers: [paper 12 | cites 12 | writes 10 | hosts 6]; only the venues' 6 learn
    assert listed["0:paper", "forward"] == (n_paper, 40, 16)
    assert listed["0:paper", "input_grad"] == (n_paper, 6, 16)
    assert ("0:author", "input_grad") not in listed  # [author | written_by paper]: features only
    # above the input layer: all of z but the venues' span (nothing flows into venues: zeros)
    assert listed["1:paper", "input_grad"] == (8, 16 * 3, 5)

    seen = []
    real = matmul.Plan.input_grad

    def spy(self, g, w):
        seen.append((g.shape[0], w.shape[1]))  # (rows, the input-gradient columns: the spans' width)
        return real(self, g, w)

    matmul.Plan.input_grad = spy
    try:
        model(blocks, x).sum().backward()
    finally:
        matmul.Plan.input_grad = real
    # layer 1: one product for its adjacent spans that take a gradient, [paper | cites |
    # writes] (the venues' layer-0 rows are zeros, nothing flows into venues, and take none);
    # layer 0: the venues' means only (one per type they feed: papers here), none for features
    assert sorted(seen) == sorted([(8, 16 * 3), (n_paper, 6)])
    # and the roofline's listing (products()) counts exactly the products that ran
    assert sorted(seen) == sorted((m, k) for (_, op), (m, k, _) in listed.items() if op == "input_grad")


@needs_native
def test_a_mean_is_written_into_a_column_block():
    from fastsample.native import lib

    rng = np.random.default_rng(2)
    h = rng.standard_normal((50, 8)).astype(np.float32)
    deg = rng.integers(0, 5, 20)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, 50, int(indptr[-1])).astype(np.int32)
    want = np.empty((20, 8), np.float32)
    lib.mean_aggregate(indptr, indices, h, want)
    wide = torch.full((20, 21), float("nan"))
    lib.mean_aggregate(indptr, indices, h, wide[:, 5:13])
    assert torch.equal(wide[:, 5:13], torch.from_numpy(want))
    assert wide[:, :5].isnan().all() and wide[:, 13:].isnan().all()  # nothing outside its columns
    overlapping = torch.empty(200).as_strided((20, 8), (4, 1))
    with pytest.raises(ValueError, match="out: rows overlap"):
        lib.mean_aggregate(indptr, indices, h, overlapping)


@needs_native
def test_the_mean_backward_adds_into_a_buffer_and_its_fallback_agrees(monkeypatch):
    # a source type read by several relations gets its gradient in one buffer: the first
    # relation writes (with the type's own rows' gradient), the others add; the index_add_
    # fallback (no native module, or a GPU) gives the same values to rounding
    from fastsample.native import lib

    rng = np.random.default_rng(3)
    num_src, width = 40, 8

    def relation(num_dst):
        deg = rng.integers(0, 5, num_dst)
        indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        indices = rng.integers(0, num_src, int(indptr[-1])).astype(np.int32)
        return Block(indptr, indices, num_dst, num_src, "cpu")

    rels = [relation(15), relation(25)]
    wide = [torch.randn(r.num_dst, 3 * width) for r in rels]  # each relation's span: columns [width, 2 width)
    g_own = torch.randn(15, width)

    def dense(r):  # A^T diag(1/degree) as a dense matrix
        a = torch.zeros(r.num_dst, num_src)
        for i in range(r.num_dst):
            for u in r.indices[r.indptr[i]:r.indptr[i + 1]]:
                a[i, u] += 1.0 / (r.indptr[i + 1] - r.indptr[i])
        return a.t()

    want = dense(rels[0]) @ wide[0][:, width:2 * width] + dense(rels[1]) @ wide[1][:, width:2 * width]
    want[:15] += g_own
    got = {}
    for name in ("native", "fallback"):
        if name == "fallback":
            monkeypatch.setattr(rgcn, "_native", None)
        grad = torch.full((num_src, width), float("nan"))  # whatever it held: the first call writes
        rgcn._mean_backward(rels[0], wide[0][:, width:2 * width], grad, g_self=g_own)
        rgcn._mean_backward(rels[1], wide[1][:, width:2 * width], grad, accumulate=True)
        got[name] = grad
    assert torch.allclose(got["native"], want, rtol=1e-5, atol=1e-6)
    assert torch.allclose(got["fallback"], want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="accumulate: not with transposed"):
        lib.mean_aggregate_backward(rels[0].indptr, rels[0].indices, wide[0][:, :width], None, None, 1.0,
                                    torch.empty(width, num_src), None, True, True)


@needs_native
def test_learnable_rows_read_in_place_take_the_gradient_a_leaf_would(engine):
    # the loader hands an embedding's rows as LearnableRows (no copy into a leaf each step):
    # the same outputs, weight gradients and embedding gradient, bit for bit, as the leaf's
    rng = np.random.default_rng(2)
    blocks = two_blocks(rng)
    num = blocks[0].num_src_dict
    feats = {t: torch.from_numpy(rng.standard_normal((num[t], WIDTHS[t])).astype(np.float32)) for t in NODE_TYPES}
    # the venues' rows scattered through a larger table, as a gather leaves them
    table = rng.standard_normal((3 * num["venue"] + 5, WIDTHS["venue"])).astype(np.float32)
    at = rng.permutation(len(table))[:num["venue"]]
    feats["venue"] = torch.from_numpy(table[at].copy())
    rows = LearnableRows(RowTable(np.float32, WIDTHS["venue"], (table,), None, at * table.strides[0]))
    torch.manual_seed(0)
    model = RGCN(WIDTHS, 16, 5, 2, EDGE_TYPES, "paper", dropout=0.5)
    results = []
    for venue in (feats["venue"].clone().requires_grad_(), rows):
        x = {**feats, "venue": venue}
        model.zero_grad()
        torch.manual_seed(7)
        out = model(blocks, x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None],
                        venue.grad))
    (out, grads, venue), (want, want_grads, want_venue) = results[1], results[0]
    assert torch.equal(out, want) and len(grads) == len(want_grads)
    assert all(torch.equal(a, b) for a, b in zip(grads, want_grads))
    assert torch.equal(venue, want_venue) and venue.abs().sum() > 0
    model.eval()
    with torch.no_grad():  # evaluation reads them in place too, and leaves no gradient
        rows.grad = None
        assert torch.equal(model(blocks, {**feats, "venue": rows}), model(blocks, {**feats, "venue": feats["venue"]}))
        assert rows.grad is None


@needs_native
def test_bf16_products_match_fp32_and_a_type_without_rows_takes_none():
    # with bf16 products each z and g is converted once and read by every product in bf16: the
    # step stays within bf16's rounding of fp32's (outputs 1 %, gradients 10 %, norm-wise, the
    # bounds of tests/test_matmul.py); a type with no destinations this step (authors here)
    # takes the empty product's path, whatever dtype its operands were made
    rng = np.random.default_rng(3)
    top = np.array([0] * 8 + [2] * 3 + [0] * 9, np.int8)  # no authors among the input block's destinations
    below = np.concatenate([top, rng.integers(0, 3, 60).astype(np.int8)])
    blocks = [typed_block(rng, below, len(top)), typed_block(rng, top, 8)]
    assert blocks[0].num_dst_dict["author"] == 0
    num = blocks[0].num_src_dict
    feats = {t: torch.from_numpy(rng.standard_normal((num[t], WIDTHS[t])).astype(np.float32)) for t in NODE_TYPES}
    torch.manual_seed(0)
    model = RGCN(WIDTHS, 16, 5, 2, EDGE_TYPES, "paper", dropout=0.5)
    results = []
    for bf16 in (False, True):
        previous = matmul.use(matmul.Plan(bf16=bf16, precision="bf16" if bf16 else "fp32"))
        try:
            x = {t: v.clone().requires_grad_(t == "venue") for t, v in feats.items()}
            model.zero_grad()
            torch.manual_seed(7)
            out = model(blocks, x)
            out.square().sum().backward()
        finally:
            matmul.use(previous)
        results.append([out.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]
                       + [x["venue"].grad])
    (out32, *grads32), (out16, *grads16) = results
    assert (out16 - out32).norm() <= 0.01 * out32.norm()
    assert len(grads16) == len(grads32)
    assert all((a - b).norm() <= 0.1 * b.norm() for a, b in zip(grads16, grads32))
