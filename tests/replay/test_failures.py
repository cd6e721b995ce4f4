"""Failures are visible and never counted as results.

* the command line exits 1 when any summary failed and prints one line per distinct cause;
  ``--strict`` stops at the first failure; the Python API warns once per cause and counts them
  (``failure_counts`` of Trace, Sweep and Report);
* an endpoint that cannot be connected to is given up on after a few failed connection attempts
  (a per-endpoint breaker), while rate limits and server errors keep their backoff;
* cells measured on failed summaries are marked and never recommended; a report shows a banner.

No timed assertion: the breaker is checked by the connections the loopback server saw and the
calls the breaker refused.
"""

from __future__ import annotations

import json
import math
import re
import socket
from pathlib import Path

import httpx
import pytest
from zett_agent.model import RetryOptions
from zett_agent.providers.base import timeout_error

import zett_lab
from tests.conftest import FIXTURES
from tests.helpers import BadSummarizer, coding_conversation
from tests.loopback import LoopbackServer
from zett_lab.errors import ResultFailure, SettingError, SettingWarning, SummaryFailureWarning
from zett_lab.replay.engine import SPAN_ATTEMPTS
from zett_lab.replay.setting import keep_fills_budget
from zett_lab.show import cli
from zett_lab.show.report import Report
from zett_lab.study import measured_cells, pareto_front, recommend, sweep
from zett_lab.summarizers import BREAKER_COOLDOWN_S, BREAKER_THRESHOLD, summarizer
from zett_lab.summarizers.breaker import EndpointBreaker, endpoint_breaker, is_connection_error

#: The issue's case: at 8k/2k every over-budget step of this session asks for a summary.
SESSION = "billing-rounding"
LIMITS = {"max_tokens": 8000, "keep_recent_tokens": 2000}
NO_WAIT = RetryOptions(base_delay=0, max_delay=0, max_retries=3)
BAD = "bad-summarizer(raise)"


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (connections are refused)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


@pytest.fixture(scope="module")
def billing():
    return zett_lab.load(FIXTURES / "sessions.sqlite", session=SESSION)


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the endpoint breaker ---------------------------------------------------------------------------------


@pytest.mark.parametrize("retries", [3, 0])
def test_an_endpoint_that_drops_every_connection_is_given_up_on(billing, retries: int) -> None:
    retry = RetryOptions(base_delay=0, max_delay=0, max_retries=retries)
    with LoopbackServer(drop=True) as server:
        model = summarizer(f"openai-compatible:m@{server.openai_url}", retry=retry)
        trace = zett_lab.replay(billing, **LIMITS, summarizer=model, cache=False, warn=False)
        connections, url = server.connections, server.openai_url
    failed = int((trace.compactions["skip_reason"] == "summary failed").sum())
    assert failed == len(trace.compactions) and failed > BREAKER_THRESHOLD
    per_call = retries + 1
    # The calls stop at the breaker's threshold, or at the span's attempts, whichever comes first.
    calls = min(math.ceil(BREAKER_THRESHOLD / per_call), SPAN_ATTEMPTS)
    assert connections == calls * per_call, "the calls stopped at the threshold"
    counts = trace.failure_counts
    assert counts[["what", "summarizer", "kind", "count"]].values.tolist() == [
        ["summary call", model.identity, "SummarizerConnectionError", failed]
    ]
    assert counts["cause"][0].startswith(
        f"SummarizerConnectionError: summarizer {model.identity} could not reach {url} after {per_call} attempt(s): "
    )


def test_a_closed_port_fails_the_remaining_calls_at_once(billing) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = summarizer(f"openai-compatible:m@{url}", retry=NO_WAIT)
    trace = zett_lab.replay(billing, **LIMITS, summarizer=model, cache=False, warn=False)
    failed = trace.summary()["failed"]
    assert failed == len(trace.compactions) == 24  # the issue's 24 summary calls
    # One call was made; the breaker failed the second at once, the span's policy every later one.
    assert endpoint_breaker(url).refused == SPAN_ATTEMPTS - 1
    refused = trace.compactions["error"].iloc[1]
    assert refused.startswith(trace.compactions["error"].iloc[0])
    assert f"[not sent: 4 connection attempts in a row to {url} failed; it is tried again" in refused
    assert trace.compactions["error"].iloc[SPAN_ATTEMPTS:].str.contains("not asked again").all()
    assert trace.failure_counts["count"].tolist() == [failed]


@pytest.mark.parametrize("status", [429, 503])
def test_rate_limits_and_server_errors_keep_their_backoff(status: int) -> None:
    conversation = coding_conversation(turns=5)
    with LoopbackServer(fail_status=status) as server:
        model = summarizer(
            f"openai-compatible:m@{server.openai_url}", retry=RetryOptions(base_delay=0, max_delay=0, max_retries=2)
        )
        trace = zett_lab.replay(
            conversation, max_tokens=600, keep_recent_tokens=200, summarizer=model, cache=False, warn=False
        )
        requests, url = server.count(), server.openai_url
    attempts = len(trace.compactions)
    assert attempts > BREAKER_THRESHOLD and trace.summary()["failed"] == attempts
    assert requests == 3 * SPAN_ATTEMPTS, "every call of the span was sent and retried, then it was not asked again"
    assert endpoint_breaker(url).refused == 0
    assert trace.failure_counts["kind"].tolist() == [f"ProviderHTTPError:{status}"]


def test_the_breaker_tries_again_after_its_cooldown() -> None:
    now = [100.0]
    breaker = EndpointBreaker("http://127.0.0.1:9/v1", clock=lambda: now[0])
    breaker.could_not_connect("cause", BREAKER_THRESHOLD - 1)
    assert breaker.refusal() is None, "below the threshold every call goes ahead"
    breaker.could_not_connect("cause", 1)
    assert breaker.refusal() == (
        f"cause [not sent: {BREAKER_THRESHOLD} connection attempts in a row to http://127.0.0.1:9/v1 failed; "
        f"it is tried again {BREAKER_COOLDOWN_S:.0f} s from now]"
    )
    now[0] += BREAKER_COOLDOWN_S
    assert breaker.refusal() is None, "after the cooldown one call tries again"
    assert breaker.refusal() is not None, "the others keep failing at once meanwhile"
    breaker.reached()
    assert breaker.refusal() is None and breaker.failures == 0
    assert breaker.refused == 2


def test_what_counts_as_a_connection_failure() -> None:
    assert is_connection_error(httpx.ConnectError("[Errno -2] Name or service not known"))  # does not resolve
    assert is_connection_error(httpx.ConnectError("[Errno 111] Connection refused"))
    assert is_connection_error(timeout_error("connect", 5.0))
    assert not is_connection_error(timeout_error("first_byte", 60.0)), "a silent provider was reached"
    assert not is_connection_error(RuntimeError("provider exploded"))


def test_the_issue_case_on_the_command_line(capsys) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    spec = f"openai-compatible:m@{url}"
    code, out, err = run_cli(
        capsys,
        "replay",
        FIXTURES / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        spec,
        "--no-cache",
    )
    assert code == cli.EXIT_FAILURES
    failed = int(re.search(r"^applied 0, not smaller 0, failed (\d+);", out, re.M).group(1))
    assert failed == 24
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        f"zett-lab: 24 summary call(s) failed ({spec}): SummarizerConnectionError: "
        f"summarizer {spec} could not reach {url} "
        "after 4 attempt(s): APIConnectionError: Connection error."
    )
    assert endpoint_breaker(url).refused == SPAN_ATTEMPTS - 1  # then the span is not asked again


def test_strict_stops_at_the_first_failure(capsys, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out_file = tmp_path / "trace.json"
    code, out, err = run_cli(
        capsys,
        "replay",
        FIXTURES / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        f"openai-compatible:m@{url}",
        "--no-cache",
        "--strict",
        "-o",
        out_file,
    )
    assert (code, out) == (cli.EXIT_FAILURES, "")
    assert re.fullmatch(
        rf"zett-lab: error: conversation '{SESSION}', turn \d+, step \d+: summary failed \(strict\): "
        r"SummarizerConnectionError: "
        rf"summarizer openai-compatible:m@{re.escape(url)} could not reach {re.escape(url)} after 4 attempt\(s\): .*\n",
        err,
    )
    assert endpoint_breaker(url).refused == 0, "nothing after the first failure was asked"
    assert not out_file.exists()


def test_exit_codes_are_documented() -> None:
    parser_help = cli.build_parser().format_help()
    reference = (FIXTURES.parent / "docs" / "reference" / "cli.md").read_text().replace("`", "")
    assert set(cli.EXIT_CODES) == {0, 1, 2, 130, 143}
    for code, meaning in cli.EXIT_CODES.items():
        assert f"  {code:<4} {meaning}" in parser_help
        assert f"| {code} | {meaning} |" in reference


# --- the Python API: warnings once per cause, counts -------------------------------------------------------


class TwoCauses(BadSummarizer):
    """Fails with two different errors, in turn."""

    def __init__(self) -> None:
        super().__init__("raise")
        self.calls = 0

    async def stream(self, request):
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("disk full")
        raise ValueError("bad reply")
        yield  # pragma: no cover - an async generator


def test_the_api_warns_once_per_cause_and_counts_them() -> None:
    with pytest.warns(SummaryFailureWarning) as record:
        trace = zett_lab.replay(
            coding_conversation(turns=5), max_tokens=600, keep_recent_tokens=200, summarizer=TwoCauses(), cache=False
        )
    counts = trace.failure_counts
    assert sorted(counts["kind"]) == ["RuntimeError", "ValueError"]
    assert counts["count"].sum() == trace.summary()["failed"] == len(trace.compactions)
    warned = [str(w.message) for w in record if w.category is SummaryFailureWarning]
    assert warned == [
        f"conversation 'hand-made': {r.count} summary call(s) failed: {r.cause}" for r in counts.itertuples()
    ]
    assert trace.summary()["summary_error"] == "RuntimeError: disk full"


def test_a_sweep_marks_failed_cells_and_never_recommends_them() -> None:
    conversation = coding_conversation(turns=5)
    with pytest.warns(SummaryFailureWarning) as record:
        result = sweep(
            [conversation],
            max_tokens=[600, 100_000],
            keep_recent_tokens=[200],
            summarizers=["truncate", BadSummarizer("raise")],
            executor="serial",
            cache=False,
            progress=False,
        )
    table = result.results
    failed = table[(table["summarizer"] == BAD) & (table["max_tokens"] == 600)].iloc[0]
    assert failed["failed"] > 0 and failed["summary_error"] == "RuntimeError: provider exploded"
    assert failed["error"] is None, "the cell ran; its summaries failed"
    assert measured_cells(table).tolist() == [
        not (s == BAD and m == 600) for s, m in zip(table["summarizer"], table["max_tokens"], strict=True)
    ]
    counts = result.failure_counts
    assert counts[["what", "summarizer", "kind", "count"]].values.tolist() == [
        ["summary call", BAD, "RuntimeError", int(failed["failed"])]
    ]
    assert [str(w.message) for w in record if w.category is SummaryFailureWarning] == [
        f"{failed['failed']} summary call(s) failed ({BAD}): RuntimeError: provider exploded; "
        "those cells are no measurement "
        "(see Sweep.failure_counts)"
    ]
    assert result.config["cells_with_failed_summaries"] == 1
    # Even where a failed cell's numbers look best (cheapest, nothing lost), it is never chosen.
    rigged = table.copy()
    row = (rigged["summarizer"] == BAD) & (rigged["max_tokens"] == 600)
    rigged.loc[row, ["total_input_tokens", "needed_anchor_recall", "lost_but_needed"]] = [0, 1.0, 0]
    chosen = recommend(rigged, "needed_anchor_recall >= 0")
    assert (chosen.summarizer, chosen.max_tokens) != (BAD, 600)
    front = pareto_front(rigged)
    assert not ((front["summarizer"] == BAD) & (front["max_tokens"] == 600)).any()


def test_a_strict_sweep_stops_at_its_first_failure() -> None:
    with pytest.raises(ResultFailure) as error:
        sweep(
            [coding_conversation(turns=5)],
            max_tokens=[600],
            keep_recent_tokens=[200],
            summarizers=[BadSummarizer("raise")],
            executor="serial",
            cache=False,
            progress=False,
            strict=True,
        )
    assert re.fullmatch(
        rf"sweep stopped at its first failure \(strict\): conversation 'hand-made', summarizer '{re.escape(BAD)}', "
        r"max_tokens=600, keep_recent_tokens=200: SummaryError: conversation 'hand-made', turn \d+, step \d+: "
        r"summary failed \(strict\): "
        r"RuntimeError: provider exploded",
        str(error.value),
    )


# --- the report ------------------------------------------------------------------------------------------


def test_a_report_shows_a_banner_and_recommends_only_measured_settings() -> None:
    grid = {"max_tokens": [600], "keep_recent_tokens": [200]}
    with pytest.warns(SummaryFailureWarning):
        report = Report.build(
            [coding_conversation(turns=5)],
            ["truncate", BadSummarizer("raise")],
            grid,
            executor="serial",
            cache=False,
            date="2025-01-01",
        )
    counts = report.failure_counts
    assert counts[["what", "summarizer", "kind"]].values.tolist() == [["summary call", BAD, "RuntimeError"]]
    n = int(counts["count"][0])
    assert report.recommendation["summarizer"] == "truncate"
    assert report.data.unmeasured_settings == {(BAD, 600, 200)}
    assert list(report.results["summarizer"]) == ["truncate"]
    headline = (
        f"{n} summary call(s) failed. 1 of 2 replays are no measurement: they are left out of every metric, "
        "and the 1 setting(s) they belong to are never recommended."
    )
    page = report.to_html()
    banner = re.search(r'<div class="callout warn" id="failures" role="alert">(.*?)</div>', page).group(1)
    assert f"<strong>{headline}</strong>" in banner
    assert (
        f'{n} summary call(s)</strong> — <code>{BAD}</code>: <span class="cause">RuntimeError: provider exploded</span>'
        in banner
    )
    assert f"> **{headline}**" in report.to_markdown()
    document = json.loads(report.to_json())
    assert document["failures"]["summary_calls"] == n and document["failures"]["unmeasured_replays"] == 1
    totals = {t["summarizer"]: t["failed"] for t in document["metrics"]["totals"]}
    assert totals == {"truncate": 0, BAD: n}


def test_a_report_where_every_summary_failed(capsys, tmp_path: Path) -> None:
    source = tmp_path / "one.json"
    coding_conversation(turns=5).save(source)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "report.html"
    code, stdout, err = run_cli(
        capsys,
        "report",
        source,
        "-o",
        out,
        "--summarizer",
        f"openai-compatible:m@{url}",
        "--max-tokens",
        "600",
        "--keep-recent-tokens",
        "200",
        "--no-progress",
        "--no-cache",
    )
    assert code == cli.EXIT_FAILURES
    assert stdout.startswith(f"wrote html report to {out}")
    lines = err.splitlines()
    assert lines[0] == "zett-lab: no replay in this report is a measurement: every one failed or had a failed summary"
    spec = re.escape(f"openai-compatible:m@{url}")
    assert len(lines) == 2
    assert re.match(
        rf"zett-lab: \d+ summary call\(s\) failed \({spec}\): SummarizerConnectionError: "
        rf"summarizer {spec} could not reach",
        lines[1],
    )
    assert 'id="failures"' in out.read_text()
    assert "Recommended setting" not in out.read_text()


def test_a_sweep_with_failed_cells_says_so_and_exits_1(capsys, tmp_path: Path) -> None:
    source = tmp_path / "one.json"
    coding_conversation(turns=5).save(source)
    spec = f"openai-compatible:m@http://127.0.0.1:{closed_port()}/v1"
    out = tmp_path / "s.sweep"
    code, stdout, err = run_cli(
        capsys,
        "sweep",
        source,
        "--max-tokens",
        "600",
        "--keep-recent-tokens",
        "200",
        "--summarizer",
        "truncate",
        spec,
        "-o",
        out,
        "--no-progress",
        "--no-cache",
    )
    assert code == cli.EXIT_FAILURES
    assert re.fullmatch(
        r"swept 1 conversation\(s\) x 1 max_tokens x 1 keep_recent_tokens x 2 summarizer\(s\) "
        r"\(2 cells: 2 replays \(\d+ forked\), 0 proven identical to one, \d+ summary calls\) in [\d.]+ s; "
        rf"saved to {re.escape(str(out))}; 1 file\(s\) read; 1 of 2 cell\(s\) are "
        r"no measurement \(failed summaries or replays: see the failed, summary_error and error columns\)\n",
        stdout,
    )
    assert len(err.splitlines()) == 1
    assert re.match(
        rf"zett-lab: \d+ summary call\(s\) failed \({re.escape(spec)}\): SummarizerConnectionError: summarizer ", err
    )


# --- settings: --no-cache, numbers too large, keep_recent_tokens >= max_tokens -------------------------------


@pytest.mark.parametrize("command", ["replay", "sweep", "report"])
def test_no_cache_on_every_command_that_summarizes(
    command: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "one.json"
    coding_conversation(turns=5).save(source)
    args = {
        "replay": ["replay", source],
        "sweep": ["sweep", source, "-o", tmp_path / "s.sweep", "--no-progress"],
        "report": ["report", source, "-o", tmp_path / "r.html", "--no-progress"],
    }[command] + ["--max-tokens", "600", "--keep-recent-tokens", "200", "--summarizer", "truncate", "--force"]
    for no_cache in (True, False):
        cache = tmp_path / f"cache-{no_cache}.sqlite"
        monkeypatch.setenv("ZETT_LAB_CACHE", str(cache))
        code, _, err = run_cli(capsys, *args, *(["--no-cache"] if no_cache else []))
        assert code == cli.EXIT_OK, err
        assert cache.exists() is not no_cache


@pytest.mark.parametrize("command", ["replay", "sweep", "report"])
def test_numbers_beyond_what_zett_lab_can_use_are_refused(command: str, capsys) -> None:
    huge = "99999999999999999999999"
    args = [command, FIXTURES / "sessions.sqlite", "--max-tokens", huge, "--keep-recent-tokens", "4k", "-o", "x.out"]
    if command == "replay":
        args = args[:-2] + ["--session", SESSION]
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(a) for a in args])
    assert exit_.value.code == cli.EXIT_USAGE
    assert capsys.readouterr().err == (
        f"zett-lab {command}: error: argument --max-tokens: {huge} is larger than zett_lab can use "
        "(at most 1,000,000,000,000 "
        f"tokens); to never compact, give a value above the conversation's size (see zett-lab {command} --help)\n"
    )


def test_the_api_refuses_them_too(billing) -> None:
    message = (
        "max_tokens=99999999999999999999999 is larger than zett_lab can use (at most 1,000,000,000,000 tokens); "
        "to never compact, give a value above the conversation's size"
    )
    with pytest.raises(SettingError) as error:
        zett_lab.replay(billing, max_tokens=99999999999999999999999, keep_recent_tokens=4000, cache=False)
    assert str(error.value) == message
    with pytest.raises(SettingError) as error:
        sweep(
            [billing],
            max_tokens=[99999999999999999999999],
            keep_recent_tokens=[4000],
            executor="serial",
            progress=False,
        )
    assert str(error.value) == message
    trace = zett_lab.replay(billing, max_tokens=10**12, keep_recent_tokens=4000, cache=False)
    assert trace.summary()["compactions_applied"] == 0 and int(trace.steps["max_tokens"].max()) == 10**12


def test_keep_recent_tokens_at_or_above_max_tokens_is_explained(capsys) -> None:
    conversation = zett_lab.load(FIXTURES / "sessions.sqlite", session="ci-flaky-kafka")
    meaning = keep_fills_budget(4000, 4000)
    with pytest.warns(SettingWarning) as record:
        trace = zett_lab.replay(conversation, max_tokens=4000, keep_recent_tokens=4000, cache=False)
    assert [str(w.message) for w in record] == [meaning]
    code, out, err = run_cli(
        capsys,
        "replay",
        FIXTURES / "sessions.sqlite",
        "--session",
        "ci-flaky-kafka",
        "--max-tokens",
        "4k",
        "--keep-recent-tokens",
        "4k",
        "--no-cache",
    )
    assert code == cli.EXIT_OK
    assert err == f"zett-lab: warning: {meaning}\n"
    over = int((trace.steps["estimate"] > 4000).sum())  # counted from the estimates, not from the skip reasons
    assert over == len(trace.steps) - 1 == 13
    line = next(line for line in out.splitlines() if line.startswith("compactions:"))
    assert line.startswith(
        f"compactions: none; {over} step(s) exceeded max_tokens and the engine found no window to summarize ("
    )
    code, out, _ = run_cli(
        capsys,
        "replay",
        FIXTURES / "sessions.sqlite",
        "--session",
        "ci-flaky-kafka",
        "--max-tokens",
        "1000k",
        "--keep-recent-tokens",
        "4k",
        "--no-cache",
    )
    assert "compactions: none (the engine's estimate never exceeded max_tokens)" in out.splitlines()
    with pytest.warns(
        SettingWarning,
        match=r"^1 of 2 settings have keep_recent_tokens >= max_tokens; "
        r"e\.g\. keep_recent_tokens=4000 >= max_tokens=4000",
    ):
        sweep(
            [conversation],
            max_tokens=[4000, 8000],
            keep_recent_tokens=[4000],
            executor="serial",
            progress=False,
            cache=False,
            metrics=False,
        )


def test_a_boundary_walk_stops_at_a_failed_summary(billing) -> None:
    """A failed summary would look like a changed decision: the walk names the value and the cause instead."""
    with pytest.raises(ResultFailure, match=r"max_tokens=6000 .*'billing-rounding'.*provider exploded"):
        zett_lab.decision_boundaries(
            billing,
            BadSummarizer("raise"),
            keep_recent_tokens=2000,
            max_tokens_range=(6000, 9000),
            cache=False,
            progress=False,
        )


def test_a_boundary_walk_into_keep_at_or_above_max_warns_once(billing) -> None:
    with pytest.warns(SettingWarning) as record:
        walked = zett_lab.decision_boundaries(
            billing,
            "truncate",
            max_tokens=12_000,
            keep_recent_tokens_range=(11_000, 14_000),
            cache=False,
            progress=False,
        )
    assert walked.replays > 1
    assert [str(w.message) for w in record if w.category is SettingWarning] == [
        f"decision_boundaries reaches {keep_fills_budget(12_000, 14_000)}"
    ]
