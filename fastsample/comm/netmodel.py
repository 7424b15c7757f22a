"""A network that costs what a cluster's does, on one machine.

Ranks on one machine talk through shared memory, where a round costs microseconds and
the difference between 2 and 2L rounds per step hides. ``ModeledNetwork`` wraps a
communicator and, after each collective, makes every rank wait the time that collective
would take on a network with per-message latency ``alpha`` and per-link bandwidth ``beta``:

    all_to_all (also the count exchange):  (P - 1) * alpha + max_r bytes_r / beta
        pairwise exchange in P - 1 steps; bytes_r = max(sent, received) by rank r, and the
        busiest rank sets the pace (found with one tiny max all-reduce, not modelled)
    all_reduce (ring):                      2 (P - 1) * alpha + 2 (P - 1) / P * bytes / beta

Every rank waits the same time at the same point. Waits are paid in slices of at least
2 ms (time.sleep overshoots short sleeps), so the total is right to a few percent.
Defaults resemble a 25 Gbit/s Ethernet cluster with MPI over TCP: 10 us, 25 Gbit/s.
Start-up collectives (broadcast, allgather, barrier) are not modelled.
A dup() (the prefetching loader's) waits on its own: the model lets its gather and the
trainer's all-reduce proceed at once, as if each had the link to itself. The all-reduce
is small (the gradients, ~1 MB for GraphSAGE h256) beside the gather, so this flatters
overlap little.
"""

from __future__ import annotations

import time

import numpy as np

from fastsample.comm.base import CommError, Communicator


class ModeledNetwork(Communicator):
    def __init__(self, inner: Communicator, latency_us: float = 10.0, gbps: float = 25.0):
        super().__init__()
        if latency_us < 0 or gbps <= 0:
            raise CommError(f"network model: latency_us must be >= 0 and gbps > 0 (got {latency_us} us, "
                            f"{gbps} Gbit/s)")
        self.inner, self.rank, self.size = inner, inner.rank, inner.size
        self.name = f"{inner.name}+net({latency_us:g}us,{gbps:g}Gbit/s)"
        self.alpha, self.beta = latency_us * 1e-6, gbps * 1e9 / 8
        self._debt = 0.0

    def _dup(self):
        return ModeledNetwork(self.inner.dup(), self.alpha * 1e6, self.beta * 8 / 1e9)

    def _wait(self, steps: int, nbytes: float) -> None:
        if self.size == 1:
            return
        t = steps * self.alpha + nbytes / self.beta
        self.counters.charge(t)
        self._debt += t
        if self._debt >= 0.002:
            time.sleep(self._debt)
            self._debt = 0.0

    def _busiest(self, nbytes: float) -> float:
        x = np.array([float(nbytes)])
        self.inner.all_reduce(x, op="max")
        return float(x[0])

    def _exchange_counts(self, send_counts):
        recv = self.inner._exchange_counts(send_counts)
        self._wait(self.size - 1, 8 * self.size)
        return recv

    def _all_to_all_v(self, send, send_elems, recv, recv_elems):
        self.inner._all_to_all_v(send, send_elems, recv, recv_elems)
        self._wait(self.size - 1, self._busiest(max(send.nbytes, recv.nbytes)))

    def all_reduce(self, array, op="sum"):
        self.inner.all_reduce(array, op)
        P = self.size
        self._wait(2 * (P - 1), 2 * (P - 1) / P * array.nbytes)

    def broadcast_object(self, obj, root=0):
        return self.inner.broadcast_object(obj, root)

    def allgather_object(self, obj):
        return self.inner.allgather_object(obj)

    def barrier(self):
        self.inner.barrier()

    def any_failed(self, failed, wait_s=None):
        return self.inner.any_failed(failed, wait_s)

    def abort(self, code=1):
        self.inner.abort(code)
