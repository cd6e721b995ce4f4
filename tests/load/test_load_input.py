"""Input that looks legal: text that cannot be stored, files that are empty or not files at all.

Every reader normalises text that cannot be encoded (a lone surrogate, a NUL, bytes that are not
UTF-8) at load, with one warning per conversation naming the file and the message indices; a
file that holds nothing, or a message without a role, says what is wrong; a FIFO or a device is
refused without being opened. Warnings print as one line a user can read.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import warnings
from contextlib import closing
from pathlib import Path

import pytest

import zett_lab
from tests.formats import WRITERS, Dialogue, Step, Turn, reader_name, unstorable_strings
from zett_lab import InputError
from zett_lab.errors import ZettLabWarning

ROOT = Path(__file__).resolve().parents[2]
MARKER = "QQINVALIDQQ"


def dialogue(user: str) -> Dialogue:
    return Dialogue(
        "edge",
        "You are an agent.",
        [
            Turn("start here", [Step("bash", "ls", "a.py")], "Listed."),
            Turn(user, [Step("bash", "cat a.py", "print(1)")], "Fixed."),
        ],
    )


#: kind -> what a file holds for it: in JSON text (an escape, or raw bytes), and in plain text
INJECTED = {
    "lone surrogate": (b"\\ud800", b"\xed\xa0\x80"),
    "NUL": (b"\\u0000", b"\x00"),
    "invalid UTF-8": (b"\xff\xfe", b"\xff\xfe"),
}


def write_with(format: str, kind: str, folder: Path) -> Path:
    """A file of the format whose second user message holds ``kind`` as that format's writer would leave it."""
    path = WRITERS[format](dialogue(f"fix a{MARKER}b.py"), folder)
    in_json, in_text = INJECTED[kind]
    if format == "zett-sqlite":
        with closing(sqlite3.connect(path)) as connection:
            connection.execute(
                "UPDATE raw_messages SET message_json = replace(message_json, ?, CAST(? AS TEXT))", (MARKER, in_json)
            )
            connection.commit()
        return path
    for file in [path] if path.is_file() else sorted(path.rglob("*.jsonl")):
        injected = in_text if format == "aider-chat-history-md" else in_json
        file.write_bytes(file.read_bytes().replace(MARKER.encode(), injected))
    return path


@pytest.mark.parametrize("kind", ["lone surrogate", "NUL", "invalid UTF-8"])
@pytest.mark.parametrize("format", sorted(WRITERS))
def test_every_reader_replaces_text_that_cannot_be_stored_with_one_warning(tmp_path, format, kind):
    path = write_with(format, kind, tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conversations = zett_lab.load_all(path)
    assert {c.format for c in conversations} == {reader_name(format)}
    ours = [w for w in caught if issubclass(w.category, ZettLabWarning)]
    assert len(ours) == len(conversations), [str(w.message) for w in caught]
    for conversation, warning in zip(conversations, ours, strict=True):
        assert unstorable_strings(conversation) == []
        repaired = [i for i, m in enumerate(conversation.messages) if "\ufffd" in str(getattr(m, "content", ""))]
        assert len(repaired) == 1 and "fix a\ufffd" in str(conversation.messages[repaired[0]].content)
        assert str(warning.message).startswith(
            f"{conversation.source}: conversation {conversation.id!r}, message {repaired[0]}: replaced "
        )
        assert [m for m in caught if m is not warning and m.category is not ZettLabWarning] == []


def test_a_warning_prints_as_one_readable_line(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {"id": "c", "messages": [{"role": "user", "content": "hi \ud800"}, {"role": "assistant", "content": "ok"}]}
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", "import sys, zett_lab; zett_lab.load(sys.argv[1])", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert result.stderr == (
        f"zett_lab: {path}: conversation 'c', message 0: replaced 1 character(s) that cannot be stored as text "
        "(lone surrogate, NUL or byte that is not UTF-8) with U+FFFD\n"
    )


def test_other_warnings_keep_pythons_format():
    assert warnings.formatwarning("plain", UserWarning, "x.py", 3) == "x.py:3: UserWarning: plain\n"
    assert warnings.formatwarning("ours", ZettLabWarning, "x.py", 3) == "zett_lab: ours\n"


# -- say what is actually wrong -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "the file is empty"),
        (b"  \n\n\t ", "the file holds only blank space"),
        (b'{"id": "a", "messages": []}', "'messages' is an empty list: there is no conversation to read"),
        (
            b'{"id": "a", "messages": [{"content": "hi"}]}',
            "message 0, field 'role': missing (expected one of system, user, assistant, tool, checkpoint, agent)",
        ),
        (b'[{"role": "user", "content": "hi"}, {"content": "no role"}]', "message 1, field 'role': missing"),
        (
            b'{"id": "a", "messages": [{"role": "system", "content": "only this"}]}',
            "conversation 'a' is empty (no user or assistant messages)",
        ),
    ],
)
def test_a_file_that_holds_no_conversation_says_why(tmp_path, content, problem):
    path = tmp_path / "c.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as error:
        zett_lab.load(path)
    assert str(error.value).startswith(f"{path}: ")
    assert problem in str(error.value)
    assert "unknown format" not in str(error.value)


def test_json_nested_deeper_than_python_can_parse_is_an_input_error(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    whole = tmp_path / "deep.json"
    whole.write_text(deep)
    with pytest.raises(InputError, match=r"deep\.json: unknown format"):
        zett_lab.load(whole)
    call = {"id": "t1", "function": {"name": "f", "arguments": deep}}
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}]
    inner = tmp_path / "inner.json"
    inner.write_text(json.dumps({"id": "a", "messages": messages}))
    with pytest.raises(InputError) as error:
        zett_lab.load(inner)
    assert (
        str(error.value) == f"{inner}: message 1, tool_calls[0].function.arguments: "
        "not valid JSON (nested too deeply; zett_lab reads at most 200 levels)"
    )


def _loads_without_blocking(path: Path) -> BaseException | None:
    """Load in a thread, so a read that blocks (a FIFO opened for reading) fails the test instead of hanging it."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            zett_lab.load_all(path)
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 (handed to the test)
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), f"loading {path} blocked"
    return outcome[0]


def test_a_fifo_or_a_device_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    error = _loads_without_blocking(fifo)
    assert isinstance(error, InputError) and str(error) == (
        f"{fifo}: is a FIFO (named pipe), not a file or folder; zett_lab reads recorded files and folders"
    )
    error = _loads_without_blocking(Path("/dev/zero"))
    assert isinstance(error, InputError) and str(error) == (
        "/dev/zero: is a character device, not a file or folder; zett_lab reads recorded files and folders"
    )


def test_a_folder_with_a_fifo_loads_its_files_and_skips_the_fifo(tmp_path):
    WRITERS["neutral-json"](dialogue("fix a.py"), tmp_path)
    os.mkfifo(tmp_path / "pipe.json")
    session = tmp_path / "workspace" / "s1"
    session.mkdir(parents=True)
    os.mkfifo(session / "data.jsonl")  # named like a zettcode session file
    assert _loads_without_blocking(tmp_path) is None
    assert [c.id for c in zett_lab.load_all(tmp_path)] == ["edge"]
