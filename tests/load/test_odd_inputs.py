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

ROOT = Path(__file__).resolve().parents[2]


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


# -- 7: no traceback on odd input, every write error names its file ------------------------------------------


def _deep(depth: int) -> str:
    """JSON of objects nested ``depth`` levels deep (built as text: encoding it would overflow Python's stack)."""
    return '{"k":' * (depth - 1) + "{}" + "}" * (depth - 1)


def _with_tool_arguments(small, arguments: str) -> dict:
    document = _document(small)
    messages = document["messages"]
    call = {"id": "deep-1", "type": "function", "function": {"name": "bash", "arguments": arguments}}
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    messages[first_user + 1 : first_user + 1] = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "deep-1", "content": "ok"},
    ]
    return document


def _report(conversation, **options) -> zett_lab.Report:
    """A report of one conversation at one small setting, truncated summaries, built here (no pool, no cache)."""
    return zett_lab.Report.build(
        [conversation],
        summarizers=["truncate"],
        grid={"max_tokens": [1_500], "keep_recent_tokens": [400]},
        executor="serial",
        cache=False,
        date="2025-01-01",
        **options,
    )


@pytest.mark.parametrize("depth", [300, 960])
@pytest.mark.parametrize("command", ["import", "replay", "report"])
def test_arguments_nested_960_levels_deep_are_one_clear_error(tmp_path, small, capsys, command, depth):
    """Deeper than Python's recursion limit allows JSON to be parsed (here), or parsed but deeper than any walk
    of zett_lab's or the engine's may go: one line naming the file, message and field."""
    source = tmp_path / "deep.json"
    source.write_text(json.dumps(_with_tool_arguments(small, _deep(depth))))
    argv = {
        "import": ["import", str(source), "-o", str(tmp_path / "out.json")],
        "replay": ["replay", str(source), "--max-tokens", "2k", "--keep-recent-tokens", "500", "--no-cache"],
        "report": ["report", str(source), "-o", str(tmp_path / "r.html"), "--no-cache", "--no-progress"],
    }[command]
    code = main([*argv, "--no-progress"] if command == "import" else argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"{source}: message 2, tool" in err and "zett_lab reads at most 200 levels" in err


def test_a_file_name_that_is_not_utf8_is_read_and_named(tmp_path, small, capsys):
    import os

    source = Path(os.fsdecode(bytes(tmp_path / "caf") + b"\xe9-log.json"))
    source.write_text(json.dumps(_document(small)))
    for argv in (
        ["import", str(source), "-o", str(tmp_path / "out.json"), "--no-progress"],
        ["replay", str(source), "--max-tokens", "2k", "--keep-recent-tokens", "500", "--no-cache"],
        [
            "report",
            str(source),
            "-o",
            str(tmp_path / "r.html"),
            "--no-cache",
            "--no-progress",
            "--summarizer",
            "truncate",
        ],
    ):
        assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert "caf\\udce9-log.json" in (tmp_path / "r.html").read_text(encoding="utf-8")  # named, as an escape


def test_dollars_in_names_are_text_not_mathtext(small):
    """An id and an engine label a renderer could read as math ("$...$", an unbalanced "\\frac{")."""
    import dataclasses

    from zett_lab.replay.policies import SplitTurnCompaction
    from zett_lab.show.plots import timeline, to_svg

    odd = dataclasses.replace(small, id="use $HOME and $PATH")
    report = _report(odd, engines={"stock": None, "$\\frac{$ policy": SplitTurnCompaction})
    page = report.to_html()
    assert "use $HOME and $PATH" in page and "$\\frac{$ policy" in page
    svg = to_svg(timeline(report.traces[0]))
    assert "use $HOME and $PATH" in svg


def test_bidirectional_controls_in_names_are_shown_in_markdown(small):
    import dataclasses

    odd = dataclasses.replace(small, id="invoice\u202etxt.exe")
    report = _report(odd)
    markdown = report.to_markdown()  # the HTML page isolates them (tests/test_report_browser.py)
    assert "\u202e" not in markdown and "invoice[U+202E]txt.exe" in markdown


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("conversations"), "field 'conversations'"),
        (lambda d: d["config"].pop("summarizers"), "field 'config.summarizers'"),
        (lambda d: next(iter(d["sources"].values())).pop("region"), "region'"),
        (lambda d: next(iter(d["sources"].values())).update(region={"m_lo": "x"}), "wrong shape"),
    ],
)
def test_a_hand_edited_sweep_is_one_clear_error(tmp_path, small, capsys, edit, field):
    grid = zett_lab.sweep(
        [small], max_tokens=[1_500], keep_recent_tokens=[400], summarizers=["truncate"], executor="serial", cache=False
    )
    folder = grid.save(tmp_path / "s.sweep")
    document = json.loads((folder / "sweep.json").read_text())
    edit(document)
    (folder / "sweep.json").write_text(json.dumps(document))
    capsys.readouterr()  # the sweep's own progress bar
    code = main(["report", str(folder), "-o", str(tmp_path / "r.html"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{folder / 'sweep.json'}: " in err and field in err


@pytest.fixture()
def full_disk(tmp_path, monkeypatch):
    """A folder on a full file system: a small tmpfs filled up (root, as CI runs), else ENOSPC injected at the
    OS calls that write files (``os.write``, ``os.sendfile``, and Parquet's writer) for paths inside it."""
    import errno
    import os
    import subprocess

    folder = tmp_path / "full"
    folder.mkdir()
    mounted = False
    if os.geteuid() == 0:
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
            ).returncode
            == 0
        )
    if mounted:
        try:
            with (folder / "filler").open("wb") as filler:
                while True:
                    filler.write(b"\0" * 4096)
                    filler.flush()
        except OSError:  # full: nothing more fits
            pass
    else:
        full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def inside(fd: int) -> bool:
            try:
                return str(folder) in os.readlink(f"/proc/self/fd/{fd}") or os.path.samefile(
                    f"/proc/self/fd/{fd}", folder
                )
            except OSError:
                return False

        real_write, real_sendfile = os.write, os.sendfile
        monkeypatch.setattr(
            os, "write", lambda fd, data: (_ for _ in ()).throw(full) if inside(fd) else real_write(fd, data)
        )
        monkeypatch.setattr(
            os,
            "sendfile",
            lambda out, src, offset, count: (
                (_ for _ in ()).throw(full) if inside(out) else real_sendfile(out, src, offset, count)
            ),
        )
        import pyarrow.parquet as pq

        real_table = pq.write_table
        monkeypatch.setattr(
            pq,
            "write_table",
            lambda table, where, *a, **k: (
                (_ for _ in ()).throw(full) if str(folder) in str(where) else real_table(table, where, *a, **k)
            ),
        )
    yield folder
    if mounted:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.mark.parametrize("command", ["import-sqlite", "import-json", "report", "sweep", "replay"])
def test_a_full_disk_names_the_output_and_leaves_nothing(full_disk, small, tmp_path, capsys, command):
    source = tmp_path / "one.json"
    source.write_text(json.dumps(_document(small)))  # the disk is full: no output fits
    grid = ["--max-tokens", "2k", "--keep-recent-tokens", "500", "--no-cache"]
    argv, out = {
        "import-sqlite": (["import", str(source), "--no-progress"], full_disk / "all.sqlite"),
        "import-json": (["import", str(source), "--no-progress"], full_disk / "all.json"),
        "report": (["report", str(source), "--no-progress", "--summarizer", "truncate", *grid], full_disk / "r.html"),
        "sweep": (["sweep", str(source), "--no-progress", "--summarizer", "truncate", *grid], full_disk / "s.sweep"),
        "replay": (["replay", str(source), *grid], full_disk / "t.json"),
    }[command]
    code = main([*argv, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"zett-lab: error: {out}: could not be written: ") and "No space left on device" in err
    assert sorted(p.name for p in full_disk.iterdir()) in ([], ["filler"])


def test_a_report_warns_before_it_writes_a_page_too_large_to_open_quickly(small, tmp_path, monkeypatch):
    """The warning comes before the write, and only for a page over the limit (here: set to the page's length)."""
    import re
    import warnings

    from zett_lab.errors import ZettLabWarning
    from zett_lab.show.report import core

    report = _report(small)
    length = len(report.to_html())
    monkeypatch.setattr(core, "LARGE_PAGE_CHARS", length)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report.save(tmp_path / "fits.html")  # at the limit: no warning
        report.save(tmp_path / "notes.md")  # Markdown: never
    monkeypatch.setattr(core, "LARGE_PAGE_CHARS", length - 1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        real_write = core.write_atomic
        warned_at_write: list[int] = []
        monkeypatch.setattr(
            core, "write_atomic", lambda *a, **k: (warned_at_write.append(len(seen)), real_write(*a, **k))[1]
        )
        report.save(tmp_path / "large.html")
    assert [w.category for w in seen] == [ZettLabWarning] and warned_at_write == [1]  # warned, then written
    assert re.search(
        r"large\.html: the page is about \d+\.\d MB \(over [0-9.]+ MB\) and opens slowly", str(seen[0].message)
    )
    assert (tmp_path / "large.html").exists()


# -- 7: the property suite over deep nesting, odd file names and text a renderer could interpret --------------

#: Characters a renderer could read as something else: mathtext ($ \ { } _ ^), markup (< > & " '), bidi controls.
RENDERER_TEXT = st.text(
    alphabet=st.sampled_from(list("ab $\\{}_^<>&\"'%#") + ["\u202e", "\u2066", "\u200f", "\u061c", "é"]),
    min_size=1,
    max_size=24,
)


def _nested(kinds: list[bool]) -> object:
    """Data nested ``len(kinds)`` levels deep, each level a dict (True) or a list (False), built without recursion."""
    value: object = "leaf"
    for is_dict in reversed(kinds):
        value = {"k": value} if is_dict else [value]
    return value


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    depth=st.one_of(st.integers(1, 12), st.integers(190, 210), st.integers(211, 600)),
    seed=st.randoms(use_true_random=False),
)
def test_any_nesting_is_read_up_to_the_limit_and_refused_past_it_naming_the_place(tmp_path, small, depth, seed):
    from zett_lab.load.storable import MAX_NESTING

    kinds = [seed.random() < 0.5 for _ in range(depth)]
    arguments = _nested([True, *kinds[1:]])  # tool arguments are an object
    source = tmp_path / f"nested-{depth}.json"
    try:
        text = json.dumps(arguments)
    except RecursionError:  # deeper than json.dumps goes here: written as text, level by level
        text = "".join('{"k":' if k else "[" for k in [True, *kinds[1:]]) + '"leaf"'
        text += "".join("}" if k else "]" for k in reversed([True, *kinds[1:]]))
    source.write_text(json.dumps(_with_tool_arguments(small, text)))
    if depth <= MAX_NESTING:
        (conversation,) = zett_lab.load_all(source)
        call = next(c for m in conversation.messages for c in getattr(m, "tool_calls", None) or ())
        assert call.name == "bash"
    else:
        with pytest.raises(InputError) as error:
            zett_lab.load_all(source)
        message = str(error.value)
        assert message.startswith(f"{source}: message 2, tool") and f"at most {MAX_NESTING} levels" in message


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.binary(min_size=1, max_size=30).filter(lambda b: b"/" not in b and b"\0" not in b))
def test_any_file_name_is_read_imported_and_named(tmp_path, small, capsys, name):
    import os

    folder = tmp_path / "names"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    if name in (b".", b".."):
        name += b"x"
    source = Path(os.fsdecode(bytes(folder) + b"/" + name + b".json"))
    source.write_text(json.dumps(_document(small)))
    (conversation,) = zett_lab.load_all(source)
    assert conversation.source == str(source) or Path(conversation.source) == source
    out = tmp_path / "out.json"
    assert main(["import", str(source), "-o", str(out), "--no-progress", "--force"]) == 0
    shown = capsys.readouterr()
    assert "Traceback" not in shown.err and shown.out.startswith("wrote 1 conversation(s)")
    assert str(out) in shown.out and zett_lab.load(out).messages == conversation.messages


@settings(max_examples=40, deadline=None)
@given(text=RENDERER_TEXT)
def test_any_name_is_drawn_as_the_text_it_is(text):
    """A figure's title and tick label hold the text as written: no mathtext, no parse error, markup escaped."""
    import xml.etree.ElementTree as ET

    from zett_lab.show.plots import to_svg
    from zett_lab.show.plots.base import figure

    fig, ax = figure()
    ax.set_title(text)
    ax.bar([0], [1], tick_label=[text])
    svg = to_svg(fig)
    drawn = ["".join(node.itertext()) for node in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
    assert drawn.count(text) >= 2, (text, drawn)


@settings(max_examples=200, deadline=None)
@given(text=RENDERER_TEXT)
def test_any_bidi_control_is_shown_not_applied(text):
    from zett_lab.show.report.render import BIDI_CONTROLS, neutralise_bidi

    shown = neutralise_bidi(text)
    assert not set(shown) & set(BIDI_CONTROLS)
    assert (
        shown == text
        if not set(text) & set(BIDI_CONTROLS)
        else all(f"[U+{ord(c):04X}]" in shown for c in set(text) & set(BIDI_CONTROLS))
    )


def test_a_name_with_markup_math_and_bidi_is_text_on_the_page(small):
    import dataclasses
    import html

    name = 'x<script>alert(1)</script> & $\\frac{a}{b}$ "q" \u202etxt.exe'
    report = _report(dataclasses.replace(small, id=name))
    page = report.to_html()
    assert "<script>alert(1)" not in page
    assert html.escape("x<script>alert(1)</script> & $\\frac{a}{b}$", quote=False) in page
    assert "[U+202E]txt.exe" in report.to_markdown()


# -- 7: a huge single-line log is parsed from its bytes (bench/single_line_log.py measures the memory) ---------

#: JSON values of every kind, integers past 64 bits and text with lone surrogates and astral characters included.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70) | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES, ascii_only=st.booleans(), bom=st.booleans())
def test_json_bytes_are_read_exactly_as_json_reads_their_text(value, ascii_only, bom):
    """The bytes' parser gives what json gives on the decoded text, or leaves the bytes to json: the same types
    (an integer past 64 bits stays an integer), lone surrogates, NaN, a byte-order mark."""
    from zett_lab.load.storable import decode, loads

    text = json.dumps(value, ensure_ascii=ascii_only)
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")
    assert repr(loads(raw)) == repr(json.loads(decode(raw)))


def test_a_value_nested_deeper_than_python_turns_into_text_is_one_clear_error(tmp_path, small, capsys):
    """Bytes are parsed up to 1,024 levels deep, past where Python's repr stops (here: an id 1,020 lists deep)."""
    document = json.dumps(_document(small))
    source = tmp_path / "deep-id.json"
    source.write_text(document[:-1] + ', "id": ' + "[" * 1_020 + "1" + "]" * 1_020 + "}")  # the last "id" counts
    with pytest.raises(InputError, match=r"deep-id\.json: nested too deeply; zett_lab reads at most 200 levels"):
        zett_lab.load_all(source)
    assert main(["import", str(source), "-o", str(tmp_path / "out.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and str(source) in err, err


def test_text_written_in_pieces_is_the_text_written_whole(tmp_path):
    """write_atomic writes pieces as they come (an import's JSON, never held whole): the same bytes, lone
    surrogates escaped the same way across the megabyte boundaries it gathers them at."""
    from zett_lab.files import write_atomic

    text = "a" * 1_500_000 + "\ud800 é \U0001f600 " * 3 + "b" * 10
    pieces = (text[start : start + 7_001] for start in range(0, len(text), 7_001))
    write_atomic(tmp_path / "whole.txt", text)
    write_atomic(tmp_path / "pieces.txt", pieces)
    assert (tmp_path / "pieces.txt").read_bytes() == (tmp_path / "whole.txt").read_bytes()
