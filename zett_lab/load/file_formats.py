"""The names of the file formats a conversation's paths carry: a format's name is vocabulary, not the project's.

A path's extension names its file's format (``lib/app_web/live/page_live.html.heex`` is a HEEx template,
``src/App.tsx`` TSX), and an agent writing that name (``shared HEEx component``) names the format as it
names a language, whatever the compacted span said. The extension is the path's last file name's suffix after its
last dot, compared without case; the formats are those the conversation's own paths carry, so the rule reads
no list of formats.
"""

from __future__ import annotations

from collections.abc import Iterable

from .anchor_forms import AnchorKey, components


def file_formats(keys: Iterable[AnchorKey]) -> frozenset[str]:
    """The extensions (lower case, without the dot) of the file names among ``keys``' paths: ``heex`` of
    ``lib/x/page_live.html.heex``. Not a name with no dot before its last character, nor a dotfile's name
    (``.env``)."""
    found: set[str] = set()
    for type_, normalized in keys:
        if type_ != "path" or not (parts := components(type_, normalized)):
            continue
        stem, dot, extension = parts[-1].rpartition(".")
        if dot and stem and extension.isalnum():
            found.add(extension.lower())
    return frozenset(found)


def names_format(key: AnchorKey, formats: frozenset[str]) -> bool:
    """Whether an identifier is the name of one of the formats (``HEEx`` where a ``.heex`` file is a path)."""
    return key[0] == "identifier" and "." not in key[1] and key[1].lower() in formats
