"""aider chat history (``.aider.chat.history.md``).

aider appends every session to one markdown file: ``# aider chat started at
<time>`` opens a session, ``#### `` lines are the user's input, ``> `` lines are
aider's own output (never sent to the model), everything else is the model's
reply. This importer splits the file the way aider's own
``split_chat_history_markdown`` does, one conversation per session, with these
refinements:

* a user input that starts with ``/`` or ``!`` is an aider command, not a message
  to the model, and is dropped (counted in ``metadata["commands_dropped"]``);
  ``/ask``, ``/code``, ``/architect`` and ``/context`` with text send that text;
  ``/clear`` and ``/reset`` empty aider's chat history, so the rest of the session
  becomes a new conversation (``"<session>#2"``).
* when the model answers twice with only aider output in between (aider resent
  after adding files, fixing lint errors, or running a command), the aider output
  in between becomes a user message marked ``attributes={"aider_output": True}``
  (aider sent *some* follow-up there, e.g. "I added these files"; its exact text is
  not in the history file).

The history file does not hold the system prompt, the repository map or the
contents of files added to the chat, which aider sends with every request:
token counts from these conversations are far below what the model saw
(``metadata["lossy"]`` says so). Sessions with no message to the model are
skipped.

What the log does show of the chat files becomes the conversation's
``harness_context`` (:class:`~zett_lab.load.conversation.HarnessContext`), held
from the message where the file joined the chat until aider's output says it
left (``Removed ... from the chat``, ``/drop``, ``/reset``): each file's path
(``Added ... to the chat``, ``Added ... to read-only files``, a file name
answered yes to "Add file to the chat?" or "Create new file?", ``Applied edit
to ...``), and the text of each SEARCH/REPLACE or whole-file block the model
wrote for it (the file held that text, and aider re-sent it). Files stay in the
chat across ``/clear``. aider's repository map (the repository's file names, sent with every
request) becomes one entry held for the whole conversation: the file names aider's output
proposed for the chat or listed, and every file name the model wrote before anything in the log
showed it. The model cannot know a repository's files but from what it was sent, so such a name
came from the map (assumed: aider sends a repo map, its default; a file the model creates joins
the chat anyway).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..anchors import anchors_in_text
from ..conversation import Conversation, HarnessContext
from ..registry import Reader, register
from ..storable import decode
from ._common import Builder, finish_file

FORMAT = "aider-chat-history-md"
_START = re.compile(r"^# aider chat started at (.*?)\s*$")
_TOOL = re.compile(r"^>( |$)")
_SENDING = {"ask", "code", "architect", "context"}
_CLEARING = {"clear", "reset"}
_MAIN_MODEL = re.compile(r"^Main model: (\S+)")
_VERSION = re.compile(r"^Aider v(\S+)")
_TOKENS = re.compile(r"^Tokens: ")
_ADDED = re.compile(r"^Added (?!\d+ lines of output)(?P<path>\S.*?) to (?:the chat|read-only files)\.?\s*$")
_REMOVED = re.compile(r"^Removed (?:read-only file )?(?P<path>\S.*?) from the chat\.?\s*$")
_APPLIED = re.compile(r"^Applied edit to (?P<path>\S.*?)\s*$")
_CONFIRMED = re.compile(r"^(?:Add file to the chat|Create new file)\?.*:\s*(?P<answer>y|yes|a|all)\s*$", re.I)
_PROPOSED = re.compile(r"^Add file to the chat\?")
_DROPPING = re.compile(r"^Dropping (?P<path>\S.*?) from the chat\.?\s*$")
#: aider's listings of files (``/ls``): in the chat, read-only, or only in the repository map.
_LISTING = re.compile(r"^(?P<kind>Files in chat|Read-only files|Repo files not in the chat):\s*$")
_FILE_NAME = re.compile(r"^[\w./@+~-]*[\w@+-]\.?[\w./@+-]*$")
#: An edit block as aider's edit formats write it: the file name on its own line, then (after an optional
#: fence line) SEARCH/REPLACE halves, or a fenced whole file.
_EDIT_BLOCK = re.compile(
    r"^(?P<path>[^\s`][^\n`]*?)[ \t]*\n(?P<fence>```[^\n]*\n)?"
    r"(?:<<<<<<< SEARCH\n(?P<search>.*?)^=======\n(?P<replace>.*?)^>>>>>>> REPLACE|(?(fence)(?P<whole>.*?)^```|(?!)))",
    re.M | re.S,
)


class _ChatFiles:
    """The files aider holds in the chat and what the log shows of them, as harness context entries."""

    def __init__(self) -> None:
        #: path -> the open entries (start, text, label) for it
        self.open: dict[str, list[tuple[int, str, str]]] = {}
        #: files aider named as the repository's (proposed for the chat, or listed): its repo map names them
        self.repo: set[str] = set()

    def add(self, b: Builder, path: str) -> None:
        path = path.strip().strip("`'\"")
        if path and path not in self.open:
            self.open[path] = [(len(b.messages), path, f"aider chat file {path}")]

    def edited(self, b: Builder, assistant_index: int, text: str) -> None:
        """The edit blocks of an assistant reply: their files join the chat, holding the blocks' text."""
        for block in _EDIT_BLOCK.finditer(text):
            path = block.group("path").strip().strip("`'\"*:")
            body = "\n".join(filter(None, (block.group("search"), block.group("replace"), block.group("whole"))))
            if " " in path or not ("." in path or "/" in path) or not body.strip():
                continue
            self.add(b, path)
            self.open[path].append((assistant_index, body, f"aider chat file {path} (edit block)"))

    def drop(self, b: Builder, path: str | None = None) -> None:
        """``path`` (every file when None) leaves the chat before the next message."""
        for name in [path.strip()] if path is not None else list(self.open):
            for start, text, label in self.open.pop(name, []):
                b.harness.append(HarnessContext(start, text, len(b.messages), label))

    def carry(self, old: Builder, new: Builder) -> None:
        """A /clear: the files stay in the chat of the conversation that starts."""
        kept = {path: [(0, text, label) for _, text, label in entries] for path, entries in self.open.items()}
        self.drop(old)
        self._repo_map(old)
        self.open = kept

    def close(self, b: Builder) -> None:
        for entries in self.open.values():
            b.harness.extend(HarnessContext(start, text, None, label) for start, text, label in entries)
        self.open = {}
        self._repo_map(b)

    def _repo_map(self, b: Builder) -> None:
        """The repository's file names the log shows, as the repo map aider sends with every request."""
        if self.repo:
            b.harness.append(HarnessContext(0, "\n".join(sorted(self.repo)), None, "aider repo map (file names)"))

    def named_unseen(self, reply: str, shown: Sequence[str]) -> None:
        """The file names the model wrote in ``reply`` that no text of ``shown`` (every block the log showed
        before it, lower-cased) holds: they came from the repository map."""
        for anchor in anchors_in_text(reply, role="none"):
            name = anchor.normalized.lower()
            if anchor.type == "path" and not any(name in text for text in shown):
                self.repo.add(anchor.normalized)

    def read_output(self, b: Builder, lines: list[str]) -> None:
        listing: str | None = None  # what the file names that follow are: "chat", "repo", or None
        for previous, line in zip(["", *lines[:-1]], lines, strict=True):
            name = line.strip()
            if listing and _FILE_NAME.match(name) and ("." in name or "/" in name):
                self.repo.add(name)
                if listing == "chat":
                    self.add(b, name)
                continue
            listing = None
            if (m := _ADDED.match(line)) or (m := _APPLIED.match(line)):
                self.add(b, m.group("path"))
            elif (m := _REMOVED.match(line)) or (m := _DROPPING.match(line)):
                self.drop(b, m.group("path"))
            elif m := _LISTING.match(name):
                listing = "repo" if m.group("kind").startswith("Repo") else "chat"
            elif _PROPOSED.match(line) and previous.strip():
                self.repo.add(previous.strip())
                if m := _CONFIRMED.match(line):
                    self.add(b, previous)
                    listing = "chat" if m.group("answer").lower() in ("a", "all") else None
            elif (m := _CONFIRMED.match(line)) and previous.strip():
                self.add(b, previous)


def sniff(path: Path, head: bytes) -> bool:
    """An aider history: the first non-blank line is ``# aider chat started at ...``."""
    if not path.is_file():
        return False
    text = head.lstrip().split(b"\n", 1)[0].decode("utf-8", errors="ignore")
    return bool(_START.match(text))


def read(path: Path) -> list[Conversation]:
    """One conversation per aider session (and per /clear within a session)."""
    text = decode(path.read_bytes())
    sessions: list[tuple[int, str, list[tuple[int, str, list[str]]]]] = []
    blocks: list[tuple[int, str, list[str]]] | None = None
    kind: str | None = None
    lines: list[str] = []
    start_line = 0

    def close() -> None:
        nonlocal lines, kind
        if blocks is not None and kind is not None and lines:
            blocks.append((start_line, kind, lines))
        lines, kind = [], None

    for number, line in enumerate(text.splitlines(), start=1):
        started = _START.match(line)
        if started:
            close()
            blocks = []
            sessions.append((number, started.group(1), blocks))
            continue
        if blocks is None:
            if line.strip():
                raise InputError(path, f"line {number}", "text before the first '# aider chat started at' line")
            continue
        if line.startswith("#### ") or line == "####":
            role, content = "user", line[5:].rstrip()
        elif _TOOL.match(line):
            role, content = "tool", line[2:].rstrip()
        else:
            role, content = "assistant", line
        if role != kind:
            close()
            kind, start_line = role, number
        lines.append(content)
    close()

    conversations: list[Conversation] = []
    seen: dict[str, int] = {}
    for number, started_at, session_blocks in sessions:
        base = _unique(f"aider-{started_at.replace(' ', 'T')}", seen)
        conversations.extend(_session(path, base, number, started_at, session_blocks))
    return finish_file(path, conversations, "this aider chat history")


def _session(
    path: Path, base: str, line: int, started_at: str, blocks: list[tuple[int, str, list[str]]]
) -> list[Conversation]:
    info: dict[str, Any] = {}
    parts: list[Builder] = [Builder("aider")]
    pending_tool: list[str] = []
    last: str | None = None  # last role that reached the model: user / assistant
    files = _ChatFiles()
    shown: list[str] = []  # what the log showed so far, lower-cased
    for _number, role, lines in blocks:
        b = parts[-1]
        shown.append("\n".join(lines).lower())
        if role == "tool":
            _tool_output(b, lines, info, files)
            pending_tool.extend(lines)
            continue
        content = "\n".join(lines).strip()
        if not content:
            continue
        if role == "user":
            pending_tool = []
            if content[:1] in ("/", "!"):
                command, _, rest = content[1:].partition(" ")
                command = command.strip().lower()
                if content[:1] == "/" and command in _SENDING and rest.strip():
                    content = rest.strip()
                else:
                    b.counts["commands_dropped"] += 1
                    if content[:1] == "/" and (command == "reset" or (command == "drop" and not rest.strip())):
                        files.drop(b)
                    if content[:1] == "/" and command in _CLEARING and b.has_dialogue():
                        parts.append(Builder("aider"))
                        files.carry(b, parts[-1])
                        last = None
                    continue
            b.user(content)
            last = "user"
            continue
        # assistant
        if last is None:
            b.counts["replies_without_prompt_dropped"] += 1
            continue
        if last == "assistant":
            between = "\n".join(x for x in pending_tool if x.strip() and not _TOKENS.match(x)).strip()
            b.user(between or "[aider output between two replies]", aider_output=True)
        files.named_unseen(content, shown[:-1])
        b.assistant(content)
        files.edited(b, len(b.messages) - 1, content)
        pending_tool = []
        last = "assistant"
    files.close(parts[-1])
    dialogues = [b for b in parts if b.has_dialogue()]
    return [
        b.build(base if n == 0 else f"{base}#{n + 1}", path, FORMAT, _metadata(info, started_at, line))
        for n, b in enumerate(dialogues)
    ]


def _metadata(info: dict[str, Any], started_at: str, line: int) -> dict[str, Any]:
    """What a session's conversations say of their source (aider's model and version, where the session starts)."""
    return {
        "agent": "aider",
        "model": info.get("model"),
        "aider_version": info.get("version"),
        "started_at": started_at,
        "session_line": line,
        "lossy": "aider's history omits the system prompt, repo map and added file contents",
        "system_prompt_recorded": False,
    }


def _tool_output(b: Builder, lines: list[str], info: dict[str, Any], files: _ChatFiles) -> None:
    """aider's own output lines: the files it read, the model and version it names first, its token reports."""
    files.read_output(b, lines)
    for item in lines:
        if (m := _MAIN_MODEL.match(item)) and "model" not in info:
            info["model"] = m.group(1)
        elif (m := _VERSION.match(item)) and "version" not in info:
            info["version"] = m.group(1)
        if _TOKENS.match(item):
            b.counts["token_reports"] += 1


def _unique(name: str, seen: dict[str, int]) -> str:
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name}.{seen[name]}"


register(Reader(FORMAT, "aider chat history (.aider.chat.history.md)", sniff, read))
