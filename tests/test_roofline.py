"""The roofline (fastsample/nn/roofline.py): the products' FLOPs counted from the MFGs, and their floor."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fastsample.nn import matmul
from fastsample.nn.sage import GraphSAGE
from fastsample.nn.roofline import Roofline
from helpers import native_built
from test_model import blocks_for


@pytest.mark.skipif(not native_built(), reason="the native layers are what the count describes")
@pytest.mark.parametrize("fanouts", [[5, 3], [4, 3, 2], [-1, 3]])
def test_the_counted_flops_are_the_products_the_step_ran(fanouts, monkeypatch):
    # on BLAS every product is one aten mm/addmm, whose FLOPs torch's profiler counts itself
    monkeypatch.setattr(matmul, "SPREAD", 10.0)  # any timing steady: the floor's arithmetic is what is checked
    blocks = blocks_for(fanouts)
    x = torch.randn(blocks[0].num_src, 7)
    model = GraphSAGE(7, 24, 5, len(fanouts), dropout=0.5)
    previous = matmul.use(matmul.Plan())
    try:
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            model(blocks, x).square().sum().backward()
    finally:
        matmul.use(previous)
    ran = sum(e.flops for e in prof.key_averages() if e.key in ("aten::mm", "aten::addmm"))
    roofline = Roofline(model)
    roofline.count(blocks)
    roofline.count(blocks)  # two steps
    flop, floor = roofline.epoch()
    assert flop == 2 * ran > 0
    # the floor: those FLOPs at the speed measured on each layer's and op's own shape
    assert floor == pytest.approx(sum(2 * 2.0 * m * k * n / (roofline.gflops[layer, op] * 1e9)
                                      for layer, op, m, k, n in model.products(blocks)))
    assert roofline.epoch() == (None, None)  # counted anew each epoch


def test_a_model_that_does_not_list_its_products_has_no_floor():
    roofline = Roofline(torch.nn.Linear(3, 4))
    roofline.count(blocks_for([3]))
    assert roofline.epoch() == (None, None)


def _profiled_flops(run) -> float:
    """The FLOPs of every aten mm/addmm that ``run`` does (forward and backward), as torch's profiler counts them."""
    previous = matmul.use(matmul.Plan())
    try:
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            run()
    finally:
        matmul.use(previous)
    return sum(e.flops for e in prof.key_averages() if e.key in ("aten::mm", "aten::addmm"))


@pytest.fixture(scope="module")
def typed_batch(tmp_path_factory):
    from fastsample.data.synth_typed import TYPED_PRESETS, write_typed_synthetic
    from fastsample.distributed.embedding import ShardedEmbeddings
    from fastsample.loading import NodeLoader

    root = tmp_path_factory.mktemp("roofline-typed")
    write_typed_synthetic(root / "h", TYPED_PRESETS["hetero-tiny"], progress=False)
    probe = NodeLoader(root / "h", [4, 3], 64, seed=1)
    featureless = [t for t, f in probe.part.features.items() if f is None]
    tables = ShardedEmbeddings(probe.part.type_runs, 0, 1, list(probe.part.node_type_names), featureless, 8, 0.01, 0)
    loader = NodeLoader(probe.part, [4, 3], 64, seed=1, embeddings=tables)
    return loader, next(iter(loader))


@pytest.mark.parametrize("target", ["own", None])
def test_the_rgcns_counted_flops_are_the_products_its_step_ran(typed_batch, target):
    # per relation W_self and W_neigh; input gradients above the input layer and for the
    # learnable embeddings' rows (a featureless type), none for features
    from fastsample.nn.rgcn import RGCN

    loader, batch = typed_batch
    part = loader.part
    in_dims = {t: 8 if f is None else f.shape[1] for t, f in part.features.items()}
    model = RGCN(in_dims, 16, 5, 2, [tuple(e) for e in part.meta["edge_types"]],
                 part.target_type if target == "own" else None, dropout=0.0)
    assert any(v is not None and v.requires_grad for v in batch.x.values())
    ran = _profiled_flops(lambda: model(batch.blocks, batch.x).square().sum().backward())
    roofline = Roofline(model)
    roofline.count(batch.blocks, batch)
    flop, _ = roofline.epoch()
    assert flop == ran > 0


@pytest.mark.skipif(not native_built(), reason="the native layers are what the count describes")
@pytest.mark.parametrize("scorer", ["dot", "distmult", "mlp"])
def test_a_link_models_counted_flops_are_its_encoders_and_scorers_products(scorer):
    from fastsample.nn.link import LinkModel, bce_loss

    blocks = blocks_for([4, 3])
    x = torch.randn(blocks[0].num_src, 7)
    model = LinkModel(GraphSAGE(7, 12, 12, 2, dropout=0.0), 12, scorer)
    B, k, n = 20, 3, blocks[-1].num_dst
    rng = torch.Generator().manual_seed(0)
    batch = _Pairs(torch.randint(0, n, (B,), generator=rng), torch.randint(0, n, (B,), generator=rng),
                   torch.randint(0, n, (B, k), generator=rng))

    def step():
        h = model(blocks, x)
        bce_loss(model.score(h[batch.src], h[batch.dst]), model.score(h[batch.src, None], h[batch.neg])).backward()

    ran = _profiled_flops(step)
    roofline = Roofline(model)
    roofline.count(blocks, batch)
    flop, _ = roofline.epoch()
    assert flop == ran > 0


class _Pairs:
    """What a link model's products read of a batch: its positives and negatives."""

    def __init__(self, src, dst, neg):
        self.src, self.dst, self.neg = src, dst, neg

    def __len__(self):
        return len(self.src)
