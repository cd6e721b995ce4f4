"""Report: what a report states, computed once from the study's results, as one :class:`ReportData`.

Builds on load, summarizers, replay, measure and study; :mod:`zett_lab.show.report` turns the
:class:`ReportData` into the document (HTML, Markdown, JSON) and computes nothing. The modules:

- :mod:`~zett_lab.report.sweep`: the sweep a report over recorded conversations runs, and its defaults;
- :mod:`~zett_lab.report.replays`: the replays covered and the per-replay results table;
- :mod:`~zett_lab.report.choices`: the recommended setting, the timelines drawn, the explorer's conversation;
- :mod:`~zett_lab.report.measured`, :mod:`~zett_lab.report.lost`: the replays shown in detail and what they lost;
- :mod:`~zett_lab.report.tables`, :mod:`~zett_lab.report.production`, :mod:`~zett_lab.report.facts`: metric and
  cost tables, the production summaries, what was studied and what failed;
- :mod:`~zett_lab.report.data`: :func:`build_report_data`, which puts them together.
"""

from .data import ReportData, build_report_data
from .replays import Failure
from .sweep import DEFAULT_PRIMARY_MODEL, DEFAULT_REPORT_SUMMARIZERS, default_grid, report_sweep

__all__ = [
    "DEFAULT_PRIMARY_MODEL",
    "DEFAULT_REPORT_SUMMARIZERS",
    "Failure",
    "ReportData",
    "build_report_data",
    "default_grid",
    "report_sweep",
]
