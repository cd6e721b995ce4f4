"""The two example policies against the stock engine, on the bundled fixtures and on real agent logs.

Not a timing: a study. For each set of conversations, a sweep over the three engines (stock,
SplitTurnCompaction, ObservationMaskingCompaction) at three settings (max_tokens 8k, 16k, 32k,
keep_recent_tokens a quarter of it) with the default offline summarizer; then
``compare(sweep, by="engine")``, paired per conversation and setting, prints each policy's
mean difference from the stock engine with its 95% bootstrap interval, for every metric of the
comparison (steps over budget: lower is better; context reduction and needed-anchor recall: higher
is better); a metric no pair has is left out.

Run: .venv/bin/python bench/policies.py [fixtures-dir] [agent-logs-dir]
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import zett_lab
from zett_lab import ObservationMaskingCompaction, SplitTurnCompaction

ROOT = Path(__file__).resolve().parent.parent
ENGINES = {"stock": None, "split": SplitTurnCompaction, "mask": ObservationMaskingCompaction}
MAX_TOKENS = [8_000, 16_000, 32_000]


def study(name: str, folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # importers warn about what they skip; the counts are printed below
        conversations = zett_lab.load_all(folder)
    rows = []
    for max_tokens in MAX_TOKENS:
        grid = zett_lab.sweep(
            conversations,
            max_tokens=[max_tokens],
            keep_recent_tokens=[max_tokens // 4],
            engines=ENGINES,
            progress=False,
        )
        rows.append(grid.results)
    import pandas as pd

    results = pd.concat(rows, ignore_index=True)
    failed = results[results["error"].notna()]
    steps = results[results["engine"] == "stock"]["steps"].sum()
    print(
        f"\n## {name}: {len(conversations)} conversations × {len(MAX_TOKENS)} settings "
        f"({steps} model steps per engine), {len(failed)} failed cells"
    )
    for _, row in failed.iterrows():
        print(f"   failed: {row['conversation_id']} {row['engine']} {row['max_tokens']}: {row['error']}")
    totals = results.groupby("engine")[["steps_over_budget", "compactions_applied"]].sum()
    print(totals.loc[list(ENGINES)].to_string())
    comparison = zett_lab.compare(results, by="engine", seed=0)
    pairs = comparison.pairwise[comparison.pairwise["a"] == "stock"]
    print(f"{'policy':>6} {'metric':>22} {'n':>4} {'stock':>9} {'policy':>9} {'policy - stock [95% CI]':>32}")
    for _, row in pairs[pairs["n"] > 0].iterrows():  # a metric no pair has (probes on logs without any)
        low, high = -row["ci_high"], -row["ci_low"]  # pairwise is stock - policy
        print(
            f"{row['b']:>6} {row['metric']:>22} {row['n']:>4} {row['mean_a']:>9.3f} {row['mean_b']:>9.3f} "
            f"{-row['mean_diff']:>+10.3f} [{low:+.3f}, {high:+.3f}]"
        )


def main() -> None:
    fixtures = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures"
    logs = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT.parent / "shared" / "agent-logs"
    study("bundled fixtures", fixtures)
    if logs.is_dir():
        study("real agent logs", logs)
    else:
        print(f"\n(no agent logs at {logs})")


if __name__ == "__main__":
    main()
