"""The anchor scans sped up for issue 32 find exactly what the patterns they replace found.

:data:`~zett_lab.load.anchors._PATH`, :data:`~zett_lab.load.anchors._IDENT` and
:data:`~zett_lab.load.anchor_forms.NUMBER` gained a lookahead that every match satisfies, and
:func:`~zett_lab.load.anchors._shas` matches a hex digit before its lookbehind; the patterns as they were are
kept here only as the reference. Texts are drawn from the characters the patterns decide on.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.load import anchor_forms, anchors

_OLD_PATH = re.compile(
    r"(?<![\w@:/.~\\<-])(?:"
    r"(?P<win>[A-Za-z]:\\(?:[\w.@+-]+\\)*[\w.@+-]+)"
    r"|(?P<abs>(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?)"
    r"|(?P<rel>[\w.@+-]+(?:/[\w.@+-]+)+/?)"
    r"|(?P<dir>[\w.@+-]+/(?![\w@+-]|\.\w))"
    r"|(?P<file>[\w@+-][\w.@+-]*\.(?:" + anchors._EXT + r"))"
    r")(?![\w/\\(])"
)
_OLD_IDENT = re.compile(
    r"(?<!\\)\b(?:"
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"
    r"|_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*"
    r"|__[A-Za-z][A-Za-z0-9_]*__"
    r"|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+"
    r"|[A-Z]{2,}[a-z][A-Za-z0-9]*"
    r"|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*"
    r"|[A-Za-z_]\w*(?=\((?!s\)))"
    r")(?![\w-])"
)
_OLD_NUMBER = re.compile(
    r"(?<![\w.,/$€£-])(?P<cur>[$€£])?(?P<v>v)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)*|\d+(?:\.\d+)*)"
    r"(?:(?P<sp>[ \t]?)(?P<unit>" + anchor_forms._UNIT + r")(?![\w/]|→|\t)|(?!\w|[.,]\d|→|\t))",
    re.I,
)
_OLD_SHA = re.compile(r"(?<![\w-])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{7,64}(?![\w-])")

_WORDS = (
    "src py md .py ms GB % x2 deadbeef 0123456 abc1234 __init__ HTTPServer loadUser os.path "
    "12345678-1234-1234-1234-123456789abc C:\\ ./ ../ ~/ 1,000 3.2 v0.2.1 ()"
)
_PIECES = st.sampled_from([*"aZz_09fFeE/.-:~\\@+$€£vV(),'\"`\t\n é→", " ", "  ", *_WORDS.split()])
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)


def _found(pattern: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], str | None, dict[str, str | None]]]:
    return [(match.span(), match.lastgroup, match.groupdict()) for match in pattern.finditer(text)]


@settings(max_examples=3000)
@given(_TEXTS)
def test_paths_identifiers_and_numbers_match_as_before(text: str) -> None:
    assert _found(anchors._PATH, text) == _found(_OLD_PATH, text)
    assert _found(anchors._IDENT, text) == _found(_OLD_IDENT, text)
    assert _found(anchor_forms.NUMBER, text) == _found(_OLD_NUMBER, text)


@settings(max_examples=3000)
@given(st.lists(st.sampled_from([*"0123456789abcdefABCDEFgxZ_- .\n/'\"", "é", "deadbeef", "1234567"]), max_size=90))
def test_shas_match_as_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert [match.span() for match in anchors._shas(text)] == [match.span() for match in _OLD_SHA.finditer(text)]
