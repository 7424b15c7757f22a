"""Row tables (fastsample/rows.py): gathered rows read where they landed give the same bits
as the one matrix they replace, in the kernels and in the built-in models."""

import numpy as np
import pytest
import torch

import fastsample.rows as rows_module
from fastsample import bf16, int8
from fastsample.comm.local import LocalCommunicator
from fastsample.nn.block import Block
from fastsample.nn.rgcn import RGCN
from fastsample.nn.sage import GraphSAGE
from fastsample.rows import RowTable
from fastsample.sampling import MFG

from helpers import native_built, native_or_numpy

needs_native = pytest.mark.skipif(not native_built(), reason="native module not built")

DTYPES = {"float32": np.float32, "bfloat16": bf16.BITS, "float16": np.float16, "int8": int8.DTYPE}


def scattered(rng, n: int, width: int, dtype) -> tuple[np.ndarray, RowTable]:
    """n rows, and a table of the same rows spread over three sources as a gather leaves
    them: a shard, a cache, and a byte buffer (rows back to back) of another layout."""
    values = rng.standard_normal((n, width)).astype(np.float32)
    scale = None
    if dtype == int8.DTYPE:  # columns of different magnitudes, each its own scale
        values *= (2.0 ** rng.integers(-20, 20, width)).astype(np.float32)
        scale = int8.scales({"t": values}, LocalCommunicator())["t"]
        rows = int8.quantize(values, scale)
    else:
        rows = bf16.narrow(values) if dtype == bf16.BITS else values.astype(dtype)
    which = rng.integers(0, 3, n).astype(np.int8)
    shard = np.zeros((n + 5, width), dtype=rows.dtype)
    at_shard = rng.permutation(n + 5)[:n]
    shard[at_shard] = rows
    cache = np.zeros((n, width), dtype=rows.dtype)
    at_cache = rng.permutation(n)
    cache[at_cache] = rows
    mine = np.flatnonzero(which == 2)
    buffer = np.ascontiguousarray(rows[mine]).view(np.uint8).reshape(-1)
    offset = np.where(which == 0, at_shard, at_cache).astype(np.int64) * rows.itemsize * width
    offset[mine] = np.arange(len(mine)) * rows.itemsize * width
    return rows, RowTable(rows.dtype, width, (shard, cache, buffer), which, offset, scale=scale)


def values_of(rows: np.ndarray, table: RowTable) -> np.ndarray:
    """What a table of ``rows`` materializes: the rows, int8 ones decoded (float32)."""
    return int8.decode(rows, table.scale) if rows.dtype == int8.DTYPE else rows


def csc(rng, num_dst: int, num_src: int, max_deg: int = 6) -> tuple[np.ndarray, np.ndarray]:
    deg = rng.integers(0, max_deg + 1, num_dst)
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    return indptr, rng.integers(0, num_src, int(indptr[-1])).astype(np.int32)


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("native", [True, False])
def test_materialize_gives_the_rows_native_or_not(name, native, monkeypatch):
    native_or_numpy(rows_module, native, monkeypatch)
    rows, table = scattered(np.random.default_rng(0), 97, 13, DTYPES[name])
    assert np.array_equal(table.materialize(), values_of(rows, table))
    assert np.array_equal(table.materialize(40), values_of(rows, table)[:40])
    # no rows (a type absent from a batch): numpy gives the empty matrix zero strides
    assert table.materialize(0).shape == (0, 13)


def test_materialize_widens_to_the_out_dtype():
    rows, table = scattered(np.random.default_rng(1), 30, 8, bf16.BITS)
    wide = RowTable(table.dtype, 8, table.sources, table.which, table.offset, out_dtype=np.float32)
    assert wide.materialize().dtype == np.float32
    assert np.array_equal(wide.materialize(), bf16.widen(rows))


@pytest.mark.parametrize("native", [True, False])
def test_an_offset_outside_its_source_is_refused(native, monkeypatch):
    native_or_numpy(rows_module, native, monkeypatch)
    shard, cache = np.zeros((4, 3), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"row 1 .*outside sources\[0\]"):
        RowTable(np.float32, 3, (shard,), None, np.array([0, 4 * 12]))  # 12-byte rows: row 4 is past the end
    with pytest.raises(ValueError, match=r"row 0 .*outside sources\[0\]"):
        RowTable(np.float32, 3, (shard,), None, np.array([-12, 0]))
    RowTable(np.float32, 3, (shard,), None, np.array([0, 3 * 12]))  # the last row
    # with several sources each row is checked against its own: row 3 of the shard is inside
    # the shard, but not inside the 2-row cache
    RowTable(np.float32, 3, (shard, cache), np.array([0, 1]), np.array([3 * 12, 12]))
    with pytest.raises(ValueError, match=r"row 1 .*outside sources\[1\]"):
        RowTable(np.float32, 3, (shard, cache), np.array([0, 1]), np.array([12, 3 * 12]))
    with pytest.raises(ValueError, match="which: sources are 0..1"):
        RowTable(np.float32, 3, (shard, cache), np.array([0, 300]), np.array([0, 0]))


@needs_native
def test_a_table_is_read_in_place_only_where_every_row_is_aligned():
    shard = np.arange(24, dtype=np.float32).reshape(8, 3)
    assert RowTable(np.float32, 3, (shard,), None, np.array([12, 0, 36])).readable
    off = RowTable(np.float32, 3, (shard,), None, np.array([12, 2, 36]))  # row 1 starts mid-element
    assert not off.readable
    assert np.array_equal(off.materialize()[0], shard[1])  # still read, by bytes
    assert np.array_equal(off.materialize()[1].view(np.uint8), shard.view(np.uint8).reshape(-1)[2:14])


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("native", [True, False])
def test_copy_into_a_column_block_writes_the_rows_there_alone(name, native, monkeypatch):
    native_or_numpy(rows_module, native, monkeypatch)
    rows, table = scattered(np.random.default_rng(4), 50, 6, DTYPES[name])
    wide = torch.full((40, 11), -7.0)
    table.copy_into(wide[:, 3:9])  # rows [0, 40) into columns 3..8 of a wider matrix
    want = torch.from_numpy(bf16.widen(values_of(rows, table)[:40]))
    assert torch.equal(wide[:, 3:9], want)
    assert torch.all(wide[:, :3] == -7) and torch.all(wide[:, 9:] == -7)


def matrix_means(rows: np.ndarray, indptr: np.ndarray, indices: np.ndarray, out) -> None:
    """out = the means over the matrix ``rows`` (float32, or 16-bit bits: bf16.BITS or float16),
    [self | mean] where out is twice as wide; out float32, or bfloat16 bits (bf16.bits). int8
    rows are passed decoded (values_of): their table's means must equal those."""
    from fastsample.native import lib

    to = torch.from_numpy
    if rows.dtype == np.float32:
        lib.mean_aggregate(to(indptr), to(indices), to(rows), out)
    else:
        lib.mean_aggregate_half(to(indptr), to(indices), to(rows.view(np.uint16)), out, rows.dtype == bf16.BITS)


@needs_native
@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("with_self", [True, False])
def test_the_mean_over_a_table_equals_the_mean_over_its_matrix(name, with_self):
    rng = np.random.default_rng(2)
    rows, table = scattered(rng, 200, 24, DTYPES[name])
    indptr, indices = csc(rng, 80, 200)
    want = np.empty((80, 48 if with_self else 24), np.float32)
    matrix_means(values_of(rows, table), indptr, indices, torch.from_numpy(want))
    got = np.full_like(want, np.nan)
    table.mean_into(torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(got), with_self)
    assert np.array_equal(got, want)  # the same sums in the same order


@pytest.fixture(params=["wide", "portable"])
def sums(request):
    """The forward means' sums in AVX-512 registers ("wide", skipped on a CPU without
    AVX-512BW/VL) or in the portable loops (forced off the registers for the test)."""
    from fastsample.native import lib

    before = lib.wide_sums(request.param == "wide")
    try:
        if request.param == "wide" and not lib.wide_sums():
            pytest.skip("this CPU has no AVX-512BW/VL: the means sum in the portable loops only")
        yield request.param
    finally:
        lib.wide_sums(before)


@needs_native
@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("width", [1, 16, 24, 100, 128, 130, 300])
def test_the_mean_is_summed_in_edge_order_in_fp32_at_every_width(name, width, sums):
    # the kernels' sums (AVX-512 registers holding up to 128 columns across the edges, the last
    # register of each block masked; the portable loops, on every CPU) against float32
    # arithmetic in numpy done in the contract's order: 0, + each source's row in edge order,
    # x the column scale (int8), x 1 / degree; the self row first
    rng = np.random.default_rng(width)
    rows, table = scattered(rng, 90, width, DTYPES[name])
    indptr, indices = csc(rng, 40, 90, max_deg=20)
    read = bf16.widen(rows) if name == "bfloat16" else rows.astype(np.float32)  # int8: the integers
    want = np.empty((40, 2 * width), np.float32)
    for i in range(40):
        acc = np.zeros(width, np.float32)
        for j in range(indptr[i], indptr[i + 1]):
            acc = acc + read[indices[j]]
        own = read[i]
        if name == "int8":
            acc, own = acc * table.scale, own * table.scale
        if indptr[i + 1] > indptr[i]:
            acc = acc * (np.float32(1) / np.float32(indptr[i + 1] - indptr[i]))
        want[i] = np.concatenate([own, acc])
    got = np.full_like(want, np.nan)
    table.mean_into(torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(got), True)
    assert np.array_equal(got, want)


@needs_native
@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("with_self", [True, False])
def test_the_means_written_in_bf16_are_the_fp32_means_as_torch_converts_them(name, with_self):
    # bf16 products read their input in bf16: the kernels store it so directly (a column
    # block of a wider matrix), bit for bit torch's conversion of the fp32 result, from a
    # matrix and from a table, over values spanning ~1e-42 (subnormal) .. 1e5
    rng = np.random.default_rng(5)
    rows, table = scattered(rng, 200, 24, DTYPES[name])
    if name == "float32":
        rows *= (10.0 ** rng.integers(-42, 6, (200, 1))).astype(np.float32)
        table = RowTable(np.float32, 24, (rows,), None, np.arange(200, dtype=np.int64) * 24 * 4)
    if name == "int8":  # the matrix below is what the table stands for: the decoded values
        rows = values_of(rows, table)
    indptr, indices = csc(rng, 80, 200)
    width = 48 if with_self else 24
    fp32 = torch.empty(80, width)
    matrix_means(rows, indptr, indices, fp32)
    want = fp32.to(torch.bfloat16).view(torch.int16)
    for via in ("matrix", "table"):
        wide = torch.full((80, width + 5), -7.0, dtype=torch.bfloat16)
        out = wide[:, 2:2 + width]
        if via == "table":
            table.mean_into(torch.from_numpy(indptr), torch.from_numpy(indices), out, with_self)
        else:
            matrix_means(rows, indptr, indices, bf16.bits(out))
        assert torch.equal(out.view(torch.int16), want), via
        assert torch.all(wide[:, :2] == -7) and torch.all(wide[:, 2 + width:] == -7), via


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("native", [True, False])
def test_copy_into_a_bf16_column_block_converts_as_torch_does(name, native, monkeypatch):
    native_or_numpy(rows_module, native, monkeypatch)
    rows, table = scattered(np.random.default_rng(6), 50, 6, DTYPES[name])
    wide = torch.full((40, 11), -7.0, dtype=torch.bfloat16)
    table.copy_into(wide[:, 3:9])
    fp32 = torch.from_numpy(bf16.widen(values_of(rows, table)[:40]))
    assert torch.equal(wide[:, 3:9].view(torch.int16), fp32.to(torch.bfloat16).view(torch.int16))
    assert torch.all(wide[:, :3] == -7) and torch.all(wide[:, 9:] == -7)


def block(rng, num_dst: int, num_src: int) -> Block:
    indptr, indices = csc(rng, num_dst, num_src)
    mfg = MFG(indptr, indices, np.arange(num_src, dtype=np.int64), num_dst)
    return Block.from_mfg(mfg, "cpu")


@needs_native
def test_graphsage_reads_a_table_as_it_reads_the_matrix():
    rng = np.random.default_rng(3)
    rows, table = scattered(rng, 300, 16, np.float32)
    blocks = [block(rng, 120, 300), block(rng, 40, 120)]
    torch.manual_seed(0)
    model = GraphSAGE(16, 32, 5, 2)
    outs, grads = [], []
    for x in (torch.from_numpy(rows.copy()), table):
        model.zero_grad()
        torch.manual_seed(7)  # the same dropout draws
        out = model(blocks, x)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.equal(outs[0], outs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@needs_native
def test_rgcn_reads_tables_as_it_reads_the_matrices():
    rng = np.random.default_rng(4)
    node_types = ["paper", "author"]
    edge_types = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "written_by", "author")]
    a_rows, a_table = scattered(rng, 150, 8, np.float32)
    p_rows, p_table = scattered(rng, 200, 8, bf16.BITS)
    p_table = RowTable(p_table.dtype, 8, p_table.sources, p_table.which, p_table.offset, out_dtype=np.float32)
    # one typed block: sources 0..349 (papers first), destinations 0..59 of them
    src_types = np.concatenate([np.zeros(200, np.int8), np.ones(150, np.int8)])
    indptr, indices = csc(rng, 60, 350)
    etypes = np.where(src_types[indices] == 1, 1, 0).astype(np.uint8)
    for i in range(60):  # a destination's edges in edge-type order
        e = slice(indptr[i], indptr[i + 1])
        order = np.argsort(etypes[e], kind="stable")
        indices[e], etypes[e] = indices[e][order], etypes[e][order]
    mfg = MFG(indptr, indices, np.arange(350, dtype=np.int64), 60, etypes)
    b = Block.from_mfg(mfg, "cpu", src_types, node_types, edge_types)
    torch.manual_seed(0)
    model = RGCN({"paper": 8, "author": 8}, 16, 3, 1, edge_types, "paper")
    want = model([b], {"paper": torch.from_numpy(bf16.widen(p_rows)), "author": torch.from_numpy(a_rows.copy())})
    got = model([b], {"paper": p_table, "author": a_table})
    assert torch.equal(got, want)


def test_a_batch_makes_learnable_rows_leaves_for_a_model_that_does_not_read_them():
    from fastsample.loading.loader import Batch
    from fastsample.rows import LearnableRows

    rng = np.random.default_rng(5)
    want, table = scattered(rng, 20, 4, np.float32)
    features, plain = scattered(rng, 9, 3, np.float32)
    batch = Batch(torch.zeros(0, dtype=torch.int64), {"a": LearnableRows(table), "b": plain}, [], [], 0.0, 0.0)
    x = batch.learnable_as_leaves()  # what Trainer.input gives a model without reads_learnable_rows
    assert x["a"].requires_grad and x["a"].is_leaf and torch.equal(x["a"], torch.from_numpy(want))
    assert x["b"] is plain  # other row tables stay where they are
    x["a"].sum().backward()
    assert batch.inputs["a"].grad is not None  # where the embedding update reads it
    x = batch.x
    assert not x["b"].requires_grad and torch.equal(x["b"], torch.from_numpy(features))
