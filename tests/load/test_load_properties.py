"""Property-based proof that loading holds beyond the hand-written cases.

For every format zett_lab reads, Hypothesis generates a dialogue (texts drawn from all of
Unicode, lone surrogates and NULs included, plus a list of known troublemakers), writes it the
way that agent records it (:mod:`tests.formats`), and then damages the file: structured edits
on the parsed document or database (a value replaced by one of the wrong type, a huge or
non-finite number, a deleted key, a duplicated or dropped record) and byte edits (truncation,
flipped bytes, inserted bytes that are not UTF-8). The properties:

* ``zett_lab.load_all`` either returns conversations that validate and hold only storable text,
  or raises one :class:`~zett_lab.InputError` that names the file; never another exception, and
  no warning but zett_lab's own (one readable line each);
* ``zett-lab import FILE -o OUT`` returns an exit code and prints no traceback: 0 exactly when
  loading succeeded, otherwise one ``zett-lab: error:`` line naming the file;
* ``zett-lab replay FILE`` (fewer cases: it runs the engine) never prints a traceback: every line
  on stderr is one of zett-lab's own.

Examples per format: ``ZETT_LAB_PROPERTY_EXAMPLES`` (default 100; the suite then takes about
half a minute on one core). Runs are derandomized, so CI sees the same cases every time; to
search further, raise the number and set ``ZETT_LAB_PROPERTY_SEARCH=1`` for fresh random cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import zett_lab
from tests.formats import WRITERS, Dialogue, Step, Turn, unstorable_strings
from zett_lab import InputError
from zett_lab.errors import ZettLabWarning
from zett_lab.show.arguments import EXIT_ERROR, EXIT_OK
from zett_lab.show.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("ZETT_LAB_PROPERTY_EXAMPLES", "100"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("ZETT_LAB_PROPERTY_SEARCH"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

#: Texts known to break text handling somewhere: lone surrogates, NUL, bidi overrides, BOMs,
#: combining marks, astral characters, line separators, JSON look-alikes, a long line.
EDGE_TEXTS = [
    "",
    " ",
    "\ud800",
    "a\udfffb",
    "\udcff",
    "\x00",
    "nul\x00mid",
    "\u202eevil\u202c",
    "\ufeffbom",
    "e\u0301",
    "💥🧨",
    "\U0010ffff",
    "\r\n",
    "\u2028\u2029",
    "line\nbreak",
    '"quoted"',
    "\\",
    "{}",
    "[]",
    "null",
    "1e999",
    "-0",
    "ﬁ",
    "x" * 3000,
    "```bash\nrm -rf /\n```",
    "#### not a user",
    "> not a tool",
    "# aider chat started at 2025-01-01 00:00:00",
]
#: A string the byte writer swaps for an integer literal with more digits than Python converts.
HUGE = "__HUGE_NUMBER__"

texts = st.one_of(st.text(st.characters(exclude_categories=()), max_size=30), st.sampled_from(EDGE_TEXTS))
steps = st.builds(
    Step,
    tool=st.one_of(st.sampled_from(["bash", "read_file", "str_replace_editor"]), texts),
    command=texts,
    result=texts,
)
turns = st.builds(Turn, user=texts, steps=st.lists(steps, max_size=2), answer=texts)
dialogues = st.builds(
    Dialogue, id=st.one_of(st.just("session-1"), texts), system=texts, turns=st.lists(turns, min_size=1, max_size=3)
)
weird_values = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1.5,
            10**30,
            -(2**63),
            2**64,
            1e308,
            float("inf"),
            float("nan"),
            "",
            [],
            {},
            [[[]]],
            {"": None},
            HUGE,
        ]
    ),
    texts,
    st.integers(),
    st.floats(),
)
#: Values written into a database cell: NULL, numbers at the integer limits, blobs that are not UTF-8,
#: envelopes of the wrong shape.
weird_cells = st.one_of(
    st.sampled_from(
        [
            None,
            -1,
            0,
            2**63 - 1,
            -(2**63),
            1.5,
            "",
            "x",
            b"\xff\xfe",
            "[]",
            "{}",
            "null",
            '[{"kind": 99, "data": {}}]',
            '[{"kind": 2, "data": {"content": 5}}]',
            '[{"kind": 3, "data": {"content": "", "tool_calls": [{"id": 1}]}}]',
            '[{"kind": 4, "data": {"tool_call_id": "nope", "name": "t", "content": "x"}}]',
            "[" * 5000,
        ]
    ),
    texts.map(lambda t: t.encode("utf-8", "backslashreplace").decode("utf-8")),
)
JSON_LINES = {"neutral-jsonl", "zett-jsonl", "zettcode", "claude-code-jsonl", "codex-rollout-jsonl"}


# -- damaging a file ----------------------------------------------------------------------------------------


def _walk(data: st.DataObject, document: object) -> tuple[object, object]:
    """A random (container, key) inside a parsed JSON document, or (None, None) for the document itself."""
    container, key = None, None
    node = document
    for _ in range(data.draw(st.integers(0, 8), label="depth")):
        if not isinstance(node, (dict, list)) or not node:
            break
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        container, key = node, data.draw(st.sampled_from(keys), label="key")
        node = node[key]
    return container, key


def _edit_document(data: st.DataObject, document: object) -> object:
    """One structured edit: replace a value, delete a key or item, or duplicate a list item."""
    container, key = _walk(data, document)
    action = data.draw(st.sampled_from(["replace", "delete", "duplicate"]), label="edit")
    if container is None:
        return data.draw(weird_values, label="document") if action == "replace" else document
    if action == "replace":
        container[key] = data.draw(weird_values, label="value")
    elif action == "delete":
        del container[key]
    elif isinstance(container, list):
        container.insert(key, container[key])
    return document


def _dump(data: st.DataObject, document: object) -> bytes:
    text = json.dumps(document, ensure_ascii=data.draw(st.booleans(), label="ensure_ascii"))
    return text.replace(json.dumps(HUGE), "9" * 5000).encode("utf-8", "surrogatepass")


def _edit_json_file(data: st.DataObject, file: Path, jsonl: bool) -> None:
    if not jsonl:
        document = json.loads(file.read_bytes())
        file.write_bytes(_dump(data, _edit_document(data, document)))
        return
    lines = [json.loads(line) for line in file.read_bytes().splitlines() if line.strip()]
    index = data.draw(st.integers(0, len(lines) - 1), label="line")
    action = data.draw(st.sampled_from(["edit", "drop", "duplicate", "swap"]), label="line edit")
    if action == "edit":
        lines[index] = _edit_document(data, lines[index])
    elif action == "drop":
        del lines[index]
    elif action == "duplicate":
        lines.insert(index, lines[index])
    else:
        other = data.draw(st.integers(0, len(lines) - 1), label="other line")
        lines[index], lines[other] = lines[other], lines[index]
    file.write_bytes(b"".join(_dump(data, line) + b"\n" for line in lines))


def _edit_database(data: st.DataObject, file: Path) -> None:
    with closing(sqlite3.connect(file)) as connection:
        connection.execute("PRAGMA synchronous = OFF")
        table = data.draw(st.sampled_from(["raw_messages", "agent_sessions", "session_snapshots"]), label="table")
        if table == "session_snapshots":
            connection.execute(
                "INSERT INTO session_snapshots"
                " VALUES ('snap', (SELECT id FROM agent_sessions LIMIT 1), ?, ?, ?, 'now', 'now')",
                (
                    data.draw(weird_cells, label="version"),
                    data.draw(weird_cells, label="through"),
                    data.draw(weird_cells, label="snapshot"),
                ),
            )
        else:
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            rows = [row[0] for row in connection.execute(f"SELECT rowid FROM {table}")]
            column = data.draw(st.sampled_from(columns), label="column")
            connection.execute(
                f"UPDATE {table} SET {column} = ? WHERE rowid = ?",
                (data.draw(weird_cells, label="cell"), data.draw(st.sampled_from(rows))),
            )
        connection.commit()


def _edit_bytes(data: st.DataObject, file: Path) -> None:
    raw = bytearray(file.read_bytes())
    at = data.draw(st.integers(0, max(0, len(raw) - 1)), label="offset")
    action = data.draw(st.sampled_from(["truncate", "flip", "insert", "delete"]), label="byte edit")
    if action == "truncate":
        del raw[at:]
    elif action == "flip" and raw:
        raw[at] = data.draw(st.integers(0, 255), label="byte")
    elif action == "insert":
        raw[at:at] = data.draw(
            st.sampled_from([b"\x00", b"\xff", b"\xed\xa0\x80", b"{", b"]", b'"', b"\n", b"\\", b"\xef\xbb\xbf"])
            | st.binary(max_size=8)
        )
    else:
        del raw[at : at + data.draw(st.integers(1, 64), label="length")]
    file.write_bytes(bytes(raw))


def damage(data: st.DataObject, format: str, path: Path) -> None:
    """Zero to three edits, structured or byte-level, on the file (or the session file of a folder)."""
    file = next(path.rglob("data.jsonl")) if path.is_dir() else path
    for _ in range(data.draw(st.integers(0, 3), label="edits")):
        if not file.exists() or not file.stat().st_size:
            return
        structured = data.draw(st.booleans(), label="structured")
        try:
            if structured and format == "zett-sqlite":
                _edit_database(data, file)
            elif structured and format != "aider-chat-history-md":
                _edit_json_file(data, file, format in JSON_LINES)
            else:
                _edit_bytes(data, file)
        except (ValueError, sqlite3.Error, RecursionError):
            # An earlier edit already broke the document or the database beyond a structured edit:
            # that state is itself a case; go on with byte edits only.
            _edit_bytes(data, file)


# -- the properties -----------------------------------------------------------------------------------------


def load_outcome(path: Path) -> InputError | list[zett_lab.Conversation]:
    """Load once: the conversations, or the InputError; any other exception, or a foreign warning, fails."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome: InputError | list = zett_lab.load_all(path)
        except InputError as error:
            outcome = error
    foreign = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, ZettLabWarning)]
    assert foreign == [], foreign
    return outcome


def names_the_input(message: str, path: Path) -> bool:
    return message.startswith(str(path)) or (path.is_dir() and str(path) in message)


def run_cli(argv: list[str]) -> tuple[int, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore", ZettLabWarning)
        code = main(argv)
    return code, stderr.getvalue()


@pytest.mark.parametrize("format", sorted(WRITERS))
@PROPERTY
@given(data=st.data())
def test_loading_any_damaged_file_succeeds_or_raises_one_input_error(tmp_path_factory, format, data):
    folder = tmp_path_factory.mktemp("case")
    dialogue = data.draw(dialogues, label="dialogue")
    path = WRITERS[format](dialogue, folder)
    damage(data, format, path)

    outcome = load_outcome(path)
    if isinstance(outcome, InputError):
        event(f"{format}: InputError")
        note(str(outcome))
        assert names_the_input(str(outcome), path), str(outcome)
    else:
        event(f"{format}: loaded")
        for conversation in outcome:
            conversation.validate()
            assert unstorable_strings(conversation) == []

    code, stderr = run_cli(["import", str(path), "-o", str(folder / "out.json")])
    assert "Traceback" not in stderr
    if isinstance(outcome, InputError):
        assert code == EXIT_ERROR and stderr.startswith("zett-lab: error: ") and len(stderr.splitlines()) == 1, stderr
    else:
        ids = [c.id for c in outcome]
        assert code == (EXIT_OK if len(set(ids)) == len(ids) else EXIT_ERROR), stderr  # one session id twice: refused


@pytest.mark.parametrize("format", sorted(WRITERS))
@settings(PROPERTY, max_examples=max(2, EXAMPLES // 20))
@given(data=st.data())
def test_replay_on_the_command_line_never_shows_a_traceback(tmp_path_factory, format, data):
    folder = tmp_path_factory.mktemp("replay")
    path = WRITERS[format](data.draw(dialogues, label="dialogue"), folder)
    damage(data, format, path)
    outcome = load_outcome(path)
    argv = [
        "replay",
        str(path),
        "--max-tokens",
        "300",
        "--keep-recent-tokens",
        "100",
        "--summarizer",
        "truncate",
        "--no-cache",
    ]
    if not isinstance(outcome, InputError) and len(outcome) > 1:
        argv += ["--session", outcome[0].id]
    code, stderr = run_cli(argv)
    assert "Traceback" not in stderr
    assert all(line.startswith("zett-lab: ") for line in stderr.splitlines()), stderr
    if isinstance(outcome, InputError):
        assert code == EXIT_ERROR and len(stderr.splitlines()) == 1, stderr


def test_the_console_script_prints_one_line_for_damaged_files(tmp_path):
    """The real entry point, in its own process, on three damaged files."""
    surrogate = WRITERS["neutral-json"](Dialogue("s", "sys", [Turn("fix \ud800", [], "ok")]), tmp_path)
    truncated = WRITERS["zett-sqlite"](Dialogue("t", "sys", [Turn("hi", [Step("bash", "ls", "a")], "ok")]), tmp_path)
    truncated.write_bytes(truncated.read_bytes()[:3000])
    (tmp_path / "fifo").mkdir()
    fifo = tmp_path / "fifo" / "pipe.jsonl"
    os.mkfifo(fifo)
    results = {}
    for name, path in {"surrogate": surrogate, "truncated": truncated, "fifo": fifo}.items():
        run = subprocess.run(
            [sys.executable, "-m", "zett_lab.show.cli", "import", str(path), "-o", str(tmp_path / f"{name}.json")],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
            check=False,
        )
        results[name] = run
        assert "Traceback" not in run.stderr
    assert results["surrogate"].returncode == EXIT_OK and results["surrogate"].stderr.startswith(
        f"zett-lab: warning: {surrogate}: conversation 's', message 1: replaced 1 "
    )
    for name in ("truncated", "fifo"):
        lines = results[name].stderr.splitlines()
        assert results[name].returncode == EXIT_ERROR and len(lines) == 1, results[name].stderr
        assert lines[0].startswith("zett-lab: error: ")
    assert str(truncated) in results["truncated"].stderr and "is a FIFO" in results["fifo"].stderr
