"""Show: tables, plots, notebook widgets, the report and the command line.

``zett_lab.show.table(frame)`` shows a DataFrame to a person in a notebook (readable numbers, metric
columns headed by their catalogue labels). Tables, plots and the report display results they are given;
widgets call :mod:`zett_lab.study`; only the command line (:mod:`zett_lab.show.cli`, :mod:`zett_lab.show.commands`) wires the stages together.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """``zett_lab.show.table`` on first use (the command line starts without what tables pull in)."""
    if name in ("Table", "table"):
        from . import tables

        return getattr(tables, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Table", "table"]
