"""The roofline (fastsample/roofline.py): the products' FLOPs counted from the MFGs, and their floor."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fastsample import matmul
from fastsample.model import GraphSAGE
from fastsample.roofline import Roofline
from helpers import native_built
from test_model import blocks_for


@pytest.mark.skipif(not native_built(), reason="the native layers are what the count describes")
@pytest.mark.parametrize("fanouts", [[5, 3], [4, 3, 2], [-1, 3]])
def test_the_counted_flops_are_the_products_the_step_ran(fanouts):
    # on BLAS every product is one aten mm/addmm, whose FLOPs torch's profiler counts itself
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
