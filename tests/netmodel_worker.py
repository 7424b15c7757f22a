"""Run under mpiexec by test_comm.py: the network model charges what its formula says. Each
rank prints one line per check that passed (helpers.passed)."""

import time

import numpy as np

from fastsample.comm import create
from fastsample.comm.netmodel import ModeledNetwork
from helpers import passed

ALPHA_US, GBPS = 2000.0, 0.008  # 2 ms per message step, 1 MB/s: easy to see in wall time


def main() -> None:
    comm = ModeledNetwork(create("mpi"), ALPHA_US, GBPS)
    P, r = comm.size, comm.rank
    alpha, beta = ALPHA_US * 1e-6, GBPS * 1e9 / 8
    rows = np.zeros((250 * (r + 1) * P, 1), dtype=np.float32)  # rank r sends 1000 (r+1) bytes to each
    t0 = time.perf_counter()
    comm.all_to_all_v(rows, np.full(P, 250 * (r + 1)))
    grads = np.ones(1000, dtype=np.float32)
    comm.all_reduce(grads)
    wall = time.perf_counter() - t0
    busiest = max(1000 * (s + 1) * P for s in range(P))  # sent by the last rank; received: 1000 * sum
    busiest = max(busiest, 1000 * sum(s + 1 for s in range(P)))
    expected = ((P - 1) * alpha + 8 * P / beta) + ((P - 1) * alpha + busiest / beta) \
        + (2 * (P - 1) * alpha + 2 * (P - 1) / P * 4000 / beta)
    assert abs(comm.counters.modelled_s - expected) < 1e-9, (comm.counters.modelled_s, expected)
    passed(r, "modelled_time", f"{comm.counters.modelled_s:.4f}s")
    assert wall >= 0.95 * expected, (wall, expected)
    passed(r, "wall_time_charged", f"{wall:.4f}s")
    assert np.all(grads == P)
    passed(r, "all_reduce")


if __name__ == "__main__":
    main()
