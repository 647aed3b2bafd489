"""Work handed to worker processes, the results taken back in the order it was given.

The readers use this with ``-j N`` (``memtrace.load(path, jobs=N)``): the text reader for its
chunks (:mod:`memtrace.read.text_jobs`), the binary reader for its blocks of nodes. Workers fork on
Linux (nothing to import again, no need to find the parent's main module) and spawn elsewhere;
they leave Ctrl-C to the main process, which stops them all. A call that no worker could run
(one died: out of memory, say; or none could start) runs in the main process instead, so a
result is never lost, only later; an exception the call raises (a chunk it does not recognise)
comes back as raised.
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import concurrent.futures

T = TypeVar("T")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class InOrder(Generic[T]):
    """Calls of ``function`` in ``jobs`` processes; each result goes to its ``then``, in call order.

    At most ``2 * jobs`` calls are in flight, so the arguments and results held stay bounded.
    Use as a context manager; :meth:`finish` waits for the calls still in flight.
    """

    def __init__(self, function: Callable[..., T], jobs: int):
        import concurrent.futures
        import multiprocessing

        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.function, self.jobs = function, jobs
        self.pool: concurrent.futures.ProcessPoolExecutor | None
        try:
            self.pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start)
        except (OSError, NotImplementedError, ValueError):  # no processes here (no /dev/shm, say): all in this one
            self.pool = None
        self.calls: collections.deque[tuple[concurrent.futures.Future[T] | None, tuple[Any, ...], Callable[[T], None]]]
        self.calls = collections.deque()

    def __enter__(self) -> InOrder[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        # Always wait, an error or Ctrl-C too (the calls not started are cancelled; the running ones are one
        # chunk each): a pool left to wind down keeps a thread that takes its lock now and then, and a worker
        # forked for a later pool while that lock is held inherits it held; when the worker collects the old
        # pool's garbage, the callback that takes the lock never returns, and the read hangs (about one
        # damaged-text fuzz run in 30 did).
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=kind is not None)

    def submit(self, arguments: tuple[Any, ...], then: Callable[[T], None]) -> None:
        """Hand ``function(*arguments)`` to a worker; its result will go to ``then``."""
        from concurrent.futures import BrokenExecutor

        try:
            future: concurrent.futures.Future[T] | None = None
            if self.pool is not None:
                future = self.pool.submit(self.function, *arguments)
        except (BrokenExecutor, OSError):  # (a worker that died, or one that could not start)
            future = None
        self.calls.append((future, arguments, then))
        while len(self.calls) > 2 * self.jobs or (self.calls and self._ready(self.calls[0][0])):
            self._take()

    def finish(self) -> None:
        while self.calls:
            self._take()

    @staticmethod
    def _ready(future: concurrent.futures.Future[T] | None) -> bool:
        return future is None or future.done()

    def _take(self) -> None:
        from concurrent.futures import BrokenExecutor

        future, arguments, then = self.calls.popleft()
        try:
            if future is None:
                raise BrokenExecutor
            result = future.result()
        except BrokenExecutor:  # no worker could run it: run it here
            result = self.function(*arguments)
        then(result)


def _worker_start() -> None:
    """In a worker: leave Ctrl-C to the main process, which stops the pool and says so in one line; and
    never collect what the fork copied from the main process (garbage there may hold another pool, whose
    collection takes a lock that some thread of the main process may have held when it forked)."""
    import gc
    import signal

    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
