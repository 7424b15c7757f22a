"""Communicator over torch.distributed: gloo (CPU) or nccl (GPU). (oneCCL has its own
binding, fastsample/comm/ccl.py.)

The process group is bootstrapped from the MPI launch, so no MASTER_ADDR/PORT needs to
be set by hand: rank 0 picks a free TCP port and broadcasts its address over MPI. The
address is rank 0's host name resolved, or MASTER_ADDR where rank 0 has it set (for
hosts whose name does not resolve to an address the other ranks can reach, e.g. ranks
in network namespaces: bench/netns.py). MPI stays up for bootstrapping and for abort
(torch.distributed has no job-wide abort). gloo picks its interface from the host name
unless GLOO_SOCKET_IFNAME names one.
"""

from __future__ import annotations

import atexit
import copy
import os
import socket

import numpy as np

from fastsample.choices import TORCH_BACKENDS
from fastsample.comm.base import CommError, as_bytes
from fastsample.comm.mpi import MPICommunicator


def _require(backend: str) -> None:
    if backend == "nccl":
        import torch

        if not torch.cuda.is_available():
            raise CommError("backend 'nccl' needs CUDA GPUs (torch.cuda.is_available() is False); "
                            "use backend gloo or mpi on CPUs")


class TorchCommunicator(MPICommunicator):
    """Collectives on a torch.distributed process group (bootstrapped over MPI; see above).

    Args:
        backend: gloo (CPUs) or nccl (CUDA GPUs).
    """

    group = None  # the default process group; a dup() has a group of its own

    def __init__(self, backend: str = "gloo"):
        if backend not in TORCH_BACKENDS:
            raise CommError(f"backend must be one of {', '.join(TORCH_BACKENDS)} (got {backend!r})")
        _require(backend)
        super().__init__()
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.name = backend
        address = None
        if self.rank == 0:
            with socket.socket() as s:
                s.bind(("", 0))
                host = os.environ.get("MASTER_ADDR") or socket.gethostbyname(socket.gethostname())
                address = (host, s.getsockname()[1])
        host, port = self.comm.bcast(address, root=0)
        dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=self.rank,
                                world_size=self.size)
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else None
        # An undestroyed group's threads abort the process at exit ("terminate called
        # without an active exception"); registered after mpi4py's finaliser, so it runs first.
        atexit.register(self.close)

    def _dup(self):
        other = copy.copy(self)  # same backend and device; its own MPI communicator and process group
        MPICommunicator.__init__(other, self.comm.Dup())
        other.group = self.dist.new_group(backend=self.name)  # collective; destroyed with the default group
        return other

    def close(self) -> None:
        if self.group is None and self.dist.is_initialized():
            # Every rank first waits until all are done with the group: tearing it down
            # while a peer may still be in its last collective aborted a rank at exit in
            # ~2% of gloo runs. An MPI barrier: MPI is still up, and it has no gloo timeout.
            self.comm.Barrier()
            self.dist.destroy_process_group()

    def _t(self, array: np.ndarray):
        t = self.torch.from_numpy(array)
        return t.to(self.device) if self.device is not None else t

    def _exchange_counts(self, send_counts):
        recv = np.empty(self.size, dtype=np.int64)
        out = self._t(recv)
        self.dist.all_to_all_single(out, self._t(send_counts), group=self.group)
        if self.device is not None:
            recv[:] = out.cpu().numpy()
        return recv

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        send, send_elems, recv, recv_elems = as_bytes(send, send_elems, recv, recv_elems)
        out = self._t(recv)
        self.dist.all_to_all_single(out, self._t(send), recv_elems.tolist(), send_elems.tolist(), group=self.group)
        if self.device is not None:
            recv[:] = out.cpu().numpy()

    def all_reduce(self, array, op="sum"):
        t = self._t(array)
        self.dist.all_reduce(t, op={"sum": self.dist.ReduceOp.SUM, "max": self.dist.ReduceOp.MAX}[op],
                             group=self.group)
        if self.device is not None:
            array[...] = t.cpu().numpy()

    def barrier(self):
        self.dist.barrier(group=self.group)
