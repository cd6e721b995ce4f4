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


@pytest.fixture(autouse=True)
def _fresh_endpoint_breakers():
    """Every test starts with no remembered connection failures (an endpoint's breaker is per process)."""
    from zett_lab.summarizers import reset_endpoint_breakers

    reset_endpoint_breakers()
    yield


@pytest.fixture(scope="session")
def fixture_conversations():
    """Every conversation in the bundled fixtures, loaded once per test session."""
    import zett_lab

    return zett_lab.load_all(FIXTURES)


@pytest.fixture
def sent_contexts(monkeypatch):
    """Capture the context every replayed model step actually received from the runtime."""
    from zett_lab.replay.playback import ReplayModel

    captured: list[list] = []
    original = ReplayModel.stream

    def stream(self, request):
        captured.append(list(request.messages))
        return original(self, request)

    monkeypatch.setattr(ReplayModel, "stream", stream)
    return captured


@pytest.fixture(scope="session")
def agent_logs() -> Path:
    """The shared real agent logs; skipped where absent, but never when CI=true."""
    if not AGENT_LOGS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{AGENT_LOGS} is missing on CI")
        pytest.skip("shared agent logs not present")
    return AGENT_LOGS


#: Flags for Debian's chromium as root on a machine with no network but the package registries.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module")
def browser():
    """A Playwright chromium (Debian's, via executable_path). Skipped where absent, never when CI=true."""
    import shutil

    path = os.environ.get("ZETT_LAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "playwright is not installed"
    if reason is None and not Path(path).exists():
        reason = f"no chromium at {path} (apt-get install chromium)"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run on CI: {reason}")
        pytest.skip(reason)
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()
