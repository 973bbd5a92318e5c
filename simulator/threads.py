"""The CPUs a process may use, and thread pools made on first use that a forked child forgets
(it has none of its parent's threads: a pool it inherited would queue jobs that never run)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


def usable_cpus() -> int:
    """The CPUs this process may run on (a container or taskset may allow fewer than the
    machine has)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LazyPool:
    """A ThreadPoolExecutor started on the first job, with workers() threads then."""

    def __init__(self, name: str, workers: Callable[[], int]):
        self._name, self._workers = name, workers
        self._pool: ThreadPoolExecutor | None = None
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def submit(self, job, *args) -> Future:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers(), thread_name_prefix=self._name)
        return self._pool.submit(job, *args)

    def _forget(self) -> None:
        self._pool = None
