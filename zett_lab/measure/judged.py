"""LLM-judged metrics (opt-in): probe QA after compaction, normalized between a floor and a ceiling.

For each applied compaction k and each probe whose fact lies in the span S_k, an
*answerer* model answers the probe question three times, each seeing one context
rendered as a plain-text transcript (:func:`zett_lab.summarizers.transcript.render`):

``post``      what the next model step sees: ``[system] + checkpoint(Σ_k) + T_k``
``ceiling``   no compaction: ``messages[:n_recorded]``
``floor``     the span dropped with no summary: ``[system] + T_k``

A *judge* model scores each answer against the gold answer (0..1). An answer of
exactly ``NOT IN CONTEXT`` scores 0 without a judge call. Per (compaction, probe)
the normalized retention is ``NR = (post - floor) / (ceiling - floor)`` (NaN when
ceiling == floor: the probe cannot tell a summary from no summary).

Probes come from the conversation's gold list (``probes="gold"``), from a model
(``probes="generate"``: :func:`~zett_lab.measure.judged_calls.generate_probes` over each span, ``n_generated`` per
compaction), or a callable ``(trace, compaction_row) -> list[Probe]``.

Calls go through the persistent :class:`~zett_lab.summarizers.cache.SummaryCache`
(keys: ``judged-answer:<answerer identity>`` / ``judged-score:<judge identity>`` over
the exact request), and identical requests within a run are made once (ceilings and
floors are shared by every summarizer on the same span). :func:`~zett_lab.measure.judged_plan.plan_judged` lists
the calls a run would make, how many the cache already answers, and an estimated cost
(``price`` = USD per million input and output tokens). :func:`run_judged` stops before
the call that would exceed ``max_calls`` or ``max_usd`` and returns what it finished
(remaining rows have ``status == "budget"``).

Example::

    >>> from zett_lab.summarizers import summarizer
    >>> model = summarizer("openai:gpt-5-mini")                                   # doctest: +SKIP
    >>> plan_judged(traces, answerer=model, judge=model, price=(0.25, 2.0))       # doctest: +SKIP
    >>> result = run_judged(traces, answerer=model, judge=model, max_usd=1.0)     # doctest: +SKIP
    >>> result.rows.groupby("summarizer")["nr"].mean()                            # doctest: +SKIP
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from zett_agent.messages import AnyMessage
from zett_agent.model import AgentModel

from ..asyncrun import run_sync
from ..errors import SettingError
from ..load.conversation import Probe
from ..replay.trace import Trace
from ..summarizers.cache import CacheSpec, resolve_cache
from .catalogue import labelled_html
from .judged_calls import (
    CONDITIONS,
    Caller,
    ProbeSource,
    answer_request,
    as_traces,
    contexts_for,
    generated_probes,
    is_abstention,
    judge_request,
    parse_generated,
    parse_score,
    price_map,
    probe_request,
    work_units,
)
from .lookup import contains_normalized
from .losses import Losses

JUDGED_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity of the trace",
    "compaction_id": "applied compaction",
    "probe": "index in the probe list used (gold list, or generated for this compaction)",
    "probe_source": '"gold" or "generated"',
    "type": "probe type",
    "question": "probe question",
    "answer": "gold answer",
    "superseded_answer": "update probes: the earlier answer, which the judge scores 0 (None for other types)",
    "post_answer": "answerer's reply seeing the post-compaction context",
    "post": "judge score 0..1 of post_answer",
    "ceiling": "score seeing the uncompacted context messages[:n_recorded]",
    "floor": "score seeing only the kept tail (span dropped, no summary)",
    "nr": "(post - floor) / (ceiling - floor); NaN when ceiling == floor",
    "post_superseded": (
        "update probes: post_answer gives the superseded answer and not the current one (None for other types)"
    ),
    "status": '"ok", "budget" (not run: budget reached), or "error: ..."',
}


@dataclass(frozen=True, slots=True)
class JudgedResult:
    """Result of :func:`run_judged`.

    Attributes:
        rows: one row per (applied compaction, probe) (columns in ``JUDGED_COLUMNS``).
        calls: model calls made in this run (cache hits excluded).
        cached: answers taken from the cache.
        cost_usd: estimated spend of this run (NaN without a price).
        stopped: why the run stopped early (budget), or None when it finished.
    """

    rows: pd.DataFrame
    calls: int
    cached: int
    cost_usd: float
    stopped: str | None = None

    def by_summarizer(self) -> pd.DataFrame:
        """Mean post / ceiling / floor scores and NR per summarizer (finished rows only)."""
        done = self.rows[self.rows["status"] == "ok"]
        if not len(done):
            return pd.DataFrame(columns=["summarizer", "n", "post", "ceiling", "floor", "nr"])
        grouped = done.groupby("summarizer")
        out = grouped[["post", "ceiling", "floor", "nr"]].mean()
        out.insert(0, "n", grouped.size())
        return out.reset_index()

    def __repr__(self) -> str:
        done = int((self.rows["status"] == "ok").sum()) if len(self.rows) else 0
        return (
            f"JudgedResult(rows={len(self.rows)}, done={done}, calls={self.calls}, cached={self.cached}, "
            f"stopped={self.stopped!r})"
        )

    def _repr_html_(self) -> str:
        return (
            f"<div><h4>{html.escape(repr(self))}</h4>{labelled_html(self.by_summarizer())}"
            f"{labelled_html(self.rows, max_rows=30)}</div>"
        )


def run_judged(
    traces: Trace | Iterable[Trace],
    *,
    answerer: AgentModel,
    judge: AgentModel,
    probes: ProbeSource = "gold",
    n_generated: int = 5,
    max_probes: int | None = None,
    cache: CacheSpec = None,
    max_calls: int | None = None,
    max_usd: float | None = None,
    price: tuple[float, float] | None = None,
    judge_price: tuple[float, float] | None = None,
) -> JudgedResult:
    """Run probe QA on every applied compaction (see the module docstring).

    Args:
        traces: a Trace or Traces.
        answerer, judge: any zett-agent AgentModel (e.g. ``zett_lab.summarizers.summarizer(spec)``).
        probes: ``"gold"``, ``"generate"``, or ``callable(trace, compaction_row) -> list[Probe]``.
        max_probes: at most this many probes per compaction.
        cache: a SummaryCache; None for the default one (``ZETT_LAB_CACHE``); False for none.
        max_calls, max_usd: budget; the run stops before the call that would exceed it.
        price, judge_price: USD per million (input, output) tokens; needed for ``max_usd``.
    """
    if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 0):
        raise SettingError(f"max_calls must be a non-negative int, got {max_calls!r}")
    prices = price_map(price, judge_price)
    if max_usd is not None:
        if prices["answer"] is None or prices["score"] is None:
            raise SettingError("max_usd needs a price (and judge_price when the judge costs differently)")
        if not isinstance(max_usd, (int, float)) or max_usd < 0:
            raise SettingError(f"max_usd must be a non-negative number, got {max_usd!r}")
    caller = Caller(resolve_cache(cache), prices, max_calls, max_usd)
    units = work_units(as_traces(traces), probes, max_probes)
    rows = run_sync(_run(units, caller, answerer, judge, n_generated, max_probes))
    return JudgedResult(
        rows=pd.DataFrame(rows, columns=list(JUDGED_COLUMNS)).astype(
            {"post": "float64", "ceiling": "float64", "floor": "float64", "nr": "float64"}
        ),
        calls=caller.calls,
        cached=caller.cached,
        cost_usd=caller.cost_usd if prices["answer"] is not None else math.nan,
        stopped=caller.stopped,
    )


async def _score(
    caller: Caller, answerer: Any, judge: Any, context: list[AnyMessage], probe: Probe
) -> tuple[str | None, float]:
    answer = await caller("answer", answerer, answer_request(context, probe.question))
    if answer is None:
        return None, math.nan
    if is_abstention(answer) or not answer.strip():
        return answer, 0.0
    verdict = await caller(
        "score", judge, judge_request(probe.question, probe.answer, answer.strip(), probe.superseded_answer)
    )
    if verdict is None:
        return None, math.nan
    return answer, parse_score(verdict)


def _gives_superseded(answer: str | None, probe: Probe) -> bool | None:
    """For an update probe: whether an answer gives the superseded value and not the current one (None otherwise)."""
    if probe.superseded_answer is None:
        return None
    text = answer or ""
    return contains_normalized(text, probe.superseded_answer) and not contains_normalized(text, probe.answer)


async def _run(
    units, caller: Caller, answerer, judge, n_generated: int, max_probes: int | None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for trace, row, source, chosen in units:
        base = {
            "conversation_id": trace.conversation.id,
            "summarizer": row.get("summarizer") or trace.settings.summarizer,
            "compaction_id": int(row["compaction_id"]),
            "probe_source": source,
        }
        if chosen is None:
            span_start, span_end = int(row["span_start"]), int(row["span_end"])
            span = trace.conversation.messages[span_start:span_end]
            if caller.stopped:
                continue
            text = await caller("probes", answerer, probe_request(span, n_generated))
            if text is None:
                continue
            chosen = generated_probes(parse_generated(text), span, n_generated, span_start)
            chosen = chosen[:max_probes] if max_probes is not None else chosen
        contexts = contexts_for(trace, row)
        for n, probe in enumerate(chosen):
            out = {
                **base,
                "probe": n,
                "type": probe.type,
                "question": probe.question,
                "answer": probe.answer,
                "superseded_answer": probe.superseded_answer,
            }
            rows.append({**out, **await _judged_probe(caller, answerer, judge, contexts, probe)})
    return rows


async def _judged_probe(
    caller: Caller, answerer: Any, judge: Any, contexts: dict[str, list[AnyMessage]], probe: Probe
) -> dict[str, Any]:
    """One probe's judged columns: its score in every condition and its status (``ok``, ``budget``, ``error: ...``)."""
    if caller.stopped:
        return {"status": "budget"}
    try:
        scores = {}
        post_answer = None
        for condition in CONDITIONS:
            answer, score = await _score(caller, answerer, judge, contexts[condition], probe)
            if answer is None:
                break
            scores[condition] = score
            if condition == "post":
                post_answer = answer
    except Exception as error:  # noqa: BLE001 - a provider failure on one probe is kept as its row status
        return {"status": f"error: {type(error).__name__}: {error}"}
    if len(scores) < len(CONDITIONS):
        return {**scores, "post_answer": post_answer, "status": "budget"}
    span = scores["ceiling"] - scores["floor"]
    nr = (scores["post"] - scores["floor"]) / span if span else math.nan
    return {
        **scores,
        "post_answer": post_answer,
        "nr": nr,
        "status": "ok",
        "post_superseded": _gives_superseded(post_answer, probe),
    }


# ---------------------------------------------------------------------------------------------
# Agreement between offline and judged metrics


def agreement(losses: Losses, judged: JudgedResult, *, metric: str = "post") -> pd.DataFrame:
    """Rank correlation between offline metrics and judged scores on the same compactions.

    Rows: ``needed_anchor_recall``, ``anchor_retention`` and ``probe_presence`` per compaction
    (offline, from ``losses.compactions``) against the mean judged ``metric`` (``post`` or
    ``nr``) of that compaction; and ``in_context`` per (compaction, probe) against the probe's
    judged score (gold probes only). Columns: ``offline``, ``judged``, ``level``, ``n``,
    ``spearman``, ``spearman_p``, ``kendall``, ``kendall_p`` (NaN when fewer than 3 pairs or a
    side is constant).
    """
    from scipy import stats

    done = judged.rows[judged.rows["status"] == "ok"]
    keys = ["conversation_id", "summarizer", "compaction_id"]
    out = []

    def correlate(name: str, level: str, x: pd.Series, y: pd.Series) -> None:
        pair = pd.DataFrame({"x": pd.to_numeric(x, errors="coerce"), "y": pd.to_numeric(y, errors="coerce")}).dropna()
        n = len(pair)
        result = {"offline": name, "judged": metric, "level": level, "n": n}
        if n >= 3 and pair["x"].nunique() > 1 and pair["y"].nunique() > 1:
            rho, rho_p = stats.spearmanr(pair["x"], pair["y"])
            tau, tau_p = stats.kendalltau(pair["x"], pair["y"])
            result.update(spearman=float(rho), spearman_p=float(rho_p), kendall=float(tau), kendall_p=float(tau_p))
        else:
            result.update(spearman=math.nan, spearman_p=math.nan, kendall=math.nan, kendall_p=math.nan)
        out.append(result)

    if len(done):
        per_compaction = done.groupby(keys)[metric].mean().reset_index()
        offline = losses.compactions[keys + ["needed_anchor_recall", "anchor_retention", "probe_presence"]].copy()
        offline["compaction_id"] = offline["compaction_id"].astype("int64")
        per_compaction["compaction_id"] = per_compaction["compaction_id"].astype("int64")
        joined = per_compaction.merge(offline, on=keys, how="inner")
        for name in ("needed_anchor_recall", "anchor_retention", "probe_presence"):
            correlate(name, "compaction", joined[name], joined[metric])
        gold = done[done["probe_source"] == "gold"]
        if len(gold) and len(losses.probes):
            probes = losses.probes[keys + ["probe", "in_context"]].copy()
            probes["compaction_id"] = probes["compaction_id"].astype("int64")
            probes["probe"] = probes["probe"].astype("int64")
            gold = gold.assign(compaction_id=gold["compaction_id"].astype("int64"), probe=gold["probe"].astype("int64"))
            joined = gold.merge(probes, on=keys + ["probe"], how="inner")
            correlate("in_context", "probe", joined["in_context"].astype(float), joined[metric])
    columns = ["offline", "judged", "level", "n", "spearman", "spearman_p", "kendall", "kendall_p"]
    return pd.DataFrame(out, columns=columns)


__all__ = ["JUDGED_COLUMNS", "JudgedResult", "agreement", "run_judged"]
