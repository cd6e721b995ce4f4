"""Planning a judged run: the calls :func:`~zett_lab.measure.judged.run_judged` would make, how many the
cache already answers, and their estimated cost (no model is called)."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from zett_agent.model import AgentModel, ModelRequest

from ..formatting import number, usd
from ..load.conversation import Probe
from ..replay.trace import Trace
from ..summarizers.cache import CacheSpec, SummaryCache, resolve_cache
from .catalogue import labelled_html
from .judged_calls import (
    CONDITIONS,
    OUTPUT_ESTIMATE,
    Caller,
    ProbeSource,
    answer_request,
    as_traces,
    contexts_for,
    estimate_tokens,
    generated_probes,
    is_abstention,
    judge_request,
    parse_generated,
    price_map,
    probe_request,
    work_units,
)

#: Call kinds in the order the plan lists them.
_KINDS = ("probes", "answer", "score")


@dataclass(frozen=True, slots=True)
class JudgedPlan:
    """What :func:`run_judged` would do: calls, cache hits, tokens and estimated cost.

    Attributes:
        table: one row per call kind (``answer``, ``score``, ``probes``): ``calls`` (distinct
            requests), ``cached`` (already in the cache), ``to_call``, ``input_tokens``
            (estimated, uncached), ``cost_usd`` (estimated, NaN without a price).
        compactions: applied compactions covered.
        probes: (compaction, probe) pairs.
        notes: caveats (judge calls counted for every answer, though abstentions need none;
            generated probes unknown until generated).
    """

    table: pd.DataFrame
    compactions: int
    probes: int
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return int(self.table["to_call"].sum()) if len(self.table) else 0

    @property
    def cost_usd(self) -> float:
        return float(self.table["cost_usd"].sum(min_count=1)) if len(self.table) else 0.0

    def __repr__(self) -> str:
        cost = "unknown" if math.isnan(self.cost_usd) else usd(self.cost_usd)
        return (
            f"JudgedPlan(compactions={self.compactions}, probes={self.probes}, calls to make<={self.calls}, est. "
            f"cost={cost})"
        )

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        unknown = {column: (lambda v: number(v) or "?") for column in self.table.columns}
        unknown |= {"cost_usd": lambda v: usd(v) or "?"} if "cost_usd" in self.table.columns else {}
        table = labelled_html(self.table, formatters=unknown)
        return f"<div><h4>{html.escape(repr(self))}</h4>{table}<ul>{notes}</ul></div>"


def plan_judged(
    traces: Trace | Iterable[Trace],
    *,
    answerer: AgentModel,
    judge: AgentModel,
    probes: ProbeSource = "gold",
    n_generated: int = 5,
    max_probes: int | None = None,
    cache: CacheSpec = None,
    price: tuple[float, float] | None = None,
    judge_price: tuple[float, float] | None = None,
) -> JudgedPlan:
    """Count the calls a judged run would make and estimate their cost (no model is called).

    Judge calls are counted as if every answer needed one (an upper bound); with
    ``probes="generate"`` the answer/score calls assume ``n_generated`` probes per compaction.
    """
    summary_cache = resolve_cache(cache)
    caller = Caller(summary_cache, price_map(price, judge_price), None, None)
    units = work_units(as_traces(traces), probes, max_probes)
    calls = _PlannedCalls(caller, summary_cache)
    n_pairs = 0
    for trace, row, _source, chosen in units:
        if chosen is None:
            chosen = _planned_generated_probes(calls, answerer, trace, row, n_generated, max_probes)
        n_pairs += len(chosen)
        contexts = contexts_for(trace, row)
        for probe in chosen:
            _plan_probe(calls, answerer, judge, contexts, probe)
    notes = [
        "score calls for answers not yet cached are counted as if every answer needed a judge "
        "(an upper bound: an answer of NOT IN CONTEXT is scored 0 without a judge call)"
    ]
    if probes == "generate":
        notes.append("generated probes not yet cached: answer and score calls assume n_generated probes per compaction")
    return JudgedPlan(table=calls.table(), compactions=len(units), probes=n_pairs, notes=notes)


@dataclass(frozen=True, slots=True)
class _PlannedCalls:
    """Distinct requests per call kind, each with whether the cache already answers it."""

    caller: Caller
    cache: SummaryCache | None
    seen: dict[str, dict[str, tuple[ModelRequest, bool]]] = field(default_factory=lambda: {kind: {} for kind in _KINDS})

    def lookup(self, kind: str, model: Any, request: ModelRequest) -> str | None:
        """Record the request; the cached reply text, or None when it is not cached."""
        key = self.caller.key(kind, model, request)
        seen = self.seen[kind]
        hit = self.cache.get(key) if self.cache is not None and key not in seen else None
        if key not in seen:
            seen[key] = (request, hit is not None)
        return hit.text if hit is not None else None

    def table(self) -> pd.DataFrame:
        """One row per call kind: calls, cached, to_call, estimated input tokens and cost."""
        rows = []
        for kind in _KINDS:
            entries = self.seen[kind]
            if not entries:
                continue
            cached = sum(1 for _, hit in entries.values() if hit)
            tokens = sum(estimate_tokens(request) for request, hit in entries.values() if not hit)
            to_call = len(entries) - cached
            cost = self.caller.cost(kind, tokens, to_call * OUTPUT_ESTIMATE[kind])
            rows.append(
                {
                    "kind": kind,
                    "calls": len(entries),
                    "cached": cached,
                    "to_call": to_call,
                    "input_tokens": tokens,
                    "cost_usd": cost,
                }
            )
        return pd.DataFrame(rows, columns=["kind", "calls", "cached", "to_call", "input_tokens", "cost_usd"])


def _planned_generated_probes(
    calls: _PlannedCalls, answerer: Any, trace: Any, row: dict[str, Any], n_generated: int, max_probes: int | None
) -> list[Probe]:
    """The generated probes of a compaction when cached, else ``n_generated`` placeholders."""
    span_start, span_end = int(row["span_start"]), int(row["span_end"])
    span = trace.conversation.messages[span_start:span_end]
    text = calls.lookup("probes", answerer, probe_request(span, n_generated))
    if text is not None:
        chosen = generated_probes(parse_generated(text), span, n_generated, span_start)
    else:
        chosen = [Probe(f"(generated question {i})", "", "recall", span_start) for i in range(n_generated)]
    return chosen[:max_probes] if max_probes is not None else chosen


def _plan_probe(calls: _PlannedCalls, answerer: Any, judge: Any, contexts: dict[str, Any], probe: Probe) -> None:
    """The answer call per condition and, unless a cached answer abstains, its score call."""
    for condition in CONDITIONS:
        answer = calls.lookup("answer", answerer, answer_request(contexts[condition], probe.question))
        if answer is not None and (is_abstention(answer) or not answer.strip()):
            continue
        calls.lookup(
            "score",
            judge,
            judge_request(probe.question, probe.answer, (answer or "x" * 40).strip(), probe.superseded_answer),
        )


__all__ = ["JudgedPlan", "plan_judged"]
