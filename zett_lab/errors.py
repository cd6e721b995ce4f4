"""The one exception and warning family zett_lab uses for bad input, bad settings and repairs.

Errors stop the work and name the file and place, or the setting, that is wrong. Warnings say
what zett_lab repaired or skipped and carry on; they print as one readable line,
``zett_lab: <message>``, instead of Python's default ``file:line: Category: message`` followed
by a line of zett_lab's own source. Filters work as usual (``warnings.simplefilter("error",
ZettLabWarning)``, ``pytest.warns``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable


class ZettLabError(Exception):
    """A user-facing error: the message names the file and place, or the setting, that is wrong.

    ``cli``: the message as the command line says it, where the message's advice names Python arguments
    (``prices=...``, ``SummaryCache(path=...)``) that have a flag or variable there instead; None when it is the same.
    """

    def __init__(self, *args: object, cli: str | None = None) -> None:
        super().__init__(*args)
        self.cli = cli


class InputError(ZettLabError, ValueError):
    """A recorded conversation or side file that cannot be read as what it claims to be."""

    def __init__(self, path: object, where: str | None, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        location = f"{self.path}: {where}" if where else self.path
        super().__init__(f"{location}: {problem}")


class SettingError(ZettLabError, ValueError):
    """A replay, sweep or summarizer setting that is out of range."""


class OutputError(InputError):
    """An output path zett_lab refuses to write: one of the inputs, or an existing file not to be replaced."""


class MissingExtra(ZettLabError, ImportError):
    """A part of zett-lab whose optional dependencies are not installed; the message names the extra to install."""

    def __init__(self, what: str, extra: str, missing: list[str]) -> None:
        self.extra = extra
        self.missing = missing
        super().__init__(
            f"{what} needs zett-lab's {extra!r} extra, which is not installed (missing: {', '.join(missing)}): "
            f'pip install "zett-lab[{extra}]"'
        )


class ResultFailure(ZettLabError):
    """Part of the work failed (a summary, a replay, a sweep cell) and a strict run stopped there,
    or nothing succeeded at all; the command line exits 1 for it, not 2 as for bad input."""


class Terminated(KeyboardInterrupt):
    """The process was asked to stop (``SIGTERM``, as ``kill``, docker and CI runners send it).

    A :class:`KeyboardInterrupt`, so every cleanup that Ctrl-C runs (workers stopped, temporary
    data removed) runs for it too; the command line exits 143 for it.
    """


class ZettLabWarning(UserWarning):
    """Something zett_lab repaired or skipped; the message names the file and place, or the setting."""


class SummaryFailureWarning(ZettLabWarning):
    """Summaries failed: the results hold no measurement for them (one warning per distinct cause)."""


class SkippedFileWarning(ZettLabWarning):
    """A file of a folder was not read (unknown format, or broken): the message names it and says why."""


class SettingWarning(ZettLabWarning):
    """A setting the engine accepts but that does not do what its name suggests."""


def warn(message: str, category: type[ZettLabWarning] = ZettLabWarning, *, stacklevel: int = 2) -> None:
    """Issue a zett_lab warning (shown as ``zett_lab: message``); ``stacklevel`` as in :func:`warnings.warn`."""
    warnings.warn(message, category, stacklevel=stacklevel + 1)


def _format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """``zett_lab: message`` for zett_lab's warnings; every other warning keeps Python's format."""
    if issubclass(category, ZettLabWarning):
        return f"zett_lab: {message}\n"
    return _python_format_warning(message, category, filename, lineno, line)


#: Python's formatter, taken once: a reload of this module (autoreload in a notebook) keeps it instead of wrapping ours.
_python_format_warning: Callable[..., str] = globals().get("_python_format_warning", warnings.formatwarning)
warnings.formatwarning = _format_warning
