"""Build summary models from specs: offline names, zett-agent providers, or a model passed through.

Spec forms (see :func:`summarizer`)::

    "extractive" | "anchors" | "truncate" | "mask"      offline, default budget
    "truncate:0.1" | "anchors:2000"                      offline with a budget (share of span | tokens)
    "openai:MODEL"            key from OPENAI_API_KEY
    "anthropic:MODEL"         key from ANTHROPIC_API_KEY
    "google:MODEL"            key from GEMINI_API_KEY or GOOGLE_API_KEY
    "deepseek:MODEL"          key from DEEPSEEK_API_KEY
    "ollama:MODEL"            no key (default server http://localhost:11434)
    "openai-compatible:MODEL@http://host:port/v1"
                              key from OPENAI_COMPATIBLE_API_KEY if set (many local servers need none)
    any of the provider forms may end with "@BASE_URL" to point the provider at another endpoint

Provider summarizers are built with zett-agent's own provider classes, so the summary calls go
through the same client code the user's agent runs, with zett-agent's retry policy
(:class:`~zett_agent.model.RetryOptions`) and its typed errors
(:mod:`zett_agent.providers.base`). The API key is read once, kept in memory only, and never
appears in an identity string.

An endpoint that cannot be reached is not asked again for every call (:mod:`zett_lab.summarizers.breaker`);
a summarizer's identity is :func:`~zett_lab.summarizers.identity.summarizer_identity`'s.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import re
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelRequest,
    RetryOptions,
    TimeoutOptions,
)

from ..errors import SettingError
from .breaker import SummarizerConnectionError, endpoint_breaker, is_connection_error
from .concurrency import LimitedModel, PerLoop, check_concurrency, limited
from .identity import provider_identity, public_url, summarizer_identity
from .offline import OFFLINE_SUMMARIZERS, OfflineSummarizer, parse_budget


class ProviderModel(AgentModel, Protocol):
    """A zett-agent provider (``OpenAIProvider``, ``AnthropicProvider``, ...): a model with HTTP connections to close."""

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class ProviderKind:
    """How to build one provider: its zett-agent class, key variables, and URL rules."""

    name: str
    target: str  # "module:Class" under zett_agent.providers
    key_env: tuple[str, ...]
    key_required: bool = True
    url_required: bool = False
    #: Key used when none is set and none is required (the OpenAI SDK insists on one).
    placeholder_key: str | None = None

    def load(self) -> type[ProviderModel]:
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)


PROVIDERS: dict[str, ProviderKind] = {
    "openai": ProviderKind("openai", "zett_agent.providers.openai:OpenAIProvider", ("OPENAI_API_KEY",)),
    "anthropic": ProviderKind("anthropic", "zett_agent.providers.anthropic:AnthropicProvider", ("ANTHROPIC_API_KEY",)),
    "google": ProviderKind(
        "google", "zett_agent.providers.google:GoogleProvider", ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    ),
    "deepseek": ProviderKind("deepseek", "zett_agent.providers.deepseek:DeepSeekProvider", ("DEEPSEEK_API_KEY",)),
    "ollama": ProviderKind("ollama", "zett_agent.providers.ollama:OllamaProvider", (), key_required=False),
    "openai-compatible": ProviderKind(
        "openai-compatible",
        "zett_agent.providers.openai_compatible:OpenAICompatibleProvider",
        ("OPENAI_COMPATIBLE_API_KEY",),
        key_required=False,
        url_required=True,
        placeholder_key="no-key",
    ),
}

VALID_FORMS = (
    "offline: " + ", ".join(OFFLINE_SUMMARIZERS) + " (optionally NAME:BUDGET, e.g. 'truncate:0.1' or 'anchors:2000'); "
    "providers: openai:MODEL, anthropic:MODEL, google:MODEL, deepseek:MODEL, ollama:MODEL, "
    "openai-compatible:MODEL@http://HOST:PORT/v1 (any provider form may end with @BASE_URL); "
    "or an AgentModel instance"
)

_PROVIDER_SPEC = re.compile(r"^(?P<provider>[a-z][a-z-]*):(?P<model>.+?)(?:@(?P<url>https?://\S+))?$")


class ProviderSummarizer:
    """A summary model backed by a zett-agent provider.

    The provider (and its HTTP client) is created once per event loop, because an HTTP
    connection pool cannot be shared between loops (``asyncio.run`` per conversation, or a
    thread per worker, each has its own). ``max_concurrency`` limits simultaneous summary
    calls, per event loop. The wrapped provider applies its own :class:`RetryOptions`.

    Attributes:
        identity: ``PROVIDER:MODEL[@URL][(options)]``, without the key.
        provider: the provider instance for the current loop (or a spare one outside a loop).
        retry: the retry policy the provider applies.
    """

    def __init__(
        self,
        identity: str,
        factory: Callable[[], ProviderModel],
        *,
        retry: RetryOptions,
        max_concurrency: int | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.identity = identity
        #: Where requests go (without credentials), for error messages.
        self.endpoint = endpoint or f"{identity.partition(':')[0]}'s default endpoint"
        self.retry = retry
        self.max_concurrency = check_concurrency(max_concurrency)
        self._factory = factory
        self._spare: ProviderModel | None = factory()  # built now so bad options fail at construction
        self._providers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ProviderModel] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # loops may run in several threads (one per worker)
        self._limit = PerLoop(self.max_concurrency)

    def __repr__(self) -> str:
        return f"<ProviderSummarizer {self.identity}>"

    @property
    def provider(self) -> AgentModel:
        """The zett-agent provider model of the running event loop (one per loop: a client is bound to its loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            if loop is None:
                if self._spare is None:
                    self._spare = self._factory()
                return self._spare
            provider = self._providers.get(loop)
            if provider is None:
                if self._spare is not None:
                    provider, self._spare = self._spare, None
                else:
                    provider = self._factory()
                self._providers[loop] = provider
            return provider

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        breaker = endpoint_breaker(self.endpoint)
        refusal = breaker.refusal()
        if refusal is not None:
            raise SummarizerConnectionError(refusal)
        emitted = False
        try:
            async for event in limited(self.provider.stream(request), self._limit.semaphore()):
                emitted = True
                yield event
        except Exception as error:
            if emitted or not is_connection_error(error):
                breaker.reached()
                raise
            detail = f"{type(error).__name__}: {error}"
            if error.__cause__ is not None and str(error.__cause__) != str(error):
                detail += f" ({type(error.__cause__).__name__}: {error.__cause__})"
            cause = (
                f"summarizer {self.identity} could not reach {self.endpoint} "
                f"after {self.retry.max_retries + 1} attempt(s): {detail}"
            )
            breaker.could_not_connect(cause, self.retry.max_retries + 1)
            raise SummarizerConnectionError(cause) from error
        breaker.reached()

    async def aclose(self) -> None:
        """Close the current loop's provider (its HTTP connections)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - aclose is awaited inside a loop
            return
        provider = self._providers.pop(loop, None)
        if provider is not None:
            await provider.aclose()


def _api_key(kind: ProviderKind, options: dict[str, Any]) -> str | None:
    explicit = options.pop("api_key", None)
    variable = options.pop("api_key_env", None)
    if explicit is not None:
        if not isinstance(explicit, str) or not explicit.strip():
            raise SettingError(f"{kind.name} summarizer: api_key must be a non-empty string")
        return explicit
    variables = (variable,) if variable else kind.key_env
    for name in variables:
        if not isinstance(name, str) or not name:
            raise SettingError(f"{kind.name} summarizer: api_key_env must be an environment variable name")
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if kind.key_required or variable:
        names = " or ".join(variables)
        raise SettingError(
            f"{kind.name} summarizer needs an API key: set the environment variable {names} "
            "(or use an offline summarizer: " + ", ".join(OFFLINE_SUMMARIZERS) + ")"
        )
    return kind.placeholder_key


def _provider_summarizer(
    kind: ProviderKind, model: str, url: str | None, options: dict[str, Any]
) -> ProviderSummarizer:
    options = dict(options)
    max_concurrency = options.pop("max_concurrency", None)
    base_url = options.pop("base_url", None)
    if base_url is not None and url is not None and base_url != url:
        raise SettingError(f"{kind.name} summarizer: two base URLs given ({url!r} in the spec, {base_url!r} as option)")
    url = url or base_url
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingError(f"{kind.name} summarizer: base URL {url!r} is not an http(s) URL")
    if kind.url_required and url is None:
        raise SettingError(
            f"{kind.name} summarizer needs a base URL: write '{kind.name}:{model}@http://HOST:PORT/v1' "
            "or pass base_url="
        )
    retry = options.pop("retry", None)
    if retry is not None and not isinstance(retry, RetryOptions):
        raise SettingError(f"retry must be a zett_agent.model.RetryOptions, got {type(retry).__name__}")
    timeout = options.get("timeout")
    if timeout is not None and not isinstance(timeout, TimeoutOptions):
        raise SettingError(f"timeout must be a zett_agent.model.TimeoutOptions, got {type(timeout).__name__}")
    key = _api_key(kind, options)
    cls = kind.load()
    accepted = inspect.signature(cls.__init__).parameters
    unknown = sorted(name for name in options if name not in accepted or name in ("self", "model", "api_key"))
    if unknown:
        allowed = sorted(
            {n for n in accepted if n not in ("self", "model", "api_key", "base_url")}
            | {"api_key", "api_key_env", "base_url", "max_concurrency"}
        )
        raise SettingError(f"{kind.name} summarizer: unknown option(s) {unknown}; accepted: {allowed}")
    arguments: dict[str, Any] = {"model": model, **options}
    if key is not None:
        arguments["api_key"] = key
    if url is not None:
        arguments["base_url"] = url
    if retry is not None:
        arguments["retry"] = retry

    def factory() -> ProviderModel:
        try:
            return cls(**arguments)
        except (TypeError, ValueError) as error:
            raise SettingError(f"{kind.name} summarizer: {error}") from error

    identity = provider_identity(kind.name, model, public_url(url) if url else None, options)
    provider_retry = retry if retry is not None else getattr(cls, "retry", RetryOptions())
    return ProviderSummarizer(
        identity,
        factory,
        retry=provider_retry,
        max_concurrency=max_concurrency,
        endpoint=public_url(url) if url else None,
    )


def _offline(name: str, budget_text: str | None, options: dict[str, Any]) -> OfflineSummarizer:
    cls = OFFLINE_SUMMARIZERS[name]
    options = dict(options)
    options.pop("max_concurrency", None)  # offline calls are synchronous; nothing to limit
    if budget_text is not None:
        if "budget" in options:
            raise SettingError(f"{name}: budget given twice (in the spec and as budget=)")
        options["budget"] = budget_text
    accepted = inspect.signature(cls.__init__).parameters
    unknown = sorted(n for n in options if n not in accepted or n == "self")
    if unknown:
        allowed = sorted(n for n in accepted if n != "self")
        raise SettingError(f"{name}: unknown option(s) {unknown}; accepted: {allowed}")
    if isinstance(options.get("budget"), str):
        options["budget"] = parse_budget(options["budget"], allow_none=cls.allows_unbounded, owner=name)
    return cls(**options)


def summarizer(spec: str | AgentModel, **options: object) -> AgentModel:
    """Build a summary model from a spec (see the module docstring for the forms).

    Keyword Args:
        budget: offline summarizers: tokens (int) or share of the span (float in (0, 1]).
        head, keep_output_tokens, max_unit_chars, max_line_chars: per offline summarizer.
        retry: :class:`zett_agent.model.RetryOptions` for provider summarizers.
        timeout: :class:`zett_agent.model.TimeoutOptions` for provider summarizers.
        max_concurrency: at most this many simultaneous summary calls (per event loop).
        base_url: endpoint for a provider (same as ``@URL`` in the spec).
        api_key, api_key_env: the key itself, or the variable to read it from (default:
            the provider's usual variable).
        others: anything else the zett-agent provider class accepts (temperature, extra_headers, ...).

    Raises:
        SettingError: unknown spec or option, missing API key (naming the variable), bad budget.
    """
    if not isinstance(spec, str):
        if isinstance(spec, AgentModel) or callable(getattr(spec, "stream", None)):
            limit = check_concurrency(options.pop("max_concurrency", None))
            if options:
                raise SettingError(
                    f"options {sorted(options)} apply to specs, not to a model instance "
                    f"({type(spec).__name__}); only max_concurrency can wrap an instance"
                )
            return LimitedModel(spec, limit) if limit is not None else spec
        raise SettingError(
            f"summarizer spec must be a string or an AgentModel, got {type(spec).__name__}; valid: {VALID_FORMS}"
        )
    text = spec.strip()
    name, colon, rest = text.partition(":")
    if name in OFFLINE_SUMMARIZERS:
        if colon and not rest.strip():
            raise SettingError(f"summarizer spec {spec!r}: empty budget after ':'")
        return _offline(name, rest.strip() if colon else None, options)
    match = _PROVIDER_SPEC.match(text)
    if match and match.group("provider") in PROVIDERS:
        model = match.group("model").strip()
        if not model:
            raise SettingError(f"summarizer spec {spec!r}: missing model name")
        return _provider_summarizer(PROVIDERS[match.group("provider")], model, match.group("url"), options)
    raise SettingError(f"unknown summarizer spec {spec!r}; valid forms: {VALID_FORMS}")


_OFFLINE_IDENTITY = re.compile(r"^(?P<name>[a-z]+)\(budget=(?P<budget>[^,()]+)\)$")


def spec_of(identity: str) -> str | None:
    """The spec that rebuilds the offline summarizer a saved result names by ``identity``, or None.

    An offline summarizer's identity (``anchors(budget=0.1)``) maps back to ``anchors:0.1`` when the
    model it builds has exactly that identity. A provider's identity is never rebuilt: an identity
    read from a file (a saved sweep, a trace someone sent) must not decide where a request goes or
    which key it carries, so a provider is called only when the user names it on that run.
    """
    match = _OFFLINE_IDENTITY.match(identity)
    candidates = [identity]
    if match:
        budget = match.group("budget")
        candidates.insert(0, match.group("name") if budget == "None" else f"{match.group('name')}:{budget}")
    for spec in candidates:
        if spec.partition(":")[0] not in OFFLINE_SUMMARIZERS:
            continue
        try:
            model = summarizer(spec)
        except SettingError:
            continue
        if summarizer_identity(model) == identity:
            return spec
    return None


def selects_by_anchors(identity: str) -> bool:
    """Whether the summarizer an identity names picks what to keep with the anchor extractor the anchor metrics
    count (the ``anchors`` baseline, any budget or option): on those metrics it partly scores the metric against
    itself. A provider's identity: False."""
    match = _OFFLINE_NAME.match(str(identity))
    return match is not None and OFFLINE_SUMMARIZERS[match.group(1)].selects_by_anchors


def scored_against_itself(identities: Mapping[str, str]) -> list[str]:
    """The compared names (name -> summarizer identity) whose summarizer :func:`selects_by_anchors`, when that tilts
    the comparison or the figures of the one name: none when two or more names all ran the same summarizer (engines
    compared with one summarizer share the bias, so it favours none of them)."""
    if len(identities) > 1 and len(set(identities.values())) == 1:
        return []
    return [name for name, identity in identities.items() if selects_by_anchors(identity)]


_OFFLINE_NAME = re.compile(rf"^({'|'.join(map(re.escape, OFFLINE_SUMMARIZERS))})\(")
