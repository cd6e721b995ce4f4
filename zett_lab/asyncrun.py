"""Running zett-agent's async runtime from ordinary (and notebook) code."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any


def run_sync(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to completion, also from inside a running event loop (Jupyter).

    In a notebook a loop is already running, so the coroutine gets its own loop
    in a worker thread instead of failing with "asyncio.run() cannot be called".
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
