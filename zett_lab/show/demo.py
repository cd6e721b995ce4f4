"""The notebooks and sample sessions that come with zett-lab, and ``zett-lab demo DIR`` writing them out.

An installed wheel carries them under ``zett_lab/data/samples/`` (the build copies the repository's
``notebooks/`` and ``fixtures/`` there); a source checkout uses those folders directly. Either way the
layout written into a folder is the same, so the notebooks find ``fixtures/`` by walking up::

    DIR/notebooks/01-explore.ipynb ... 04-loss-report.ipynb
    DIR/fixtures/sessions.sqlite  DIR/fixtures/sessions.probes.json

Example::

    >>> from zett_lab.show.demo import write_demo
    >>> written = write_demo("my-study")        # doctest: +SKIP
    >>> written.kept                             # files that were already there, left untouched  # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, ZettLabError

PACKAGE = Path(__file__).resolve().parent.parent
#: Where a wheel carries the samples (mapped from the repository by the build configuration).
PACKAGED = PACKAGE / "data" / "samples"
#: The sample sessions and their gold probes, relative to the samples folder.
SESSION_FILES = ("fixtures/sessions.sqlite", "fixtures/sessions.probes.json")


@dataclass(frozen=True, slots=True)
class DemoFiles:
    """What :func:`write_demo` did: the files it wrote and the ones it found already there."""

    folder: Path
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)

    @property
    def notebooks(self) -> Path:
        return self.folder / "notebooks"


def samples_root() -> Path:
    """The folder holding ``notebooks/`` and ``fixtures/``: the installed package's copy, else the source checkout."""
    for root in (PACKAGED, PACKAGE.parent):
        if (root / "notebooks").is_dir() and all((root / name).is_file() for name in SESSION_FILES):
            return root
    raise ZettLabError(
        f"this zett-lab installation has no sample files (looked in {PACKAGED} and {PACKAGE.parent}); "
        "reinstall it from a wheel or an sdist"
    )


def checkout_notebooks() -> Path | None:
    """The notebooks of the source checkout this package runs from, or None for an installed package."""
    root = PACKAGE.parent
    if (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir():
        return root / "notebooks"
    return None


def sample_files() -> dict[str, Path]:
    """Each sample file by its path relative to a demo folder (``notebooks/...``, ``fixtures/...``)."""
    root = samples_root()
    notebooks = sorted((root / "notebooks").glob("*.ipynb"))
    return {f"notebooks/{path.name}": path for path in notebooks} | {name: root / name for name in SESSION_FILES}


def write_demo(folder: str | os.PathLike[str]) -> DemoFiles:
    """Copy the notebooks and sample sessions into ``folder``; a file already there is kept, never overwritten.

    Each file is copied under a temporary name and then linked into place, which fails when the
    target exists, so even a file created meanwhile by someone else is not replaced; an interrupted
    copy leaves no partial file behind.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(folder, None, "is a file; give a folder for the notebooks and samples")
    result = DemoFiles(folder)
    for relative, source in sample_files().items():
        target = folder / relative
        if target.exists() or target.is_symlink():
            result.kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if _copy_new(source, target):
            result.written.append(target)
        else:
            result.kept.append(target)
    return result


def _copy_new(source: Path, target: Path) -> bool:
    """Copy ``source`` to the new file ``target``; False when ``target`` appeared in the meantime."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(source, temporary)
        try:
            os.link(temporary, target)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: exclusive create instead
            try:
                handle = open(target, "xb")  # noqa: SIM115 - closed below, removed if the copy fails
            except FileExistsError:
                return False
            try:
                with handle, open(temporary, "rb") as data:
                    shutil.copyfileobj(data, handle)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        return True
    finally:
        temporary.unlink(missing_ok=True)


def next_steps(result: DemoFiles) -> str:
    """What to run after ``zett-lab demo DIR``, for the command line to print."""
    folder = result.folder
    return "\n".join(
        [
            "next:",
            f"  zett-lab lab {folder}      (JupyterLab on the notebooks; start with 01-explore)",
            f"  zett-lab report {folder / 'fixtures'} -o {folder / 'report.html'}      (a self-contained HTML report of the "
            "sample sessions)",
        ]
    )
