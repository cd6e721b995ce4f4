"""Loss metrics: what compaction summaries lose (DESIGN.md §4).

Offline tier (deterministic, no network):

* :func:`extract_anchors` / :func:`anchors_in_text` — typed exact items of messages and texts;
* :func:`measure` — per-compaction, per-anchor, per-conversation, per-probe and decay tables
  (:class:`Losses`);
* :func:`compare` — several summarizers over the same spans, with paired bootstrap
  confidence intervals, win rates and Wilcoxon tests (:class:`~zett_lab.measure.compare.Comparison`).

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
from .compare import Comparison, compare, compare_native_subjects
from .judged import JudgedResult, agreement, run_judged
from .judged_calls import generate_probes
from .judged_plan import JudgedPlan, plan_judged
from .lookup import TextIndex, contains_normalized
from .losses import Losses, measure
from .probes import check_probes, parse_probes

__all__ = [
    "ANCHOR_TYPES",
    "Anchor",
    "Comparison",
    "JudgedPlan",
    "JudgedResult",
    "Losses",
    "TextIndex",
    "agreement",
    "anchors_in_text",
    "check_probes",
    "compare",
    "compare_native_subjects",
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
