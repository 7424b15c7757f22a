"""Timing shared by the benchmarks (and by the DGL worker, which runs in DGL's venv:
keep this file free of fastsample imports)."""

from __future__ import annotations

import statistics
import time


def time_batches(run, batches, min_reps=5, min_seconds=1.0, warmup=1):
    """Call run(i, batch) on successive batches; returns (seconds per call, results).

    Stops after at least min_reps timed calls and min_seconds in total, or when the
    batches run out. The first `warmup` calls (JIT, first-touch page faults) are untimed.
    """
    for i in range(warmup):
        run(i, batches[i % len(batches)])
    times, results = [], []
    total = 0.0
    for i in range(warmup, len(batches)):
        t0 = time.perf_counter()
        out = run(i, batches[i])
        dt = time.perf_counter() - t0
        times.append(dt)
        results.append(out)
        total += dt
        if len(times) >= min_reps and total >= min_seconds:
            break
    return times, results


def median_ms(times) -> float:
    return statistics.median(times) * 1e3
