"""The superseded-value detector on hand-made spans: true updates, values that merely repeat, similar keys."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage

from zett_lab.load.anchors import loose
from zett_lab.load.text import clean_text
from zett_lab.measure.keyed import clauses, content_words
from zett_lab.measure.lookup import contains_loose
from zett_lab.measure.updates import (
    GrowingSpanUpdates,
    Observation,
    Update,
    _instruction_status,
    find_updates,
    observe,
)


def updates(messages, start=0, end=None):
    return find_updates(observe(messages), start, end)


def tool_step(n: int, name: str, arguments: dict, result: str) -> list:
    """An assistant tool call and its result."""
    return [
        AssistantMessage(content="", tool_calls=(ToolCall(f"call-{n}", name, arguments),)),
        ToolMessage(tool_call_id=f"call-{n}", name=name, content=result),
    ]


def pytest_run(n: int, command: str, output: str) -> list:
    return tool_step(n, "bash", {"command": command}, output)


FAILING = (
    "F.\nFAILED tests/test_a.py::test_refresh - AssertionError: 900 != 3600\n===== 1 failed, 1 passed in 0.12s ====="
)
PASSING = "..\n===== 2 passed in 0.10s ====="


# --------------------------------------------------------------------------------------------- true updates


def test_a_port_that_moved_is_one_update_with_both_indices():
    [update] = updates(
        [
            UserMessage(content="The staging database listens on port 6543 (user billing_ro)."),
            AssistantMessage(content="Querying staging."),
            UserMessage(content="Heads-up: staging moved to port 6544 last night."),
        ]
    )
    assert (update.kind, update.superseded, update.latest) == ("port", ("6543",), "6544")
    assert (update.superseded_index, update.latest_index) == (0, 2)


def test_a_host_port_in_commands_is_keyed_by_host():
    messages = [UserMessage(content="count the rows")]
    messages += pytest_run(1, "psql -h staging-db.internal -p 6543 -U ro billing -c 'select 1'", "1")
    messages += pytest_run(2, "psql -h staging-db.internal -p 6544 -U ro billing -c 'select 1'", "1")
    messages += pytest_run(3, "psql -h replica.internal -p 5432 -U ro billing -c 'select 1'", "1")
    [update] = updates(messages)
    assert (update.key, update.superseded, update.latest) == ("port:staging-db.internal", ("6543",), "6544")


def test_an_edit_that_changes_a_constant_keyed_by_file():
    messages = [UserMessage(content="Refresh tokens must live one hour.")]
    messages += tool_step(
        1,
        "read_file",
        {"path": "src/auth/tokens.py"},
        "     1\tACCESS_TTL = timedelta(seconds=900)\n     2\tREFRESH_TTL = timedelta(seconds=900)\n",
    )
    messages += tool_step(
        2,
        "edit_file",
        {
            "path": "src/auth/tokens.py",
            "old_string": "REFRESH_TTL = timedelta(seconds=900)",
            "new_string": "REFRESH_TTL = timedelta(seconds=3600)",
        },
        "Applied 1 edit.",
    )
    [update] = updates(messages)
    assert (update.kind, update.name, update.key) == (
        "setting",
        "REFRESH_TTL",
        "setting:src/auth/tokens.py:REFRESH_TTL",
    )
    assert (update.superseded, update.latest) == (("timedelta(seconds=900)",), "timedelta(seconds=3600)")
    assert (update.superseded_index, update.latest_index) == (2, 3)


def test_a_version_bump_a_move_and_a_renamed_constant():
    messages = [UserMessage(content="We pinned requests==2.31.0 last month.")]
    messages += tool_step(
        1, "bash", {"command": "pip install requests==2.32.3"}, "Successfully installed requests-2.32.3"
    )
    messages += tool_step(2, "bash", {"command": "git mv src/util.py src/helpers/util.py"}, "")
    messages += tool_step(
        3,
        "edit_file",
        {
            "path": "src/export.py",
            "old_string": 'FLOAT_FORMAT = "{:.2f}"',
            "new_string": 'AMOUNT_FORMAT = "{:.2f}"  # Decimal-safe',
        },
        "ok",
    )
    found = {u.kind: u for u in updates(messages)}
    assert (found["version"].superseded, found["version"].latest) == (("2.31.0",), "2.32.3")
    assert (found["path"].superseded, found["path"].latest) == (("src/util.py",), "src/helpers/util.py")
    assert (found["name"].superseded, found["name"].latest) == (("FLOAT_FORMAT",), "AMOUNT_FORMAT")
    assert set(found) == {"version", "path", "name"}


def test_a_test_that_failed_then_passed_in_a_run_covering_it():
    messages = [UserMessage(content="fix the refresh test")]
    messages += pytest_run(1, "python -m pytest tests/test_a.py -q", FAILING)
    messages += pytest_run(2, "python -m pytest tests -q", PASSING)
    [update] = updates(messages)
    assert (update.kind, update.name, update.superseded, update.latest) == (
        "test",
        "tests/test_a.py::test_refresh",
        ("failed",),
        "passed",
    )
    assert (update.superseded_index, update.latest_index) == (2, 4)


def test_a_passing_run_of_another_file_does_not_pass_the_failed_test():
    messages = [UserMessage(content="fix the refresh test")]
    messages += pytest_run(1, "python -m pytest tests/test_a.py -q", FAILING)
    messages += pytest_run(2, "python -m pytest tests/test_b.py -q", PASSING)
    messages += pytest_run(3, "python -m pytest tests/test_a.py -q -k other", PASSING)
    assert updates(messages) == []


def test_a_reversed_instruction_and_the_quantity_behind_it():
    found = updates(
        [
            UserMessage(content="FYI the CI runner is ubuntu-22.04 with 7 GB RAM, so don't bump test parallelism."),
            AssistantMessage(content="Understood."),
            UserMessage(
                content="The runner was upgraded to 16 GB RAM, so you may bump test parallelism after all: "
                "run it with -n 2."
            ),
        ]
    )
    by_kind = {u.kind: u for u in found}
    assert set(by_kind) == {"instruction", "quantity"}
    assert by_kind["instruction"].superseded == ("don't bump test parallelism",)
    assert by_kind["instruction"].latest == "you may bump test parallelism"
    assert (by_kind["quantity"].superseded, by_kind["quantity"].latest) == (("7 GB",), "16 GB")


def test_only_the_span_counts():
    messages = [
        UserMessage(content="The staging database listens on port 6543."),
        AssistantMessage(content="ok"),
        UserMessage(content="Staging moved to port 6544."),
    ]
    assert updates(messages, 0, 2) == []
    assert len(updates(messages, 0, 3)) == 1


# --------------------------------------------------------------------------------------------- not updates


def test_values_that_merely_repeat_are_not_updates():
    messages = [UserMessage(content="Use port 6543 for staging; session.timeout.ms=6000 in CI.")]
    messages += tool_step(1, "read_file", {"path": "config.py"}, "     1\tTIMEOUT = 30\n")
    messages += tool_step(2, "read_file", {"path": "config.py"}, "     1\tTIMEOUT = 30\n")
    messages.append(UserMessage(content="Again: staging is on port 6543 and session.timeout.ms=6000."))
    assert updates(messages) == []


def test_a_value_retyped_without_changing_is_not_an_update():
    messages = [UserMessage(content="use Decimal")]
    messages += tool_step(
        1, "edit_file", {"path": "money.py", "old_string": "CENT = 0.01", "new_string": 'CENT = Decimal("0.01")'}, "ok"
    )
    assert updates(messages) == []


def test_keys_with_similar_names_are_different_keys():
    messages = [UserMessage(content="Set DB_PORT=5432 and REDIS_PORT=6379; READ_TIMEOUT=10 and TIMEOUT=30.")]
    messages += tool_step(
        1,
        "edit_file",
        {
            "path": "config.py",
            "old_string": "TIMEOUT = 30\nREAD_TIMEOUT = 10",
            "new_string": "TIMEOUT = 30\nREAD_TIMEOUT = 12",
        },
        "ok",
    )
    messages += tool_step(2, "read_file", {"path": "other.py"}, "     1\tTIMEOUT = 45\n")
    [update] = updates(messages)
    assert (update.name, update.superseded, update.latest) == ("READ_TIMEOUT", ("10",), "12")


def test_ports_of_two_services_in_one_sentence_stay_apart():
    assert (
        updates(
            [
                UserMessage(content="Postgres runs on port 5432 and Redis on port 6379."),
                UserMessage(content="Redis listens on port 6379, Postgres on port 5432."),
            ]
        )
        == []
    )


def test_class_attributes_and_keyword_arguments_are_not_settings():
    messages = [UserMessage(content="look")]
    messages += tool_step(
        1, "read_file", {"path": "pool.py"}, "class A:\n    max_retries = 3\n\nclass B:\n    max_retries = 8\n"
    )
    messages += pytest_run(
        2, "python repro.py", "Client(limits=Limits(max_connections=10))\nClient(limits=Limits(max_connections=1))"
    )
    assert updates(messages) == []


def test_instead_of_inside_an_instruction_is_not_a_reversal():
    assert (
        updates(
            [
                UserMessage(content="Use the GitHub API for reviews."),
                UserMessage(content="Always use the GitHub API instead of a web browser."),
            ]
        )
        == []
    )


# --------------------------------------------------------------------------------------------- summaries


@pytest.fixture(scope="module")
def port_update():
    [update] = updates(
        [
            UserMessage(content="The staging database listens on port 6543."),
            UserMessage(content="Heads-up: staging moved to port 6544 last night."),
        ]
    )
    return update


@pytest.mark.parametrize(
    ("summary", "status"),
    [
        ("User: staging DB on port 6543. Never touch migrations/.", "superseded"),
        ("Staging moved from port 6543 to port 6544.", "latest"),
        ("The staging database: port 6544.", "latest"),
        ("Fixed the invoice rounding.", "neither"),
        ("Invoice 6543 was re-issued.", "neither"),  # the value without the item is not the item
        ("", "neither"),
    ],
)
def test_summary_status_of_a_port(port_update, summary, status):
    assert port_update.status_in(summary) == status


def test_summary_status_of_a_test_a_setting_and_an_instruction():
    messages = [UserMessage(content="FYI the runner has 7 GB RAM, so don't bump test parallelism.")]
    messages += pytest_run(1, "python -m pytest tests/test_a.py -q", FAILING)
    messages += tool_step(
        2,
        "edit_file",
        {"path": "src/auth/tokens.py", "old_string": "REFRESH_TTL = 900", "new_string": "REFRESH_TTL = 3600"},
        "ok",
    )
    messages += pytest_run(3, "python -m pytest tests/test_a.py -q", PASSING)
    messages.append(UserMessage(content="The runner has 16 GB RAM now, so you may bump test parallelism after all."))
    found = {u.kind: u for u in updates(messages)}
    test, setting, instruction = found["test"], found["setting"], found["instruction"]
    assert test.status_in("FAILED tests/test_a.py::test_refresh (900 != 3600)") == "superseded"
    assert test.status_in("test_refresh failed at first; after the TTL fix it passes.") == "latest"
    assert test.status_in("Ran the auth tests.") == "neither"
    assert setting.status_in("REFRESH_TTL is 900 s in src/auth/tokens.py") == "superseded"
    assert setting.status_in("Changed REFRESH_TTL from 900 to 3600.") == "latest"
    assert setting.status_in("ACCESS_TTL = 3600") == "neither"
    assert instruction.status_in("- Don't bump test parallelism (7 GB runner).") == "superseded"
    assert instruction.status_in("- Test parallelism may be bumped now (-n 2).") == "latest"
    assert instruction.status_in("- Keep the tests green.") == "neither"


# --------------------------------------------------------------------------------------------- growing spans
#
# A trace's compaction attempts ask for the updates of spans with one start and growing ends;
# GrowingSpanUpdates folds on from the previous call. Every answer must equal a fresh fold.

_WORDS = ("staging", "replica", "redis", "runner", "ram", "parallelism", "tests", "bump")
_NODES = ("tests/test_a.py::test_refresh", "tests/test_a.py::test_login", "tests/b/test_c.py::test_z", "pkg/t.py::T.w")
_RUN_PATHS = ("tests", "tests/test_a.py", "tests/b", "pkg", ".", "src")
_VALUES = ("900", "3600", "timedelta(seconds=900)", '"fast"', "6543", "6544", "16 GB", "1.2.3", "old.py", "new.py")
_KINDS = ("setting", "port", "quantity", "version", "path", "name", "test", "test-run", "instruction")


@st.composite
def _observation(draw: st.DrawFn, index: int) -> Observation:
    """An observation as :func:`observe` makes them, from small pools so keys and values collide."""
    kind = draw(st.sampled_from(_KINDS))
    qualifiers = draw(st.frozensets(st.sampled_from(_WORDS), max_size=4))
    change = draw(st.booleans())
    if kind == "test":
        node = draw(st.sampled_from(_NODES))
        return Observation("test", f"test:{node}", node, draw(st.sampled_from(("failed", "passed"))), index)
    if kind == "test-run":
        paths = draw(st.frozensets(st.sampled_from(_RUN_PATHS), max_size=2))
        return Observation("test-run", "test-run", "pytest", "passed", index, paths)
    if kind == "instruction":
        kind = draw(st.sampled_from(("instruction", "instruction-change")))
        return Observation(kind, "instruction", " ".join(sorted(qualifiers)), "-", index, qualifiers, change)
    value = draw(st.sampled_from(_VALUES))
    if kind in ("port", "quantity"):  # prose: joined by shared qualifying words
        key = (
            draw(st.sampled_from(("port", "port:db")))
            if kind == "port"
            else f"quantity:{draw(st.sampled_from(_WORDS))}"
        )
        return Observation(kind, key, key.rpartition(":")[2], value, index, qualifiers, change)
    name = draw(st.sampled_from(("ttl", "TTL", "old.py")))
    return Observation(kind, f"{kind}:{name.lower()}", name, value, index, qualifiers, change)


@st.composite
def _conversation_observations(draw: st.DrawFn) -> list[list[Observation]]:
    n = draw(st.integers(0, 25))
    return [draw(st.lists(_observation(i), max_size=3)) for i in range(n)]


@st.composite
def _spans(draw: st.DrawFn, n: int) -> list[tuple[int, int | None]]:
    """Calls as a trace makes them (one start, growing ends), with some new starts, shorter ends and None."""
    spans: list[tuple[int, int | None]] = []
    start, end = draw(st.integers(0, 2)), 0
    for _ in range(draw(st.integers(1, 12))):
        move = draw(st.sampled_from(("grow", "grow", "grow", "same", "restart", "shorter", "open")))
        if move == "restart":
            start = draw(st.integers(-1, n + 1))
        if move == "shorter":
            end = draw(st.integers(-1, max(end, 0)))
        else:
            end += draw(st.integers(0, 4)) if move != "same" else 0
        spans.append((start, None if move == "open" else end))
    return spans


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_folding_on_gives_every_call_what_a_fresh_fold_gives(data):
    observations = data.draw(_conversation_observations())
    spans = data.draw(_spans(len(observations)))
    folder = GrowingSpanUpdates(observations)
    answers = []
    for start, end in spans:
        answers.append(folder.find(start, end))
        assert answers[-1] == find_updates(observations, start, end)
    # folding on never changed an answer already given
    assert answers == [find_updates(observations, start, end) for start, end in spans]


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_traces_of_one_conversation_share_its_fold_and_each_call_gives_what_a_fresh_fold_gives(data):
    """Several traces of one conversation (one observation list) ask in turn, each its own spans: they share
    the fold (one timeline per start), and every call still equals a fresh fold."""
    observations = data.draw(_conversation_observations())
    folders = [GrowingSpanUpdates(observations) for _ in range(3)]
    calls = [(n, span) for n in range(3) for span in data.draw(_spans(len(observations)))]
    for n, (start, end) in data.draw(st.permutations(calls)):
        assert folders[n].find(start, end) == find_updates(observations, start, end)


def test_an_update_already_returned_keeps_its_values_when_the_fold_goes_on():
    messages = [UserMessage(content="The staging database listens on port 6543.")]
    messages += pytest_run(1, "python -m pytest tests/test_a.py -q", FAILING)
    messages.append(UserMessage(content="Heads-up: staging moved to port 6544 last night."))
    messages += pytest_run(2, "python -m pytest tests/test_a.py -q", PASSING)
    messages.append(UserMessage(content="Staging moved again, to port 6545."))
    folder = GrowingSpanUpdates(observe(messages))
    [port] = folder.find(0, 4)
    assert (port.superseded, port.latest, port.latest_index) == (("6543",), "6544", 3)
    grown = folder.find(0, len(messages))
    assert [(u.kind, u.latest) for u in grown] == [("test", "passed"), ("port", "6545")]
    assert (port.superseded, port.latest, port.latest_index) == (("6543",), "6544", 3)
    assert folder.find(0, 4) == [port]  # a shorter end starts the fold again


def test_updates_with_the_same_index_and_key_keep_the_order_of_a_fresh_fold():
    """Two prose ports told apart by their words change in one message; the one seen first is listed
    first, also when the other had an update at an earlier call."""

    def port(value: str, index: int, word: str) -> Observation:
        return Observation("port", "port", "port", value, index, frozenset({word}))

    observations = [[port("1", 0, "db")], [port("1", 1, "redis")], [port("2", 2, "redis")]]
    observations.append([port("2", 3, "db"), port("3", 3, "redis")])
    folder = GrowingSpanUpdates(observations)
    assert [u.superseded for u in folder.find(0, 3)] == [("1",)]
    grown = folder.find(0, 4)
    assert [(u.superseded, u.latest, u.latest_index) for u in grown] == [(("1",), "2", 3), (("1", "2"), "3", 3)]
    assert grown == find_updates(observations, 0, 4)


# --------------------------------------------------------------------------------------------- one summary, many updates
#
# status_in reads a summary's clauses once per text and searches them as one text; the answer must be the
# one a clause-by-clause reading gives (the reference below: every clause, every name, every value).


def _clause_by_clause(update: Update, text: str) -> str:
    if not text:
        return "neither"
    if update.kind == "instruction":
        return _instruction_status(update, [(c, content_words(c)) for c in clauses(clean_text(text))])

    def mentions(clause: str, name: str) -> bool:
        return re.search(rf"(?<!\w){re.escape(loose(name))}(?!\w)", clause) is not None

    def holds(clause: str, token: str) -> bool:
        if re.fullmatch(r"-?\d+(?:\.\d+)?", token):
            return re.search(rf"(?<![\d.]){re.escape(token)}(?!\.?\d)", clause) is not None
        return contains_loose(clause, token)

    parts = [loose(c) for c in clauses(clean_text(text))]
    if update.names:
        parts = [c for c in parts if any(mentions(c, name) for name in update.names)]
    if update.kind == "test":
        if any(re.search(r"\b(?:pass|passes|passed|passing|green|fixed|succeeds|succeeded|ok)\b", c) for c in parts):
            return "latest"
        failed = r"\b(?:fail|fails|failed|failing|failure|errors?|red|broken)\b"
        return "superseded" if any(re.search(failed, c) for c in parts) else "neither"
    if any(holds(c, token) for c in parts for token in update.latest_evidence):
        return "latest"
    if any(holds(c, token) for c in parts for token in update.superseded_evidence):
        return "superseded"
    return "neither"


_WORDS_IN_SUMMARIES = (
    "staging", "port", "6543", "6544", "65430", "6543.5", "-7", "3.0", "REFRESH_TTL", "refresh_ttl", "src/a.py",
    "./src/a.py", "host:6543/2", "x.6543", "passed", "FAILED", "ok", "not", "don't", "bump", "parallelism",
    "'quoted'", '"900"', "`cmd`", "a", "",
)  # fmt: skip
_SEPARATORS = (" ", "  ", "\n", "\t", ". ", "! ", "? ", ".", "", ":", "/", "-", "_", "\u00a0", "'")


@st.composite
def _phrase(draw: st.DrawFn, max_words: int, pool: tuple[str, ...] = _WORDS_IN_SUMMARIES) -> str:
    """Words of the pool (or any short text) with separators between them: clause breaks included."""
    words = st.sampled_from(pool) | st.text(alphabet="ab6.-_ /:'\n", max_size=4)
    parts = draw(st.lists(st.tuples(words, st.sampled_from(_SEPARATORS)), min_size=1, max_size=max_words))
    return "".join(word + separator for word, separator in parts)[: draw(st.integers(1, 400))]


@st.composite
def _update_and_summary(draw: st.DrawFn) -> tuple[Update, str]:
    kind = draw(st.sampled_from(("setting", "port", "test", "path", "instruction")))
    names = tuple(draw(st.lists(_phrase(2), max_size=3)))
    latest, superseded = draw(st.frozensets(_phrase(2), max_size=3)), draw(st.frozensets(_phrase(2), max_size=3))
    if kind == "instruction":
        latest = draw(st.frozensets(st.sampled_from(("bump", "parallelism", "staging", "not")), min_size=1))
        superseded = draw(st.frozensets(st.sampled_from(("bump", "parallelism", "runner", "ram")), min_size=1))
    update = Update(
        kind, f"{kind}:k", "name", ("old value",), "new value", 0, 1, names=names if kind != "instruction" else (),
        latest_evidence=latest, superseded_evidence=superseded,
    )  # fmt: skip
    said = tuple(word for phrase in (*names, *latest, *superseded) for word in re.split(r"\s+", phrase) if word)
    return update, draw(_phrase(40, _WORDS_IN_SUMMARIES + said * 4))


def test_a_name_broken_across_two_lines_is_not_named():
    update = Update(
        "port", "port:k", "p", ("6543",), "6544", 0, 1, names=("staging port",), latest_evidence=frozenset({"6544"})
    )
    assert update.status_in("6544 staging\nport") == _clause_by_clause(update, "6544 staging\nport") == "neither"
    assert update.status_in("6544 on staging port") == "latest"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(_update_and_summary(), min_size=1, max_size=4), shared=st.booleans())
def test_a_summary_read_once_answers_as_clause_by_clause(cases, shared):
    """Also when several updates ask about one summary (shared=True: the first case's text for all)."""
    for update, summary in cases:
        text = cases[0][1] if shared else summary
        assert update.status_in(text) == _clause_by_clause(update, text)
