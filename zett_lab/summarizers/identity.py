"""A summary model's identity: the string that names everything deciding its answers, never a key.

It keys the summary cache and names the summarizer in traces; a provider's identity names its endpoint
when that is not the provider's default, and the options that change its answers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

#: Class names of zett-agent providers and the spec prefix that builds them.
_CLASS_PREFIXES = {
    "OpenAIProvider": "openai",
    "AnthropicProvider": "anthropic",
    "GoogleProvider": "google",
    "DeepSeekProvider": "deepseek",
    "OllamaProvider": "ollama",
    "OpenAICompatibleProvider": "openai-compatible",
}


def public_url(url: str) -> str:
    """``url`` without credentials, query or fragment, and without a trailing slash (for identities)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


#: Each provider's endpoint when none is given (zett-agent's own defaults): an identity names the
#: endpoint only when it is another one, so ``openai:gpt-5-mini`` stays what it always meant.
DEFAULT_ENDPOINTS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "deepseek": "https://api.deepseek.com/v1",
    "ollama": "http://localhost:11434",
}
#: Options that change a provider's answers, named in its identity (so two settings never share cache entries).
_ANSWER_OPTIONS = ("temperature", "max_tokens", "response", "prompt_cache")
#: Options named in an identity by a digest of their value (they may be long).
_DIGEST_OPTIONS = ("extra_body", "extra_query")


def provider_endpoint(model: object) -> str | None:
    """Where a zett-agent provider object sends its requests (without credentials), or None when it does not say.

    Read from the provider's SDK client (``base_url`` of the OpenAI and Anthropic clients, of the
    httpx client inside the Ollama client).
    """
    client = getattr(model, "_client", None)
    for holder in (client, getattr(client, "_client", None)):
        url = getattr(holder, "base_url", None)
        if url is not None and str(url).startswith(("http://", "https://")):
            return public_url(str(url))
    return None


def provider_identity(prefix: str, model: str, endpoint: str | None, options: Mapping[str, object]) -> str:
    """``PREFIX:MODEL[@ENDPOINT][(options)]``: everything that decides a provider's answers, never a key.

    The endpoint is left out when it is the provider's default (:data:`DEFAULT_ENDPOINTS`); options
    that change answers are named (long ones by a digest of their value).
    """
    identity = f"{prefix}:{model}"
    if endpoint is not None and endpoint != DEFAULT_ENDPOINTS.get(prefix):
        identity += f"@{endpoint}"
    shown = {name: options[name] for name in _ANSWER_OPTIONS if options.get(name) not in (None, False)}
    for name in _DIGEST_OPTIONS:
        if options.get(name):
            digest = hashlib.sha256(json.dumps(options[name], sort_keys=True, default=repr).encode()).hexdigest()
            shown[name] = digest[:12]
    if shown:
        identity += "(" + ",".join(f"{name}={value!r}" for name, value in sorted(shown.items())) + ")"
    return identity


def summarizer_identity(model: object) -> str:
    """A stable identity string for any summary model (used as cache key and in traces).

    The model's own ``identity`` attribute when it has one (every zett_lab summarizer does);
    otherwise, for a zett-agent provider, ``PREFIX:MODEL`` with its endpoint and the options that
    change its answers (:func:`provider_identity`: ``openai:summ-1@http://127.0.0.1:8000/v1``), so two
    endpoints serving one model name are two summarizers; else the class's qualified name. Never
    includes credentials.
    """
    identity = getattr(model, "identity", None)
    if isinstance(identity, str) and identity.strip():
        return identity
    cls = type(model)
    name = getattr(model, "model", None)
    if isinstance(name, str) and name.strip():
        prefix = _CLASS_PREFIXES.get(cls.__name__)
        if prefix is None:
            provider = getattr(model, "provider_name", None)
            prefix = provider if isinstance(provider, str) and provider else cls.__name__
        options = {option: getattr(model, option, None) for option in (*_ANSWER_OPTIONS, *_DIGEST_OPTIONS)}
        return provider_identity(prefix, name, provider_endpoint(model), options)
    return f"{cls.__module__}.{cls.__qualname__}"
