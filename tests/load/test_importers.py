"""Importers for other agents' logs: real shared logs and small hand-made edge cases.

Real logs are read from ``../shared/agent-logs`` (the ``agent_logs`` fixture skips
when they are absent, except on CI). Hand-made files live in
``tests/data/importers/``; broken variants are written to ``tmp_path``.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

import zett_lab
from zett_lab.errors import InputError
from zett_lab.load import detect, readers
from zett_lab.load.agents import (
    aider,
    anthropic,
    claude_code,
    codex,
    gemini_cli,
    openhands,
    swe_agent,
)
from zett_lab.load.agents._common import AgentLogWarning, Builder
from zett_lab.measure.catalogue import default_metrics
from zett_lab.measure.native import COLUMNS, native_alignment, native_trace
from zett_lab.replay.setting import TraceSettings
from zett_lab.replay.trace import Trace

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"

AGENT_FORMATS = {
    "claude-code-jsonl",
    "codex-rollout-jsonl",
    "gemini-cli-session-json",
    "openhands-v0-trajectory-json",
    "mini-swe-agent-traj",
    "swe-agent-traj",
    "aider-chat-history-md",
    "anthropic-messages-json",
}

#: real log -> (format, conversations, messages, tool calls, native compactions), summed over the file
REAL = {
    "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl": ("claude-code-jsonl", 2, 337, 183, 1),
    "claude-code/agent-acompact-e1f845.jsonl": ("claude-code-jsonl", 1, 5, 0, 0),
    "claude-code/subagent.jsonl": ("claude-code-jsonl", 2, 47, 25, 0),
    "claude-code/tool_heavy.jsonl": ("claude-code-jsonl", 1, 17, 6, 0),
    "codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": (
        "codex-rollout-jsonl",
        1,
        176,
        105,
        0,
    ),
    "gemini-cli/session-2025-12-01T21-45-5b959dae.json": ("gemini-cli-session-json", 1, 24, 10, 0),
    "openhands/issue_10730_complete_trajectory_297_events.json": ("openhands-v0-trajectory-json", 1, 202, 74, 2),
    "swe-agent/pydicom__pydicom-1458.traj": ("swe-agent-traj", 1, 26, 12, 0),
    "swe-agent/marshmallow-code__marshmallow-1867.traj": ("swe-agent-traj", 1, 28, 13, 0),
    "mini-swe-agent/sqlfluff__sqlfluff-2419.traj.json": ("mini-swe-agent-traj", 1, 87, 43, 0),
    "mini-swe-agent/pvlib__pvlib-python-1707.traj.json": ("mini-swe-agent-traj", 1, 191, 95, 0),
    "aider/afi-core.aider.chat.history.md": ("aider-chat-history-md", 8, 91, 0, 0),
}

REAL_CC = "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
REAL_CODEX = "codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"

_READ = {reader.name: reader for reader in readers()}
_CACHE: dict[Path, list[zett_lab.Conversation]] = {}


def read(path: Path, format: str | None = None) -> list[zett_lab.Conversation]:
    """Import once per test session through the named reader (or the detected one)."""
    if path not in _CACHE:
        reader = _READ[format] if format else detect(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AgentLogWarning)
            _CACHE[path] = reader.read(path)
    return _CACHE[path]


def tool_calls(conversation) -> int:
    return sum(len(m.tool_calls) for m in conversation.messages if isinstance(m, AssistantMessage))


def check_pairing(conversation) -> None:
    """Every result answers an earlier call; calls without a result only at the very end."""
    conversation.validate()
    calls = {
        c.id: i for i, m in enumerate(conversation.messages) if isinstance(m, AssistantMessage) for c in m.tool_calls
    }
    results = [m.tool_call_id for m in conversation.messages if isinstance(m, ToolMessage)]
    assert len(results) == len(set(results)), "a call answered twice"
    assert set(results) <= set(calls)
    unanswered = set(calls) - set(results)
    if unanswered:
        last_assistant = max(i for i, m in enumerate(conversation.messages) if isinstance(m, AssistantMessage))
        assert {calls[c] for c in unanswered} == {last_assistant}
        assert all(isinstance(m, ToolMessage) for m in conversation.messages[last_assistant + 1 :])


# --- real logs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", sorted(REAL))
def test_real_log_detected_by_content(agent_logs, relative, tmp_path):
    expected = REAL[relative][0]
    source = agent_logs / relative
    renamed = tmp_path / "log.data"  # the name says nothing
    shutil.copyfile(source, renamed)
    for path in (source, renamed):
        head = path.read_bytes()[:65536]
        assert [r.name for r in readers() if r.name in AGENT_FORMATS and r.sniff(path, head)] == [expected]
        assert detect(path).name == expected


@pytest.mark.parametrize("relative", sorted(REAL))
def test_real_log_counts_and_pairing(agent_logs, relative):
    format, n_conversations, n_messages, n_calls, n_native = REAL[relative]
    path = agent_logs / relative
    conversations = read(path, format)
    assert len(conversations) == n_conversations
    assert sum(len(c.messages) for c in conversations) == n_messages
    assert sum(tool_calls(c) for c in conversations) == n_calls
    assert sum(len(c.native_compactions) for c in conversations) == n_native
    assert len({c.id for c in conversations}) == n_conversations
    for c in conversations:
        check_pairing(c)
        assert c.format == format and c.source == str(path)
        assert c.metadata["unknown_record_types"] == {}, "a real log used a record type the importer does not know"
        assert c.metadata["skipped_lines"] == 0
        assert c.metadata["messages"] == len(c.messages) and c.metadata["tool_calls"] == tool_calls(c)
        assert c.metadata["agent"]
        for index, usage in c.usage.items():
            assert isinstance(c.messages[index], AssistantMessage) and usage.input_tokens > 0
        for native in c.native_compactions:
            assert 0 <= native.span_start <= native.position <= len(c.messages)
            assert native.summary and native.summary not in [getattr(m, "content", None) for m in c.messages]


def test_claude_code_real_session(agent_logs):
    main, sub = read(agent_logs / REAL_CC, "claude-code-jsonl")
    assert main.id == "4d5611e5-241a-462a-8d15-5122611a9569"
    assert [type(m).__name__ for m in main.messages].count("UserMessage") == 3
    assert sum(1 for m in main.messages if isinstance(m, AssistantMessage) and m.reasoning) == 14
    assert len(main.usage) == 139 and main.metadata["model"] == "claude-opus-4-6"
    (native,) = main.native_compactions
    assert (native.position, native.span_start, native.tokens_before, native.metadata["trigger"]) == (
        132,
        0,
        170251,
        "auto",
    )
    assert native.summary.startswith("This session is being continued from a previous conversation")
    # the log's turn 1 ends on a tool result (no final answer recorded) before "continue"
    assert main.metadata["turn_ends_after_tool_result"] == [41]
    # parallel tool calls written as separate records merge into one assistant message
    assert max(len(m.tool_calls) for m in main.messages if isinstance(m, AssistantMessage)) > 1
    # the Task subagent embedded as agent_progress records is its own conversation
    assert sub.id == f"{main.id}/agent-a2898e3" and sub.metadata["subagent"] is True
    assert isinstance(sub.messages[0], UserMessage) and sub.metadata["model"].startswith("claude-sonnet")


def test_claude_code_compaction_call_transcript(agent_logs):
    (c,) = read(agent_logs / "claude-code/agent-acompact-e1f845.jsonl", "claude-code-jsonl")
    assert c.metadata["compaction_call"] is True and c.metadata["parent_session"].startswith("4d5611e5")
    assert isinstance(c.messages[-1], AssistantMessage) and "<summary>" in c.messages[-1].content
    assert sum(1 for m in c.messages if m.attributes.get("meta")) == 3


def test_codex_real_rollout(agent_logs):
    (c,) = read(agent_logs / REAL_CODEX, "codex-rollout-jsonl")
    assert [type(m) for m in c.messages[:4]] == [SystemMessage, SystemMessage, UserMessage, UserMessage]
    assert c.messages[0].content.startswith("You are Codex")
    assert c.metadata["encrypted_reasoning_dropped"] == 25 and c.metadata["server_tool_calls"] == 3
    assert c.metadata["model"] == "gpt-5.5" and len(c.usage) == 66
    web = [m for m in c.messages if isinstance(m, ToolMessage) and m.name == "web_search"]
    assert len(web) == 3 and all(m.attributes["synthesized"] == "server-side web search" for m in web)
    assert not any(isinstance(m, AssistantMessage) and m.reasoning for m in c.messages)  # all reasoning was encrypted


def test_gemini_real_session(agent_logs):
    (c,) = read(agent_logs / "gemini-cli/session-2025-12-01T21-45-5b959dae.json", "gemini-cli-session-json")
    assert c.id == "5b959dae-8655-4cd1-b10f-720b8c336ea2"
    assert sum(1 for m in c.messages if isinstance(m, AssistantMessage) and m.reasoning) == 10
    assert len(c.usage) == 11 and c.metadata["model"] == "gemini-3-pro-image-preview"


def test_openhands_real_condensations(agent_logs):
    (c,) = read(
        agent_logs / "openhands/issue_10730_complete_trajectory_297_events.json", "openhands-v0-trajectory-json"
    )
    assert isinstance(c.messages[0], SystemMessage) and c.metadata["model"] == "litellm_proxy/gpt-5-2025-08-07"
    first, second = c.native_compactions
    assert (first.position, first.span_start, first.metadata["span_end"]) == (110, 3, 63)
    assert (second.position, second.span_start, second.metadata["span_end"]) == (163, 3, 114)
    assert second.metadata["forgotten_span_start"] == 63 and first.tokens_before == 101001
    assert first.summary.startswith("USER_CONTEXT:")
    recalls = [m for m in c.messages if m.attributes.get("injected") == "recall"]
    assert recalls and all(m.attributes["approximate"] for m in recalls)


def test_swe_agent_real_demonstration(agent_logs):
    (c,) = read(agent_logs / "swe-agent/pydicom__pydicom-1458.traj", "swe-agent-traj")
    assert c.metadata["demonstration_messages"] == [1]
    assert c.messages[1].attributes == {"demonstration": True} and "DEMONSTRATION" in c.messages[1].content
    assert all(
        call.id.startswith("swe-agent-call-")
        for m in c.messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls
    )
    assert c.messages[-1].tool_calls[0].name == "submit"  # dangling at the very end: allowed
    (fc,) = read(agent_logs / "swe-agent/marshmallow-code__marshmallow-1867.traj", "swe-agent-traj")
    assert fc.metadata["renamed_call_ids"] == 4  # the demo reuses call ids; each call stays paired
    assert fc.metadata["actions"] == "tool_calls"


def test_mini_swe_agent_real(agent_logs):
    (c,) = read(agent_logs / "mini-swe-agent/sqlfluff__sqlfluff-2419.traj.json", "mini-swe-agent-traj")
    assert c.id == "sqlfluff__sqlfluff-2419" and c.metadata["exit_status"] == "Submitted"
    assert len(c.usage) == 43 and c.metadata["model"] == "deepseek/deepseek-chat"
    assert sum(1 for m in c.messages if isinstance(m, UserMessage)) == 1  # one task, then tool steps


def test_aider_real_sessions(agent_logs):
    conversations = read(agent_logs / "aider/afi-core.aider.chat.history.md", "aider-chat-history-md")
    assert [c.id for c in conversations][:2] == ["aider-2025-07-15T11:38:37", "aider-2025-07-15T14:53:34"]
    assert {c.metadata["model"] for c in conversations} == {"gpt-4o", "gpt-4.1"}
    assert sum(c.metadata.get("commands_dropped", 0) for c in conversations) == 12
    assert all(isinstance(c.messages[0], UserMessage) for c in conversations)


def test_catch_all_neutral_reader_is_asked_last():
    assert [r.name for r in readers()][-1] == "neutral-json"


def test_load_all_shared_folder(agent_logs):
    """The whole shared folder imports through the registry (SOURCES.md is skipped as unknown)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        conversations = zett_lab.load_all(agent_logs)
    formats = {c.format for c in conversations}
    assert formats == AGENT_FORMATS - {"anthropic-messages-json"}
    assert len(conversations) == sum(v[1] for v in REAL.values())


# --- hand-made edge cases ----------------------------------------------------------------------


def test_claude_code_edge_cases():
    with pytest.warns(AgentLogWarning, match=r"claude_code_edge\.jsonl: unknown record types .*future-record"):
        main, sub = claude_code.read(DATA / "claude_code_edge.jsonl")
    kinds = [type(m).__name__ for m in main.messages]
    assert len(main.messages) == 17 and kinds.count("ToolMessage") == 5
    first = main.messages[1]
    # three records of one response (thinking, text, two tool_use with a result in between) -> one message
    assert first.reasoning == "I should read the parser first." and first.content == "Let me look."
    assert [c.id for c in first.tool_calls] == ["toolu_1", "toolu_2"]
    assert main.messages[3].success is False  # is_error
    # a result written after the interruption notice replaces the synthesized one
    assert main.messages[5].content == "The file src/parse.py has been updated." and main.metadata["late_results"] == 1
    # a call whose result the log lost: a failed, marked result before the next user message
    lost = main.messages[9]
    assert isinstance(lost, ToolMessage) and not lost.success and lost.attributes["synthesized"]
    assert main.metadata["synthesized_results"] == 1 and main.metadata["encrypted_reasoning_dropped"] == 1
    assert main.messages[11].attributes == {"meta": True}
    (native,) = main.native_compactions
    assert (native.position, native.tokens_before, native.metadata["trigger"]) == (12, 1234, "auto")
    assert "x.strip()" in native.summary and not any("x.strip() was applied" in str(m.content) for m in main.messages)
    # rewind: the abandoned branch (prompt + answer) is dropped
    assert (
        main.messages[15].content == "write a short changelog entry" and main.metadata["abandoned_branch_messages"] == 2
    )
    assert main.metadata["api_error_messages_dropped"] == 1 and main.metadata["titles"] == ["Fix the parser bug"]
    usage = main.usage[16]
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (2005, 2000, 9)
    # agent_progress subagent: prompt from the record, duplicate progress records deduplicated
    assert sub.id.endswith("/agent-sub1") and [type(m).__name__ for m in sub.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
    ]
    assert sub.messages[0].content == "run the tests"


def test_claude_code_file_with_two_sessions(agent_logs, tmp_path):
    """Two sessions in one file (the second starts a new root) are two conversations, each with its subagents."""
    both = tmp_path / "both.jsonl"
    both.write_bytes(
        (agent_logs / "claude-code/tool_heavy.jsonl").read_bytes()
        + (agent_logs / "claude-code/subagent.jsonl").read_bytes()
    )
    conversations = claude_code.read(both)
    assert [c.id for c in conversations] == [
        "d6e0bada-1959-4eec-a9d2-0bfade768d8f",
        "491e126e-1e71-469c-ade2-fcc8af567c74",
        "491e126e-1e71-469c-ade2-fcc8af567c74/agent-afb92ff",
    ]
    assert [len(c.messages) for c in conversations] == [17, 32, 15]


def test_claude_code_unflagged_continuation_summary(tmp_path):
    """Older Claude Code wrote the post-compaction summary without a boundary or flag."""
    lines = (DATA / "claude_code_edge.jsonl").read_text().splitlines()
    kept = [line for line in lines if '"compact_boundary"' not in line]
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(line.replace('"isCompactSummary": true, ', "") for line in kept) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        main, _ = claude_code.read(old)
    (native,) = main.native_compactions
    assert (
        native.position == 12
        and native.tokens_before is None
        and native.summary.startswith("This session is being continued")
    )


def test_gemini_list_of_sessions(tmp_path):
    import json

    session = json.loads((DATA / "gemini_edge.json").read_text())
    other = dict(session, sessionId="gem-2")
    many = tmp_path / "sessions.json"
    many.write_text(json.dumps([session, other]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        assert [c.id for c in gemini_cli.read(many)] == ["gem-1", "gem-2"]


def test_claude_code_sidechain_starting_mid_conversation():
    (c,) = claude_code.read(DATA / "claude_code_sidechain.jsonl")
    assert c.id.endswith("/agent-feed01") and c.metadata["subagent"]
    assert c.messages[0].attributes == {"synthesized": "placeholder"} and c.metadata["synthesized_messages"] == 1
    check_pairing(c)


def test_codex_edge_cases():
    with pytest.warns(AgentLogWarning, match=r"future_record .*response_item:future_item"):
        one, two = codex.read(DATA / "codex_edge.jsonl")
    assert (one.id, two.id) == ("sess-one", "sess-two") and two.metadata["model"] == "gpt-5.5-mini"
    assert [type(m) for m in one.messages[:2]] == [SystemMessage, SystemMessage]
    assert one.messages[2].attributes == {"injected": True}
    step = one.messages[4]
    assert step.reasoning.startswith("**Finding the helper**") and step.content == "Searching for the helper."
    assert one.metadata["encrypted_reasoning_dropped"] == 2
    assert [c.name for c in one.messages[6].tool_calls] == ["apply_patch", "web_search"]
    assert one.messages[6].tool_calls[1].id == "codex-call-1"
    (native,) = one.native_compactions
    assert native.position == 9 and native.tokens_before == 5420 and native.summary.startswith("Summary: renamed")
    assert one.messages[10].attributes["synthesized"] and one.metadata["synthesized_results"] == 1
    assert one.usage[4].reasoning_tokens == 30 and one.usage[6].cache_read_tokens == 4900
    check_pairing(one)


def test_codex_legacy_rollout():
    (c,) = codex.read(DATA / "codex_legacy.jsonl")
    assert c.id == "legacy-1" and c.messages[1].tool_calls[0].name == "local_shell"
    assert c.messages[1].reasoning == "Use ls."


def test_gemini_edge_cases():
    with pytest.warns(AgentLogWarning, match="hologram"):
        (c,) = gemini_cli.read(DATA / "gemini_edge.json")
    assert c.messages[1].reasoning == "**Reading the file**\nThe user wants notes.txt."
    assert c.messages[2].content == "buy milk"
    cancelled = c.messages[3]
    assert cancelled.tool_call_id == "shell-2" and not cancelled.success and cancelled.attributes["synthesized"]
    assert c.metadata["ui_messages_skipped"] == 2
    (native,) = c.native_compactions
    assert native.summary == "" and native.metadata["summary_missing"] is True
    assert c.usage[1].output_tokens == 35 and c.usage[1].reasoning_tokens == 15


def test_openhands_edge_cases():
    with pytest.warns(AgentLogWarning, match="action:teleport"):
        (c,) = openhands.read(DATA / "openhands_edge.json")
    assert isinstance(c.messages[1].content, list)  # image URL kept
    assert c.messages[2].content.startswith("<EXTRA_INFO>") and "Use python3." in c.messages[2].content
    both = c.messages[3]
    assert [t.id for t in both.tool_calls] == ["c1", "c2"] and both.content == "Looking around."
    assert both.reasoning == "Two things to check."
    assert c.messages[4].content.endswith("[The command completed with exit code 0.]")
    assert c.messages[7].success is False and c.messages[9].success is False
    (native,) = c.native_compactions
    assert (native.position, native.span_start, native.metadata["span_end"], native.tokens_before) == (8, 3, 6, 1500)
    assert c.usage[6].cache_read_tokens == 1000


def test_swe_agent_text_actions_become_tool_calls():
    (c,) = swe_agent.read_swe_agent(DATA / "swe_agent_text.traj")
    assert c.metadata["demonstration_messages"] == [1]
    names = [call.name for m in c.messages if isinstance(m, AssistantMessage) for call in m.tool_calls]
    assert names == ["open", "bash", "submit"]  # documented commands keep their name, others are bash
    assert c.messages[3].content == "Let me open the file." and c.messages[3].tool_calls[0].arguments == {
        "command": "open src/a.py"
    }
    assert isinstance(c.messages[6], UserMessage)  # format-error feedback stays a user message
    (plain,) = swe_agent.read_swe_agent(DATA / "swe_agent_text.traj", text_actions="messages")
    assert tool_calls(plain) == 0 and sum(isinstance(m, UserMessage) for m in plain.messages) == 5
    with pytest.raises(ValueError):
        swe_agent.read_swe_agent(DATA / "swe_agent_text.traj", text_actions="guess")


def test_swe_agent_function_calling_demonstrations():
    (c,) = swe_agent.read_swe_agent(DATA / "swe_agent_fc.traj")
    assert c.metadata["demonstration_messages"] == [1, 2, 3]
    assert all(c.messages[i].attributes["demonstration"] for i in (1, 2, 3))
    assert (
        c.messages[5].reasoning == "Start by listing." and c.messages[0].content == "You are an autonomous programmer."
    )
    assert c.metadata["model"] == "claude-sonnet-4"


def test_mini_swe_agent_text_format():
    (c,) = swe_agent.read_mini_swe_agent(DATA / "mini_swe_text.traj.json")
    assert c.id == "demo__a-1" and c.metadata["exit_status"] == "Submitted"
    assert c.messages[2].content == "THOUGHT: look first." and c.messages[2].tool_calls[0].arguments == {
        "command": "ls -la"
    }
    assert isinstance(c.messages[5], UserMessage)  # two actions: format error, feedback stays a user message
    assert c.messages[-1].tool_call_id == "mini-swe-agent-call-2"


def test_aider_sessions_commands_and_clear():
    conversations = aider.read(DATA / "aider_sessions.md")
    assert [c.id for c in conversations] == [
        "aider-2025-07-01T09:00:00",
        "aider-2025-07-01T09:00:00#2",
        "aider-2025-07-02T08:00:00",
    ]
    first, after_clear, third = conversations
    assert first.messages[0].content == "add a --verbose flag to app.py"
    assert first.messages[2].attributes == {"aider_output": True} and "Applied edit" in first.messages[2].content
    assert "Tokens:" not in first.messages[2].content
    assert first.messages[4].content == "why argparse?"  # /ask sends its text
    assert first.metadata["commands_dropped"] == 2  # /add and /clear
    assert after_clear.messages[0].content == "now write tests\nfor the flag"
    assert third.metadata["commands_dropped"] == 1 and third.metadata["model"] == "gpt-4.1"
    assert all(c.metadata["lossy"] for c in conversations)


def test_anthropic_request_body():
    with pytest.warns(AgentLogWarning, match="hologram"):
        (c,) = anthropic.read(DATA / "anthropic_request.json")
    assert c.messages[0].content == "You are a careful coding assistant.\n\nAnswer briefly."
    assert len(c.messages[1].content) == 2  # text + image
    assert c.messages[2].reasoning == "I need to read the file." and c.messages[2].tool_calls[0].id == "toolu_r1"
    assert c.messages[3].content == "port = 8080" and c.messages[4].content == "Also check the docs online."
    assert c.messages[5].tool_calls[0].name == "web_search" and c.messages[6].tool_call_id == "srvtoolu_1"
    assert c.messages[7].content == "The port is 8080, which matches the docs." and c.usage[7].input_tokens == 1250
    assert c.metadata["encrypted_reasoning_dropped"] == 1 and c.metadata["tools"] == ["read_file"]
    assert c.messages[-1].tool_calls and c.metadata["unknown_record_types"] == {"hologram": 1}
    (plain,) = anthropic.read(DATA / "anthropic_list.json")
    assert [type(m).__name__ for m in plain.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("claude_code_edge.jsonl", "claude-code-jsonl"),
        ("claude_code_sidechain.jsonl", "claude-code-jsonl"),
        ("codex_edge.jsonl", "codex-rollout-jsonl"),
        ("codex_legacy.jsonl", "codex-rollout-jsonl"),
        ("gemini_edge.json", "gemini-cli-session-json"),
        ("openhands_edge.json", "openhands-v0-trajectory-json"),
        ("swe_agent_text.traj", "swe-agent-traj"),
        ("swe_agent_fc.traj", "swe-agent-traj"),
        ("mini_swe_text.traj.json", "mini-swe-agent-traj"),
        ("aider_sessions.md", "aider-chat-history-md"),
        ("anthropic_request.json", "anthropic-messages-json"),
        ("anthropic_list.json", "anthropic-messages-json"),
    ],
)
def test_hand_made_detected_by_content(name, expected, tmp_path):
    renamed = tmp_path / "export.txt"
    shutil.copyfile(DATA / name, renamed)
    assert detect(renamed).name == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        assert all(c.format == expected for c in zett_lab.load_all(renamed))


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, reader", [("claude_code_edge.jsonl", claude_code.read), ("codex_edge.jsonl", codex.read)]
)
def test_truncated_last_line_is_tolerated(name, reader, tmp_path):
    text = (DATA / name).read_text()
    lines = text.count("\n")
    broken = tmp_path / name
    broken.write_text(text + '{"type": "user", "message": {"ro')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conversations = reader(broken)
    expected = f"{broken}: line {lines + 1}, column 30: last line is not valid JSON (Unterminated string starting)"
    assert any(w.category is AgentLogWarning and str(w.message).startswith(expected) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        intact = reader(DATA / name)
    assert [len(c.messages) for c in conversations] == [len(c.messages) for c in intact]
    assert all(c.metadata["skipped_lines"] == 1 for c in conversations)


@pytest.mark.parametrize("name", ["claude_code_edge.jsonl", "codex_edge.jsonl"])
def test_bad_line_in_the_middle_names_file_and_line(name, tmp_path):
    lines = (DATA / name).read_text().splitlines()
    lines.insert(4, "this is not json")
    broken = tmp_path / name
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        zett_lab.load_all(broken)
    assert (
        info.value.path == str(broken)
        and info.value.where == "line 5, column 1"
        and "not valid JSON" in info.value.problem
    )


def test_broken_json_document_names_line_and_column(tmp_path):
    broken = tmp_path / "session.json"
    broken.write_text((DATA / "gemini_edge.json").read_text().replace('"type": "gemini"', '"type": "gemini" "x"', 1))
    with pytest.raises(InputError, match=r"session\.json: line \d+, column \d+: not valid JSON"):
        gemini_cli.read(broken)


def test_unknown_format_lists_known_formats():
    with pytest.raises(InputError) as info:
        zett_lab.load(DATA / "unknown_format.txt")
    assert "unknown format" in info.value.problem and info.value.path == str(DATA / "unknown_format.txt")
    for name in AGENT_FORMATS:
        assert name in info.value.problem


def test_recognised_log_without_conversation(tmp_path):
    empty = tmp_path / "only-snapshots.jsonl"
    empty.write_text((DATA / "claude_code_edge.jsonl").read_text().splitlines()[1] + "\n")
    assert detect(empty).name == "claude-code-jsonl"
    with pytest.raises(InputError, match="holds no conversation"):
        claude_code.read(empty)


def test_structural_errors_name_the_place(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[{"role": "user", "content": "hi"}, {"role": "robot", "content": [{"type": "tool_use", "id": "t", "name": '
        '"x", "input": {}}]}]'
    )
    with pytest.raises(InputError, match=r"message 1, field 'role': unknown role 'robot'"):
        anthropic.read(bad)
    traj = tmp_path / "t.traj"
    traj.write_text(
        '{"history": [{"role": "user", "content": "x", "agent": "main"}, {"role": "tool", "content": "y", "agent": '
        '"main"}], "trajectory": []}'
    )
    with pytest.raises(InputError, match=r"history\[1\], field 'tool_call_ids'"):
        swe_agent.read_swe_agent(traj)


def test_builder_pairing_rules():
    b = Builder("demo")
    b.assistant("opens first")  # the dialogue must open with a user message: a marked placeholder
    assert b.messages[0].attributes == {"synthesized": "placeholder"}
    from zett_agent.messages import ToolCall

    b.assistant("", tool_calls=[ToolCall(id="x", name="t")], key="r1")
    b.tool_result("x", "ok")
    b.assistant("", tool_calls=[ToolCall(id="y", name="t")], key="r1")  # same response: merged
    assert [c.id for c in b.messages[-2].tool_calls] == ["x", "y"]
    assert b.tool_result("nope", "?") is None and b.counts["orphan_results_dropped"] == 1
    b.user("next")  # y lost its result
    assert b.messages[-2].attributes["synthesized"] and b.counts["synthesized_results"] == 1
    b.assistant("", tool_calls=[ToolCall(id="x", name="t")])  # a reused id is renamed consistently
    assert b.tool_result("x", "again") is not None and b.counts["renamed_call_ids"] == 1
    conversation = b.build("demo", Path("demo"), "memory")
    assert conversation.metadata["synthesized_messages"] == 1


# --- native compactions vs a replay ------------------------------------------------------------


def test_native_trace_is_measurable():
    from zett_lab.measure import measure

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        (c,) = openhands.read(DATA / "openhands_edge.json")
    trace = native_trace(c)
    row = trace.compactions.iloc[0]
    assert (row["span_start"], row["span_end"], row["n_recorded"], bool(row["applied"])) == (3, 6, 8, True)
    assert row["summarizer"] == "native:openhands"
    losses = measure(trace)
    assert len(losses.compactions) == 1 and losses.compactions["status"].iloc[0] == "applied"


def test_native_alignment_without_and_with_a_trace():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AgentLogWarning)
        main, _ = claude_code.read(DATA / "claude_code_edge.jsonl")
    alone = native_alignment(conversation=main)
    assert list(alone.columns) == list(COLUMNS) and len(alone) == 1
    row = alone.iloc[0]
    assert (row["native_position"], row["native_cut"], row["native_tokens_before"]) == (12, 12, 1234)
    assert row["native_summary_tokens"] > 0 and pd.isna(row["zett_compaction_id"])
    assert row["native_estimate_before"] == zett_lab.count_tokens(main.messages[:12])
    # a hand-built trace in the trace schema: the applied attempt nearest the native position wins
    rows = [
        {"compaction_id": 0, "conversation_id": main.id, "step": 3, "span_start": 0, "span_end": 4, "n_recorded": 6,
         "summary_tokens": 50, "applied": True, "summary_text": "fix src/parse.py"},
        {"compaction_id": 1, "conversation_id": main.id, "step": 5, "span_start": 0, "span_end": 10, "n_recorded": 13,
         "summary_tokens": 60, "applied": True, "summary_text": "fix src/parse.py; x.strip()"},
        {"compaction_id": 2, "conversation_id": main.id, "step": 6, "span_start": 0, "span_end": 11, "n_recorded": 12,
         "summary_tokens": 999, "applied": False, "summary_text": "too long"},
    ]  # fmt: skip
    steps = [
        {"step": s, "estimate": 1000 + s, "context_tokens_after": 900, "over_budget_after": False} for s in range(8)
    ]
    trace = Trace.from_rows(
        main, steps, rows, TraceSettings.from_record({"max_tokens": 1000, "keep_recent_tokens": 100}), []
    )
    table = native_alignment(trace, metrics=default_metrics("compaction"))
    row = table.iloc[0]
    assert (row["zett_compaction_id"], row["zett_position"], row["position_offset"], row["cut_offset"]) == (
        1,
        13,
        1,
        -2,
    )
    assert row["zett_estimate"] == 1005 and row["zett_summary_tokens"] == 60
    assert {"native_anchor_retention", "zett_anchor_retention"} <= set(table.columns)
    assert table["native_position"].dtype == "Int64"


def test_native_alignment_on_a_real_replay(agent_logs):
    from zett_lab.replay import replay

    (c,) = read(
        agent_logs / "openhands/issue_10730_complete_trajectory_297_events.json", "openhands-v0-trajectory-json"
    )
    trace = replay(c, max_tokens=80_000, keep_recent_tokens=10_000)
    table = native_alignment(trace)
    assert len(table) == 2 and table["zett_compaction_id"].notna().all()
    assert (table["native_compression_ratio"] > 0.9).all()
    assert table["zett_position"].is_monotonic_increasing
