"""One self-contained report of a compaction study: HTML (inline SVG, inline script), Markdown, JSON.

Example::

    >>> import zett_lab
    >>> from zett_lab.show.report import Report
    >>> report = Report.build(zett_lab.load_all("fixtures/"))   # doctest: +SKIP
    >>> report.save_html("report.html")                          # doctest: +SKIP
    >>> Report(traces=[trace1, trace2], title="Thresholds").to_markdown()  # doctest: +SKIP

The HTML page makes no network request (a Content-Security-Policy forbids every fetch), escapes
every piece of conversation text, and gives the same bytes for the same inputs and ``date``.
"""

from .core import (
    DEFAULT_PRIMARY_MODEL,
    DEFAULT_REPORT_SUMMARIZERS,
    REPORT_METRICS,
    Failure,
    Report,
    default_grid,
    recommend_setting,
)

__all__ = [
    "DEFAULT_PRIMARY_MODEL",
    "DEFAULT_REPORT_SUMMARIZERS",
    "REPORT_METRICS",
    "Failure",
    "Report",
    "default_grid",
    "recommend_setting",
]
