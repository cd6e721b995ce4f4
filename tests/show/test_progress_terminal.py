"""``zett-lab import`` of many files shows tqdm's terminal bar on stderr, with the time left, once it takes a second."""

from __future__ import annotations

import importlib
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from zett_lab.show import cli

LOADING = importlib.import_module("zett_lab.load")  # the package: the name zett_lab.load is its load()

FILES = 10
#: Seconds each file takes to read here: slow enough that the import outlasts the bar's one-second delay.
READ_S = 0.25
#: One state of tqdm's bar: label, percent, done/total [elapsed<time left, rate].
BAR = re.compile(
    r"load: +(?P<percent>\d+)%\|[^|]*\| (?P<done>\d+)/(?P<total>\d+) "
    r"\[\d\d:\d\d<(?P<left>\d\d:\d\d|\?), +(?P<rate>[\d.]+|\?)(?:file/s|s/file)\]"
)


@pytest.fixture
def recordings(tmp_path: Path, fixture_conversations: list) -> Path:
    """A folder of ``FILES`` recordings, each one file."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for n in range(FILES):
        conversation = fixture_conversations[n % len(fixture_conversations)]
        replace(conversation, id=f"{conversation.id}-{n}").save(folder / f"{n:02d}.json")
    return folder


def test_import_of_many_files_shows_a_bar_with_the_time_left(recordings, tmp_path, monkeypatch, capsys):
    read_with = LOADING.read_with

    def slow_read(reader, path):  # a large file on a slow disk, deterministically
        time.sleep(READ_S)
        return read_with(reader, path)

    monkeypatch.setattr(LOADING, "read_with", slow_read)
    out = tmp_path / "all.json"
    assert cli.main(["import", str(recordings), "-o", str(out)]) == cli.EXIT_OK
    shown = capsys.readouterr()
    states = [m.groupdict() for m in BAR.finditer(shown.err)]
    assert states, shown.err
    assert all(s["total"] == str(FILES) for s in states)
    done = [int(s["done"]) for s in states]
    assert done == sorted(done) and done[-1] == FILES and done[0] < FILES  # it moved while the import ran
    # reading at most 1/READ_S files a second, halfway there is still more than a second to go
    assert any(s["left"] not in ("?", "00:00") and int(s["done"]) < FILES for s in states), shown.err
    assert (states[-1]["percent"], states[-1]["left"]) == ("100", "00:00") and states[-1]["rate"] != "?"
    assert shown.err.endswith("\n")  # the finished bar stays, on its own line
    assert re.fullmatch(
        rf"wrote {FILES} conversation\(s\), .* to {re.escape(str(out))} in \d+\.\d s; {FILES} file\(s\) read",
        shown.out.strip(),
    )
