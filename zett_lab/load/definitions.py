"""The names an agent's own code defines (:func:`defined_names`): a name the agent chose is no anchor a later
step needs from the compacted span, whatever else mentions it (read by the needed-anchor measures)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Container, Iterator
from itertools import accumulate
from typing import NamedTuple

from zett_agent.messages import AnyMessage, AssistantMessage

from .anchor_forms import AnchorKey
from .anchors import anchor_keys
from .text import argument_strings, clean_text

#: A name the code defines: assigned (``x = 1``, ``x: int = 1``, ``export X=1``, ``self.x = 1``, ``x := 1``),
#: named by a definition (``def``, ``class``, ``function``, ``defmodule`` ...), looped over, or bound by ``as``.
#: A bare ``name=value`` is a keyword argument, not a definition (it needs a declaring word or spaces).
_DEFINED = re.compile(
    r"(?:^|[;{])[ \t]*(?:(?P<declared>(?:(?:export|local|readonly|declare|let|const|var|val|my|our|final|static"
    r"|public|private|protected)[ \t]+)+)?)(?P<assigned>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)"
    r"(?(declared)[ \t]*|(?::[ \t]*[^=\n;]{1,80}?)?[ \t]+):?=(?![=>~])"
    r"|\b(?:def|defp|defmacro|defmodule|class|function|func|fn|interface|struct|enum|trait)[ \t]+"
    r"(?P<named>[A-Za-z_$][\w$.]*)"
    r"|\bfor[ \t]*\(?[ \t]*(?:(?:const|let|var)[ \t]+)?(?P<looped>[A-Za-z_$][\w$]*)[ \t]+(?:in|of)\b"
    r"|\bas[ \t]+(?P<aliased>[A-Za-z_$][\w$]*)",
    re.M,
)
#: The parameters of a definition (``def f(a, b=1)``, ``function f(a)``, ``(a, b) =>``).
_PARAMETERS = re.compile(
    r"\b(?:def|defp|function|func|fn)[ \t]+[\w$]*[ \t]*\((?P<listed>[^()]*)\)|\((?P<arrow>[^()]*)\)[ \t]*=>"
)
_PARAMETER = re.compile(r"^[\s*&]*(?:(?:const|let|var|val|final|mut)\s+)?(?P<name>[A-Za-z_$][\w$]*)")
#: A string literal given as a map's or an object's value (``"id" => "toolu_read"``, ``"file_path": "/a/b.ex"``,
#: ``cwd: "/home/u/project"``): data the code holds.
_DATA_VALUE = re.compile(r"""(?:=>|:)[ \t]*(["'])([^"'\n]{1,300})\1""")
#: A fenced code block as CommonMark writes one: three backticks opening a line (indented at most three spaces) and
#: closing it on a line of their own, or the text's end. Not backticks inside a line: a string literal holding
#: "```elixir\\ndef foo```" in a test file is code, not a document.
_FENCED = re.compile(r"^ {0,3}```[^\n]*\n(.*?)(?:^ {0,3}```|\Z)", re.S | re.M)
#: A tool's line number before a line it prints (``cat -n``'s ``    71\t``, a Read's ``71→``).
_LINE_NUMBER = re.compile(r"^[ \t]*\d+(?:→|\t| {2,})")
#: How many lines of code on each side of a definition's line must have been shown before, with it, for the
#: definition to reproduce code rather than choose a name (:class:`_Quoted`).
QUOTED_LINES = 2
#: Tool-call arguments holding the text an edit replaces (``old_string``, ``old_str``, ``search``): what was
#: there, not what the agent writes.
_REPLACED_ARGUMENT = re.compile(r"^(?:old|search)", re.I)


class Definitions(NamedTuple):
    """The names an agent message defines in the code it writes, as lower-cased components joined by ``/``
    (the form :func:`~zett_lab.load.anchor_forms.spellings` compares)."""

    #: New locals of the code it writes for its tool calls: assignment targets that are bare names,
    #: parameters, loop variables and ``as`` aliases, absent from the text the call replaces (``old_string``);
    #: and the bare assignment targets of code its reply proposes. Names chosen there: any other name would
    #: have done.
    fresh: frozenset[str]
    #: Every name its code defines, functions, classes, modules and attributes too, the fenced blocks of its
    #: text included.
    every: frozenset[str]
    #: The new variables among ``fresh`` (assigned or looped over): a dotted name they head (``repos.extend`` of a
    #: new ``repos = []``) is chosen with them. Not a parameter's or an alias's: their attributes are what the
    #: caller passes (``socket.assigns.x``) or the module's (``import pvlib.iam as iam``).
    owners: frozenset[str] = frozenset()
    #: The anchors of the string literals its new code gives as a map's values (``"file_path" =>
    #: "/home/u/project/lib/app.ex"``, ``"id" => "toolu_read"``), absent from the text the call replaces: data it
    #: made up there, a test's fixture. Not its reply's text, nor anything of a document written to a file (a text
    #: with fenced blocks, such as Markdown): its ``(type: "team_member")`` quotes a spec, in or outside the fences.
    data: frozenset[AnchorKey] = frozenset()


#: What a definition binds: a variable (assigned or looped over), an ``as`` alias, a parameter, or anything else
#: (a function, class, attribute).
LOCAL, ALIAS, PARAMETER, OTHER = "local", "alias", "parameter", "other"
#: The names of the object a method's code is about (``self.sid = sid``).
_SELF = ("self", "this")


def _named_by_parameters(found: list[tuple[str, str]], new: set[str], replaced: str) -> set[str]:
    """The attributes set from a new parameter of the same name (``self.sid = sid``): named by it."""
    return {
        name
        for name, _ in found
        if name.count("/") == 1 and name.split("/")[0] in _SELF and name.split("/")[1] in new and name not in replaced
    }


def code_line(line: str) -> str:
    """A line of code as lines are compared: its words joined by single spaces, without a tool's line number."""
    return " ".join(_LINE_NUMBER.sub("", line).split())


class _Quoted:
    """Which lines of a text reproduce a block of code shown before: the line and its :data:`QUOTED_LINES`
    neighbours on each side (blank lines aside; ``around`` of them) are all lines of ``shown``. A pasted snippet or
    a quoted signature is such a block; a line borrowed into new code among lines of the agent's own is not."""

    def __init__(self, text: str, shown: Container[str], around: int = QUOTED_LINES) -> None:
        lines = [code_line(line) for line in text.split("\n")]
        self._starts = list(accumulate((len(line) + 1 for line in text.split("\n")), initial=0))
        written = [i for i, line in enumerate(lines) if line]
        seen = [lines[i] in shown for i in written]
        self._quoted = [False] * len(lines)
        for k, i in enumerate(written):
            self._quoted[i] = all(seen[max(0, k - around) : k + around + 1])

    def at(self, position: int) -> bool:
        """Whether the line holding ``text[position]`` is quoted."""
        return self._quoted[bisect_right(self._starts, position) - 1]


def _defined_in(
    text: str, prose: bool = False, shown: Container[str] = (), around: int = QUOTED_LINES
) -> Iterator[tuple[str, str]]:
    """``(name, kind)`` of each definition in a piece of code (:data:`LOCAL`, :data:`ALIAS`, :data:`PARAMETER` or
    :data:`OTHER`); in ``prose`` (a reply's text) only assignments and parameters, never a loop variable or an
    alias. A definition in a block of code shown before (``shown``: lines as :func:`code_line` gives them; see
    :class:`_Quoted`, ``around``) reproduces code that exists: :data:`OTHER`, nothing chosen there."""
    quoted = _Quoted(text, shown, around) if shown else None
    for match in _DEFINED.finditer(text):
        if prose and (match.group("looped") or match.group("aliased")):
            continue
        named = match.group("named")
        name = named or match.group("assigned") or match.group("looped") or match.group("aliased")
        kind = OTHER if named or "." in name else ALIAS if match.group("aliased") else LOCAL
        yield name.lower().replace(".", "/"), OTHER if quoted and quoted.at(match.start()) else kind
    for match in _PARAMETERS.finditer(text):
        reproduced = bool(quoted and quoted.at(match.start()))
        for parameter in (match.group("listed") or match.group("arrow") or "").split(","):
            if found := _PARAMETER.match(parameter):
                yield found.group("name").lower(), OTHER if reproduced else PARAMETER


def defined_names(message: AnyMessage, shown: Container[str] = ()) -> Definitions:
    """The names an agent message defines in the code it writes (see :class:`Definitions`).

    Code is what the agent writes for a tool (its arguments, except the text an edit replaces) and the
    fenced blocks of its text, which count for ``every`` (and as proposed code, below). The fenced blocks of a
    document it writes (a design comment posted with ``cat > comment.md << 'EOF'``) are code too, but a document
    mostly quotes: there a definition on any one line shown before (``shown``) reproduces it. Prose ("the class Foo") defines nothing. But code a reply proposes, fenced or
    not, chooses its variables as the tool's code does: its assignments' bare targets are ``fresh`` (and
    ``owners``), and so is an attribute set from a parameter of the same name (``self.sid = sid``); not a
    loop variable or an alias (prose writes "look for x in", "such as x"), nor the parameters themselves.

    ``shown``: the lines of code (:func:`code_line`) that messages not the agent's showed it before (the user's
    snippet, a file a tool printed). A definition inside a block of such lines (:class:`_Quoted`) reproduces code
    that exists, in a tool's code or a reply quoting it (``installation_id: str | None = None,`` in a route's
    signature read before, the user's snippet pasted into a script): its names are recalled, not ``fresh``, and
    head no ``owners``. One such line among the agent's own (``aoi_input = aoi`` borrowed into its fix) is its
    choice still."""
    if not isinstance(message, AssistantMessage):
        return Definitions(frozenset(), frozenset())
    fresh: set[str] = set()
    owners: set[str] = set()
    data: set[AnchorKey] = set()
    text = clean_text(message.content)
    every = {name for block in _FENCED.findall(text) for name, _ in _defined_in(block)}
    # code the reply proposes (fenced or not) chooses its variables too (see the docstring)
    proposed = list(_defined_in(text, prose=True, shown=shown))
    fresh.update(n for n, k in proposed if k == LOCAL)
    owners.update(n for n, k in proposed if k == LOCAL and n not in _SELF)
    fresh.update(_named_by_parameters(proposed, {n for n, k in proposed if k == PARAMETER}, ""))
    for call in message.tool_calls or ():
        arguments = call.arguments
        replaced = ""
        if isinstance(arguments, dict):
            replaced = "\n".join(
                argument_strings([v for k, v in arguments.items() if _REPLACED_ARGUMENT.match(str(k))])
            ).lower()
            arguments = {k: v for k, v in arguments.items() if not _REPLACED_ARGUMENT.match(str(k))}
        for text in argument_strings(arguments):
            # a document's fenced blocks mostly quote code: a definition on any line shown before reproduces it
            quoted = _FENCED.findall(text)
            found = [
                *_defined_in(_FENCED.sub("", text) if quoted else text, shown=shown),
                *(found for block in quoted for found in _defined_in(block, shown=shown, around=0)),
            ]
            new = {name for name, kind in found if kind != OTHER and name not in replaced}
            every.update(name for name, _ in found)
            fresh |= new
            owners.update(name for name, kind in found if kind == LOCAL and name in new and name not in _SELF)
            fresh.update(_named_by_parameters(found, new, replaced))
            if not quoted:  # a document's ``type: "team_member"`` quotes a spec: data only of code
                data.update(
                    key
                    for match in _DATA_VALUE.finditer(text)
                    if match.group(2).lower() not in replaced
                    for key in anchor_keys(match.group(2))
                )
    return Definitions(frozenset(fresh), frozenset(every), frozenset(owners), frozenset(data))
