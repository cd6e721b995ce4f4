"""A folder nobody may write into, also when the tests run as root.

Root ignores file permissions through the capabilities CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH.
While the block runs, they are taken out of the calling thread's effective set (they stay
permitted, so they come back afterwards), and the folder is made read-only; permission checks
then behave as they do for an ordinary user.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_CAPABILITY_VERSION_3 = 0x20080522
_DAC_CAPABILITIES = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capabilities(change=None) -> int:
    """The thread's effective capability bits (low word); ``change(bits)`` sets new ones first."""
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _Header(_CAPABILITY_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    if change is not None:
        data[0].effective = change(data[0].effective)
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
    return data[0].effective


@contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """``folder`` without write permission for this thread, for the duration of the block."""
    mode = folder.stat().st_mode
    folder.chmod(stat.S_IMODE(mode) & ~0o222)
    saved = None
    try:
        if os.geteuid() == 0:
            try:
                saved = _capabilities()
                _capabilities(lambda bits: bits & ~_DAC_CAPABILITIES)
            except OSError as error:
                if os.environ.get("CI") == "true":
                    pytest.fail(f"cannot make a read-only folder as root: {error}")
                pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE: {error}")
        probe = folder / ".write-probe"
        try:
            probe.touch()
        except PermissionError:
            pass
        else:
            probe.unlink()
            pytest.fail(f"{folder} is still writable; the read-only test would prove nothing")
        yield folder
    finally:
        if saved is not None:
            _capabilities(lambda bits: saved)
        folder.chmod(stat.S_IMODE(mode))
