"""Bounded exponential backoff with jitter for Qdrant *network* calls.

Only transport failures a retry can fix are retried (timeouts, dropped connections, HTTP 408, 429 and 5xx,
gRPC ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``RESOURCE_EXHAUSTED``, ``ABORTED``); any other 4xx and every
local error (an encoder's out-of-memory) are raised at once (docs/scale-out.md, "Retries"). The delay is
"full jitter" (:meth:`RetryPolicy.bound`), or a server's ``Retry-After`` capped at ``max_delay``; sleep,
clock and random source are injectable. The loops are tenacity's; :class:`RetryPolicy` is the one policy
both :func:`call_with_retry` and :func:`acall_with_retry` apply.

Example:
    >>> from qdrant_tools.retry import RetryPolicy, call_with_retry
    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise TimeoutError("read timed out")
    ...     return "ok"
    >>> call_with_retry(flaky, policy=RetryPolicy(max_attempts=5), sleep=lambda s: None)
    'ok'
    >>> len(calls)
    3
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, Retrying

if TYPE_CHECKING:
    from qdrant_tools.store.protocol import StoreLike

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth retrying: request timeout, too many requests, server errors.
RETRY_STATUSES: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})
#: gRPC status code names worth retrying.
RETRY_GRPC_CODES: frozenset[str] = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a network call.

    Args:
        max_attempts: total attempts including the first (1 = never retry).
        base_delay: upper bound of the first backoff, seconds.
        multiplier: growth of the bound per attempt.
        max_delay: cap of any single backoff (also caps ``Retry-After``), seconds.
        deadline: give up once this many seconds have passed since the first
            attempt (``None`` = only ``max_attempts`` bounds the retries).
        retry_statuses: HTTP statuses that are retried.

    Raises:
        ValueError: on a setting outside its range (the message says which).

    Example:
        >>> RetryPolicy(max_attempts=3, base_delay=0.1).bound(2)
        0.2
    """

    max_attempts: int = 6
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 30.0
    deadline: float | None = 300.0
    retry_statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}; typical values are 3-8")
        if not self.base_delay >= 0:
            raise ValueError(f"base_delay must be >= 0 seconds, got {self.base_delay!r}; typical values are 0.1-1")
        if not self.multiplier >= 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier!r}; 2 doubles the bound per attempt")
        if not self.max_delay >= self.base_delay:
            raise ValueError(
                f"max_delay must be >= base_delay={self.base_delay}, got {self.max_delay!r}; typical values are 10-60"
            )
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds or None, got {self.deadline!r}")
        bad = [s for s in self.retry_statuses if not (s in (408, 429) or 500 <= s <= 599)]
        if bad:
            raise ValueError(
                f"retry_statuses may hold only 408, 429 and 5xx, got {sorted(bad)}; other 4xx are client errors "
                "that a retry cannot fix"
            )
        object.__setattr__(self, "retry_statuses", frozenset(self.retry_statuses))

    def bound(self, attempt: int) -> float:
        """Upper bound of the backoff after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_delay, self.base_delay * self.multiplier ** (attempt - 1))


def _is_resource_exhausted(exc: BaseException) -> bool:
    """qdrant-client's ``ResourceExhaustedResponse``: its REST client's form of a 429 with ``Retry-After``."""
    try:
        from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
    except ImportError:  # pragma: no cover - an older qdrant-client
        return False
    return isinstance(exc, ResourceExhaustedResponse)


def status_code(exc: BaseException) -> int | None:
    """HTTP status carried by ``exc`` (qdrant ``UnexpectedResponse``, httpx ``HTTPStatusError``), else None."""
    code = getattr(exc, "status_code", None)
    if code is None:
        response = getattr(exc, "response", None)
        code = getattr(response, "status_code", None)
    if code is None and _is_resource_exhausted(exc):
        code = 429
    return int(code) if isinstance(code, int) else None


def _grpc_code_name(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)
    if not callable(code):
        return None
    try:
        value = code()
    except Exception:  # pragma: no cover - defensive: not a grpc error after all
        return None
    return getattr(value, "name", None)


def _is_grpc_error(exc: BaseException) -> bool:
    try:
        import grpc
    except ImportError:  # pragma: no cover - grpcio ships with qdrant-client
        return False
    return isinstance(exc, grpc.RpcError)


def is_retryable(exc: BaseException, policy: RetryPolicy | None = None) -> bool:
    """Whether a failed network call may succeed if repeated.

    Args:
        exc: the exception the call raised.
        policy: supplies the retried HTTP statuses (default: :data:`RETRY_STATUSES`).
    """
    statuses = policy.retry_statuses if policy is not None else RETRY_STATUSES
    code = status_code(exc)
    if code is not None:
        return code in statuses
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx ships with qdrant-client
        httpx = None  # type: ignore[assignment]
    if httpx is not None and isinstance(exc, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)):
        return True
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if _is_grpc_error(exc):
        return _grpc_code_name(exc) in RETRY_GRPC_CODES
    # qdrant-client wraps transport errors in ResponseHandlingException(source)
    source = getattr(exc, "source", None)
    if isinstance(source, BaseException) and source is not exc:
        return is_retryable(source, policy)
    return False


def retry_after(exc: BaseException) -> float | None:
    """Seconds a server asked to wait (``Retry-After`` header in seconds), if any."""
    headers = getattr(exc, "headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    value = (headers.get("retry-after") or headers.get("Retry-After")) if headers else None
    if value is None and _is_resource_exhausted(exc):
        value = getattr(exc, "retry_after_s", None)
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass
class RetryStats:
    """Attempts and sleeps of one :func:`call_with_retry` / :func:`acall_with_retry` (filled in place)."""

    attempts: int = 0
    delays: list[float] = field(default_factory=list)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def _tenacity_options(
    policy: RetryPolicy | None,
    fn: Callable[..., Any],
    *,
    clock: Callable[[], float],
    rng: random.Random | None,
    stats: RetryStats | None,
    description: str | None,
) -> dict[str, Any]:
    """Settings of a ``tenacity.Retrying`` or ``AsyncRetrying`` that applies ``policy`` (default
    :class:`RetryPolicy`) to one call of ``fn`` (named ``description``, default its name, in the logs).

    Only the policy lives here; the sync and async loops are tenacity's.
    """
    policy = policy or RetryPolicy()
    description = description or getattr(fn, "__name__", "call")
    rng = rng or random.Random()
    start = clock()

    def retryable(state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome is not None and state.outcome.failed else None
        return isinstance(exc, Exception) and is_retryable(exc, policy)

    def wait(state: RetryCallState) -> float:  # full jitter, or the server's Retry-After (capped)
        delay = rng.uniform(0.0, policy.bound(state.attempt_number))
        asked = retry_after(state.outcome.exception())
        return delay if asked is None else min(policy.max_delay, max(delay, asked))

    def past_deadline(state: RetryCallState) -> bool:  # tenacity computes the wait before it asks stop
        return policy.deadline is not None and clock() - start + state.upcoming_sleep > policy.deadline

    def stop(state: RetryCallState) -> bool:
        return state.attempt_number >= policy.max_attempts or past_deadline(state)

    def count(state: RetryCallState) -> None:
        if stats is not None:
            stats.attempts = state.attempt_number

    def warn(state: RetryCallState) -> None:
        if stats is not None:
            stats.delays.append(state.upcoming_sleep)
        logger.warning("%s failed (attempt %d/%d): %s; retrying in %.2fs", description, state.attempt_number,
                       policy.max_attempts, _short(state.outcome.exception()), state.upcoming_sleep)  # fmt: skip

    def give_up(state: RetryCallState) -> Any:
        exc = state.outcome.exception()
        if state.attempt_number >= policy.max_attempts:
            logger.error("%s failed after %d attempts: %s", description, state.attempt_number, _short(exc))
        else:
            logger.error("%s: giving up after %d attempts (deadline %.0fs): %s", description,
                         state.attempt_number, policy.deadline, _short(exc))  # fmt: skip
        return state.outcome.result()  # re-raises the last error itself, not a tenacity.RetryError

    return {"retry": retryable, "wait": wait, "stop": stop, "before": count, "before_sleep": warn,
            "retry_error_callback": give_up}  # fmt: skip


def call_with_retry(
    fn: Callable[..., T],
    *args: Any,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    stats: RetryStats | None = None,
    description: str | None = None,
    **kwargs: Any,
) -> T:
    """Call ``fn(*args, **kwargs)``, retrying transient network failures (a ``tenacity.Retrying``).

    Only wrap *idempotent network* calls (upsert with deterministic ids, delete
    by filter, reads). Never wrap local compute.

    Args:
        fn: the call.
        policy: retry settings (default :class:`RetryPolicy`).
        sleep, clock, rng: injectable for tests.
        stats: filled with the attempt count and the delays slept.
        description: name of the call in log messages.

    Returns:
        What ``fn`` returns.

    Raises:
        The last exception of ``fn`` once it is not retryable, the attempts are
        used up or the deadline has passed.
    """
    options = _tenacity_options(policy, fn, clock=clock, rng=rng, stats=stats, description=description)
    return Retrying(sleep=sleep, **options)(fn, *args, **kwargs)


async def acall_with_retry(
    fn: Callable[..., Awaitable[T]],
    *args: Any,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    stats: RetryStats | None = None,
    description: str | None = None,
    **kwargs: Any,
) -> T:
    """Async :func:`call_with_retry` (a ``tenacity.AsyncRetrying``): same policy, same retried errors, same logs.

    Example:
        >>> import asyncio
        >>> async def ping():
        ...     return "pong"
        >>> asyncio.run(acall_with_retry(ping, policy=RetryPolicy(max_attempts=2)))
        'pong'
    """
    options = _tenacity_options(policy, fn, clock=clock, rng=rng, stats=stats, description=description)
    return await AsyncRetrying(sleep=sleep, **options)(fn, *args, **kwargs)


#: QdrantClient methods that are safe to repeat (reads, and writes keyed by deterministic ids / filters).
IDEMPOTENT_METHODS: frozenset[str] = frozenset(
    {
        "upsert",
        "upload_points",
        "delete",
        "update_vectors",
        "set_payload",
        "overwrite_payload",
        "scroll",
        "count",
        "retrieve",
        "query_points",
        "query_batch_points",
        "get_collection",
        "collection_exists",
        "get_collections",
        "list_snapshots",
        "create_payload_index",
    }
)


#: The store traits (:class:`qdrant_tools.store.protocol.Store`) a :class:`RetryingClient` reports of the store it
#: wraps: the proxy changes retries, never capabilities.
_TRAITS = frozenset({"kind", "keeps_payload_indexes", "builds_index_on_request", "unverified_settings"})


class RetryingClient:
    """A ``QdrantClient`` proxy that retries its idempotent methods.

    Methods in :data:`IDEMPOTENT_METHODS` go through :func:`call_with_retry`;
    everything else (``create_collection``, ``create_snapshot``, ...) passes
    through unchanged, because repeating it after a timeout that did succeed
    fails or duplicates work.

    Args:
        client: the wrapped ``QdrantClient``.
        policy: retry settings.
        sleep: injectable sleep (tests).

    Example:
        >>> from qdrant_client import QdrantClient
        >>> from qdrant_tools.retry import RetryingClient
        >>> client = RetryingClient(QdrantClient(":memory:"))
        >>> client.collection_exists("nope")
        False
    """

    def __init__(
        self, client: StoreLike, policy: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep
    ):
        self._client = client
        self._policy = policy or RetryPolicy()
        self._sleep = sleep

    @property
    def wrapped(self) -> Any:
        """The underlying client."""
        return self._client

    def __getattr__(self, name: str) -> Any:
        if name in _TRAITS:  # read through store_traits, so a wrapped QdrantClient, which declares none, answers
            from qdrant_tools.store.protocol import store_traits  # lazy: the store package loads Qdrant Edge

            return getattr(store_traits(self._client), name)
        attr = getattr(self._client, name)
        if name not in IDEMPOTENT_METHODS or not callable(attr):
            return attr

        def retried(*args: Any, **kwargs: Any) -> Any:
            return call_with_retry(attr, *args, policy=self._policy, sleep=self._sleep, description=name, **kwargs)

        return retried
