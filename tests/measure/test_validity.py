"""bench/validity.py and its validation set: the statistics, the label format, the committed split, and a run
end to end on a tiny synthetic set built from the bundled fixtures (never invented labels of real items)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import validity  # noqa: E402
import validity_pool  # noqa: E402

FIXTURES = BENCH.parent / "fixtures"


def test_wilson_interval_has_the_published_values():
    low, high = validity.wilson(0.8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    low, high = validity.wilson(0.0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    assert all(math.isnan(x) for x in validity.wilson(0.5, 0))


def test_weighted_rate_is_horvitz_thompson_with_kish_effective_n():
    plain = validity.weighted_rate([True] * 8 + [False] * 2, [3.0] * 10)
    assert plain.estimate == pytest.approx(0.8) and plain.n_effective == pytest.approx(10)
    assert (plain.low, plain.high) == pytest.approx(validity.wilson(0.8, 10))
    # two strata: one hit of weight 10 and one miss of weight 1, then two misses of weight 1
    mixed = validity.weighted_rate([True, False, False, False], [10.0, 1.0, 1.0, 1.0])
    assert mixed.estimate == pytest.approx(10 / 13)
    assert mixed.n_effective == pytest.approx(13 * 13 / 103)
    assert (mixed.hits, mixed.n) == (1, 4)
    assert validity.weighted_rate([], []).n == 0


def test_clustered_rate_counts_an_anchor_once_however_many_windows_repeat_it():
    hits = [True] * 8 + [False] * 2
    alone = validity.weighted_rate(hits, [1.0] * 10, ["c"] * 10, list(range(10)))
    # with-replacement variance of 10 independent clusters: p(1 - p) / (n - 1)
    assert alone.n_effective == pytest.approx(9)
    repeated = validity.weighted_rate(hits * 3, [1.0] * 30, ["c"] * 30, list(range(10)) * 3)
    assert repeated.estimate == pytest.approx(0.8)
    assert validity.weighted_rate(hits * 3, [1.0] * 30).n_effective == pytest.approx(30)
    assert repeated.n_effective == pytest.approx(9)
    assert (repeated.low, repeated.high) == pytest.approx(validity.wilson(0.8, 9))


def test_clustered_rate_takes_no_variance_from_between_strata_and_never_exceeds_kish():
    # every stratum is all hits or all misses: nothing varies within a stratum, so the design adds nothing
    hits = [True] * 6 + [False] * 4
    strata = ["a"] * 6 + ["b"] * 4
    rate = validity.weighted_rate(hits, [1.0] * 10, strata, list(range(10)))
    assert rate.n_effective == pytest.approx(10)
    # p = 1: the variance says nothing, Kish's n stands
    whole = validity.weighted_rate([True] * 5, [2.0] * 5, ["a"] * 5, [0, 0, 1, 1, 2])
    assert whole.n_effective == pytest.approx(5) and whole.estimate == 1.0
    # a stratum with one cluster adds its squared total
    lonely = validity.clustered_variance([True, False, True], [1.0, 1.0, 1.0], ["a", "a", "b"], [0, 1, 2])
    p = 2 / 3
    within_a = 2 * ((1 - p) / 3 - (0 - p) / 3) ** 2 / 2
    assert lonely == pytest.approx(within_a + ((1 - p) / 3) ** 2)


def test_precision_and_recall_cluster_by_the_tables_anchor_within_its_conversation():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "needed": [True, True, False, False, True, True],
            "flag": [True] * 6,
            "weight": [1.0] * 6,
            "conversation": ["x"] * 6,
            "anchor": ["a", "a", "b", "b", "c", "c"],
        }
    )
    precision, _ = validity.precision_recall(rows, "flag")
    independent, _ = validity.precision_recall(rows.drop(columns=["anchor"]), "flag")
    assert precision.estimate == independent.estimate == pytest.approx(4 / 6)
    assert independent.n_effective == pytest.approx(6)
    assert precision.n_effective == pytest.approx(2)  # three anchors: n - 1 of them


def test_precision_and_recall_weight_each_item_by_its_stratum():
    import pandas as pd

    rows = pd.DataFrame(
        {
            "needed": [True, False, True, True, False],
            "flag": [True, True, False, True, False],
            "weight": [2.0, 2.0, 5.0, 1.0, 5.0],
        }
    )
    precision, recall = validity.precision_recall(rows, "flag")
    assert precision.estimate == pytest.approx((2 + 1) / (2 + 2 + 1))
    assert recall.estimate == pytest.approx((2 + 1) / (2 + 5 + 1))


def test_cohen_kappa_of_a_known_table():
    # 20 both yes, 15 both no, 5 only the first says yes, 10 only the second: p_o 0.7, p_e 0.5, κ 0.4
    first = [True] * 20 + [False] * 15 + [True] * 5 + [False] * 10
    second = [True] * 20 + [False] * 15 + [False] * 5 + [True] * 10
    assert validity.cohen_kappa(first, second) == pytest.approx(0.4)
    assert validity.cohen_kappa(first, first) == pytest.approx(1.0)
    assert math.isnan(validity.cohen_kappa([True, True], [True, True]))


def label(item, labeller, needed, reason=None, confidence="high"):
    reason = reason or ("only-in-span" if needed else "generic")
    return {"id": item, "labeller": labeller, "needed": needed, "confidence": confidence, "reason": reason}


def write_lines(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        (json.dumps(label("zz", "A", True)), "line 2: item 'zz' is not in the validation set"),
        (json.dumps({**label("b", "A", True), "confidence": "sure"}), "line 2: confidence 'sure'"),
        (json.dumps({**label("b", "A", True), "reason": "because"}), "line 2: reason 'because'"),
        (json.dumps(label("b", "A", True, reason="generic")), "line 2: reason 'generic' goes with needed False"),
        (json.dumps({**label("b", "A", True), "needed": "yes"}), "line 2: field 'needed' must be a bool"),
        (json.dumps(label("a", "A", False)), "labeller 'A' labels item 'a' twice"),
    ],
)
def test_a_bad_label_file_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = write_lines(tmp_path / "labels.jsonl", [label("a", "A", True), line])
    with pytest.raises(validity.LabelError, match="labels.jsonl") as error:
        validity.read_labels(path, {"a", "b"})
    assert message in str(error.value)


def test_constraint_rows_and_blank_lines_are_skipped(tmp_path):
    constraint = {"id": "c1", "kind": "constraint", "labeller": "A", "is_rule": True}
    path = write_lines(tmp_path / "labels.jsonl", [constraint, "", label("a", "A", False, reason="unclear")])
    assert [(x.id, x.needed) for x in validity.read_labels(path, {"a"})] == [("a", False)]


def test_resolution_takes_the_resolved_row_then_agreement_and_leaves_open_disagreements_out():
    rows = [
        validity.Label("agree", "A", True, "high", "only-in-span"),
        validity.Label("agree", "B", True, "low", "only-in-span"),
        validity.Label("settled", "A", True, "high", "only-in-span"),
        validity.Label("settled", "B", False, "high", "generic"),
        validity.Label("settled", "resolved", False, "high", "generic"),
        validity.Label("open", "A", True, "high", "only-in-span"),
        validity.Label("open", "B", False, "high", "not-used"),
    ]
    final, open_items = validity.resolve(rows)
    assert final == {"agree": True, "settled": False} and open_items == {"open"}
    [(a, b, n, agree, kappa)] = validity.agreement(rows, {"agree", "settled", "open"})
    assert (a, b, n, agree) == ("A", "B", 3, pytest.approx(1 / 3))


def test_an_items_reason_is_the_resolved_one_else_the_common_one_else_both():
    rows = [
        validity.Label("same", "A", False, "high", "generic"),
        validity.Label("same", "B", False, "high", "generic"),
        validity.Label("split", "A", False, "high", "not-used"),
        validity.Label("split", "B", False, "high", "generic"),
        validity.Label("settled", "A", True, "high", "only-in-span"),
        validity.Label("settled", "B", False, "high", "generic"),
        validity.Label("settled", "resolved", False, "medium", "back-in-context"),
    ]
    assert validity.reasons(rows) == {"same": "generic", "split": "generic / not-used", "settled": "back-in-context"}


def test_false_positives_are_counted_by_reason_with_their_share_of_the_flagged_weight():
    import pandas as pd

    table = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e"],
            "agent": ["x"] * 5,
            "needed": [True, False, False, False, True],
            "reason": ["only-in-span", "generic", "generic", "not-used", "only-in-span"],
            "flagged_now": [True, True, True, True, False],
            "weight": [1.0, 1.0, 2.0, 4.0, 1.0],
        }
    )
    lines = validity.error_lines(table, listed=True)
    assert lines[0] == "false positives (flagged now, labelled not needed): 3 of 4 flagged items"
    assert lines[1].split() == ["generic", "2", "37.5%", "of", "the", "flagged", "weight"]
    assert lines[2].split()[:3] == ["not-used", "1", "50.0%"]
    assert lines[3] == "missed (labelled needed, not flagged now): 1 of 2"
    assert [line.split()[-2:] for line in lines[4:]] == [["x", "generic"], ["x", "generic"], ["x", "not-used"],
                                                         ["x", "only-in-span"]]  # fmt: skip


def test_false_dropped_rules_are_counted_by_why_the_labels_say_no():
    import pandas as pd

    table = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e", "f"],
            "agent": ["x"] * 6,
            "dropped": [True, False, False, False, False, True],
            "conveyed": [False, True, False, False, True, False],
            "is_rule": [True, True, False, True, False, True],
            "verdict": ["dropped", "dropped", "dropped", "dropped", "dropped", "kept"],
            "dropped_now": [True, True, True, True, True, False],
        }
    )
    lines = validity.constraint_error_lines(table, listed=True)
    assert lines[0] == 'false "dropped" (labelled not truly dropped): 4 of 5 items called dropped'
    assert [line.split()[-1] for line in lines[1:4]] == ["2", "1", "1"]
    assert lines[1].split()[:4] == ["not", "a", "real", "rule"]
    assert lines[4] == "missed (labelled truly dropped, not called dropped now): 1 of 2"
    assert [" ".join(line.split()) for line in lines[5:]] == [
        "false dropped b x conveyed", "false dropped c x not a real rule", "false dropped d x over at the compaction",
        "false dropped e x not a real rule", "missed f x kept",
    ]  # fmt: skip


def test_the_committed_split_follows_its_rule_and_holds_back_about_a_quarter():
    items = validity_pool.read_items()
    parts = validity_pool.read_split()
    assert set(parts) == {item["id"] for item in items}
    assert all(parts[item["id"]] == validity_pool.part_of(item) for item in items)
    held = sum(part == validity_pool.HELD_BACK for part in parts.values())
    assert 0.18 < held / len(parts) < 0.32


def test_the_committed_weights_are_pool_over_sample_size_per_stratum():
    data = json.loads(validity_pool.ITEMS_FILE.read_text(encoding="utf-8"))
    strata = {row["stratum"]: row for row in data["strata"]}
    counts: dict[str, int] = {}
    for item in data["items"]:
        counts[item["stratum"]] = counts.get(item["stratum"], 0) + 1
        assert item["weight"] == pytest.approx(strata[item["stratum"]]["N"] / strata[item["stratum"]]["n"])
    assert counts == {name: row["n"] for name, row in strata.items() if row["n"]}
    assert len(data["items"]) >= 440 and len({item["agent"] for item in data["items"]}) >= 6


@pytest.fixture(scope="module")
def fixture_set(tmp_path_factory):
    """A synthetic validation set: the candidate lost items of one fixture conversation, as the pool builds them,
    with made-up strata weights (flagged 2, not flagged 5) and parts (every third item of each flag held back)."""
    source = next(s for s in validity_pool.read_sources(FIXTURES) if s.conversation.id == "ci-flaky-kafka")
    pool = validity_pool.pool_of(source)
    assert any(i["flagged_at_sampling"] for i in pool) and not all(i["flagged_at_sampling"] for i in pool)
    items = [
        {**item, "stratum": str(item["flagged_at_sampling"]), "weight": 2.0 if item["flagged_at_sampling"] else 5.0}
        for item in sorted(pool, key=lambda i: i["id"])
    ]
    parts = {  # every third item of each flag, so both parts have flagged and unflagged items
        item["id"]: validity_pool.HELD_BACK if n % 3 == 0 else validity_pool.TUNE
        for flag in (True, False)
        for n, item in enumerate(i for i in items if i["flagged_at_sampling"] is flag)
    }
    folder = tmp_path_factory.mktemp("set")
    (folder / "items.json").write_text(json.dumps({"items": items}), encoding="utf-8")
    (folder / "split.json").write_text(json.dumps({"parts": parts}), encoding="utf-8")
    return folder, items, parts


def test_the_metric_is_asked_at_each_items_own_window(fixture_set):
    _, items, _ = fixture_set
    verdicts = validity.metric_verdicts(items, FIXTURES)
    assert {v.found for v in verdicts.values()} == {"replay"}
    assert all(verdicts[i["id"]].flagged == i["flagged_at_sampling"] for i in items)


def test_a_window_measured_alone_gets_the_replays_needed_later(fixture_set):
    """The fallback for a window today's replay no longer compacts at: same verdicts as the replay's own."""
    _, items, _ = fixture_set
    source = next(s for s in validity_pool.read_sources(FIXTURES) if s.conversation.id == "ci-flaky-kafka")
    trace = validity_pool.replay(source.conversation, validity_pool.ReplaySetting(**items[0]["setting"]))
    real = validity._measured_rows(trace)
    windows = sorted(set(zip(real["span_start"], real["span_end"], real["n_recorded"], strict=True)))
    alone = validity._measured_rows(validity.pinned(trace, windows))
    keys = ["span_start", "span_end", "n_recorded", "type", "normalized"]
    merged = real.merge(alone, on=keys, suffixes=("", "_alone"))
    assert len(merged) == len(real) > 0
    assert (merged["needed_later"] == merged["needed_later_alone"]).all()


def test_the_bench_prints_weighted_precision_and_recall_per_part(fixture_set, tmp_path, capsys):
    folder, items, parts = fixture_set
    tune = [i for i in items if parts[i["id"]] == validity_pool.TUNE]
    # synthetic truth: an item is needed iff its text has a digit; labeller B disagrees on the first tune item,
    # which a resolved row settles as A said
    truth = {i["id"]: any(ch.isdigit() for ch in i["text"]) for i in items}
    rows = [label(i["id"], "A", truth[i["id"]]) for i in items]
    rows += [label(i["id"], "B", truth[i["id"]] if i is not tune[0] else not truth[i["id"]]) for i in items]
    rows.append(label(tune[0]["id"], "resolved", truth[tune[0]["id"]]))
    labels = write_lines(tmp_path / "labels.jsonl", rows)
    code = validity.main(
        ["--labels", str(labels), "--logs", str(FIXTURES), "--items", str(folder / "items.json"),
         "--split", str(folder / "split.json"), "--part", "tune"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    flagged = [i for i in tune if i["flagged_at_sampling"]]
    needed = [i for i in tune if truth[i["id"]]]
    precision = sum(2.0 for i in flagged if truth[i["id"]]) / (2.0 * len(flagged))
    recall = sum(i["weight"] for i in needed if i["flagged_at_sampling"]) / sum(i["weight"] for i in needed)
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    assert f"{precision:.2f} [" in overall and f"{recall:.2f} [" in overall
    assert f"({sum(truth[i['id']] for i in flagged)}/{len(flagged)}," in overall
    assert "held-back part" not in out and f"tune part: {len(tune)} labelled items" in out
    kappa = validity.cohen_kappa([truth[i["id"]] for i in tune], [truth[i["id"]] != (i is tune[0]) for i in tune])
    assert f"agreement before resolution, A vs B: {len(tune)} items" in out and f"κ {kappa:.2f}" in out
    assert "agreement before resolution, all parts, A vs B" in out
    wrong = sum(1 for i in flagged if not truth[i["id"]])
    assert f"false positives (flagged now, labelled not needed): {wrong} of {len(flagged)} flagged items" in out


def test_write_records_one_parts_figures_for_the_catalogue_and_keeps_other_entries(fixture_set, tmp_path, capsys):
    from zett_lab.measure.validity import validity_of

    folder, items, parts = fixture_set
    truth = {i["id"]: any(ch.isdigit() for ch in i["text"]) for i in items}
    labels = write_lines(tmp_path / "labels.jsonl", [label(i["id"], n, truth[i["id"]]) for i in items for n in "AB"])
    data = tmp_path / "metric_validity.json"
    other = {"precision": {"value": 0.5, "low": 0.1, "high": 0.9, "n": 4}, "recall": None, "source": "elsewhere"}
    data.write_text(json.dumps({"metrics": {"probe_presence": other}}), encoding="utf-8")
    common = ["--labels", str(labels), "--logs", str(FIXTURES), "--items", str(folder / "items.json"),
              "--split", str(folder / "split.json")]  # fmt: skip
    assert validity.main([*common, "--write", str(data)]) == 2
    assert "--write records one part's figures" in capsys.readouterr().err
    assert validity.main([*common, "--part", "held-back", "--write", str(data)]) == 0
    out = capsys.readouterr().out
    written = json.loads(data.read_text(encoding="utf-8"))["metrics"]
    assert written["probe_presence"] == other
    assert set(written) == {"probe_presence", *validity.NEEDED_LATER_METRICS}
    held = [i for i in items if parts[i["id"]] == validity_pool.HELD_BACK]
    flagged = [i for i in held if i["flagged_at_sampling"]]
    overall = next(line for line in out.splitlines() if line.startswith("overall"))
    for name in validity.NEEDED_LATER_METRICS:
        entry = validity_of(name, written[name])
        assert entry.precision is not None and entry.precision.n == len(flagged)
        assert f"{entry.precision.value:.2f} [{entry.precision.low:.2f}, {entry.precision.high:.2f}]" in overall
        assert (
            f"{len(held)} labelled lost items of 1 agent format (zett-sqlite) of the logs in {FIXTURES},"
            in entry.source
        )
        assert "held-back quarter" in entry.source and "κ 1.00" in entry.source


@pytest.mark.parametrize("round_", validity_pool.ROUNDS.values(), ids=lambda r: f"round {r.number}")
def test_a_later_sample_is_one_unseen_part_reported_and_written_as_such(round_, fixture_set, tmp_path, capsys):
    number, name = round_.number, round_.name
    folder, items, _ = fixture_set
    truth = {i["id"]: any(ch.isdigit() for ch in i["text"]) for i in items}
    labels = write_lines(tmp_path / "labels.jsonl", [label(i["id"], n, truth[i["id"]]) for i in items for n in "AB"])
    data = tmp_path / "metric_validity.json"
    code = validity.main(
        ["--set", str(number), "--labels", str(labels), "--logs", str(FIXTURES), "--items", str(folder / "items.json"),
         "--write", str(data)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert f"{name} (round {number}, unseen): {len(items)} labelled items" in out
    assert "tune part" not in out and "constraint" not in out
    flagged = [i for i in items if i["flagged_at_sampling"]]
    written = json.loads(data.read_text(encoding="utf-8"))["metrics"]["lost_but_needed"]
    assert written["precision"]["n"] == len(flagged)
    assert f"the {name} of the validation set" in written["source"]
    assert round_.drawn_after in written["source"] and "no disagreement to settle" in written["source"]


def test_a_missing_label_file_is_one_error_and_exit_code_2(fixture_set, tmp_path, capsys):
    folder, _, _ = fixture_set
    missing = tmp_path / "nope.jsonl"
    code = validity.main(["--labels", str(missing), "--items", str(folder / "items.json"),
                          "--split", str(folder / "split.json")])  # fmt: skip
    assert code == 2 and f"{missing}: no such label file" in capsys.readouterr().err


@pytest.mark.parametrize("number", [1, *validity_pool.ROUNDS])
def test_without_labels_yet_the_bench_fails_naming_the_label_file_and_measures_nothing(
    number, monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(validity, "LABELS_FILE", tmp_path / "labels.jsonl")
    monkeypatch.setattr(validity_pool, "SET_DIR", tmp_path)
    expected = tmp_path / ("labels.jsonl" if number == 1 else f"labels{number}.jsonl")
    assert validity.main(["--set", str(number)]) == 2
    printed = capsys.readouterr()
    assert f"error: no labels yet at {expected}: nothing to measure" in printed.err
    assert printed.out == ""


def test_a_dossier_shows_span_use_and_tail_mentions_and_nothing_of_the_verdict(fixture_set):
    import validity_dossiers

    _, items, _ = fixture_set
    from zett_lab.load.text import message_text

    source = next(s for s in validity_pool.read_sources(FIXTURES) if s.conversation.id == "ci-flaky-kafka")
    # the span's 6000 (session.timeout.ms), as an item of the window 1..5 (the tail's "6000," holds it, so the
    # pool no longer draws it: the dossier is written from the item's fields alone)
    window = next(i for i in items if i["span_end"] == 6)
    first = next(n for n in range(1, 6) if "6000" in message_text(source.conversation.messages[n]))
    item = {**window, "text": "6000", "type": "number", "message_index": first}
    text = validity_dossiers.dossier(item, source, FIXTURES)
    assert "messages 1..5: the span" in text and "messages 6..7: the tail" in text
    assert "first in a message of the user or the agent (message 10)" in text
    assert "[message 9, tool result grep]" in text and "⟦6000⟧" in text  # the grep that re-shows it, before the use
    assert "MENTIONS IN THE TAIL (messages 6..7), loose search for '6000': 1 message(s)" in text
    assert "[message 7, tool result read_file]" in text
    for leak in ("flag", "stratum", "weight", "needed", "lost_in"):
        assert leak not in text.lower()


def test_aider_chat_files_are_read_from_the_history_with_the_message_they_were_there_by(tmp_path):
    import validity_dossiers

    import zett_lab

    history = tmp_path / "afi.aider.chat.history.md"
    history.write_text(
        "\n# aider chat started at 2025-01-01 10:00:00\n\n"
        "#### /add src/app.py\n\n> Added src/app.py to the chat  \n\n"
        "#### Fix the bug in app  \n\nSure, here is the fix.\n\n"
        "> src/util.py  \n> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n"
        "> Added 12 lines of output to the chat.  \n\n"
        "#### Now add tests  \n\nDone.\n\n"
        "> docs/notes.md  \n> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: n  \n",
        encoding="utf-8",
    )
    [conversation] = zett_lab.load_all(tmp_path)
    files = validity_dossiers.aider_chat_files(history, conversation)
    users = [i for i, m in enumerate(conversation.messages) if m.role == "user"]
    assert files == [("src/app.py", users[0]), ("src/util.py", users[1])]


# --- the constraint set ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def constraint_set(tmp_path_factory):
    """The constraint set of the fixture conversations (billing-rounding has the agent's own compactions), as the
    pool builds it, with the committed kind of split."""
    import validity_constraints

    sources = validity_pool.read_sources(FIXTURES)
    pool = [row for source in sources for row in validity_constraints.verdicts_of(source)]
    items = validity_constraints.sample(pool)
    parts = {item["id"]: validity_pool.part_of(item) for item in items}
    folder = tmp_path_factory.mktemp("constraints")
    (folder / "constraint_items.json").write_text(json.dumps({"items": items}), encoding="utf-8")
    (folder / "constraint_split.json").write_text(json.dumps({"parts": parts}), encoding="utf-8")
    return folder, pool, items, parts, sources


def test_the_constraint_sample_takes_every_rule_once_per_verdict_weighted_by_its_compactions(constraint_set):
    import validity_constraints

    _, pool, items, parts, _ = constraint_set
    strata = {(validity_constraints.rule_of(r), r["verdict_at_sampling"]) for r in pool}
    assert len(items) == len(strata) and {i["verdict_at_sampling"] for i in items} == {"kept", "dropped"}
    for item in items:
        same = [r for r in pool if (validity_constraints.rule_of(r), r["verdict_at_sampling"]) == (
            validity_constraints.rule_of(item), item["verdict_at_sampling"])]  # fmt: skip
        assert item["weight"] == len(same) and item["id"] in {r["id"] for r in same}
    assert {i["setting"]["summarizer"] for i in items} <= {"truncate:0.1", "native"}
    assert any(i["setting"]["summarizer"] == "native" for i in pool)  # billing-rounding's own compactions
    rule_parts = defaultdict_set()
    for item in items:
        rule_parts[(item["conversation_id"], item["text"])].add(parts[item["id"]])
    assert all(len(p) == 1 for p in rule_parts.values())  # one rule, one part


def defaultdict_set():
    from collections import defaultdict

    return defaultdict(set)


def test_the_constraint_metric_is_asked_about_the_summary_the_labels_judged(constraint_set):
    import validity_constraints

    _, _, items, _, sources = constraint_set
    verdicts = validity_constraints.constraint_verdicts(items, FIXTURES)
    assert all(verdicts[i["id"]] == i["verdict_at_sampling"] for i in items)
    changed = {**items[0], "summary_sha256": "0" * 16}
    assert validity_constraints.constraint_verdicts([changed], FIXTURES) == {changed["id"]: "summary changed"}
    moved = {**items[0], "span_end": items[0]["span_end"] + 1}
    assert validity_constraints.constraint_verdicts([moved], FIXTURES) == {moved["id"]: "window gone"}
    # a rule the extractor no longer finds at a window it still has, whatever else the window holds
    gone = {**items[0], "text": "a rule nobody wrote", "normalized": "a rule nobody wrote"}
    assert validity_constraints.constraint_verdicts([gone], FIXTURES) == {gone["id"]: "not extracted"}
    rows, windows = validity_constraints.constraint_rows(
        validity_constraints.trace_for(next(s for s in sources if s.conversation.id == items[0]["conversation_id"]),
                                       items[0]["setting"])
    )  # fmt: skip
    bare = rows.iloc[0:0]  # the window as it is when no constraint is left in it
    assert validity_constraints.verdict_now(bare, windows, items[0]) == "not extracted"


def test_a_constraint_dossier_shows_rule_summary_and_tail_and_never_the_verdict(constraint_set):
    import validity_constraints

    _, _, items, _, sources = constraint_set
    item = next(
        i for i in items if i["conversation_id"] == "billing-rounding" and i["setting"]["summarizer"] == "native"
    )
    source = next(s for s in sources if s.conversation.id == "billing-rounding")
    window = (json.dumps(item["setting"], sort_keys=True), item["span_start"], item["span_end"], item["n_recorded"])
    summary = validity_constraints.summaries_of(source)[window]
    text = validity_constraints.dossier(item, source, summary, FIXTURES)
    assert f"Rule (as extracted): {item['text']}" in text and "⟦" in text
    assert "Summary: the agent's own (production) summary" in text
    assert "THE SUMMARY" in text and "CLOSEST WORDING IN THE TAIL" in text and "AFTER THE COMPACTION" in text
    assert summary.splitlines()[0].strip() in text
    for leak in ("kept", "dropped", "verdict", "weight", "stratum", "in_summary"):
        assert leak not in text.lower().replace(item["text"].lower(), "").replace("the tail, kept verbatim", "")


def constraint_label(item, labeller, *, is_rule=True, scope="session", reason="absent"):
    return {"id": item, "kind": "constraint", "labeller": labeller, "is_rule": is_rule, "scope": scope,
            "confidence": "high", "reason": reason}  # fmt: skip


def test_the_bench_prints_and_writes_the_precision_of_dropped_rules(fixture_set, constraint_set, tmp_path, capsys):
    folder, items, _ = fixture_set
    cfolder, _, rules, parts, _ = constraint_set
    # synthetic truth: every rule is real; the labels call conveyed what the metric kept, except one dropped item
    # they say the summary conveys in other words (a false "dropped")
    dropped = [r for r in rules if r["verdict_at_sampling"] == "dropped"]
    part = max(set(parts.values()), key=lambda p: sum(parts[r["id"]] == p for r in dropped))
    wrong = next(r for r in dropped if parts[r["id"]] == part)
    rows = [label(i["id"], n, True) for i in items for n in "AB"]
    for rule in rules:
        reason = "conveyed-paraphrase" if rule["verdict_at_sampling"] == "kept" or rule is wrong else "absent"
        rows += [constraint_label(rule["id"], n, reason=reason) for n in "AB"]
    labels = write_lines(tmp_path / "labels.jsonl", rows)
    data = tmp_path / "metric_validity.json"
    args = ["--labels", str(labels), "--logs", str(FIXTURES), "--items", str(folder / "items.json"),
            "--split", str(folder / "split.json"), "--constraint-items", str(cfolder / "constraint_items.json"),
            "--constraint-split", str(cfolder / "constraint_split.json")]  # fmt: skip
    assert validity.main([*args, "--part", part, "--write", str(data)]) == 0
    out = capsys.readouterr().out
    mine = [r for r in rules if parts[r["id"]] == part]
    flagged = [r for r in mine if r["verdict_at_sampling"] == "dropped"]
    assert len(flagged) >= 2
    precision = sum(r["weight"] for r in flagged if r is not wrong) / sum(r["weight"] for r in flagged)
    section = out[out.index("## constraint survival") :]
    overall = next(line for line in section.splitlines() if line.startswith("overall"))
    assert f"{precision:.2f} [" in overall and f"({len(flagged) - 1}/{len(flagged)}," in overall
    assert "agreement before resolution on truly dropped, A vs B" in out
    entry = json.loads(data.read_text(encoding="utf-8"))["metrics"]["constraint_survival"]
    assert entry["precision"]["value"] == pytest.approx(precision, abs=1e-4) and entry["precision"]["n"] == len(flagged)
    assert entry["recall"]["value"] == pytest.approx(1.0)
    assert "(rule, compaction) items" in entry["source"] and '"dropped" verdict' in entry["source"]


def test_a_bad_constraint_label_is_one_error_naming_file_and_line(tmp_path):
    rows = [constraint_label("c1", "A"), {**constraint_label("c1", "B"), "reason": "not-a-rule"}]
    path = write_lines(tmp_path / "labels.jsonl", rows)
    with pytest.raises(validity.LabelError, match=r"labels.jsonl, line 2: reason 'not-a-rule'"):
        validity.read_constraint_labels(path, {"c1"})
    assert validity.read_labels(path, {"c1"}) == []  # the lost-item reader skips them


def test_the_committed_constraint_split_follows_its_rule_and_the_weights_their_strata():
    import validity_constraints

    data = json.loads(validity_constraints.ITEMS_FILE.read_text(encoding="utf-8"))
    parts = json.loads(validity_constraints.SPLIT_FILE.read_text(encoding="utf-8"))["parts"]
    items = data["items"]
    assert set(parts) == {item["id"] for item in items}
    assert all(parts[item["id"]] == validity_pool.part_of(item) for item in items)
    assert 0.18 < sum(p == validity_pool.HELD_BACK for p in parts.values()) / len(parts) < 0.35
    pooled = {row["stratum"]: row["N"] for row in data["strata"]}
    assert all(item["weight"] == pooled[item["stratum"]] for item in items)
    assert len({validity_constraints.rule_of(item) for item in items}) == len({s.rsplit("|", 1)[0] for s in pooled})
    assert {item["setting"]["summarizer"] for item in items} <= {"truncate:0.1", "native"}


def test_proportional_shares_follow_the_sizes_with_a_floor_and_never_exceed_a_size():
    # floors 3, 3, 2 (all "small" has), 0; the 12 left go 9 : 3 to the two with room
    shares = validity_pool.proportional(20, {"big": 90, "mid": 30, "small": 2, "none": 0}, floor=3)
    assert shares == {"big": 12, "mid": 6, "small": 2, "none": 0}
    assert validity_pool.proportional(10, {"a": 5, "b": 3}) == {"a": 5, "b": 3}
    uneven = validity_pool.proportional(7, {"a": 1, "b": 1, "c": 1, "d": 10})
    assert sum(uneven.values()) == 7 and uneven["d"] >= 5


@pytest.mark.parametrize("round_", validity_pool.ROUNDS.values(), ids=lambda r: f"round {r.number}")
def test_a_later_round_leaves_out_every_anchor_an_earlier_sampled_and_weighs_pool_over_sample(round_):
    data = json.loads(round_.items_file.read_text(encoding="utf-8"))
    earlier = [validity_pool.read_items(path) for path in round_.earlier_items]
    assert len(earlier) == round_.number - 1
    for items in earlier:
        assert not validity_pool.sampled_keys(data["items"]) & validity_pool.sampled_keys(items)
        assert not {item["id"] for item in data["items"]} & {item["id"] for item in items}
    strata = {row["stratum"]: row for row in data["strata"]}
    for item in data["items"]:
        assert item["weight"] == pytest.approx(strata[item["stratum"]]["N"] / strata[item["stratum"]]["n"])
        assert (item["setting"]["max_tokens"], item["setting"]["keep_recent_tokens"]) != (0, 0)
    pooled = sum(row["N"] for row in data["strata"] if row["flagged_at_sampling"])
    flagged = sum(item["flagged_at_sampling"] for item in data["items"])
    assert flagged == min(round_.flagged, pooled)
    assert len(data["items"]) - flagged == round_.not_flagged
    assert str(round_.seed) in data["procedure"]["draw"]
