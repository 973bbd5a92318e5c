"""A line on stderr when a wait runs long, saying what it is: a first run compiles the GDDR6
engine (numba), which takes seconds once and is cached afterwards."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# a wait longer than this says what it is doing
SLOW_S = 2.0


@contextmanager
def if_slow(message: str, after_s: float = SLOW_S) -> Iterator[None]:
    """Print `message` to stderr if the block is still running after `after_s` seconds."""
    timer = threading.Timer(after_s, lambda: print(message, file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


COMPILING_ENGINE = ("compiling the GDDR6 engine for this machine (numba, once per install; "
                    "cached for later runs) ...")
