"""What lets a sweep and a report scale: replays kept on disk, losses measured once, progress, counting."""

from __future__ import annotations

import dataclasses
import pickle
import re
import time

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zett_lab
from tests.helpers import BadSummarizer, coding_conversation
from zett_lab.measure import measure
from zett_lab.progress import Progress, ProgressEvent
from zett_lab.replay import replay
from zett_lab.replay.engine import engine_count_tokens
from zett_lab.study import sweep
from zett_lab.study.results import StoredTrace
from zett_lab.tokens import MemoizingCounter

LOSS_TABLES = ("compactions", "conversation", "probes", "decay")


def assert_same_losses(a, b, tables=LOSS_TABLES) -> None:
    for name in tables:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)


def test_losses_without_the_anchor_table_are_the_same_on_every_fixture(fixture_conversations):
    for conversation in fixture_conversations:
        trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, cache=False)
        full, lean = measure(trace), measure(trace, anchors=False)
        assert_same_losses(full, lean)
        assert len(lean.anchors) == 0 and list(lean.anchors.columns) == list(full.anchors.columns)


@pytest.fixture(scope="module")
def small_sweep(fixture_conversations, tmp_path_factory):
    # search-p95-regression loses an item needed later (products_name_trgm_idx) at the smaller budgets
    chosen = [c for c in fixture_conversations if c.id in ("search-p95-regression", "ci-flaky-kafka")]
    events: list[ProgressEvent] = []
    result = sweep(
        chosen,
        max_tokens=[5_000, 9_000, 60_000, 70_000],
        keep_recent_tokens=[1_000, 3_000],
        executor="serial",
        cache=tmp_path_factory.mktemp("cache") / "c.sqlite",
        progress=events.append,
    )
    return result, events


def test_a_sweep_keeps_replays_on_disk_and_reads_a_cell_back(small_sweep):
    result, _ = small_sweep
    assert result.results["error"].isna().all()
    assert not result.store.read_back  # nothing of a replay's tables was kept in memory by the sweep itself
    for source in result.store.sources.values():
        assert source.folder.file(source.source_id, "steps").is_file()
    stored = dict(result.stored_traces())
    assert set(stored) == set(result.cells())
    for key, trace in stored.items():
        fresh = result.trace(key.conversation_id, key.setting)
        assert isinstance(trace, StoredTrace) and trace.settings == fresh.settings
        pd.testing.assert_frame_equal(trace.steps, fresh.steps)
        pd.testing.assert_frame_equal(trace.compactions, fresh.compactions)
        with pytest.raises(dataclasses.FrozenInstanceError):
            trace.steps = fresh.steps


def test_a_cells_losses_equal_its_traces_measure_for_replayed_and_derived_cells(small_sweep, tmp_path):
    """What a sweep kept of each cell's losses (the tables, and as a report shows them: lost-but-needed rows and
    counted flags) equals measuring the cell's trace, for replayed cells and cells derived from another's
    replay, in memory and saved."""
    from zett_lab.measure.losses import measure_lost_and_counted
    from zett_lab.study.results import Sweep

    result, _ = small_sweep
    saved = Sweep.load(result.save(tmp_path / "saved"))
    kinds, lost_rows = set(), 0
    for row in result.results.itertuples(index=False):
        cell = (row.conversation_id, row.max_tokens, row.keep_recent_tokens)
        trace = result.trace(*cell)
        kinds.add(bool(row.replayed))
        stored = result.losses(*cell, anchors=False)
        assert stored is not None
        assert_same_losses(stored, measure(trace, anchors=False))
        full = result.losses(*cell)
        assert full is not None
        pd.testing.assert_frame_equal(full.anchors, measure(trace).anchors)
        lost, counts = measure_lost_and_counted(trace)
        for sweep_ in (result, saved):
            kept = sweep_.lost_and_counted(*cell)
            assert kept is not None
            assert_same_losses(kept[0], lost, (*LOSS_TABLES, "anchors", "updates"))
            pd.testing.assert_frame_equal(kept[1], counts)
        lost_rows += len(lost.anchors)
    assert kinds == {True, False} and lost_rows > 0


def test_progress_reports_every_cell_once(small_sweep):
    result, events = small_sweep
    assert [e.total for e in events] == [len(result.results)] * len(events)
    assert events[-1].done == len(result.results)
    assert all(later.done > earlier.done for earlier, later in zip(events, events[1:], strict=False))
    assert any(e.worker for e in events)


@pytest.mark.parametrize("executor", ["serial", "threads", "process pool"])
def test_progress_moves_cell_by_cell_inside_one_unit(executor, fixture_conversations, tmp_path):
    """One conversation and one summarizer is one unit per worker: the bar still moves with every cell, wherever it runs."""
    import concurrent.futures as cf

    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    runner = {"serial": "serial", "threads": cf.ThreadPoolExecutor(2), "process pool": None}[executor]
    events: list[ProgressEvent] = []
    result = sweep(
        conversation,
        max_tokens=[4_000, 8_000, 16_000],
        keep_recent_tokens=[1_000, 2_000],
        summarizers=["truncate"],
        executor=runner,
        cache=tmp_path / "c.sqlite",
        progress=events.append,
        metrics=False,
        reuse=False,
    )
    assert result.results["error"].isna().all()
    assert result.config["units"] <= 2  # counting finished units would give at most two events
    assert [e.done for e in events] == [1, 2, 3, 4, 5, 6]
    assert {e.total for e in events} == {6} and all(e.worker for e in events)


def test_loading_many_files_reports_progress_per_file(tmp_path, fixture_conversations):
    for conversation in fixture_conversations[:3]:
        conversation.save(tmp_path / f"{conversation.id}.json")
    (tmp_path / "notes.txt").write_text("not a recording")
    events: list[ProgressEvent] = []
    loaded = zett_lab.load_all(tmp_path, progress=events.append)
    assert sorted(c.id for c in loaded) == sorted(c.id for c in fixture_conversations[:3])
    assert [e.done for e in events] == [1, 2, 3, 4] and events[-1].total == 4


def test_the_counter_gives_the_engines_integers_on_growing_and_shrinking_sequences(fixture_conversations):
    """Counts that extend an earlier count at either end (the context, the cutoff walk) stay exact."""
    counter = MemoizingCounter()
    messages = max(fixture_conversations, key=lambda c: len(c.messages)).messages
    checks = [messages[:n] for n in range(0, len(messages), 7)]  # the context growing
    checks += [messages[-n:] for n in range(1, 120)]  # the walk: a window growing at the front
    checks += [messages[5:n] for n in range(40, 200, 13)]  # unrelated sequences in between
    checks += [tuple(messages[:150]), list(messages[:150]), messages[:149]]
    for sequence in checks:
        assert counter(sequence) == engine_count_tokens(sequence)


def test_the_progress_bar_shows_the_rate_and_the_time_left(capsys):
    """In a terminal the bar (tqdm) appears once the work takes a second, with done/total, elapsed<left and a rate."""
    quiet = Progress(total=4, label="sweep", show=False)
    tracker = Progress(total=4, label="sweep", show=True)
    time.sleep(1.1)
    for _ in range(2):
        quiet.advance(1)
        tracker.advance(1)
    tracker.close()
    quiet.close()
    shown = capsys.readouterr().err
    assert re.search(r"sweep: +50%.*2/4 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(cell/s|s/cell)\]", shown), shown
    assert shown.count("sweep:") >= 1 and quiet.done == 2


def test_one_scan_for_every_needle_finds_what_one_search_per_anchor_finds(fixture_conversations):
    """Every anchor of every fixture, against every summary of a replay: the automaton's answer is the search's."""
    from zett_lab.measure.lookup import TextIndex
    from zett_lab.measure.message_index import index_of

    compared = found = 0
    for conversation in fixture_conversations:
        index = index_of(conversation.messages)
        trace = replay(conversation, max_tokens=5_000, keep_recent_tokens=1_000, summarizer="anchors", cache=False)
        texts = [t for t in trace.compactions["summary_text"] if isinstance(t, str)]
        texts.append(index.joined(0, len(conversation.messages) // 2))  # a long text holding many of them
        for text in texts:
            searched, scanned = TextIndex(text), TextIndex(text)
            for key in index.occurrences:
                answer = searched.contains(key)
                assert scanned.contains(key, index.needles) == answer, (conversation.id, key)
                compared += 1
                found += answer
    assert compared > 10_000 and 0 < found < compared


def test_the_extractive_duplicate_check_gives_the_floats_of_indexing_the_taken_rows(fixture_conversations):
    """The grown matrix of taken units answers exactly what ``matrix[taken] @ matrix[i].T`` answers."""
    from zett_lab.summarizers.offline.selection import _Chosen, _tfidf, line_units
    from zett_lab.summarizers.transcript import segments

    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    units = line_units(segments(conversation.messages), split_sentences=True)
    matrix, _ = _tfidf([u.text for u in units])
    chosen = _Chosen(matrix)
    taken: list[int] = []
    for i in range(0, len(units), 3):
        expected = (matrix[taken] @ matrix[i].T).max() if taken else 0.0
        assert chosen.max_similarity(i) == expected, i
        if i % 2:
            chosen.add(i)
            taken.append(i)
    assert len(taken) > 50


def test_the_anchors_of_a_span_as_arrays_are_what_a_loop_over_its_messages_finds(fixture_conversations):
    """Order, first message, tail, future and next use of every span anchor, against a plain loop (shown and
    used in any spelling: :func:`~zett_lab.load.anchor_forms.spellings`; shown as words of any text too; a command
    made of parts is in the tail where each of its parts is; a member ``self.x`` is used by a spelling naming its
    object, or by a bare ``x`` before another object's ``x`` occurs)."""
    from bisect import bisect_left

    from zett_agent.messages import AssistantMessage, SystemMessage

    from tests.helpers import as_words
    from zett_lab.load.anchor_forms import spellings
    from zett_lab.load.anchors import action_keys
    from zett_lab.measure.message_index import _parts_of, index_of
    from zett_lab.measure.spellings import _OWN_OBJECT

    def first(positions, start, end):
        at = bisect_left(positions, start)
        return positions[at] if at < len(positions) and positions[at] < end else None

    def showing(keys, folders=True):
        """What an occurrence of each of ``keys`` shows: its forms (and folders), and the keys' own forms."""
        spelled = [spellings(k) for k in keys]
        return (
            {f for s in spelled for f in (s.forms | s.prefixes if folders else s.forms)},
            {s.canonical for s in spelled},
        )

    def member(key):
        return key[0] == "identifier" and spellings(key).canonical.split("/")[0] in _OWN_OBJECT

    def bare(key):
        return "/" not in spellings(key).canonical

    def rival_from(key, index, n):
        """For ``self.x``: the first message holding another identifier ending in ``x`` (n: none)."""
        own = spellings(key).canonical.split("/")
        if len(own) != 2:
            return 0
        rivals = [
            k
            for k in index.occurrences
            if k[0] == "identifier"
            and len(parts := spellings(k).canonical.split("/")) > 1
            and parts[-1] == own[1]
            and parts != own
        ]
        return min((index.occurrences[k][0] for k in rivals), default=n)

    def shown(key, seen):
        spelling = spellings(key)
        return spelling.canonical in seen[0] or bool(spelling.forms & seen[1])

    def tail_shows(key, view, end, recorded):
        """Shown in the kept tail or the system prompt, in any spelling or as words of any of its texts."""
        system, by_message, system_texts, texts = view
        tail = shown(key, system) or any(shown(key, by_message[i]) for i in range(end, min(recorded, len(texts))))
        return tail or any(as_words(key, text) for text in [*system_texts, *texts[end:recorded]])

    checked = 0
    for conversation in fixture_conversations:
        index, n = index_of(conversation.messages), len(conversation.messages)
        id_of = {key: i for i, key in enumerate(index.arrays.keys)}
        by_message = [showing(keys) for keys in index.keys_by_message]
        system = showing(index.system_keys)
        texts = [index.text(i) for i in range(n)]
        system_texts = [t for t, m in zip(texts, conversation.messages, strict=True) if isinstance(m, SystemMessage)]
        used = [action_keys(m) if isinstance(m, AssistantMessage) else [] for m in conversation.messages]
        agent = [showing(keys, folders=False) for keys in used]
        agent_members = [showing([k for k in keys if member(k)], folders=False) for keys in used]
        agent_bare = [showing([k for k in keys if bare(k)], folders=False) for keys in used]
        spans = [(0, n // 3, n // 2), (1, n // 2, n // 2), (n // 4, 3 * n // 4, n), (0, n, n), (0, n // 2, n + 3)]
        spans += [(n // 2, n // 2, n), (n // 2, n // 4, n), (1, n // 3, n // 3)]  # empty spans; a start seen before
        for start, end, recorded in spans:
            expected: dict = {}
            for at in range(start, end):
                for key in index.keys_by_message[at]:
                    expected.setdefault(key, at)
            span = index.span_anchors(start, end, recorded)
            keys = [index.arrays.keys[i] for i in span.ids.tolist()]

            assert keys == list(expected) and span.first_index.tolist() == list(expected.values())
            for position, key in enumerate(keys):
                occurrences = index.occurrences[key]
                parts = _parts_of(key, id_of) if key[0] == "command" else []
                view = (system, by_message, system_texts, texts)
                tail = tail_shows(key, view, end, recorded) or bool(
                    parts and all(tail_shows(part, view, end, recorded) for part in parts)
                )
                assert bool(span.in_tail[position]) == tail, key
                assert bool(span.in_future[position]) == (first(occurrences, recorded, n) is not None), key
                if member(key):
                    until = rival_from(key, index, n)
                    use = next(
                        (
                            i
                            for i in range(recorded, n)
                            if shown(key, agent_members[i]) or (i < until and shown(key, agent_bare[i]))
                        ),
                        None,
                    )
                else:
                    use = next((i for i in range(recorded, n) if shown(key, agent[i])), None)
                assert span.next_use[position] == (-1 if use is None else use), key
                checked += 1
    assert checked > 5_000


def test_the_anchor_table_joins_each_attempts_span_anchors_in_order(fixture_conversations):
    """``losses.anchors`` is built once from every attempt's arrays: each attempt's rows must be its own
    span anchors (as many as ``span_anchors``, in span order), with that attempt's columns and each key's texts."""
    from zett_lab.measure.message_index import index_of

    checked = 0
    for conversation in fixture_conversations:
        trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, cache=False)
        losses = measure(trace)
        index = index_of(trace.conversation.messages)
        with_rows = losses.compactions[
            losses.compactions["span_anchors"].gt(0) & losses.compactions["retained_anchors"].notna()
        ]
        assert list(losses.anchors["compaction_id"].unique()) == list(with_rows["compaction_id"])
        for attempt in with_rows.itertuples():
            rows = losses.anchors[losses.anchors["compaction_id"] == attempt.compaction_id]
            record = trace.compactions.set_index("compaction_id").loc[attempt.compaction_id]
            span = index.span_anchors(int(record["span_start"]), int(record["span_end"]), int(record["n_recorded"]))
            keys = [index.arrays.keys[i] for i in span.ids]
            assert len(rows) == attempt.span_anchors == len(keys)
            assert list(zip(rows["type"], rows["normalized"], strict=True)) == keys
            assert list(rows["value"]) == [index.first_value[key] for key in keys]
            assert list(rows["message_index"]) == span.first_index.tolist()
            assert set(rows["applied"]) == {bool(attempt.applied)}
            assert int(rows["in_summary"].sum()) == attempt.retained_anchors
            assert int(rows["lost_but_needed"].sum()) == attempt.lost_but_needed
            checked += len(rows)
        assert (losses.anchors["conversation_id"] == conversation.id).all()
    assert checked > 1_000


def test_lost_rows_and_counted_flags_are_those_of_the_full_anchor_table(fixture_conversations):
    """What a report keeps of a replay shown in full, made from arrays, equals taking it from the whole table:
    the rows it lists (lost but needed, dropped constraints) and the flags counted (every fixture with two summarizers, and attempts not applied)."""
    from zett_lab.measure.anchor_rows import retention_counts
    from zett_lab.measure.losses import measure_lost_and_counted

    replays = [
        replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, summarizer=summarizer, cache=False)
        for conversation in fixture_conversations
        for summarizer in ("extractive", "truncate:0.5")
    ]
    # summaries that are not smaller: attempts not applied
    replays.append(
        replay(
            coding_conversation(turns=4),
            max_tokens=600,
            keep_recent_tokens=200,
            summarizer=BadSummarizer("huge"),
            cache=False,
        )
    )
    lost_rows, not_applied = 0, 0
    for trace in replays:
        full = measure(trace)
        kept, counts = measure_lost_and_counted(trace)
        pd.testing.assert_frame_equal(kept.anchors, full.listed())
        pd.testing.assert_frame_equal(counts, retention_counts(full.anchors))
        assert_same_losses(kept, full, (*LOSS_TABLES, "updates"))
        assert counts["anchor_rows"].sum() == len(full.anchors)
        lost_rows += len(kept.anchors)
        not_applied += int(counts.loc[~counts["applied"], "anchor_rows"].sum())
    assert lost_rows > 100 and not_applied > 0


def test_refetches_are_the_later_tool_calls_that_name_a_lost_artifact(fixture_conversations):
    """``refetch_calls``, ``refetched_anchors`` and each anchor row's ``refetched`` against a walk over the
    tool calls: a call from ``n_recorded`` on whose artifact keys meet the span's artifacts in neither T_k nor Σ_k."""
    from zett_lab.load.anchor_forms import ARTIFACT_TYPES
    from zett_lab.measure.message_index import index_of

    refetches = 0
    for conversation in fixture_conversations:
        trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, cache=False)
        losses = measure(trace)
        index = index_of(trace.conversation.messages)
        recorded = trace.compactions.set_index("compaction_id")["n_recorded"]
        for attempt in losses.compactions[losses.compactions["retained_anchors"].notna()].itertuples():
            rows = losses.anchors[losses.anchors["compaction_id"] == attempt.compaction_id]
            keys = list(zip(rows["type"], rows["normalized"], strict=True))
            lost = {
                key
                for key, tail, kept in zip(keys, rows["in_tail"], rows["in_summary"], strict=True)
                if key[0] in ARTIFACT_TYPES and not tail and not kept
            }
            hits = [call_keys & lost for at, call_keys in index.tool_calls if at >= recorded[attempt.compaction_id]]
            refetched = set().union(*hits)
            assert attempt.refetch_calls == sum(1 for hit in hits if hit)
            assert attempt.refetched_anchors == len(refetched)
            assert {key for key, flag in zip(keys, rows["refetched"], strict=True) if flag} == refetched
            refetches += attempt.refetch_calls
    assert refetches > 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["path", "command", "error", None]),
            *[st.sampled_from([True, False, None])] * 5,
        ),
        max_size=60,
    )
)
def test_retention_counts_are_the_flags_grouped_and_counted(rows):
    """The counted flags the report keeps equal a plain groupby of the per-anchor table (missing flags False,
    rows without a type not counted), sorted the same way."""
    from zett_lab.measure.anchor_rows import retention_counts
    from zett_lab.measure.columns import ANCHOR_ROWS, RETENTION_COLUMNS

    anchors = pd.DataFrame(rows, columns=RETENTION_COLUMNS)
    for name in RETENTION_COLUMNS[1:]:
        anchors[name] = anchors[name].astype("boolean")
    anchors["type"] = anchors["type"].astype(object)
    counted = retention_counts(anchors)
    if not len(anchors):
        assert list(counted.columns) == [*RETENTION_COLUMNS, ANCHOR_ROWS] and not len(counted)
        return
    flags = {name: anchors[name].fillna(False).astype(bool) for name in RETENTION_COLUMNS[1:]}
    expected = (
        pd.DataFrame({"type": anchors["type"], **flags})
        .groupby(RETENTION_COLUMNS, sort=True)
        .size()
        .rename(ANCHOR_ROWS)
        .reset_index()
    )
    expected["type"] = expected["type"].astype(object)  # text as plain objects, as in every measure table
    pd.testing.assert_frame_equal(counted, expected)


def test_units_of_one_conversation_share_one_message_list_and_its_index(fixture_conversations):
    """Each unit arrives with its own copy of a conversation: a worker swaps in the list it holds for the same
    fingerprint (so the anchor index is built once), keeping the copy's own other fields."""
    import copy
    import dataclasses

    from zett_lab.measure.message_index import index_of
    from zett_lab.study.grid import fingerprint
    from zett_lab.study.units import shared_messages

    original = next(c for c in fixture_conversations if c.id == "billing-rounding")
    first = shared_messages(original, fingerprint(original))
    arrived = dataclasses.replace(copy.deepcopy(original), probes=[], metadata={"unit": 2})
    second = shared_messages(arrived, fingerprint(arrived))
    assert second.messages is first.messages and second.messages is not arrived.messages
    assert second.probes == [] and second.metadata == {"unit": 2}
    assert index_of(second.messages) is index_of(first.messages)
    other = next(c for c in fixture_conversations if c.id == "ci-flaky-kafka")
    assert shared_messages(other, fingerprint(other)).messages is other.messages
    shorter = dataclasses.replace(copy.deepcopy(original), messages=copy.deepcopy(original.messages[:-1]))
    assert shared_messages(shorter, fingerprint(original)).messages is shorter.messages  # not the same list: kept


def test_the_simulated_schedule_hands_units_to_the_first_free_worker_and_builds_each_index_once():
    """bench/schedule.py: list scheduling of a sweep's units; a conversation's index built by its first unit to
    start, read by another worker's first unit of it, free on a worker that ran the conversation before."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from schedule import critical_path, simulate, sweep_seconds

    units = [
        {"conversation_id": "a", "cpu_s": 10.0, "setup_cpu_s": 2.0},  # built "a"'s index
        {"conversation_id": "a", "cpu_s": 9.5, "setup_cpu_s": 0.5},  # read it
        {"conversation_id": "b", "cpu_s": 5.0, "setup_cpu_s": 1.0},
        {"conversation_id": "a", "cpu_s": 4.0, "setup_cpu_s": 0.0},  # ran where "a" was set up already
    ]
    # One worker: everything in turn, each index built once and never read.
    assert sweep_seconds(units, 1) == 8 + 2 + 9 + 4 + 1 + 4
    # Two: a(10, builds) | a(9.5, reads: 9.5) then b(5) from 9.5 | a(4) from 10 on a worker that has "a".
    assert sweep_seconds(units, 2) == 14.5
    # As many workers as units: the first "a" builds, the other two read (the last 4 + 0.5); the longest is 10.
    assert sweep_seconds(units, 64) == 10
    schedule = {"units": units, "prepare_s": 1.0, "finish_s": 2.0, "driver_cpu_s": 0.0}
    assert simulate(schedule, 2) == 17.5 and simulate(schedule, 64) == 13 == critical_path(schedule)
    # A unit measured as the builder first in the sweep's order elsewhere still pays the build where it starts first.
    swapped = [units[1], units[0], units[2], units[3]]
    assert sweep_seconds(swapped, 64) == 9 + 2 == critical_path({**schedule, "units": swapped}) - 3
    # Nothing read anywhere (one worker ran them): a later worker pays the build again.
    alone = [{**u, "setup_cpu_s": 0.0} if u["cpu_s"] == 9.5 else u for u in units]
    assert sweep_seconds(alone, 64) == 9.5 + 2
    # The report's process receives every unit: the sweep stage takes at least its CPU time there.
    assert (
        simulate({**schedule, "driver_cpu_s": 20.0}, 2) == 23
        and critical_path({**schedule, "driver_cpu_s": 20.0}) == 23
    )
    with pytest.raises(ValueError):
        sweep_seconds(units, 0)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \n\t\u00a0x")), max_size=800), st.integers(1, 120))
def test_an_excerpt_of_a_texts_start_collapses_only_its_start_and_is_the_same(text, width):
    """The explorer's summary excerpts read the start of summaries of hundreds of thousands of characters."""
    from zett_lab.report.lost import excerpt

    flat = " ".join(text.split())
    assert excerpt(text, None, width) == (flat[: 2 * width] + ("…" if len(flat) > 2 * width else "") if flat else "")


_CLAUSE_WORDS = ["never", "always", "not", "don't", "use", "tabs", "tests", "database", "production", "write", "run"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*_CLAUSE_WORDS, ".", ";", "\n", "\n\n", "the"]), max_size=60),
    st.lists(st.lists(st.sampled_from(_CLAUSE_WORDS), min_size=0, max_size=6), max_size=8),
)
def test_a_sentence_is_found_in_a_summary_by_the_clauses_sharing_its_words_as_by_every_clause(words, sentences):
    """Asked of every constraint and decision of a span, a summary counts only the clauses sharing a content word
    with the sentence: the same answer as counting every clause."""
    from zett_lab.measure.lookup import SENTENCE_MATCH, Clauses, _content_words, _negated

    clauses = Clauses(" ".join(words))
    for sentence in (" ".join(s) for s in sentences):
        words_ = _content_words(sentence)
        wanted = {word for word in words_ if not _negated(frozenset({word}))}
        expected = bool(wanted) and any(
            len(wanted & clause) >= SENTENCE_MATCH * len(wanted) and _negated(clause) == _negated(words_)
            for clause in clauses.words
        )
        assert clauses.holds(sentence) == expected


def test_a_conversation_on_several_workers_has_its_index_built_once_for_all(
    fixture_conversations, tmp_path, monkeypatch
):
    """Units of one conversation sent as several tasks: the first to start writes its built anchor index once, the
    workers measure with it as with their own (results equal a serial sweep's), and the sweep's folder keeps no
    index."""
    import concurrent.futures as cf

    from zett_lab.measure.message_index import release_indexes
    from zett_lab.study import collect
    from zett_lab.study.sources import TableWriter

    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    release_indexes()  # (as a fresh worker: a worker that holds the index already builds none for the others)
    written: list[str] = []
    write_index = TableWriter.write_index

    def recording(self, fingerprint, payload):
        written.append(fingerprint)
        built = pickle.loads(payload)
        assert built["_arrays"] is not None and built["_needles"] is not None and "messages" not in built
        write_index(self, fingerprint, payload)

    monkeypatch.setattr(TableWriter, "write_index", recording)
    grid = dict(max_tokens=[4_000, 8_000], keep_recent_tokens=[1_000], summarizers=["truncate", "mask"])
    with cf.ThreadPoolExecutor(2) as threads:
        pooled = sweep(conversation, **grid, executor=threads, cache=tmp_path / "c.sqlite", reuse=False)
    serial = sweep(conversation, **grid, executor="serial", cache=tmp_path / "c.sqlite", reuse=False)
    assert len(written) == 1 and collect.BATCH_SHARE < 0.5
    assert not any(source.folder.path.joinpath("indexes").exists() for source in pooled.store.sources.values())
    columns = [c for c in serial.results.columns if c not in ("seconds", "worker", "model_calls", "cache_hits")]
    assert serial.results["error"].isna().all() and "needed_anchor_recall" in columns
    pd.testing.assert_frame_equal(pooled.results[columns], serial.results[columns])


def test_a_worker_takes_the_index_another_wrote_instead_of_building_its_own(fixture_conversations, tmp_path):
    import types

    from zett_lab.measure.message_index import ConversationIndex, held_index, release_indexes
    from zett_lab.study.grid import fingerprint
    from zett_lab.study.kept_indexes import pickled
    from zett_lab.study.regions import Region
    from zett_lab.study.reuse import Proven
    from zett_lab.study.sources import SourceFolder
    from zett_lab.study.units import _index_conversation

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    trace = replay(conversation, max_tokens=4_000, keep_recent_tokens=1_000, summarizer="truncate")
    folder = SourceFolder(tmp_path / "sweep")
    key = fingerprint(conversation)
    assert folder.writer.claim_index(key) and not folder.writer.claim_index(key)  # one builder
    folder.writer.write_index(
        key, pickled(ConversationIndex(list(conversation.messages), conversation.harness_context).built())
    )
    unit = types.SimpleNamespace(metrics=True, tables_to=folder.writer, fingerprint=key)
    release_indexes()
    _index_conversation([Proven.of("s", Region.point(4_000, 1_000, "test"), trace)], unit, None)
    taken = held_index(conversation.messages, conversation.harness_context)
    assert taken is not None and taken._arrays is not None  # built lazily, on first measuring, by the index itself
    folder.writer.remove_indexes()
    assert not folder.writer.index_file(key).exists()


def test_anchors_units_on_several_workers_share_their_lines_items_and_summarize_the_same(
    fixture_conversations, tmp_path, monkeypatch
):
    """The first anchors unit of a conversation sent as several tasks leaves its lines' items in the sweep's folder
    after its first replay (once), each the value extracting that line gives; a later unit takes them; a pooled
    sweep equals a serial one."""
    import concurrent.futures as cf

    from zett_lab.measure.message_index import release_indexes
    from zett_lab.study.sources import SourceFolder, TableWriter
    from zett_lab.summarizers.offline import selection

    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    release_indexes()
    selection.forget_lines()
    left: list[dict] = []
    write_index = TableWriter.write_index

    def recording(self, fingerprint, payload, what="index"):
        if what == "lines":
            left.append(pickle.loads(payload))
        write_index(self, fingerprint, payload, what)

    monkeypatch.setattr(TableWriter, "write_index", recording)
    grid = dict(max_tokens=[4_000, 8_000], keep_recent_tokens=[1_000, 2_000], summarizers=["anchors"])
    with cf.ThreadPoolExecutor(2) as threads:
        pooled = sweep(conversation, **grid, executor=threads, cache=tmp_path / "c.sqlite", reuse=False)
    selection.forget_lines()
    serial = sweep(conversation, **grid, executor="serial", cache=tmp_path / "c.sqlite", reuse=False)
    assert len(left) == 1 and len(left[0]) > 100
    assert all(selection._extract_line_items(*key) == items for key, items in left[0].items())
    columns = [c for c in serial.results.columns if c not in ("seconds", "worker", "model_calls", "cache_hits")]
    pd.testing.assert_frame_equal(pooled.results[columns], serial.results[columns])

    folder = SourceFolder(tmp_path / "sweep")
    folder.writer.write_index("conversation", pickle.dumps(left[0]), "lines")
    selection.forget_lines()
    folder.writer.take_lines("conversation")
    assert selection.remembered_lines() == left[0]  # (and no segment's candidates: made from the lines taken)
    span = conversation.messages[: len(conversation.messages) // 2]
    anchors = zett_lab.summarizer("anchors", budget=400)
    taken = anchors.summarize(span)
    selection.forget_lines()
    assert anchors.summarize(span) == taken  # as from lines extracted afresh


def test_a_worker_waits_for_a_claimed_index_instead_of_building_its_own(tmp_path):
    """While another worker holds the claim to a conversation's index, a reader waits for it to be written; with no
    claim, or a claim given up, it does not wait."""
    import threading
    import time

    from zett_lab.study.sources import SourceFolder

    writer = SourceFolder(tmp_path / "sweep").writer
    assert writer.wait_index("a", timeout=60) is None  # nobody claimed it: no wait
    assert writer.claim_index("a")
    threading.Timer(0.3, writer.write_index, ("a", pickle.dumps({"built": True}))).start()
    began = time.monotonic()
    assert writer.wait_index("a", timeout=60) == {"built": True} and time.monotonic() - began >= 0.2
    assert writer.claim_index("b")
    assert writer.wait_index("b", timeout=0.2) is None  # never written: given up after the timeout
    writer.release_index("b")
    began = time.monotonic()
    assert writer.wait_index("b", timeout=60) is None and time.monotonic() - began < 5
