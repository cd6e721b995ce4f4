"""Anchor extraction: types, normalization, robustness, speed."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from zett_lab.load.anchors import (
    ANCHOR_TYPES,
    HUGE_PARAGRAPH,
    Anchor,
    anchor_keys,
    anchors_in_text,
    command_of,
    extract_anchors,
    is_shell_tool,
    message_anchors,
    message_keys,
    normalize,
    normalize_sentence,
)
from zett_lab.load.text import clean_text, message_text
from zett_lab.measure.lookup import TextIndex, contains_normalized


def keys(text: str, role: str = "any") -> set[tuple[str, str]]:
    return {(a.type, a.normalized) for a in anchors_in_text(text, role)}


def of_type(text: str, type_: str, role: str = "any") -> list[str]:
    return [a.normalized for a in anchors_in_text(text, role) if a.type == type_]


# --- types -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("edit src/auth/session.py now", ["src/auth/session.py"]),
        ("open ./src/auth/session.py", ["src/auth/session.py"]),
        ("cat /etc/hosts", ["/etc/hosts"]),
        ("see ~/.zshrc", ["~/.zshrc"]),
        ("the build/ directory", ["build"]),
        ("read README.md and setup.cfg.", ["README.md", "setup.cfg"]),
        ("`src/a.py`", ["src/a.py"]),
        ('"src/a.py"', ["src/a.py"]),
        ("C:\\Users\\me\\app.py", ["C:\\Users\\me\\app.py"]),
        ("and/or input/output km/h 1/2 2024/01/02", []),
        ("<span>x</span>", []),
    ],
)
def test_paths(text, expected):
    assert of_type(text, "path") == expected


def test_urls_are_normalized_and_not_paths():
    found = keys("Docs at HTTPS://Example.COM/Docs/Page?x=1. and https://example.com/")
    assert ("url", "https://example.com/Docs/Page?x=1") in found
    assert ("url", "https://example.com") in found
    assert not [k for k in found if k[0] == "path"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("call load_user() then", ["load_user"]),
        ("os.path.join", ["os.path.join"]),
        ("SessionStore and HTTPServer and getUser", ["SessionStore", "HTTPServer", "getUser"]),
        ("MAX_TOKENS and __init__", ["MAX_TOKENS", "__init__"]),
        ("session 019e1625-789d-76c0-80ab-3724b5ddb799", ["019e1625-789d-76c0-80ab-3724b5ddb799"]),
        ("plain words e.g. item(s) if(x)", []),
    ],
)
def test_identifiers(text, expected):
    assert of_type(text, "identifier") == expected


def test_shas_need_a_digit_and_a_letter():
    assert of_type("commit a1b2c3d fixed it; full 3f786850e387550fdab836ed7e6dc881de23001b", "sha") == [
        "a1b2c3d",
        "3f786850e387550fdab836ed7e6dc881de23001b",
    ]
    assert of_type("deadbeef and 1234567", "sha") == []
    assert of_type("commit A1B2C3D", "sha") == ["a1b2c3d"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("port 6543", ["port 6543"]),
        ("The port is 6543.", ["port 6543"]),
        ("PORT=6543 and Process.sleep(200)", ["port 6543", "sleep 200"]),
        ("at line 304 of app.tsx:304", ["304"]),
        ("took 250 ms", ["250ms"]),
        ("took 250ms", ["250ms"]),
        ("took 250 milliseconds", ["250ms"]),
        ("3.2 GB of RAM", ["3.2gb"]),
        ("version v0.2.1", ["0.2.1"]),
        ("Python 3.11", ["python 3.11"]),
        ("1,000 users", ["1000users"]),
        ("costs $12.50 or 50%", ["$12.50", "50%"]),
        ("only 42 and 7", []),
        ("o200k and user_id2", []),
        ("   123→code\n  456\tcode", []),
    ],
)
def test_numbers(text, expected):
    assert of_type(text, "number") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Traceback...\nKeyError: 'user_id'", ["KeyError: user_id"]),
        ("Fix KeyError: 'user_id' in ./src/auth.py", ["KeyError: user_id"]),
        ("E   AssertionError: assert 1 == 2", ["AssertionError: assert 1 == 2"]),
        ("json.decoder.JSONDecodeError: Expecting value. More text", ["json.decoder.JSONDecodeError: Expecting value"]),
        ("FAILED ./tests/x.py::test_y - AssertionError", ["FAILED tests/x.py::test_y"]),
        ("error: could not compile `app`", ["error: could not compile app"]),
        ("bash: foo: command not found", ["bash: foo: command not found"]),
        ("KeyError alone in prose", []),
    ],
)
def test_errors(text, expected):
    assert of_type(text, "error") == expected


def test_constraints_only_from_user_text_and_decisions_only_from_assistant_text():
    text = "Never push to main. You must always run the tests! We'll use SQLite for storage. ok"
    assert of_type(text, "constraint", "user") == ["never push to main", "you must always run the tests"]
    assert of_type(text, "decision", "user") == []
    assert of_type(text, "decision", "assistant") == ["we'll use sqlite for storage"]
    assert of_type(text, "constraint", "assistant") == []
    assert of_type(text, "constraint", "tool") == []


def test_curly_apostrophes_and_bullets_normalize_like_plain():
    assert of_type("- Don’t touch migrations/.", "constraint", "user") == ["don't touch migrations/"]
    assert normalize("constraint", "  * Don't touch migrations!! ") == "don't touch migrations"


# --- messages ----------------------------------------------------------------------------------


def test_shell_commands_come_from_shell_like_tool_calls_only():
    bash = ToolCall("1", "Bash", {"command": "pytest   -x tests/", "description": "run"})
    exec_ = ToolCall("2", "exec_command", {"cmd": ["git", "status"]})
    read = ToolCall("3", "read_file", {"path": "src/a.py"})
    assert is_shell_tool("run_shell_command") and is_shell_tool("bash") and not is_shell_tool("read_file")
    assert command_of(bash) == "pytest   -x tests/"
    assert command_of(exec_) == "git status"
    assert command_of(read) is None
    anchors = message_anchors(AssistantMessage(content="", tool_calls=(bash, exec_, read)))
    assert [a.normalized for a in anchors if a.type == "command"] == ["pytest -x tests/", "git status"]
    assert "src/a.py" in [a.normalized for a in anchors if a.type == "path"]


def test_extract_anchors_indexes_messages_and_roles():
    messages = [
        SystemMessage(content="Never reveal secrets in src/secret.py"),
        UserMessage(content="Never edit config.yaml; the port is 6543."),
        AssistantMessage(content="We'll use port 6543.", tool_calls=(ToolCall("c", "bash", {"command": "ls src/"}),)),
        ToolMessage(tool_call_id="c", name="bash", content="main.py\nKeyError: 'x'"),
        CompactedMessage(content="[Conversation checkpoint: ...]\nUser said: never edit config.yaml"),
    ]
    anchors = extract_anchors(messages)
    by_index = {}
    for anchor in anchors:
        by_index.setdefault(anchor.message_index, set()).add((anchor.type, anchor.normalized))
    assert ("constraint", "never edit config.yaml") in by_index[1]
    assert ("number", "port 6543") in by_index[1] and ("number", "port 6543") in by_index[2]
    assert ("decision", "we'll use port 6543") in by_index[2]
    assert ("command", "ls src/") in by_index[2]
    assert ("error", "KeyError: x") in by_index[3]
    assert ("path", "main.py") in by_index[3]
    # system prompts are not user constraints
    assert not any(t == "constraint" for t, _ in by_index.get(0, set()))
    assert extract_anchors(messages[1:], start=1) == [a for a in anchors if a.message_index >= 1]


def test_one_anchor_per_key_per_message_first_spelling_kept():
    anchors = anchors_in_text("./src/a.py then src/a.py then `src/a.py`")
    assert anchors == [Anchor("path", "./src/a.py", "src/a.py", None)]


def test_bad_content_does_not_crash():
    lone = "bad \udcff surrogate in src/x.py"
    assert "\udcff" not in clean_text(lone)
    assert of_type(lone, "path") == ["src/x.py"]
    messages = [
        UserMessage(content=[TextContent("see src/a.py"), ImageContent(ImageUrlSource("https://example.com/i.png"))]),
        ToolMessage(tool_call_id="x", name="cat", content=b"\xff\xfe binary \x00 src/b.py"),  # type: ignore[arg-type]
        ToolMessage(tool_call_id="y", name="cat", content=["raw str part src/c.py", 42]),  # type: ignore[list-item]
        AssistantMessage(
            content="", tool_calls=(ToolCall("z", "bash", {"command": b"ls \xff src/d.py", "n": [1, {"k": None}]}),)
        ),
    ]
    found = {a.normalized for a in extract_anchors(messages) if a.type == "path"}
    assert {"src/a.py", "src/b.py", "src/c.py", "src/d.py"} <= found
    for anchor in extract_anchors(messages):
        anchor.value.encode("utf-8")
        anchor.normalized.encode("utf-8")


def test_message_cache_returns_same_keys_and_notices_a_different_message():
    message = UserMessage(content="edit src/a.py")
    assert message_keys(message) == message_keys(message) == frozenset({("path", "src/a.py")})
    other = UserMessage(content="edit src/b.py")
    assert message_keys(other) == frozenset({("path", "src/b.py")})


# --- presence ----------------------------------------------------------------------------------


def test_text_index_exact_types():
    index = TextIndex("Edited `./src/a.py`. Error was KeyError: 'user_id' in load; 250 milliseconds; see lib/src/b.py")
    assert index.contains(("path", "src/a.py"))
    assert not index.contains(("path", "src/b.py"))  # lib/src/b.py is another file
    assert index.contains(("error", "KeyError: user_id"))
    assert index.contains(("number", "250ms"))
    assert not index.contains(("number", "25"))
    assert index.contains(("identifier", "load"))
    assert not index.contains(("identifier", "loa"))


def test_text_index_sentences_are_fuzzy_but_respect_negation():
    index = TextIndex("Constraints: never push directly to the main branch; run all tests before committing.")
    assert index.contains(("constraint", "never push to main branch"))
    assert not TextIndex("Push to the main branch when done.").contains(("constraint", "never push to main branch"))
    assert not TextIndex("The user likes tabs.").contains(("constraint", "never push to main branch"))


@pytest.mark.parametrize(
    ("rule", "text", "held"),
    [
        ("Do NOT modify the code.", "Never modify the code of the repository.", True),
        # its negation only has to agree: a negated clause naming the code does not hold it
        ("Do NOT modify the code.", "We did not read the code yet.", False),
        ("Do NOT write summaries.", "Do not write anything yet.", False),
        # a contraction is its word: "it's" is no content word, "isn't" is a negation
        ('- do not call it "OSS", it\'s OH or OpenHands', 'USER_CONTEXT: do not call OH "OSS"', True),
        ("Tests aren't to be skipped.", "The tests are never skipped.", True),
        ("Tests aren't to be skipped.", "The tests are skipped.", False),
    ],
)
def test_a_rule_is_held_by_a_clause_with_most_of_its_words_its_negation_deciding_only_agreement(rule, text, held):
    key = ("constraint", normalize_sentence(rule))
    assert TextIndex(text).contains(key) is held


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Never touch migrations/ — the DBA team owns them.", True),
        ("**Always** use tabs.", True),
        ("Never exceed three retries.", True),
        ("Always access the API through the client.", True),
        ("Don't have the agent push.", True),
        ("- **Without frontmatter**: Always loaded into LLM context", False),
        ("Unused import: the 'os' module is imported but never used.", False),
        ("The grid never shows more than 24 products.", False),
        ("You don't need to do this unless the user asks you to.", False),
        ("You do not have to run the tests.", False),
        ("The cache is never used, so never touch it.", True),  # one rule word tells
    ],
)
def test_a_constraint_tells_what_to_do_a_description_or_permission_is_none(text, rule):
    assert any(a.type == "constraint" for a in anchors_in_text(text, "user")) is rule


def test_contains_normalized_for_probe_answers():
    assert contains_normalized("The server listens on port 6543.", "6543")
    assert not contains_normalized("port 65431", "6543")
    assert contains_normalized("Use `SRC/Auth.py`", "src/auth.py")
    assert contains_normalized("we   chose\nredis", "We chose Redis.")


def test_all_types_are_known():
    assert set(ANCHOR_TYPES) == {
        "path",
        "url",
        "identifier",
        "sha",
        "number",
        "error",
        "command",
        "constraint",
        "decision",
    }


# --- a large conversation ---------------------------------------------------------------------


def _big_conversation(tokens: int = 150_000) -> list:
    """A synthetic ~150k-token session mixing prose, code listings, logs and tool calls."""
    messages = [SystemMessage(content="You are a coding agent.")]
    chunk = []
    for i in range(400):
        chunk.append(
            f"{i:>6}→    result = load_user_{i % 50}(user_id=row['id'])  # see src/pkg/mod_{i % 30}.py:{i}\n"
            f"{i:>6}→    if elapsed > 250 ms: raise TimeoutError(f'took {{elapsed}}')\n"
        )
    listing = "".join(chunk)
    n = 0
    total = 0
    while total < tokens * 4:
        n += 1
        user = UserMessage(
            content=f"Turn {n}: never edit migrations/{n}.sql. The port is {6000 + n}. Fix src/app_{n}.py please."
        )
        call = ToolCall(f"c{n}", "bash", {"command": f"pytest tests/test_{n}.py -x && git log -1 --format=%H"})
        assistant = AssistantMessage(content=f"We'll use SessionStore_{n}. Running tests.", tool_calls=(call,))
        tool = ToolMessage(
            tool_call_id=f"c{n}",
            name="bash",
            content=listing + f"\nFAILED tests/test_{n}.py::test_load - KeyError: 'user_{n}'\n",
        )
        messages += [user, assistant, tool]
        total += sum(len(m.content) for m in (user, assistant, tool)) + len(json.dumps(call.arguments))
    return messages


def test_extraction_on_a_150k_token_conversation_is_stable_across_the_cache():
    """Speed is measured in bench/ (report_scale.py, memory.py); here the cached second pass must give the same anchors."""
    messages = _big_conversation()
    messages = [
        m
        if not isinstance(m, ToolMessage)
        else ToolMessage(tool_call_id=m.tool_call_id, name=m.name, content=m.content + f" #{i}")
        for i, m in enumerate(messages)
    ]
    anchors = extract_anchors(messages)
    assert anchors == extract_anchors(messages)
    assert len(anchors) > 1000


def test_constraints_span_hard_wrapped_lines_but_stop_at_list_items():
    text = (
        "Hi.\nPlease don't run anything heavy on the\nshared staging DB. Thanks.\n\n- never push to main\n- always "
        "run tests"
    )
    assert of_type(text, "constraint", "user") == [
        "please don't run anything heavy on the shared staging db",
        "never push to main",
        "always run tests",
    ]


def test_text_index_finds_hard_wrapped_constraints_in_transcript_summaries():
    summary = "[user] Please don't run anything heavy on the\nshared staging DB. Thanks.\n[assistant] Ok."
    assert TextIndex(summary).contains(("constraint", "please don't run anything heavy on the shared staging db"))


# --- keys of long texts, piece by piece --------------------------------------------------------

_PIECES = [
    "edit src/auth/session.py",
    "https://example.com/a/b?x=1",
    "KeyError: 'user_id'",
    "  File x.py\nValueError: bad value here",
    "FAILED tests/test_a.py::test_load - AssertionError",
    "error: linker failed",
    "No such file or directory",
    "commit 3f9a2c1d0e",
    "port 8080",
    "1,250 ms",
    "$4.50",
    "v2.3.1",
    "You must keep the p99 latency under 250 ms.",
    "never push to main",
    "we decided to use redis; switching to postgres",
    "I'll use tabs",
    "- always run tests",
    "1. don't touch prod",
    "cache_client.get()",
    "MAX_RETRIES",
    "[tool output omitted: 1,025 tokens]",
    "x" * 700,
    "word " * 300,
    ":",
    "/",
    ".",
    "`",
    "\t",
    " ",
    "\n",
    "\n\n",
    "\n\n\n",
    "\r\n",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=30), max_size=60), st.integers(1, 12))
def test_anchor_keys_are_the_keys_of_the_whole_text(pieces, repeat):
    """Piece by piece (paragraphs, or lines of a paragraph over HUGE_PARAGRAPH) gives the whole text's keys."""
    text = "".join(pieces) * repeat
    event("huge paragraph" if any(len(p) > HUGE_PARAGRAPH for p in text.split("\n\n")) else "short paragraphs")
    assert anchor_keys(text) == keys(text)


def test_anchor_keys_of_real_transcripts_equal_the_whole_texts(fixture_conversations, agent_logs):
    """Fixture and real agent-log messages joined as transcript summaries are (one line break, or two)."""
    import zett_lab

    conversations = [*fixture_conversations, *zett_lab.load_all(agent_logs)]
    texts = [message_text(m) for c in conversations for m in c.messages]
    checked = 0
    for separator in ("\n", "\n\n"):
        for start in range(0, len(texts), 40):
            joined = separator.join(texts[start : start + 40])
            assert anchor_keys(joined) == keys(joined), (separator, start)
            checked += len(joined)
    assert checked > 2 * HUGE_PARAGRAPH


def test_a_comma_after_a_number_ends_it_unless_a_digit_follows():
    numbers = {
        a.value for a in anchors_in_text("took 5 ms, 14 doctests, 410 tests, then 1,000 rows and $12, v0.2.1, ok")
    }
    assert {"5 ms", "410 tests", "1,000 rows", "$12", "v0.2.1"} <= numbers
