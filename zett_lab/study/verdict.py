"""A recommendation in words: the rule it applied, and the verdict (the setting, why, the trade-offs, held out)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..formatting import count, counted, number, percent
from ..measure.catalogue import label
from .choose import ConstraintCheck
from .ranking import Alternative, HeldOut, Ranked


def rule_text(objectives: Sequence[str], default: bool, over: str, slack: float, nan: str) -> str:
    """The rule of a recommendation in words (the order of the objectives, how constraints and gaps count)."""
    where = "in every conversation" if over == "all" else "on the mean over conversations"
    ordered = ", then ".join(label(o).lower() for o in objectives)
    equal = f"; for all but the last, values within {percent(slack, 0)} of the best count as equal" if slack > 0 else ""
    undefined = (
        "A conversation where a metric is undefined (nothing compacted) counts as its best value."
        if nan == "best"
        else "A conversation where a metric is undefined fails every constraint on it."
    )
    return (
        "Settings with a failed replay or summary are never recommended. Constraints (yours, then the defaults) rule "
        f"settings out one after the other, judged {where}; a constraint no remaining setting meets rules nothing "
        f"out. The settings left are ranked by {ordered} (means per conversation{equal}"
        f"{'' if not default else '; the default order'}). {undefined}"
    )


def _figure(column: str, value: float) -> str:
    return f"{number(value)} {label(column).lower()}"


def _change_text(objective: str, alternative: Ranked, best: Ranked, change: float | None) -> str:
    name = label(objective).lower()
    if change is None:
        a, b = alternative.figures[objective], best.figures[objective]
        if not (np.isfinite(a) and np.isfinite(b)) or np.isclose(a, b):
            return f"same {name}"
        return f"{number(a)} {name} (against {number(b)})"
    if abs(change) < 0.005:
        return f"same {name}"
    if change >= 2:  # three times or more: a factor reads better than +8,900%
        return f"{number(1 + change, 2)}× {name}"
    sign = "+" if change > 0 else "−"
    return f"{sign}{percent(abs(change), 0)} {name}"


def verdict(
    best: Ranked,
    checks: Sequence[ConstraintCheck],
    alternatives: Sequence[Alternative],
    held: HeldOut,
    objectives: Sequence[str],
    settings: int,
    left_out: int,
    engines: bool,
    over: str,
) -> str:
    """One paragraph: the setting, why, what could not be met, the trade-offs in numbers, and the held-out check."""
    parts = [f"Recommended: {best.setting_text(engines)}."]
    applied = [c for c in checks if c.applied]
    why = f"Of the {counted(settings, 'setting')} measured"
    if left_out:
        why += f" ({left_out} more left out: a replay or summary failed)"
    if applied:
        passing = applied[-1].met
        why += f", {counted(passing, 'meets', 'meet')} {'; '.join(c.text().lower() for c in applied)}"
    ordered = ", then ".join(label(o).lower() for o in objectives)
    figures = ", ".join(_figure(o, best.figures[o]) for o in objectives)
    parts.append(f"{why}{';' if applied else ','} ranked by {ordered}, it comes first with {figures} per conversation.")
    for check in checks:
        if not check.applied:
            reached = (
                f"in every conversation (at best {number(check.best)} in a setting's worst conversation)"
                if over == "all"
                else f"on the mean over conversations (the best mean is {number(check.best)})"
            )
            parts.append(f"No setting meets {check.text().lower()} {reached}, so that constraint rules nothing out.")
    if alternatives:
        weighed = "; ".join(
            f"{a.setting.setting_text(engines)} ({a.why}): "
            + ", ".join(_change_text(o, a.setting, best, a.changes[o]) for o in objectives)
            for a in alternatives
        )
        parts.append(f"Against the next-best alternatives: {weighed}.")
    if held.folds:
        shown = [o for o in objectives if o in held.figures]
        parts.append(
            f"Out of sample ({held.folds} folds over {held.conversations} conversations: chosen on the others, "
            f"scored on each fold): {', '.join(_figure(o, held.figures[o]) for o in shown)} per conversation, "
            f"against {', '.join(number(held.in_sample[o]) for o in shown)} in sample; "
            f"{held.agreement} of {held.folds} folds chose this setting."
        )
    else:
        parts.append(held.note)
    return " ".join(parts)


def caveats(table: pd.DataFrame, best: Ranked, ranking: Sequence[Ranked], objectives: Sequence[str]) -> list[str]:
    """What the recommended setting's figures cannot tell, in sentences a user acts on before adopting it: a limit
    at the edge of the measured grid (the best may lie beyond it), settings it merely ties with (the choice among
    them is the rule's order, not a measurement), and how many conversations compact at it at all (its loss
    figures rest on those alone)."""
    said = []
    for key in ("max_tokens", "keep_recent_tokens"):
        values = sorted(int(v) for v in table[key].unique())
        value = getattr(best, key)
        if len(values) > 1 and value in (values[0], values[-1]):
            end, beyond = ("largest", "larger") if value == values[-1] else ("smallest", "smaller")
            said.append(
                f"{key}={count(value)} is the {end} value measured: a {beyond} one was not tried and may rank "
                "higher; extend the grid past it before adopting it."
            )
    ties = [
        r
        for r in ranking[1:]
        if r.ruled_out_by is None and all(_same(r.figures[o], best.figures[o]) for o in objectives)
    ]
    if ties:
        named = "; ".join(r.setting_text() for r in ties[:3]) + ("; ..." if len(ties) > 3 else "")
        said.append(
            f"{counted(len(ties), 'other setting has', 'other settings have')} the same figures on every objective "
            f"({named}): the choice among "
            "them is the rule's order, not a measured difference."
        )
    if "compactions_applied" in table:
        setting = {"summarizer": best.summarizer, "max_tokens": best.max_tokens, "engine": best.engine}
        setting["keep_recent_tokens"] = best.keep_recent_tokens
        at = table[np.logical_and.reduce([table[key] == value for key, value in setting.items() if key in table])]
        compacting = int((pd.to_numeric(at["compactions_applied"], errors="coerce").fillna(0) > 0).sum())
        if len(at) and compacting < len(at):
            said.append(
                f"At this setting {compacting} of {len(at)} conversations have an applied compaction at all: its loss "
                f"figures rest on {'those' if compacting != 1 else 'that one'} alone."
            )
    return said


def _same(a: float, b: float) -> bool:
    """Whether two figures are the same (both undefined counts as the same)."""
    return bool(np.isnan(a) and np.isnan(b)) or bool(np.isclose(a, b))
