"""The partitioners' memory: their estimated peaks, and ``--method auto``'s choice by them.

Peak memory per directed edge of the symmetric adjacency, measured on this project's
machines: METIS (pymetis) ~130 bytes (products, 118M edges: 14.4 GiB, with 3 constraints;
it has one since issue 36, and hetero-medium's whole partition peaked the same, 3.0 against
3.1 GiB); KaMinPar terapart with compression ~11 bytes (8M nodes, 312M edges: 3.3 GiB).
The balancing after either (balance.py, refine.py) needs at most ~100 bytes per node by
count of its arrays (hetero-medium: 12-39 measured), after the partitioner has freed its
own, so it stays below either peak.
The planner (python -m fastsample.plan) reports the same figures.
"""

from __future__ import annotations

__all__ = ["metis_peak_bytes", "kaminpar_peak_bytes", "choose_method"]

METIS_BYTES_PER_EDGE = 130
KAMINPAR_BYTES_PER_EDGE = 11


def metis_peak_bytes(num_nodes: int, num_edges: int) -> int:
    """Estimated peak memory of METIS on a symmetric adjacency of ``num_edges`` directed edges."""
    return METIS_BYTES_PER_EDGE * num_edges + 64 * num_nodes


def kaminpar_peak_bytes(num_nodes: int, num_edges: int) -> int:
    """Estimated peak memory of KaMinPar (terapart, compressed) on the same graph."""
    return KAMINPAR_BYTES_PER_EDGE * num_edges + 64 * num_nodes


def choose_method(num_nodes: int, num_edges: int, available_bytes: int | None) -> tuple[str, str]:
    """(method, why) for ``auto``: METIS where its estimated peak fits in 80 % of the available
    memory, else KaMinPar (bench/README.md compares their cuts on products)."""
    need = metis_peak_bytes(num_nodes, num_edges)
    if available_bytes is None or need <= 0.8 * available_bytes:
        have = "unknown" if available_bytes is None else f"{available_bytes / 2**30:.1f} GiB"
        return "metis", f"METIS's estimated peak {need / 2**30:.1f} GiB fits ({have} available)"
    return "kaminpar", (f"METIS's estimated peak {need / 2**30:.1f} GiB exceeds 80% of the "
                        f"{available_bytes / 2**30:.1f} GiB available; KaMinPar needs about "
                        f"{kaminpar_peak_bytes(num_nodes, num_edges) / 2**30:.1f} GiB")
