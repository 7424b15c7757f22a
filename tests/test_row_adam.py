"""RowAdam (fastsample/distributed/row_adam.py): torch SparseAdam's rule applied straight
from gradient rows, duplicates summed in arrival order; the same bits on any thread count."""

import numpy as np
import pytest
import torch

from fastsample.distributed import row_adam
from fastsample.distributed.row_adam import RowAdam
from fastsample.rows import RowTable
from fastsample.sampling import set_num_threads


def gradient_steps(rows_in_table: int, dim: int, steps: int, seed: int = 0) -> list:
    """Steps of (rows, gradient rows) with repeats, as owners receive them from several ranks."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        k = int(rng.integers(0, 3 * rows_in_table))  # sometimes none, usually many repeats
        out.append((rng.integers(0, rows_in_table, k), rng.standard_normal((k, dim)).astype(np.float32)))
    return out


def test_row_adam_is_sparse_adam_on_the_summed_rows():
    n, dim = 300, 16
    init = np.random.default_rng(1).standard_normal((n, dim)).astype(np.float32)
    ours, theirs = torch.nn.Parameter(torch.from_numpy(init.copy())), torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt, ref = RowAdam({"t": ours}, lr=0.05), torch.optim.SparseAdam([theirs], lr=0.05)
    for rows, values in gradient_steps(n, dim, 25):
        opt.step("t", rows, values, divisor=2.0)
        unique, inverse = np.unique(rows, return_inverse=True)
        total = np.zeros((len(unique), dim), np.float32)
        np.add.at(total, inverse, values)
        theirs.grad = torch.sparse_coo_tensor(torch.from_numpy(unique)[None], torch.from_numpy(total / np.float32(2)),
                                              theirs.shape, is_coalesced=True, check_invariants=False)
        ref.step()
        ref.zero_grad(set_to_none=True)
    state = ref.state[theirs]
    assert opt.steps["t"] == state["step"] == 25
    # the moments are SparseAdam's to the bit; the rows within float32 rounding (torch's
    # vectorised sqrt is not correctly rounded, numba's is)
    assert np.array_equal(opt.moments["t"][0], state["exp_avg"].numpy())
    assert np.array_equal(opt.moments["t"][1], state["exp_avg_sq"].numpy())
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=0, atol=1e-6)
    assert not np.array_equal(ours.detach().numpy(), init)


def test_row_adam_gives_the_same_bits_on_one_and_two_threads_and_resumes_from_its_state():
    n, dim = 2000, 32
    steps = gradient_steps(n, dim, 12, seed=3)
    init = np.random.default_rng(2).standard_normal((n, dim)).astype(np.float32)
    results = []
    for threads in (1, 2):
        set_num_threads(threads)
        p = torch.nn.Parameter(torch.from_numpy(init.copy()))
        opt = RowAdam({"t": p}, lr=0.01)
        for rows, values in steps:
            opt.step("t", rows, values)
        results.append(p.detach().numpy().copy())
    set_num_threads(1)
    assert np.array_equal(results[0], results[1])
    # stopped after 6 steps and resumed from state_dict: the same rows as straight through
    p = torch.nn.Parameter(torch.from_numpy(init.copy()))
    opt = RowAdam({"t": p}, lr=0.01)
    for rows, values in steps[:6]:
        opt.step("t", rows, values)
    saved = opt.state_dict()
    again = RowAdam({"t": p}, lr=0.01)
    again.load_state_dict(saved)
    for rows, values in steps[6:]:
        again.step("t", rows, values)
    assert np.array_equal(p.detach().numpy(), results[0])


def test_row_adam_reads_sparse_adams_state_and_refuses_a_mismatch():
    p = torch.nn.Parameter(torch.zeros(10, 4))
    ref = torch.optim.SparseAdam([p], lr=0.1)
    p.grad = torch.sparse_coo_tensor(torch.tensor([[1, 3]]), torch.ones(2, 4), p.shape)
    ref.step()
    opt = RowAdam({"t": torch.nn.Parameter(torch.zeros(10, 4))}, lr=0.1)
    opt.load_state_dict(ref.state_dict())  # a checkpoint written before RowAdam
    assert opt.steps == {"t": 1} and np.array_equal(opt.moments["t"][0], ref.state[p]["exp_avg"].numpy())
    small = RowAdam({"t": torch.nn.Parameter(torch.zeros(5, 4))}, lr=0.1)
    with pytest.raises(ValueError, match="optimizer state of table 't': \\(10, 4\\), expected \\(5, 4\\)"):
        small.load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="rows: outside 0..9"):
        opt.step("t", np.array([10]), np.ones((1, 4), np.float32))


@pytest.mark.parametrize("dim", [64, 37])
def test_the_native_update_gives_numbas_bits(monkeypatch, dim):
    if row_adam._native is None:
        pytest.skip("fastsample built without its native module")
    n = 3000
    steps = gradient_steps(n, dim, 8, seed=5)
    init = np.random.default_rng(4).standard_normal((n, dim)).astype(np.float32)
    results = []
    for native in (row_adam._native, None):
        monkeypatch.setattr(row_adam, "_native", native)
        p = torch.nn.Parameter(torch.from_numpy(init.copy()))
        opt = RowAdam({"t": p}, lr=0.01)
        for rows, values in steps:
            opt.step("t", rows, values, divisor=3.0)
        results.append((p.detach().numpy().copy(), *opt.moments["t"]))
    assert not np.array_equal(results[0][0], init)
    for a, b in zip(*results):
        assert np.array_equal(a, b)


def test_gradient_rows_read_where_they_lie_give_the_matrix_bits(monkeypatch):
    # send_back leaves the gradient rows where they are (this rank's own in its gradient, the
    # others' in the receive buffer) as a RowTable: the update reads them there (native), or
    # from its materialized matrix, with the same bits as from one matrix
    n, dim = 500, 16
    steps = gradient_steps(n, dim, 6, seed=6)
    init = np.random.default_rng(5).standard_normal((n, dim)).astype(np.float32)
    rng = np.random.default_rng(6)
    results = []
    for native in (row_adam._native, None):
        monkeypatch.setattr(row_adam, "_native", native)
        for as_table in (False, True):
            p = torch.nn.Parameter(torch.from_numpy(init.copy()))
            opt = RowAdam({"t": p}, lr=0.01)
            for rows, values in steps:
                if as_table:  # each row at a random place of one of two larger arrays
                    k = len(values)
                    which = rng.integers(0, 2, k).astype(np.int8)
                    sources = [rng.standard_normal((2 * k + 3, dim)).astype(np.float32) for _ in range(2)]
                    at = [rng.permutation(2 * k + 3)[:k] for _ in range(2)]
                    for s in range(2):
                        sources[s][at[s][which == s]] = values[which == s]
                    offset = np.where(which == 0, at[0], at[1]) * dim * 4
                    values = RowTable(np.float32, dim, sources, which, offset)
                opt.step("t", rows, values, divisor=2.0)
            results.append(p.detach().numpy().copy())
    assert not np.array_equal(results[0], init)
    assert all(np.array_equal(results[0], r) for r in results[1:])


@pytest.mark.skipif(row_adam._native is None, reason="fastsample built without its native module")
def test_rows_group_natively_as_numpys_stable_sort_groups_them(monkeypatch):
    rows = np.random.default_rng(3).integers(0, 50, 400)  # many duplicates, some rows absent
    native = row_adam._group(rows, 60)
    monkeypatch.setattr(row_adam, "_native", None)
    plain = row_adam._group(rows, 60)
    assert all(np.array_equal(a, b) for a, b in zip(native, plain))
    order, starts = native
    assert np.array_equal(rows[order], np.sort(rows, kind="stable")) and starts[-1] == len(rows)
    assert np.array_equal(np.unique(rows, return_counts=True)[1], np.diff(starts))


def test_rows_of_a_large_table_group_as_those_of_a_small_one():
    """A table many times the step's rows is grouped by sorting the rows, not counting over
    the table: the same order and runs either way."""
    rows = np.random.default_rng(4).integers(0, 50, 400)
    small, large = row_adam._group(rows, 60), row_adam._group(rows, 10**7)
    assert all(np.array_equal(a, b) for a, b in zip(small, large))
