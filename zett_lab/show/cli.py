"""``zett-lab``: a thin command line over the library.

Commands::

    zett-lab import PATH... -o OUT.sqlite|OUT.db|OUT.json
    zett-lab replay PATH --max-tokens N --keep-recent-tokens N [--summarizer SPEC] [--session ID] [-o trace.parquet]
    zett-lab sweep PATH... --max-tokens A:B:STEP|LIST --keep-recent-tokens ... --summarizer SPEC... -o sweep.parquet
        [--scheduler tcp://HOST:PORT]
    zett-lab report PATH_OR_SWEEP... -o report.html [--format html|md|json] [--scheduler tcp://HOST:PORT]
    zett-lab demo DIR
    zett-lab lab [DIR] [--dry-run] [-- JUPYTER_ARGS]

Exit codes (:data:`EXIT_CODES`): 0 when everything succeeded; 1 when the command ran but some
results failed (summaries, replays, sweep cells: one line per cause on stderr, and ``--strict``
stops at the first); 2 when nothing was done (bad usage, unreadable input, a bad setting, a
refused output path), with one line on stderr (``zett-lab: error: ...``); 130 when interrupted
(Ctrl-C), 143 when terminated (SIGTERM is handled like Ctrl-C: workers stopped, temporary data
removed, no partial output left).
``--debug`` shows the Python traceback instead of the one line.

Outputs: an output is never one of the command's inputs (nor a folder holding one); an existing
output is replaced only with ``--force``. Both are checked before any work starts.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..collector import collect_in_batches
from ..errors import ResultFailure, SummaryFailureWarning, Terminated, ZettLabError
from ..files import claims_released
from .arguments import (
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_FAILURES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    PROG,
    build_parser,
    parse_grid,
    parse_tokens,
)
from .commands.common import one_line
from .commands.notebooks import cmd_demo, cmd_lab
from .commands.recorded import cmd_import, cmd_replay, cmd_sweep
from .commands.report import cmd_report

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_FAILURES",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "parse_grid",
    "parse_tokens",
]


COMMANDS = {
    "import": cmd_import,
    "replay": cmd_replay,
    "sweep": cmd_sweep,
    "report": cmd_report,
    "demo": cmd_demo,
    "lab": cmd_lab,
}


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings as one line each; failed summaries are left to the per-cause lines at the end."""
    if not issubclass(category, SummaryFailureWarning):
        print(f"{PROG}: warning: {one_line(message)}", file=sys.stderr)


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``zett-lab lab ... -- ARGS``: the arguments after ``--`` go to jupyter lab, untouched."""
    if "--" in argv:
        cut = argv.index("--")
        if "lab" in argv[:cut]:
            return argv[:cut], argv[cut + 1 :]
    return argv, []


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM: stop like Ctrl-C (a second SIGTERM during the cleanup ends the process at once)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zett-lab`` console script; returns the exit code (:data:`EXIT_CODES`)."""
    import warnings

    parser = build_parser()
    arguments, passthrough = _split_passthrough(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(arguments)
    if passthrough:
        args.jupyter_args = passthrough
    debug = getattr(args, "debug", False)
    for stream in (sys.stdout, sys.stderr):  # a name with bytes that are not UTF-8 prints as escapes, never an error
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    thresholds = collect_in_batches()
    try:
        with warnings.catch_warnings(), claims_released():
            warnings.showwarning = _show_warning
            return COMMANDS[args.command](args)
    except KeyboardInterrupt as stop:
        if debug:
            raise
        terminated = isinstance(stop, Terminated)
        print(f"{PROG}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `zett-lab replay ... | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURES
    except ZettLabError as error:
        if debug:
            raise
        print(f"{PROG}: error: {one_line(error.cli or error)}", file=sys.stderr)
        return EXIT_FAILURES if isinstance(error, ResultFailure) else EXIT_ERROR
    except OSError as error:
        if debug:
            raise
        where = f"{error.filename}: " if getattr(error, "filename", None) else ""
        print(f"{PROG}: error: {where}{error.strerror or one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        gc.set_threshold(*thresholds)
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":  # python -m zett_lab.show.cli
    sys.exit(main())
