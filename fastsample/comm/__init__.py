"""Collective communication: MPI (default) or torch.distributed (gloo, ccl, nccl).

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
    if backend in ("gloo", "ccl", "nccl"):
        from fastsample.comm.torch_dist import TorchCommunicator

        return TorchCommunicator(backend)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or local (got {backend!r})")


__all__ = ["BACKENDS", "Communicator", "Counters", "create"]
