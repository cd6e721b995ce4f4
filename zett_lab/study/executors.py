"""Where a sweep's units run: in this process, on a local process pool, or on a ``dask.distributed`` cluster.

Any :class:`concurrent.futures.Executor` works. The default is a process pool kept for the
session (its workers keep their token-count memo and proven replays between sweeps). A
``dask.distributed`` client's ``get_executor()`` sends units to a cluster whose workers need
not share a filesystem with the driver: each keeps summaries in its own cache and sends the
new ones back with its results (:mod:`zett_lab.study.sweep` merges them into the driver's).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import tempfile
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from ..collector import collect_in_batches
from ..errors import SettingError
from ..tokens import warm_up

T = TypeVar("T")
P = ParamSpec("P")

#: Modules the default pool's fork server imports once, so workers start with them (and the vocabulary) loaded.
PRELOAD = (
    "zett_lab.study.units",
    "zett_lab.replay",
    "zett_lab.summarizers",
    "zett_lab.measure",
    "zett_lab.study.worker_start",
)


class SerialExecutor(cf.Executor):
    """Runs each task in the calling thread when it is submitted (``executor="serial"``)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> cf.Future[T]:
        future: cf.Future[T] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            future.set_exception(exc)
        return future


#: Longest path a Unix socket may have (``sun_path`` holds 108 bytes, the last one NUL).
SOCKET_PATH_MAX = 107
#: What multiprocessing puts below the temporary folder for a socket: ``/pymp-XXXXXXXX/listener-XXXXXXXX``.
_SOCKET_NAME_CHARS = 32
#: Short system folders for multiprocessing's sockets when ``TMPDIR`` is too long for one.
_SHORT_TEMPORARY_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
_SOCKET_FOLDER_LOCK = threading.Lock()


def process_context() -> multiprocessing.context.BaseContext:
    """The start method of zett_lab's worker processes: ``forkserver`` where available (safe with the threads a
    notebook kernel runs), else ``spawn``.

    The fork server and a manager talk over Unix sockets that multiprocessing makes in a folder of the system's
    temporary folder. Under a ``TMPDIR`` so long that a socket's path would pass :data:`SOCKET_PATH_MAX`
    bytes (a deep CI or test folder), every pool would fail with "AF_UNIX path too long": that folder of
    multiprocessing's is made in a short system folder instead (and removed at exit, as always).
    """
    _short_socket_folder()
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _short_socket_folder() -> None:
    with _SOCKET_FOLDER_LOCK:
        if len(os.fsencode(tempfile.gettempdir())) + _SOCKET_NAME_CHARS <= SOCKET_PATH_MAX:
            return
        short = next(
            (f for f in _SHORT_TEMPORARY_FOLDERS if os.path.isdir(f) and os.access(f, os.W_OK | os.X_OK)), None
        )
        if short is None:  # nowhere shorter: the pool's own error says what failed
            return
        chosen, tempfile.tempdir = tempfile.tempdir, short
        try:
            multiprocessing.util.get_temp_dir()  # made once per process, then kept: made here, under ``short``
        finally:
            tempfile.tempdir = chosen


def warm_worker() -> None:
    """Load the o200k vocabulary when a worker starts (instead of inside its first cell); at once when the fork
    server preloaded it. The worker's collector runs less often, and its tasks freeze what they hold
    (:func:`~zett_lab.collector.collect_in_batches`)."""
    collect_in_batches(freeze_tasks=True)
    with contextlib.suppress(Exception):  # the first replay reports any real problem
        warm_up()


_POOL: cf.ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def default_workers() -> int:
    """Worker processes of the default pool: the machine's cores."""
    return max(1, os.cpu_count() or 1)


def default_executor() -> cf.ProcessPoolExecutor:
    """The process pool sweeps use by default, created once and kept for the session, its workers started at once.

    Workers keep their token-count memo and proven replays between sweeps, which is what
    makes a second sweep over the same conversations fast. Started as :func:`process_context` says, in a thread
    of this process (:func:`_start_workers`): the fork server's start (importing :data:`PRELOAD`, most of a
    second) and the workers' forks overlap whatever the caller does next (a sweep's plan; a report's grid),
    instead of idling both cores when the first unit is submitted.
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or getattr(_POOL, "_broken", False) or getattr(_POOL, "_shutdown_thread", False):
            context = process_context()
            if context.get_start_method() == "forkserver":
                context.set_forkserver_preload(list(PRELOAD))
                _start_fork_server()
            _POOL = cf.ProcessPoolExecutor(max_workers=default_workers(), mp_context=context, initializer=warm_worker)
            threading.Thread(target=_start_workers, args=(_POOL,), name="zett-lab pool start", daemon=True).start()
        return _POOL


def _start_fork_server() -> None:
    """Start the fork server with SIGINT ignored, so it and every worker forked from it inherit that: Ctrl-C
    (sent to the terminal's whole process group) reaches only this process, which stops the workers itself
    (:func:`stop_workers`), instead of a traceback from each of them and from the fork server's preload.

    Only from the main thread (signal dispositions are set there); ``SIG_IGN`` survives the fork server's
    exec, and Python leaves an ignored SIGINT ignored. Spawning it takes milliseconds; its imports run after.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _start_workers(pool: cf.ProcessPoolExecutor) -> None:
    """Start ``pool``'s workers now: a pool starts a worker for a task submitted while none is idle, so one
    task that does nothing per worker (a worker that finished its own before the next is submitted leaves the
    rest to start with the sweep's first units, then from the fork server already running)."""
    with contextlib.suppress(Exception):  # shut down meanwhile, or unable to start: the sweep's own tasks say why
        for _ in range(default_workers()):
            pool.submit(os.getpid)


def running_pool() -> cf.ProcessPoolExecutor | None:
    """The default pool if one is running (benchmarks read its workers' peak memory)."""
    return _POOL


def worker_pids(pool: cf.ProcessPoolExecutor) -> list[int]:
    """Process ids of a pool's current workers."""
    return sorted(getattr(pool, "_processes", None) or {})


def shutdown_default_executor() -> None:
    """Stop the default pool's workers (a new one starts with the next sweep)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.shutdown(wait=True, cancel_futures=True)
            _POOL = None


def stop_workers(executor: cf.Executor) -> None:
    """Stop a process pool's workers now, with what they run (Ctrl-C, SIGTERM): none outlives the sweep.

    The pool is shut down without waiting; the default pool is started again by the next sweep.
    Other executors are left alone (their futures are cancelled by the sweep).
    """
    global _POOL
    if not isinstance(executor, cf.ProcessPoolExecutor):
        return
    processes = list((getattr(executor, "_processes", None) or {}).values())
    for process in processes:
        with contextlib.suppress(Exception):  # already gone
            process.terminate()
    with contextlib.suppress(Exception):
        executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    with _POOL_LOCK:
        if _POOL is executor:
            _POOL = None


atexit.register(shutdown_default_executor)


def resolve_executor(executor: cf.Executor | str | None) -> tuple[cf.Executor, str]:
    """The executor a sweep runs on, and a name for its config."""
    if executor is None:
        return default_executor(), f"process pool ({default_workers()} workers)"
    if executor == "serial":
        return SerialExecutor(), "serial"
    if isinstance(executor, str):
        raise SettingError(f"executor must be None, 'serial' or a concurrent.futures.Executor, got {executor!r}")
    if not callable(getattr(executor, "submit", None)):
        raise SettingError(
            f"executor must have a submit() method (a concurrent.futures.Executor), got {type(executor).__name__}"
        )
    return executor, type(executor).__name__


def parallelism(executor: cf.Executor) -> int:
    """How many units an executor runs at once (a guess for executors that do not say)."""
    value = getattr(executor, "_max_workers", None)
    if isinstance(value, int) and value > 0:
        return value
    client = getattr(executor, "_client", None)  # dask.distributed ClientExecutor
    if client is not None:
        with contextlib.suppress(Exception):  # fall back to the local guess
            return max(1, sum(client.nthreads().values()))
    if isinstance(executor, SerialExecutor):
        return 1
    return default_workers()


def in_process(executor: cf.Executor) -> bool:
    """Units run in this process (nothing is pickled; unpicklable summarizers work)."""
    return isinstance(executor, (SerialExecutor, cf.ThreadPoolExecutor))


def is_remote(executor: cf.Executor) -> bool:
    """Units may run on other machines (a ``dask.distributed`` executor): no shared filesystem assumed."""
    return type(executor).__module__.split(".")[0] == "distributed"
