"""Loss metrics: what compaction summaries lose (definitions: the documentation's result tables).

Offline tier (deterministic, no network):

* :func:`extract_anchors` / :func:`anchors_in_text` — typed exact items of messages and texts;
* :func:`measure` — per-compaction, per-anchor, per-conversation, per-probe and decay tables
  (:class:`Losses`);
* :mod:`~zett_lab.measure.catalogue` — every metric, one module each (:mod:`zett_lab.measure.metrics`);
* :mod:`~zett_lab.measure.statistics` — paired statistics over given loss tables (what
  :func:`zett_lab.compare` reports).

Pure: it computes from the traces and summaries it is given (replays and summaries are made in
:mod:`zett_lab.replay` and :mod:`zett_lab.study`).

LLM tier (opt-in, :mod:`zett_lab.measure.judged`): probe QA with an answerer and a judge
model, normalized between a floor and a ceiling; :func:`plan_judged` shows the calls and
cost first.

Example::

    >>> import zett_lab
    >>> from zett_lab.measure import measure
    >>> trace = zett_lab.replay(conversation, max_tokens=20_000, keep_recent_tokens=5_000)  # doctest: +SKIP
    >>> losses = measure(trace)  # doctest: +SKIP
    >>> losses.conversation  # doctest: +SKIP
"""

from ..load.anchors import ANCHOR_TYPES, Anchor, anchors_in_text, extract_anchors, message_anchors, normalize
from .judged import JudgedResult, agreement, run_judged
from .judged_calls import generate_probes
from .judged_plan import JudgedPlan, plan_judged
from .lookup import TextIndex, contains_normalized
from .losses import Losses, measure
from .probes import check_probes, parse_probes

__all__ = [
    "ANCHOR_TYPES",
    "Anchor",
    "JudgedPlan",
    "JudgedResult",
    "Losses",
    "TextIndex",
    "agreement",
    "anchors_in_text",
    "check_probes",
    "contains_normalized",
    "extract_anchors",
    "generate_probes",
    "measure",
    "message_anchors",
    "normalize",
    "parse_probes",
    "plan_judged",
    "run_judged",
]
