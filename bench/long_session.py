"""A long coding session, generated offline: 250 user turns, 5,001 messages, ~1.55 M tokens.

What a user with a year of agent logs brings: one conversation far longer than any bundled
fixture. Each turn is a user request, nine tool steps (an assistant tool call and its
result) and a final answer: 20 messages a turn, plus the system prompt. Five of the nine
tool results are file reads, searches and test runs of ~1,100 tokens each; four are short
edit confirmations. The text is seeded pseudo-code and logs that carry the anchors the loss
metrics look for (paths, identifiers, errors, commands, numbers with units, user
constraints), so replays, summaries and metrics do the work they do on real logs.

Deterministic for a given ``turns`` and ``seed``; no network (only the tokenizer, which
zett_lab provisions offline, is used to check the size).

Run ``python bench/long_session.py OUT.json [--turns N]`` to write it as neutral JSON for
``zett-lab report OUT.json``; benchmarks import :func:`long_conversation`.
"""

from __future__ import annotations

import argparse
import random

from zett_agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage

from zett_lab import Conversation

#: Turns of the standard long session (5,001 messages).
TURNS = 250
#: The tool of each of a turn's nine steps; reads, searches and runs return long outputs.
STEP_TOOLS = (
    "read_file",
    "edit_file",
    "grep",
    "edit_file",
    "run_tests",
    "read_file",
    "edit_file",
    "run_shell",
    "edit_file",
)
LONG_TOOLS = {"read_file", "grep", "run_tests", "run_shell"}
#: Characters of a long tool output; the generated text runs at about 3.6 characters a token.
LONG_OUTPUT_CHARS = 3_950

_WORDS = (
    "cache layer index shard replica lease token budget window retry backoff queue worker request response "
    "session store snapshot cursor batch stream parser schema migration handler router client server config "
    "metric counter gauge histogram span trace event payload buffer offset partition consumer producer commit"
).split()
_ERRORS = ("ValueError", "KeyError", "TimeoutError", "ConnectionResetError", "AssertionError", "IntegrityError")
_CONSTRAINTS = (
    "Always keep the public API backwards compatible.",
    "Never write to the production database from tests.",
    "You must keep the p99 latency under 250 ms.",
    "Don't add new dependencies without asking.",
    "Always run the full test suite before you say it is done.",
)


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{rng.randrange(40)}.py"


def _code_line(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return f"def {_identifier(rng)}(self, {rng.choice(_WORDS)}: int = {rng.randrange(1000)}) -> {rng.choice(_WORDS).title()}:"
    if kind == 1:
        return f"    {_identifier(rng)} = self.{_identifier(rng)}.get({rng.choice(_WORDS)!r}, {rng.randrange(100)})"
    if kind == 2:
        return f"    if {_identifier(rng)} > {rng.randrange(10_000)}:  # {rng.choice(_WORDS)} {rng.choice(_WORDS)} after {rng.randrange(500)} ms"
    if kind == 3:
        return f'    raise {rng.choice(_ERRORS)}(f"{rng.choice(_WORDS)} {{{_identifier(rng)}}} out of range")'
    if kind == 4:
        return f"        return {_identifier(rng)}({rng.choice(_WORDS)}, timeout={rng.randrange(1, 60)})"
    return f"class {rng.choice(_WORDS).title()}{rng.choice(_WORDS).title()}({rng.choice(_WORDS).title()}Base):"


def _log_line(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return f"{_path(rng)}::test_{_identifier(rng)} PASSED [{rng.randrange(100):>3}%]"
    if kind == 1:
        return f"{_path(rng)}:{rng.randrange(1, 900)}: {rng.choice(_ERRORS)}: {rng.choice(_WORDS)} {rng.choice(_WORDS)} expired after {rng.randrange(1, 90)} s"
    if kind == 2:
        return f"INFO {rng.choice(_WORDS)}.{rng.choice(_WORDS)} processed {rng.randrange(100_000)} rows in {rng.randrange(2_000)} ms"
    return f"{_path(rng)}:{rng.randrange(1, 900)}:    {_identifier(rng)} = {_identifier(rng)}({rng.randrange(64)})"


def _long_output(rng: random.Random, tool: str, path: str) -> str:
    line = _code_line if tool == "read_file" else _log_line
    head = f"$ {tool} {path}" if tool != "run_tests" else f"$ pytest -q tests/test_{rng.choice(_WORDS)}.py -x"
    lines, size = [head], len(head)
    while size < LONG_OUTPUT_CHARS:
        text = line(rng)
        lines.append(text)
        size += len(text) + 1
    return "\n".join(lines)


def _turn(rng: random.Random, turn: int, counter: list[int]) -> list:
    path = _path(rng)
    constraint = f" {rng.choice(_CONSTRAINTS)}" if turn % 5 == 0 else ""
    messages: list = [
        UserMessage(
            content=(
                f"Turn {turn}: the {rng.choice(_WORDS)} {rng.choice(_WORDS)} in {path} fails with "
                f"{rng.choice(_ERRORS)} when {_identifier(rng)} exceeds {rng.randrange(10_000)}. Please fix it and add a test.{constraint}"
            )
        )
    ]
    for tool in STEP_TOOLS:
        counter[0] += 1
        call_id = f"call_{counter[0]:06d}"
        target = path if rng.random() < 0.6 else _path(rng)
        arguments = {"path": target} if tool != "run_shell" else {"command": f"git log --oneline -5 -- {target}"}
        messages.append(
            AssistantMessage(
                content=f"Checking {target} for the {rng.choice(_WORDS)} handling.",
                tool_calls=(ToolCall(id=call_id, name=tool, arguments=arguments),),
            )
        )
        if tool in LONG_TOOLS:
            output = _long_output(rng, tool, target)
        else:
            output = f"Edited {target}: replaced {rng.randrange(1, 30)} lines in {_identifier(rng)}()."
        messages.append(ToolMessage(tool_call_id=call_id, name=tool, content=output))
    messages.append(
        AssistantMessage(
            content=(
                f"Fixed {path}: {_identifier(rng)} now checks {_identifier(rng)} before the {rng.choice(_WORDS)} "
                f"{rng.choice(_WORDS)}; commit {rng.getrandbits(40):010x}. Tests pass in {rng.randrange(5, 90)} s."
            )
        )
    )
    return messages


def long_conversation(turns: int = TURNS, seed: int = 16, conversation_id: str | None = None) -> Conversation:
    """One coding session of ``turns`` user turns (20 messages each, plus the system prompt)."""
    rng = random.Random(seed)
    counter = [0]
    messages: list = [SystemMessage(content="You are a careful coding agent working in a Python repository.")]
    for turn in range(turns):
        messages.extend(_turn(rng, turn, counter))
    return Conversation(id=conversation_id or f"long-session-{turns}", messages=messages).validate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="where to write the neutral JSON")
    parser.add_argument("--turns", type=int, default=TURNS)
    args = parser.parse_args()
    from zett_lab.tokens import count_tokens

    conversation = long_conversation(args.turns)
    conversation.save(args.output)
    print(
        f"wrote {conversation.id}: {len(conversation.messages)} messages, {count_tokens(conversation.messages):,} tokens, to {args.output}"
    )


if __name__ == "__main__":
    main()
