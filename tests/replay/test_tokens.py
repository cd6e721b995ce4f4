"""Offline o200k provisioning and counters that equal zett-agent's own estimator."""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)

import zett_lab
from zett_lab import tokens
from zett_lab.tokens import (
    O200K_SHA256,
    ApproxCounter,
    MemoizingCounter,
    VocabularyError,
)


def edge_case_messages():
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    return [
        SystemMessage(content=""),
        SystemMessage(content="You are a careful coding agent."),
        UserMessage(content=""),
        UserMessage(content="héllo wörld — 日本語のテキスト 🚀 emoji\u200b zero-width"),
        UserMessage(
            content=[
                TextContent(text="look at this"),
                ImageContent(source=ImageUrlSource(url="https://example.com/a.png")),
            ]
        ),
        UserMessage(
            content=[ImageContent(source=ImageBytesSource(data=png, media_type="image/png")), TextContent(text="")]
        ),
        AssistantMessage(content=""),
        AssistantMessage(content="Done.", reasoning="I should check the tests first. ünïcode"),
        AssistantMessage(
            content="",
            tool_calls=(
                ToolCall(id="call_1", name="bash", arguments={"command": "pytest -x tests/ && echo 'ok' | tee /tmp/ö"}),
                ToolCall(
                    id="call_2",
                    name="read_file",
                    arguments={"path": "src/app.py", "limit": 200, "nested": {"a": [1, 2.5, None]}},
                ),
            ),
        ),
        ToolMessage(tool_call_id="call_1", name="bash", content="x" * 200_000),
        ToolMessage(
            tool_call_id="call_2",
            name="read_file",
            content="Traceback (most recent call last):\nKeyError: 'id'",
            success=False,
        ),
        ToolMessage(
            tool_call_id="call_3",
            name="screenshot",
            content=[TextContent(text="screen"), ImageContent(source=ImageUrlSource(url="https://e.com/s.png"))],
        ),
        AgentMessage(content="Internal: continue with the plan."),
        CompactedMessage(
            content="[Conversation checkpoint: historical context, not system instructions]\nEarlier we fixed auth."
        ),
        UserMessage(content="line\n" * 5000),
    ]


def test_counter_equals_engine_on_edge_cases():
    counter = MemoizingCounter()
    for message in edge_case_messages():
        assert counter([message]) == CompactionExtension._count_tokens([message]), message
    messages = edge_case_messages()
    assert counter(messages) == CompactionExtension._count_tokens(messages)
    # memoized second pass gives the same integers, also for equal copies
    assert counter(copy.deepcopy(messages)) == CompactionExtension._count_tokens(messages)


def test_counter_equals_engine_on_every_fixture_message(fixture_conversations):
    counter = MemoizingCounter()
    checked = 0
    for conversation in fixture_conversations:
        for message in conversation.messages:
            assert counter([message]) == CompactionExtension._count_tokens([message])
            checked += 1
    assert checked >= 800


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_a_text_counts_what_the_engine_counts_for_a_user_message_holding_it(text):
    engine = CompactionExtension._count_tokens([UserMessage(content=text)]) if text else 0
    assert tokens.count_text_tokens(text) == engine


#: Characters around o200k's pre-tokenizer's cuts: line breaks, ``[``, white space, slashes, punctuation that takes
#: the line breaks after it, letters (also upper case, accented, combining), digits and contractions.
_AROUND_CUTS = st.lists(
    st.sampled_from(
        ["\n", "\n[", "[", "\r", "\r\n", " ", "  ", "\t", "/", ".", ":", "]", "'s", "a", "Ab", "é", "\u0301", "7", "x"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_AROUND_CUTS, max_size=6))
def test_a_text_counted_block_by_block_counts_what_the_engine_counts(pieces):
    """count_text_tokens cuts a text at each line break before ``[`` and sums the blocks' remembered counts: the
    same count as the engine's for the whole text, wherever the cuts fall, on texts made of what sits at them."""
    text = "\n[".join(pieces)
    engine = CompactionExtension._count_tokens([UserMessage(content=text)]) if text else 0
    assert tokens.count_text_tokens(text) == engine
    assert tokens.count_text_tokens(text) == engine  # again, from the remembered blocks


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_AROUND_CUTS, max_size=6),
    st.sampled_from(["user", "tool", "system", "assistant"]),
    st.sampled_from([None, 1, 3]),
)
def test_a_message_counted_block_by_block_counts_what_the_engine_counts(pieces, role, max_texts):
    """The engine's per-message count (what replays and live agents count contexts with) cuts each text piece into
    blocks too, also with a bounded memo that forgets blocks (a live agent's): the engine's integer either way."""
    text = "\n[".join(pieces)
    message = {
        "user": lambda: UserMessage(content=[TextContent(text=text), TextContent(text="[" + text)]),
        "tool": lambda: ToolMessage(content=text, tool_call_id="call-1", name="run"),
        "system": lambda: SystemMessage(content=text),
        "assistant": lambda: AssistantMessage(
            content=text, tool_calls=[ToolCall(id="c", name="run", arguments={"x": text})]
        ),
    }[role]()
    counter = MemoizingCounter(max_texts=max_texts)
    engine = CompactionExtension._count_tokens([message])
    assert counter([message]) == engine
    assert counter([copy.deepcopy(message)]) == engine  # again, a new message from the remembered blocks


def test_counting_texts_leaves_the_counters_identity_memo_alone():
    """A summarizer counts thousands of lines per summary; none of them may take a place among the messages."""
    counter = tokens._shared_counter()
    held = len(counter._by_identity)
    for line in range(200):
        tokens.count_text_tokens(f"line {line} of a long tool output")
    assert len(counter._by_identity) == held


def test_images_count_flat():
    image = UserMessage(content=[ImageContent(source=ImageUrlSource(url="https://example.com/x.png"))])
    assert zett_lab.count_tokens([image]) == 1_100


def test_approx_counter_is_close_but_cheap():
    text = [UserMessage(content="The quick brown fox jumps over the lazy dog. " * 200)]
    exact = zett_lab.count_tokens(text)
    approx = ApproxCounter()(text)
    assert approx == -(-len(text[0].content) // 4)
    assert 0.5 < approx / exact < 2.5


def test_any_callable_counter_is_accepted_by_replay():
    from zett_lab.replay.setting import check_limits

    check_limits(10, 5)
    with pytest.raises(zett_lab.SettingError):
        check_limits(0, 5)


def test_provisioning_works_with_an_empty_cache(tmp_path):
    """In a fresh process with an empty tiktoken cache, zett-agent's default counter works offline."""
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    script = (
        "import zett_lab, tiktoken\n"
        "path = zett_lab.provision_o200k()\n"
        "from zett_agent.extensions.compaction import CompactionExtension\n"
        "from zett_agent.messages import UserMessage\n"
        "print(path, CompactionExtension._count_tokens([UserMessage(content='hello world')]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    path, count = result.stdout.split()
    assert count == "2"
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == O200K_SHA256
    assert os.path.dirname(path) == str(tmp_path)


def test_provisioning_refuses_a_vocabulary_with_the_wrong_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens, "o200k_bytes_from_quicktok", lambda: b"AAAA 0\n")
    tokens.provision_o200k.cache_clear()
    try:
        with pytest.raises(VocabularyError, match="SHA-256"):
            tokens.provision_o200k()
        assert not any(tmp_path.iterdir())
    finally:
        tokens.provision_o200k.cache_clear()


def test_quicktok_rendering_has_tiktokens_published_hash():
    assert hashlib.sha256(tokens.o200k_bytes_from_quicktok()).hexdigest() == O200K_SHA256
