"""A paired comparison of summarizers: every one summarizes the same spans at the same steps.

The first summarizer is replayed with the engine deciding (``max_tokens``,
``keep_recent_tokens``); the steps where it applied a compaction are then forced
(``compact_at=["step:N", ...]``, with automatic compaction out of reach) for every summarizer.
Differences between the summarizers are then differences between summaries, not between
schedules. The per-summarizer figures are the ones :func:`zett_lab.measure` defines, and the
statistics those of :func:`zett_lab.compare` over the shared compactions.

Example::

    >>> session = Session(conversations, ["anchors:0.1", "mask", "truncate:0.1"])           # doctest: +SKIP
    >>> paired = paired_comparison(session, "billing-rounding", 12_000, 3_000)          # doctest: +SKIP
    >>> paired.metrics, paired.comparison.summary                                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ..measure import Comparison, Losses, compare, measure
from ..measure.compare import ENGINE_METRICS
from ..records import flags
from ..replay.engine import EngineSpec
from ..replay.trace import Trace
from .session import Session

#: ``max_tokens`` of the paired replays: far above any context, so only the forced compactions happen.
UNREACHABLE = 10**12
#: Columns of :attr:`PairedComparison.table` (one row per compaction and summarizer).
TABLE_COLUMNS = [
    "summarizer",
    "compaction_id",
    "step",
    "span_start",
    "span_end",
    "older_tokens",
    "summary_tokens",
    "compression_ratio",
    "applied",
    "skip_reason",
    "latency_s",
    "summary_text",
]
#: Loss figures per summarizer, taken from ``Losses.conversation`` (their definitions live in the metric catalogue).
LOSS_COLUMNS = ("compression_ratio", "anchor_retention", "needed_anchor_recall", "lost_but_needed", "superseded_rate")


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """The result of :func:`paired_comparison`.

    Attributes:
        reference: The engine-decided replay of the first summarizer.
        compact_at: The forced steps (``"step:N"``), one per compaction the reference applied.
        traces: The paired replay of each summarizer, by label (empty when there is nothing to compare).
        losses: Their loss metrics, by label (None when not measured).
        table: One row per compaction and summarizer (``TABLE_COLUMNS``).
        metrics: One row per summarizer: compactions, applied, mean summary tokens, total latency, and the
            loss figures of ``Losses.conversation`` (``LOSS_COLUMNS``) when measured.
        comparison: :func:`zett_lab.compare` over the shared compactions (None when not measured or nothing to compare).
    """

    reference: Trace
    compact_at: tuple[str, ...]
    traces: dict[str, Trace]
    losses: dict[str, Losses | None]
    table: pd.DataFrame
    metrics: pd.DataFrame
    comparison: Comparison | None


def paired_comparison(
    session: Session,
    conversation_id: str,
    max_tokens: int,
    keep_recent_tokens: int,
    *,
    summarizers: Sequence[str] | None = None,
    measure_losses: bool = True,
) -> PairedComparison:
    """Replay the reference, then every summarizer on the reference's compaction steps (through ``session``)."""
    labels = list(summarizers or session.summarizers)
    reference = session.run(
        conversation_id, session.setting(labels[0], max_tokens, keep_recent_tokens), measure_losses=False
    ).trace
    compactions = reference.compactions
    steps = sorted({int(s) for s in compactions.loc[flags(compactions["applied"]), "step"]}) if len(compactions) else []
    compact_at = tuple(f"step:{step}" for step in steps)
    traces: dict[str, Trace] = {}
    losses: dict[str, Losses | None] = {}
    if compact_at:
        for label in labels:
            result = session.run(
                conversation_id,
                session.setting(label, UNREACHABLE, keep_recent_tokens, compact_at=compact_at),
                measure_losses=measure_losses,
            )
            traces[label], losses[label] = result.trace, result.losses
    measured = bool(losses) and all(value is not None for value in losses.values())
    return PairedComparison(
        reference=reference,
        compact_at=compact_at,
        traces=traces,
        losses=losses,
        table=summary_table(traces),
        metrics=summarizer_metrics(traces, losses),
        comparison=compare(dict(losses), level="compaction", seed=0) if measured else None,
    )


def summary_table(traces: Mapping[str, Trace]) -> pd.DataFrame:
    """One row per compaction and summarizer: where, how large, applied or why not, and the summary text."""
    frames = [trace.compactions.assign(summarizer=label) for label, trace in traces.items()]
    if not frames:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    return pd.concat(frames, ignore_index=True)[TABLE_COLUMNS]


def summarizer_metrics(traces: Mapping[str, Trace], losses: Mapping[str, Losses | None]) -> pd.DataFrame:
    """One row per summarizer: counts and costs from its trace, loss figures from its ``Losses.conversation``."""
    rows = []
    for label, trace in traces.items():
        compactions = trace.compactions
        row: dict[str, object] = {
            "summarizer": label,
            "compactions": len(compactions),
            "applied": int(flags(compactions["applied"]).sum()) if len(compactions) else 0,
            "mean_summary_tokens": float(pd.to_numeric(compactions["summary_tokens"], errors="coerce").mean()),
            "total_latency_s": float(compactions["latency_s"].sum()) if len(compactions) else 0.0,
        }
        measured = losses.get(label)
        if measured is not None and len(measured.conversation):
            conversation = measured.conversation.iloc[0]
            row.update({name: conversation[name] for name in LOSS_COLUMNS if name in conversation.index})
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True, slots=True)
class EnginePairing:
    """The result of :func:`paired_engines`: every conversation under every engine at one setting.

    Attributes:
        traces: ``(conversation_id, engine label) -> Trace``.
        metrics: One row per conversation and engine: :data:`~zett_lab.measure.compare.ENGINE_METRICS`
            from ``Losses.conversation``.
        comparison: ``compare(..., by="engine")``: paired per conversation, means with bootstrap intervals.
    """

    traces: dict[tuple[str, str], Trace]
    metrics: pd.DataFrame
    comparison: Comparison


def paired_engines(
    session: Session, engines: Mapping[str, EngineSpec], summarizer: str, max_tokens: int, keep_recent_tokens: int
) -> EnginePairing:
    """Replay every conversation of ``session`` with each engine (and one summarizer) at one setting, paired.

    Two engines rarely cut the same spans, so the unit of the pairing is the conversation at the setting.
    """
    traces: dict[tuple[str, str], Trace] = {}
    by_engine: dict[str, list[Losses]] = {label: [] for label in engines}
    rows = []
    for conversation_id in session.conversations:
        for label, engine in engines.items():
            result = session.run(
                conversation_id, session.setting(summarizer, max_tokens, keep_recent_tokens, engine=engine)
            )
            losses = result.losses if result.losses is not None else measure(result.trace)
            traces[(conversation_id, label)] = result.trace
            by_engine[label].append(losses)
            figures = losses.conversation.iloc[0]
            rows.append(
                {"conversation_id": conversation_id, "engine": label, **{m: figures.get(m) for m in ENGINE_METRICS}}
            )
    return EnginePairing(traces=traces, metrics=pd.DataFrame(rows), comparison=compare(by_engine, by="engine", seed=0))
