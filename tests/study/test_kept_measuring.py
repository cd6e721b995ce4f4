"""Measuring kept across runs beside the summary cache (the summary lines' keys, the messages' observations):
read back instead of read afresh, with the same results; never half a result."""

from __future__ import annotations

import pickle
import shutil
import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zett_agent.messages import AssistantMessage, UserMessage

from tests.helpers import coding_conversation
from tests.readonly import read_only_folder
from tests.study.kept_runs import fresh_sweep, kept_file
from zett_lab.errors import ZettLabWarning
from zett_lab.load.anchors import anchor_keys
from zett_lab.measure import keyed, line_keys
from zett_lab.measure.line_keys import LineKeys
from zett_lab.measure.message_index import ConversationIndex
from zett_lab.study.kept_measuring import KeptMeasuring, Measuring

#: The offline summarizers whose summaries are lines (read line by line: :mod:`~zett_lab.measure.line_keys`).
GRID = dict(max_tokens=[3_000, 5_000], keep_recent_tokens=[1_000], summarizers=["truncate", "mask", "anchors"])
#: What differs between two runs of the same sweep (time, the worker, how each summary was served).


@pytest.fixture
def conversation():
    """A session whose summaries are longer than a huge paragraph (so their lines are read one by one)."""
    return coding_conversation(turns=12, output_lines=60, cid="kept-measuring")


@pytest.fixture
def fresh(monkeypatch):
    """What a run reads afresh, counted: each summary line's keys extracted, each message list observed."""
    counts = {"lines": 0, "observed": 0}
    extract, observe_all = line_keys.anchor_keys, keyed._observe

    def extracting(line):
        counts["lines"] += 1
        return extract(line)

    def observing(messages):
        counts["observed"] += 1
        return observe_all(messages)

    monkeypatch.setattr(line_keys, "anchor_keys", extracting)
    monkeypatch.setattr(keyed, "_observe", observing)
    return counts


def test_a_second_run_reads_what_the_first_kept_and_measures_the_same(conversation, fresh, tmp_path):
    cache = tmp_path / "cache" / "summaries.sqlite"
    first = fresh_sweep(conversation, cache, GRID)
    assert fresh["lines"] > 20 and fresh["observed"] == 1 and kept_file(KeptMeasuring, conversation, cache).is_file()
    written = kept_file(KeptMeasuring, conversation, cache).stat().st_mtime_ns
    fresh.update(lines=0, observed=0)
    again = fresh_sweep(conversation, cache, GRID)
    assert fresh == {"lines": 0, "observed": 0}  # every line and message read back
    assert kept_file(KeptMeasuring, conversation, cache).stat().st_mtime_ns == written  # nothing new: nothing written
    pd.testing.assert_frame_equal(again, first)
    without = fresh_sweep(conversation, False, GRID)
    pd.testing.assert_frame_equal(without[first.columns], first)


def test_lines_a_run_reads_anew_join_those_kept(conversation, fresh, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    fresh_sweep(conversation, cache, GRID)
    kept = KeptMeasuring.beside(cache)
    assert kept is not None
    whole = kept.read(conversation, kept_file(KeptMeasuring, conversation, cache).stem)
    assert whole is not None
    some = dict(list(whole.lines.lines.items())[::2])
    kept.write(
        kept_file(KeptMeasuring, conversation, cache).stem,
        Measuring(whole.messages, None, whole.lines._replace(lines=some)),
    )
    fresh.update(lines=0, observed=0)
    fresh_sweep(conversation, cache, GRID)
    assert 0 < fresh["lines"] < len(whole.lines.lines) and fresh["observed"] == 1
    fresh.update(lines=0, observed=0)
    fresh_sweep(conversation, cache, GRID)
    assert fresh == {"lines": 0, "observed": 0}


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "not ours", "other messages"])
def test_a_damaged_kept_file_is_read_afresh_with_one_warning(conversation, fresh, tmp_path, damage):
    cache = tmp_path / "summaries.sqlite"
    first = fresh_sweep(conversation, cache, GRID)
    path = kept_file(KeptMeasuring, conversation, cache)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "one byte changed":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    elif damage == "not ours":
        path.write_bytes(b"something else entirely")
    else:
        other = coding_conversation(turns=10, output_lines=60, cid="kept-measuring-other")
        shutil.copy(path, kept_file(KeptMeasuring, other, cache))
        path = kept_file(KeptMeasuring, other, cache)
        conversation = other
        first = fresh_sweep(other, False, GRID)
    fresh.update(lines=0, observed=0)
    with pytest.warns(ZettLabWarning, match=rf"kept measuring {path} is damaged") as caught:
        again = fresh_sweep(conversation, cache, GRID)
    assert len([w for w in caught if issubclass(w.category, ZettLabWarning)]) == 1
    assert fresh["observed"] == 1  # read afresh
    pd.testing.assert_frame_equal(again, first)
    kept = KeptMeasuring.beside(cache)
    assert kept is not None and kept.read(conversation, path.stem) is not None  # and kept whole again


def test_a_cache_folder_that_cannot_be_written_keeps_nothing_and_measures_the_same(conversation, fresh, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    first = fresh_sweep(conversation, cache, GRID)
    root = kept_file(KeptMeasuring, conversation, cache).parents[1]
    shutil.rmtree(root)
    root.mkdir()
    fresh.update(lines=0, observed=0)
    with read_only_folder(root):
        with pytest.warns(ZettLabWarning, match=rf"cannot keep the measuring in {root}") as caught:
            again = fresh_sweep(conversation, cache, GRID)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once per process
            third = fresh_sweep(conversation, cache, GRID)
    assert len([w for w in caught if issubclass(w.category, ZettLabWarning)]) == 1
    assert fresh["observed"] == 2 and list(root.iterdir()) == []
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(third, first)


#: Pieces of summary lines: anchors of every kind (paths, identifiers, errors, numbers, commands, SHAs) and words.
PIECES = [
    "src/app/main.py",
    "./tests/test_api.py",
    "migrations/",
    "ValueError: bad port",
    "ModuleNotFoundError",
    "parse_config()",
    "fooBarBaz",
    "PORT=8080",
    "3.14",
    "42",
    "1,024",
    "`make test`",
    "deadbeef1234567",
    "http://example.com/a?b=1",
    "[assistant]",
    "[tool result grep]",
    "we decided to use Postgres",
    "never touch the schema",
    "the",
    "and",
    " ",
    "-",
    "'",
    '"',
]
line_text = st.lists(st.sampled_from(PIECES), max_size=8).map(" ".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    said=st.lists(line_text, min_size=1, max_size=6),
    lines=st.lists(line_text, min_size=1, max_size=12),
    first=st.integers(min_value=0, max_value=12),
    kept=st.integers(min_value=0, max_value=12),
)
def test_lines_read_back_hold_the_keys_extracting_them_gives(said, lines, first, kept):
    """A conversation stating some pieces, summary lines of any pieces: a line's ids read back from a table (taken
    before any line is read, or after some; the table pickled, joined with lines read here, taken again) are the
    ids of its extracted keys in the conversation."""
    messages = [UserMessage(content=said[0]), *(AssistantMessage(content=text) for text in said[1:])]
    index = ConversationIndex(messages)
    index.arrays  # noqa: B018 - builds key_ids
    wanted = {line: {index.key_ids[k] for k in anchor_keys(line) if k in index.key_ids} for line in lines}

    writer = LineKeys(index)
    for line in lines[:kept]:
        writer.ids(line)
    table = pickle.loads(pickle.dumps(writer.table()))
    reader = LineKeys(ConversationIndex(list(messages)))
    for line in lines[:first]:
        assert set(reader.ids(line)) == wanted[line]
    reader.take(table)
    assert {line: set(reader.ids(line)) for line in lines} == wanted
    again = LineKeys(ConversationIndex(list(messages)))
    again.take(pickle.loads(pickle.dumps(reader.table())))
    assert reader.extracted == 0 and {line: set(again.ids(line)) for line in lines} == wanted
    assert again.extracted == 0 and len(set(again.table().keys)) == len(again.table().keys)  # each key once


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0), flip=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_a_kept_file_cut_short_or_changed_anywhere_is_never_taken(tmp_path, cut, flip, bit):
    """Whatever byte a kept file loses or has changed (its header, its checksum, the line break between them, its
    pickle), it is found damaged, and the whole file is taken."""
    conversation = coding_conversation(turns=1, output_lines=3, cid="kept-bytes")
    index = ConversationIndex(conversation.messages)
    lines = LineKeys(index)
    for line in ("src/app.py failed", "ValueError in parse()", "nothing"):
        lines.ids(line)
    kept = KeptMeasuring(tmp_path / "measuring", "0" * 64)
    observed = keyed.observe(conversation.messages)
    kept.write("k", Measuring(len(conversation.messages), observed, lines.table()))
    data = kept.file("k").read_bytes()
    assert kept._unpickled(data) == Measuring(len(conversation.messages), observed, lines.table())
    assert isinstance(kept._unpickled(data[: cut % len(data)]), str)
    at = flip % len(data)
    assert isinstance(kept._unpickled(data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]), str)
