"""Collective communication: MPI (default), oneCCL (ccl) or torch.distributed (gloo, nccl).

    comm = create("mpi")          # rank, size, all_to_all_v, all_reduce, ... see base.py
"""

from fastsample.comm.base import Communicator, Counters

BACKENDS = ("mpi", "gloo", "ccl", "nccl")


def create(backend: str = "mpi") -> Communicator:
    if backend == "local":  # one process, no MPI
        from fastsample.comm.local import LocalCommunicator

        return LocalCommunicator()
    if backend == "mpi":
        from fastsample.comm.mpi import MPICommunicator

        return MPICommunicator()
    if backend == "ccl":
        from fastsample.comm.ccl import CCLCommunicator

        return CCLCommunicator()
    if backend in ("gloo", "nccl"):
        from fastsample.comm.torch_dist import TorchCommunicator

        return TorchCommunicator(backend)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or local (got {backend!r})")


__all__ = ["BACKENDS", "Communicator", "Counters", "create"]
