"""One way to write a file: build it under a temporary name beside the target, then rename it.

A reader never sees a half-written file, and a failure half-way leaves the previous file (and no
temporary) behind. Files get the usual permissions (0666 minus the umask), never a private 0600.

Example::

    >>> from zett_lab.files import atomic_path, write_atomic
    >>> write_atomic("notes.txt", "hello")                     # doctest: +SKIP
    >>> with atomic_path("table.parquet") as temporary:        # doctest: +SKIP
    ...     frame.to_parquet(temporary)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed onto ``path`` when the block ends without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(descriptor)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, content: str | bytes) -> Path:
    """Write text (UTF-8) or bytes to ``path`` atomically; return the path."""
    path = Path(path)
    with atomic_path(path) as temporary:
        if isinstance(content, bytes):
            temporary.write_bytes(content)
        else:
            with temporary.open("w", encoding="utf-8", newline="") as handle:
                handle.write(content)
    return path
