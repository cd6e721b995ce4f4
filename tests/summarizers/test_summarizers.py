"""Offline summarizers, the spec factory, and provider summarizers end to end over a loopback server."""

from __future__ import annotations

import asyncio
import gc
import math
import socket
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    ModelEventType,
    ModelRequest,
    ReasoningEffort,
    RetryOptions,
    TimeoutOptions,
)
from zett_agent.providers.base import (
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
)

import zett_lab
from tests.helpers import CountingSummarizer, coding_conversation
from tests.loopback import LoopbackServer
from zett_lab import SettingError, count_tokens
from zett_lab.load.conversation import CHECKPOINT_PREFIX
from zett_lab.replay import ReplayError, replay
from zett_lab.summarizers import (
    DEFAULT_SUMMARIZER,
    OFFLINE_SUMMARIZERS,
    LimitedModel,
    ProviderSummarizer,
    SummarizerConnectionError,
    SummaryCache,
    summarizer,
    summarizer_identity,
)
from zett_lab.summarizers.transcript import render, span_of
from zett_lab.tokens import count_text_tokens

SECRET = "sk-loopback-SECRET-4f9a2c"
FAST_RETRY = RetryOptions(base_delay=0, max_delay=0, max_retries=3)


# -- helpers ------------------------------------------------------------------------------------


def engine_request(span, effort=ReasoningEffort.LOW) -> ModelRequest:
    """The request shape the engine sends (instructions, span, closing request)."""
    return ModelRequest(
        messages=[SystemMessage(content="Summarize."), *span, UserMessage(content="Produce the checkpoint now.")],
        reasoning_effort=effort,
    )


def run_stream(model, request):
    async def collect():
        return [event async for event in model.stream(request)]

    return asyncio.run(collect())


def summary_text(model, request) -> str:
    events = run_stream(model, request)
    assert events[-1].type == ModelEventType.RESPONSE
    return events[-1].response.message.content


async def engine_summarize(model, span):
    """Call the real engine's summary step (what CompactionExtension does when it compacts)."""

    async def emit(event):
        return None

    context = types.SimpleNamespace(session_id="s", emit=emit)
    engine = CompactionExtension(model)
    return await engine._summarize_checkpoint(context, span, model=model, reasoning_effort=ReasoningEffort.LOW)


@pytest.fixture(scope="module")
def span():
    """A coding-session span (system prompt dropped, as the engine does)."""
    return [
        m
        for m in coding_conversation(turns=4, tools_per_turn=2, output_lines=60).messages
        if not isinstance(m, SystemMessage)
    ]


@pytest.fixture()
def server():
    with LoopbackServer() as running:
        yield running


@pytest.fixture()
def keyed(monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


# -- offline summarizers ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["extractive", "anchors", "truncate"])
@pytest.mark.parametrize("budget", [0.1, 300])
def test_offline_within_budget_smaller_and_deterministic(span, name, budget):
    model = summarizer(name, budget=budget)
    first = model.summarize(span)
    limit = budget if isinstance(budget, int) else math.floor(budget * count_tokens(span))
    assert first.strip()
    assert count_text_tokens(first) <= limit
    assert count_tokens([UserMessage(content=CHECKPOINT_PREFIX + first)]) < count_tokens(span)
    assert model.summarize(span) == first
    assert summary_text(model, engine_request(span)) == first


@pytest.mark.parametrize("name", ["extractive", "anchors"])
def test_selected_lines_keep_original_order(span, name):
    transcript = render(span)
    summary = summarizer(name, budget=400).summarize(span)
    position = -1
    for line in summary.splitlines():
        text = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        text = text.strip("…")
        found = transcript.find(text[:40], position + 1)
        assert found > position, line
        position = found


def test_identities():
    import numpy as np

    assert summarizer("anchors", budget=np.int64(2000)).identity == "anchors(budget=2000)"
    assert summarizer("anchors", budget=np.float64(0.25)).identity == "anchors(budget=0.25)"
    assert summarizer("truncate:0.1").identity == "truncate(budget=0.1)"
    assert summarizer("anchors:2000").identity == "anchors(budget=2000)"
    assert summarizer("extractive").identity == "extractive(budget=0.1)"
    assert summarizer("mask").identity == "mask(budget=None)"
    assert summarizer("mask", keep_output_tokens=20).identity == "mask(budget=None,keep_output_tokens=20)"
    assert summarizer("truncate", budget=500, head=0.3).identity == "truncate(budget=500,head=0.3)"
    assert set(OFFLINE_SUMMARIZERS) == {"extractive", "anchors", "truncate", "mask"}
    for name in OFFLINE_SUMMARIZERS:
        model = summarizer(name)
        assert summarizer_identity(model) == model.identity
        assert model.retry.max_retries == 0


def test_default_summarizer_is_offline_and_applied_by_the_engine(span):
    model = summarizer(DEFAULT_SUMMARIZER)
    checkpoint = asyncio.run(engine_summarize(model, span))
    assert isinstance(checkpoint, CompactedMessage)
    assert count_tokens([checkpoint]) < count_tokens(span)


def test_mask_replaces_every_tool_output(span):
    text = summarizer("mask").summarize(span)
    tools = [m for m in span if isinstance(m, ToolMessage)]
    for message in tools:
        assert f"[tool output omitted: {count_tokens([message]):,} tokens]" in text
        assert message.text.splitlines()[1] not in text
    assert text.count("[tool output omitted:") == len(tools)
    # everything else is kept: user requests and tool calls
    assert "please fix module_0.py and never touch migrations/" in text
    assert '[tool call read_file] {"path": "src/module_0_0.py"}' in text
    # small outputs can be kept verbatim
    short = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(ToolCall("c", "bash", {"command": "true"}),)),
        ToolMessage(tool_call_id="c", name="bash", content="ok"),
    ]
    assert "[tool result bash] ok" in summarizer("mask", keep_output_tokens=5).summarize(short)
    assert "[tool output omitted: 1 token]" in summarizer("mask").summarize(short)


def test_truncate_keeps_head_and_tail(span):
    text = summarizer("truncate:200").summarize(span)
    transcript = render(span)
    assert "tokens omitted ...]" in text
    head, tail = text.split("\n[... ", 1)[0], text.rsplit("omitted ...]\n", 1)[1]
    assert transcript.startswith(head.rstrip("…"))
    assert transcript.endswith(tail.lstrip("…"))


def test_anchors_keeps_constraints_commands_and_errors():
    span = [
        UserMessage(content="The deploy of billing-api fails. Never push to main directly; open a PR instead."),
        AssistantMessage(
            content="", tool_calls=(ToolCall("c1", "bash", {"command": "kubectl logs deploy/billing-api"}),)
        ),
        ToolMessage(
            tool_call_id="c1",
            name="bash",
            content="\n".join(
                [f"INFO request {i} ok" for i in range(300)]
                + ["ERROR psycopg.OperationalError: connection to 10.0.0.5:5432 refused"]
                + [f"INFO request {i} ok" for i in range(300, 600)]
            ),
        ),
        AssistantMessage(content="The root cause is the DB_HOST secret; I'll fix config/prod.yaml."),
    ]
    text = summarizer("anchors", budget=150).summarize(span)
    assert "Never push to main directly" in text
    assert "kubectl logs deploy/billing-api" in text
    assert "psycopg.OperationalError" in text
    assert "config/prod.yaml" in text
    assert "INFO request 17 ok" not in text


def test_offline_summaries_pause_the_garbage_collector_and_leave_it_as_it_was(fixture_conversations):
    """An offline summary is made with the cyclic collector paused (its lines and tuples hold no cycle); the
    collector runs again afterwards, also after an error, and one that was off stays off."""
    from zett_lab.summarizers.offline import Truncate

    seen: list[bool] = []

    class Watching(Truncate):
        def _summarize(self, messages, limit):
            seen.append(gc.isenabled())
            if not messages:
                raise ValueError("nothing to summarize")
            return super()._summarize(messages, limit)

    span = max(fixture_conversations, key=lambda c: len(c.messages)).messages
    model = Watching(budget=200)
    assert gc.isenabled()
    assert model.summarize(span) == summarizer("truncate", budget=200).summarize(span)
    assert gc.isenabled()
    with pytest.raises(ValueError):
        model.summarize([])
    assert gc.isenabled()
    gc.disable()
    try:
        model.summarize(span)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False, False, False]


def test_anchors_summaries_are_the_same_whether_their_lines_were_seen_before(fixture_conversations):
    """Each line's items are remembered across summaries; a summary after others equals one made fresh,
    and the items a caller is handed are its own to change."""
    from zett_lab.summarizers.offline import anchor_items, selection
    from zett_lab.summarizers.transcript import TranscriptLine

    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    n = len(conversation.messages)
    spans = [conversation.messages[: n // 2], conversation.messages[n // 4 : 3 * n // 4], conversation.messages]
    anchors = summarizer("anchors", budget=400)
    selection.forget_lines()
    after_others = [anchors.summarize(span) for span in spans]
    assert selection._segment_candidates.cache_info().hits > 0  # the spans overlap: messages were seen again
    for span, text in zip(spans, after_others, strict=True):
        selection.forget_lines()
        assert anchors.summarize(span) == text
    unit = TranscriptLine(0, 0, "user", "user", "Never edit src/app.py; run pytest -x first.")
    items, _ = anchor_items(unit)
    items.clear()
    assert anchor_items(unit)[0]


def test_anchors_candidates_remembered_per_segment_are_the_lines_taken_one_by_one(fixture_conversations):
    """The anchors summarizer remembers each segment's candidate lines; they are the lines of line_units that carry
    items (anchor_items), clipped around the first item, numbered and costed as one line at a time gives them."""
    from zett_lab.summarizers.offline import anchor_items, line_units, selection
    from zett_lab.summarizers.transcript import TranscriptLine, segments, unit_cost

    for max_line_chars in (300, 40):
        anchors = selection.Anchors(max_line_chars=max_line_chars)
        for conversation in fixture_conversations:
            segs = segments(conversation.messages)
            first_user = next((i for i, s in enumerate(segs) if s.kind in ("user", "agent") and s.text), None)
            expected = []
            for unit in line_units(segs, split_sentences=False):
                items, first = anchor_items(unit, first_user_segment=first_user)
                if items:
                    text = selection._clip(unit.text, max_line_chars, first)
                    clipped = TranscriptLine(unit.order, unit.segment, unit.label, unit.kind, text)
                    expected.append((clipped, items, unit_cost(clipped)))
            assert expected and anchors.candidates(segs) == expected
            assert anchors.candidates(segs) == expected  # again, from what was remembered


def test_render_covers_every_message_kind():
    span = [
        CompactedMessage(content=CHECKPOINT_PREFIX + "Earlier: fixed auth in src/auth.py."),
        UserMessage(content="next"),
        AssistantMessage(
            content="Looking.",
            reasoning="think first",
            tool_calls=(ToolCall("c", "grep", {"pattern": "TODO", "path": "src"}),),
        ),
        ToolMessage(tool_call_id="c", name="grep", content="boom", success=False),
    ]
    text = render(span)
    assert "[earlier summary] Earlier: fixed auth in src/auth.py." in text
    assert CHECKPOINT_PREFIX.strip() not in text
    assert "[assistant reasoning] think first" in text
    assert '[tool call grep] {"pattern": "TODO", "path": "src"}' in text
    assert "[tool error grep] boom" in text
    # span_of drops the engine's instructions and closing request
    assert span_of(engine_request(span)) == span


def test_summary_never_empty():
    span = [UserMessage(content="x" * 5)]
    for name in OFFLINE_SUMMARIZERS:
        assert summarizer(name, budget=1).summarize(span).strip()


@pytest.mark.parametrize("budget", [0, -5, 0.0, -0.5, 1.5, float("nan"), True, "abc", [1]])
def test_bad_budget(budget):
    with pytest.raises(SettingError):
        summarizer("truncate", budget=budget)


@pytest.mark.parametrize("spec", ["truncate:0", "anchors:-3", "extractive:2.5", "truncate:", "mask:zero"])
def test_bad_budget_in_spec(spec):
    with pytest.raises(SettingError):
        summarizer(spec)


# -- the spec factory -------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["lexrank", "foo:bar", "openai", "openai:", "", "gpt-5-mini", "http://x"])
def test_unknown_spec_lists_valid_forms(spec):
    with pytest.raises(SettingError) as error:
        summarizer(spec)
    assert "openai-compatible:MODEL@" in str(error.value) or "missing model" in str(error.value)


def test_bad_options():
    with pytest.raises(SettingError, match="unknown option"):
        summarizer("truncate", nonsense=1)
    with pytest.raises(SettingError, match="budget given twice"):
        summarizer("truncate:0.1", budget=0.2)
    with pytest.raises(SettingError, match="max_concurrency"):
        summarizer(CountingSummarizer(), max_concurrency=0)
    with pytest.raises(SettingError):
        summarizer(42)


@pytest.mark.parametrize(
    "spec, variables",
    [
        ("openai:gpt-5-mini", ["OPENAI_API_KEY"]),
        ("anthropic:claude-haiku-4-5", ["ANTHROPIC_API_KEY"]),
        ("google:gemini-2.5-flash", ["GEMINI_API_KEY", "GOOGLE_API_KEY"]),
        ("deepseek:deepseek-chat", ["DEEPSEEK_API_KEY"]),
    ],
)
def test_missing_key_names_the_variable(monkeypatch, spec, variables):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(SettingError) as error:
        summarizer(spec)
    for variable in variables:
        assert variable in str(error.value)


@pytest.mark.parametrize(
    "spec, variable, cls",
    [
        ("openai:gpt-5-mini", "OPENAI_API_KEY", "OpenAIProvider"),
        ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY", "AnthropicProvider"),
        ("google:gemini-2.5-flash", "GOOGLE_API_KEY", "GoogleProvider"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY", "DeepSeekProvider"),
        ("ollama:qwen3:8b", None, "OllamaProvider"),
        ("openai-compatible:qwen@http://user:pw@127.0.0.1:9/v1/", None, "OpenAICompatibleProvider"),
    ],
)
def test_providers_are_zett_agent_classes(monkeypatch, spec, variable, cls):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    if variable:
        monkeypatch.setenv(variable, SECRET)
    model = summarizer(spec, retry=RetryOptions(max_retries=5), max_concurrency=2)
    assert isinstance(model, ProviderSummarizer)
    assert type(model.provider).__name__ == cls
    assert type(model.provider).__module__.startswith("zett_agent.providers.")
    assert model.provider.retry == RetryOptions(max_retries=5)
    assert model.retry == RetryOptions(max_retries=5)
    assert SECRET not in model.identity and "pw" not in model.identity
    assert model.identity.startswith(spec.split("@")[0])
    assert summarizer_identity(model) == model.identity


def test_identity_of_other_models(monkeypatch):
    from zett_agent.providers import OllamaProvider, OpenAIProvider

    assert summarizer_identity(CountingSummarizer()) == "counting-summarizer"
    assert summarizer_identity(OpenAIProvider("gpt-5-mini", SECRET)) == "openai:gpt-5-mini"
    assert summarizer_identity(OllamaProvider("qwen3")) == "ollama:qwen3"

    class Plain:
        retry = RetryOptions(max_retries=0)

        async def stream(self, request):  # pragma: no cover - never called
            yield None

    assert summarizer_identity(Plain()).endswith("Plain")
    model = CountingSummarizer()
    assert summarizer(model) is model
    limited = summarizer(model, max_concurrency=1)
    assert isinstance(limited, LimitedModel) and limited.identity == "counting-summarizer"
    with pytest.raises(SettingError, match="needs a base URL"):
        summarizer("openai-compatible:qwen")
    with pytest.raises(SettingError, match="unknown option"):
        summarizer("ollama:qwen3", temperature=0.2)


# -- provider summarizers over loopback ----------------------------------------------------------------


def test_openai_compatible_returns_the_server_summary(server, keyed, span):
    model = summarizer(f"openai-compatible:fake-model@{server.openai_url}")
    assert summary_text(model, engine_request(span)) == server._summary_for(server.requests[0].json["messages"])
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {SECRET}"
    assert request.json["model"] == "fake-model"
    assert request.json["messages"][0] == {"role": "system", "content": "Summarize."}
    assert request.json["messages"][-1] == {"role": "user", "content": "Produce the checkpoint now."}
    # a second event loop (replay runs asyncio.run per conversation) gets its own client
    assert summary_text(model, engine_request(span)).startswith("Checkpoint of")
    assert server.count() == 2


def test_openai_provider_with_base_url_and_usage(server, keyed, span):
    server.configure(summary="All done: fixed module_0.py.", reasoning="thinking")
    model = summarizer(f"openai:gpt-5-mini@{server.openai_url}")
    events = run_stream(model, engine_request(span))
    response = events[-1].response
    assert response.message.content == "All done: fixed module_0.py."
    assert response.message.reasoning == "thinking"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 4
    assert server.requests[0].json["reasoning_effort"] == "low"


def test_ollama_returns_the_server_summary(server, span):
    server.configure(summary="Ollama checkpoint.")
    model = summarizer(f"ollama:qwen3:8b@{server.url}")
    assert model.identity == f"ollama:qwen3:8b@{server.url}"
    assert summary_text(model, engine_request(span)) == "Ollama checkpoint."
    assert server.requests[0].path == "/api/chat"
    assert server.requests[0].json["model"] == "qwen3:8b"


@pytest.mark.parametrize("protocol", ["openai-compatible", "ollama"])
def test_retries_on_429_as_retry_options_say(server, keyed, span, protocol):
    url = server.openai_url if protocol == "openai-compatible" else server.url
    server.configure(fail_status=429, fail_times=2, summary="after retries")
    model = summarizer(f"{protocol}:m@{url}", retry=FAST_RETRY)
    assert summary_text(model, engine_request(span)) == "after retries"
    assert server.count() == 3  # two 429s, then success
    server.reset()
    server.configure(fail_status=429, fail_times=10)
    model = summarizer(f"{protocol}:m@{url}", retry=RetryOptions(base_delay=0, max_retries=2))
    with pytest.raises(ProviderHTTPError) as error:
        run_stream(model, engine_request(span))
    assert error.value.status_code == 429
    assert server.count() == 3  # 1 + max_retries


@pytest.mark.parametrize("protocol", ["openai-compatible", "ollama"])
def test_500_always_raises_the_provider_error(server, keyed, span, protocol):
    url = server.openai_url if protocol == "openai-compatible" else server.url
    server.configure(fail_status=500)
    model = summarizer(f"{protocol}:m@{url}", retry=RetryOptions(base_delay=0, max_retries=1))
    with pytest.raises(ProviderHTTPError) as error:
        run_stream(model, engine_request(span))
    assert error.value.status_code == 500
    assert server.count() == 2


# zett-agent 0.2.1's Ollama stream, closed early (the engine stops at the tool-call delta), leaves
# an httpx stream entered in a wait_for task; its finalizer complains from another task.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("protocol", ["openai-compatible", "ollama"])
@pytest.mark.parametrize("mode", ["empty", "tool_call"])
def test_empty_or_tool_call_summary_fails_in_the_engine(server, keyed, span, protocol, mode):
    url = server.openai_url if protocol == "openai-compatible" else server.url
    server.configure(**{mode: True})
    model = summarizer(f"{protocol}:m@{url}")
    with pytest.raises(AgentProtocolError):
        asyncio.run(engine_summarize(model, span))
    if protocol == "ollama":
        del model
        gc.collect()


def test_unreachable_endpoint(keyed, span):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    for spec in (f"openai-compatible:m@http://127.0.0.1:{port}/v1", f"ollama:m@http://127.0.0.1:{port}"):
        model = summarizer(spec, retry=RetryOptions(base_delay=0, max_retries=1))
        with pytest.raises(SummarizerConnectionError) as error:
            run_stream(model, engine_request(span))
        assert isinstance(error.value, ProviderError)
        assert f"127.0.0.1:{port}" in str(error.value)
        assert SECRET not in str(error.value)


def test_silent_provider_times_out(server, keyed, span):
    server.configure(delay=5)
    model = summarizer(
        f"openai-compatible:m@{server.openai_url}", timeout=TimeoutOptions(first_byte=0.3), retry=FAST_RETRY
    )
    with pytest.raises(ProviderTimeoutError):
        run_stream(model, engine_request(span))
    assert server.count() == 1  # a silent provider is not asked again


def test_max_concurrency_limits_simultaneous_calls(server, keyed, span):
    server.configure(delay=0.2)
    model = summarizer(f"openai-compatible:m@{server.openai_url}", max_concurrency=1)

    async def many():
        async def one():
            return [event async for event in model.stream(engine_request(span))]

        return await asyncio.gather(*(one() for _ in range(3)))

    results = asyncio.run(many())
    assert all(events[-1].response.message.content for events in results)
    assert server.count() == 3
    assert server.max_in_flight == 1


def test_key_is_sent_but_never_written(server, keyed, tmp_path, span):
    cache = SummaryCache(tmp_path / "cache.sqlite")
    model = summarizer(f"openai-compatible:m@{server.openai_url}")
    conversation = coding_conversation(turns=4, output_lines=40)
    trace = replay(conversation, max_tokens=1_500, keep_recent_tokens=400, summarizer=model, cache=cache)
    assert (trace.compactions["summary_text"].str.startswith("Checkpoint of")).any()
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests)
    cache.close()
    written = [p for p in Path(tmp_path).rglob("*") if p.is_file()]
    assert written
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    for frame in (trace.steps, trace.compactions):
        assert SECRET not in frame.to_csv()
    assert SECRET not in repr(trace.settings) if hasattr(trace, "settings") else True


# -- replay end to end ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_conversation():
    conversations = zett_lab.load_all(Path(__file__).resolve().parents[2] / "fixtures")
    return min(conversations, key=lambda c: count_tokens(c.messages))


def test_replay_fixture_with_loopback_summarizer(server, keyed, fixture_conversation):
    server.configure(summary="Loopback checkpoint: work so far.")
    model = summarizer(f"openai-compatible:m@{server.openai_url}")
    total = count_tokens(fixture_conversation.messages)
    trace = replay(
        fixture_conversation, max_tokens=total // 3, keep_recent_tokens=total // 10, summarizer=model, cache=False
    )
    compactions = trace.compactions
    assert len(compactions) >= 1
    assert (compactions["summary_text"] == "Loopback checkpoint: work so far.").all()
    assert compactions["applied"].all()
    assert compactions["error"].isna().all()
    assert (compactions["summarizer"] == model.identity).all()
    assert server.count() == len(compactions)


def test_replay_failing_provider_non_strict(server, keyed, fixture_conversation):
    server.configure(fail_status=500)
    model = summarizer(f"openai-compatible:m@{server.openai_url}", retry=RetryOptions(base_delay=0, max_retries=1))
    total = count_tokens(fixture_conversation.messages)
    trace = replay(
        fixture_conversation, max_tokens=total // 3, keep_recent_tokens=total // 10, summarizer=model, cache=False
    )
    compactions = trace.compactions
    assert len(compactions) >= 1
    assert not compactions["applied"].any()
    assert compactions["error"].notna().all()
    assert (compactions["error_kind"] == "ProviderHTTPError:500").all()
    assert (trace.steps["skip_reason"] == "summary failed").any()
    # the replay went through every recorded step
    assert len(trace.steps) == sum(isinstance(m, AssistantMessage) for m in fixture_conversation.messages)
    assert server.count() == 2 * len(compactions)  # 1 + max_retries per attempt
    with pytest.raises(ReplayError, match="ProviderHTTPError"):
        replay(
            fixture_conversation,
            max_tokens=total // 3,
            keep_recent_tokens=total // 10,
            summarizer=model,
            cache=False,
            strict=True,
        )


def test_spec_of_rebuilds_a_summarizer_from_its_identity():
    from zett_lab.summarizers import spec_of, summarizer, summarizer_identity

    for spec in ("anchors:0.1", "truncate:2000", "mask", "extractive"):
        identity = summarizer_identity(summarizer(spec))
        rebuilt = spec_of(identity)
        assert rebuilt is not None and summarizer_identity(summarizer(rebuilt)) == identity
    assert spec_of("counting-summarizer") is None and spec_of("anchors(budget=0.1,extra=1)") is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text("ab c_1\n", max_size=30), min_size=1, max_size=12))
def test_tfidf_from_remembered_line_terms_is_the_matrix_counted_line_by_line(texts):
    """The TF-IDF matrix built from each line's remembered term weights has the entries, in the same columns, of
    counting every line's terms afresh (the extractive summary ranks and drops lines by it)."""
    import math
    import re

    from scipy import sparse

    from zett_lab.summarizers.offline import selection

    vocabulary: dict[str, int] = {}
    rows, cols, values = [], [], []
    for row, text in enumerate(texts):
        counts: dict[int, int] = {}
        for term in re.findall(r"[A-Za-z_][A-Za-z0-9_]+|\d+", text.lower()):
            column = vocabulary.setdefault(term, len(vocabulary))
            counts[column] = counts.get(column, 0) + 1
        for column, count in counts.items():
            rows.append(row)
            cols.append(column)
            values.append(1.0 + math.log(count))
    counted = sparse.csr_matrix((values, (rows, cols)), shape=(len(texts), max(1, len(vocabulary))), dtype=np.float64)
    frequency = np.bincount(np.asarray(cols, dtype=np.int64), minlength=counted.shape[1])
    counted = counted @ sparse.diags(np.log(len(texts) / np.maximum(frequency, 1)))
    norms = np.sqrt(np.asarray(counted.multiply(counted).sum(axis=1)).ravel())
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    expected = sparse.csr_matrix(sparse.diags(inverse) @ counted)
    for _ in range(2):  # the second time from remembered weights only
        matrix, nonzero = selection._tfidf(texts)
        assert matrix.shape == expected.shape and (nonzero == (norms > 0)).all()
        assert (matrix != expected).nnz == 0  # the same floats
        for part in ("indptr", "indices", "data"):  # in the same places (what LexRank sums, in that order)
            assert np.array_equal(getattr(matrix, part), getattr(expected, part)), part
