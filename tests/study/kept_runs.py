"""What the tests of the kept files (anchor indexes, measuring) share: a fresh process's sweep and a kept file's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from zett_lab.measure import keyed
from zett_lab.measure.message_index import release_indexes
from zett_lab.study import sweep
from zett_lab.study.grid import fingerprint
from zett_lab.study.kept import KeptFolder, conversation_key

#: Result columns that vary from run to run.
VARYING = ("seconds", "worker", "model_calls", "cache_hits")


def fresh_sweep(conversation, cache: Path | bool, grid: dict[str, Any]) -> pd.DataFrame:
    """A fresh process's sweep (nothing held: no index, no lines' keys, no observations, no replay proven), its
    results without what varies by run."""
    release_indexes()
    keyed._OBSERVED.clear()
    results = sweep(conversation, **grid, executor="serial", cache=cache, reuse=False).results
    assert results["error"].isna().all() and "needed_anchor_recall" in results.columns
    return results[[c for c in results.columns if c not in VARYING]]


def kept_file(kind: type[KeptFolder], conversation, cache: Path) -> Path:
    """The file of ``kind`` a sweep with the summary cache ``cache`` keeps for ``conversation``."""
    kept = kind.beside(cache)
    assert kept is not None
    return kept.file(conversation_key(conversation, fingerprint(conversation)))
