"""Which endpoint a summary request goes to, what counts as a summary, and who decides it.

Real HTTP servers on 127.0.0.1 (:mod:`tests.loopback`) speak the providers' streaming protocols.
"""

from __future__ import annotations

import pytest
from zett_agent.providers import OpenAIProvider

import zett_lab
from tests.helpers import coding_conversation
from tests.loopback import LoopbackServer
from zett_lab.errors import ZettLabWarning
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

    from tests.replay.test_live import LIMITS, run_agent

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


# -- 1: a summary counts only when the provider finished it; one bounded retry policy per span ------------------


@pytest.fixture()
def server():
    with LoopbackServer(summary="A checkpoint of the work so far, with its decisions.") as running:
        yield running


def _over_budget_replay(model, cache=False, **options):
    conversation = coding_conversation(turns=8, output_lines=40)
    return zett_lab.replay(
        conversation, max_tokens=1_500, keep_recent_tokens=400, summarizer=model, cache=cache, **options
    )


def test_a_cut_stream_is_a_failed_attempt_never_applied_or_cached(tmp_path, keyed, server):
    """One content chunk, half an event, the connection closed: no finish reason, no [DONE]."""
    server.configure(cut=True)
    cache = SummaryCache(tmp_path / "cache.sqlite")
    model = summarizer(f"openai:summ-1@{server.openai_url}")
    with pytest.warns(ZettLabWarning, match="cut off"):
        trace = _over_budget_replay(model, cache=cache)
    attempts = trace.compactions
    assert len(attempts) and not attempts["applied"].any()
    assert set(attempts["error_kind"]) == {"unfinished"}
    assert "without a finish reason" in attempts["error"].iloc[0]
    assert attempts["summary_text"].isna().all()  # what arrived is no summary
    assert trace.summary()["failed"] == len(attempts) and trace.summary()["compactions_applied"] == 0
    server.configure()  # the provider works again: nothing was cached, so it is asked (and answers)
    again = _over_budget_replay(model, cache=cache)
    assert again.compactions["applied"].any() and not again.compactions["cache_hit"].any()
    cache.close()


@pytest.mark.parametrize("finish", ["length", "content_filter"])
def test_a_summary_the_provider_did_not_finish_is_a_failed_attempt(keyed, server, finish):
    server.configure(finish=finish)
    model = summarizer(f"openai:summ-1@{server.openai_url}")
    with pytest.warns(ZettLabWarning):
        trace = _over_budget_replay(model)
    first = trace.compactions.iloc[0]
    assert not first["applied"] and first["error_kind"] == "unfinished" and finish in first["error"]


def test_a_failing_span_is_asked_at_most_twice_however_many_steps_follow(keyed, server):
    from zett_lab.replay.engine import SPAN_ATTEMPTS

    server.configure(cut=True)
    model = summarizer(f"openai:summ-1@{server.openai_url}")
    with pytest.warns(ZettLabWarning):
        trace = _over_budget_replay(model)
    attempts = trace.compactions
    assert len(attempts) > SPAN_ATTEMPTS + 2  # the engine tried at many later steps ...
    assert server.count("/v1/chat/completions") == SPAN_ATTEMPTS  # ... and the provider was asked twice
    later = attempts.iloc[SPAN_ATTEMPTS:]
    assert (later["error_kind"] == "unfinished").all() and not later["applied"].any()  # counted under their cause
    assert later["error"].str.contains("not asked again: the summary of this span already failed 2 times").all()
    assert later["error"].str.contains("without a finish reason").all()
    assert len(trace.failure_counts) == 1  # one cause, one line


def test_a_replay_makes_at_most_a_bounded_number_of_failed_requests(keyed):
    """Distinct spans each fail: after REPLAY_FAILED_REQUESTS failed requests, no request is made."""
    import asyncio

    from zett_agent.messages import SystemMessage, UserMessage
    from zett_agent.model import ModelRequest

    from zett_lab.replay.engine import REPLAY_FAILED_REQUESTS, SummaryChannel, SummaryNotAsked, UnfinishedSummary

    with LoopbackServer(cut=True) as cutting:
        channel = SummaryChannel(summarizer(f"openai:summ-1@{cutting.openai_url}"), "openai:summ-1")

        async def ask(n: int) -> type[BaseException]:
            bound = channel.bound({})
            request = ModelRequest(messages=[SystemMessage(content="Summarize."), UserMessage(content=f"span {n}")])
            try:
                async for _ in bound.stream(request):
                    pass
            except (UnfinishedSummary, SummaryNotAsked) as error:
                bound.failed(error)
                return type(error)
            return type(None)

        outcomes = [asyncio.run(ask(n)) for n in range(REPLAY_FAILED_REQUESTS + 3)]
        assert outcomes == [UnfinishedSummary] * REPLAY_FAILED_REQUESTS + [SummaryNotAsked] * 3
        assert cutting.count("/v1/chat/completions") == REPLAY_FAILED_REQUESTS
