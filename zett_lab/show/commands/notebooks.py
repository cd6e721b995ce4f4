"""The notebook commands: ``zett-lab demo`` writes the notebooks and fixtures, ``zett-lab lab`` opens JupyterLab
on them."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ...errors import InputError, SettingError
from ..arguments import EXIT_OK, PROG


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import next_steps, write_demo
    from ..extras import require

    require("lab", "zett-lab demo (notebooks to run in JupyterLab)")
    result = write_demo(args.folder)
    for path in result.written:
        print(f"wrote {path}")
    for path in result.kept:
        print(f"kept  {path} (already there, not overwritten)")
    print(next_steps(result))
    return EXIT_OK


def cmd_lab(args: argparse.Namespace) -> int:
    from ..demo import checkout_notebooks
    from ..extras import require

    require("lab", "zett-lab lab")
    if args.folder is None:
        folder = checkout_notebooks()
        if folder is None:
            raise SettingError("no notebooks folder given: run 'zett-lab demo DIR' first, then 'zett-lab lab DIR'")
    else:
        folder = Path(args.folder)
        if (folder / "notebooks").is_dir():
            folder = folder / "notebooks"
    if not folder.is_dir():
        raise InputError(folder, None, "no such notebooks folder (run 'zett-lab demo DIR' to write one)")
    folder = folder.resolve()
    command = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={folder}"]
    if _is_root() and "--allow-root" not in args.jupyter_args:
        # Jupyter refuses to start as root ("Running as root is not recommended"), which is how most containers run.
        command.append("--allow-root")
        print(f"{PROG}: running as root: starting JupyterLab with --allow-root", file=sys.stderr)
    command += args.jupyter_args
    if args.dry_run:
        import shlex

        print(shlex.join(command))
        return 0
    os.chdir(folder)
    os.execv(sys.executable, command)
    return 0  # pragma: no cover (execv does not return)


def _is_root() -> bool:
    """Whether this process runs as root (POSIX; never on Windows, which has no root user)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0
