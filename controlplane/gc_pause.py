"""Pausing Python's cyclic garbage collector over a burst of allocation.

An admission pass over 15,000 waiting requests allocates a few hundred thousand objects
that all live until it returns. Each allocation threshold crossed starts a collection, and
the full ones walk every object of the process (Django's included), while the pass makes
almost no cycles to free. Paused, the pass's objects are freed by reference counting as
before; cycles wait for the next collection after it.

Only where what is allocated dies with the block: objects kept after it (a cache) would
set off, once it ends, the collections they were spared, in whatever runs next.
Process-wide, as the collector is: passes in threads of one process may overlap (all but
one then return busy), so the collector resumes when the last pause ends, and only if it
was running when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_paused_here = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector paused (nested and threads: see above)."""
    global _depth, _paused_here
    with _lock:
        if _depth == 0 and gc.isenabled():
            gc.disable()
            _paused_here = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _paused_here:
                _paused_here = False
                gc.enable()
