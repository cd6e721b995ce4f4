"""Python's cyclic garbage collector paused for work that makes many objects in no cycle.

A full collection walks every object the process holds; work that allocates millions of tuples, lists and
dicts (building a long conversation's anchor index, summarizing a long span offline) sets off many of them
while none of its objects can be in a cycle, so its garbage goes by reference counting alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (when it runs) for a block or a function: building or reading a
    long conversation's index makes millions of tuples, lists and dicts in no cycle, and each full collection
    they set off walks every object the process holds (~1.5 of the 7.5 s CPU building a 5,000-message session's
    index takes; over half of reading it back); an offline summary of a long span likewise. Threads may pause it
    together: it runs again once the first that paused it while it ran is done."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
