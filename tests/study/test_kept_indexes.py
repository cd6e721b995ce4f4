"""Anchor indexes kept beside the summary cache: read instead of built, never stale, never half a result."""

from __future__ import annotations

import shutil
import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import coding_conversation
from tests.readonly import read_only_folder
from tests.study.kept_runs import fresh_sweep, kept_file
from zett_lab.errors import ZettLabWarning
from zett_lab.measure import message_index
from zett_lab.measure.message_index import ConversationIndex, release_indexes
from zett_lab.study import sweep, units
from zett_lab.study.grid import fingerprint
from zett_lab.study.kept import PACKAGE, code_digest, conversation_key
from zett_lab.study.kept_indexes import KeptIndexes, pickled

GRID = dict(max_tokens=[4_000, 8_000], keep_recent_tokens=[1_000], summarizers=["truncate", "mask"])
#: What differs between two runs of the same sweep (time, the worker, how each summary was served).


@pytest.fixture
def conversation(fixture_conversations):
    return max(fixture_conversations, key=lambda c: len(c.messages))


@pytest.fixture
def builds(monkeypatch):
    """Every index built from messages (not taken from a kept or written one), counted; any index is kept."""
    monkeypatch.setattr(units, "KEEP_FROM_CPU_S", 0.0)
    built: list[int] = []
    init = message_index.ConversationIndex.__init__

    def counting(self, messages, *args, **kwargs):
        built.append(len(messages))
        init(self, messages, *args, **kwargs)

    monkeypatch.setattr(message_index.ConversationIndex, "__init__", counting)
    return built


def test_a_second_run_reads_the_kept_index_and_measures_the_same(conversation, builds, tmp_path):
    cache = tmp_path / "cache" / "summaries.sqlite"
    fresh = fresh_sweep(conversation, cache, GRID)
    assert builds == [len(conversation.messages)] and kept_file(KeptIndexes, conversation, cache).is_file()
    again = fresh_sweep(conversation, cache, GRID)
    assert builds == [len(conversation.messages)]  # read, not built
    pd.testing.assert_frame_equal(again, fresh)


@pytest.mark.parametrize("damage", ["truncated", "one byte changed", "not an index"])
def test_a_damaged_kept_index_is_rebuilt_with_one_warning(conversation, builds, tmp_path, damage):
    cache = tmp_path / "summaries.sqlite"
    fresh = fresh_sweep(conversation, cache, GRID)
    path = kept_file(KeptIndexes, conversation, cache)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "one byte changed":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    else:
        path.write_bytes(b"something else entirely")
    with pytest.warns(ZettLabWarning, match=rf"kept anchor index {path} is damaged") as caught:
        again = fresh_sweep(conversation, cache, GRID)
    assert len([w for w in caught if issubclass(w.category, ZettLabWarning)]) == 1
    assert len(builds) == 2  # built again
    pd.testing.assert_frame_equal(again, fresh)
    kept = KeptIndexes.beside(cache)
    assert kept is not None and kept.read(conversation, path.stem) is not None  # and kept whole again


def test_an_index_of_another_conversation_is_not_taken(conversation, fixture_conversations, builds, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    fresh_sweep(conversation, cache, GRID)
    other = next(c for c in fixture_conversations if len(c.messages) != len(conversation.messages))
    shutil.copy(kept_file(KeptIndexes, conversation, cache), kept_file(KeptIndexes, other, cache))
    kept = KeptIndexes.beside(cache)
    assert kept is not None
    with pytest.warns(ZettLabWarning, match="not an index of this conversation"):
        assert kept.read(other, kept_file(KeptIndexes, other, cache).stem) is None
    assert not kept_file(KeptIndexes, other, cache).exists()


def test_the_key_changes_with_the_code_and_another_versions_index_is_never_read(conversation, tmp_path):
    copy = tmp_path / "package"
    shutil.copytree(PACKAGE / "measure", copy / "measure", ignore=shutil.ignore_patterns("__pycache__"))
    before = code_digest(copy)
    metric = copy / "measure" / "message_index.py"
    metric.write_text(metric.read_text() + "\n# a changed metric\n")
    code_digest.cache_clear()
    after = code_digest(copy)
    assert before != after and code_digest(PACKAGE) not in (before, after)

    key = conversation_key(conversation, fingerprint(conversation))
    built = message_index.ConversationIndex(list(conversation.messages), conversation.harness_context).built()
    old, new = KeptIndexes(tmp_path / "kept", before), KeptIndexes(tmp_path / "kept", after)
    old.write(key, pickled(built))
    assert old.read(conversation, key) is not None
    assert new.read(conversation, key) is None  # a changed metric builds its own
    new.write(key, pickled(built))
    assert not old.folder.exists() and new.read(conversation, key) is not None  # the stale one is gone


def test_a_cache_folder_that_cannot_be_written_keeps_no_index_and_measures_the_same(conversation, builds, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    fresh = fresh_sweep(conversation, cache, GRID)
    root = kept_file(KeptIndexes, conversation, cache).parents[1]
    shutil.rmtree(root)
    root.mkdir()
    with read_only_folder(root):
        with pytest.warns(ZettLabWarning, match=rf"cannot keep the anchor index in {root}") as caught:
            again = fresh_sweep(conversation, cache, GRID)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once per process
            third = fresh_sweep(conversation, cache, GRID)
    assert len([w for w in caught if issubclass(w.category, ZettLabWarning)]) == 1
    assert len(builds) == 3 and list(root.iterdir()) == []
    pd.testing.assert_frame_equal(again, fresh)
    pd.testing.assert_frame_equal(third, fresh)


def test_no_index_is_kept_without_a_summary_cache_file(conversation, builds, tmp_path):
    assert KeptIndexes.beside(None) is None and KeptIndexes.beside(":memory:") is None
    fresh = fresh_sweep(conversation, tmp_path / "summaries.sqlite", GRID)
    release_indexes()
    results = sweep(conversation, **GRID, executor="serial", cache=False, reuse=False).results
    pd.testing.assert_frame_equal(results[fresh.columns], fresh)
    assert len(builds) == 2  # built again: nothing kept is read without a cache file


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0), flip=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_a_kept_file_cut_short_or_changed_anywhere_is_never_taken(tmp_path, cut, flip, bit):
    """Whatever byte a kept file loses or has changed (its header, its checksum, the line break between them, its
    pickle), it is found damaged, and the whole file is taken."""
    conversation = coding_conversation(turns=1, output_lines=3, cid="kept-bytes")
    kept = KeptIndexes(tmp_path / "anchor-indexes", "0" * 64)
    kept.write("k", pickled(ConversationIndex(conversation.messages).built()))
    data = kept.file("k").read_bytes()
    assert isinstance(kept._unpickled(data), dict)
    assert isinstance(kept._unpickled(data[: cut % len(data)]), str)
    at = flip % len(data)
    assert isinstance(kept._unpickled(data[:at] + bytes([data[at] ^ (1 << bit)]) + data[at + 1 :]), str)
