"""The date a report prints is a real calendar day, from Python and from ``zett-lab report --date``."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import coding_conversation
from zett_lab import SettingError
from zett_lab.show import cli
from zett_lab.show.report import report_date


@given(year=st.integers(1, 9999), month=st.integers(0, 19), day=st.integers(0, 39))
def test_a_date_is_accepted_exactly_when_it_is_a_calendar_day(year: int, month: int, day: int) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}"
    try:
        real = datetime.date(year, month, day)
    except ValueError:
        with pytest.raises(SettingError, match=rf"^date must be a calendar day as YYYY-MM-DD, got '{text}' \(.*\)$"):
            report_date(text)
    else:
        assert report_date(text) == real.isoformat() == text


def test_report_refuses_an_impossible_date_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "good.json"
    coding_conversation(turns=2).save(source)
    out = tmp_path / "report.html"
    code = cli.main(["report", str(source), "-o", str(out), "--date", "2025-13-45", "--no-progress"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (cli.EXIT_ERROR, "")
    assert captured.err == (
        "zett-lab: error: date must be a calendar day as YYYY-MM-DD, got '2025-13-45' (month must be in 1..12)\n"
    )
    assert not out.exists()
