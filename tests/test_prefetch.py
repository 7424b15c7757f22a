"""The prefetching pipeline: bounded, ordered, failures surface, and it stops where the
caller stopped (the rule that keeps every rank's collectives matched)."""

import threading
import time

import pytest

from conftest import mpiexec
from fastsample.loading.prefetch import Prefetcher


class Source:
    """Items 0..n-1, recording how many were started; fails at item ``fail_at``."""

    def __init__(self, n, fail_at=None, delay=0.0):
        self.n, self.fail_at, self.delay = n, fail_at, delay
        self.started = 0
        self.threads = set()

    def __iter__(self):
        for i in range(self.n):
            self.started += 1
            self.threads.add(threading.current_thread().name)
            if i == self.fail_at:
                raise KeyError(f"item {i} failed")
            time.sleep(self.delay)
            yield i


@pytest.mark.parametrize("depth", [1, 2])
def test_items_come_in_order_from_another_thread_at_most_depth_ahead(depth):
    src = Source(20)
    ahead = []
    with Prefetcher(src, depth) as items:
        got = []
        for item in items:
            time.sleep(0.002)  # the producer has time to run ahead as far as it may
            ahead.append(src.started - len(got) - 1)
            got.append(item)
    assert got == list(range(20))
    assert src.threads == {"fastsample-prefetch"}
    assert max(ahead) == depth  # never further, and it does get there


def test_an_error_is_raised_at_its_item_with_its_traceback():
    items = Prefetcher(Source(10, fail_at=3), 2)
    got = []
    with pytest.raises(KeyError, match="item 3 failed") as info:
        for item in items:
            got.append(item)
    assert got == [0, 1, 2]
    assert any(entry.name == "__iter__" for entry in info.traceback)  # the producer's frame


@pytest.mark.parametrize("depth", [1, 2])
def test_a_break_finishes_exactly_the_permitted_items_then_the_thread_ends(depth):
    # every rank that stops after item k must have started the same items (k + 1 + depth),
    # however far each producer had got when the caller stopped
    for delay in (0.0, 0.01):
        src = Source(50, delay=delay)
        with Prefetcher(src, depth) as items:
            for item in items:
                if item == 4:
                    break
        assert src.started == 5 + depth, (delay, src.started)
        assert not items._thread.is_alive()


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="depth must be positive"):
        Prefetcher([], 0)


FAILING_RANK = """
import sys
from mpi4py import MPI
from fastsample.distributed.gather import FeatureGather
from fastsample.train import main

calls = [0]
real = FeatureGather.gather

def failing(self, ids):
    calls[0] += 1
    if MPI.COMM_WORLD.Get_rank() == 1 and calls[0] == 3:
        raise MemoryError("injected failure in the prefetch thread")
    return real(self, ids)

FeatureGather.gather = failing
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.mpi
def test_a_rank_failing_in_the_prefetch_thread_ends_the_job(train_parts):
    started = time.time()
    proc = mpiexec(2, "-c", FAILING_RANK, "--data", train_parts / "p2", "--fanouts", "4,3", "--batch-size", "40",
                   "--hidden", "16", "--epochs", "50", "--quiet", "--eval-every", "0", "--threads", "1",
                   "--prefetch", "1", timeout=120)
    assert proc.returncode != 0
    assert time.time() - started < 100
    ours = [line for line in proc.stderr.splitlines() if line.startswith("python -m fastsample.train: error: ")]
    assert len(ours) == 1 and ours[0].startswith("python -m fastsample.train: error: rank 1, in training (epoch 0, "), \
        proc.stderr
    assert ours[0].endswith("MemoryError: injected failure in the prefetch thread"), proc.stderr
