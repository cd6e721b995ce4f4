"""The study stage behind the widgets: the cached replay-and-measure session and the paired comparison."""

from __future__ import annotations

import dataclasses

import pytest

import zett_lab
from tests.helpers import CountingSummarizer, coding_conversation
from zett_lab.errors import SettingError
from zett_lab.study.compare import UNREACHABLE, Comparison
from zett_lab.study.session import Session


@pytest.fixture
def session():
    conversations = [
        coding_conversation(turns=8, cid="first"),
        coding_conversation(turns=12, tools_per_turn=3, cid="second"),
    ]
    return Session(conversations, [CountingSummarizer(), "mask", "truncate:0.1"], cache=False)


def test_a_session_result_is_the_replay(session):
    result = session.run("first", session.setting("mask", 700, 300))
    alone = zett_lab.replay(
        session.conversations["first"], max_tokens=700, keep_recent_tokens=300, summarizer="mask", cache=False
    )
    assert not result.cached
    assert result.trace.compactions[["step", "span_start", "span_end", "applied"]].equals(
        alone.compactions[["step", "span_start", "span_end", "applied"]]
    )
    assert result.losses is not None and len(result.losses.conversation) == 1


def test_a_session_computes_each_setting_once(session):
    first = session.run("first", session.setting("mask", 700, 300))
    again = session.run("first", session.setting("mask", 700, 300))
    assert again.cached and again.trace is first.trace and session.replays == 1
    other = session.run("first", dataclasses.replace(session.setting("mask", 700, 300), usage="synthetic"))
    assert not other.cached and session.replays == 2
    with pytest.raises(SettingError, match="no summarizer"):
        session.run("first", session.setting("nope", 700, 300))
    with pytest.raises(SettingError, match="no conversation"):
        session.run("third", session.setting("mask", 700, 300))


def paired_comparison(session: Session, conversation: str, max_tokens: int, keep_recent_tokens: int) -> Comparison:
    return zett_lab.compare(
        session, conversation=conversation, max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens
    )


def test_paired_comparison_forces_the_reference_steps(session):
    label = next(iter(session.summarizers))
    paired = paired_comparison(session, "first", 700, 300)
    reference_steps = paired.reference.compactions.loc[paired.reference.compactions["applied"], "step"].tolist()
    assert paired.compact_at == tuple(f"step:{s}" for s in reference_steps) and reference_steps
    for (trace,) in paired.traces.values():
        assert trace.setting.max_tokens == UNREACHABLE
        assert trace.compactions["step"].tolist() == reference_steps
    assert list(paired.figures()["summarizer"]) == list(session.summarizers) and label in paired.traces
    assert len(paired.summaries()) == len(reference_steps) * len(session.summarizers)


def test_paired_figures_are_the_measured_ones(session):
    paired = paired_comparison(session, "second", 700, 300)
    for row in paired.figures().to_dict("records"):
        conversation = paired.losses[row["summarizer"]].conversation.iloc[0]
        for name in ("anchor_retention", "needed_anchor_recall", "lost_but_needed", "compression_ratio"):
            assert row[name] == conversation[name] or (
                row[name] != row[name] and conversation[name] != conversation[name]
            )
    assert {"ci_low", "ci_high"} <= set(paired.summary.columns)


def test_nothing_to_compare(session):
    paired = paired_comparison(session, "first", 10**9, 300)
    assert paired.compact_at == () and paired.traces == {} and paired.summary.empty and paired.summaries().empty


def test_the_default_summarizers_are_each_one_summarizer_once():
    """``compare(Session(convs), ...)`` compared ``anchors:0.1`` with ``anchors``: one summarizer (one identity, the
    summary cache's key), so identical rows."""
    from zett_lab.summarizers import DEFAULT_SUMMARIZER, OFFLINE_SUMMARIZERS, summarizer, summarizer_identity

    labels = list(Session([coding_conversation(turns=4)], cache=False).summarizers)
    assert labels[0] == DEFAULT_SUMMARIZER and "anchors" not in labels
    identities = [summarizer_identity(summarizer(label)) for label in labels]
    assert len(set(identities)) == len(labels)
    assert set(identities) == {summarizer_identity(summarizer(name)) for name in OFFLINE_SUMMARIZERS}
