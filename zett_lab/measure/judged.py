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
(``probes="generate"``: :func:`generate_probes` over each span, ``n_generated`` per
compaction), or a callable ``(trace, compaction_row) -> list[Probe]``.

Calls go through the persistent :class:`~zett_lab.summarizers.cache.SummaryCache`
(keys: ``judged-answer:<answerer identity>`` / ``judged-score:<judge identity>`` over
the exact request), and identical requests within a run are made once (ceilings and
floors are shared by every summarizer on the same span). :func:`plan_judged` lists
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
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from zett_agent.messages import AnyMessage, SystemMessage, UserMessage
from zett_agent.model import AgentModel, ModelRequest, ReasoningEffort

from ..asyncrun import closing_stream, run_sync
from ..errors import SettingError, ZettLabError
from ..load.conversation import PROBE_TYPES, Probe
from ..load.text import message_text
from ..replay.run import resolve_cache
from .lookup import contains_normalized
from .losses import Losses
from .probes import check_probes, covers_probe

NOT_IN_CONTEXT = "NOT IN CONTEXT"
CONDITIONS = ("post", "ceiling", "floor")

ANSWER_INSTRUCTIONS = (
    "You answer questions about a conversation between a user and a coding agent. "
    "Use only the conversation transcript you are given. Answer with the exact fact "
    "(file path, identifier, number, error, decision) as briefly as possible. If the transcript "
    f"does not contain the answer, reply exactly: {NOT_IN_CONTEXT}"
)
JUDGE_INSTRUCTIONS = (
    "You grade an answer against a gold answer. Reply with only a number between 0 and 1: "
    "1 when the answer states the gold answer's fact exactly, 0 when it is wrong, missing or says the "
    "fact is not in context, and a value in between for a partly correct answer."
)
PROBE_INSTRUCTIONS = (
    "You write test questions about a conversation excerpt between a user and a coding agent. "
    "Each question must have a short answer copied verbatim from the excerpt: a file path, identifier, "
    "number with unit, error message, command, user constraint or decision. Reply with only a JSON list "
    'of objects {"question": ..., "answer": ..., "type": one of "recall", "artifact", "continuation", '
    '"decision"}.'
)

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


class JudgedError(ZettLabError):
    """A judged run could not be set up (bad budget, price or probe source)."""


# ---------------------------------------------------------------------------------------------
# Contexts and requests


def _render(messages: Sequence[AnyMessage]) -> str:
    from ..summarizers.transcript import render

    return render(messages)


def contexts_for(trace: Any, row: dict[str, Any]) -> dict[str, list[AnyMessage]]:
    """The three contexts (post, ceiling, floor) of one applied compaction, as message lists."""
    from ..replay.trace import checkpoint_message

    messages = trace.conversation.messages
    span_end, n_recorded = int(row["span_end"]), int(row["n_recorded"])
    system = [m for m in messages[:n_recorded] if isinstance(m, SystemMessage)][:1]
    tail = list(messages[span_end:n_recorded])
    dialogue = [m for m in messages[:n_recorded] if not isinstance(m, SystemMessage)]
    return {
        "post": [*system, checkpoint_message(str(row["summary_text"])), *tail],
        "ceiling": [*system, *dialogue],
        "floor": [*system, *tail],
    }


def answer_request(context: Sequence[AnyMessage], question: str) -> ModelRequest:
    """What the answerer is sent: instructions, then the rendered transcript and the question."""
    prompt = f"<transcript>\n{_render(context)}\n</transcript>\n\nQuestion: {question}"
    return ModelRequest(
        messages=(SystemMessage(content=ANSWER_INSTRUCTIONS), UserMessage(content=prompt)),
        reasoning_effort=ReasoningEffort.LOW,
    )


def judge_request(question: str, gold: str, answer: str, superseded: str | None = None) -> ModelRequest:
    """What the judge is sent; an update probe also names the superseded answer, which scores 0."""
    earlier = (
        f"Superseded answer (an earlier value that is no longer true; an answer that gives it instead of the gold "
        f"answer is wrong and scores 0): {superseded}\n"
        if superseded
        else ""
    )
    prompt = f"Question: {question}\nGold answer: {gold}\n{earlier}Answer to grade: {answer}\n\nScore (0..1):"
    return ModelRequest(
        messages=(SystemMessage(content=JUDGE_INSTRUCTIONS), UserMessage(content=prompt)),
        reasoning_effort=ReasoningEffort.LOW,
    )


def parse_score(text: str) -> float:
    """The first number in a judge reply, clipped to 0..1; NaN when there is none."""
    match = re.search(r"(?<![\d.])(\d+(?:\.\d+)?|\.\d+)", text or "")
    if not match:
        return math.nan
    value = float(match.group(1))
    if value > 1 and value <= 10 and "/10" in text:
        value /= 10
    return min(1.0, max(0.0, value))


def is_abstention(answer: str) -> bool:
    """Whether an answer says the fact is not in the context."""
    return NOT_IN_CONTEXT.lower() in (answer or "").strip().lower()


# ---------------------------------------------------------------------------------------------
# Model calls (cached, sync wrapper)


def _identity(model: Any) -> str:
    from ..summarizers.providers import summarizer_identity

    return summarizer_identity(model)


async def _call(model: AgentModel, request: ModelRequest) -> tuple[str, float, int | None, int | None]:
    started = time.perf_counter()
    response = None
    async with closing_stream(model.stream(request)) as events:
        async for event in events:
            if event.response is not None:
                response = event.response
    if response is None:
        raise JudgedError("the model ended its stream without a response")
    usage = response.usage
    reported = usage.input_tokens > 0 or usage.output_tokens > 0
    return (
        response.message.content or "",
        time.perf_counter() - started,
        usage.input_tokens if reported else None,
        usage.output_tokens if reported else None,
    )


def _estimate_tokens(request: ModelRequest) -> int:
    from ..tokens import count_tokens

    return count_tokens(list(request.messages))


@dataclass
class _Caller:
    """Makes calls once: in-run memo, then the persistent cache, then the model (within budget)."""

    cache: Any
    price: dict[str, tuple[float, float] | None]
    max_calls: int | None
    max_usd: float | None
    calls: int = 0
    cost_usd: float = 0.0
    cached: int = 0
    stopped: str | None = None
    memo: dict[str, str] = field(default_factory=dict)

    def _key(self, kind: str, model: Any, request: ModelRequest) -> str:
        from ..summarizers.cache import SummaryCache

        return SummaryCache.key(f"judged-{kind}:{_identity(model)}", request)

    def _cost(self, kind: str, input_tokens: float, output_tokens: float) -> float:
        price = self.price.get(kind)
        if price is None:
            return math.nan
        return (input_tokens * price[0] + output_tokens * price[1]) / 1e6

    async def __call__(self, kind: str, model: Any, request: ModelRequest) -> str | None:
        key = self._key(kind, model, request)
        if key in self.memo:
            return self.memo[key]
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.cached += 1
                self.memo[key] = hit.text
                return hit.text
        estimate = (
            self._cost(kind, _estimate_tokens(request), _OUTPUT_ESTIMATE[kind]) if self.price.get(kind) else math.nan
        )
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            self.stopped = f"max_calls={self.max_calls} reached"
            return None
        if self.max_usd is not None and self.cost_usd + (0 if math.isnan(estimate) else estimate) > self.max_usd:
            self.stopped = f"max_usd={self.max_usd} reached"
            return None
        text, latency, input_tokens, output_tokens = await _call(model, request)
        self.calls += 1
        if self.price.get(kind):
            self.cost_usd += self._cost(
                kind,
                input_tokens if input_tokens is not None else _estimate_tokens(request),
                output_tokens if output_tokens is not None else _OUTPUT_ESTIMATE[kind],
            )
        self.memo[key] = text
        if self.cache is not None and text.strip():
            from ..summarizers.cache import CachedSummary

            self.cache.put(key, CachedSummary(text, latency, input_tokens, output_tokens))
        return text


#: Output tokens assumed per call when estimating cost.
_OUTPUT_ESTIMATE = {"answer": 40, "score": 4, "probes": 400}


# ---------------------------------------------------------------------------------------------
# Probes


def _parse_generated(text: str) -> list[dict[str, Any]]:
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end <= start:
        return []
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return []
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []


def _generated_probes(
    data: list[dict[str, Any]], span_messages: Sequence[AnyMessage], n: int, start: int
) -> list[Probe]:
    texts = [message_text(m) for m in span_messages]
    probes: list[Probe] = []
    for item in data:
        question, answer = str(item.get("question") or "").strip(), str(item.get("answer") or "").strip()
        if not question or not answer:
            continue
        where = next((i for i, text in enumerate(texts) if contains_normalized(text, answer)), None)
        if where is None:
            continue  # not verbatim in the span: likely invented
        # a generated probe has no superseded answer, so it cannot be an update probe
        kind = item.get("type")
        type_ = kind if isinstance(kind, str) and kind in PROBE_TYPES and kind != "update" else "recall"
        probes.append(Probe(question=question, answer=answer, type=type_, message_index=start + where))
        if len(probes) >= n:
            break
    return probes


def generate_probes(
    model: AgentModel, span_messages: Sequence[AnyMessage], n: int = 5, *, start: int = 0, cache: Any = None
) -> list[Probe]:
    """Ask a model for ``n`` probes about a span; keep those whose answer occurs verbatim in it.

    ``message_index`` is ``start`` + the first span message containing the answer.
    ``cache``: a SummaryCache, None for the default one, False for none.
    """
    caller = _Caller(resolve_cache(cache), {}, None, None)
    request = _probe_request(span_messages, n)
    text = run_sync(caller("probes", model, request)) or ""
    return _generated_probes(_parse_generated(text), span_messages, n, start)


def _probe_request(span_messages: Sequence[AnyMessage], n: int) -> ModelRequest:
    prompt = f"<excerpt>\n{_render(span_messages)}\n</excerpt>\n\nWrite {n} questions."
    return ModelRequest(
        messages=(SystemMessage(content=PROBE_INSTRUCTIONS), UserMessage(content=prompt)),
        reasoning_effort=ReasoningEffort.LOW,
    )


# ---------------------------------------------------------------------------------------------
# Planning and running


def _as_traces(traces: Any) -> list[Any]:
    if hasattr(traces, "compactions") and hasattr(traces, "steps"):
        return [traces]
    return list(traces)


def _units(
    traces: list[Any], probes: Any, max_probes: int | None
) -> list[tuple[Any, dict[str, Any], str, list[Probe] | None]]:
    """(trace, applied compaction row, probe source, gold probes covered | None for generated)."""
    if not (probes in ("gold", "generate") or callable(probes)):
        raise JudgedError(f"probes must be 'gold', 'generate' or a callable, got {probes!r}")
    units = []
    for trace in traces:
        gold = check_probes(trace.conversation) if probes == "gold" else []
        for row in trace.compactions.sort_values("compaction_id").to_dict("records"):
            if not bool(row.get("applied")) or row.get("summary_text") is None:
                continue
            start, end = int(row["span_start"]), int(row["span_end"])
            if probes == "gold":
                chosen = [p for p in gold if covers_probe(p, start, end)]
                source = "gold"
            elif probes == "generate":
                chosen, source = None, "generated"
            else:
                chosen, source = list(probes(trace, row)), "custom"
            if chosen is not None:
                chosen = chosen[:max_probes] if max_probes is not None else chosen
                if not chosen:
                    continue
            units.append((trace, row, source, chosen))
    return units


@dataclass
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
        cost = "unknown" if math.isnan(self.cost_usd) else f"${self.cost_usd:.4f}"
        return (
            f"JudgedPlan(compactions={self.compactions}, probes={self.probes}, calls to make<={self.calls}, est. "
            f"cost={cost})"
        )

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        table = self.table.to_html(index=False, na_rep="?")
        return f"<div><h4>{html.escape(repr(self))}</h4>{table}<ul>{notes}</ul></div>"


def _price_map(price: Any, judge_price: Any) -> dict[str, tuple[float, float] | None]:
    def check(value: Any, name: str) -> tuple[float, float] | None:
        if value is None:
            return None
        try:
            pair = (float(value[0]), float(value[1]))
        except (TypeError, ValueError, IndexError):
            raise SettingError(
                f"{name} must be (USD per 1M input tokens, USD per 1M output tokens), got {value!r}"
            ) from None
        if pair[0] < 0 or pair[1] < 0:
            raise SettingError(f"{name} must not be negative, got {value!r}")
        return pair

    answer = check(price, "price")
    judge = check(judge_price, "judge_price") if judge_price is not None else answer
    return {"answer": answer, "probes": answer, "score": judge}


def plan_judged(
    traces: Any,
    *,
    answerer: AgentModel,
    judge: AgentModel,
    probes: Any = "gold",
    n_generated: int = 5,
    max_probes: int | None = None,
    cache: Any = None,
    price: tuple[float, float] | None = None,
    judge_price: tuple[float, float] | None = None,
) -> JudgedPlan:
    """Count the calls a judged run would make and estimate their cost (no model is called).

    Judge calls are counted as if every answer needed one (an upper bound); with
    ``probes="generate"`` the answer/score calls assume ``n_generated`` probes per compaction.
    """
    cache = resolve_cache(cache)
    prices = _price_map(price, judge_price)
    caller = _Caller(cache, prices, None, None)
    units = _units(_as_traces(traces), probes, max_probes)
    # kind -> key -> (request, cached?)
    seen: dict[str, dict[str, tuple[ModelRequest, bool]]] = {kind: {} for kind in ("probes", "answer", "score")}

    def lookup(kind: str, model: Any, request: ModelRequest) -> tuple[str, str | None]:
        key = caller._key(kind, model, request)
        hit = cache.get(key) if cache is not None and key not in seen[kind] else None
        if key not in seen[kind]:
            seen[kind][key] = (request, hit is not None)
        return key, hit.text if hit is not None else None

    n_pairs = 0
    notes = [
        "score calls for answers not yet cached are counted as if every answer needed a judge "
        "(an upper bound: an answer of NOT IN CONTEXT is scored 0 without a judge call)"
    ]
    for trace, row, _source, chosen in units:
        contexts = contexts_for(trace, row)
        if chosen is None:
            span_start, span_end = int(row["span_start"]), int(row["span_end"])
            span = trace.conversation.messages[span_start:span_end]
            _, text = lookup("probes", answerer, _probe_request(span, n_generated))
            if text is not None:
                chosen = _generated_probes(_parse_generated(text), span, n_generated, span_start)
            else:
                chosen = [Probe(f"(generated question {i})", "", "recall", span_start) for i in range(n_generated)]
            chosen = chosen[:max_probes] if max_probes is not None else chosen
        for probe in chosen:
            n_pairs += 1
            for condition in CONDITIONS:
                _, answer = lookup("answer", answerer, answer_request(contexts[condition], probe.question))
                if answer is not None and (is_abstention(answer) or not answer.strip()):
                    continue
                lookup(
                    "score",
                    judge,
                    judge_request(probe.question, probe.answer, (answer or "x" * 40).strip(), probe.superseded_answer),
                )
    if probes == "generate":
        notes.append("generated probes not yet cached: answer and score calls assume n_generated probes per compaction")
    rows = []
    for kind in ("probes", "answer", "score"):
        entries = seen[kind]
        if not entries:
            continue
        cached = sum(1 for _, hit in entries.values() if hit)
        tokens = sum(_estimate_tokens(request) for request, hit in entries.values() if not hit)
        to_call = len(entries) - cached
        cost = caller._cost(kind, tokens, to_call * _OUTPUT_ESTIMATE[kind])
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
    table = pd.DataFrame(rows, columns=["kind", "calls", "cached", "to_call", "input_tokens", "cost_usd"])
    return JudgedPlan(table=table, compactions=len(units), probes=n_pairs, notes=notes)


@dataclass
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
            f"<div><h4>{html.escape(repr(self))}</h4>{self.by_summarizer().to_html(index=False, na_rep='')}"
            f"{self.rows.to_html(index=False, na_rep='', max_rows=30)}</div>"
        )


def run_judged(
    traces: Any,
    *,
    answerer: AgentModel,
    judge: AgentModel,
    probes: Any = "gold",
    n_generated: int = 5,
    max_probes: int | None = None,
    cache: Any = None,
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
    prices = _price_map(price, judge_price)
    if max_usd is not None:
        if prices["answer"] is None or prices["score"] is None:
            raise SettingError("max_usd needs a price (and judge_price when the judge costs differently)")
        if not isinstance(max_usd, (int, float)) or max_usd < 0:
            raise SettingError(f"max_usd must be a non-negative number, got {max_usd!r}")
    caller = _Caller(resolve_cache(cache), prices, max_calls, max_usd)
    units = _units(_as_traces(traces), probes, max_probes)
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
    caller: _Caller, answerer: Any, judge: Any, context: list[AnyMessage], probe: Probe
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
    units, caller: _Caller, answerer, judge, n_generated: int, max_probes: int | None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for trace, row, source, chosen in units:
        base = {
            "conversation_id": trace.conversation.id,
            "summarizer": row.get("summarizer") or (trace.settings or {}).get("summarizer"),
            "compaction_id": int(row["compaction_id"]),
            "probe_source": source,
        }
        if chosen is None:
            span_start, span_end = int(row["span_start"]), int(row["span_end"])
            span = trace.conversation.messages[span_start:span_end]
            if caller.stopped:
                continue
            text = await caller("probes", answerer, _probe_request(span, n_generated))
            if text is None:
                continue
            chosen = _generated_probes(_parse_generated(text), span, n_generated, span_start)
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
            if caller.stopped:
                rows.append({**out, "status": "budget"})
                continue
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
                rows.append({**out, "status": f"error: {type(error).__name__}: {error}"})
                continue
            if len(scores) < len(CONDITIONS):
                rows.append({**out, **scores, "post_answer": post_answer, "status": "budget"})
                continue
            span = scores["ceiling"] - scores["floor"]
            nr = (scores["post"] - scores["floor"]) / span if span else math.nan
            rows.append(
                {
                    **out,
                    **scores,
                    "post_answer": post_answer,
                    "nr": nr,
                    "status": "ok",
                    "post_superseded": _gives_superseded(post_answer, probe),
                }
            )
    return rows


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


__all__ = [
    "ANSWER_INSTRUCTIONS",
    "JUDGED_COLUMNS",
    "JUDGE_INSTRUCTIONS",
    "NOT_IN_CONTEXT",
    "JudgedPlan",
    "JudgedResult",
    "agreement",
    "answer_request",
    "contexts_for",
    "generate_probes",
    "judge_request",
    "parse_score",
    "plan_judged",
    "run_judged",
]
