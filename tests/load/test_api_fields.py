"""The fields of external APIs a conversation's commands fetched (zett_lab.load.api_fields)."""

from __future__ import annotations

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage

from zett_lab.load.api_fields import api_fields

PULL = (
    '24033 /tmp/pr.json\n{\n  "url": "https://api.github.com/repos/o/r/pulls/10727",\n  "id": 2787411851,\n'
    '  "html_url": "https://github.com/o/r/pull/10727",\n  "user": {"login": "dev", "created_at": "2025-08-31"}\n}'
)


def _fetch(command: str, result: str, call_id: str = "c1") -> list:
    call = ToolCall(id=call_id, name="execute_bash", arguments={"command": command})
    return [
        AssistantMessage(content="", tool_calls=[call]),
        ToolMessage(tool_call_id=call_id, name="execute_bash", content=result),
    ]


def test_the_keys_of_json_an_external_api_returned_are_its_fields():
    """GitHub's pull request JSON fetched by curl (nested objects too), and by ``gh api``."""
    command = (
        'curl -sSL -H "Accept: application/vnd.github.v3+json" https://api.github.com/repos/o/r/pulls/10727 '
        "-o /tmp/pr.json && wc -c /tmp/pr.json && head -n 40 /tmp/pr.json"
    )
    assert {"url", "id", "html_url", "user", "login", "created_at"} <= api_fields(_fetch(command, PULL))
    assert "html_url" in api_fields(_fetch("gh api repos/o/r/pulls/10727", PULL))


def test_a_local_server_a_file_read_or_another_call_has_no_api_fields():
    """The project's own server answers with the project's fields; JSON a file read shows, or a result of another
    call than the fetch, is no API's."""
    local = _fetch("curl -s http://localhost:8000/api/settings", '{"llm_model": "gpt-4o", "agent": "Code"}')
    assert api_fields(local) == frozenset()
    assert api_fields(_fetch("cat /tmp/pr.json", PULL)) == frozenset()
    other = [
        *_fetch("curl -s https://api.github.com/repos/o/r", "{}"),
        ToolMessage(tool_call_id="c9", name="execute_bash", content=PULL),
    ]
    assert api_fields(other) == frozenset()
