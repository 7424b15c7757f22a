"""Communicator over Intel oneCCL (backend ``ccl``), through fastsample's own binding
(fastsample._ccl, native/ccl/module.cpp) of the oneCCL runtime wheels on PyPI; Intel's
PyTorch bindings (oneccl_bind_pt) are not needed.

Install: ``scripts/install-ccl.sh`` (docs/cluster.md, "Backends"). The data collectives (the
gather's all-to-all, the gradient all-reduce) run on oneCCL; start-up agreement, object
collectives and abort stay on MPI, which also bootstraps oneCCL: rank 0 creates the main
key-value store and MPI broadcasts its address.

Environment (set here only where the user has not set them; oneCCL reads them at its
first use). Measured with oneccl-cpu 2022.1.2 over the mpich wheel, 2 and 3 ranks:
  CCL_WORKER_OFFLOAD=1   collectives progress on a oneCCL worker thread per rank (its
                         default where ranks are not pinned). Without it (=0, also what
                         oneCCL picks when the launcher pins each rank to one core) the
                         default alltoallv stalled ~10 s on large uneven messages (1M
                         int64 to the peer, none to itself: the gather's shape), over the
                         mpi and the ofi+shm transports alike. The worker costs latency
                         where it shares a core with its rank: ~12 ms per small collective
                         here instead of ~0.1 ms with MPI (bench/README.md, "Collectives").
  CCL_ALLTOALLV=scatter  the only alltoallv algorithm that was both right and never
                         stalled here: the default choice (and `direct`) never returned on
                         2.4 MB per rank pair; `naive` is wrong: a rank that sends nothing
                         may return before its receives have landed (tests/comm_worker.py
                         checks both shapes).
  CCL_ATL_TRANSPORT=mpi  oneCCL's transport is the job's MPI (MPICH or Intel MPI). On a
                         cluster, ``ofi`` with FI_PROVIDER=tcp, verbs or psm3 talks to the
                         fabric directly; CCL_ATL_SHM=1 adds shared memory within a node.
  CCL_ZE_ENABLE=0        no GPU (Level Zero) probing: these are the CPU wheels.
  CCL_LOG_LEVEL=error    without it every rank warns that the settings above differ from
                         oneCCL's defaults; set it to warn or info to see oneCCL's choices.
"""

from __future__ import annotations

import atexit
import os

import numpy as np

from fastsample.comm.base import CommError, as_bytes
from fastsample.comm.mpi import MPICommunicator

DEFAULT_ENV = {"CCL_WORKER_OFFLOAD": "1", "CCL_ALLTOALLV": "scatter", "CCL_ATL_TRANSPORT": "mpi", "CCL_ZE_ENABLE": "0",
               "CCL_LOG_LEVEL": "error"}
INSTALL = ("install it with scripts/install-ccl.sh (the oneccl-cpu wheels, then a rebuild of fastsample "
           "with FASTSAMPLE_CCL_ROOT set), or use backend mpi or gloo")


def load_binding():
    """fastsample._ccl, or one CommError saying what is missing and how to install it."""
    for key, value in DEFAULT_ENV.items():
        os.environ.setdefault(key, value)
    try:
        from fastsample import _ccl
    except ModuleNotFoundError:
        raise CommError(f"backend 'ccl': fastsample was built without oneCCL; {INSTALL}") from None
    except ImportError as e:  # built, but a library it needs is missing (libccl.so.1, libccl.so.2)
        raise CommError(f"backend 'ccl': the oneCCL binding does not load ({e}); {INSTALL}") from None
    return _ccl


class CCLCommunicator(MPICommunicator):
    name = "ccl"

    def __init__(self, comm=None, binding=None):
        self._ccl = binding if binding is not None else load_binding()
        super().__init__(comm)
        address = None
        if self.rank == 0:
            store = self._ccl.KVS.create_main()
            address = store.address()
        address = self.comm.bcast(address, root=0)
        if self.rank != 0:
            store = self._ccl.KVS.attach(address)
        try:
            self.ccl = self._ccl.Communicator(self.size, self.rank, store)
        except RuntimeError as e:
            raise CommError(f"backend 'ccl': oneCCL could not create its communicator ({e}); see the "
                            "CCL_* settings in fastsample/comm/ccl.py") from None
        # before MPI's finaliser (registered earlier, so it runs later): oneCCL's mpi
        # transport still needs MPI while it tears down
        atexit.register(self.ccl.close)

    def _dup(self):
        return CCLCommunicator(self.comm.Dup(), self._ccl)

    def _exchange_counts(self, send_counts):
        recv = np.empty(self.size, dtype=np.int64)
        ones = np.ones(self.size, dtype=np.int64)
        self.ccl.alltoallv(np.ascontiguousarray(send_counts, dtype=np.int64), ones, recv, ones)
        return recv

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        self.ccl.alltoallv(*as_bytes(send, send_elems, recv, recv_elems))

    def all_reduce(self, array, op="sum"):
        if op not in ("sum", "max"):
            raise CommError(f"op must be sum or max (got {op!r})")
        if not array.flags.c_contiguous:  # reshape would reduce a copy
            raise CommError("array must be C-contiguous (all_reduce reduces in place)")
        self.ccl.allreduce(array.reshape(-1), op)

    def barrier(self):
        self.ccl.barrier()
