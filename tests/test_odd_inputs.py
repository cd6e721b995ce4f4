"""Odd inputs a hostile but fair user brings: folders with files nobody reads, deep nesting, odd names, full disks.

Every case ends in work done or one clear message naming the file, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zett_lab
from zett_lab.errors import InputError, ZettLabWarning
from zett_lab.load import HEAD_BYTES, detect
from zett_lab.load.neutral_writer import conversation_to_neutral
from zett_lab.show.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small(fixture_conversations):
    return min(fixture_conversations, key=lambda c: len(c.messages))


def _document(conversation, *, extra: dict | None = None, padding: int = 0) -> dict:
    document = conversation_to_neutral(conversation)
    document["id"] = f"{conversation.id}-{padding}"
    if padding:
        document["messages"][-1]["content"] = str(document["messages"][-1].get("content") or "") + "x" * padding
    if extra:
        document.update(extra)
    return document


# -- 6: a folder's files are each read or named -----------------------------------------------------------


def test_a_folder_names_every_file_it_skips_and_the_run_exits_1(tmp_path, small, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(_document(small)))
    odd = {"trace_id": "t-1"}  # a top-level key the neutral reader does not expect
    (folder / "odd-small.json").write_text(json.dumps(_document(small, extra=odd)))
    (folder / "odd-large.json").write_text(json.dumps(_document(small, extra=odd, padding=2 * HEAD_BYTES)))
    (folder / "README.txt").write_text("notes about these logs\n")  # not recorded data: named, not a failure
    (folder / "other.jsonl").write_text('{"event": "start"}\n{"event": "stop"}\n')  # data no reader takes
    out = tmp_path / "all.json"
    code = main(["import", str(folder), "-o", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    for name in ("odd-small.json", "odd-large.json", "other.jsonl"):
        assert f"zett-lab: skipped {folder / name}: " in captured.err
    assert f"zett-lab: not read {folder / 'README.txt'}: unknown format; zett_lab reads: " in captured.err
    assert "(not recorded data: not JSON, JSON lines or SQLite)" in captured.err
    assert "unexpected key(s) ['trace_id']" in captured.err
    assert "1 file(s) read, 3 skipped, 1 not recorded data (named above)" in captured.out
    assert "--skip-unreadable" in captured.err
    assert [c.id for c in zett_lab.load_all(out)] == [f"{small.id}-0"]

    code = main(["import", str(folder), "-o", str(out), "--no-progress", "--force", "--skip-unreadable"])
    captured = capsys.readouterr()
    assert code == 0 and captured.err.count("zett-lab: skipped ") == 3

    (folder / "odd-small.json").unlink()
    (folder / "odd-large.json").unlink()
    (folder / "other.jsonl").unlink()
    code = main(["import", str(folder), "-o", str(out), "--no-progress", "--force"])
    assert code == 0  # notes beside the logs are named, not a failure
    assert "1 file(s) read, 1 not recorded data (named above)" in capsys.readouterr().out


def test_load_all_warns_once_per_skipped_file(tmp_path, small):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(_document(small)))
    (folder / "broken.json").write_text('{"id": "b", "messages": [{"role": "wizard"}]}')
    with pytest.warns(ZettLabWarning, match=r"skipped .*broken\.json: message 0, field 'role'"):
        conversations = zett_lab.load_all(folder)
    assert [c.id for c in conversations] == [f"{small.id}-0"]
    (folder / "notes.md").write_text("# what these logs are\n")
    outcomes: dict[str, tuple[str | None, bool]] = {}
    zett_lab.load_all(
        folder, on_file=lambda path, reason, unreadable: outcomes.update({path.name: (reason, unreadable)})
    )
    assert sorted(outcomes) == ["broken.json", "good.json", "notes.md"]
    assert outcomes["good.json"] == (None, False)
    assert "unknown role 'wizard'" in outcomes["broken.json"][0] and outcomes["broken.json"][1]
    assert "(not recorded data" in outcomes["notes.md"][0] and not outcomes["notes.md"][1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    padding=st.sampled_from([0, 100, HEAD_BYTES // 2, HEAD_BYTES, 2 * HEAD_BYTES]),
    extra=st.sampled_from([None, {"trace_id": "t"}, {"tools": []}]),
    where=st.sampled_from(["first", "last"]),
    as_list=st.booleans(),
)
def test_neutral_detection_does_not_depend_on_file_size(tmp_path_factory, small, padding, extra, where, as_list):
    """The same shape is recognised (and read, or refused naming why) the same way at any size."""
    folder = tmp_path_factory.mktemp("sizes")

    def write(name: str, pad: int) -> Path:
        document = _document(small, padding=pad)
        document["id"] = small.id
        if extra and where == "first":
            document = {**extra, **document}
        elif extra:
            document.update(extra)
        path = folder / name
        path.write_text(json.dumps([document] if as_list else document))
        return path

    path, small_path = write("large.json", padding), write("small.json", 0)

    def outcome(p: Path) -> str:
        try:
            reader = detect(p)
        except InputError as error:
            return "unknown" if "unknown format" in error.problem else f"error: {error.problem}"
        try:
            zett_lab.load_all(p)
        except InputError as error:
            return f"{reader.name} refused: {error.problem.split(':')[0]}"
        return f"{reader.name} read"

    assert outcome(path) == outcome(small_path)
    if extra is None:
        assert outcome(path) == "neutral-json read"
    else:
        assert "read" not in outcome(path).split()[-1:]  # never read as if it were neutral
