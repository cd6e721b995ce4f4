"""Tokens and money per step and per conversation, from a replay's trace tables.

What a compaction policy costs is the context every primary step sends (prompt caching
included, and broken by every applied compaction) plus the summary calls. This module
adds those numbers to :attr:`Trace.steps` and :attr:`Trace.compactions` (see
``docs/trace-schema.md``) and totals them per conversation.

Prices come from ``zett_lab/data/prices.json`` (USD per million tokens, with an ``as_of``
date and sources) and can be overridden with a dict or a JSON file of the same shape.

Example::

    steps, compactions = add_costs(trace.steps, trace.compactions, primary_model="gpt-5-mini")
    cost_summary(steps, compactions)          # one row per conversation
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..replay.engine import summary_frame
from ..tokens import count_text_tokens, count_tokens

#: Columns that tell replays apart when several traces are concatenated (the ones present are used).
GROUP_COLUMNS = ("run_id", "sweep_run", "summarizer", "conversation_id", "max_tokens", "keep_recent_tokens")

_PROVIDER_PREFIX = re.compile(r"^(?:openai-compatible|openai|anthropic|google|deepseek|ollama):")
_DATED_SUFFIX = re.compile(r"^-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest|preview(?:-[\w-]+)?)$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model.

    Attributes:
        input: uncached input.
        cached_input: input read from the provider's prompt cache.
        output: output (reasoning included).
        cache_write: input written to the prompt cache (billed instead of ``input`` for
            uncached input when set and prompt caching is on), or None.
        source: where the numbers come from.
    """

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None
    source: str = ""
    provider: str = ""


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name, with aliases and the date they were taken."""

    models: dict[str, Price]
    aliases: dict[str, str]
    as_of: str | None = None

    def lookup(self, model: str) -> tuple[str, Price]:
        """``(price key, Price)`` for a model name, spec or summarizer identity.

        Accepts ``gpt-5-mini``, ``openai:gpt-5-mini``, ``openai:gpt-5-mini@http://...``,
        dated names (``claude-sonnet-4-5-20250929``) and offline summarizer identities
        (``truncate(budget=0.1)`` -> ``offline``). Raises SettingError for an unknown model.
        """
        if not isinstance(model, str) or not model.strip():
            raise SettingError(f"model name must be a non-empty string, got {model!r}")
        from ..summarizers.offline import OFFLINE_SUMMARIZERS

        name = model.strip()
        base = re.split(r"[(:]", name, maxsplit=1)[0]
        if base in OFFLINE_SUMMARIZERS and "offline" in self.models:
            return "offline", self.models["offline"]
        name = _PROVIDER_PREFIX.sub("", name)
        name = re.sub(r"\(.*\)$", "", name)
        name = re.sub(r"@https?://\S*$", "", name).strip()
        candidates = [name, name.lower(), name.split("/")[-1], name.split("/")[-1].lower()]
        for candidate in candidates:
            candidate = self.aliases.get(candidate, candidate)
            if candidate in self.models:
                return candidate, self.models[candidate]
        for candidate in candidates:
            for key in sorted(self.models, key=len, reverse=True):
                if candidate.startswith(key) and _DATED_SUFFIX.match(candidate[len(key) :]):
                    return key, self.models[key]
        unknown = f"no price for model {model!r}; known: {', '.join(sorted(self.models))}"
        raise SettingError(
            f"{unknown}. Pass prices={{'MODEL': {{'input': ..., 'cached_input': ..., 'output': ...}}}} (USD per "
            "million tokens) or a JSON file of the same shape as zett_lab/data/prices.json",
            cli=f"{unknown}. Give --primary-model one of these, or leave it out",
        )


def _price(name: str, entry: object, where: str) -> Price:
    if not isinstance(entry, Mapping):
        raise SettingError(f"{where}: price for {name!r} must be an object with input/cached_input/output")
    values: dict[str, float | None] = {}
    for field in ("input", "cached_input", "output", "cache_write"):
        value = entry.get(field)
        if value is None:
            values[field] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise SettingError(f"{where}: {name}.{field} must be a non-negative number (USD per million tokens)")
        values[field] = float(value)
    if values["input"] is None or values["output"] is None:
        raise SettingError(f"{where}: price for {name!r} needs at least 'input' and 'output'")
    return Price(
        input=values["input"],
        cached_input=values["cached_input"] if values["cached_input"] is not None else values["input"],
        output=values["output"],
        cache_write=values["cache_write"],
        source=str(entry.get("source", "")),
        provider=str(entry.get("provider", "")),
    )


def _table(data: Mapping[str, Any], where: str) -> PriceTable:
    models = data.get("models") if isinstance(data.get("models"), Mapping) else None
    if models is None:
        # A flat {model: price} mapping.
        models = {k: v for k, v in data.items() if k not in ("as_of", "aliases", "currency", "unit", "notes")}
    aliases = data.get("aliases") or {}
    if not isinstance(aliases, Mapping):
        raise SettingError(f"{where}: 'aliases' must map names to model names")
    return PriceTable(
        models={str(name): _price(str(name), entry, where) for name, entry in models.items()},
        aliases={str(k): str(v) for k, v in aliases.items()},
        as_of=data.get("as_of"),
    )


@lru_cache(maxsize=1)
def default_prices() -> PriceTable:
    """The bundled price table (``zett_lab/data/prices.json``)."""
    text = resources.files("zett_lab").joinpath("data/prices.json").read_text(encoding="utf-8")
    return _table(json.loads(text), "zett_lab/data/prices.json")


def load_prices(prices: PriceTable | Mapping[str, object] | str | os.PathLike[str] | None = None) -> PriceTable:
    """The bundled prices, overridden by ``prices`` (a table, a dict, or a JSON file path).

    A dict or file may be the full shape of ``prices.json`` (``{"models": {...}, "aliases": {...}}``)
    or a flat ``{model: {"input", "cached_input", "output"}}`` mapping; its models replace or
    add to the bundled ones.
    """
    base = default_prices()
    if prices is None:
        return base
    if isinstance(prices, PriceTable):
        return prices
    if isinstance(prices, (str, os.PathLike)):
        path = Path(prices)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise SettingError(f"{path}: cannot read prices: {error}") from error
        except ValueError as error:
            raise SettingError(f"{path}: prices file is not valid JSON: {error}") from error
        if not isinstance(data, Mapping):
            raise SettingError(f"{path}: prices file must hold a JSON object")
        override = _table(data, str(path))
    elif isinstance(prices, Mapping):
        override = _table(prices, "prices")
    else:
        raise SettingError(f"prices must be a dict, a JSON file path or None, not {type(prices).__name__}")
    return PriceTable(
        models={**base.models, **override.models},
        aliases={**base.aliases, **override.aliases},
        as_of=override.as_of or base.as_of,
    )


def price_for(model: str, prices: PriceTable | Mapping[str, object] | str | None = None) -> tuple[str, Price]:
    """``(price key, Price)`` for ``model`` (see :meth:`PriceTable.lookup`)."""
    return load_prices(prices).lookup(model)


@lru_cache(maxsize=1)
def summary_request_overhead_tokens() -> int:
    """Tokens the engine adds to a summary request around the span (instructions + closing request)."""
    return count_tokens(list(summary_frame()))


def _group_columns(frame: pd.DataFrame) -> list[str]:
    return [column for column in GROUP_COLUMNS if column in frame.columns]


def _int_column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame.columns:
        return pd.Series(0, index=frame.index, dtype="int64")
    return pd.to_numeric(frame[name], errors="coerce").fillna(0).astype("int64")


def _money(tokens: pd.Series | np.ndarray, usd_per_million: float) -> np.ndarray:
    return np.asarray(tokens, dtype="float64") * usd_per_million / 1_000_000


def add_costs(
    steps: pd.DataFrame,
    compactions: pd.DataFrame | None = None,
    *,
    primary_model: str,
    summary_model: str | None = None,
    prices: PriceTable | Mapping[str, object] | str | None = None,
    prompt_caching: bool = True,
    min_cached_tokens: int = 1024,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Add token and money columns to a trace's steps and compactions tables.

    Args:
        steps: ``Trace.steps`` (needs ``conversation_id``, ``step``, ``context_tokens_after``;
            uses ``applied``, ``checkpoint_id`` and ``output_tokens`` when present).
        compactions: ``Trace.compactions`` (may be None or empty).
        primary_model: the model the agent runs (a price name, e.g. ``"gpt-5-mini"``).
        summary_model: the model that writes summaries; None uses each compaction's
            ``summarizer`` identity (offline summarizers cost nothing).
        prices: overrides for the bundled price table (dict or JSON path), see :func:`load_prices`.
        prompt_caching: model the provider's prompt cache (False: all input uncached).
        min_cached_tokens: a shared prefix shorter than this is not cached (providers'
            minimum cacheable prompt, 1,024 tokens for OpenAI and most Anthropic models).

    Prompt cache model: a step's sent context starts with the previous step's sent context
    (the conversation only grows), so that prefix is read from the cache. The cache is
    broken — the whole context is paid uncached — at the first step of a conversation, at a
    step where a compaction was applied, and whenever the checkpoint in the context changes.

    Columns added to ``steps`` (a copy; original row order kept):
        primary_input_tokens: the context sent (``context_tokens_after``).
        primary_cached_input_tokens: part of it read from the prompt cache.
        primary_uncached_input_tokens: the rest.
        primary_output_tokens: ``output_tokens`` when the table has it, else 0.
        cache_break: the prompt cache was broken before this step.
        primary_cost_usd: money for this step's primary call.
        summary_cost_usd: money for the summary calls made at this step.
        total_cost_usd: the sum of both.

    Columns added to ``compactions`` (a copy):
        price_model: the price-table entry used for the summary model (``offline`` for
            offline summarizers, which make no model call and are billed 0 tokens).
        summary_call_input_tokens: input tokens of the call: the reported usage, else an
            estimate (``older_tokens`` + the engine's instructions); 0 for a failed call with
            no usage and for offline summarizers.
        summary_call_output_tokens: reported output usage, else the summary text's tokens.
        summary_tokens_estimated: the call tokens are an estimate (no usage reported).
        summary_cost_usd: money for the call (cache hits included: this is what the policy
            costs when run, not what this replay spent).

    Returns:
        ``(steps_with_cost, compactions_with_cost)``.
    """
    _check_steps(steps, min_cached_tokens)
    table = load_prices(prices)
    _, primary = table.lookup(primary_model)
    out = steps.copy()
    _add_primary_costs(out, primary, prompt_caching, min_cached_tokens)
    comp = _summary_costs(compactions, table, summary_model)
    out["summary_cost_usd"] = _summary_cost_per_step(out, comp)
    out["total_cost_usd"] = out["primary_cost_usd"] + out["summary_cost_usd"]
    return out, comp


def _check_steps(steps: Any, min_cached_tokens: Any) -> None:
    """One clear SettingError for a steps table or cache setting add_costs cannot use."""
    if not isinstance(steps, pd.DataFrame):
        raise SettingError(f"steps must be a pandas DataFrame (Trace.steps), not {type(steps).__name__}")
    missing = sorted({"conversation_id", "step", "context_tokens_after"} - set(steps.columns))
    if missing:
        raise SettingError(f"steps table is missing column(s) {missing} (see docs/trace-schema.md)")
    if isinstance(min_cached_tokens, bool) or not isinstance(min_cached_tokens, int) or min_cached_tokens < 0:
        raise SettingError(f"min_cached_tokens must be a non-negative int, got {min_cached_tokens!r}")


def _cache_breaks(ordered: pd.DataFrame, previous: pd.Series, group: list[str]) -> pd.Series:
    """Steps before which the prompt cache is broken: the first of a conversation, an applied
    compaction, a changed checkpoint."""
    cache_break = previous.isna()
    if "applied" in ordered.columns:
        cache_break |= ordered["applied"].fillna(False).astype(bool)
    if "checkpoint_id" in ordered.columns:
        checkpoint = ordered["checkpoint_id"].astype("object").where(ordered["checkpoint_id"].notna(), None)
        previous_checkpoint = checkpoint.groupby([ordered[c] for c in group], dropna=False, sort=False).shift(1)
        same = (checkpoint == previous_checkpoint) | (checkpoint.isna() & previous_checkpoint.isna())
        cache_break |= ~same & ~previous.isna()
    return cache_break


def _add_primary_costs(out: pd.DataFrame, primary: Price, prompt_caching: bool, min_cached_tokens: int) -> None:
    """The primary model's token and money columns of every step, written into ``out`` in place."""
    group = _group_columns(out)
    ordered = out.sort_values([*group, "step"], kind="stable")
    sent = _int_column(ordered, "context_tokens_after")
    previous = sent.groupby([ordered[c] for c in group], dropna=False, sort=False).shift(1)
    cache_break = _cache_breaks(ordered, previous, group)
    if prompt_caching:
        # A ufunc over two Series returns a Series (pandas' __array_ufunc__).
        cached = cast(pd.Series, np.minimum(previous.fillna(0).astype("int64"), sent))
        cached = cached.where(~cache_break & (cached >= min_cached_tokens), 0)
    else:
        cached = pd.Series(0, index=ordered.index, dtype="int64")
    uncached = sent - cached
    output = _int_column(ordered, "output_tokens")
    uncached_price = primary.cache_write if (prompt_caching and primary.cache_write is not None) else primary.input
    primary_cost = (
        _money(uncached, uncached_price) + _money(cached, primary.cached_input) + _money(output, primary.output)
    )

    out.loc[ordered.index, "primary_input_tokens"] = sent
    out.loc[ordered.index, "primary_cached_input_tokens"] = cached
    out.loc[ordered.index, "primary_uncached_input_tokens"] = uncached
    out.loc[ordered.index, "primary_output_tokens"] = output
    out.loc[ordered.index, "cache_break"] = cache_break.astype(bool)
    out.loc[ordered.index, "primary_cost_usd"] = primary_cost
    for column in (
        "primary_input_tokens",
        "primary_cached_input_tokens",
        "primary_uncached_input_tokens",
        "primary_output_tokens",
    ):
        out[column] = out[column].astype("int64")
    out["cache_break"] = out["cache_break"].astype(bool)


def _summary_cost_per_step(steps: pd.DataFrame, comp: pd.DataFrame) -> Any:
    """Money of the summary calls made at each step (0.0 where none), aligned with ``steps``' rows."""
    if not len(comp) or "step" not in comp.columns:
        return 0.0
    keys = [c for c in _group_columns(steps) if c in comp.columns] + ["step"]
    per_step = comp.groupby(keys, dropna=False)["summary_cost_usd"].sum().rename("_summary_cost")
    merged = steps[keys].merge(per_step, left_on=keys, right_index=True, how="left")
    return merged["_summary_cost"].fillna(0.0).to_numpy()


def _summary_costs(compactions: pd.DataFrame | None, table: PriceTable, summary_model: str | None) -> pd.DataFrame:
    if compactions is None:
        return pd.DataFrame(
            columns=[
                "price_model",
                "summary_call_input_tokens",
                "summary_call_output_tokens",
                "summary_tokens_estimated",
                "summary_cost_usd",
            ]
        )
    if not isinstance(compactions, pd.DataFrame):
        raise SettingError(
            f"compactions must be a pandas DataFrame (Trace.compactions), not {type(compactions).__name__}"
        )
    comp = compactions.copy()
    if comp.empty:
        comp["price_model"] = pd.Series(dtype="object")
        for column in ("summary_call_input_tokens", "summary_call_output_tokens"):
            comp[column] = pd.Series(dtype="int64")
        comp["summary_tokens_estimated"] = pd.Series(dtype="bool")
        comp["summary_cost_usd"] = pd.Series(dtype="float64")
        return comp
    if summary_model is None and "summarizer" not in comp.columns:
        raise SettingError("compactions table has no 'summarizer' column: pass summary_model=")
    names = pd.Series(summary_model, index=comp.index) if summary_model is not None else comp["summarizer"].astype(str)
    lookups = {name: table.lookup(name) for name in names.unique()}
    keys = names.map(lambda name: lookups[name][0])
    price = names.map(lambda name: lookups[name][1])
    offline = keys == "offline"

    reported_in = (
        pd.to_numeric(comp.get("summary_input_tokens"), errors="coerce") if "summary_input_tokens" in comp else None
    )
    reported_out = (
        pd.to_numeric(comp.get("summary_output_tokens"), errors="coerce") if "summary_output_tokens" in comp else None
    )
    failed = comp["error"].notna() if "error" in comp.columns else pd.Series(False, index=comp.index)
    older = _int_column(comp, "older_tokens")
    texts = (
        comp["summary_text"] if "summary_text" in comp.columns else pd.Series(None, index=comp.index, dtype="object")
    )

    input_tokens, output_tokens, estimated = _call_tokens(
        comp.index, offline, reported_in, reported_out, failed, older, texts
    )
    comp["price_model"] = keys.to_numpy()
    comp["summary_call_input_tokens"] = np.asarray(input_tokens, dtype="int64")
    comp["summary_call_output_tokens"] = np.asarray(output_tokens, dtype="int64")
    comp["summary_tokens_estimated"] = np.asarray(estimated, dtype=bool)
    comp["summary_cost_usd"] = [
        (i * p.input + o * p.output) / 1_000_000
        for i, o, p in zip(comp["summary_call_input_tokens"], comp["summary_call_output_tokens"], price, strict=True)
    ]
    return comp


def _call_tokens(
    index: pd.Index,
    offline: pd.Series,
    reported_in: pd.Series | None,
    reported_out: pd.Series | None,
    failed: pd.Series,
    older: pd.Series,
    texts: pd.Series,
) -> tuple[list[int], list[int], list[bool]]:
    """Per attempt: the summary call's input and output tokens, and whether they are estimated.

    Offline summarizers make no call; reported usage counts as reported; a failed call without usage counts
    nothing (estimated); else the span plus the engine's summary frame in, the summary's tokens out.
    """
    input_tokens, output_tokens, estimated = [], [], []
    overhead = summary_request_overhead_tokens()
    for i, at in enumerate(index):
        if offline.iloc[i]:
            input_tokens.append(0)
            output_tokens.append(0)
            estimated.append(False)
            continue
        rin = reported_in.loc[at] if reported_in is not None else np.nan
        rout = reported_out.loc[at] if reported_out is not None else np.nan
        have_usage = not (pd.isna(rin) or (rin == 0 and (pd.isna(rout) or rout == 0)))
        if have_usage:
            input_tokens.append(int(rin))
            output_tokens.append(0 if pd.isna(rout) else int(rout))
            estimated.append(False)
        elif failed.iloc[i]:
            input_tokens.append(0)
            output_tokens.append(0)
            estimated.append(True)
        else:
            text = texts.loc[at]
            input_tokens.append(int(older.loc[at]) + overhead)
            output_tokens.append(count_text_tokens(text) if isinstance(text, str) else 0)
            estimated.append(True)
    return input_tokens, output_tokens, estimated


#: The totals :func:`cost_summary` gives per conversation (a sweep's results table has each of them).
COST_SUMMARY_COLUMNS = (
    "steps",
    "primary_input_tokens",
    "primary_cached_input_tokens",
    "primary_uncached_input_tokens",
    "primary_output_tokens",
    "cached_input_share",
    "cache_breaks",
    "primary_cost_usd",
    "summary_calls",
    "summary_input_tokens",
    "summary_output_tokens",
    "summary_cost_usd",
    "total_cost_usd",
)


def cost_summary(steps: pd.DataFrame, compactions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Totals per conversation (per replay, when several are concatenated) from :func:`add_costs` output.

    One row per group (``conversation_id`` plus any of ``run_id``, ``sweep_run``,
    ``summarizer``, ``max_tokens``, ``keep_recent_tokens`` present), columns:

        steps: model steps.
        primary_input_tokens, primary_cached_input_tokens, primary_uncached_input_tokens,
        primary_output_tokens: summed over steps.
        cached_input_share: cached / all primary input.
        cache_breaks: steps that paid their whole context uncached.
        primary_cost_usd: money for the primary model.
        summary_calls: summary attempts (from ``compactions``; else steps with a summary cost).
        summary_input_tokens, summary_output_tokens: summed call tokens (0 without ``compactions``).
        summary_cost_usd: money for summaries.
        total_cost_usd: primary + summary.

    For one trace, ``cost_summary(...).iloc[0]`` is a Series of these totals.
    """
    if "primary_cost_usd" not in steps.columns:
        raise SettingError("cost_summary needs the output of add_costs (no primary_cost_usd column)")
    group = _group_columns(steps)
    frame = steps.groupby(group, dropna=False, sort=True).agg(
        steps=("step", "size"),
        primary_input_tokens=("primary_input_tokens", "sum"),
        primary_cached_input_tokens=("primary_cached_input_tokens", "sum"),
        primary_uncached_input_tokens=("primary_uncached_input_tokens", "sum"),
        primary_output_tokens=("primary_output_tokens", "sum"),
        cache_breaks=("cache_break", "sum"),
        primary_cost_usd=("primary_cost_usd", "sum"),
        _summary_cost=("summary_cost_usd", "sum"),
        _summary_steps=("summary_cost_usd", lambda s: int((s > 0).sum())),
    )
    frame["cached_input_share"] = np.where(
        frame["primary_input_tokens"] > 0,
        frame["primary_cached_input_tokens"] / frame["primary_input_tokens"].clip(lower=1),
        np.nan,
    )
    if compactions is not None and len(compactions) and "summary_cost_usd" in compactions.columns:
        keys = [c for c in group if c in compactions.columns]
        per = compactions.groupby(keys, dropna=False, sort=True).agg(
            summary_calls=("summary_cost_usd", "size"),
            summary_input_tokens=("summary_call_input_tokens", "sum"),
            summary_output_tokens=("summary_call_output_tokens", "sum"),
            summary_cost_usd=("summary_cost_usd", "sum"),
        )
        frame = frame.reset_index().merge(per.reset_index(), on=keys, how="left").set_index(group)
        for column in ("summary_calls", "summary_input_tokens", "summary_output_tokens"):
            frame[column] = frame[column].fillna(0).astype("int64")
        frame["summary_cost_usd"] = frame["summary_cost_usd"].fillna(0.0)
    else:
        frame["summary_calls"] = frame["_summary_steps"].astype("int64")
        frame["summary_input_tokens"] = 0
        frame["summary_output_tokens"] = 0
        frame["summary_cost_usd"] = frame["_summary_cost"]
    frame["total_cost_usd"] = frame["primary_cost_usd"] + frame["summary_cost_usd"]
    frame["cache_breaks"] = frame["cache_breaks"].astype("int64")
    return frame[list(COST_SUMMARY_COLUMNS)].reset_index()
