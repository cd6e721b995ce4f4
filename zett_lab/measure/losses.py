"""Offline loss metrics: deterministic, no network, computed from a :class:`~zett_lab.replay.trace.Trace`.

For compaction attempt k (a row of ``trace.compactions``; notation of ``docs/reference/results.md``):

* span ``S_k = messages[span_start:span_end]`` (raw messages; cumulative, so a summary
  of a summary is measured against everything it stands for),
* tail ``T_k = messages[span_end:n_recorded]`` (kept verbatim),
* future ``F_k = messages[n_recorded:]`` (what the recorded conversation did next),
* summary ``Σ_k`` (``summary_text``).

Anchors (:mod:`zett_lab.load.anchors`) of ``S_k`` are looked up in ``Σ_k``
(:class:`~zett_lab.measure.lookup.TextIndex`: exact key, word-bounded loose
substring, fuzzy sentence match for constraints/decisions) and in ``T_k`` / ``F_k``
(exact keys of the raw messages).

Example::

    >>> losses = measure(trace)                       # doctest: +SKIP
    >>> losses.conversation[["compactions", "needed_anchor_recall"]]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from zett_agent.messages import AnyMessage

from ..collector import collector_paused
from ..formatting import count
from ..load.anchors import ANCHOR_TYPES
from ..load.conversation import Conversation
from ..replay.setting import TraceSettings
from ..replay.trace import Trace
from ..tokens import count_tokens, counter_named
from . import catalogue
from .aggregate import conversation_row, decay_rows
from .anchor_rows import AnchorRows, anchor_table
from .attempt import SummaryHolds, TraceView
from .attempt_rows import AttemptRows, measure_attempt
from .catalogue import TraceTables, labelled_html
from .columns import (
    ANCHOR_COLUMNS,
    COMPACTION_COLUMNS,
    CONVERSATION_COLUMNS,
    DECAY_COLUMNS,
    PROBE_COLUMNS,
    UPDATE_COLUMNS,
    doc_table,
    frame,
)
from .message_index import ConversationIndex, index_of
from .probes import check_probes
from .updates import GrowingSpanUpdates, observe


@dataclass(frozen=True, slots=True)
class Losses:
    """Offline loss metrics of one or more traces: plain DataFrames.

    Frames (columns below): ``compactions`` (one row per compaction attempt),
    ``anchors`` (one row per span anchor per attempt with a summary),
    ``conversation`` (one row per trace), ``probes`` (one row per gold probe per
    attempt whose span covers it), ``decay`` (one row per pair of applied
    compactions k < k+j of a trace), ``updates`` (one row per item whose value changed
    within the span of an attempt with a summary).

    Combine several with :meth:`concat`; ``measure([t1, t2])`` does it for you.
    """

    compactions: pd.DataFrame
    anchors: pd.DataFrame
    conversation: pd.DataFrame
    probes: pd.DataFrame
    decay: pd.DataFrame
    updates: pd.DataFrame = field(default_factory=lambda: frame([], UPDATE_COLUMNS))
    #: The settings of the traces measured, in order (:class:`~zett_lab.replay.setting.TraceSettings`).
    settings: tuple[TraceSettings, ...] = ()

    @classmethod
    def concat(cls, items: Iterable[Losses]) -> Losses:
        """One Losses holding the rows of all (e.g. several conversations or settings)."""
        items = list(items)
        if not items:
            return _empty_losses()

        def cat(name: str, columns: Mapping[str, str]) -> pd.DataFrame:
            frames = [getattr(item, name) for item in items if len(getattr(item, name))]
            if not frames:
                return getattr(items[0], name).iloc[0:0].copy()
            return pd.concat(frames, ignore_index=True)[list(columns)]

        return cls(
            compactions=cat("compactions", COMPACTION_COLUMNS),
            anchors=cat("anchors", ANCHOR_COLUMNS),
            conversation=cat("conversation", CONVERSATION_COLUMNS),
            probes=cat("probes", PROBE_COLUMNS),
            decay=cat("decay", DECAY_COLUMNS),
            updates=cat("updates", UPDATE_COLUMNS),
            settings=tuple(settings for item in items for settings in item.settings),
        )

    def lost_but_needed(self) -> pd.DataFrame:
        """The anchors that were needed later and not in the summary (rows of ``anchors``)."""
        if not len(self.anchors):
            return self.anchors
        return self.anchors[self.anchors["lost_but_needed"] & self.anchors["applied"]].reset_index(drop=True)

    def dropped_constraints(self) -> pd.DataFrame:
        """The rules stated in a span that neither the applied summary nor the kept tail conveys (rows of
        ``anchors`` of type ``constraint``; see the ``constraint_survival`` metric)."""
        if not len(self.anchors):
            return self.anchors
        return self.anchors[_dropped_constraint(self.anchors)].reset_index(drop=True)

    def listed(self) -> pd.DataFrame:
        """The anchors a report lists: lost but needed, and dropped constraints (rows of ``anchors``)."""
        if not len(self.anchors):
            return self.anchors
        anchors = self.anchors
        return anchors[(anchors["lost_but_needed"] & anchors["applied"]) | _dropped_constraint(anchors)].reset_index(
            drop=True
        )

    def retention_by_type(self) -> pd.DataFrame:
        """Anchor retention per type, pooled over applied compactions (rows: summarizer, columns: type)."""
        anchors = self.anchors[self.anchors["applied"]] if len(self.anchors) else self.anchors
        if not len(anchors):
            return pd.DataFrame(columns=list(ANCHOR_TYPES))
        table = anchors.groupby(["summarizer", "type"])["in_summary"].mean().unstack("type")
        return table.reindex(columns=[t for t in ANCHOR_TYPES if t in table.columns])

    def needed_recall_by_type(self) -> pd.DataFrame:
        """Needed-anchor recall per type, pooled over applied compactions (rows: summarizer, columns: type)."""
        anchors = (
            self.anchors[self.anchors["applied"] & self.anchors["needed_later"]] if len(self.anchors) else self.anchors
        )
        if not len(anchors):
            return pd.DataFrame(columns=list(ANCHOR_TYPES))
        table = anchors.groupby(["summarizer", "type"])["in_summary"].mean().unstack("type")
        return table.reindex(columns=[t for t in ANCHOR_TYPES if t in table.columns])

    def __repr__(self) -> str:
        return (
            f"Losses(conversations={count(len(self.conversation))}, compaction attempts={count(len(self.compactions))}, "
            f"anchor rows={count(len(self.anchors))}, probe rows={count(len(self.probes))})"
        )

    def _repr_html_(self) -> str:
        several = "summarizer" in self.conversation and self.conversation["summarizer"].nunique() > 1
        shown = [
            "conversation_id",
            *(["summarizer"] if several else []),
            "compactions",
            *catalogue.default_metrics("conversation"),
            "lost_but_needed",
            "steps_over_budget",
        ]
        conversation = labelled_html(self.conversation, columns=list(dict.fromkeys(shown)))
        columns = [
            "conversation_id",
            "compaction_id",
            "step",
            "status",
            "span_start",
            "span_end",
            "compression_ratio",
            "context_reduction",
            "anchor_retention",
            "needed_anchor_recall",
            "lost_but_needed",
            "constraint_survival",
            "probe_presence",
        ]
        compactions = (
            labelled_html(self.compactions, columns=columns, max_rows=30)
            if len(self.compactions)
            else "<p>No compaction attempts.</p>"
        )
        lost = self.lost_but_needed()
        lost_html = (
            labelled_html(
                lost,
                columns=["conversation_id", "compaction_id", "type", "value", "next_use_index", "refetched"],
                max_rows=20,
            )
            if len(lost)
            else "<p>Nothing needed later was lost.</p>"
        )
        return (
            f"<div><h4>{html.escape(repr(self))}</h4><h5>Per conversation</h5>{conversation}"
            f"<h5>Per compaction attempt</h5>{compactions}<h5>Lost but needed later</h5>{lost_html}</div>"
        )


Losses.__doc__ = (
    (Losses.__doc__ or "")
    + "\n    Columns:\n\n"
    + "\n\n".join(
        doc_table(name, columns)
        for name, columns in (
            ("compactions", COMPACTION_COLUMNS),
            ("anchors", ANCHOR_COLUMNS),
            ("conversation", CONVERSATION_COLUMNS),
            ("probes", PROBE_COLUMNS),
            ("decay", DECAY_COLUMNS),
            ("updates", UPDATE_COLUMNS),
        )
    )
)


def _dropped_constraint(anchors: pd.DataFrame) -> pd.Series:
    return (anchors["type"] == "constraint") & anchors["applied"] & ~anchors["in_summary"] & ~anchors["in_tail"]


def _empty_losses(settings: tuple[TraceSettings, ...] = ()) -> Losses:
    return Losses(
        compactions=frame([], COMPACTION_COLUMNS),
        anchors=frame([], ANCHOR_COLUMNS),
        conversation=frame([], CONVERSATION_COLUMNS),
        probes=frame([], PROBE_COLUMNS),
        decay=frame([], DECAY_COLUMNS),
        updates=frame([], UPDATE_COLUMNS),
        settings=settings,
    )


def _counter_for(
    settings: TraceSettings, counter: Callable[[Sequence[Any]], int] | None
) -> Callable[[Sequence[Any]], int]:
    """The counter given, else the one the trace's counter identity names (the exact one for a user's own counter,
    which only its owner can rebuild)."""
    if counter is not None:
        return counter
    return counter_named(settings.counter) or count_tokens


@collector_paused()
def measure(
    trace: Trace | Iterable[Trace],
    *,
    counter: Callable[[Sequence[AnyMessage]], int] | None = None,
    anchors: bool = True,
) -> Losses:
    """Offline loss metrics of a trace (or of several traces, concatenated).

    ``counter`` is the token counter for span/tail sizes; by default the counter
    the replay used (the one ``trace.settings.counter`` names: the exact o200k counter, or
    the approximate one when the replay used it). ``anchors=False`` leaves the ``anchors``
    table empty (one row per span anchor per attempt: on long conversations by far the
    largest part) and computes everything else the same way.

    Probes attached to the conversation are checked first: one pointing at a
    message that does not exist raises :class:`~zett_lab.errors.InputError`
    naming the probe. A trace with no compaction attempts gives empty per-compaction
    frames and a conversation row with 0 compactions and NaN ratios. The cyclic garbage collector is paused
    meanwhile (see :func:`measure_lost_and_counted`).
    """
    if not isinstance(trace, Trace):
        return Losses.concat(measure(item, counter=counter, anchors=anchors) for item in trace)
    rows = AnchorRows() if anchors else None
    losses, index = _measure_one(trace, _counter_for(trace.settings, counter), rows)
    return dataclasses.replace(losses, anchors=anchor_table(index, rows.parts if rows is not None else []))


if measure.__doc__ is not None:  # python -OO strips docstrings
    measure.__doc__ += (
        "\n    How far to trust each headline metric: its precision and recall on labelled real examples, with "
        "95% intervals\n    (from the catalogue's measured validity; the documentation's page \"How far to trust "
        'each metric" says how\n    they were measured):\n\n' + catalogue.trust_list(indent="    ") + "\n    "
    )


@collector_paused()
def measure_lost_and_counted(trace: Trace) -> tuple[Losses, pd.DataFrame]:
    """:func:`measure` as a report keeps it: ``anchors`` holds only the rows :meth:`Losses.listed` gives, and the
    per-anchor flags come counted (:func:`~zett_lab.measure.anchor_rows.retention_counts`), both made from arrays without the per-anchor table (on a long conversation, millions of rows).

    Both run with the cyclic garbage collector paused (:func:`~zett_lab.collector.collector_paused`): measuring
    leaves no garbage in cycles, and the collections its many small objects set off walked every object of the
    process (a tenth of measuring the long session's 24 replays in one process)."""
    rows = AnchorRows(lost_only=True)
    losses, index = _measure_one(trace, _counter_for(trace.settings, None), rows)
    return dataclasses.replace(losses, anchors=anchor_table(index, rows.parts)), rows.counts()


def _measure_one(
    trace: Any, counter: Callable[[Sequence[Any]], int], anchor_rows: AnchorRows | None
) -> tuple[Losses, ConversationIndex]:
    """Measure every compaction attempt of one trace in order, then the decay and conversation tables; the
    per-anchor rows go to ``anchor_rows`` (None: none are kept), ``anchors`` is left empty."""
    view, metrics = _trace_view(trace, counter), catalogue.computed("compaction")
    compactions: pd.DataFrame = trace.compactions
    rows = AttemptRows(anchors=anchor_rows)
    # per applied compaction with a summary: (compaction_id, what the summary holds, tail range)
    applied_chain: list[tuple[int, SummaryHolds, tuple[int, int]]] = []
    previous_checkpoint: tuple[int, int] | None = None
    ordered = compactions.sort_values("compaction_id", kind="stable") if len(compactions) else compactions
    for row in ordered.to_dict("records"):
        attempt = measure_attempt(view, metrics, row, previous_checkpoint, rows)
        if attempt.window is None:
            continue
        if attempt.applied and attempt.kept is not None:
            applied_chain.append(
                (attempt.compaction_id, attempt.kept, (attempt.window.span_end, attempt.window.n_recorded))
            )
        if attempt.applied:
            previous_checkpoint = (attempt.compaction_id, attempt.window.span_end)

    compactions_frame = frame(rows.compactions, COMPACTION_COLUMNS)
    probes_frame = frame(rows.probes, PROBE_COLUMNS)
    decay_frame = frame(decay_rows(applied_chain, view.index, view.summary_index, view.base), DECAY_COLUMNS)
    tables = TraceTables(trace.steps, compactions_frame, probes_frame, decay_frame, len(view.probes))
    summary_row = conversation_row(view.base, view.max_tokens, view.keep_recent, len(view.messages), tables)
    losses = Losses(
        compactions=compactions_frame,
        anchors=frame([], ANCHOR_COLUMNS),
        conversation=frame([summary_row], CONVERSATION_COLUMNS),
        probes=probes_frame,
        decay=decay_frame,
        updates=frame(rows.updates, UPDATE_COLUMNS),
        settings=(trace.settings,),
    )
    return losses, view.index


def conversation_index(conversation: Conversation, built: dict[str, object] | None = None) -> ConversationIndex:
    """The anchor index measuring any trace of ``conversation`` reads: built once per message list and kept (a
    worker that builds it before measuring can time it apart, :mod:`zett_lab.study.units`); ``built``: the same
    conversation's index as another process built it (:meth:`ConversationIndex.built`), taken instead."""
    return index_of(conversation.messages, conversation.harness_context, built)


def _trace_view(trace: Any, counter: Callable[[Sequence[Any]], int]) -> TraceView:
    """The per-trace facts every attempt is measured against (probes are checked here)."""
    conversation = trace.conversation
    messages = conversation.messages
    steps: pd.DataFrame = trace.steps
    compactions: pd.DataFrame = trace.compactions
    settings = trace.settings
    summarizer = settings.summarizer
    return TraceView(
        messages=messages,
        probes=check_probes(conversation),
        index=conversation_index(conversation),
        base={"conversation_id": conversation.id, "summarizer": summarizer},
        max_tokens=settings.max_tokens,
        keep_recent=settings.keep_recent_tokens,
        counter=counter,
        steps=steps,
        summaries={int(row["compaction_id"]): row.get("summary_text") for row in compactions.to_dict("records")},
        updates=GrowingSpanUpdates(observe(messages) if len(compactions) else []),
    )


__all__ = ["Losses", "conversation_index", "measure", "measure_lost_and_counted"]
