"""Production summaries beside the baselines: every recorded (native) compaction's identical span summarized by
other summarizers through the engine's summary step, and measured the same way.

:func:`span_traces` summarizes the spans (this is why it is a study: it calls summary models);
:func:`zett_lab.study.compare` pairs them with the native summaries; :func:`production_summaries` lists each
native compaction beside every baseline on its span, as the report's "Production summaries" section shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from zett_agent.model import AgentModel, ReasoningEffort

from ..load.conversation import Conversation
from ..measure import measure
from ..measure.catalogue import default_metrics
from ..measure.native import native_traces
from ..replay.run import summarize_spans
from ..replay.schema import NOT_SMALLER
from ..replay.setting import SummarizerSpec
from ..replay.trace import Trace
from ..summarizers.cache import CacheSpec
from ..tokens import count_tokens


def span_traces(
    traces: Sequence[Trace],
    summarizer: AgentModel | str | None,
    *,
    cache: CacheSpec = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
) -> list[Trace]:
    """The spans of (native) traces summarized by ``summarizer`` through the engine's summary step.

    One trace per input trace, with the same ``compaction_id``, spans and ``n_recorded``: the
    comparison pairs each native summary with the baseline's summary of the identical span.
    ``cache`` and ``reasoning_effort`` are :func:`zett_lab.replay.run.summarize_spans`'s.
    """
    out = []
    for trace in traces:
        rows = trace.compactions.sort_values("compaction_id").to_dict("records")
        spans = [(int(r["span_start"]), int(r["span_end"]), int(r["n_recorded"])) for r in rows]
        result = summarize_spans(
            trace.conversation, spans, summarizer=summarizer, cache=cache, reasoning_effort=reasoning_effort
        )
        result.compactions["compaction_id"] = [int(r["compaction_id"]) for r in rows]
        out.append(result)
    return out


#: Columns of :func:`production_summaries` (then one column per compared metric, then ``lost``).
PRODUCTION_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "subject": "the production summarizer, native:<agent>",
    "native_id": "index in Conversation.native_compactions",
    "kind": "NativeCompaction.kind",
    "trigger": "what the log says triggered it (auto / manual), when it says",
    "position": "first message recorded after it: when it happened",
    "tokens_before": "context size before it by the agent's own figure (NA when the log has none)",
    "estimate_before": "zett-agent's estimate of messages[:position] (the engine's counter)",
    "span_start": "first message the summary stands for",
    "span_end": "first message it does not stand for",
    "span_tokens": "the engine's counter over the raw span",
    "summarizer": "the native subject (its recorded summary) or a baseline summarizing the identical span",
    "status": f"'applied', '{NOT_SMALLER}' (a baseline the engine would discard), 'failed', or 'summary missing from log'",
    "summary_tokens": "the summary as a checkpoint message (NA when missing or failed)",
}


def production_summaries(
    conversations: Iterable[Conversation],
    baselines: Sequence[SummarizerSpec] | Mapping[str, SummarizerSpec] = (),
    *,
    metrics: Sequence[str] | None = None,
    lost_limit: int = 10,
    cache: CacheSpec = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
) -> pd.DataFrame:
    """Every recorded production summary next to each baseline summarizing its identical span.

    One row per (native compaction, summarizer): where and when it happened (the agent's own
    token figure beside zett-agent's estimate), the span it replaced, its size, the loss
    metrics, and ``lost``: the items the user or the agent used again later that this summary
    dropped (rarest first, at most ``lost_limit``). A native compaction whose log lost the
    summary text keeps its row (``status`` says so, metrics NA). ``baselines`` are summarizer
    specs or models, or a mapping name -> spec or model; ``cache`` and ``reasoning_effort`` go to
    :func:`span_traces`.
    """
    metrics = list(metrics if metrics is not None else default_metrics("compaction"))
    conversations = list(conversations)
    rows: list[dict[str, Any]] = []
    for subject, natives in native_traces(conversations).items():
        named = baselines.items() if isinstance(baselines, Mapping) else [(str(b), b) for b in baselines]
        subjects = [(subject, natives)] + [
            (name, span_traces(natives, model, cache=cache, reasoning_effort=reasoning_effort)) for name, model in named
        ]
        facts = {(c.id, k): (c, n) for c in conversations for k, n in enumerate(c.native_compactions)}
        for name, traces in subjects:
            losses = measure(traces)
            lost = losses.lost_but_needed()
            for row in losses.compactions.to_dict("records"):
                conversation, native = facts[(row["conversation_id"], int(row["compaction_id"]))]
                missing = name == subject and not native.summary
                dropped = lost[
                    (lost["conversation_id"] == row["conversation_id"])
                    & (lost["compaction_id"] == row["compaction_id"])
                ]
                dropped = dropped.sort_values(["rarity", "message_index"], ascending=[False, True])["value"].head(
                    lost_limit
                )
                rows.append(
                    {
                        "conversation_id": row["conversation_id"],
                        "subject": subject,
                        "native_id": int(row["compaction_id"]),
                        "kind": native.kind,
                        "trigger": native.metadata.get("trigger"),
                        "position": native.position,
                        "tokens_before": native.tokens_before,
                        "estimate_before": count_tokens(conversation.messages[: native.position]),
                        "span_start": row["span_start"],
                        "span_end": row["span_end"],
                        "span_tokens": row["span_tokens"],
                        "summarizer": name,
                        "status": "summary missing from log" if missing else row["status"],
                        "summary_tokens": row["summary_tokens"],
                        **{m: row.get(m) for m in metrics},
                        "lost": list(dropped),
                    }
                )
    return pd.DataFrame(rows, columns=[*PRODUCTION_COLUMNS, *metrics, "lost"])
