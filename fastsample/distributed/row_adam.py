"""Adam on the rows of embedding tables, applied at their owners straight from the gradient
rows that reached them: the update of fastsample/distributed/embedding.py's tables.

torch's SparseAdam needs a COO gradient: the owner built one (unique, a scatter-add of the
duplicates, a coalesced sparse tensor) and SparseAdam then masks, gathers and scatters the
moments row by row in several passes; on a typed network with three featureless types at
batch 64 that was a third of the epoch (issue 36). Here one pass over the received rows,
sorted stably by row, sums each row's duplicates in the order they arrived and updates the
row and its moments in place, parallel over rows (every row's arithmetic is its own, so
any thread count gives the same bits): native where built (native/row_adam.cpp, the next
rows prefetched: they are random reads of MBs, which the update otherwise waits on; ~2x
faster), else numba, bitwise the same. The rule is SparseAdam's, in float32, to the
bit: a row's moments move only on steps where it has a gradient ("lazy" Adam), and the bias
correction counts the table's steps. The moments are allocated as zeros at the first
update; the pages of rows never touched are never written, so they cost no memory.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from fastsample.native import lib as _native
from fastsample.rows import RowTable

__all__ = ["RowAdam"]


@numba.njit(parallel=True, cache=True)
def _adam_rows(table, m, v, rows, values, order, starts, divisor, one_minus_beta1, one_minus_beta2, eps,
               neg_step, scratch):  # pragma: no cover - compiled
    dim = table.shape[1]
    for s in numba.prange(len(starts) - 1):
        g = scratch[s]
        g[:] = values[order[starts[s]]]
        for k in range(starts[s] + 1, starts[s + 1]):  # duplicates in arrival order: the same sum on every run
            g += values[order[k]]
        r = rows[order[starts[s]]]
        for j in range(dim):
            gj = g[j] / divisor
            m_old, v_old = m[r, j], v[r, j]
            m_step = (gj - m_old) * one_minus_beta1  # SparseAdam's order of operations, in float32
            v_step = (gj * gj - v_old) * one_minus_beta2
            m_new, v_new = m_step + m_old, v_step + v_old
            m[r, j], v[r, j] = m_new, v_new
            table[r, j] += neg_step * (m_new / (np.sqrt(v_new) + eps))


def _group(rows: np.ndarray, num_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(the positions of ``rows`` sorted by row, stable; where each distinct row's run
    starts in that order, and its end): natively a counting sort over the table's rows
    where the table is small against the step's rows (20x numpy's stable argsort for 25k
    rows of a 16k-row table), else that argsort: the counting sort's passes over the whole
    table cost 2.6 ms a step for a 300k-row table and 108 ms for 20M rows, the argsort
    1.5 ms for either (Zen 5)."""
    if _native is not None and num_rows <= 8 * len(rows) and num_rows < 2**31:
        order, counts = np.empty(len(rows) + 1, np.int64), np.empty(num_rows, np.int64)
        k = _native.group_by_run(rows.astype(np.int32), None, order, counts)
        runs = counts[counts > 0]
        starts = np.zeros(len(runs) + 1, np.int64)
        np.cumsum(runs, out=starts[1:])
        return order[:k], starts
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    return order, np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1], [True]]))


class RowAdam:
    """Adam (SparseAdam's rule) over the rows of ``tables`` ({name: float32 parameter}),
    updated in place.

    Args:
        tables: the parameters (their storage is updated: numpy views of them stay valid);
        lr, betas, eps: Adam's, as torch.optim.SparseAdam takes them.
    """

    def __init__(self, tables: dict, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        if not lr > 0:
            raise ValueError(f"lr must be positive (got {lr})")
        self.tables = {name: p.detach().numpy() for name, p in tables.items()}
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.steps = dict.fromkeys(self.tables, 0)
        self.moments = {}  # name -> (exp_avg, exp_avg_sq), made at the first update

    def warm_up(self) -> None:
        """Load the compiled update (~0.5 s, parallel numba, where the native one is not
        built) before anything is timed."""
        if _native is not None:
            return
        f = np.float32
        one = np.zeros((1, 1), f)
        _adam_rows(one, one.copy(), one.copy(), np.zeros(1, np.int64), one.copy(), np.zeros(1, np.int64),
                   np.array([0, 1]), f(1), f(0.1), f(0.1), f(1e-8), f(0), np.empty((1, 1), f))

    def _moments(self, name: str):
        if name not in self.moments:
            shape = self.tables[name].shape
            self.moments[name] = (np.zeros(shape, np.float32), np.zeros(shape, np.float32))
        return self.moments[name]

    def step(self, name: str, rows: np.ndarray, values, divisor: float = 1.0) -> None:
        """One step of table ``name``: gradient rows ``values`` (k, dim) of table rows
        ``rows`` (k,), a row's duplicates summed in their order, the sums divided by
        ``divisor``. ``values`` may be a float32 RowTable (fastsample/rows.py): the native
        update reads each row where it lies (the gather's send_back leaves them so). Counts a
        step also when no row came (SparseAdam does, given a gradient)."""
        table = self.tables[name]
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        in_place = (_native is not None and isinstance(values, RowTable) and values.readable
                    and values.dtype == np.float32)
        if isinstance(values, RowTable) and not in_place:
            values = values.materialize()
        if not in_place:
            values = np.ascontiguousarray(values, dtype=np.float32)
        shape = (len(values), values.width) if in_place else values.shape
        if shape != (len(rows), table.shape[1]):
            raise ValueError(f"values: {shape}, expected ({len(rows)}, {table.shape[1]})")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(table)):
            raise ValueError(f"rows: outside 0..{len(table) - 1}")
        self.steps[name] += 1
        if not len(rows):
            return
        order, starts = _group(rows, len(table))
        beta1, beta2 = self.betas
        t = self.steps[name]
        step_size = self.lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        m, v = self._moments(name)
        f = np.float32
        scalars = f(divisor), f(1 - beta1), f(1 - beta2), f(self.eps), f(-step_size)
        if _native is not None:
            addr = values.addresses() if in_place else values.ctypes.data + np.arange(len(rows)) * values.strides[0]
            _native.adam_rows(table, m, v, rows, addr, order, starts, *scalars)
            return
        scratch = np.empty((len(starts) - 1, table.shape[1]), np.float32)  # each row's summed gradient
        _adam_rows(table, m, v, rows, values, order, starts, *scalars, scratch)

    def state_dict(self) -> dict:
        """Plain tensors and numbers (a checkpoint's weights-only loader reads them)."""
        return {"rule": "row-adam", "lr": self.lr, "betas": list(self.betas), "eps": self.eps,
                "step": dict(self.steps),
                "exp_avg": {n: torch.from_numpy(m.copy()) for n, (m, _) in self.moments.items()},
                "exp_avg_sq": {n: torch.from_numpy(v.copy()) for n, (_, v) in self.moments.items()}}

    def load_state_dict(self, state: dict) -> None:
        """A state_dict() of tables of the same shapes (this job's lr, betas and eps stay); or
        torch SparseAdam's, over the tables in this order (checkpoints written before this rule)."""
        if "rule" not in state:  # torch.optim.SparseAdam's: {"state": {index: {...}}, "param_groups": [...]}
            names, saved = list(self.tables), state.get("state", {})
            state = {"step": {}, "exp_avg": {}, "exp_avg_sq": {}}
            for index, s in saved.items():
                n = names[int(index)]
                state["step"][n] = int(s["step"])
                state["exp_avg"][n], state["exp_avg_sq"][n] = s["exp_avg"], s["exp_avg_sq"]
        for n in state["step"]:
            if n not in self.tables:
                raise ValueError(f"optimizer state of table {n!r}, which this job does not have")
        self.steps = {n: int(state["step"].get(n, 0)) for n in self.tables}
        self.moments = {}
        for n in state["exp_avg"]:
            m, v = (np.array(state[k][n].numpy(), dtype=np.float32) for k in ("exp_avg", "exp_avg_sq"))
            if m.shape != self.tables[n].shape or v.shape != m.shape:
                raise ValueError(f"optimizer state of table {n!r}: {m.shape}, expected {self.tables[n].shape}")
            self.moments[n] = (m, v)
