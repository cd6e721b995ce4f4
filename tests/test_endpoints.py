"""Which endpoint a summary request goes to, what counts as a summary, and who decides it.

Real HTTP servers on 127.0.0.1 (:mod:`tests.loopback`) speak the providers' streaming protocols.
"""

from __future__ import annotations

import pytest
from zett_agent.providers import OpenAIProvider

import zett_lab
from tests.helpers import coding_conversation
from tests.loopback import LoopbackServer
from zett_lab.summarizers import SummaryCache, summarizer, summarizer_identity

SECRET = "sk-loopback-SECRET-endpoints"


@pytest.fixture()
def keyed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", SECRET)


@pytest.fixture()
def two_servers():
    with LoopbackServer(summary="Summary from A.") as first, LoopbackServer(summary="Summary from B.") as second:
        yield first, second


# -- 3: an identity names its endpoint -------------------------------------------------------------------


def test_two_endpoints_serving_one_model_name_are_two_summarizers(tmp_path, keyed, two_servers):
    first, second = two_servers
    at_first = OpenAIProvider("summ-1", SECRET, base_url=first.openai_url)
    at_second = OpenAIProvider("summ-1", SECRET, base_url=second.openai_url)
    assert summarizer_identity(at_first) == f"openai:summ-1@{first.openai_url}"
    assert summarizer_identity(at_first) != summarizer_identity(at_second)
    assert summarizer_identity(OpenAIProvider("summ-1", SECRET)) == "openai:summ-1"  # the vendor's default endpoint
    conversation = coding_conversation(turns=6, output_lines=40)
    cache = SummaryCache(tmp_path / "cache.sqlite")
    one = zett_lab.replay(conversation, max_tokens=1_500, keep_recent_tokens=400, summarizer=at_first, cache=cache)
    two = zett_lab.replay(conversation, max_tokens=1_500, keep_recent_tokens=400, summarizer=at_second, cache=cache)
    assert len(two.compactions) and not two.compactions["cache_hit"].any()
    assert (one.compactions["summary_text"] == "Summary from A.").all()
    assert (two.compactions["summary_text"] == "Summary from B.").all()
    assert second.count("/v1/chat/completions") == len(two.compactions)
    cache.close()


def test_options_that_change_answers_are_part_of_the_identity(keyed, two_servers):
    first, _ = two_servers
    plain = OpenAIProvider("summ-1", SECRET, base_url=first.openai_url)
    warm = OpenAIProvider("summ-1", SECRET, base_url=first.openai_url, temperature=0.7)
    routed = OpenAIProvider("summ-1", SECRET, base_url=first.openai_url, extra_body={"route": "b"})
    identities = {summarizer_identity(m) for m in (plain, warm, routed)}
    assert len(identities) == 3
    assert all(SECRET not in identity for identity in identities)
    built = summarizer(f"openai:summ-1@{first.openai_url}", temperature=0.7)
    assert summarizer_identity(built) == summarizer_identity(warm)


def test_a_recorded_identity_reaches_the_same_endpoint_again(keyed, two_servers):
    """An identity written in a trace, given back as a spec, goes to that endpoint (not the vendor's default)."""
    first, _ = two_servers
    identity = summarizer_identity(OpenAIProvider("summ-1", SECRET, base_url=first.openai_url))
    conversation = coding_conversation(turns=4, output_lines=40)
    trace = zett_lab.replay(conversation, max_tokens=1_500, keep_recent_tokens=400, summarizer=identity, cache=False)
    assert trace.settings.summarizer == identity
    assert first.count("/v1/chat/completions") == len(trace.compactions) > 0


def test_a_live_trace_names_the_endpoint_its_summaries_came_from(tmp_path, keyed, two_servers):
    import asyncio

    from zett_agent.extensions.compaction import CompactionExtension

    from tests.test_live import LIMITS, run_agent

    first, second = two_servers
    model = OpenAIProvider("summ-1", SECRET, base_url=second.openai_url)
    path = tmp_path / "live.jsonl"
    asyncio.run(run_agent(zett_lab.instrument(CompactionExtension(model, **LIMITS), path), turns=3))
    live = zett_lab.Trace.load(path)
    assert live.settings.summarizer == f"openai:summ-1@{second.openai_url}"
    assert (live.compactions["summarizer"] == live.settings.summarizer).all()
    before = second.count("/v1/chat/completions")
    again = zett_lab.replay(live.conversation, **LIMITS, summarizer=live.settings.summarizer, cache=False)
    assert second.count("/v1/chat/completions") - before == len(again.compactions) > 0
    assert first.count() == 0


# -- 2: saved results never decide where a request goes ------------------------------------------------------


def test_a_report_over_a_received_sweep_calls_no_endpoint_it_names(tmp_path, keyed, two_servers, fixture_conversations):
    """The sweep names server A (someone else's host); the report has OPENAI_API_KEY but is not asked to go online."""
    from zett_lab.show.cli import main

    first, second = two_servers
    billing = [c for c in fixture_conversations if c.id == "billing-rounding"]
    assert billing[0].native_compactions  # the report has production spans to summarize
    named = f"openai:summ-1@{first.openai_url}"
    grid = zett_lab.sweep(
        billing,
        max_tokens=[20_000],
        keep_recent_tokens=[6_000],
        summarizers=["anchors", named],
        executor="serial",
        cache=False,
    )
    grid.save(tmp_path / "shared.sweep")
    sent = first.count()
    assert sent > 0
    page = tmp_path / "report.html"
    code = main(["report", str(tmp_path / "shared.sweep"), "-o", str(page), "--no-progress", "--date", "2025-01-01"])
    assert code == 0
    assert first.count() == sent and second.count() == 0  # no request, no key sent anywhere
    html = page.read_text(encoding="utf-8")
    assert "Not summarized on these spans: " + named in html and "--summarizer" in html

    # Asked on this run: only the endpoint the user named is called.
    again = tmp_path / "asked.html"
    argv = ["report", str(tmp_path / "shared.sweep"), "-o", str(again), "--no-progress", "--date", "2025-01-01"]
    assert main([*argv, "--summarizer", f"openai:summ-1@{second.openai_url}"]) == 0
    assert first.count() == sent and second.count() == len(billing[0].native_compactions)
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in second.requests)


def test_spec_of_never_rebuilds_a_provider_from_an_identity(keyed, two_servers):
    from zett_lab.summarizers import spec_of

    first, _ = two_servers
    assert spec_of(f"openai:summ-1@{first.openai_url}") is None
    assert spec_of("openai:gpt-5-mini") is None
    assert spec_of("anchors(budget=0.1)") == "anchors:0.1"
