"""The fields of the external APIs a conversation's commands fetched: that API's vocabulary, not the project's.

A command that fetches a URL from another host (``curl -H "Accept: application/vnd.github.v3+json"
https://api.github.com/repos/o/r/pulls/1``, ``wget``, HTTPie's ``http``, ``gh api``) gets back the API's JSON,
and the keys of its objects (``html_url``, ``created_at``, ``node_id``) are names that API gives every client:
the agent reads them from its knowledge of the API (``jq '.html_url'``) as it writes a standard library's names,
whatever the compacted span printed. A local server's (``localhost``, ``127.0.0.1``) fields are the project's
own API, not vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from zett_agent.messages import AnyMessage, AssistantMessage, ToolMessage

from .text import argument_strings, message_text

#: A command fetching a URL: curl, wget, HTTPie (``http``, ``https``), xh with an http(s) URL, or ``gh api``.
_FETCH = re.compile(r"\b(?:curl|wget|https?|xh)\b[^\n|;&]*?\bhttps?://(?P<host>[^/\s\"':]+)|\bgh\s+api\b")
#: Hosts of a server on the agent's own machine: the project's API, not an external one.
_LOCAL = re.compile(r"^(?:localhost|127\.\d+\.\d+\.\d+|0\.0\.0\.0|\[?::1\]?)$", re.I)
#: A key of a JSON object: a quoted name followed by a colon.
_JSON_KEY = re.compile(r"\"([A-Za-z_][A-Za-z0-9_]*)\"\s*:")


def _fetches_external(arguments: object) -> bool:
    """Whether a tool call's arguments run a command fetching a URL of another host."""
    for text in argument_strings(arguments):
        for match in _FETCH.finditer(text):
            host = match.group("host")
            if host is None or not _LOCAL.match(host):
                return True
    return False


def api_fields(messages: Sequence[AnyMessage]) -> frozenset[str]:
    """The keys of the JSON objects tool results returned for commands fetching an external URL (as written,
    case kept: ``html_url``)."""
    fetching = {
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls or ()
        if _fetches_external(call.arguments)
    }
    return frozenset(
        key
        for message in messages
        if isinstance(message, ToolMessage) and message.tool_call_id in fetching
        for key in _JSON_KEY.findall(message_text(message))
    )
