"""Timing shared by the benchmarks (and by the DGL worker, which runs in DGL's venv:
keep this file free of fastsample imports)."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time


def cpu_model() -> str:
    """The CPU every benchmark names beside its figures: lscpu's model name, family and model
    (hosts differ between sessions; "AMD EPYC" alone does not say which generation), and the
    logical CPUs; /proc/cpuinfo's model name where lscpu is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        for line in open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else ():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
        return platform.processor() or "unknown CPU"
    f = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}
    return (f"{f.get('Model name', '?')} (family {f.get('CPU family', '?')}, model {f.get('Model', '?')}), "
            f"{os.cpu_count()} logical CPUs")


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
