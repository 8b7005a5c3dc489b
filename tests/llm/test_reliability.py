"""Retries on errors that heal, fail-fast on those that cannot, timeouts, malformed bodies and
the concurrency bound, through the real SDKs against the scripted server."""

from __future__ import annotations

import random
import threading

import pytest

from kernelwright.llm import LLMAuthError, LLMFatalError, LLMTransientError, UsageLedger
from kernelwright.llm.client import CompletionRequest
from kernelwright.llm.concurrency import ConcurrencyLimiter
from kernelwright.llm.retry import RetryPolicy
from llm_support import USER_PROMPT

PROTOCOLS = ["openai", "anthropic"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [429, 500, 529])
def test_transient_status_is_retried_until_success(scripted, make_client, protocol, status):
    server = scripted({"sequence": [{"status": status, "times": 2}, {"content": "fine"}]})
    ledger = UsageLedger()

    completion = make_client(server, protocol, ledger=ledger).complete(USER_PROMPT)

    assert completion.text == "fine"
    assert completion.attempts == 3
    assert server.request_count == 3
    (record,) = ledger.records
    assert record.attempts == 3 and record.error is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_retries_run_out_with_a_clear_error(scripted, make_client, protocol):
    server = scripted({"default": {"status": 503, "message": "overloaded"}})
    ledger = UsageLedger()

    with pytest.raises(LLMTransientError, match="gave up after 3 attempts.*503.*overloaded") as info:
        make_client(server, protocol, ledger=ledger, max_retries=2).complete(USER_PROMPT)

    assert info.value.kind == "server_error"
    assert server.request_count == 3
    assert ledger.totals().failed_calls == 1 and ledger.records[0].attempts == 3


@pytest.mark.parametrize("protocol, key_variable", [("openai", "OPENAI_API_KEY"),
                                                    ("anthropic", "ANTHROPIC_API_KEY")])
def test_bad_key_fails_fast_with_advice(scripted, make_client, protocol, key_variable):
    server = scripted({"default": {"status": 401, "message": "invalid x-api-key"}})
    ledger = UsageLedger()

    with pytest.raises(LLMAuthError, match=f"rejected the API key.*invalid x-api-key.*{key_variable}"):
        make_client(server, protocol, ledger=ledger).complete(USER_PROMPT)

    assert server.request_count == 1
    assert "401" in ledger.records[0].error


@pytest.mark.parametrize("status, message, expected", [
    (404, "model not found", "was not found.*check the model name"),
    (400, "This model's maximum context length is 8192 tokens", "too long.*shorten the prompt"),
    (413, "request too large", "too long"),
    (400, "temperature must be between 0 and 2", "rejected the request.*temperature"),
])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requests_that_cannot_heal_are_not_retried(scripted, make_client, protocol, status,
                                                   message, expected):
    server = scripted({"default": {"status": status, "message": message}})

    with pytest.raises(LLMFatalError, match=expected):
        make_client(server, protocol).complete(USER_PROMPT)

    assert server.request_count == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_slow_answer_times_out_and_is_retried(scripted, make_client, protocol):
    server = scripted({"sequence": [{"delay_s": 1.0, "content": "too late"}, {"content": "on time"}]})

    completion = make_client(server, protocol, timeout_s=0.3).complete(USER_PROMPT)

    assert completion.text == "on time" and completion.attempts == 2


def test_timeouts_that_persist_end_in_a_timeout_error(scripted, make_client):
    server = scripted({"default": {"delay_s": 1.0, "content": "too late"}})

    with pytest.raises(LLMTransientError, match="gave up after 2 attempts.*within 0.3 s.*timeout_s") as info:
        make_client(server, timeout_s=0.3, max_retries=1).complete(USER_PROMPT)

    assert info.value.kind == "timeout"
    assert server.request_count == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dropped_connection_is_retried(scripted, make_client, protocol):
    server = scripted({"sequence": [{"drop_connection": True}, {"content": "back"}]})

    assert make_client(server, protocol).complete(USER_PROMPT).text == "back"
    assert server.request_count == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("malformed", ["not_json", "missing_fields", "truncated"])
def test_malformed_body_is_a_failed_attempt_then_retried(scripted, make_client, protocol, malformed):
    server = scripted({"sequence": [{"malformed": malformed}, {"content": "well formed"}]})

    completion = make_client(server, protocol).complete(USER_PROMPT)

    assert completion.text == "well formed" and completion.attempts == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_malformed_bodies_to_the_end_are_recorded_not_crashed_on(scripted, make_client, protocol):
    server = scripted({"default": {"malformed": "missing_fields"}})
    ledger = UsageLedger()
    client = make_client(server, protocol, ledger=ledger, max_retries=1)

    (outcome,) = client.complete_many([CompletionRequest(USER_PROMPT, tags={"task": "t1"})])

    assert isinstance(outcome, LLMTransientError) and outcome.kind == "malformed_response"
    (record,) = ledger.records
    assert "malformed response" in record.error and record.attempts == 2
    assert ledger.totals(task="t1").failed_calls == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_concurrency_bound_holds_for_many_calls(scripted, make_client, protocol):
    server = scripted({"default": {"delay_s": 0.15, "content": "ok"}})
    client = make_client(server, protocol, max_concurrency=2)
    requests = [CompletionRequest(USER_PROMPT, sample_index=i) for i in range(10)]

    outcomes = client.complete_many(requests)

    assert [o.text for o in outcomes] == ["ok"] * 10
    assert [o.sample_index for o in outcomes] == list(range(10))
    assert server.request_count == 10
    assert server.max_in_flight == 2


def test_bound_is_shared_by_clients_of_one_endpoint(scripted, make_client):
    server = scripted({"default": {"delay_s": 0.1, "content": "ok"}})
    shared = ConcurrencyLimiter()  # in production, both use the process-wide one
    first = make_client(server, max_concurrency=3, cache=False, limiter=shared)
    second = make_client(server, max_concurrency=3, cache=False, limiter=shared)

    threads = [threading.Thread(target=client.complete_many,
                                args=([CompletionRequest(USER_PROMPT, sample_index=i) for i in range(6)],))
               for client in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert server.request_count == 12
    assert server.max_in_flight == 3


def test_backoff_doubles_is_capped_and_honours_retry_after():
    policy = RetryPolicy(max_retries=5, base_delay_s=1.0, max_delay_s=8.0)
    rng = random.Random(0)

    delays = [policy.delay_s(n, None, rng) for n in range(1, 6)]

    for n, delay in enumerate(delays, start=1):
        ceiling = min(8.0, 2 ** (n - 1))
        assert ceiling / 2 <= delay <= ceiling  # jittered within the upper half
    assert policy.delay_s(1, retry_after_s=5.0, rng=rng) == 5.0
    assert policy.delay_s(1, retry_after_s=100.0, rng=rng) == 8.0


def test_retry_after_header_reaches_the_backoff(scripted, make_client):
    server = scripted({"sequence": [{"status": 429, "retry_after": 0.004}, {"content": "ok"}]})
    slept: list[float] = []
    client = make_client(server, backoff_base_s=0.0001, backoff_max_s=1.0, sleep=slept.append)

    client.complete(USER_PROMPT)

    assert slept == [pytest.approx(0.004)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_retry_is_announced_and_the_listener_may_end_them(scripted, make_client, protocol):
    """`on_retry` hears each retry with the call's tags and the HTTP status (a progress line's
    "retry 2 of 4, HTTP 500"); an LLMError it raises ends the retries at once."""
    server = scripted({"default": {"status": 500}})
    client = make_client(server, protocol, max_retries=4)
    heard = []

    def listen(tags, notice):
        heard.append((tags.get("task"), notice.describe()))
        if notice.retry == 2:
            raise notice.error

    client.on_retry = listen
    with pytest.raises(LLMTransientError) as info:
        client.complete(USER_PROMPT, tags={"task": "softmax"})
    assert heard == [("softmax", "retry 1 of 4, HTTP 500"), ("softmax", "retry 2 of 4, HTTP 500")]
    assert server.request_count == 2 and info.value.attempts == 2
    assert info.value.status == 500 and info.value.service_failure


def test_which_failures_are_the_services():
    from kernelwright.llm import LLMCacheMissError, LLMConfigError, LLMModelNotFoundError

    assert all(cls.service_failure for cls in (LLMTransientError, LLMAuthError, LLMModelNotFoundError,
                                               LLMCacheMissError, LLMConfigError))
    assert not LLMFatalError.service_failure  # a request the provider rejects as sent: the model's attempt
