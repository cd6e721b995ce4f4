"""Token counting: offline o200k_base provisioning and the counters replay can use.

zett-agent's default estimator tokenizes with tiktoken's ``o200k_base``, which
tiktoken downloads at first use. :func:`provision_o200k` writes the same
vocabulary from the ``quicktok-v1`` wheel into a tiktoken cache directory and
checks it against the SHA-256 tiktoken publishes, so counting works offline.

Example::

    >>> from zett_agent.messages import UserMessage
    >>> count_tokens([UserMessage(content="hello world")])
    2
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolMessage,
    UserMessage,
)

from .errors import ZettLabError
from .files import write_atomic

#: SHA-256 tiktoken publishes for ``o200k_base.tiktoken``.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: The URL tiktoken loads o200k_base from; its cache file is named by this URL's SHA-1.
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

#: Flat per-image estimate the engine uses.
IMAGE_TOKENS = 1_100

#: The largest max_tokens / keep_recent_tokens zett_lab accepts: a trillion tokens, far beyond any
#: model's context window, and exact in every table (64-bit integers) and figure (64-bit floats).
MAX_TOKEN_SETTING = 10**12

TokenCounter = Callable[[Sequence[AnyMessage]], int]

#: The identity of every exact counter: zett-agent's own estimator (tiktoken ``o200k_base`` per message)
#: and zett_lab's memoizing counters, which give its integers.
EXACT_COUNTER = "o200k"
#: The identity of the fast approximation (characters / 4 per text piece).
APPROX_COUNTER = "chars/4"


class VocabularyError(ZettLabError):
    """The o200k_base vocabulary could not be provisioned or failed its checksum."""


def _cache_dir() -> Path:
    """The directory tiktoken reads cached vocabularies from (same rules as tiktoken)."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def o200k_bytes_from_quicktok() -> bytes:
    """Render quicktok's o200k vocabulary in tiktoken's text format (base64 token, rank)."""
    raw = resources.files("quicktok").joinpath("data/o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", raw, 0)
    offset = 4
    lines = []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", raw, offset)
        offset += 2
        token = raw[offset : offset + length]
        offset += length
        (rank,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        lines.append(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    return b"".join(lines)


@lru_cache(maxsize=1)
def provision_o200k() -> Path:
    """Make ``tiktoken.get_encoding("o200k_base")`` work offline; return the cache file.

    An existing cache file is kept when its hash is right; otherwise the vocabulary
    is rebuilt from quicktok, verified, and written atomically. Raises
    :class:`VocabularyError` when the hash does not match tiktoken's.
    """
    directory = _cache_dir()
    target = directory / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256:
        return target
    data = o200k_bytes_from_quicktok()
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise VocabularyError(
            f"o200k_base built from quicktok has SHA-256 {digest}, expected {O200K_SHA256}; refusing to use it"
        )
    return write_atomic(target, data)


@lru_cache(maxsize=1)
def _encoding():
    provision_o200k()
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def warm_up() -> None:
    """Provision and load the o200k vocabulary now (a worker does it once, before its first replay)."""
    _encoding()


def engine_payload(message: AnyMessage) -> list[str | int]:
    """What zett-agent's default estimator tokenizes for one message.

    Text pieces are tokenized; integers are flat counts (images). This mirrors
    ``zett_agent.extensions.compaction._count_message`` so counts can be memoized
    by text; ``tests/replay/test_tokens.py`` checks it against the engine on every fixture.
    """
    if isinstance(message, SystemMessage):
        return [message.content]
    if isinstance(message, (UserMessage, ToolMessage, AgentMessage)):
        return _content_payload(message.content)
    if isinstance(message, AssistantMessage):
        payload = {"content": message.content, "reasoning": message.reasoning, "tool_calls": message.tool_calls}
        return [json.dumps(payload, ensure_ascii=False, default=repr)]
    return [repr(message)]


def _content_payload(content: object) -> list[str | int]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, Sequence):
        return [repr(content)]
    pieces: list[str | int] = []
    for part in content:
        if isinstance(part, TextContent):
            pieces.append(part.text)
        elif isinstance(part, ImageContent):
            pieces.append(IMAGE_TOKENS)
        else:
            pieces.append(repr(part))
    return pieces


class _PayloadCounter:
    """Sum a per-text count over each message's payload, remembering counts by identity.

    ``identity`` names the counting rule (what :func:`counter_identity` reports): two counters
    with one identity give the same integers, so they decide a replay the same way.
    """

    identity: str

    #: Identity entries kept before the identity memo is cleared (texts stay memoized).
    _MAX_IDENTITIES = 200_000

    def __init__(self, count_text: Callable[[str], int]) -> None:
        #: The count of one text piece (what a user message holding only that text counts).
        self.count_text = count_text
        self._by_identity: dict[int, tuple[AnyMessage, int]] = {}
        # The last long sequences counted, most recent first, with their totals.
        self._recent: list[tuple[tuple[AnyMessage, ...], int]] = []

    def count_message(self, message: AnyMessage) -> int:
        entry = self._by_identity.get(id(message))
        if entry is None:
            count = sum(
                piece if isinstance(piece, int) else self.count_text(piece) for piece in engine_payload(message)
            )
            if len(self._by_identity) >= self._MAX_IDENTITIES:
                self._by_identity.clear()
            # Holding the message keeps its id from being reused while the entry lives.
            entry = (message, count)
            self._by_identity[id(message)] = entry
        return entry[1]

    #: Sequences up to this length are summed directly; longer ones first try recent ones.
    _SHORT = 16
    #: Long sequences remembered (the context, the cutoff walk's window, one spare).
    _RECENT = 3

    def _sum(self, messages: Sequence[AnyMessage]) -> int:
        total = 0
        by_identity = self._by_identity
        for message in messages:
            entry = by_identity.get(id(message))
            total += entry[1] if entry is not None else self.count_message(message)
        return total

    def __call__(self, messages: Sequence[AnyMessage]) -> int:
        """The sum of per-message counts.

        The engine recounts the whole context before every step, and the recent window once
        per candidate cutoff, so most sequences extend one counted just before at the end or
        at the front. Those are counted from its total plus the new messages; the comparison
        that proves the shared part holds the same messages runs in C (identity first, then
        equality, and equal messages have equal counts), so the result is the plain sum's.
        """
        if len(messages) <= self._SHORT:
            return self._sum(messages)
        items = messages if isinstance(messages, tuple) else tuple(messages)
        n = len(items)
        recent = self._recent
        for position, (base, base_total) in enumerate(recent):
            k = len(base)
            if k > n:
                continue
            if items[0] is base[0] and items[k - 1] is base[-1] and items[:k] == base:
                total = base_total + self._sum(items[k:])
            elif items[-1] is base[-1] and items[n - k] is base[0] and items[n - k :] == base:
                total = base_total + self._sum(items[: n - k])
            else:
                continue
            self._recent = [(items, total), *recent[:position], *recent[position + 1 :]]
            return total
        total = self._sum(items)
        self._recent = [(items, total), *recent[: self._RECENT - 1]]
        return total


class MemoizingCounter(_PayloadCounter):
    """Exact engine counts, memoized by text block (each text cut at line breaks before ``[``) and by message identity.

    zett-agent's estimator is a sum of per-message counts, so remembering counts
    gives the same integers while the engine's cutoff loop (which recounts the
    recent window for every candidate cutoff) stops re-tokenizing.
    """

    identity = EXACT_COUNTER

    def __init__(self, max_texts: int | None = None) -> None:
        """``max_texts`` bounds the block memo (None: unbounded, right for a replay; a live agent sets it)."""
        encoding = _encoding()
        super().__init__(_blockwise(lru_cache(maxsize=max_texts)(lambda text: len(encoding.encode_ordinary(text)))))


def _blockwise(count_block: Callable[[str], int]) -> Callable[[str], int]:
    """The exact count of a whole text from ``count_block``'s remembered counts of its blocks.

    A text is cut at each line break followed by ``[`` (where a transcript's ``[label]`` starts):
    o200k's pre-tokenizer always cuts there (none of its pieces holds a line break followed by
    anything but line breaks, slashes or white space) and tokens never cross its pieces, so the sum
    of the blocks' counts is the whole text's. Summaries repeat the same blocks again and again: a
    mask summary is most of the transcript before its cutoff, and each counted whole was most of a
    mask replay's CPU (as tokenizing truncate's drafts whole was most of its cold summaries').
    """

    def count_text(text: str) -> int:
        if "\n[" not in text:
            return count_block(text)
        blocks = text.split("\n[")
        middle = sum(count_block(f"[{block}\n") for block in blocks[1:-1])
        return count_block(blocks[0] + "\n") + middle + count_block("[" + blocks[-1])

    return count_text


class ApproxCounter(_PayloadCounter):
    """A fast approximation for speed studies: characters / 4, rounded up, per text piece."""

    identity = APPROX_COUNTER

    def __init__(self) -> None:
        super().__init__(lambda text: -(-len(text) // 4))


@lru_cache(maxsize=1)
def _shared_counter() -> MemoizingCounter:
    return MemoizingCounter()


def count_tokens(messages: Sequence[AnyMessage]) -> int:
    """Count tokens exactly as zett-agent's default estimator does, memoized.

    Example::

        >>> count_tokens([UserMessage(content="hello world")])
        2
    """
    return _shared_counter()(messages)


def count_tokens_past(messages: Sequence[AnyMessage], limit: int) -> int:
    """:func:`count_tokens` of ``messages`` when it is at most ``limit``; else a count above ``limit`` (of the
    messages up to the first that takes the sum past it): all a caller comparing the total with ``limit`` needs,
    without tokenizing the rest of a long conversation.

    Example::

        >>> count_tokens_past([UserMessage(content="hello world")] * 3, 3)
        4
    """
    counter = _shared_counter()
    total = 0
    for message in messages:
        total += counter.count_message(message)
        if total > limit:
            break
    return total


def count_text_tokens(text: str) -> int:
    """:func:`count_tokens` of a user message holding only ``text`` (0 for ``""``), without making the message.

    What summarizers count lines and drafts with: a message made only to be counted would take a
    place in the counter's memo of messages.

    Example::

        >>> count_text_tokens("hello world")
        2
    """
    return _shared_counter().count_text(text)


def approx_count_tokens(messages: Sequence[AnyMessage]) -> int:
    """Characters / 4 per text piece (images at the engine's flat 1,100): fast, not exact."""
    return _approx_counter(messages)


_approx_counter = ApproxCounter()


def message_counter(counter: TokenCounter) -> Callable[[AnyMessage], int] | None:
    """The per-message count ``counter`` sums, when it is one of zett_lab's counters; None for any other.

    zett_lab's counters are plain sums of per-message counts, so a walk over many windows of
    one list can add counts up instead of counting each window; for a counter of unknown
    make nothing is assumed.
    """
    if counter is count_tokens:
        return _shared_counter().count_message
    if counter is approx_count_tokens:
        return _approx_counter.count_message
    if isinstance(counter, _PayloadCounter):
        return counter.count_message
    return None


def counter_identity(counter: TokenCounter) -> str:
    """The identity of a counter: its ``identity`` attribute (zett_lab's counters, a user's own), the exact one's
    for :func:`count_tokens`, the approximation's for :func:`approx_count_tokens`, else its qualified name."""
    identity = getattr(counter, "identity", None)
    if isinstance(identity, str) and identity.strip():
        return identity
    if counter is count_tokens:
        return EXACT_COUNTER
    if counter is approx_count_tokens:
        return APPROX_COUNTER
    name = getattr(counter, "__qualname__", None) or type(counter).__qualname__
    module = getattr(counter, "__module__", None) or type(counter).__module__
    return f"{module}.{name}" if module and module != "builtins" else name


#: Counter names traces written before counters had identities carry, by the identity they mean.
_OLD_COUNTER_NAMES = {
    "count_tokens": EXACT_COUNTER,
    "MemoizingCounter": EXACT_COUNTER,
    "CompactionExtension._count_tokens": EXACT_COUNTER,
    "approx_count_tokens": APPROX_COUNTER,
    "ApproxCounter": APPROX_COUNTER,
}


def counter_named(identity: str) -> TokenCounter | None:
    """The shared counter of a known identity (also as a trace written before identities names it); None for
    any other (a user's counter, which only its owner can rebuild)."""
    identity = _OLD_COUNTER_NAMES.get(identity, identity)
    if identity == EXACT_COUNTER:
        return count_tokens
    if identity == APPROX_COUNTER:
        return approx_count_tokens
    return None
