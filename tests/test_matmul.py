"""The matmul engines and reduced precision of the built-in GraphSAGE (fastsample/nn/matmul.py,
fastsample/bf16.py): each fp32 engine matches the plain-PyTorch reference within 1e-5,
bf16 products within the documented tolerance, 16-bit features are read exactly."""

import itertools
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from fastsample import bf16
from fastsample.nn import matmul
from fastsample.nn.sage import GraphSAGE, aggregate
from test_model import blocks_for
from helpers import native_built

pytestmark = pytest.mark.skipif(not native_built(), reason="fastsample._native not built")
ENGINES = ["blas", pytest.param("onednn", marks=pytest.mark.skipif(not matmul.onednn_available(),
                                                                    reason="torch without oneDNN"))]


@pytest.fixture
def plan():
    """Set a plan for the test; the process's plan is restored after it."""
    previous = matmul.current()
    yield matmul.use
    matmul.use(previous)


def run(blocks, x, aggregation, dropout=0.0):
    torch.manual_seed(1)
    model = GraphSAGE(x.shape[1], 16, 5, len(blocks), dropout=dropout, aggregation=aggregation)
    xi = x.clone().requires_grad_(x.dtype == torch.float32)
    out = model(blocks, xi)
    (out ** 2).sum().backward()
    return out.detach(), xi.grad, [p.grad for p in model.parameters()]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_fp32_engines_match_the_reference(plan, engine, dropout):
    blocks = blocks_for([4, 3, 2])
    x = torch.randn(blocks[0].num_src, 7)
    want = run(blocks, x, "torch", dropout)
    plan(matmul.Plan(dict.fromkeys(matmul.OPS, engine)))
    got = run(blocks, x, "native", dropout)
    assert want[0].abs().sum() > 0 and want[1].abs().sum() > 0
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-6)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_bf16_products_within_their_tolerance(plan):
    # bfloat16 keeps 8 significant bits: each operand (and each bf16 product) is off by up
    # to 2^-9 relative. Outputs stay within 1 % (norm-wise); gradients, which pass through
    # one more rounded product per layer and cancel, within 10 % (fastsample/nn/matmul.py)
    blocks = blocks_for([4, 3, 2])
    x = torch.randn(blocks[0].num_src, 64)
    want = run(blocks, x, "torch")
    plan(matmul.Plan(bf16=True, precision="bf16"))
    got = run(blocks, x, "native")
    assert 0 < rel(got[0], want[0]) < 1e-2  # > 0: the products did run in bf16
    errors = [rel(a, b) for a, b in zip(got[2], want[2])]
    assert max(errors) < 0.1, errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_features_are_read_as_stored(dtype):
    blocks = blocks_for([4, 3])
    x16 = torch.randn(blocks[0].num_src, 7).to(dtype)
    want = run(blocks, x16.float(), "torch")
    got = run(blocks, x16, "native")
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    model = GraphSAGE(7, 16, 5, 2).eval()  # and layer by layer (exact inference reads them so)
    with torch.no_grad():
        torch.testing.assert_close(model.layer(0, blocks[0], x16), model.layer(0, blocks[0], x16.float()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_16_bit_value_widens_exactly(dtype):
    # all 65,536 bit patterns (subnormals, signed zeros, infinities) through the native
    # aggregation's loader, one row per destination, each its own single source
    from fastsample.nn.block import Block

    bits = torch.arange(65536, dtype=torch.int32).to(torch.uint16).reshape(256, 256)
    h = bits.view(dtype)
    block = Block(np.arange(257, dtype=np.int64), np.arange(256, dtype=np.int32), 256, 256)
    z = torch.empty(256, 512)
    aggregate(block, h, z)
    want = h.float()
    nan = want.isnan()
    assert torch.equal(z[:, :256].isnan(), nan) and torch.equal(z[:, 256:].isnan(), nan)
    assert torch.equal(z[:, :256][~nan], want[~nan]) and torch.equal(z[:, 256:][~nan], want[~nan])
    assert torch.equal(torch.signbit(z[:, :256][~nan]), torch.signbit(want[~nan]))


def test_narrow_rounds_as_torch_and_widens_back():
    a = np.random.default_rng(0).standard_normal((70_000, 3)).astype(np.float32)  # > one chunk
    bits = bf16.narrow(a)
    assert bits.dtype == bf16.BITS
    assert torch.equal(bf16.to_tensor(bits), torch.from_numpy(a).to(torch.bfloat16))
    np.testing.assert_array_equal(bf16.widen(bits), torch.from_numpy(a).to(torch.bfloat16).float().numpy())


def test_the_choice_is_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shape = (256, 64, 32)
    monkeypatch.setattr(matmul, "SPREAD", math.inf)  # steady by decree: this test is about the cache
    monkeypatch.setattr(matmul, "RECHECK_MARGIN", math.inf)  # and a kept plan holds (load beside the test
    # failed the one-round re-check of a near-tie oneDNN choice: test_a_kept_steady_plan_... covers it)
    first, source = matmul.plan_for("auto", "fp32", shape)
    assert source == "measured" and set(first.engines) == set(matmul.OPS) and first.measured
    again, source = matmul.plan_for("auto", "fp32", shape)
    assert source == "cached, re-checked" and again == first
    entry = json.loads(matmul.cache_file().read_text())
    assert len(entry) == 1 and f"{shape[0]}x{shape[1]}x{shape[2]}" in next(iter(entry))
    matmul.cache_file().write_text("{half a file")  # unreadable: measured afresh, then rewritten
    assert matmul.plan_for("auto", "fp32", shape)[1] == "measured"
    assert matmul.plan_for("auto", "fp32", shape)[1] == "cached, re-checked"
    assert matmul.plan_for("blas", "fp32", shape) == (matmul.Plan(), "set")
    assert matmul.plan_for("blas", "bf16", shape)[0].bf16  # pinned: bf16 products, whether they pay or not


def slowed(f, seconds):
    def slow(*args):
        time.sleep(seconds)
        return f(*args)
    return slow


SLOW = 0.05  # s a slowed product sleeps: clearly the slower, even on cores another job keeps busy


def counting(monkeypatch) -> list:
    """The measurements `plan_for` makes from now on (one entry per `choose` call)."""
    calls, choose = [], matmul.choose
    monkeypatch.setattr(matmul, "choose", lambda *a, **k: (calls.append(a), choose(*a, **k))[1])
    return calls


def kept(shape) -> dict:
    """The cache file's entry for ``shape`` (one per test: each has its own cache)."""
    entries = json.loads(matmul.cache_file().read_text())
    assert len(entries) == 1 and "x".join(map(str, shape)) in next(iter(entries))
    return next(iter(entries.values()))


@pytest.mark.skipif(not matmul.onednn_available(), reason="torch without oneDNN")
def test_a_plan_measured_under_load_does_not_stick(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(matmul.KEEP_UNSTEADY_ENV, raising=False)  # as outside the tests (conftest sets it)
    shape = (256, 64, 32)
    blas = matmul._IMPL["blas", "forward"]
    onednn = matmul._IMPL["onednn", "forward"]
    measured = counting(monkeypatch)
    # load growing while the forward is timed: no two of its calls agree, so the
    # measurement is unsteady and may not choose: BLAS for this run, as with no measurement
    calls = itertools.count()
    monkeypatch.setitem(matmul._IMPL, ("onednn", "forward"),
                        lambda *a: (time.sleep(0.002 * next(calls)), onednn(*a))[1])
    plan, source = matmul.plan_for("auto", "fp32", shape)
    assert not plan.steady and source.startswith("measured; unsteady") and plan.engines == dict.fromkeys(matmul.OPS, "blas")
    assert len(measured) == 1 and kept(shape)["steady"] is False  # kept, marked unsteady
    # from now on a steady measurement would choose oneDNN for the forward (BLAS's slowed)
    monkeypatch.setitem(matmul._IMPL, ("onednn", "forward"), onednn)
    monkeypatch.setitem(matmul._IMPL, ("blas", "forward"), slowed(blas, SLOW))
    # the next start-up, still under load: measured again (not read back), BLAS again
    monkeypatch.setattr(matmul, "SPREAD", 0.5)  # nothing is steady
    again, source = matmul.plan_for("auto", "fp32", shape)
    assert len(measured) == 2 and source.startswith("re-measured; unsteady")
    assert not again.steady and again.engines == dict.fromkeys(matmul.OPS, "blas") and kept(shape)["steady"] is False
    # the next, on quiet cores: measured again, and the steady measurement's choice is used and kept
    monkeypatch.setattr(matmul, "SPREAD", math.inf)  # steady by decree
    steady, source = matmul.plan_for("auto", "fp32", shape)
    assert len(measured) == 3 and source == "re-measured: the cached plan was unsteady"
    assert steady.steady and steady.engines["forward"] == "onednn"
    assert kept(shape)["steady"] is True and kept(shape)["engines"] == steady.engines
    # and it decides the runs after it, as any steady plan: read back, not measured (its
    # re-check holding: near-tie products timed on loaded cores could fail it, see below)
    monkeypatch.setattr(matmul, "RECHECK_MARGIN", math.inf)
    assert matmul.plan_for("auto", "fp32", shape) == (steady, "cached, re-checked") and len(measured) == 3


def test_a_session_that_compares_runs_bitwise_keeps_its_first_plan(tmp_path, monkeypatch):
    # tests/conftest.py: a session's runs are compared bitwise, so an unsteady first plan
    # (BLAS) is not re-measured there: a later steady measurement could choose oneDNN
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(matmul.KEEP_UNSTEADY_ENV, "1")
    shape = (256, 64, 32)
    measured = counting(monkeypatch)
    monkeypatch.setattr(matmul, "SPREAD", 0.5)  # nothing is steady
    plan, source = matmul.plan_for("auto", "fp32", shape)
    assert not plan.steady and source.startswith("measured; unsteady") and len(measured) == 1
    monkeypatch.setattr(matmul, "SPREAD", math.inf)  # steady by decree: would measure, and might choose otherwise
    monkeypatch.setitem(matmul._IMPL, ("blas", "forward"), slowed(matmul._IMPL["blas", "forward"], SLOW))
    again, source = matmul.plan_for("auto", "fp32", shape)
    assert again == plan and source == f"cached, unsteady (kept: {matmul.KEEP_UNSTEADY_ENV}=1)" and len(measured) == 1


@pytest.mark.skipif(not matmul.onednn_available(), reason="torch without oneDNN")
def test_a_kept_steady_plan_is_replaced_only_by_a_steady_measurement_that_finds_it_slower(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(matmul.KEEP_UNSTEADY_ENV, raising=False)
    shape = (256, 64, 32)
    blas = matmul._IMPL["blas", "forward"]
    onednn = matmul._IMPL["onednn", "forward"]
    # a steady load on BLAS alone while this host's plan was measured: oneDNN chosen
    monkeypatch.setitem(matmul._IMPL, ("blas", "forward"), slowed(blas, SLOW))
    monkeypatch.setattr(matmul, "SPREAD", math.inf)  # steady by decree
    plan, source = matmul.plan_for("auto", "fp32", shape)
    assert source == "measured" and plan.engines["forward"] == "onednn"
    # later, oneDNN clearly the slower: the start-up re-check fails, a steady measurement
    # chooses BLAS, and it replaces the kept plan
    monkeypatch.setitem(matmul._IMPL, ("blas", "forward"), blas)
    monkeypatch.setitem(matmul._IMPL, ("onednn", "forward"), slowed(onednn, SLOW))
    again, source = matmul.plan_for("auto", "fp32", shape)
    assert source == "re-measured: the cached plan failed its re-check" and again.engines["forward"] == "blas"
    # a re-check that fails while a fresh measurement is unsteady keeps the plan
    matmul.cache_file().write_text(json.dumps({k: {**v, "engines": plan.engines} for k, v in
                                               json.loads(matmul.cache_file().read_text()).items()}))
    monkeypatch.setattr(matmul, "SPREAD", 0.5)  # nothing is steady
    measured = counting(monkeypatch)
    kept_plan, source = matmul.plan_for("auto", "fp32", shape)
    assert kept_plan.engines == plan.engines and source.startswith("cached (a re-check disagreed") and len(measured) == 1
    assert kept(shape)["engines"] == plan.engines and kept(shape)["steady"] is True


def test_bad_names_are_refused():
    with pytest.raises(ValueError, match="backend must be one of auto, blas, onednn"):
        matmul.choose("mkl")
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        matmul.choose("auto", "fp16")


@pytest.mark.skipif(not matmul.onednn_available(), reason="torch without oneDNN")
def test_onednn_engine_does_not_grow_with_new_shapes():
    # every step's layer sizes differ; oneDNN's default per-shape caches made a rank on the
    # onednn engine grow for hundreds of steps (fastsample/nn/matmul.py bounds them)
    script = ("import torch; from fastsample.nn import matmul; torch.set_num_threads(1)\n"
              "w, z = torch.randn(256, 200), torch.randn(6000, 200)\n"
              "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20\n"
              "matmul._onednn(z[:100], w); before = rss()\n"
              "for i in range(400): matmul._onednn(z[:3000 + 7 * i], w)\n"
              "print(rss() - before)")
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout) < 100, f"grew {float(proc.stdout):.0f} MiB over 400 shapes"  # ~235 MiB unbounded


def test_products_are_timed_on_new_shapes_as_training_calls_them(monkeypatch):
    # oneDNN builds a primitive per new shape and training's rows differ every step: a
    # measurement on one fixed shape hid that cost (10-25 % of the medium model's products)
    seen = []
    blas = matmul._IMPL["blas", "weight_grad"]
    monkeypatch.setitem(matmul._IMPL, ("blas", "weight_grad"),
                        lambda g, z: (seen.append((g.shape[0], z.shape[0])), blas(g, z))[1])
    monkeypatch.setattr(matmul, "SPREAD", 10.0)
    matmul.choose("auto", "fp32", (300, 16, 8))
    assert all(a == b for a, b in seen) and len({a for a, _ in seen}) > 2 and max(a for a, _ in seen) == 300
    seen.clear()
    matmul.throughput(matmul.Plan(), "weight_grad", 300, 16, 8)
    assert len({a for a, _ in seen}) > 2


def test_the_cache_tells_cpus_of_one_name_and_flags_apart(monkeypatch):
    base = {"model name": "AMD EPYC", "flags": "avx2 fma avx512f", "cpu family": "25", "model": "17", "stepping": "1"}
    keys = set()
    for other in ({}, {"cpu family": "26", "model": "2"}, {"stepping": "2"}):
        monkeypatch.setattr(matmul, "_cpuinfo", lambda other=other: {**base, **other})
        keys.add(matmul._host_key("auto", "fp32", (4096, 200, 256), 1))
    assert len(keys) == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_a_product_over_no_rows_runs_on_every_engine(engine):
    # a node type with no destinations in a step (a typed model's product over 0 rows, its
    # gradient a transposed view): oneDNN has no primitive for it, so such products run on
    # BLAS; the weight gradient is zeros, the outputs empty
    plan = matmul.Plan(engines=dict.fromkeys(matmul.OPS, engine))
    z, w, b = torch.empty(0, 80), torch.randn(256, 80), torch.randn(256)
    g = torch.empty(256, 0).t()  # as the ReLU's backward writes a weight-only gradient
    assert plan.forward(z, w, b).shape == (0, 256)
    assert torch.equal(plan.weight_grad(g, z), torch.zeros(256, 80))
    assert plan.input_grad(g, w).shape == (0, 80)


def test_a_plan_measured_under_load_keeps_fp32_products(tmp_path, monkeypatch):
    # --precision bf16: whether bf16 products pay is timed once, on a slice; under load that
    # timing (near its margin on small shapes) would flip between two runs' fresh measurements,
    # and an unsteady plan is measured afresh at every start-up: so under load, fp32 products
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(matmul.KEEP_UNSTEADY_ENV, raising=False)
    shape = (256, 64, 32)
    for op in matmul.OPS:  # fp32 clearly the slower: bf16 products pay wherever measured
        for engine in ("blas", "onednn"):
            monkeypatch.setitem(matmul._IMPL, (engine, op), slowed(matmul._IMPL[engine, op], 0.01))
    monkeypatch.setattr(matmul, "SPREAD", 0.5)  # nothing is steady
    loaded, source = matmul.plan_for("auto", "bf16", shape)
    assert not loaded.steady and not loaded.bf16 and "fp32" in source
    monkeypatch.setattr(matmul, "SPREAD", math.inf)  # steady by decree: now measured, bf16 chosen
    quiet, source = matmul.plan_for("auto", "bf16", shape)
    assert quiet.steady and quiet.bf16 and source == "re-measured: the cached plan was unsteady"


def test_the_weight_gradient_floor_is_timed_in_both_layouts_its_producers_hand_it(monkeypatch):
    # sage.py and rgcn.py hand the weight gradient g^T whole where they can (oneDNN then skips
    # its copy of g, ~1.4x faster on the medium model's input layer); timing only g row-major
    # put the products' floor 10 % above what the products took
    layouts = []
    blas = matmul._IMPL["blas", "weight_grad"]

    def timed(g, z):
        assert g.shape[0] == z.shape[0] and g.shape[1] == 8
        layouts.append(g.t().is_contiguous())
        return blas(g, z)
    monkeypatch.setitem(matmul._IMPL, ("blas", "weight_grad"), timed)
    matmul.throughput(matmul.Plan(), "weight_grad", 300, 16, 8)
    assert set(layouts) == {True, False}


def test_a_floor_measured_under_load_is_none_that_epoch_and_measured_again(monkeypatch):
    # a floor probed while another job used the core came out above the epoch itself (0.43x)
    from types import SimpleNamespace

    from fastsample.nn import roofline

    calm = iter([False, True])
    monkeypatch.setattr(matmul, "throughput", lambda plan, op, rows, k, n: (100.0, next(calm)))
    model = SimpleNamespace(products=lambda blocks: [(0, "forward", 1000, 10, 10)])
    line = roofline.Roofline(model)
    line.count([])
    assert line.epoch() == (200_000, None)  # unsteady: no floor, nothing kept
    line.count([])
    flop, floor = line.epoch()
    assert flop == 200_000 and floor == pytest.approx(200_000 / 100e9)
