"""The native extension is built with OpenMP, and a missing compiler is reported clearly."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.skipif(os.environ.get("FASTSAMPLE_NATIVE", "ON").upper() == "OFF",
                    reason="installed with FASTSAMPLE_NATIVE=OFF")
def test_native_module_is_built_with_openmp():
    """OpenMP is really linked and honours its settings: OMP_NUM_THREADS at start-up, then
    _native.set_num_threads and fastsample.sampling.set_num_threads (a stub or a build
    without OpenMP reports 1 whatever it is told). In a fresh process, so that the
    environment variable is read."""
    script = ("from fastsample import _native; from fastsample.sampling import set_num_threads; "
              "print(_native.max_threads()); _native.set_num_threads(2); print(_native.max_threads()); "
              "set_num_threads(1); print(_native.max_threads())")
    env = {**os.environ, "OMP_NUM_THREADS": "3", "NUMBA_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["3", "2", "1"], \
        f"OpenMP threads (OMP_NUM_THREADS=3, set 2, set 1) read back as {proc.stdout.split()}: {proc.stderr}"


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not on PATH")
def test_missing_compiler_gives_an_actionable_message(tmp_path):
    env = {**os.environ, "CXX": "/nonexistent/c++"}
    proc = subprocess.run(["cmake", "-S", REPO, "-B", tmp_path], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no C++ compiler found" in proc.stderr and "FASTSAMPLE_NATIVE=OFF" in proc.stderr, proc.stderr
