"""The report's data: everything it shows, computed once from traces, a sweep and loss metrics.

:class:`Report` is presentation only: it takes what the earlier stages produced (traces, a
sweep, :class:`~zett_lab.measure.Losses`, a :class:`~zett_lab.measure.Comparison`) and
computes what is missing with those stages' own functions. :meth:`Report.build` runs the
whole pipeline for a list of conversations.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import SettingError
from ...files import write_atomic
from ...records import plain
from .values import DIGITS, RECOMMEND_COST, RECOMMEND_LOSS, REPORT_METRICS, excerpt

#: Summarizers ``zett-lab report`` runs on recorded conversations: the built-in offline ones,
#: the default first (no network, no key, deterministic).
DEFAULT_REPORT_SUMMARIZERS: tuple[str, ...] = ("anchors", "extractive", "truncate", "mask")

#: Primary model whose list prices turn token counts into money in the cost section.
DEFAULT_PRIMARY_MODEL = "gpt-5-mini"

#: Anchor types in the order the "lost but needed" list prefers them (most harmful first).
_TYPE_PRIORITY = ("constraint", "error", "command", "path", "url", "sha", "decision", "identifier", "number")

#: Price-table name used for summary models with no known list price (their tokens still count).
_UNPRICED = "unpriced-summary-model"

#: Characters of a summary shown beside each lost-but-needed item (the start of the summary).
SUMMARY_CHARS = 800


def _today() -> str:
    return _dt.date.today().isoformat()


def _date_text(value: str | _dt.date | None) -> str:
    if value is None:
        return _today()
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()[:10]
    text = str(value).strip()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise SettingError(f"date must be YYYY-MM-DD, got {value!r}")
    return text


def _round_sig(value: float, digits: int = 2) -> int:
    if value <= 0:
        return 0
    magnitude = 10 ** (math.floor(math.log10(value)) - digits + 1)
    return int(round(value / magnitude) * magnitude)


def default_grid(conversations: Sequence[Any]) -> dict[str, list[int]]:
    """A small grid scaled to the conversations: what ``zett-lab report`` runs by default.

    ``max_tokens`` at a quarter, half and all of the median conversation's size (two
    significant digits, at least 2,000), ``keep_recent_tokens`` at a quarter and half of the
    smallest ``max_tokens``. On the bundled fixtures: 6.1k/12k/24k × 1.5k/3k.
    """
    from ...tokens import count_tokens

    sizes = sorted(count_tokens(c.messages) for c in conversations) or [8000]
    median = max(sizes[len(sizes) // 2], 8000)
    max_tokens = sorted({max(2000, _round_sig(median * share)) for share in (0.25, 0.5, 1.0)})
    keep = sorted({max(500, _round_sig(max_tokens[0] * share)) for share in (0.25, 0.5)})
    return {"max_tokens": max_tokens, "keep_recent_tokens": keep}


@dataclass
class Failure:
    """A replay that could not run (it is listed in the report instead of stopping it)."""

    conversation_id: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int
    error: str


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass(eq=False)
class Report:
    """A study of compaction on recorded conversations, as one self-contained document.

    Give it what you have; it computes the rest with zett_lab's own functions:

    Args:
        traces: Replays (:class:`~zett_lab.replay.trace.Trace`), any mix of conversations,
            settings and summarizers.
        sweep: A :class:`zett_lab.study.sweep.Sweep` (its traces are added to ``traces``).
        losses: :class:`~zett_lab.measure.Losses` of those traces (measured when None).
        comparison: :class:`~zett_lab.measure.Comparison` of the summarizers (computed,
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
        constraints: Recommend the cheapest setting meeting these (e.g.
            ``"needed_anchor_recall >= 0.8"``, see :func:`zett_lab.study.sweep.recommend`);
            default: the knee of the Pareto front (the rule is printed in the report).
        notes: Extra sentences printed under "What was studied".

    Example::

        >>> report = Report.build(zett_lab.load_all("fixtures/"))     # doctest: +SKIP
        >>> report.save_html("report.html")                            # doctest: +SKIP
        >>> report                                                     # doctest: +SKIP
    """

    traces: Sequence[Any] = ()
    sweep: Any = None
    losses: Any = None
    comparison: Any = None
    title: str = "Context compaction report"
    date: str | _dt.date | None = None
    explore: str | None = None
    primary_model: str = DEFAULT_PRIMARY_MODEL
    top_lost: int = 30
    failures: Sequence[Failure] = ()
    constraints: str | Mapping[str, Any] | None = None
    notes: Sequence[str] = ()
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.date = _date_text(self.date)
        given = list(self.traces or ())
        if isinstance(self.top_lost, bool) or not isinstance(self.top_lost, int) or self.top_lost < 0:
            raise SettingError(f"top_lost must be a non-negative int, got {self.top_lost!r}")
        self.failures = list(self.failures or ())
        entries: list[tuple[str, Any]] = [(str(t.settings.get("summarizer")), t) for t in given]
        self._direct = list(entries)
        if self.sweep is not None:
            entries.extend(_sweep_entries(self.sweep))
            self.failures.extend(_sweep_failures(self.sweep))
        if not entries:
            raise SettingError("a report needs at least one trace (pass traces=, sweep=, or use Report.build)")
        self._entries = entries
        self.traces = [trace for _, trace in entries]

    # --- building -----------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        conversations: Any,
        summarizers: Sequence[Any] | None = None,
        grid: Mapping[str, Sequence[int]] | None = None,
        *,
        cache: Any = None,
        progress: bool = False,
        executor: Any = None,
        **options: Any,
    ) -> Report:
        """Run a sweep of ``conversations`` over ``grid`` with ``summarizers`` and build the report.

        Args:
            conversations: Conversations, or a path / paths for :func:`zett_lab.load_all`.
            summarizers: Specs or models (default :data:`DEFAULT_REPORT_SUMMARIZERS`).
            grid: ``{"max_tokens": [...], "keep_recent_tokens": [...]}`` (default
                :func:`default_grid`).
            cache: Summary cache for the replays (see :func:`zett_lab.replay`).
            progress: Show a progress bar on stderr.
            executor: Passed to :func:`zett_lab.study.sweep.sweep` (None: a process pool).
            **options: Passed to :class:`Report` (title, date, explore, primary_model, ...).
        """
        from ...study.sweep import sweep

        if isinstance(conversations, (str, Path)) or (
            isinstance(conversations, (list, tuple)) and conversations and isinstance(conversations[0], (str, Path))
        ):
            from ...load import load_all

            conversations = load_all(conversations)
        conversations = list(conversations)
        if not conversations:
            raise SettingError("Report.build needs at least one conversation")
        summarizers = list(summarizers or DEFAULT_REPORT_SUMMARIZERS)
        grid = dict(grid or default_grid(conversations))
        result = sweep(
            conversations,
            max_tokens=list(grid["max_tokens"]),
            keep_recent_tokens=list(grid["keep_recent_tokens"]),
            summarizers=summarizers,
            cache=cache,
            progress=bool(progress),
            executor=executor,
            primary_model=options.get("primary_model", DEFAULT_PRIMARY_MODEL),
        )
        if not len(result.results) or result.results["error"].notna().all():
            first = result.results["error"].dropna()
            raise SettingError(f"no replay succeeded{f' (first error: {first.iloc[0]})' if len(first) else ''}")
        return cls(sweep=result, **options)

    # --- data -------------------------------------------------------------------------------------

    def losses_for(self, trace: Any) -> Any:
        """Loss metrics of one trace (measured once, on demand)."""
        from ...measure import measure

        store = self._cache.setdefault("losses_for", {})
        if id(trace) not in store:
            store[id(trace)] = (trace, measure(trace))
        return store[id(trace)][1]

    @cached_property
    def conversations(self) -> list[Any]:
        """The conversations studied, once each, in the order first replayed."""
        seen: dict[str, Any] = {}
        for trace in self.traces:
            seen.setdefault(trace.conversation.id, trace.conversation)
        return list(seen.values())

    @cached_property
    def summarizers(self) -> list[str]:
        """Summarizer names (the sweep's labels, else identities), in the order first replayed."""
        names = list(dict.fromkeys(label for label, _ in self._entries))
        if self.sweep is not None:
            labels = [str(label) for label in getattr(self.sweep, "config", {}).get("summarizers", [])]
            return [n for n in labels if n in names] + [n for n in names if n not in labels]
        return names

    @cached_property
    def identities(self) -> dict[str, str]:
        """Summarizer name -> the identity string its traces recorded."""
        out: dict[str, str] = {}
        for label, trace in self._entries:
            out.setdefault(label, str(trace.settings.get("summarizer")))
        return out

    @cached_property
    def settings_grid(self) -> dict[str, list[int]]:
        return {
            "max_tokens": sorted({int(t.settings["max_tokens"]) for t in self.traces}),
            "keep_recent_tokens": sorted({int(t.settings["keep_recent_tokens"]) for t in self.traces}),
        }

    def trace_for(self, conversation_id: str, summarizer: str, max_tokens: int, keep_recent_tokens: int) -> Any | None:
        """The trace of one cell, or None."""
        return self._trace_index.get((conversation_id, summarizer, int(max_tokens), int(keep_recent_tokens)))

    @cached_property
    def _trace_index(self) -> dict[tuple[str, str, int, int], Any]:
        index: dict[tuple[str, str, int, int], Any] = {}
        for label, trace in self._entries:
            key = (
                trace.conversation.id,
                label,
                int(trace.settings["max_tokens"]),
                int(trace.settings["keep_recent_tokens"]),
            )
            index.setdefault(key, trace)
        return index

    def cell_traces(self, max_tokens: int, keep_recent_tokens: int) -> list[tuple[str, Any]]:
        """``(summarizer, trace)`` of every replay at one setting."""
        return [
            (label, trace)
            for label, trace in self._entries
            if int(trace.settings["max_tokens"]) == int(max_tokens)
            and int(trace.settings["keep_recent_tokens"]) == int(keep_recent_tokens)
        ]

    @cached_property
    def results(self) -> pd.DataFrame:
        """One row per replay: settings, budget figures, loss metrics and costs.

        From the sweep's results table when there is a sweep; otherwise measured here
        (:func:`zett_lab.measure.measure`, :mod:`zett_lab.measure.cost`).
        """
        keys = ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens"]
        parts = []
        if self.sweep is not None:
            table = self.sweep.results
            if "error" in table.columns:
                table = table[table["error"].isna()]
            parts.append(table.copy())
        if self._direct:
            parts.append(pd.DataFrame([self._direct_row(label, trace) for label, trace in self._direct]))
        table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        costs = self.costs_per_replay
        if len(costs) and len(table):
            extra = [c for c in costs.columns if c not in table.columns or c in keys]
            if len(extra) > len(keys):
                table = table.merge(costs[extra], on=keys, how="left")
        for column in ("max_tokens", "keep_recent_tokens"):
            table[column] = table[column].astype("int64")
        return table.sort_values(
            ["summarizer", "max_tokens", "keep_recent_tokens", "conversation_id"], kind="stable"
        ).reset_index(drop=True)

    def _direct_row(self, label: str, trace: Any) -> dict[str, Any]:
        """The results row of a trace given directly: budget figures and loss metrics."""
        row = trace.summary()
        measured = None
        if self.losses is not None and len(self.losses.conversation):
            table = self.losses.conversation
            match = table[
                (table["conversation_id"] == trace.conversation.id)
                & (table["summarizer"] == str(trace.settings.get("summarizer")))
                & (table["max_tokens"] == int(trace.settings["max_tokens"]))
                & (table["keep_recent_tokens"] == int(trace.settings["keep_recent_tokens"]))
            ]
            measured = match.iloc[0].to_dict() if len(match) else None
        if measured is None:
            measured = self.losses_for(trace).conversation.iloc[0].to_dict()
        for key, value in measured.items():
            row.setdefault(key, value)
        row["summarizer"] = label
        return row

    @cached_property
    def costs_per_replay(self) -> pd.DataFrame:
        """Tokens and money per replay (:func:`zett_lab.measure.cost.add_costs` / ``cost_summary``)."""
        from ...measure.cost import add_costs, cost_summary, load_prices

        steps, compactions = [], []
        for label, trace in self._entries:
            s = trace.steps.copy()
            s["summarizer"] = label
            steps.append(s)
            if len(trace.compactions):
                c = trace.compactions.copy()
                c["summarizer"] = label
                c["max_tokens"], c["keep_recent_tokens"] = (
                    int(trace.settings["max_tokens"]),
                    int(trace.settings["keep_recent_tokens"]),
                )
                compactions.append(c)
        all_steps = pd.concat(steps, ignore_index=True)
        all_compactions = pd.concat(compactions, ignore_index=True) if compactions else None
        identities = self.identities
        table = load_prices()
        priced: dict[str, str] = {}
        for label, identity in identities.items():
            try:
                table.lookup(identity)
                priced[label] = identity
            except SettingError:
                priced[label] = _UNPRICED
        self._cache["unpriced"] = sorted(label for label, name in priced.items() if name == _UNPRICED)
        if all_compactions is not None:
            all_compactions["summarizer"] = all_compactions["summarizer"].map(lambda s: priced.get(s, s))
        priced_steps, priced_compactions = add_costs(
            all_steps, all_compactions, primary_model=self.primary_model,
            prices={_UNPRICED: {"input": 0.0, "cached_input": 0.0, "output": 0.0, "source": "no list price known"}},
        )
        if all_compactions is not None and len(priced_compactions):
            labels = pd.concat([c["summarizer"] for c in compactions], ignore_index=True)
            priced_compactions["summarizer"] = labels.to_numpy()
        summary = cost_summary(priced_steps, priced_compactions if all_compactions is not None else None).reset_index()
        summary = summary.drop(columns=["steps"], errors="ignore")
        for column in ("max_tokens", "keep_recent_tokens"):
            summary[column] = summary[column].astype("int64")
        return summary

    @property
    def unpriced_summarizers(self) -> list[str]:
        """Summarizers with no list price: their summary tokens are counted, their money shown as $0."""
        self.costs_per_replay  # noqa: B018 - computes the list
        return list(self._cache.get("unpriced", []))

    @cached_property
    def comparison_result(self) -> Any | None:
        """The summarizer comparison (given, or computed paired per conversation and setting)."""
        if self.comparison is not None:
            return self.comparison
        if len(self.summarizers) < 2:
            return None
        from ...measure import Losses, compare

        results = self.results
        metrics = [m for m in REPORT_METRICS if m in results.columns]
        empty = pd.DataFrame()
        parts = {
            name: Losses(
                compactions=empty,
                anchors=empty,
                conversation=results[results["summarizer"] == name].reset_index(drop=True),
                probes=empty,
                decay=empty,
            )
            for name in self.summarizers
        }
        return compare(parts, metrics=metrics, level="conversation", seed=0)

    @cached_property
    def recommendation(self) -> dict[str, Any] | None:
        """The recommended (summarizer, max_tokens, keep_recent_tokens) and why."""
        return recommend_setting(self.results, self.constraints)

    @cached_property
    def explore_id(self) -> str:
        if self.explore is not None:
            ids = [c.id for c in self.conversations]
            if self.explore not in ids:
                raise SettingError(
                    f"explore={self.explore!r} is not a conversation of this report; have: {', '.join(ids[:20])}"
                )
            return self.explore
        table = self.results
        if not len(table):
            return self.conversations[0].id
        totals = table.groupby("conversation_id", sort=True)["compactions_applied"].sum()
        steps = table.groupby("conversation_id", sort=True)["steps"].max()
        order = sorted(totals.index, key=lambda cid: (-int(totals[cid]), int(steps[cid]), str(cid)))
        return order[0]

    @cached_property
    def lost_items(self) -> list[dict[str, Any]]:
        """The top "lost but needed later" anchors, with the span and summary they came from."""
        return lost_but_needed_items(self, self.top_lost)

    # --- output -----------------------------------------------------------------------------------

    def to_html(self) -> str:
        """The whole report as one self-contained HTML page (no network request when opened)."""
        if "html" not in self._cache:
            from .render import render_html

            self._cache["html"] = render_html(self)
        return self._cache["html"]

    def save_html(self, path: str | Path) -> Path:
        """Write :meth:`to_html` to ``path`` atomically (a temporary file beside it, then a rename)."""
        return _write_atomic(Path(path), self.to_html())

    def to_markdown(self) -> str:
        """The report's tables and findings as Markdown (figures and the explorer are HTML only)."""
        from .render import render_markdown

        return render_markdown(self)

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

    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the report as ``html``, ``md`` or ``json`` (default: from the suffix, else html)."""
        path = Path(path)
        fmt = format or {".md": "md", ".markdown": "md", ".json": "json"}.get(path.suffix.lower(), "html")
        if fmt == "html":
            return self.save_html(path)
        if fmt == "md":
            return _write_atomic(path, self.to_markdown())
        if fmt == "json":
            return _write_atomic(path, self.to_json())
        raise SettingError(f"report format must be html, md or json, got {format!r}")

    def _repr_html_(self) -> str:
        """The report in an isolated frame (its CSS and scripts cannot touch the notebook's)."""
        import html

        return (
            '<iframe class="zett-lab-report" title="zett_lab report" sandbox="allow-scripts" '
            'style="width:100%;height:820px;border:1px solid #ddd;border-radius:4px" '
            f'srcdoc="{html.escape(self.to_html(), quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        return (
            f"Report(title={self.title!r}, conversations={len(self.conversations)}, "
            f"summarizers={len(self.summarizers)}, replays={len(self.traces)}, date={self.date!r})"
        )

    # --- the data document (JSON, and the source of the HTML/Markdown tables) ---------------------

    def document(self) -> dict[str, Any]:
        """Everything the report states, as plain data."""
        if "document" not in self._cache:
            from .content import build_document

            self._cache["document"] = build_document(self)
        return self._cache["document"]


def _sweep_entries(sweep: Any) -> list[tuple[str, Any]]:
    """``(summarizer label, trace)`` for every complete cell of a :class:`zett_lab.study.sweep.Sweep`."""
    traces = getattr(sweep, "traces", None)
    if not callable(traces):
        raise SettingError(f"sweep= must be a zett_lab.study.sweep.Sweep, got {type(sweep).__name__}")
    return [(str(key[1]), trace) for key, trace in traces()]


def _sweep_failures(sweep: Any) -> list[Failure]:
    table = getattr(sweep, "results", None)
    if not isinstance(table, pd.DataFrame) or "error" not in table.columns:
        return []
    failed = table[table["error"].notna()]
    return [
        Failure(
            str(r.conversation_id),
            str(r.summarizer),
            int(r.max_tokens),
            int(r.keep_recent_tokens),
            " ".join(str(r.error).split())[:400],
        )
        for r in failed.itertuples(index=False)
    ]


#: Cost and loss the recommendation trades off (per setting: cost summed, loss averaged over conversations).

_KNEE_RULE = (
    "Rule: per setting (summarizer, max_tokens, keep_recent_tokens), primary input tokens are summed and "
    "lost-but-needed anchors averaged over conversations; the Pareto front holds the settings no other setting "
    "beats on both (zett_lab.study.sweep.pareto_front); the recommended one is the front point closest to the ideal "
    "corner (fewest tokens, fewest lost anchors) once both axes are scaled to [0, 1] over all settings."
)


def recommend_setting(
    results: pd.DataFrame, constraints: str | Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Pick one (summarizer, max_tokens, keep_recent_tokens) from the per-replay results.

    With ``constraints`` (e.g. ``"needed_anchor_recall >= 0.8"``): the cheapest setting that
    meets them in every conversation (:func:`zett_lab.study.sweep.recommend`); when none does, the
    reason is kept and the rule below is used. Without: the knee of the Pareto front on
    (total primary input tokens, mean lost-but-needed anchors), see ``rule`` in the result.
    """
    from ...study.sweep import NoFeasibleSetting, pareto_front, recommend

    if results is None or not len(results):
        return None
    note = None
    if constraints:
        try:
            chosen = recommend(results, constraints, cost=RECOMMEND_COST)
        except NoFeasibleSetting as error:
            note = f"No setting met the constraints {constraints!r}: {error}"
        else:
            return {
                "summarizer": str(chosen.summarizer),
                "max_tokens": int(chosen.max_tokens),
                "keep_recent_tokens": int(chosen.keep_recent_tokens),
                "total_input_tokens": _finite(chosen.cost),
                "values": {k: _finite(v) for k, v in chosen.values.items()},
                "candidates": len(chosen.candidates),
                "rule": f"The cheapest setting (total primary input tokens over all conversations) meeting "
                f"{constraints!r} in every conversation (zett_lab.study.sweep.recommend); {len(chosen.candidates)} "
                "setting(s) qualified.",
            }
    keys = ["summarizer", "max_tokens", "keep_recent_tokens"]
    front = pareto_front(results, cost=RECOMMEND_COST, loss=RECOMMEND_LOSS, by=keys)
    if not len(front):
        return None
    per = results.groupby(keys, sort=True).agg(
        **{RECOMMEND_COST: (RECOMMEND_COST, "sum"), RECOMMEND_LOSS: (RECOMMEND_LOSS, "mean")}
    )

    def scaled(column: str) -> pd.Series:
        low, high = float(per[column].min()), float(per[column].max())
        values = pd.to_numeric(front[column], errors="coerce").astype(float)
        return (values - low) / (high - low) if high > low else values * 0.0

    front = front.assign(_distance=(scaled(RECOMMEND_COST) ** 2 + scaled(RECOMMEND_LOSS) ** 2) ** 0.5)
    chosen = front.sort_values(["_distance", RECOMMEND_COST, *keys], kind="mergesort").iloc[0]
    part = results[
        (results["summarizer"] == chosen["summarizer"])
        & (results["max_tokens"] == chosen["max_tokens"])
        & (results["keep_recent_tokens"] == chosen["keep_recent_tokens"])
    ]
    conversations = max(int(chosen.get("conversations", len(part)) or 1), 1)
    out = {
        "summarizer": str(chosen["summarizer"]),
        "max_tokens": int(chosen["max_tokens"]),
        "keep_recent_tokens": int(chosen["keep_recent_tokens"]),
        "total_input_tokens": _finite(chosen[RECOMMEND_COST]),
        "primary_input_tokens": _finite(float(chosen[RECOMMEND_COST]) / conversations),
        "lost_but_needed": _finite(chosen[RECOMMEND_LOSS]),
        "needed_anchor_recall": _finite(pd.to_numeric(part.get("needed_anchor_recall"), errors="coerce").mean())
        if len(part)
        else None,
        "front_size": len(front),
        "rule": _KNEE_RULE,
    }
    if note:
        out["note"] = note
    return out


def lost_but_needed_items(report: Report, limit: int) -> list[dict[str, Any]]:
    """Ranked lost-but-needed anchors at the recommended setting, with their span and summaries.

    One item per (conversation, anchor), listing every summarizer that lost it at that
    setting, each with the first applied compaction that lost it (step, span, summary text).
    Ranked: re-fetched by a later tool call first, then lost by more summarizers, then by type
    (constraints, errors, commands, paths, URLs, SHAs, decisions, identifiers, numbers), then
    by how soon the conversation needed it again; conversations take turns, so one long
    conversation cannot fill the list. At most ``limit`` items.
    """
    if limit <= 0:
        return []
    chosen = report.recommendation
    entries = report._entries
    if chosen is not None:
        entries = report.cell_traces(chosen["max_tokens"], chosen["keep_recent_tokens"]) or entries
    frames = []
    for label, trace in entries:
        losses = report.losses_for(trace)
        lost = losses.lost_but_needed()
        if not len(lost):
            continue
        side = losses.compactions[["compaction_id", "step", "span_start", "span_end", "n_recorded"]]
        lost = lost.merge(side, on="compaction_id", how="left")
        lost["summarizer"] = label
        lost["max_tokens"] = int(trace.settings["max_tokens"])
        lost["keep_recent_tokens"] = int(trace.settings["keep_recent_tokens"])
        frames.append(lost)
    if not frames:
        return []
    lost = pd.concat(frames, ignore_index=True)
    lost = lost.sort_values(
        ["conversation_id", "type", "normalized", "summarizer", "step", "compaction_id"], kind="mergesort"
    )
    lost = lost.drop_duplicates(subset=["summarizer", "conversation_id", "type", "normalized"], keep="first")
    order = {name: i for i, name in enumerate(report.summarizers)}
    priority = {t: i for i, t in enumerate(_TYPE_PRIORITY)}
    groups = []
    for (conversation_id, type_, normalized), part in lost.groupby(
        ["conversation_id", "type", "normalized"], sort=True
    ):
        part = part.sort_values(
            ["step", "summarizer"], key=lambda c: c.map(order) if c.name == "summarizer" else c, kind="mergesort"
        )
        first = part.iloc[0]
        distance = pd.to_numeric(part["next_use_index"], errors="coerce") - pd.to_numeric(
            part["n_recorded"], errors="coerce"
        )
        groups.append(
            (
                (
                    not bool(part["refetched"].fillna(False).astype(bool).any()),
                    -len(part),
                    priority.get(type_, len(priority)),
                    float(distance.min()) if distance.notna().any() else 1e12,
                    str(conversation_id),
                    str(normalized),
                ),
                conversation_id,
                part,
                first,
            )
        )
    groups.sort(key=lambda g: g[0])
    queues: dict[str, list[Any]] = {}
    for group in groups:
        queues.setdefault(str(group[1]), []).append(group)
    picked: list[Any] = []
    while len(picked) < limit and any(queues.values()):
        for key in list(queues):
            if queues[key] and len(picked) < limit:
                picked.append(queues[key].pop(0))
    from ...load.text import message_text

    items = []
    for _, conversation_id, part, first in picked:
        losses_by = []
        messages: Sequence[Any] = []
        for row in part.to_dict("records"):
            trace = report.trace_for(
                row["conversation_id"], row["summarizer"], row["max_tokens"], row["keep_recent_tokens"]
            )
            summary = None
            if trace is not None:
                messages = trace.conversation.messages
                match = trace.compactions[trace.compactions["compaction_id"] == row["compaction_id"]]
                if len(match):
                    summary = match["summary_text"].iloc[0]
            losses_by.append(
                {
                    "summarizer": row["summarizer"],
                    "compaction_id": plain(row["compaction_id"], DIGITS),
                    "step": plain(row.get("step"), DIGITS),
                    "span_start": plain(row.get("span_start"), DIGITS),
                    "span_end": plain(row.get("span_end"), DIGITS),
                    "refetched": bool(row["refetched"]) if row["refetched"] is not None else False,
                    "summary_text": (summary or "")[:SUMMARY_CHARS],
                    "summary_truncated": bool(summary and len(summary) > SUMMARY_CHARS),
                }
            )

        def text_at(index: Any, messages: Sequence[Any] = messages) -> str:
            try:
                return message_text(messages[int(index)])
            except (TypeError, ValueError, IndexError):
                return ""

        items.append(
            {
                "conversation_id": str(conversation_id),
                "type": str(first["type"]),
                "value": str(first["value"]),
                "max_tokens": plain(first["max_tokens"], DIGITS),
                "keep_recent_tokens": plain(first["keep_recent_tokens"], DIGITS),
                "message_index": plain(first["message_index"], DIGITS),
                "source_excerpt": excerpt(text_at(first["message_index"]), str(first["value"])),
                "next_use_index": plain(first["next_use_index"], DIGITS),
                "next_use_excerpt": excerpt(text_at(first["next_use_index"]), str(first["value"])),
                "refetched": any(entry["refetched"] for entry in losses_by),
                "lost_by": losses_by,
            }
        )
    return items


def _write_atomic(path: Path, text: str) -> Path:
    """Write the report text atomically, after checking that ``path`` names a file in an existing folder."""
    path = Path(path)
    if path.is_dir():
        raise SettingError(f"{path}: is a folder; give a file name for the report")
    if not path.parent.is_dir():
        raise SettingError(f"{path}: folder {path.parent} does not exist")
    return write_atomic(path, text)
