"""The file formats a conversation's paths carry (zett_lab.load.file_formats)."""

from __future__ import annotations

from zett_lab.load.anchors import anchor_keys
from zett_lab.load.file_formats import file_formats, names_format


def test_the_extensions_of_a_conversations_paths_are_its_formats():
    """``session_live.html.heex`` carries HEEx (its last suffix only), ``App.tsx`` TSX; a dotfile or a folder
    carries none."""
    keys = anchor_keys("- lib/spotter_web/live/session_live.html.heex\n- assets/src/App.tsx\n- config/.env\n- lib/x/")
    formats = file_formats(keys)
    assert {"heex", "tsx"} <= formats
    assert "html" not in formats and "env" not in formats


def test_an_identifier_naming_a_format_is_the_formats_name():
    formats = file_formats(anchor_keys("lib/spotter_web/live/session_live.html.heex"))
    assert names_format(("identifier", "HEEx"), formats)
    assert not names_format(("identifier", "TranscriptComponents"), formats)
    assert not names_format(("identifier", "Phoenix.HEEx"), formats)  # a qualified name is a module, not a format
    assert not names_format(("path", "heex"), formats)
