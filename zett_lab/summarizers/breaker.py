"""The circuit breaker of each summary endpoint: one that cannot be reached is not asked again for every call.

Once :data:`BREAKER_THRESHOLD` connection attempts in a row to one endpoint failed (counting the provider's
own retries: with the default retry policy, one call), the following calls fail at once with the same cause
for :data:`BREAKER_COOLDOWN_S` seconds, then one call tries again. Rate limits and server errors (429, 5xx)
are answers, not connection failures: they keep the provider's backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from zett_agent.providers.base import ProviderError


class SummarizerConnectionError(ProviderError):
    """The summary model's endpoint could not be reached (after the provider's own retries).

    A subclass of zett-agent's ``ProviderError``; the SDK's connection error is ``__cause__``.
    """


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` says the endpoint could not be connected to (not an answer from it)."""
    import httpx

    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ProviderError):
            return getattr(cause, "phase", None) == "connect"  # zett-agent's connect timeout
        if isinstance(cause, httpx.TimeoutException):
            return False
        if isinstance(cause, (httpx.TransportError, ConnectionError)) or type(cause).__name__ == "APIConnectionError":
            return True
        cause = cause.__cause__
    return False


#: Connection attempts in a row (retries included) that failed to one endpoint before the following calls fail at once.
BREAKER_THRESHOLD = 3
#: Seconds an endpoint's following calls fail at once before one call tries it again.
BREAKER_COOLDOWN_S = 30.0


class EndpointBreaker:
    """Stops calling one endpoint that could not be connected to (one per endpoint and process).

    Attributes:
        endpoint: the endpoint (URL without credentials, or the provider's default).
        failures: connection attempts in a row that failed (retries included).
        refused: calls failed at once without a request since the breaker opened.
    """

    def __init__(self, endpoint: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.refused = 0
        self._clock = clock
        self._opened_at: float | None = None
        self._cause = ""
        self._lock = threading.Lock()

    def refusal(self) -> str | None:
        """The error message to fail a call with at once, or None when the call may go ahead."""
        with self._lock:
            if self._opened_at is None:
                return None
            waited = self._clock() - self._opened_at
            if waited >= BREAKER_COOLDOWN_S:
                self._opened_at = self._clock()  # this call tries again; the others keep failing at once
                return None
            self.refused += 1
            return (
                f"{self._cause} [not sent: {self.failures} connection attempts in a row to {self.endpoint} failed; "
                f"it is tried again {BREAKER_COOLDOWN_S - waited:.0f} s from now]"
            )

    def reached(self) -> None:
        """The endpoint answered (also with an error such as 429 or 500): it is reachable."""
        with self._lock:
            self.failures = 0
            self._opened_at = None

    def could_not_connect(self, cause: str, attempts: int) -> None:
        """A call could not connect in ``attempts`` attempts; opens the breaker at the threshold."""
        with self._lock:
            self.failures += attempts
            self._cause = cause
            if self.failures >= BREAKER_THRESHOLD:
                self._opened_at = self._clock()


_BREAKERS: dict[str, EndpointBreaker] = {}
_BREAKERS_LOCK = threading.Lock()


def endpoint_breaker(endpoint: str) -> EndpointBreaker:
    """The breaker of one endpoint in this process (created on first use)."""
    with _BREAKERS_LOCK:
        breaker = _BREAKERS.get(endpoint)
        if breaker is None:
            breaker = _BREAKERS[endpoint] = EndpointBreaker(endpoint)
        return breaker


def reset_endpoint_breakers() -> None:
    """Forget every endpoint's connection failures (e.g. after starting the server it could not reach)."""
    with _BREAKERS_LOCK:
        _BREAKERS.clear()
