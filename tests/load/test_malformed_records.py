"""Malformed records are one error naming the file, line and field; repairs real logs need are warned about.

Every log here is a small hand-made Claude Code session written to ``tmp_path``.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zett_lab
from zett_lab.errors import InputError, SettingError
from zett_lab.load.agents import claude_code
from zett_lab.load.agents._common import AgentLogWarning
from zett_lab.show.arguments import parse_tokens
from zett_lab.show.cli import main
from zett_lab.summarizers.cache import CacheError, SummaryCache

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"


def _record(kind: str, uuid: str, parent: str | None, content: Any, **message: Any) -> dict[str, Any]:
    body = {"role": kind, "content": content, **message}
    return {"type": kind, "sessionId": "s1", "uuid": uuid, "parentUuid": parent, "message": body}


def _session() -> list[dict[str, Any]]:
    """A prompt, a tool call with its result, and an answer: nothing in it needs repair."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}
    return [
        _record("user", "u1", None, "read a.py"),
        _record("assistant", "a1", "u1", [{"type": "text", "text": "Reading."}, call], id="msg_1"),
        _record("user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}]),
        _record("assistant", "a2", "r1", [{"type": "text", "text": "a.py sets x."}], id="msg_2"),
    ]


def _write(tmp_path: Path, records: list[dict[str, Any]], name: str = "session.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    "line, block, field, value, expected",
    [
        (2, 0, "text", None, "message.content[0].text: must be text, not null"),
        (2, 1, "input", "not-json{", "message.content[1].input: must be an object (the tool's arguments), not text"),
        (2, 1, "input", 5, "message.content[1].input: must be an object (the tool's arguments), not a number"),
        (2, 1, "name", 7, "message.content[1].name: must be text (the tool's name), not a number"),
        (3, 0, "tool_use_id", 5, "message.content[0].tool_use_id: must be text (the call's id), not a number"),
        (3, 0, "content", 5, "message.content[0].content: must be text or a list, not a number"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_error_naming_file_line_and_field(
    tmp_path, line, block, field, value, expected
):
    records = _session()
    records[line - 1]["message"]["content"][block][field] = value
    path = _write(tmp_path, records)
    with pytest.raises(InputError) as error:
        claude_code.read(path)
    assert str(error.value) == f"{path}: line {line}, {expected}"


def test_the_command_line_exits_2_for_a_malformed_record(tmp_path, capsys):
    records = _session()
    records[1]["message"]["content"][0]["text"] = None
    path = _write(tmp_path, records)
    assert main(["import", str(path), "-o", str(tmp_path / "out.json")]) == 2
    assert f"{path}: line 2, message.content[0].text: must be text, not null" in capsys.readouterr().err


def test_an_orphan_result_and_a_lost_result_are_repaired_and_said_once_per_file(tmp_path):
    records = _session()
    records[2]["message"]["content"][0]["tool_use_id"] = "toolu_unknown"  # the call's result is lost; this one orphaned
    path = _write(tmp_path, records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (conversation,) = claude_code.read(path)
    said = [str(w.message) for w in caught if w.category is AgentLogWarning]
    assert said == [
        f"{path}: repaired what the log lost: 1 missing tool result(s) made up as failed results (call interrupted "
        "or result lost) (synthesized_results); 1 tool result(s) with no matching call dropped "
        "(orphan_results_dropped); counts are in each conversation's metadata"
    ]
    assert conversation.metadata["synthesized_results"] == conversation.metadata["orphan_results_dropped"] == 1


def test_a_log_needing_no_repair_loads_without_a_warning(tmp_path):
    path = _write(tmp_path, _session())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (conversation,) = claude_code.read(path)
    assert [type(m).__name__ for m in conversation.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]


@pytest.mark.parametrize("name", ["codex_edge.jsonl", "gemini_edge.json", "claude_code_sidechain.jsonl"])
def test_every_agent_reader_says_what_it_repaired(name):
    with pytest.warns(AgentLogWarning, match=rf"{name}: repaired what the log lost: 1 "):
        zett_lab.load_all(DATA / name)


# --- any field of another JSON type: the same conversation, a warning, or one error naming the line -------------

_OTHER_VALUES = [None, True, 5, 2.5, "x", [], {}, ["x"], {"x": 1}]


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path inside a JSON record, except inside a tool's arguments (any JSON is valid there)."""
    if at[-1:] == ("input",):
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in [(*at, k), *_places(v, (*at, k))]]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in [(*at, i), *_places(v, (*at, i))]]
    return []


def _messages(path: Path) -> list[Any]:
    return [m for c in claude_code.read(path) for m in c.messages]


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_field_replaced_by_another_json_type_is_never_changed_silently(tmp_path, data):
    records = _session()
    original = _messages(_write(tmp_path, records, "original.jsonl"))
    line = data.draw(st.integers(1, len(records)))
    place = data.draw(st.sampled_from(_places(records[line - 1])))
    broken = copy.deepcopy(records)
    parent = broken[line - 1]
    for key in place[:-1]:
        parent = parent[key]
    # content may be text or a list of blocks: either is another valid record, not a wrong type
    others = [v for v in _OTHER_VALUES if type(v) is not type(parent[place[-1]])]
    value = data.draw(
        st.sampled_from([v for v in others if not (place[-1] == "content" and isinstance(v, list | str))])
    )
    parent[place[-1]] = value
    path = _write(tmp_path, broken, "broken.jsonl")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            messages = _messages(path)
        except InputError as error:
            assert str(error).startswith(f"{path}: line {line}")
            return
    assert messages == original or any(w.category is AgentLogWarning for w in caught), (line, place, value)


def test_anthropic_thinking_that_is_not_text_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "messages.json"
    thinking = {"type": "thinking", "thinking": 5}
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [thinking]}]))
    with pytest.raises(InputError) as error:
        zett_lab.load_all(path)
    assert str(error.value) == f"{path}: message 1, content[0].thinking: must be text"


# --- neutral JSON -----------------------------------------------------------------------------------------------


def _neutral(tmp_path: Path, messages: list[Any]) -> Path:
    path = tmp_path / "neutral.json"
    path.write_text(json.dumps({"id": "n", "messages": messages}))
    return path


def test_a_neutral_text_part_that_is_not_text_is_an_error_like_content_that_is_not(tmp_path):
    path = _neutral(tmp_path, [{"role": "user", "content": [{"type": "text", "text": 5}]}])
    with pytest.raises(InputError) as error:
        zett_lab.load_all(path)
    assert str(error.value) == f"{path}: message 0, content part 0: a text part needs 'text' as a string"


def test_neutral_tool_calls_given_as_an_object_are_told_to_be_a_list(tmp_path):
    call = {"id": "c1", "function": {"name": "f", "arguments": "{}"}}
    path = _neutral(tmp_path, [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": {"c1": call}}])
    with pytest.raises(InputError) as error:
        zett_lab.load_all(path)
    assert str(error.value) == f"{path}: message 1, field 'tool_calls': must be a list of tool calls"


def test_a_neutral_tool_name_that_is_not_text_is_an_error(tmp_path):
    call = {"id": "c1", "function": {"name": 7, "arguments": "{}"}}
    path = _neutral(tmp_path, [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}])
    with pytest.raises(InputError, match=r"message 1, tool_calls\[0\]: a tool call needs function.name \(a string\)"):
        zett_lab.load_all(path)


# --- messages that said something untrue ------------------------------------------------------------------------


def test_a_negative_token_count_is_told_to_be_positive():
    with pytest.raises(SettingError) as error:
        parse_tokens("-5", "--max-tokens")
    assert str(error.value) == "--max-tokens: must be a positive number of tokens, got '-5'"


def test_a_file_holding_only_null_is_said_to_be_json_but_not_data(tmp_path):
    path = tmp_path / "null.json"
    path.write_text("null\n")
    with pytest.raises(InputError) as error:
        zett_lab.load_all(path)
    assert str(error.value).endswith(
        "(not recorded data: the file holds only the JSON value null; recorded data is an object or a list)"
    )


def test_a_truncated_json_file_names_line_and_column(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"id": "x", "messages": [{"role": "user", "content": "a"},\n{"role": "user", "content": "b\x01')
    with pytest.raises(InputError) as error:
        zett_lab.load_all(path)
    assert str(error.value) == f"{path}: line 2, column 31: not valid JSON (Invalid control character)"


def test_a_cache_of_another_zett_lab_version_says_so_and_what_to_do(tmp_path):
    path = tmp_path / "cache.sqlite"
    SummaryCache(path=path)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '999'")
    with pytest.raises(CacheError) as error:
        SummaryCache(path=path)
    assert str(error.value) == (
        f"{path}: summary cache written by another version of zett_lab (format '999', version '999'; this one "
        "reads 'zett-lab-summary-cache' version 1); it was left untouched (to use it, upgrade zett-lab to the "
        "version that wrote it). Point the cache elsewhere (SummaryCache(path=...) or ZETT_LAB_CACHE)."
    )
