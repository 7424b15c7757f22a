"""The communicator of a single process (rank 0 of 1): no MPI, nothing to exchange.

It lets one-process code (a notebook, NodeLoader(comm=None)) take the same path as a
job: every all-to-all hands rank 0's rows back to itself."""

from __future__ import annotations

import sys

import numpy as np

from fastsample.comm.base import Communicator


class LocalCommunicator(Communicator):
    name = "local"
    rank = 0
    size = 1

    def _dup(self):
        return LocalCommunicator()

    def _exchange_counts(self, send_counts):
        return np.asarray(send_counts, dtype=np.int64).copy()

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        recv.reshape(-1)[:] = send.reshape(-1)[: recv.size]

    def all_reduce(self, array, op="sum"):
        pass

    def broadcast_object(self, obj, root=0):
        return obj

    def allgather_object(self, obj):
        return [obj]

    def barrier(self):
        pass

    def abort(self, code=1):
        sys.exit(code)
