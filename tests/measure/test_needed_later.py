""" "Needed later": the agent could have had the item from nowhere but the compacted span.

One test per cause of a false "needed" found on unseen logs: the kept tail shows it in another
spelling, a message between the compaction and the use shows it again (a re-read), the system
prompt or the harness (aider's chat files) shows it, it is vocabulary of a language, its
standard library or a framework, or it is a number without its unit. Each has a control where
the item really was needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zett_agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage

import zett_lab
from tests.helpers import span_trace
from zett_lab import Conversation, InputError
from zett_lab.load.anchor_forms import shows
from zett_lab.load.conversation import HarnessContext
from zett_lab.load.vocabulary import is_generic
from zett_lab.measure import measure


def _needed(span: list, tail: list, later: list, *, system: str | None = None, harness=()) -> dict[str, bool]:
    """``needed_later`` per anchor value of a span compacted at once, with ``tail`` kept and ``later`` after it."""
    head = [SystemMessage(content=system)] if system else []
    messages = [*head, *span, *tail, *later]
    start = len(head)
    end = start + len(span)
    conversation = Conversation(id="c", messages=messages, harness_context=list(harness))
    anchors = measure(span_trace(conversation, [(start, end, end + len(tail))])).anchors
    return dict(zip(anchors["value"], anchors["needed_later"].astype(bool), strict=True))


def _use(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


SPAN = [UserMessage(content="Start from Hooks.TranscriptHighlighter please."), _use("Looking at it.")]


def test_a_qualified_name_is_needed_when_nothing_after_the_span_shows_it():
    assert _needed(SPAN, [UserMessage(content="Go on.")], [_use("Editing Hooks.TranscriptHighlighter now.")])[
        "Hooks.TranscriptHighlighter"
    ]


@pytest.mark.parametrize(
    ("in_span", "in_tail"),
    [
        ("Hooks.TranscriptHighlighter", "TranscriptHighlighter"),
        ("TranscriptHighlighter", "Hooks.TranscriptHighlighter"),
        ("/home/user/app/src/billing/invoice_totals.py", "src/billing/invoice_totals.py"),
        ("src/billing/invoice_totals.py", "/home/user/app/src/billing/invoice_totals.py"),
        ("src/project/__init__.py", "src/project/__init__"),
        ("billing.invoice_totals", "src/billing/invoice_totals.py"),
    ],
)
def test_the_tail_showing_it_in_another_spelling_is_not_needed(in_span, in_tail):
    span = [UserMessage(content=f"Start from {in_span} please."), _use("Looking at it.")]
    needed = _needed(span, [UserMessage(content=f"Keep {in_tail} in mind.")], [_use(f"Editing {in_span} now.")])
    assert needed == {**needed, in_span: False}


def test_spellings_relate_suffixes_and_folders_not_siblings():
    assert shows(("path", "/repo/src/a/b.py"), ("path", "a/b.py"))
    assert shows(("path", "a/b.py"), ("path", "/repo/src/a/b.py"))
    assert not shows(("path", "src/x/b.py"), ("path", "lib/x/b.py"))
    assert not shows(("path", "config.json"), ("path", "config.yaml"))
    assert shows(("sha", "dde0244abc1234567"), ("sha", "dde0244"))
    assert not shows(("number", "200"), ("number", "2000"))
    # a path shows its folders (and a dotted name its packages), not the other way round
    assert shows(("path", "/testbed/src/a.py"), ("path", "/testbed"))
    assert not shows(("path", "/testbed"), ("path", "/testbed/src/a.py"))
    assert shows(("url", "file:///testbed"), ("path", "/testbed"))
    assert shows(("path", "pvlib/tools.py"), ("identifier", "pvlib.tools"))
    # a URL shows its shorter forms (its path's leading segments, without the query), not the other way round
    issues = ("url", "https://api.github.com/repos/acme/shop/issues")
    assert shows(("url", "https://api.github.com/repos/acme/shop/issues/7/comments?page=2"), issues)
    assert not shows(issues, ("url", "https://api.github.com/repos/acme/shop/issues/7"))
    assert not shows(("url", "https://api.github.com/repos/acme/shop/issuesx"), issues)


def test_the_tail_holding_a_longer_form_of_a_url_shows_it():
    url = "https://api.github.com/repos/acme/shop/issues"
    span = [UserMessage(content=f"List them with curl {url} please."), _use("OK.")]
    tail = [UserMessage(content=f"Post to {url}/10730/comments when done.")]
    assert not _needed(span, tail, [_use(f"Fetching {url} again.")])[url]
    # the longer URL held only in the span is still needed when the tail has the shorter one
    span = [UserMessage(content=f"Post to {url}/10730/comments please."), _use("OK.")]
    tail = [UserMessage(content=f"Check {url} first.")]
    assert _needed(span, tail, [_use(f"Posting to {url}/10730/comments now.")])[f"{url}/10730/comments"]


def test_the_agent_using_another_spelling_is_a_use():
    span = [UserMessage(content="Read /srv/app/assistants/lead_memory.txt first."), _use("OK.")]
    later = [_use("lead_memory.txt holds the lead's notes.")]
    assert _needed(span, [UserMessage(content="Go on.")], later)["/srv/app/assistants/lead_memory.txt"]


def test_the_names_of_the_tools_the_agent_calls_are_never_news():
    span = [UserMessage(content="Use find_file to locate it."), _use("OK.")]
    later = [
        _use_call("c1", "find_file", {"name": "x.py"}),
        ToolMessage(tool_call_id="c1", name="find_file", content=""),
    ]
    assert not _needed(span, [UserMessage(content="Go on.")], [*later, _use("find_file found it.")])["find_file"]


def test_a_re_read_between_the_compaction_and_the_use_makes_it_not_needed():
    span = [UserMessage(content="The helper is parse_invoice_total."), _use("Noted.")]
    re_read = [
        _use_call("r1", "read_file", {"path": "billing.md"}),
        ToolMessage(tool_call_id="r1", name="read_file", content="def parse_invoice_total(rows): ..."),
    ]
    use = [_use("Calling parse_invoice_total now.")]
    assert not _needed(span, [UserMessage(content="Go on.")], [*re_read, *use])["parse_invoice_total"]
    # the re-read after the use does not help the use
    assert _needed(span, [UserMessage(content="Go on.")], [*use, *re_read])["parse_invoice_total"]


def _use_call(call_id: str, name: str, arguments: dict) -> AssistantMessage:
    return AssistantMessage(content="", tool_calls=(ToolCall(call_id, name, arguments),))


def test_the_system_prompt_showing_it_makes_it_not_needed():
    span = [UserMessage(content="Use render_invoice_pdf for the output."), _use("OK.")]
    later = [_use("Calling render_invoice_pdf now.")]
    assert _needed(span, [UserMessage(content="Go on.")], later, system="You are helpful.")["render_invoice_pdf"]
    shown = _needed(span, [UserMessage(content="Go on.")], later, system="Tools: billing.render_invoice_pdf(x).")
    assert not shown["render_invoice_pdf"]


def test_harness_context_held_at_the_use_makes_it_not_needed():
    span = [UserMessage(content="Export it from schemas/ledger_schema.ts."), _use("OK.")]
    later = [UserMessage(content="Next."), _use("Added the export to schemas/ledger_schema.ts.")]
    tail = [UserMessage(content="Go on.")]
    assert _needed(span, tail, later)["schemas/ledger_schema.ts"]
    held = HarnessContext(start=1, text="schemas/ledger_schema.ts", label="aider chat file")
    assert not _needed(span, tail, later, harness=[held])["schemas/ledger_schema.ts"]
    dropped = HarnessContext(start=1, end=2, text="schemas/ledger_schema.ts", label="dropped before the compaction")
    assert _needed(span, tail, later, harness=[dropped])["schemas/ledger_schema.ts"]


@pytest.mark.parametrize(
    "name",
    [
        "JSON.parse",
        "Object.fromEntries",
        "line.trim",
        "os.path.dirname",
        "GenServer.start_link",
        "ExUnit.Case",
        "to_string",
        "json.dumps",
        "re.search",
        "headers.get",
        "Enum.filter",
        "el.classList.add",
        "module.exports",
    ],
)
def test_vocabulary_of_languages_and_standard_libraries_is_never_needed(name):
    assert is_generic(("identifier", name))
    span = [UserMessage(content=f"It uses {name} here."), _use("OK.")]
    assert not _needed(span, [UserMessage(content="Go on.")], [_use(f"Now {name} again.")])[name]


@pytest.mark.parametrize(
    "name",
    ["Hooks.TranscriptHighlighter", "self._provider_tokens", "user_auth.get_provider_tokens", "GithubServiceImpl"],
)
def test_project_names_are_specific(name):
    assert not is_generic(("identifier", name))


def test_a_number_counts_only_with_its_key_or_unit():
    span = [UserMessage(content="It returned 200 at line 304; the limit is 250 ms and the port is 6543."), _use("OK.")]
    later = [_use("Process.sleep(200) at line 304 with a 250 ms budget on port 6543.")]
    needed = _needed(span, [UserMessage(content="Go on.")], later)
    # "returned 200" is not "sleep 200"; a line number alone is never an item
    assert needed == {**needed, "returned 200": False, "304": False, "250 ms": True, "port is 6543": True}
    assert is_generic(("number", "304")) and not is_generic(("number", "250ms"))
    assert not is_generic(("number", "1.4"))  # a decimal is rarely a coincidence: ~> 1.4


def test_a_command_is_specific_only_through_what_it_names():
    assert is_generic(("command", "git status"))
    assert not is_generic(("command", "mix test test/spotter/services/transcript_renderer_test.exs"))


AIDER = """# aider chat started at 2025-01-01 10:00:00

> Aider v0.85.1
> Main model: gpt-4o with diff edit format

#### /add src/ledger.ts
> Added src/ledger.ts to the chat

#### add a total function

src/ledger.ts
```
<<<<<<< SEARCH
export const ledgerRows = [];
=======
export const ledgerRows = [];
export function ledgerTotal() { return 0; }
>>>>>>> REPLACE
```

> Applied edit to src/ledger.ts

#### /drop src/ledger.ts
> Removed src/ledger.ts from the chat

#### thanks

Done.
"""


def test_aider_records_the_chat_files_it_re_sends(tmp_path: Path):
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(AIDER, encoding="utf-8")
    (conversation,) = zett_lab.load_all(path)
    entries = conversation.harness_context
    assert [(e.start, e.end, e.text.splitlines()[0]) for e in entries] == [
        (0, 2, "src/ledger.ts"),
        (1, 2, "export const ledgerRows = [];"),
    ]
    assert "ledgerTotal" in entries[1].text
    copy = conversation.save(tmp_path / "copy.json")
    assert zett_lab.load_all(copy)[0].harness_context == entries


_COMPONENT = st.from_regex(r"[a-z][a-z0-9]{2,7}_[a-z0-9]{2,7}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(_COMPONENT, min_size=3, max_size=5, unique=True), data=st.data())
def test_a_renamed_spelling_in_the_tail_never_flags(parts, data):
    """Whatever spelling of a span item the tail shows (a trailing run of its path, absolute, without its
    extension, as a dotted module), the item is not needed later."""
    path = "/".join(parts) + ".py"
    cut = data.draw(st.integers(0, len(parts) - 1))
    spelling = data.draw(
        st.sampled_from(
            ["/".join(parts[cut:]) + ".py", "/srv/app/" + path, "/".join(parts), ".".join(parts[min(cut, 1) :])]
        )
    )
    span = [UserMessage(content=f"Open {path} first."), _use("OK.")]
    needed = _needed(span, [UserMessage(content=f"Remember {spelling} here.")], [_use(f"Editing {path} now.")])
    assert not needed[path]


def test_a_bad_harness_context_entry_is_one_clear_error(tmp_path: Path):
    path = tmp_path / "bad.json"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path.write_text(
        json.dumps({"id": "x", "messages": messages, "harness_context": [{"start": 5, "text": "a.py"}]}),
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"harness context 0, field 'start'"):
        zett_lab.load_all(path)


def test_a_name_printed_as_a_plain_word_or_inside_a_longer_name_is_shown():
    """A tool result that prints the name as a word (``Testing IFNULL:``, no anchor of its own), a path holding
    it as a folder, or a longer text holding a path's components shows it before the use."""
    span = [UserMessage(content="Check ifnull(x, 0), the live/ folder and src/sqlfl/rules/ first."), _use("OK.")]
    use = [_use_call("u", "bash", {"command": "grep -n 'ifnull(' src/sqlfl/rules/ live/"})]
    tail = [UserMessage(content="Go on.")]
    items = {"ifnull": True, "live/": True, "src/sqlfl/rules/": True}
    assert _needed(span, tail, use) == items
    printed = [
        _use_call("r", "bash", {"command": "python t.py"}),
        ToolMessage(
            tool_call_id="r",
            name="bash",
            content="Testing IFNULL:\nSOURCES.txt:src/sqlfl/rules/L060.py lib/web/live/a.ex",
        ),
    ]
    assert _needed(span, tail, [*printed, *use]) == dict.fromkeys(items, False)
    # the agent's own earlier words are not something it was shown
    assert _needed(span, tail, [_use("I will test IFNULL in live next."), *use]) == items


def test_a_qualified_name_written_as_words_with_spaces_is_shown():
    """``igniter install`` in the kept tail (the agent's own search, say) is ``igniter.install`` in another
    spelling; the words apart, or one of them alone, are not."""
    span = [ToolMessage(tool_call_id="s", name="web", content="Run mix igniter.install to set it up."), _use("OK.")]
    use = [_use_call("u", "bash", {"command": "mix igniter.install sobelow"})]
    for tail, shown in [
        ("search: sobelow igniter install", True),
        ("search: igniter installers for sobelow", False),
        ("install igniter first", False),
    ]:
        needed = _needed(span, [_use_call("t", "web", {"query": tail})], use)
        assert needed["igniter.install"] is not shown, tail


def test_a_new_local_of_the_code_the_agent_writes_is_chosen_there():
    """A variable, parameter or alias the use introduces is the agent's choice at the use; a function it defines,
    a name it only calls, or a name kept from the text an edit replaces is not."""
    span = [
        ToolMessage(tool_call_id="x", name="read", content="sql_ifnull = load(); def render_rows(rows): ..."),
        _use("OK."),
    ]
    tail = [UserMessage(content="Go on.")]
    script = "cat > t2.py << 'EOF'\nsql_ifnull = q()\nprint(render_rows(sql_ifnull))\nEOF"
    needed = _needed(span, tail, [_use_call("u", "bash", {"command": script})])
    assert not needed["sql_ifnull"] and needed["render_rows"]
    redefined = "def render_rows(rows):\n    return rows"
    assert _needed(span, tail, [_use_call("u", "bash", {"command": redefined})])["render_rows"]
    edit = {"old_string": "sql_ifnull = load()", "new_string": "sql_ifnull = load(2)"}
    assert _needed(span, tail, [_use_call("u", "Edit", {"file_path": "a.py", **edit})])["sql_ifnull"]


def test_what_a_new_local_heads_and_an_attribute_named_by_a_new_parameter_are_chosen_there():
    """``repos.extend`` on a new ``repos = []`` and ``self.sid = sid`` in a new class are chosen with the local
    and the parameter; a parameter's own attributes (``socket.assigns.breakpoint_map``) are what it is passed."""
    span = [
        ToolMessage(
            tool_call_id="x",
            name="read",
            content="repos.extend(extra); self.sid = sid; socket.assigns.breakpoint_map; self.session_token",
        ),
        _use("OK."),
    ]
    tail = [UserMessage(content="Go on.")]
    script = (
        "cat > t.py << 'EOF'\nclass TokenProvider:\n    def __init__(self, sid, socket):\n        self.sid = sid\n"
        "        self.session_token = fetch()\n        self.map = socket.assigns.breakpoint_map\n"
        "repos = []\nrepos.extend(found)\nEOF"
    )
    needed = _needed(span, tail, [_use_call("u", "bash", {"command": script})])
    assert not needed["repos.extend"] and not needed["self.sid"]
    assert needed["socket.assigns.breakpoint_map"] and needed["self.session_token"]
    # kept from the text an edit replaces, the local is not new
    edit = {"old_string": "repos = load()", "new_string": "repos = load()\nrepos.extend(found)"}
    assert _needed(span, tail, [_use_call("u", "Edit", {"file_path": "a.py", **edit})])["repos.extend"]


def test_a_name_the_agent_wrote_before_anything_showed_it_is_its_own():
    """A library call the agent knew (it wrote it first, nothing showed it) needs no span later; a name it made
    up and defined (its own helper) does."""
    span = [
        _use_call("a", "bash", {"command": "python -c 'import sqlfl; print(sqlfl.lint(q))'"}),
        ToolMessage(tool_call_id="a", name="bash", content="[]"),
        _use_call("b", "bash", {"command": "cat > h.py << 'EOF'\ndef clamp_aoi_angles(x):\n    return x\nEOF"}),
        ToolMessage(tool_call_id="b", name="bash", content=""),
    ]
    later = [_use_call("c", "bash", {"command": "python -c 'print(sqlfl.lint(r), clamp_aoi_angles(3))'"})]
    needed = _needed(span, [UserMessage(content="Go on.")], later)
    assert not needed["sqlfl.lint"] and needed["clamp_aoi_angles"]
    # shown by the user first: learnt from the conversation, needed
    told = [UserMessage(content="Use sqlfl.lint(q) for it."), *span]
    assert _needed(told, [UserMessage(content="Go on.")], later)["sqlfl.lint"]


def test_aider_takes_a_file_the_model_names_unseen_from_its_repository_map(tmp_path: Path):
    """aider's repo map lists the repository's files with every request: a file name the model writes before
    the log showed it came from there, and stays shown; one the log showed first is not added."""
    history = """# aider chat started at 2025-01-01 10:00:00

#### add a sync feature for README.md

The files most likely to change are `init_repo.sh` and `README.md`. Please add them to the chat.
"""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(history, encoding="utf-8")
    (conversation,) = zett_lab.load_all(path)
    (repo_map,) = [e for e in conversation.harness_context if "repo map" in e.label]
    assert (repo_map.start, repo_map.end, repo_map.text) == (0, None, "init_repo.sh")


def test_a_file_name_without_its_extension_in_the_tail_shows_the_file_when_it_is_no_identifier():
    """A search or an import writes ``opencode.plugin`` for ``src/x/opencode.plugin.ts``: the tail holds the file.
    A stem that is an identifier (``feedback_summary``) may be a variable or a type of that name: no."""
    tail = [_use_call("t", "bash", {"command": 'rg -n "opencode.plugin|feedback_summary" src'})]
    span = [
        ToolMessage(tool_call_id="s", name="bash", content="src/x/opencode.plugin.ts:270 and team/Feedback_Summary.md"),
        _use("OK."),
    ]
    use = [_use("Patching src/x/opencode.plugin.ts and writing team/Feedback_Summary.md.")]
    needed = _needed(span, tail, use)
    assert not needed["src/x/opencode.plugin.ts"] and needed["team/Feedback_Summary.md"]
    assert _needed(span, [UserMessage(content="Go on.")], use)["src/x/opencode.plugin.ts"]


def test_a_command_made_of_parts_in_view_is_at_hand():
    """``python reproduce_bug.py`` is a program and a path: with the path in view the command is too. A command
    that carries more than its parts (a line range) is not."""
    span = [
        _use_call("a", "bash", {"command": "python reproduce_bug.py"}),
        ToolMessage(tool_call_id="a", name="bash", content="ok"),
        _use_call("b", "bash", {"command": "sed -n '70,95p' ./pvlib/iam.py"}),
        ToolMessage(tool_call_id="b", name="bash", content="..."),
    ]
    tail = [
        ToolMessage(tool_call_id="t", name="bash", content="(Open file: /repo/reproduce_bug.py) in /repo/pvlib/iam.py")
    ]
    use = [
        _use_call("c", "bash", {"command": "python reproduce_bug.py"}),
        _use_call("d", "bash", {"command": "sed -n '70,95p' ./pvlib/iam.py"}),
    ]
    needed = _needed(span, tail, use)
    assert not needed["python reproduce_bug.py"] and needed["sed -n '70,95p' ./pvlib/iam.py"]
    assert _needed(span, [UserMessage(content="Go on.")], use)["python reproduce_bug.py"]


def test_a_number_printed_before_the_use_in_a_list_is_shown():
    """A test run printing ``14 doctests, 410 tests, 0 failures`` shows ``410 tests`` (the comma ends the item)."""
    span = [_use("All 410 tests pass."), UserMessage(content="Good.")]
    run = [
        _use_call("r", "bash", {"command": "mix test"}),
        ToolMessage(tool_call_id="r", name="bash", content="14 doctests, 410 tests, 0 failures"),
    ]
    use = [_use("All 410 tests pass again.")]
    assert _needed(span, [UserMessage(content="Go on.")], use)["410 tests"]
    assert not _needed(span, [UserMessage(content="Go on.")], [*run, *use])["410 tests"]


@pytest.mark.parametrize("name", ["np.errstate", "np.isscalar", "pd.Series", "df.loc", "scipy.optimize.brentq"])
def test_numpy_pandas_and_scipy_are_vocabulary(name):
    assert is_generic(("identifier", name))


def test_a_name_of_a_library_the_project_depends_on_is_vocabulary():
    """``Ecto.Adapters.SQL.Sandbox`` (aliased, ``Sandbox.start_owner``) is Ecto's public API once the conversation
    shows the project using Ecto; a name of the project's own namespace stays needed."""
    span = [
        ToolMessage(
            tool_call_id="x",
            name="read",
            content="defmodule SpotterWeb.SessionLiveTest do\n  alias Ecto.Adapters.SQL.Sandbox\n"
            "  setup do\n    pid = Sandbox.start_owner(Spotter.Repo)\n    SpotterWeb.Seeds.load_fixture_rows()\n",
        ),
        _use("OK."),
    ]
    later = [_use("Add Ecto.Adapters.SQL.Sandbox, Sandbox.start_owner and SpotterWeb.Seeds.load_fixture_rows.")]
    needed = _needed(span, [UserMessage(content="Go on.")], later)
    assert not needed["Ecto.Adapters.SQL.Sandbox"] and not needed["Sandbox.start_owner"]
    assert needed["SpotterWeb.Seeds.load_fixture_rows()"]
    # without anything showing Ecto as a library, its names are the project's, as far as the conversation says
    own = [
        ToolMessage(tool_call_id="x", name="read", content="Ecto.Adapters.SQL.Sandbox is set up in the test helper."),
        _use("OK."),
    ]
    assert _needed(own, [UserMessage(content="Go on.")], [_use("Call Ecto.Adapters.SQL.Sandbox now.")])[
        "Ecto.Adapters.SQL.Sandbox"
    ]


def test_code_a_reply_proposes_chooses_its_variables():
    """A reply proposing code (fenced or not) chooses its new variables and what they head (``repos.extend``) and
    an attribute set from a parameter of the same name (``self.sid``); prose ("look for user_auth in") does not
    define the names it mentions."""
    span = [
        ToolMessage(tool_call_id="x", name="read", content="repos.extend(extra); self.sid = sid; user_auth.refresh"),
        _use("OK."),
    ]
    reply = (
        "Here is the provider:\n\nclass TokenProvider:\n    def __init__(self, sid: str):\n        self.sid = sid\n\n"
        "repos = []\nrepos.extend(found)\n\nThen look for user_auth in the store and call user_auth.refresh."
    )
    needed = _needed(span, [UserMessage(content="Go on.")], [_use(reply)])
    assert not needed["repos.extend"] and not needed["self.sid"]
    assert needed["user_auth.refresh"]
    # the same names mentioned in a reply without code are recalled
    mention = _use("Call repos.extend and set self.sid as before.")
    needed = _needed(span, [UserMessage(content="Go on.")], [mention])
    assert needed["repos.extend"] and needed["self.sid"]


def test_a_keyed_number_is_shown_by_its_value_beside_its_key_in_other_words():
    """A docstring giving ``n_ar``'s typical value two lines below the key shows ``n_ar=1.29``; the value far from
    its key, or beside another key, does not."""
    span = [ToolMessage(tool_call_id="x", name="bash", content="ran physical(aoi, n_ar=1.29)"), _use("OK.")]
    use = [_use("Now iam.physical(aoi=100, n_ar=1.29) again.")]
    docstring = (
        "    n_ar : numeric, optional\n        The effective index of the coating.\n"
        "        If n_ar is None, no coating is applied.\n        A typical value is 1.29.\n"
    )
    assert not _needed(span, [ToolMessage(tool_call_id="t", name="read", content=docstring)], use)["n_ar=1.29"]
    far = "n_ar : numeric\n" + "filler line\n" * 5 + "A typical value is 1.29.\n"
    assert _needed(span, [ToolMessage(tool_call_id="t", name="read", content=far)], use)["n_ar=1.29"]
    other = "n_glass : numeric\n    typical value 1.29\n"
    assert _needed(span, [ToolMessage(tool_call_id="t", name="read", content=other)], use)["n_ar=1.29"]


def test_a_command_whose_plain_word_is_a_name_of_the_conversation_is_shown_by_its_parts():
    """``grep -n "def physical" ./lib/geo.py`` is in view once the file and the function are, though the
    command writes the function's name as a plain word of a pattern (no anchor of its own)."""
    command = 'grep -n "def physical" ./lib/geo.py'
    span = [_use_call("a", "bash", {"command": command}), ToolMessage(tool_call_id="a", name="bash", content="12:")]
    use = [_use_call("b", "bash", {"command": command})]
    shown = [ToolMessage(tool_call_id="t", name="read", content="./lib/geo.py:12: def physical(x):")]
    assert not _needed(span, shown, use)[command]
    only_file = [ToolMessage(tool_call_id="t", name="read", content="./lib/geo.py: 40 lines; physical_v2()")]
    assert _needed(span, only_file, use)[command]


def test_data_the_agents_new_code_holds_as_a_maps_value_is_made_up_there():
    """A test's fixture (``"file_path" => "/home/u/project/lib/app.ex"`` in a new test file) is data the agent
    chose; the same path written as a tool's argument, or kept from the text an edit replaces, is recalled."""
    path = "/home/u/project/lib/app.ex"
    span = [ToolMessage(tool_call_id="x", name="read", content=f'input: %{{"file_path" => "{path}"}}'), _use("OK.")]
    tail = [UserMessage(content="Go on.")]
    fixture = 'test "reads" do\n  block = %{"name" => "Read", "input" => %{"file_path" => "PATH"}}\nend'
    fixture = fixture.replace("PATH", path)
    written = _use_call("u", "Write", {"file_path": "test/reader_test.exs", "content": fixture})
    assert not _needed(span, tail, [written])[path]
    assert _needed(span, tail, [_use_call("u", "Read", {"file_path": path})])[path]
    edit = {"file_path": "test/reader_test.exs", "old_string": fixture, "new_string": fixture + "\n# more"}
    assert _needed(span, tail, [_use_call("u", "Edit", edit)])[path]


def test_another_objects_method_of_the_same_name_is_no_use_of_a_member():
    """``self.get_env_vars()`` of one class is not used by writing ``handler.get_env_vars``, nor by a bare
    ``get_env_vars()`` once another object's method of that name was shown (it may be that one); a bare name
    before any other object's, or ``self.get_env_vars()``, is a use."""
    span = [
        ToolMessage(tool_call_id="x", name="read", content="secrets = self.get_env_vars()\nreturn secrets"),
        _use("OK."),
    ]
    tail = [UserMessage(content="Go on.")]
    other = ToolMessage(tool_call_id="y", name="bash", content="env = await provider_handler.get_env_vars(expose)")
    assert not _needed(span, tail, [_use("Then call handler.get_env_vars(expose=True).")]).get(
        "self.get_env_vars()", False
    )
    grep = _use('grep -n "def get_env_vars" -R .')
    assert not _needed(span, [*tail, other], [grep])["self.get_env_vars()"]
    assert _needed(span, tail, [grep])["self.get_env_vars()"]
    review = _use("[secrets.py, Line 110] get_env_vars hardcodes the provider list; take it from the caller.")
    assert _needed(span, tail, [review])["self.get_env_vars()"]
    assert _needed(span, tail, [_use("Then call self.get_env_vars() again.")])["self.get_env_vars()"]


def test_a_document_the_agent_writes_quotes_its_values_and_a_code_files_string_holding_backticks_is_no_document():
    """A Markdown document written to a file (fenced blocks opening lines, as CommonMark writes them) quotes the
    spec it copies (``type: "team_member"``): no made-up data there, the value is recalled. A test file whose
    string literal holds backticks inside a line (``"```elixir\\ndef foo```"``) is still code: its fixture's
    values are made up."""
    value = "team_member"
    spec = f'1. Create team member entities (type: "{value}")\n\n```\nTool: create_entities\n```\n'
    span = [ToolMessage(tool_call_id="x", name="read", content=spec), _use("OK.")]
    tail = [UserMessage(content="Go on.")]
    document = _use_call("u", "write_file", {"file_path": "assistants/lead.txt", "content": spec + "## Rules\n"})
    assert _needed(span, tail, [document])[value]
    fixture = (
        'test "renders" do\n  block = %{"type" => "text", "text" => "```elixir\\ndef foo, do: :bar\\n```"}\n'
        f'  entity = %{{type: "{value}"}}\nend'
    )
    code = _use_call("u", "Write", {"file_path": "test/render_test.exs", "content": fixture})
    assert not _needed(span, tail, [code])[value]


def test_a_block_of_code_shown_before_and_reproduced_recalls_its_names_a_line_borrowed_into_new_code_does_not():
    """The user's snippet pasted into a script, or a signature read before and quoted in a reply, reproduces code
    that exists: ``td_field.serialize`` and the parameter ``installation_id`` are recalled from the span, though
    the pasted code assigns ``td_field`` again. One such line among the agent's own new lines (``aoi_input = aoi``
    borrowed into its fix) is its choice still."""
    snippet = (
        "from marshmallow.fields import TimeDelta\nfrom datetime import timedelta\n\n"
        'td_field = TimeDelta(precision="milliseconds")\n\nobj = dict()\n'
        'obj["td_field"] = timedelta(milliseconds=345)\n\nprint(td_field.serialize("td_field", obj))'
    )
    tail = [UserMessage(content="Go on.")]
    pasted = _use_call("u", "bash", {"command": f"cat > reproduce.py << 'EOF'\n{snippet}\nEOF"})
    assert _needed([UserMessage(content=snippet), _use("OK.")], tail, [pasted])["td_field.serialize"]
    route = (
        "async def get_user_repositories(\n    sort: str = 'pushed',\n    page: int | None = None,\n"
        "    installation_id: str | None = None,\n    user_id: str | None = Depends(get_user_id),\n):\n"
        "    return await client.get_repositories(sort, page, installation_id)"
    )
    span = [ToolMessage(tool_call_id="x", name="read", content=route), _use("OK.")]
    quoted = _use(f"The route today:\n\n{route}\n\nIt threads the tokens through every call.")
    assert _needed(span, tail, [quoted])["installation_id"]
    fix = (
        "def martin_ruiz(aoi, a_r=0.16):\n    # keep the caller's input for the index\n    aoi_input = aoi\n"
        "    iam = np.zeros_like(aoi_input, dtype=float)\n    return iam"
    )
    original = "def martin_ruiz(aoi, a_r=0.16):\n    '''Martin and Ruiz model.'''\n    aoi_input = aoi\n    aoi = x"
    span = [ToolMessage(tool_call_id="x", name="read", content=original), _use("OK.")]
    assert not _needed(span, tail, [_use_call("u", "Write", {"file_path": "iam.py", "content": fix})])["aoi_input"]


def test_the_code_blocks_of_a_document_the_agent_writes_choose_their_names_unless_they_reproduce_code():
    """A design comment the agent writes to a file (``cat > comment.md << 'EOF'`` with fenced Python blocks)
    proposes new code: its ``provider_token = await ...`` and what that heads (``provider_token.token``), a
    constant it assigns (``REFRESH_URL``) and ``self.token_provider = token_provider`` are chosen there, though
    the span held the same names. A document mostly quotes: a line of code a tool showed before recalls its names,
    the route as it is (``installation_id``) and one line borrowed among new ones (``store_impl = get_impl(...)``):
    both stay needed."""
    route = (
        "async def get_user_repositories(\n    sort: str = 'pushed',\n    page: int | None = None,\n"
        "    installation_id: str | None = None,\n    user_id: str | None = Depends(get_user_id),\n):\n"
        "    return await client.get_repositories(sort, page, installation_id)"
    )
    design = (
        "for provider_token in tokens.values():\n    headers.append(provider_token.token)\n"
        "source = self.token_provider\nlog(REFRESH_URL)\nstore_impl = get_impl(SecretsStore, config.store_class)"
    )
    span = [
        ToolMessage(tool_call_id="x", name="read", content=route),
        ToolMessage(tool_call_id="y", name="read", content=design),
        _use("OK."),
    ]
    document = (
        "cat > /tmp/comment.md << 'EOF'\n## Today\n\n```python\n" + route + "\n```\n\n## Proposed\n\n```python\n"
        "REFRESH_URL = 'https://example.test/api/refresh'\n\nclass Handler:\n"
        "    def __init__(self, token_provider):\n        self.token_provider = token_provider\n\n"
        "    async def _get_service(self, provider):\n"
        "        provider_token = await self.token_provider.get(provider)\n"
        "        return Service(provider_token.token)\n\n"
        "async def load_store():\n    store_impl = get_impl(SecretsStore, config.store_class)\n"
        "    return store_impl\n```\nEOF\ngh issue comment 1 --body-file /tmp/comment.md"
    )
    needed = _needed(span, [UserMessage(content="Go on.")], [_use_call("u", "bash", {"command": document})])
    assert not needed["provider_token"] and not needed["provider_token.token"]
    assert not needed["REFRESH_URL"] and not needed["self.token_provider"]
    assert needed["installation_id"] and needed["store_impl"]


def test_a_field_of_json_an_external_api_returned_is_that_apis_vocabulary():
    """The keys of GitHub's JSON a ``curl`` fetched (``html_url``, ``created_at``) are the API's names: reading them
    again with ``jq`` needs no span. A local server's field (``llm_model``, the project's own API) stays needed."""
    github = 'curl -sSL -H "Accept: application/vnd.github.v3+json" https://api.github.com/repos/o/r/pulls/7'
    local = "curl -s http://localhost:3000/api/settings"
    span = [
        AssistantMessage(content="", tool_calls=(ToolCall("c1", "bash", {"command": github}),)),
        ToolMessage(
            tool_call_id="c1",
            name="bash",
            content='{\n  "html_url": "https://github.com/o/r/pull/7",\n  "created_at": "2025-08-31T06:05:51Z"\n}',
        ),
        AssistantMessage(content="", tool_calls=(ToolCall("c2", "bash", {"command": local}),)),
        ToolMessage(tool_call_id="c2", name="bash", content='{"llm_model": "gpt-4o", "confirmation_mode": false}'),
        _use("OK."),
    ]
    later = _use_call(
        "u", "bash", {"command": f"{github}/comments | jq -r '.[] | .html_url, .created_at'; {local} | jq .llm_model"}
    )
    needed = _needed(span, [UserMessage(content="Go on.")], [later])
    assert not needed["html_url"] and not needed["created_at"]
    assert needed["llm_model"]


def test_the_name_of_a_file_format_the_conversations_paths_carry_is_vocabulary():
    """``HEEx`` where the conversation's paths hold ``.heex`` templates names the format; where no path carries
    that extension it is a name like any other."""
    issue = "Create a shared transcript HEEx component for both views."
    templates = "lib/spotter_web/live/session_live.ex\nlib/spotter_web/live/session_live.html.heex"
    later = [_use_call("u", "Bash", {"command": 'bd close spotter-1 --reason="One shared HEEx component."'})]
    tail = [UserMessage(content="Go on.")]
    span = [UserMessage(content=issue), ToolMessage(tool_call_id="x", name="Glob", content=templates), _use("OK.")]
    assert not _needed(span, tail, later)["HEEx"]
    span = [UserMessage(content=issue), _use("OK.")]
    assert _needed(span, tail, later)["HEEx"]
