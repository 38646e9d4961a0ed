"""Retry policy: attempts, backoff bounds, classification, with injected transport errors (no real sleep)."""

from __future__ import annotations

import random

import grpc
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from qdrant_tools.retry import (
    RetryingClient,
    RetryPolicy,
    RetryStats,
    acall_with_retry,
    call_with_retry,
    is_retryable,
)


def http_error(status: int, headers: dict | None = None) -> UnexpectedResponse:
    return UnexpectedResponse(status, "reason", b'{"status":{"error":"x"}}', httpx.Headers(headers or {}))


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode):
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


class Flaky:
    """Raises the given errors in order, then returns 'ok'."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return ("ok", args, kwargs)


def run(fn, policy=None, **kw):
    sleeps: list[float] = []
    stats = RetryStats()
    try:
        result = call_with_retry(
            fn,
            policy=policy or RetryPolicy(max_attempts=5, deadline=None),
            sleep=sleeps.append,
            clock=lambda: 0.0,
            rng=random.Random(0),
            stats=stats,
            **kw,
        )
    except Exception as exc:
        return exc, stats, sleeps
    return result, stats, sleeps


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408])
def test_retryable_statuses_are_retried_until_success(status):
    fn = Flaky(http_error(status), http_error(status))
    result, stats, sleeps = run(fn)
    assert result[0] == "ok"
    assert fn.calls == 3 and stats.attempts == 3 and len(sleeps) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_client_errors_are_never_retried(status):
    fn = Flaky(http_error(status))
    exc, stats, sleeps = run(fn)
    assert isinstance(exc, UnexpectedResponse) and exc.status_code == status
    assert fn.calls == 1 and stats.attempts == 1 and sleeps == []


def test_local_compute_errors_are_never_retried():
    for err in (MemoryError("CUDA out of memory"), RuntimeError("CUDA out of memory"), ValueError("bad")):
        fn = Flaky(err)
        exc, _stats, sleeps = run(fn)
        assert exc is err
        assert fn.calls == 1 and sleeps == []


def test_gives_up_after_max_attempts_and_reraises_last_error():
    errors = [http_error(503) for _ in range(10)]
    fn = Flaky(*errors)
    exc, stats, sleeps = run(fn, RetryPolicy(max_attempts=4, deadline=None))
    assert exc is errors[3]
    assert fn.calls == 4 and stats.attempts == 4 and len(sleeps) == 3


def test_transport_errors_are_retried():
    req = httpx.Request("PUT", "http://q:6333/collections/c/points")
    errs = [
        httpx.ReadTimeout("read timed out", request=req),
        httpx.ConnectError("connection refused", request=req),
        ResponseHandlingException(httpx.ConnectTimeout("timeout", request=req)),
        FakeRpcError(grpc.StatusCode.UNAVAILABLE),
        FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED),
        TimeoutError("timed out"),
    ]
    fn = Flaky(*errs)
    result, _stats, _sleeps = run(fn, RetryPolicy(max_attempts=10, deadline=None))
    assert result[0] == "ok" and fn.calls == len(errs) + 1


def test_grpc_client_errors_are_not_retried():
    assert not is_retryable(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT))
    assert not is_retryable(FakeRpcError(grpc.StatusCode.NOT_FOUND))
    assert not is_retryable(ResponseHandlingException(ValueError("could not parse")))


@settings(max_examples=50, deadline=None)
@given(
    base=st.floats(0.01, 2.0),
    mult=st.floats(1.0, 4.0),
    cap=st.floats(2.0, 60.0),
    attempts=st.integers(2, 8),
    seed=st.integers(0, 2**16),
)
def test_backoff_delays_stay_within_exponential_bounds(base, mult, cap, attempts, seed):
    policy = RetryPolicy(max_attempts=attempts, base_delay=base, multiplier=mult, max_delay=cap, deadline=None)
    sleeps: list[float] = []
    fn = Flaky(*[http_error(503) for _ in range(attempts)])
    with pytest.raises(UnexpectedResponse):
        call_with_retry(fn, policy=policy, sleep=sleeps.append, rng=random.Random(seed))
    assert len(sleeps) == attempts - 1
    for k, delay in enumerate(sleeps, start=1):
        assert 0.0 <= delay <= min(cap, base * mult ** (k - 1)) + 1e-12


def test_retry_after_header_is_honoured_but_capped():
    fn = Flaky(http_error(429, {"Retry-After": "7"}), http_error(429, {"Retry-After": "500"}))
    result, _stats, sleeps = run(fn, RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=20.0, deadline=None))
    assert result[0] == "ok"
    assert sleeps == [7.0, 20.0]


def test_qdrant_clients_own_429_form_is_retried_honouring_its_retry_after():
    from qdrant_client.common.client_exceptions import ResourceExhaustedResponse

    fn = Flaky(ResourceExhaustedResponse("rate limited", 6))
    result, stats, sleeps = run(fn, RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=20.0, deadline=None))
    assert result[0] == "ok" and stats.attempts == 2
    assert sleeps == [6.0]


def test_deadline_stops_retrying_before_sleeping_past_it():
    now = [0.0]

    def sleep(s):
        now[0] += s

    fn = Flaky(*[http_error(503) for _ in range(50)])
    policy = RetryPolicy(max_attempts=50, base_delay=4.0, multiplier=1.0, max_delay=4.0, deadline=10.0)
    with pytest.raises(UnexpectedResponse):
        call_with_retry(fn, policy=policy, sleep=sleep, clock=lambda: now[0], rng=random.Random(1))
    assert now[0] <= 10.0
    assert 2 <= fn.calls < 50


def test_policy_validation_names_parameter_and_fix():
    with pytest.raises(ValueError, match="max_attempts must be an integer >= 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match=r"retry_statuses may hold only 408, 429 and 5xx, got \[404\]"):
        RetryPolicy(retry_statuses=frozenset({404, 503}))
    with pytest.raises(ValueError, match="max_delay must be >= base_delay"):
        RetryPolicy(base_delay=5.0, max_delay=1.0)


def test_retrying_client_retries_idempotent_calls_only():
    real = QdrantClient(":memory:")
    real.create_collection("c", vectors_config={"v": models.VectorParams(size=2, distance=models.Distance.COSINE)})

    class Transport:
        """Fails the first upsert with a 503, forwards everything else."""

        def __init__(self):
            self.upserts = 0
            self.creates = 0

        def upsert(self, *a, **k):
            self.upserts += 1
            if self.upserts == 1:
                raise http_error(503)
            return real.upsert(*a, **k)

        def create_collection(self, *a, **k):
            self.creates += 1
            raise http_error(503)

        def count(self, *a, **k):
            return real.count(*a, **k)

    transport = Transport()
    sleeps: list[float] = []
    client = RetryingClient(transport, RetryPolicy(max_attempts=3, deadline=None), sleep=sleeps.append)
    client.upsert("c", points=[models.PointStruct(id=1, vector={"v": [1.0, 0.0]})], wait=True)
    assert transport.upserts == 2 and len(sleeps) == 1
    assert client.count("c").count == 1
    with pytest.raises(UnexpectedResponse):
        client.create_collection("d")
    assert transport.creates == 1  # not idempotent: never retried
    real.close()


async def test_async_retries_follow_the_same_policy_as_sync():
    def errors():
        return [http_error(503), http_error(429, {"Retry-After": "3"}), TimeoutError("t"), http_error(400)]

    policy = RetryPolicy(max_attempts=10, base_delay=1.0, max_delay=8.0, deadline=None)
    sync_fn, sync_sleeps, sync_stats = Flaky(*errors()), [], RetryStats()
    with pytest.raises(UnexpectedResponse):
        call_with_retry(sync_fn, policy=policy, sleep=sync_sleeps.append, rng=random.Random(3), stats=sync_stats)

    async_sleeps, async_stats, calls = [], RetryStats(), []
    pending = errors()

    async def async_fn():
        calls.append(1)
        raise pending.pop(0)

    async def sleep(delay):
        async_sleeps.append(delay)

    with pytest.raises(UnexpectedResponse) as info:
        await acall_with_retry(async_fn, policy=policy, sleep=sleep, rng=random.Random(3), stats=async_stats)
    assert info.value.status_code == 400  # the 4xx ends it at once, as in sync
    assert sync_fn.calls == len(calls) == 4 and sync_stats.attempts == async_stats.attempts == 4
    assert async_sleeps == sync_sleeps == async_stats.delays and len(sync_sleeps) == 3
    assert sync_sleeps[1] == 3.0  # Retry-After honoured in both


async def test_async_gives_up_after_max_attempts_with_the_last_error():
    errors = [http_error(503) for _ in range(5)]
    pending = list(errors)

    async def fn():
        raise pending.pop(0)

    async def sleep(delay):
        pass

    stats = RetryStats()
    with pytest.raises(UnexpectedResponse) as info:
        await acall_with_retry(fn, policy=RetryPolicy(max_attempts=3, deadline=None), sleep=sleep, stats=stats)
    assert info.value is errors[2] and stats.attempts == 3 and len(stats.delays) == 2
