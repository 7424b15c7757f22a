"""The native extension is built with OpenMP, and a missing compiler is reported clearly."""

import os
import shutil
import subprocess

import pytest

from conftest import REPO


@pytest.mark.skipif(os.environ.get("FASTSAMPLE_NATIVE", "ON").upper() == "OFF",
                    reason="installed with FASTSAMPLE_NATIVE=OFF")
def test_native_module_is_built_with_openmp():
    from fastsample import _native

    assert _native.max_threads() >= 1


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not on PATH")
def test_missing_compiler_gives_an_actionable_message(tmp_path):
    env = {**os.environ, "CXX": "/nonexistent/c++"}
    proc = subprocess.run(["cmake", "-S", REPO, "-B", tmp_path], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "no C++ compiler found" in proc.stderr and "FASTSAMPLE_NATIVE=OFF" in proc.stderr, proc.stderr
