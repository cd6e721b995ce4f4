"""Shared test setup: an isolated summary cache, offline tokenizer, and the bundled fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
AGENT_LOGS = ROOT.parent / "shared" / "agent-logs"


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    """Point the persistent summary cache at a per-run temporary file, never the user's."""
    os.environ["ZETT_LAB_CACHE"] = str(tmp_path_factory.mktemp("cache") / "summaries.sqlite")
    yield


@pytest.fixture(scope="session")
def fixture_conversations():
    """Every conversation in the bundled fixtures, loaded once per test session."""
    import zett_lab

    return zett_lab.load_all(FIXTURES)


@pytest.fixture(scope="session")
def agent_logs() -> Path:
    """The shared real agent logs; skipped where absent, but never when CI=true."""
    if not AGENT_LOGS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{AGENT_LOGS} is missing on CI")
        pytest.skip("shared agent logs not present")
    return AGENT_LOGS
