"""One way to write a file, and one rule for where zett_lab may write.

Writing: build the file under a temporary name beside the target, then rename it. A reader never
sees a half-written file, and a failure half-way leaves the previous file (and no temporary)
behind. Files get the usual permissions (0666 minus the umask), never a private 0600.

Where: :func:`check_output` is the rule every command and every ``save()`` applies, before any
work starts: an output is never one of the inputs (nor a folder holding one), whatever the
user asks; an existing output is replaced only when asked (``--force`` on the command line,
``overwrite=True`` in Python).

Example::

    >>> from zett_lab.files import atomic_folder, atomic_path, check_output, write_atomic
    >>> check_output("notes.txt", inputs=["session.jsonl"])    # doctest: +SKIP
    >>> write_atomic("notes.txt", "hello")                     # doctest: +SKIP
    >>> with atomic_path("table.parquet") as temporary:        # doctest: +SKIP
    ...     frame.to_parquet(temporary)
    >>> with atomic_folder("run.sweep") as folder:             # doctest: +SKIP
    ...     frame.to_parquet(folder / "results.parquet")
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


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


@contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """A new folder beside ``path`` to fill; moved onto ``path`` when the block ends without error.

    An existing folder at ``path`` is replaced only then (moved aside, then removed); after a
    failure the staging folder is removed and ``path`` is as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield staging
        os.chmod(staging, 0o777 & ~_umask())
        if path.exists():
            old = path.with_name(f"{staging.name[:-4]}.old")
            path.rename(old)
            staging.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
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


_NEVER_OVER = "zett_lab never writes over its inputs: choose another output"
_NEVER_INTO = "zett_lab never writes into its inputs: choose another output"


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file or folder (also through symlinks and hard links)."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist
        return False


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    overwrite: bool = False,
    force_hint: str = "overwrite=True",
) -> Path:
    """Refuse an output path that is an input, holds an input, or exists and may not be replaced.

    Args:
        path: Where the output will be written.
        inputs: Every file the output is made from, and every folder read as a whole (a saved
            sweep): nothing is written inside such a folder. None entries are skipped.
        overwrite: Whether an existing output may be replaced (never an input).
        force_hint: How the caller asks for ``overwrite`` (``--force`` on the command line).

    Raises:
        OutputError: naming ``path`` and, for an input, which input it is.
    """
    target = Path(path).expanduser()
    resolved = target.resolve()
    for item in inputs:
        if item is None:
            continue
        source = Path(item).expanduser()
        if _same_file(target, source):
            raise OutputError(target, None, f"is one of the inputs; {_NEVER_OVER}")
        if resolved in source.resolve().parents:
            raise OutputError(target, None, f"holds an input ({source}); {_NEVER_OVER}")
        if source.is_dir() and source.resolve() in resolved.parents:
            raise OutputError(target, None, f"is inside an input folder ({source}); {_NEVER_INTO}")
    if target.exists() and not overwrite:
        raise OutputError(target, None, f"already exists; choose a new output, or pass {force_hint} to replace it")
    return target
