"""Make an iterator's next items in a background thread while the caller uses the current one.

The loader's prefetch (NodeLoader(prefetch=depth)) wraps its batches in ``Prefetcher``:
while the trainer computes step k, a thread samples and gathers step k+1. Sampling and
the gather spend their time in code that releases the GIL (the native and Numba kernels,
MPI calls, a modelled network's sleep), so they overlap with the model's torch ops.

    with Prefetcher(make_batches(), depth=1) as batches:
        for batch in batches:
            ...                  # batch.wait_s: how long this item kept the caller waiting

Contracts:
- The producer starts item j only once the caller has taken item j - depth: at most
  ``depth`` items are made ahead, so memory stays bounded, and how far the producer
  got is a function of how many items the caller took. That matters when making an item
  runs collectives: if every rank stops after the same item, every rank's producer has
  started the same items, and close() lets it finish them, so no collective is left
  half-matched on the communicator the next epoch's producer will use.
- Items come in the producer's order; an exception in the producer is raised in the
  caller at the item where it happened, with its traceback.
- The thread is a daemon: a process that ends on an error never waits for it.
"""

from __future__ import annotations

import collections
import threading
import time

_DONE = object()


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetcher:
    def __init__(self, items, depth: int = 1, name: str = "fastsample-prefetch"):
        if depth < 1:
            raise ValueError(f"depth must be positive (got {depth})")
        self._ready: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._allowed = depth  # items the producer may start
        self._closing = False
        self._thread = threading.Thread(target=self._produce, args=(iter(items),), name=name, daemon=True)
        self._thread.start()

    def _produce(self, items) -> None:
        made = 0
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: made < self._allowed or self._closing)
                    if made >= self._allowed:  # closing, and every permitted item is made
                        return
                item = next(items, _DONE)
                made += 1
                self._hand(item)
                if item is _DONE:
                    return
        except BaseException as e:  # raised in the caller
            self._hand(_Raised(e))

    def _hand(self, item) -> None:
        with self._cond:
            self._ready.append(item)
            self._cond.notify_all()

    def __iter__(self):
        return self

    def __next__(self):
        t0 = time.perf_counter()
        with self._cond:
            if self._closing:
                raise StopIteration
            self._cond.wait_for(lambda: self._ready)
            item = self._ready.popleft()
            self._allowed += 1
            self._cond.notify_all()
        waited = time.perf_counter() - t0
        if item is _DONE:
            self.close()
            raise StopIteration
        if isinstance(item, _Raised):
            self.close(wait=False)  # the producer has stopped; a peer may never finish its collective
            raise item.error
        if hasattr(item, "wait_s"):
            item.wait_s = waited
        return item

    def close(self, wait: bool = True) -> None:
        """Start no new item; with ``wait``, let the thread finish the items it may still
        start (see the module doc) and end. Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if wait and self._thread is not threading.current_thread():
            self._thread.join()
        self._ready.clear()

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb) -> None:
        # a finished loop or a break (the generator around it closed): finish the permitted
        # items; an error: do not wait on collectives that a failed peer may never join
        self.close(wait=kind is None or issubclass(kind, GeneratorExit))
