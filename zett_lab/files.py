"""One way to write a file, and one rule for where zett_lab may write.

Writing: an output appears whole or not at all, and nothing else of it is ever left in the
user's folder, whatever stops the run (an error, Ctrl-C, ``kill``, even ``kill -9``):

- a file is built as an unnamed file in the target's folder (Linux ``O_TMPFILE``: it has no name
  until it is complete, and vanishes with the process that holds it) and then linked in under its
  name; where a file system cannot do that, under a hidden temporary name beside it, removed on
  any error. A writer that needs a path (SQLite, Parquet) builds the file in a private folder of
  the system's temporary folder (``TMPDIR``) first;
- a folder is built under a hidden name beside the target (``.NAME.zett-lab-PID.tmp``), locked
  while it is built, and renamed in place; one left behind by a killed process is removed by the
  next zett_lab write beside it.

A new output is created exclusively: linked or renamed in only if nothing appeared at that name
meanwhile (``RENAME_NOREPLACE``); an existing one is replaced only when asked. Every write error
(a full disk, a read-only folder) is one :class:`~zett_lab.errors.OutputError` naming the output.

Where: :func:`check_output` is the rule every command and every ``save()`` applies, before any
work starts: an output is never one of the inputs (nor a folder holding one), whatever the
user asks; an existing output is replaced only when asked (``--force`` on the command line,
``overwrite=True`` in Python). It also claims the output for this process until it is written:
a second run writing the same output at the same time is refused at once, not after its work.

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

import atexit
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError

#: What a staging folder's name carries after the target's name (``.NAME.zett-lab-PID.tmp``).
STAGING_MARK = ".zett-lab-"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_failed(path: Path, error: OSError, staged: Path | None = None) -> OutputError:
    """The one error for an output that could not be written: its name, and the system's reason."""
    reason = error.strerror or str(error)
    where = ""
    if error.filename is not None and Path(str(error.filename)) != path:
        where = f" (at {error.filename})"
    if staged is not None and error.errno in (errno.ENOSPC, errno.EDQUOT):
        where += f"; it is built in {staged.parent} first (TMPDIR chooses that folder)"
    return OutputError(path, None, f"could not be written: {reason}{where}; nothing was written there")


# --- linking a finished file in place ----------------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_AT_FDCWD = -100
_AT_SYMLINK_FOLLOW = 0x400
_AT_EMPTY_PATH = 0x1000
_RENAME_NOREPLACE = 1


def _link_descriptor(fd: int, path: Path) -> None:
    """Give the unnamed file open at ``fd`` the name ``path`` (FileExistsError when ``path`` exists)."""
    assert _LIBC is not None
    target = os.fsencode(path)
    if _LIBC.linkat(_AT_FDCWD, f"/proc/self/fd/{fd}".encode(), _AT_FDCWD, target, _AT_SYMLINK_FOLLOW) == 0:
        return
    code = ctypes.get_errno()
    if code == errno.ENOENT and _LIBC.linkat(fd, b"", _AT_FDCWD, target, _AT_EMPTY_PATH) == 0:  # no /proc
        return
    code = ctypes.get_errno() or code
    raise OSError(code, os.strerror(code), str(path))


def rename_new(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target`` only if nothing is at ``target`` (FileExistsError otherwise).

    ``renameat2(RENAME_NOREPLACE)`` on Linux: the check and the rename are one step. Elsewhere (or
    on a file system without it) the check comes just before the rename.
    """
    if _LIBC is not None and hasattr(_LIBC, "renameat2"):
        if _LIBC.renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(target))
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(source, target)


def _created_meanwhile(path: Path) -> OutputError:
    return OutputError(
        path, None, "was created by another program while this run worked; it was left as it is (choose another output)"
    )


def _open_unnamed(folder: Path) -> int | None:
    """A descriptor of a new unnamed file in ``folder`` (``O_TMPFILE``), or None where it is not available."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or _LIBC is None:
        return None
    try:
        return os.open(folder, flag | os.O_RDWR, 0o666)
    except OSError as error:
        if error.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None
        raise


def _publish_descriptor(fd: int, path: Path, overwrite: bool) -> None:
    """Name the finished unnamed file ``fd`` as ``path``: exclusively, or replacing it when allowed."""
    if not overwrite:
        try:
            _link_descriptor(fd, path)
        except FileExistsError:
            raise _created_meanwhile(path) from None
        return
    # Replacing needs a name to rename from: one that exists only between these two calls.
    for attempt in range(100):
        aside = path.with_name(f".{path.name}{STAGING_MARK}{os.getpid()}-{attempt}.tmp")
        try:
            _link_descriptor(fd, aside)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - a hundred leftovers of this very pid
        raise OSError(errno.EEXIST, "no free temporary name", str(path))
    try:
        os.replace(aside, path)
    except BaseException:
        aside.unlink(missing_ok=True)
        raise


def _write_descriptor(fd: int, pieces: Iterable[bytes]) -> None:
    for piece in pieces:
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view) :]


def _publish_bytes(path: Path, pieces: Iterable[bytes], overwrite: bool) -> None:
    """Write ``pieces`` as the file ``path``: built unnamed (or hidden) beside it, then named in one step."""
    fd = _open_unnamed(path.parent)
    if fd is not None:
        try:
            _write_descriptor(fd, pieces)
            _publish_descriptor(fd, path, overwrite)
        finally:
            os.close(fd)
        return
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}{STAGING_MARK}{os.getpid()}-", suffix=".tmp")
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.writelines(pieces)
        os.chmod(temporary, 0o666 & ~_umask())
        if overwrite:
            os.replace(temporary, path)
        else:
            try:
                rename_new(temporary, path)
            except FileExistsError:
                raise _created_meanwhile(path) from None
    finally:
        temporary.unlink(missing_ok=True)


def _publish_file(staged: Path, path: Path, overwrite: bool) -> None:
    """Copy a finished file from its private folder into the target's folder and name it there in one step."""
    fd = _open_unnamed(path.parent)
    if fd is None:
        _publish_bytes(path, [staged.read_bytes()], overwrite)
        return
    try:
        with staged.open("rb") as source:
            size = os.fstat(source.fileno()).st_size
            offset = 0
            while offset < size:
                sent = os.sendfile(fd, source.fileno(), offset, size - offset)
                if sent == 0:  # pragma: no cover - the file shrank under us
                    break
                offset += sent
        _publish_descriptor(fd, path, overwrite)
    finally:
        os.close(fd)


# --- the public writers ---------------------------------------------------------------------------------


@contextmanager
def atomic_path(path: str | Path, *, overwrite: bool = True) -> Iterator[Path]:
    """A temporary path to build ``path`` at; it becomes ``path`` when the block ends without error.

    The temporary is in a private folder of the system's temporary folder (so a writer's side files,
    such as SQLite's ``-wal`` and ``-shm``, never appear beside ``path``); it is removed whatever
    happens. ``overwrite=False``: fail (:class:`OutputError`) if ``path`` appeared meanwhile.

    Raises:
        OutputError: the file could not be written (naming ``path`` and the system's reason).
    """
    path = Path(path)
    _check_folder(path)
    staging = Path(tempfile.mkdtemp(prefix="zett-lab-output-"))
    staged = staging / (path.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace") or "output")
    try:
        try:
            yield staged
        except OSError as error:  # while building it, in the private folder
            raise write_failed(path, error, staged) from error
        try:
            _publish_file(staged, path, overwrite)
        except OSError as error:
            raise write_failed(path, error) from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        release_output(path)


def write_atomic(path: str | Path, content: str | bytes | Iterable[str], *, overwrite: bool = True) -> Path:
    """Write text (UTF-8; a lone surrogate as its escape), bytes, or text in pieces to ``path`` atomically.

    Pieces (such as ``json.JSONEncoder.iterencode``'s) are written as they come, a megabyte at a time,
    so a large output's whole text is never held at once. Returns the path.

    ``overwrite=False``: fail (:class:`OutputError`) if ``path`` appeared meanwhile.

    Raises:
        OutputError: the file could not be written (naming ``path`` and the system's reason).
    """
    path = Path(path)
    _check_folder(path)
    # A lone surrogate (a file name's byte that is not UTF-8, kept by Python as U+DCxx) is written as the
    # escape ``\udcxx``: valid inside a JSON string, readable in a page, never an encoding error at the end.
    if isinstance(content, bytes):
        pieces: Iterable[bytes] = [content]
    else:
        pieces = _encoded([content] if isinstance(content, str) else content)
    try:
        _publish_bytes(path, pieces, overwrite)
    except OSError as error:
        raise write_failed(path, error) from error
    finally:
        release_output(path)
    return path


#: How much text :func:`write_atomic` gathers from pieces before it encodes and writes them.
_WRITTEN_AT_ONCE = 1 << 20


def _encoded(pieces: Iterable[str]) -> Iterator[bytes]:
    """Text pieces as UTF-8 (a lone surrogate as its escape), gathered into about a megabyte each."""
    gathered: list[str] = []
    size = 0
    for piece in pieces:
        gathered.append(piece)
        size += len(piece)
        if size >= _WRITTEN_AT_ONCE:
            yield "".join(gathered).encode("utf-8", "backslashreplace")
            gathered, size = [], 0
    if gathered:
        yield "".join(gathered).encode("utf-8", "backslashreplace")


@contextmanager
def atomic_folder(path: str | Path, *, overwrite: bool = True) -> Iterator[Path]:
    """A new folder beside ``path`` to fill; moved onto ``path`` when the block ends without error.

    An existing folder at ``path`` is replaced only then (moved aside, then removed), and only
    with ``overwrite``; after a failure the staging folder is removed and ``path`` is as it was.
    Staging folders that a killed process left beside ``path`` are removed first.

    Raises:
        OutputError: the folder could not be written (naming ``path`` and the system's reason).
    """
    path = Path(path)
    _check_folder(path)
    remove_stale_staging(path)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}{STAGING_MARK}{os.getpid()}-", suffix=".tmp"))
    lock = os.open(staging, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel when this process ends, however it ends
        try:
            yield staging
            os.chmod(staging, 0o777 & ~_umask())
            if path.exists() and overwrite:
                old = staging.with_name(staging.name[:-4] + ".old")
                path.rename(old)
                staging.rename(path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                try:
                    rename_new(staging, path)
                except FileExistsError:
                    raise _created_meanwhile(path) from None
        except OSError as error:
            raise write_failed(path, error) from error
    finally:
        os.close(lock)
        shutil.rmtree(staging, ignore_errors=True)
        release_output(path)


def remove_stale_staging(path: Path) -> None:
    """Remove staging folders of ``path`` that no running process holds (left by a killed one)."""
    prefix = f".{path.name}{STAGING_MARK}"
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            if not entry.name.startswith(prefix) or not entry.name.endswith((".tmp", ".old")):
                continue
            if entry.is_dir() and not entry.is_symlink():
                try:
                    fd = os.open(entry, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its process is still building it
                finally:
                    os.close(fd)
                shutil.rmtree(entry, ignore_errors=True)


def _check_folder(path: Path) -> None:
    """Create the output's folder when missing (as every writer always did); a failure names the output."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise write_failed(path, error) from error


# --- claims: one writer per output at a time -----------------------------------------------------------

_CLAIMS: dict[bytes, socket.socket] = {}
_CLAIMS_LOCK = threading.Lock()


def _claim_name(path: Path) -> bytes:
    digest = hashlib.sha256(os.fsencode(path.expanduser().resolve())).hexdigest()[:40]
    return b"\0zett-lab-output-" + digest.encode()


def claim_output(path: str | os.PathLike[str]) -> None:
    """Hold ``path`` for this process until it is written (:func:`release_output`) or the process ends.

    The claim is a name in Linux's abstract socket namespace: nothing on disk, and the kernel drops
    it when the process ends, however it ends. Elsewhere nothing is claimed (the exclusive rename at
    the end still keeps a second run from replacing a new output).

    Raises:
        OutputError: another process is writing ``path`` right now.
    """
    if not sys.platform.startswith("linux"):
        return
    name = _claim_name(Path(path))
    with _CLAIMS_LOCK:
        if name in _CLAIMS:
            return
        holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            holder.bind(name)
        except OSError as error:
            holder.close()
            if error.errno != errno.EADDRINUSE:
                return  # no abstract namespace here: rely on the exclusive rename
            raise OutputError(
                path,
                None,
                "is being written by another zett_lab run right now; wait for it to finish, or choose another output",
            ) from None
        holder.set_inheritable(False)
        _CLAIMS[name] = holder


def release_output(path: str | os.PathLike[str]) -> None:
    """Let other processes write ``path`` again (after it was written, or when this run gave up)."""
    if not sys.platform.startswith("linux"):
        return
    with _CLAIMS_LOCK:
        holder = _CLAIMS.pop(_claim_name(Path(path)), None)
    if holder is not None:
        holder.close()


@contextmanager
def claims_released() -> Iterator[None]:
    """Release, when the block ends, every claim taken inside it (a command's outputs, written or not)."""
    with _CLAIMS_LOCK:
        before = set(_CLAIMS)
    try:
        yield
    finally:
        with _CLAIMS_LOCK:
            taken = [_CLAIMS.pop(name) for name in list(_CLAIMS) if name not in before]
        for holder in taken:
            holder.close()


def _release_every_claim() -> None:
    with _CLAIMS_LOCK:
        holders = list(_CLAIMS.values())
        _CLAIMS.clear()
    for holder in holders:
        holder.close()


atexit.register(_release_every_claim)


# --- the rule --------------------------------------------------------------------------------------------

_NEVER_OVER = "zett_lab never writes over its inputs"
_NEVER_INTO = "zett_lab never writes into its inputs"


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file or folder (also through symlinks and hard links)."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist
        return False


_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "directory",
    stat.S_IFIFO: "FIFO (named pipe)",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
}


def kind_of(mode: int) -> str:
    """``file``, ``directory``, or what else a ``stat`` mode says a path is (a FIFO, a device, a socket)."""
    return _KINDS.get(stat.S_IFMT(mode), "special file")


def _wrong_kind(target: Path, folder: bool, force_hint: str) -> OutputError | None:
    """The refusal of an existing ``target`` (after symlinks) that is not what the output replaces, else None."""
    try:
        kind = kind_of(target.stat().st_mode)
    except OSError:  # nothing there (or unreachable: the write names that)
        return None
    if kind == ("directory" if folder else "file"):
        return None
    noun = "folder" if folder else "file"
    link = f" (through the link to {target.resolve()})" if target.is_symlink() else ""
    return OutputError(
        target,
        None,
        f"is a {kind}{link}, not a {noun}; zett_lab replaces only a {noun}, even with {force_hint}: "
        "choose another output",
    )


def refuse_inputs(
    target: Path, inputs: Iterable[str | os.PathLike[str] | None], choose: str = "choose another output"
) -> None:
    """Refuse ``target`` (a file to be written) when it is one of ``inputs``, holds one, or is inside an input
    folder; ``choose`` says what to do instead.

    Raises:
        OutputError: naming ``target`` and, for an input, which input it is.
    """
    resolved = target.resolve()
    for item in inputs:
        if item is None:
            continue
        source = Path(item).expanduser()
        if _same_file(target, source):
            raise OutputError(target, None, f"is one of the inputs; {_NEVER_OVER}: {choose}")
        if resolved in source.resolve().parents:
            raise OutputError(target, None, f"holds an input ({source}); {_NEVER_OVER}: {choose}")
        if source.is_dir() and source.resolve() in resolved.parents:
            raise OutputError(target, None, f"is inside an input folder ({source}); {_NEVER_INTO}: {choose}")


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    overwrite: bool = False,
    force_hint: str = "overwrite=True",
    folder: bool = False,
) -> Path:
    """Refuse an output path that is an input, holds an input, exists and may not be replaced, exists as
    anything but a file (a folder when ``folder``: a FIFO, a device, even through a symlink, with
    ``overwrite`` or not), or is being written by another run; claim it for this process (:func:`claim_output`).

    Args:
        path: Where the output will be written.
        inputs: Every file the output is made from, and every folder read as a whole (a saved
            sweep): nothing is written inside such a folder. None entries are skipped.
        overwrite: Whether an existing output may be replaced (never an input).
        force_hint: How the caller asks for ``overwrite`` (``--force`` on the command line).
        folder: The output is a folder (a saved sweep), not a file.

    Raises:
        OutputError: naming ``path`` and, for an input, which input it is.
    """
    target = Path(path).expanduser()
    refuse_inputs(target, inputs)
    wrong = _wrong_kind(target, folder, force_hint)
    if wrong is not None:
        raise wrong
    claim_output(target)
    if target.exists() and not overwrite:
        release_output(target)
        raise OutputError(target, None, f"already exists; choose a new output, or pass {force_hint} to replace it")
    return target
