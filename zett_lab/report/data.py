"""What a report states, computed once with the earlier stages' own functions: :class:`ReportData`.

:func:`build_report_data` takes what the stages produced (traces, a :class:`Sweep`,
:class:`Losses`, a :class:`Comparison`) and computes everything a report shows: the per-replay
results with costs (:mod:`.replays`), the paired comparison, the recommended setting and what else
the report picks out (:mod:`.choices`), the lost-but-needed items (:mod:`.lost`), the losses of the
replays shown in detail (:mod:`.measured`), the tables (:mod:`.tables`), the production summaries
(:mod:`.production`) and what was studied and what failed (:mod:`.facts`).
:mod:`zett_lab.show.report` only displays the :class:`ReportData`.

Failed replays, and replays whose summaries failed, are kept apart: they are counted per cause,
never averaged into a metric, and a setting with such a replay is never recommended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

from ..errors import SettingError
from ..load.conversation import Conversation
from ..measure import Losses
from ..measure.catalogue import default_metrics
from ..replay.trace import Trace
from ..study.alerts import Alert, study_alerts
from ..study.choose import ConstraintSpec
from ..study.compare import Comparison, compare
from ..study.recommendation import RecommendationRecord
from ..study.results import Sweep
from ..study.session import SummarizerSpec
from .choices import explore_conversation, recommended_setting, timeline_conversations
from .facts import failure_figures, study_facts
from .lost import dropped_constraint_items, lost_but_needed_items
from .measured import Measured
from .production import report_production
from .replays import Arms, Failure, cell_entries, report_replays, trace_index
from .sweep import DEFAULT_PRIMARY_MODEL
from .tables import DIGITS, MetricSummary, configuration_means, cost_overview, metric_summary


@dataclass(frozen=True, eq=False)
class ReportData:
    """Everything a report shows, as computed by :func:`build_report_data`.

    Attributes:
        entries: ``(arm label, trace)`` of every complete replay.
        summarizers: Arm labels in report order (the ``summarizer`` column of the report's tables).
        arms: What the report compares (:class:`~zett_lab.report.replays.Arms`): summarizers, engines or both.
        conversations: The conversations studied, once each, in the order first replayed.
        grid: The ``max_tokens`` and ``keep_recent_tokens`` values replayed.
        failures: Replays that could not run.
        failure_counts: Failed summary calls and replays per distinct cause
            (:data:`~zett_lab.replay.schema.FAILURE_COLUMNS`).
        attempted: How many replays were attempted (measured or not).
        unmeasured_settings: ``(summarizer, max_tokens, keep_recent_tokens)`` with a failed
            replay or summary in any conversation: never recommended.
        results: One row per measured replay (it ran and every summary succeeded): settings,
            budget figures, loss metrics, costs.
        comparison: The paired comparison of the arms (None with one arm).
        recommendation: The recommended setting with the rule, the constraints honoured, the alternatives,
            the held-out check and the verdict
            (:meth:`~zett_lab.study.recommendation.Recommendation.record`; None: nothing to recommend).
        alerts: What a reader must know first (:func:`~zett_lab.study.alerts.study_alerts`), most severe first.
        explore_id: The conversation the interactive explorer shows.
        timeline_ids: The conversations whose context timeline the report draws (at most
            :data:`~zett_lab.report.choices.TIMELINES_SHOWN`, see :func:`timeline_conversations`), in report order.
        lost_items: The top lost-but-needed anchors at the recommended setting.
        dropped_constraints: The rules summaries dropped at the recommended setting
            (:func:`~zett_lab.report.lost.dropped_constraint_items`).
        metrics: Per summarizer: means with confidence intervals, paired differences, totals.
        costs: Tokens and money per configuration and the prices used.
        configurations: Every configuration's means per conversation (:data:`~zett_lab.report.tables.CONFIGURATION_COLUMNS`),
            the recommended one marked.
        studied: What was studied (:func:`~zett_lab.report.facts.study_facts`): conversations and their sizes,
            engine, counter, summarizers, settings, failed replays.
        failed: The failures banner's counts (:func:`~zett_lab.report.facts.failure_figures`).
        losses: Losses of the replays shown in detail, by ``id`` of their trace. Their per-anchor
            tables hold only the anchors lost but needed later (the explorer's replays not at the
            recommended setting: none); the flags the anchor-retention figure reads are in ``anchor_flags``.
        anchor_flags: Per replay at the recommended setting (by ``id`` of its trace): the
            :func:`~zett_lab.measure.anchor_rows.retention_counts` of its per-anchor table.
        native: The conversations' recorded production summaries beside the baselines on the same
            spans (:func:`~zett_lab.report.production.report_production`); empty without any.
        native_skipped: Report summarizers that could not summarize those spans (named in the report).
    """

    entries: list[tuple[str, Trace]]
    summarizers: list[str]
    arms: Arms
    conversations: list[Conversation]
    grid: dict[str, list[int]]
    failures: list[Failure]
    failure_counts: pd.DataFrame
    attempted: int
    unmeasured_settings: set[tuple[str, int, int]]
    results: pd.DataFrame
    comparison: Comparison | None
    recommendation: RecommendationRecord | None
    alerts: list[Alert]
    explore_id: str
    timeline_ids: list[str]
    lost_items: list[dict[str, object]]
    dropped_constraints: list[dict[str, object]]
    metrics: MetricSummary
    costs: dict[str, object]
    configurations: list[dict[str, object]]
    studied: dict[str, object]
    failed: dict[str, object]
    losses: dict[int, Losses] = field(repr=False)
    anchor_flags: dict[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    native: list[dict[str, object]] = field(default_factory=list, repr=False)
    native_skipped: list[str] = field(default_factory=list)

    @property
    def traces(self) -> list[Trace]:
        return [trace for _, trace in self.entries]

    def trace_for(
        self, conversation_id: str, summarizer: str, max_tokens: int, keep_recent_tokens: int
    ) -> Trace | None:
        """The trace of one replay, or None."""
        return self._trace_index.get((conversation_id, summarizer, int(max_tokens), int(keep_recent_tokens)))

    @cached_property
    def _trace_index(self) -> dict[tuple[str, str, int, int], Trace]:
        return trace_index(self.entries)

    def cell_traces(self, max_tokens: int, keep_recent_tokens: int) -> list[tuple[str, Trace]]:
        """``(summarizer, trace)`` of every replay at one setting."""
        return cell_entries(self.entries, max_tokens, keep_recent_tokens)

    def losses_for(self, trace: Trace) -> Losses:
        """The losses of a replay the report shows in detail."""
        try:
            return self.losses[id(trace)]
        except KeyError:
            raise KeyError(
                f"replay of {trace.conversation.id!r} at max_tokens={trace.settings.max_tokens} "
                "was not measured for the report"
            ) from None

    def anchor_flags_for(self, trace: Trace) -> pd.DataFrame:
        """The counted per-anchor flags of a replay at the recommended setting (see ``anchor_flags``)."""
        try:
            return self.anchor_flags[id(trace)]
        except KeyError:
            raise KeyError(
                f"replay of {trace.conversation.id!r} at max_tokens={trace.settings.max_tokens} "
                "is not at the recommended setting"
            ) from None


def build_report_data(
    traces: Iterable[Trace] = (),
    sweep: Sweep | None = None,
    losses: Losses | None = None,
    comparison: Comparison | None = None,
    *,
    failures: Iterable[Failure] = (),
    constraints: ConstraintSpec | None = None,
    objectives: str | Sequence[str] | None = None,
    explore: str | None = None,
    primary_model: str = DEFAULT_PRIMARY_MODEL,
    top_lost: int = 30,
    native_baselines: Sequence[str] | Mapping[str, SummarizerSpec] | None = None,
    executor: Executor | str | None = None,
) -> ReportData:
    """Compute everything a report shows from replays (see :class:`ReportData`).

    Long on purpose: the report's stages in order, then one keyword per field of :class:`ReportData`.

    Args:
        traces: Replays, any mix of conversations, settings and summarizers.
        sweep: A :class:`Sweep` (its complete cells are added to ``traces``, its failed
            cells to ``failures``).
        losses: :class:`Losses` of ``traces`` (measured when None).
        comparison: :class:`Comparison` of the summarizers (computed, paired per
            conversation and setting, when None and there are two or more).
        failures: Replays that could not run.
        constraints: Constraints a recommended setting must meet, before the default ones
            (:func:`~zett_lab.study.recommendation.recommend`); one no setting meets rules nothing out.
        objectives: What the recommendation ranks by, most important first (default: steps over budget,
            then needed-anchor losses, then total input tokens).
        explore: Conversation for the interactive explorer (default: the one with the most
            applied compactions).
        primary_model: Price-table model for the money columns.
        top_lost: How many lost-but-needed items to list.
        native_baselines: Summarizer specs (or label -> spec or model) for the production summaries:
            what the user named on this run. Default: the report's offline summarizers, rebuilt from their
            identities; a provider named only in saved results is never called (it is listed as skipped).
        executor: Where replays the report shows in full are measured when their sweep did not keep their
            losses (traces given directly, a sweep run with ``metrics=False``): an Executor (e.g. a
            ``dask.distributed`` client's ``get_executor()``), ``"serial"`` (here), or None (the running
            process pool, else here).
    """
    _check_arguments(executor, top_lost)
    measured = Measured(executor)
    replays = report_replays(traces, sweep, losses, failures, primary_model, measured)
    entries, summarizers, results, conversations = (
        replays.entries,
        replays.summarizers,
        replays.results,
        replays.conversations,
    )
    explore_id = explore_conversation(results, conversations, explore)
    # Chosen on the engines and summarizers the arms ran (the verdict names both), then named by its arm.
    recommended = replays.arms.recommended(
        recommended_setting(replays.arms.settings(replays.attempted), constraints, objectives)
    )
    recommendation = recommended.record(DIGITS) if recommended is not None else None
    _measure_shown(entries, explore_id, recommendation, measured)
    if comparison is None and len(summarizers) >= 2:
        comparison = _compared(results, summarizers)
    measured.finish()
    native, native_skipped = report_production(conversations, replays.identities, native_baselines)
    return ReportData(
        entries=entries,
        summarizers=summarizers,
        arms=replays.arms,
        conversations=conversations,
        grid=replays.grid,
        failures=replays.failures,
        failure_counts=replays.failure_counts,
        attempted=len(replays.attempted),
        unmeasured_settings=replays.unmeasured_settings,
        results=results,
        comparison=comparison,
        recommendation=recommendation,
        alerts=study_alerts(
            replays.attempted, recommended, replays.failure_counts, replays.identities, replays.skipped_files
        ),
        explore_id=explore_id,
        timeline_ids=timeline_conversations(results, recommendation, conversations),
        lost_items=lost_but_needed_items(entries, recommendation, summarizers, measured.shown, top_lost),
        dropped_constraints=dropped_constraint_items(entries, recommendation, measured.shown, top_lost),
        metrics=metric_summary(
            results, summarizers, comparison, replays.failure_counts, recommended.figures if recommended else ()
        ),
        costs=cost_overview(results, primary_model, replays.unpriced),
        configurations=configuration_means(results, recommendation),
        studied=study_facts(replays),
        failed=failure_figures(replays),
        losses=dict(measured.by_id),
        anchor_flags=dict(measured.anchor_flags),
        native=native,
        native_skipped=native_skipped,
    )


def _check_arguments(executor: Executor | str | None, top_lost: int) -> None:
    """Refuse an executor or a ``top_lost`` :func:`build_report_data` cannot use, before anything is measured."""
    if isinstance(executor, str) and executor != "serial":
        raise SettingError(f"executor must be None, 'serial' or a concurrent.futures.Executor, got {executor!r}")
    if isinstance(top_lost, bool) or not isinstance(top_lost, int) or top_lost < 0:
        raise SettingError(f"top_lost must be a non-negative int, got {top_lost!r}")


def _compared(results: pd.DataFrame, summarizers: list[str]) -> Comparison:
    """The arms (:class:`~zett_lab.report.replays.Arms`) paired per conversation and setting on the default metrics
    the results have."""
    shown = [m for m in default_metrics() if m in results.columns]
    # An arm's label names its engine too: units pair on conversation and setting (not on the engine).
    compared = results[results["summarizer"].isin(summarizers)].drop(columns="engine", errors="ignore")
    return compare(compared, metrics=shown, level="conversation", seed=0)


def _measure_shown(
    entries: list[tuple[str, Trace]], explore_id: str, recommendation: RecommendationRecord | None, measured: Measured
) -> None:
    """Measure the replays the report shows in detail.

    Those at the recommended setting fully (their anchors are listed and plotted; started here,
    collected by :meth:`Measured.finish`); the explorer's without the per-anchor table (it shows
    per-compaction figures).
    """
    if recommendation is not None:
        cell = cell_entries(entries, recommendation["max_tokens"], recommendation["keep_recent_tokens"])
        measured.start_shown([trace for _, trace in cell])
    for _, trace in entries:
        if trace.conversation.id == explore_id and id(trace) not in measured.shown_ids:
            measured.without_anchors(trace)
