"""Run under mpiexec by test_comm.py: checks every collective of a Communicator. Each rank
prints one line per check that passed (helpers.passed); test_comm.py names the checks."""

import os
import sys

import numpy as np

from fastsample.comm import create
from helpers import passed


def payload(src: int, dst: int) -> np.ndarray:
    """What rank src sends to rank dst: a reproducible (rows, 3) float32 block, maybe empty."""
    rng = np.random.default_rng(100 * src + dst)
    return rng.standard_normal((int(rng.integers(0, 5)) * (src != dst or dst % 2), 3)).astype(np.float32)


def main() -> None:
    comm = create(sys.argv[1])
    r, P = comm.rank, comm.size
    if sys.argv[1] == "mpi":  # the large rounds below then go single-copy where the host allows it
        from fastsample.comm.mpi import CMA_ENV, cross_memory_attach

        assert (os.environ.get(CMA_ENV) == "1") == cross_memory_attach(), os.environ.get(CMA_ENV)
    blocks = [payload(r, d) for d in range(P)]
    recv, counts = comm.all_to_all_v(np.concatenate(blocks), [len(b) for b in blocks])
    expected = [payload(s, r) for s in range(P)]
    assert counts.tolist() == [len(b) for b in expected], (counts, [len(b) for b in expected])
    assert np.array_equal(recv, np.concatenate(expected)), "all_to_all_v rows"
    passed(r, "all_to_all_v")
    # a reply with known counts: send back what was received, doubled
    back, _ = comm.all_to_all_v(recv * 2, counts, recv_counts=[len(b) for b in blocks])
    assert np.array_equal(back, np.concatenate(blocks) * 2), "reply round"
    assert comm.counters.rounds == 2
    passed(r, "reply_with_known_counts")
    ids, _ = comm.all_to_all_v(np.arange(P, dtype=np.int64) + 10 * r, np.ones(P, np.int64))
    assert ids.tolist() == [10 * s + r for s in range(P)], "int64 ids"
    passed(r, "int64_ids")
    # the rows' other wire types: bf16 rows travel as their uint16 bits, int8 rows as int8, and
    # mixed widths as bytes (fastsample/distributed/gather.py); gloo has no uint16
    def typed(src, dst, dtype):
        v = np.rint(payload(src, dst) * 20).clip(-100, 100)
        return (v + 100 * (np.dtype(dtype).kind == "u")).astype(dtype)

    for dtype in (np.uint16, np.int8, np.uint8):
        sent = [typed(r, d, dtype) for d in range(P)]
        got, _ = comm.all_to_all_v(np.concatenate(sent), [len(b) for b in sent])
        assert got.dtype == dtype and np.array_equal(got, np.concatenate([typed(s, r, dtype) for s in range(P)])), dtype
    passed(r, "wire_types")

    # large and uneven, nothing to itself: the gather's shape (oneCCL stalled on it or,
    # with CCL_ALLTOALLV=naive, returned rows not yet received; fastsample/comm/ccl.py)
    n = 1_000_000
    big = np.array([0 if d == r else n + 7 * r + d for d in range(P)], dtype=np.int64)
    got, got_counts = comm.all_to_all_v(np.full(int(big.sum()), r, dtype=np.int64), big)
    assert got_counts.tolist() == [0 if s == r else n + 7 * s + r for s in range(P)], "uneven counts"
    assert np.array_equal(got, np.repeat(np.arange(P), got_counts)), "uneven rows"
    passed(r, "large_uneven")

    x = np.full(4, r + 1, dtype=np.float32)
    comm.all_reduce(x)
    assert np.allclose(x, P * (P + 1) / 2), "all_reduce"
    passed(r, "all_reduce")
    assert comm.broadcast_object({"seed": 7} if r == 0 else None) == {"seed": 7}
    passed(r, "broadcast_object")
    assert comm.allgather_object(r * r) == [s * s for s in range(P)]
    passed(r, "allgather_object")
    comm.barrier()
    passed(r, "barrier", f"({P} ranks, {comm.name})")


if __name__ == "__main__":
    main()
