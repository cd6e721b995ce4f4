"""How often each metric is right, measured on labelled real examples: the figures the catalogue's entries carry
(:attr:`~zett_lab.measure.catalogue.Metric.validity`), read from ``zett_lab/data/metric_validity.json``
(written by ``bench/validity.py --write``; see the documentation's "How far to trust each metric")."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..errors import SettingError
from ..formatting import count, decimal


@dataclass(frozen=True, slots=True)
class Estimate:
    """A share measured on labelled items, with its 95% confidence interval."""

    value: float
    low: float
    high: float
    #: Labelled items it was measured on.
    n: int

    def text(self) -> str:
        """``0.83 [0.72, 0.90] (n = 120)``: the share, its 95% interval and the items it rests on."""
        return f"{decimal(self.value, 2)} [{decimal(self.low, 2)}, {decimal(self.high, 2)}] (n = {count(self.n)})"


@dataclass(frozen=True, slots=True)
class Validity:
    """How often a metric is right on labelled real examples: its precision and recall with 95% intervals, and
    what they were measured on (``source``)."""

    precision: Estimate | None
    recall: Estimate | None
    #: What was labelled, by whom, which part of the set, with which code and when (the data file's words,
    #: a noun phrase: "351 labelled lost items of 7 agent formats ...").
    source: str

    def figures(self) -> str:
        """``precision 0.83 [0.72, 0.90] (n = 120), recall ...``: the measured shares (those there are)."""
        shares = [(name, e) for name, e in (("precision", self.precision), ("recall", self.recall)) if e is not None]
        return ", ".join(f"{name} {estimate.text()}" for name, estimate in shares) or "no figures"

    def text(self) -> str:
        """Its figures and what they were measured on, in one sentence's worth of words."""
        return f"{self.figures()}, 95% intervals, on {self.source}" if self.source else self.figures()


#: The data file holding each metric's precision and recall on the labelled validation set.
VALIDITY_FILE = "metric_validity.json"


@functools.cache
def measured_validity() -> dict[str, Validity]:
    """``metric name -> Validity`` from :data:`VALIDITY_FILE` (empty when the file is absent)."""
    path = resources.files("zett_lab") / "data" / VALIDITY_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {name: validity_of(name, entry) for name, entry in data.get("metrics", {}).items()}


def validity_of(name: str, entry: Mapping[str, Any]) -> Validity:
    """One metric's entry of the validity file (``precision`` / ``recall``: value, low, high, n; ``source``)."""

    def estimate(key: str) -> Estimate | None:
        value = entry.get(key)
        if value is None:
            return None
        try:
            return Estimate(float(value["value"]), float(value["low"]), float(value["high"]), int(value["n"]))
        except (KeyError, TypeError, ValueError) as error:
            raise SettingError(
                f"{VALIDITY_FILE}: metrics.{name}.{key}: expected value, low, high, n ({error})"
            ) from None

    return Validity(estimate("precision"), estimate("recall"), str(entry.get("source", "")))
