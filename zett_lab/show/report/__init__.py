"""One self-contained report of a compaction study: HTML (inline SVG, inline script), Markdown, JSON.

Example::

    >>> import zett_lab
    >>> from zett_lab.show.report import Report
    >>> report = Report.build(zett_lab.load_all("fixtures/"))   # doctest: +SKIP
    >>> report.save_html("report.html")                          # doctest: +SKIP
    >>> Report(traces=[trace1, trace2], title="Thresholds").to_markdown()  # doctest: +SKIP

The report only displays results: :mod:`zett_lab.report` computes what it states.
The HTML page is rendered from Jinja2 templates with autoescaping, makes no network request
(a Content-Security-Policy forbids every fetch), and gives the same bytes for the same inputs
and ``date``.
"""

from ...report import (
    DEFAULT_PRIMARY_MODEL,
    DEFAULT_REPORT_SUMMARIZERS,
    Failure,
    default_grid,
)
from .core import Report, report_date

__all__ = [
    "DEFAULT_PRIMARY_MODEL",
    "DEFAULT_REPORT_SUMMARIZERS",
    "Failure",
    "Report",
    "default_grid",
    "report_date",
]
