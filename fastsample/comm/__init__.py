"""Collective communication: MPI (default), oneCCL (ccl) or torch.distributed (gloo, nccl).

    comm = create("mpi")          # rank, size, all_to_all_v, all_reduce, ... see base.py

An unknown or unavailable backend, or a bad argument, is a CommError naming the parameter.
"""

from fastsample.choices import COMM_BACKENDS as BACKENDS
from fastsample.choices import TORCH_BACKENDS
from fastsample.comm.base import CommError, Communicator, Counters


def create(backend: str = "mpi") -> Communicator:
    """The communicator of this process.

    Args:
        backend: mpi, gloo, ccl or nccl (BACKENDS), or local for one process without MPI.
    Returns:
        The Communicator. An unknown backend, or one that is not installed or cannot start
        here, is a CommError.
    """
    if backend == "local":  # one process, no MPI
        from fastsample.comm.local import LocalCommunicator

        return LocalCommunicator()
    try:
        if backend == "mpi":
            from fastsample.comm.mpi import MPICommunicator

            return MPICommunicator()
        if backend == "ccl":
            from fastsample.comm.ccl import CCLCommunicator

            return CCLCommunicator()
        if backend in TORCH_BACKENDS:
            from fastsample.comm.torch_dist import TorchCommunicator

            return TorchCommunicator(backend)
    except CommError:
        raise
    except (ImportError, RuntimeError) as e:  # e.g. mpi4py finds no MPI library: one error, not a traceback
        raise CommError(f"backend '{backend}' cannot start here ({type(e).__name__}: {str(e).strip()})") from e
    raise CommError(f"backend must be one of {', '.join(BACKENDS)} or local (got {backend!r})")


__all__ = ["BACKENDS", "TORCH_BACKENDS", "CommError", "Communicator", "Counters", "create"]
