"""The one place that loads the C++/OpenMP kernels (the extension ``fastsample._native``).

    from fastsample.native import lib    # the extension module, or None where it is not built

Every caller that has a Numba or torch fallback checks ``lib is not None``; one that has
none calls ``require(what)``, which says why the extension is missing and how to get it.
The binding refuses arrays of another dtype or layout (native/module.cpp): the wrappers
convert once, where the data is built, never per call.
"""

from __future__ import annotations

try:
    from fastsample import _native as lib
    _why = ""
except ImportError as e:  # installed with FASTSAMPLE_NATIVE=OFF, or the build failed
    lib = None
    _why = str(e)

__all__ = ["lib", "require"]


def require(what: str):
    """The extension module, or a RuntimeError naming ``what`` needed it and why it is missing."""
    if lib is None:
        raise RuntimeError(f"{what}: the native kernels (fastsample._native) are not built ({_why}); reinstall "
                           "with a C++ compiler and OpenMP (pip install -e .), or use the Numba kernels")
    return lib
