"""zett_lab.show.table: a DataFrame as a person reads it in a notebook."""

from __future__ import annotations

import html as markup
import re

import pandas as pd

from zett_lab.measure.catalogue import metric
from zett_lab.show import Table, table
from zett_lab.show.report.content import definition


def _heads(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<th(?: title="([^"]*)")?>([^<]*)</th>', page.split("<tbody>")[0])


def test_numbers_have_separators_and_no_scientific_notation():
    frame = pd.DataFrame({"total_input_tokens": [155336, 9308850.0], "p_value": [1.2e-7, 0.5], "ratio": [1080.0, 2.5]})
    page = table(frame)._repr_html_()
    cells = re.findall(r"<td>([^<]*)</td>", page)
    assert cells == ["155,336", "0.000", "1,080", "9,308,850", "0.500", "2.50"]
    assert not re.search(r"\de[+-]\d", page)


def test_a_metric_column_is_headed_by_its_catalogue_label_with_its_definition_on_hover():
    page = table(pd.DataFrame({"needed_anchor_recall": [0.5], "conversation_id": ["a"]}))._repr_html_()
    heads = _heads(page)
    assert heads[0] == (markup.escape(definition("needed_anchor_recall")), metric("needed_anchor_recall").label)
    assert heads[1][1] == "conversation id"
    assert "needed_anchor_recall<" not in page and ">conversation_id<" not in page
    pairs = table(pd.DataFrame({"metric": ["lost_but_needed"], "mean_diff": [-1.5]}))._repr_html_()
    assert f'<td title="{markup.escape(definition("lost_but_needed"))}">{metric("lost_but_needed").label}</td>' in pairs


def test_row_numbers_are_dropped_and_a_meaningful_index_kept_as_row_headers():
    rows = pd.DataFrame(
        {
            "native_id": ["n1", "n1", "n2", "n2"],
            "summarizer": ["anchors:0.1", "mask", "anchors:0.1", "mask"],
            "lost_but_needed": [3, 1, 12000, 4],
        }
    )
    filtered = table(rows[rows["summarizer"] == "mask"])._repr_html_()  # index 1, 3: row numbers, not shown
    assert [w for _, w in _heads(filtered)] == ["native id", "summarizer", metric("lost_but_needed").label]
    assert "<th>1</th>" not in filtered and "<th>3</th>" not in filtered

    pivot = table(rows.pivot(index="native_id", columns="summarizer", values=["lost_but_needed"]))._repr_html_()
    label = metric("lost_but_needed").label
    assert [w for _, w in _heads(pivot)] == ["native id", f"{label} · anchors:0.1", f"{label} · mask"]
    assert re.findall(r"<tr><th>([^<]*)</th>", pivot) == ["n1", "n2"]
    assert "<td>12,000</td>" in pivot

    transposed = table(pd.DataFrame({"needed_anchor_recall": [0.25]}, index=["mask"]).T)._repr_html_()
    assert f">{metric('needed_anchor_recall').label}</th><td>0.250</td>" in transposed


def test_long_frames_and_series():
    shown = table(pd.Series(range(50), name="steps_over_budget"), max_rows=10)
    assert isinstance(shown, Table) and isinstance(shown.frame, pd.DataFrame)
    page = shown._repr_html_()
    assert page.count("<tr>") == 11 and "first 10 of 50 rows" in page
    assert len(table(pd.DataFrame({"a": range(50)}), max_rows=None)._repr_html_().split("<tr>")) == 52


def test_a_mapping_of_figures_is_a_table_of_named_rows():
    """``table(trace.summary())``: what notebooks 01 and 02 showed as a raw dict (``'peak_context': 17055,
    'summary_error': None``)."""
    page = table({"max_tokens": 12_000, "peak_context": 17_055, "summary_error": None})._repr_html_()
    rows = re.findall(r"<tr><th[^>]*>([^<]*)</th><td>([^<]*)</td></tr>", page)
    assert rows == [("max tokens", "12,000"), (metric("peak_context").label, "17,055"), ("summary error", "")]


def test_the_rows_of_a_transposed_table_are_its_columns_in_words():
    """Notebook 03's ``table(side_by_side.metrics.set_index("summarizer").T)`` showed rows ``conversation_id``,
    ``mean_summary_tokens``, ``total_latency_s``."""
    metrics = pd.DataFrame(
        {
            "summarizer": ["anchors:0.1", "mask"],
            "conversation_id": ["search_p95", "search_p95"],
            "mean_summary_tokens": [1077.0, 1208.0],
            "needed_anchor_recall": [1.0, 0.5],
        }
    )
    page = table(metrics.set_index("summarizer").T)._repr_html_()
    rows = re.findall(r"<tr><th[^>]*>([^<]*)</th><td>", page)
    assert rows == ["conversation id", "mean summary tokens", metric("needed_anchor_recall").label]
    assert "<td>search_p95</td>" in page, "values are data, never rewritten"
    named = table(metrics.set_index("conversation_id")[["mean_summary_tokens"]])._repr_html_()
    assert re.findall(r"<tr><th>([^<]*)</th><td>", named) == ["search_p95", "search_p95"], "a named index is data"
