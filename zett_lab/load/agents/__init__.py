"""Importers for other agents' session logs, recognised by content (never by file name).

=================================  ==============================================================
format (``Conversation.format``)   what
=================================  ==============================================================
``claude-code-jsonl``              Claude Code session JSONL (subagents, compact boundaries)
``codex-rollout-jsonl``            OpenAI Codex CLI rollout JSONL (compacted records)
``gemini-cli-session-json``        Gemini CLI chat recording JSON
``openhands-v0-trajectory-json``   OpenHands V0 trajectory (event list; condensations)
``mini-swe-agent-traj``            mini-swe-agent ``.traj.json``
``swe-agent-traj``                 SWE-agent ``.traj`` (demonstrations marked)
``aider-chat-history-md``          aider ``.aider.chat.history.md`` (one conversation per session)
``anthropic-messages-json``        Anthropic Messages API message list / request body
=================================  ==============================================================

The shared rules (tool-call pairing, synthesized results, encrypted reasoning,
native compactions, unknown record types, truncated JSONL) are documented in
:mod:`zett_lab.load.agents._common`; each module documents its mapping.
:func:`zett_lab.measure.native.native_alignment` lines an agent's own
compactions up with zett-agent's in a replay trace; :func:`zett_lab.compare` compares their summaries.

Example::

    >>> import zett_lab
    >>> conversations = zett_lab.load_all("~/.claude/projects/my-project/")   # doctest: +SKIP
    >>> conversations[0].native_compactions[0].tokens_before                    # doctest: +SKIP
    170251
"""

# Modules register themselves on import; within this package the more specific formats come first.
from . import (
    aider,  # noqa: F401
    anthropic,  # noqa: F401
    claude_code,  # noqa: F401
    codex,  # noqa: F401
    gemini_cli,  # noqa: F401
    openhands,  # noqa: F401
    swe_agent,  # noqa: F401  (registers mini-swe-agent, then SWE-agent)
)
