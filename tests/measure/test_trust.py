"""How far to trust each metric (issue 28.4): the measured validity in the data file is what the catalogue,
``measure()``'s docstring, the documentation and the report say, and a metric without one says so."""

from __future__ import annotations

import json
from importlib import resources

import pytest

import zett_lab
from zett_lab.measure import catalogue
from zett_lab.measure import validity as measured
from zett_lab.measure.catalogue import EXACT, NOT_VALIDATED, metric, trust, trusted_metrics
from zett_lab.measure.validity import Estimate, Validity

DATA = resources.files("zett_lab") / "data" / measured.VALIDITY_FILE


def data_file() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_the_data_file_is_the_catalogues_validity_of_real_metrics_written_by_the_bench():
    data = data_file()
    assert data["written_by"].startswith("bench/validity.py --write")
    assert {"lost_but_needed", "needed_anchor_recall"} <= set(data["metrics"])
    for name, entry in data["metrics"].items():
        validity = metric(name).validity  # a name outside the catalogue raises
        assert validity is not None and validity.source == entry["source"]
        for key in ("precision", "recall"):
            measured = getattr(validity, key)
            if entry[key] is None:
                assert measured is None
                continue
            assert measured == Estimate(**entry[key])
            assert 0 <= measured.low <= measured.value <= measured.high <= 1 and measured.n > 0
        assert "labelled" in entry["source"] and "agent format" in entry["source"]


def test_a_metric_without_a_measurement_says_not_validated_unless_it_is_counted_from_the_replay():
    measured = set(data_file()["metrics"])
    unmeasured = [m for m in trusted_metrics() if m.name not in measured]
    judged = [m.name for m in unmeasured if not m.exact]
    counted = [m.name for m in unmeasured if m.exact]
    assert "anchor_retention" in judged and {"steps_over_budget", "compression_ratio"} <= set(counted)
    assert all(metric(name).validity is None and trust(name) == NOT_VALIDATED == "not validated" for name in judged)
    assert all(trust(name) == EXACT and EXACT.startswith("exact") for name in counted)
    # what makes a metric exact: budget and cost metrics, and loss metrics that are token arithmetic
    assert all(m.exact == (m.kind != "loss" or m.arithmetic) for m in catalogue.metrics())
    assert not metric("lost_but_needed").exact and not metric("probe_presence").exact


def test_the_words_carry_the_interval_the_items_and_the_source():
    validity = Validity(Estimate(0.8312, 0.7201, 0.9049, 1234), None, "448 labelled lost items of 7 agent formats")
    assert validity.text() == (
        "precision 0.83 [0.72, 0.90] (n = 1,234), 95% intervals, on 448 labelled lost items of 7 agent formats"
    )
    both = Validity(Estimate(0.5, 0.25, 0.75, 12), Estimate(0.9, 0.6, 0.98, 9), "")
    assert both.text() == "precision 0.50 [0.25, 0.75] (n = 12), recall 0.90 [0.60, 0.98] (n = 9)"


def test_measures_docstring_lists_every_headline_metrics_trust_from_the_data_file():
    doc = zett_lab.measure.__doc__
    assert doc is not None
    for entry in trusted_metrics():
        assert f"* {entry.label} (``{entry.name}``): {trust(entry.name)}" in doc
    assert {m.name for m in trusted_metrics()} >= {m.name for m in catalogue.metrics() if m.headline}
    recall = metric("needed_anchor_recall").validity
    assert recall is not None and recall.precision is not None
    assert f"precision {recall.precision.value:.2f} [{recall.precision.low:.2f}," in doc


def test_a_malformed_entry_is_one_error_naming_the_file_and_field():
    with pytest.raises(zett_lab.errors.SettingError, match=r"metric_validity.json: metrics.x.precision"):
        measured.validity_of("x", {"precision": {"value": 0.5}, "source": ""})
    assert measured.validity_of("x", {"source": "s"}) == Validity(None, None, "s")


def test_the_documentation_page_shows_the_data_files_figures():
    import importlib.util
    from pathlib import Path

    pytest.importorskip("sphinx")
    docs = Path(__file__).resolve().parents[2] / "docs"
    spec = importlib.util.spec_from_file_location("zett_lab_docs", docs / "_ext" / "zett_lab_docs.py")
    assert spec is not None and spec.loader is not None
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    assert "<!-- zett_lab: validity -->" in (docs / "trust.md").read_text(encoding="utf-8")
    table = extension.validity_table()
    assert table.count("\n| ") == len(trusted_metrics())
    for entry in trusted_metrics():
        validity = entry.validity
        if validity is None:
            assert f"| {entry.label} (`{entry.name}`) | {EXACT if entry.exact else 'not validated'} |" in table
        else:
            shares = [e.text() if e else "not measured" for e in (validity.precision, validity.recall)]
            assert f"(`{entry.name}`) | {shares[0]} | {shares[1]} |" in table


@pytest.fixture(scope="module")
def small_report():
    from tests.helpers import coding_conversation
    from zett_lab.show.report import Report

    conversation = coding_conversation(turns=6)
    traces = [
        zett_lab.replay(conversation, max_tokens=900, keep_recent_tokens=400, summarizer=name, cache=False)
        for name in ("anchors", "truncate")
    ]
    return Report(traces=traces, date="2025-02-03", title="Trust")


def test_the_report_shows_each_metrics_precision_beside_the_loss_table(small_report):
    from markupsafe import escape

    whole = small_report.document()
    document = whole["metrics"]
    shown = list(dict.fromkeys(row["metric"] for row in document["rows"]))
    # the totals show lost but needed too, and the recommendation its figures
    recommended = list(whole["recommendation"]["figures"])
    assert list(document["validity"]) == list(dict.fromkeys([*shown, "lost_but_needed", *recommended]))
    for name, shown_validity in document["validity"].items():
        validity = metric(name).validity
        assert (shown_validity is None) == (validity is None and not metric(name).exact)
        if validity is not None:
            assert shown_validity["figures"] == validity.figures() and shown_validity["source"] == validity.source
        elif shown_validity is not None:
            assert shown_validity["exact"] and shown_validity["figures"] == EXACT
    recall = metric("needed_anchor_recall").validity
    assert recall is not None
    plain = [metric(name).label for name, shown in document["validity"].items() if shown is None]
    exact = [metric(name).label for name, shown in document["validity"].items() if shown and shown["exact"]]
    assert plain and exact
    page = small_report.to_html()
    assert page.index("<h2>Loss by summarizer</h2>") < page.index('<div id="metric-trust">')
    trust_block = page[page.index('<div id="metric-trust">') : page.index("<h3>Outcomes over all replays</h3>")]
    assert str(escape(f"Needed-anchor recall: {recall.figures()}")) in trust_block
    assert f"Not validated: {', '.join(plain)}" in trust_block
    assert f"{EXACT[0].upper()}{EXACT[1:]}: {', '.join(exact)}" in trust_block
    assert str(escape(f"Measured on {recall.source}.")) in trust_block
    markdown = small_report.to_markdown()
    assert f"- Needed-anchor recall: {recall.figures()}" in markdown
    assert f"- Not validated: {', '.join(plain)}" in markdown
    assert f"Measured on {recall.source}." in markdown


def test_the_recommendation_shows_how_far_to_trust_each_of_its_figures(small_report):
    from markupsafe import escape

    document = small_report.document()
    figures = document["recommendation"]["figures"]
    validity = document["metrics"]["validity"]
    assert set(figures) <= set(validity)  # the trust section covers the recommendation's metrics too
    lost = metric("lost_but_needed").validity
    assert lost is not None and "lost_but_needed" in figures and "steps_over_budget" in figures
    page = small_report.to_html()
    box = page[page.index('<div class="callout" id="recommendation">') :]
    box = box[: box.index("</div>")]
    assert "how far to trust it" in box and 'href="#metric-trust"' in box
    rows = {row.split("</td>")[0]: row for row in box.split("<tr>")[2:]}
    lost_label, budget_label = metric("lost_but_needed").label, metric("steps_over_budget").label
    lost_row = next(row for head, row in rows.items() if lost_label in head)
    assert str(escape(lost.figures())) in lost_row
    budget_row = next(row for head, row in rows.items() if budget_label in head)
    assert "<td>exact</td>" in budget_row
    markdown = small_report.to_markdown()
    assert f"| {lost_label} | " in markdown and lost.figures().replace("[", "\\[").replace("]", "\\]") in markdown


# --- a summarizer built from the metric's own vocabulary -----------------------------------------------------------


@pytest.fixture(scope="module")
def anchors_and_truncate():
    from tests.helpers import coding_conversation

    conversations = [coding_conversation(turns=6, cid=f"c{k}") for k in range(2)]
    return {
        name: [
            zett_lab.replay(c, max_tokens=900, keep_recent_tokens=400, summarizer=name, cache=False)
            for c in conversations
        ]
        for name in ("anchors", "truncate")
    }


def test_a_comparison_with_anchors_says_so_and_shows_a_metric_independent_of_its_vocabulary(anchors_and_truncate):
    from zett_lab.measure.catalogue import INDEPENDENT_METRICS

    result = zett_lab.compare(anchors_and_truncate, metrics=["needed_anchor_recall", "anchor_retention"])
    compared = set(result.summary["metric"])
    assert {"needed_anchor_recall", "anchor_retention", *INDEPENDENT_METRICS} <= compared
    [note] = result.notes
    assert note.startswith("anchors is built from the metric's own vocabulary")
    assert "Needed-anchor recall, Anchor retention count" in note and "truncate" not in note.split(":")[0]
    assert all(metric(m).anchor_based for m in ("needed_anchor_recall", "anchor_retention", "constraint_survival"))
    assert not any(metric(m).anchor_based for m in INDEPENDENT_METRICS)
    assert f"Note: {note}" in repr(result)
    import html

    assert html.escape(note) in result._repr_html_()


def test_a_comparison_without_it_keeps_the_metrics_asked_and_no_note(anchors_and_truncate):
    result = zett_lab.compare(
        {
            "truncate": anchors_and_truncate["truncate"],
            "mask": zett_lab.compare(anchors_and_truncate).traces["truncate"],
        },
        metrics=["needed_anchor_recall"],
    )
    assert set(result.summary["metric"]) == {"needed_anchor_recall"} and result.notes == ()
    assert "Note:" not in repr(result)


def test_the_note_says_when_no_independent_metric_has_values():
    import pandas as pd

    from zett_lab.study.compare import vocabulary_notes

    identities = {"anchors": "anchors(budget=0.1)", "mask": "mask(budget=0.1)"}
    metrics = ["needed_anchor_recall", "probe_presence"]
    measured = pd.DataFrame({"metric": metrics, "mean": [0.5, 0.4]})
    [with_values] = vocabulary_notes(identities, measured, metrics)
    assert with_values.endswith("Weigh it on Probe presence, which does not depend on that vocabulary.")
    unmeasured = pd.DataFrame({"metric": metrics, "mean": [0.5, float("nan")]})
    [without] = vocabulary_notes(identities, unmeasured, metrics)
    assert "No compared metric that does not depend on that vocabulary has values here" in without
    assert vocabulary_notes({"mask": "mask(budget=0.1)"}, measured, metrics) == ()


def test_the_reports_comparison_carries_the_note_where_summarizers_are_compared(small_report):
    from markupsafe import escape

    notes = small_report.document()["metrics"]["notes"]
    assert len(notes) == 1 and notes[0].startswith("anchors")
    page = small_report.to_html()
    section = page[page.index('<section id="metrics">') :]
    section = section[: section.index("</section>")]
    assert str(escape(notes[0])) in section
    assert f"**Note:** {notes[0]}" in small_report.to_markdown()
