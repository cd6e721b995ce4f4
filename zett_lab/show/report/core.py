"""The :class:`Report`: results of a compaction study rendered as one HTML, Markdown or JSON document.

The report only displays results. It is handed traces, a sweep, losses or a comparison;
:func:`zett_lab.report.build_report_data` computes what the report states from
them with the earlier stages' own functions, and :meth:`Report.build` runs the sweep first
(:func:`zett_lab.report.report_sweep`).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import SettingError, warn
from ...files import check_output, write_atomic
from ...replay.deadline import DEFAULT_ENGINE_TIMEOUT
from ...replay.engine import EngineSpec
from ...report import (
    DEFAULT_PRIMARY_MODEL,
    DEFAULT_REPORT_SUMMARIZERS,
    Failure,
    ReportData,
    build_report_data,
    report_sweep,
)
from ...study.alerts import Alert
from ...study.choose import ConstraintSpec
from ...study.recommendation import RecommendationRecord
from ...study.session import SummarizerSpec, summarizer_labels
from ...summarizers.cache import CacheSpec

if TYPE_CHECKING:
    import pandas as pd

    from ...load.conversation import Conversation
    from ...measure import Losses
    from ...replay.trace import Trace
    from ...study import Sweep
    from ...study.compare import Comparison
    from .content import ReportDocument


def report_date(value: str | _dt.date | None) -> str:
    """The date a report prints: ``YYYY-MM-DD`` text naming a real calendar day, a date, or None for today."""
    if value is None:
        return _dt.date.today().isoformat()
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()[:10]
    text = str(value).strip()
    why = ""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return _dt.date.fromisoformat(text).isoformat()
    except ValueError as error:  # 2025-13-45, 2025-02-30
        why = f" ({error})"
    raise SettingError(f"date must be a calendar day as YYYY-MM-DD, got {value!r}{why}")


def import_report_modules(*, html: bool) -> None:
    """Import what making a report needs and its sweep does not: SciPy's statistics (the bootstrap intervals) and,
    for a page, the modules that draw it (matplotlib, the templates' module). Given to the sweep as ``at_tail``
    (:func:`~zett_lab.report.report_sweep`), so that these imports take the core its last units leave idle rather
    than follow the sweep with both workers idle."""
    import scipy.stats  # noqa: F401

    if html:
        from . import render  # noqa: F401


@dataclass(frozen=True, eq=False)
class Report:
    """A study of compaction on recorded conversations, as one self-contained document.

    Give it the results you have; what the report states is computed from them once, when
    it is made (:func:`~zett_lab.report.build_report_data`):

    Args:
        traces: Replays (:class:`~zett_lab.replay.trace.Trace`), any mix of conversations,
            settings and summarizers.
        sweep: A :class:`zett_lab.study.Sweep` (its traces are added to ``traces``).
        losses: :class:`~zett_lab.measure.Losses` of those traces (measured when None).
        comparison: :class:`~zett_lab.study.Comparison` of the summarizers (computed,
            paired per conversation and setting, when None and there are two or more).
        title: Report title.
        date: Date printed in the report (``YYYY-MM-DD`` or a date; default today). It is
            the only date in the report and never enters a figure.
        explore: Conversation id for the interactive explorer (default: the one with the
            most applied compactions).
        primary_model: Price-table model for the money columns of the cost section.
        top_lost: How many "lost but needed later" items to list.
        failures: Replays that could not run (listed in the report; a sweep's failed cells
            are added).
        constraints: Constraints the recommended setting must meet, before the default ones (e.g.
            ``"needed_anchor_recall >= 0.8"``, see :func:`zett_lab.study.recommend`); one no setting
            meets rules nothing out, and the report says so.
        objectives: What the recommendation ranks by, most important first (metric names; default: steps
            over budget, then lost-but-needed items, then total input tokens).
        notes: Extra sentences printed under "What was studied".
        native_baselines: Summarizer specs (or label -> spec or model) that summarize each native
            compaction's span for the "Production summaries" section. Default: the report's offline
            summarizers; a provider named only in saved results (a loaded sweep, traces) is never called
            by a report: name it here (or with ``--summarizer`` on the command line) to include it.
        executor: Where the replays shown in full are measured when their sweep did not keep what the report
            shows of them (traces given directly, a sweep run with ``metrics=False``): an Executor (e.g. a
            ``dask.distributed`` client's ``get_executor()``), ``"serial"``, or None (the running process
            pool, else this process). When that is a process pool, its workers draw the page's figures while this
            process builds the rest of the page. The page is the same wherever they are measured and drawn.

    Example::

        >>> report = Report.build(zett_lab.load_all("fixtures/"))     # doctest: +SKIP
        >>> report.save_html("report.html")                            # doctest: +SKIP
        >>> report                                                     # doctest: +SKIP
    """

    traces: Sequence[Trace] = ()
    sweep: Sweep | None = None
    losses: Losses | None = None
    comparison: Comparison | None = None
    title: str = "Context compaction report"
    date: str | _dt.date | None = None
    explore: str | None = None
    primary_model: str = DEFAULT_PRIMARY_MODEL
    top_lost: int = 30
    failures: Sequence[Failure] = ()
    constraints: ConstraintSpec | None = None
    objectives: str | Sequence[str] | None = None
    notes: Sequence[str] = ()
    native_baselines: Sequence[str] | Mapping[str, Any] | None = None
    executor: Executor | str | None = field(default=None, repr=False)
    data: ReportData = field(init=False, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        # Frozen: what the report states is computed here once, and its given fields settled (set the frozen way).
        object.__setattr__(self, "date", report_date(self.date))
        data = build_report_data(
            self.traces or (),
            self.sweep,
            self.losses,
            self.comparison,
            failures=self.failures or (),
            constraints=self.constraints,
            objectives=self.objectives,
            explore=self.explore,
            primary_model=self.primary_model,
            top_lost=self.top_lost,
            native_baselines=self.native_baselines,
            executor=self.executor,
        )
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "traces", data.traces)
        object.__setattr__(self, "failures", list(data.failures))

    @classmethod
    def build(
        cls,
        conversations: Sequence[Conversation] | str | Path | Sequence[str | Path],
        summarizers: Sequence[SummarizerSpec] | None = None,
        grid: Mapping[str, Sequence[int]] | None = None,
        *,
        cache: CacheSpec = None,
        progress: bool = False,
        executor: Executor | str | None = None,
        strict: bool = False,
        engines: Mapping[str, EngineSpec] | None = None,
        engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT,
        **options: Any,
    ) -> Report:
        """Sweep ``conversations`` over ``grid`` with ``summarizers`` and report the result.

        The sweep is :func:`zett_lab.report.report_sweep` (defaults: the built-in
        offline summarizers and a grid scaled to the conversations; ``strict`` stops it at the
        first failure); ``engines`` compares compaction engines (each shown where a summarizer
        would be), each pass within ``engine_timeout`` seconds; ``options`` go to :class:`Report`
        (title, date, explore, primary_model, ...). ``executor`` runs the replays and their measuring:
        None (a process pool of this machine), ``"serial"``, or any Executor, e.g. a ``dask.distributed``
        client's ``client.get_executor()`` to run them on a cluster (the same page as a local run).
        """
        result = report_sweep(
            conversations,
            summarizers,
            grid,
            cache=cache,
            progress=progress,
            executor=executor,
            primary_model=options.get("primary_model", DEFAULT_PRIMARY_MODEL),
            strict=strict,
            engines=engines,
            engine_timeout=engine_timeout,
            at_tail=partial(import_report_modules, html=True),
        )
        # The summarizers named in this call summarize the production spans too (providers included).
        options.setdefault("native_baselines", summarizer_labels(summarizers or list(DEFAULT_REPORT_SUMMARIZERS)))
        return cls(sweep=result, executor=executor, **options)

    # --- what the report states -------------------------------------------------------------------

    @property
    def conversations(self) -> list[Conversation]:
        """The conversations studied, once each, in the order first replayed."""
        return self.data.conversations

    @property
    def summarizers(self) -> list[str]:
        """Summarizer names (the sweep's labels, else identities), in the order first replayed."""
        return self.data.summarizers

    @property
    def results(self) -> pd.DataFrame:
        """One row per measured replay (it ran, every summary succeeded): settings, budget figures, metrics, costs."""
        return self.data.results

    @property
    def failure_counts(self) -> pd.DataFrame:
        """Failed summary calls and replays per distinct cause (:data:`~zett_lab.replay.schema.FAILURE_COLUMNS`)."""
        return self.data.failure_counts

    def input_files(self) -> list[Path]:
        """What the report was made from: the traces' files (conversations, summary cache) and the sweep's."""
        files = [f for trace in self.traces for f in trace.input_files()]
        return files + (self.sweep.input_files() if self.sweep is not None else [])

    @property
    def alerts(self) -> list[Alert]:
        """What a reader must know first, most severe first (:func:`~zett_lab.study.alerts.study_alerts`)."""
        return self.data.alerts

    @property
    def recommendation(self) -> RecommendationRecord | None:
        """The recommended setting, the rule, the constraints honoured, the alternatives weighed, the held-out check
        and the verdict, as plain data (:meth:`zett_lab.study.Recommendation.record`)."""
        return self.data.recommendation

    @property
    def explore_id(self) -> str:
        """The conversation the interactive explorer shows."""
        return self.data.explore_id

    @property
    def lost_items(self) -> list[dict[str, object]]:
        """The top "lost but needed later" anchors, with the span and summary they came from."""
        return self.data.lost_items

    def document(self) -> ReportDocument:
        """Everything the report states, as plain data (what :meth:`to_json` writes)."""
        if "document" not in self._cache:
            from .content import build_document

            self._cache["document"] = build_document(self.data, title=self.title, date=str(self.date), notes=self.notes)
        return self._cache["document"]

    # --- output -----------------------------------------------------------------------------------

    def to_html(self) -> str:
        """The whole report as one self-contained HTML page (no network request when opened)."""
        if "html" not in self._cache:
            from ...report.measured import report_executor
            from .render import render_html

            # the figures are drawn on the pool the sweep ran on (if any) while this process builds the explorer
            self._cache["html"] = render_html(self.data, self.document(), report_executor(self.executor))
        return self._cache["html"]

    def to_markdown(self) -> str:
        """The report's tables and findings as Markdown (figures and the explorer are HTML only)."""
        from .markdown import render_markdown
        from .render import neutralise_bidi

        return neutralise_bidi(render_markdown(self.data, self.document()))

    def to_json(self) -> str:
        """The report's data as JSON (deterministic: sorted keys, no timestamps; ``<>&`` written as ``\\u`` escapes)."""
        text = json.dumps(self.document(), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)
        # Same data, but safe to paste into HTML: no raw <, >, & or line separators.
        for char, escape in (
            ("<", "\\u003c"),
            (">", "\\u003e"),
            ("&", "\\u0026"),
            ("\u2028", "\\u2028"),
            ("\u2029", "\\u2029"),
        ):
            text = text.replace(char, escape)
        return text

    def save_html(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write :meth:`to_html` to ``path`` atomically (a temporary file beside it, then a rename).

        Never over one of :meth:`input_files`; an existing ``path`` only with ``overwrite=True``.
        """
        return self.save(path, format="html", overwrite=overwrite)

    def save(self, path: str | Path, format: str | None = None, *, overwrite: bool = False) -> Path:
        """Write the report as ``html``, ``md`` or ``json`` (default: from the suffix, else html).

        Never over one of :meth:`input_files`; an existing ``path`` only with ``overwrite=True``.
        """
        path = Path(path)
        fmt = format or {".md": "md", ".markdown": "md", ".json": "json"}.get(path.suffix.lower(), "html")
        render = {"html": self.to_html, "md": self.to_markdown, "json": self.to_json}.get(fmt)
        if render is None:
            raise SettingError(f"report format must be html, md or json, got {format!r}")
        check_report_path(path)
        check_output(path, self.input_files(), overwrite=overwrite)
        content = render()
        if fmt == "html" and len(content) > LARGE_PAGE_CHARS:
            warn(
                f"{path}: the page is about {len(content) / 1e6:.1f} MB (over {LARGE_PAGE_CHARS / 1e6:g} MB) "
                "and opens slowly in a browser; a grid with fewer max_tokens and keep_recent_tokens values, or "
                "a Markdown report (.md: tables and findings only), is lighter"
            )
        return write_atomic(path, content, overwrite=overwrite)

    def _repr_html_(self) -> str:
        """The report in an isolated frame (its CSS and scripts cannot touch the notebook's)."""
        from .render import render_frame

        return render_frame(self.to_html())

    def __repr__(self) -> str:
        return (
            f"Report(title={self.title!r}, conversations={len(self.conversations)}, "
            f"summarizers={len(self.summarizers)}, replays={len(self.traces)}, date={self.date!r})"
        )


#: A page longer than this (characters, about bytes) opens slowly in a browser: :meth:`Report.save` warns
#: before it writes one.
LARGE_PAGE_CHARS = 5_000_000


def check_report_path(path: Path) -> None:
    """Refuse a report path that is a folder or lies in a folder that does not exist."""
    if path.is_dir():
        raise SettingError(f"{path}: is a folder; give a file name for the report")
    if not path.parent.is_dir():
        raise SettingError(f"{path}: folder {path.parent} does not exist")
