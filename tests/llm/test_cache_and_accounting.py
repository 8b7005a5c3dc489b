"""The response cache (hits never reach the server; offline replay) and cost accounting
(totals checked against hand-computed values)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelwright.llm import (
    LLMCacheMissError, LLMConfigError, PriceTable, ResponseCache, TokenUsage, UsageLedger,
    cache_key,
)
from kernelwright.llm.accounting import Price
from kernelwright.llm.client import CompletionRequest
from llm_support import USER_PROMPT


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_repeat_call_is_a_cache_hit_that_never_reaches_the_server(scripted, make_client, protocol):
    server = scripted({"default": {"content": "kernel", "usage": {"input_tokens": 100,
                                                                   "output_tokens": 50}}})
    ledger = UsageLedger()
    client = make_client(server, protocol, ledger=ledger)

    first = client.complete(USER_PROMPT, temperature=0.7, sample_index=1)
    again = client.complete(USER_PROMPT, temperature=0.7, sample_index=1)

    assert server.request_count == 1
    assert again.cache_hit and not first.cache_hit
    assert again.text == first.text and again.usage == first.usage
    assert again.cost_usd == 0.0 and again.attempts == 0
    totals = ledger.totals()
    assert (totals.calls, totals.cache_hits, totals.input_tokens) == (2, 1, 100)


def test_identical_requests_racing_in_a_batch_are_sent_once(scripted, make_client):
    server = scripted({"default": {"delay_s": 0.1, "content": "kernel"}})
    ledger = UsageLedger()
    client = make_client(server, ledger=ledger, max_concurrency=4)

    outcomes = client.complete_many([CompletionRequest(USER_PROMPT)] * 4)

    assert [o.text for o in outcomes] == ["kernel"] * 4
    assert server.request_count == 1
    assert ledger.totals().cache_hits == 3


def test_cache_key_covers_model_messages_sampling_and_sample_index(scripted, make_client):
    server = scripted({"default": {"content": "kernel"}})
    client = make_client(server)

    client.complete(USER_PROMPT, temperature=0.7, sample_index=0)
    client.complete(USER_PROMPT, temperature=0.7, sample_index=1)
    client.complete(USER_PROMPT, temperature=0.2, sample_index=0)
    client.complete(USER_PROMPT, temperature=0.7, sample_index=0, max_tokens=99)
    client.complete([{"role": "user", "content": "other"}], temperature=0.7)
    client.complete(USER_PROMPT, temperature=0.7, sample_index=0)  # the only repeat

    assert server.request_count == 5


def test_cache_key_is_canonical():
    messages = [{"content": "hi", "role": "user"}]

    assert cache_key("openai/m", messages, {"temperature": 0.5, "top_p": None}, 0) == \
        cache_key("openai/m", [{"role": "user", "content": "hi"}], {"temperature": 0.5}, 0)
    assert cache_key("openai/m", messages, {}, 0) != cache_key("anthropic/m", messages, {}, 0)


def test_no_cache_neither_reads_nor_writes(scripted, make_client, tmp_path):
    server = scripted({"default": {"content": "kernel"}})
    client = make_client(server, cache=False)

    client.complete(USER_PROMPT)
    client.complete(USER_PROMPT)

    assert server.request_count == 2
    assert client.cache is None and not (tmp_path / "cache").exists()


def test_use_cache_false_bypasses_one_call(scripted, make_client):
    server = scripted({"default": {"content": "kernel"}})
    client = make_client(server)

    client.complete(USER_PROMPT)
    client.complete(USER_PROMPT, use_cache=False)
    client.complete(USER_PROMPT)

    assert server.request_count == 2


def test_finished_run_replays_offline_without_key_or_server(scripted, make_client):
    server = scripted({"sequence": [{"content": f"sample {i}"} for i in range(3)]})
    online = make_client(server)
    originals = [online.complete(USER_PROMPT, temperature=1.0, sample_index=i).text for i in range(3)]
    server.stop()

    replay = make_client(None, offline=True)  # no provider settings at all: no key, no URL
    replayed = [replay.complete(USER_PROMPT, temperature=1.0, sample_index=i).text for i in range(3)]

    assert replayed == originals == ["sample 0", "sample 1", "sample 2"]
    with pytest.raises(LLMCacheMissError, match="no cached response.*sample 3.*without --offline"):
        replay.complete(USER_PROMPT, temperature=1.0, sample_index=3)


def test_offline_without_cache_is_a_config_error(make_client):
    with pytest.raises(LLMConfigError, match="drop --no-cache"):
        make_client(None, offline=True, cache=False)


def test_cache_is_shared_safely_by_threads_and_first_answer_wins(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(20):
                cache.put(f"key-{i}", "openai/m", {"i": i}, {"writer": n})
                assert cache.get(f"key-{i}") is not None
        except BaseException as exc:  # noqa: BLE001 - collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(cache) == 20
    reopened = ResponseCache(tmp_path / "c.sqlite")
    first_writers = {reopened.get(f"key-{i}").response["writer"] for i in range(20)}
    assert first_writers <= {0, 1, 2, 3}
    cache.put("key-0", "openai/m", {}, {"writer": 99})
    assert reopened.get("key-0").response["writer"] != 99


WRITER_PROCESS = """
import sys
from kernelwright.llm.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
for i in range(30):
    cache.put(f"key-{i}", "openai/m", {"i": i}, {"writer": sys.argv[2]})
    assert cache.get(f"key-{i}") is not None
"""


def test_cache_is_shared_safely_by_processes(tmp_path):
    path = tmp_path / "c.sqlite"
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER_PROCESS, str(path), str(n)], env=env,
                                stderr=subprocess.PIPE, text=True) for n in range(3)]

    results = [(w.wait(timeout=30), w.stderr.read()) for w in writers]

    assert results == [(0, "")] * 3
    assert len(ResponseCache(path)) == 30


def test_costs_total_to_hand_computed_values_per_task_and_overall(scripted, make_client):
    server = scripted({"rules": [
        {"match": "task A", "content": "a", "usage": {"input_tokens": 1000, "output_tokens": 500,
                                                      "cached_tokens": 200}},
        {"match": "task B", "content": "b", "usage": {"input_tokens": 3000, "output_tokens": 1000}},
    ]})
    ledger = UsageLedger()
    client = make_client(server, ledger=ledger)  # openai/gpt-4.1: $2 in, $0.50 cached, $8 out

    client.complete_many([
        CompletionRequest([{"role": "user", "content": "task A"}], tags={"task": "A"}),
        CompletionRequest([{"role": "user", "content": "task B"}], tags={"task": "B"}),
        CompletionRequest([{"role": "user", "content": "task A"}], tags={"task": "A"}),  # cached
    ])

    cost_a = (800 * 2.00 + 200 * 0.50 + 500 * 8.00) / 1e6  # 0.0057
    cost_b = (3000 * 2.00 + 1000 * 8.00) / 1e6  # 0.014
    per_task = ledger.totals_by("task")
    assert per_task["A"].cost_usd == pytest.approx(cost_a)
    assert per_task["A"].cache_hits == 1 and per_task["A"].calls == 2
    assert per_task["B"].cost_usd == pytest.approx(cost_b)
    total = ledger.totals()
    assert total.cost_usd == pytest.approx(0.0197)
    assert (total.input_tokens, total.output_tokens, total.cached_input_tokens) == (4000, 1500, 200)
    assert "3 calls (1 cached, 0 failed)" in total.describe() and "$0.0197" in total.describe()


def test_anthropic_cost_folds_cache_reads_into_input(scripted, make_client):
    server = scripted({"default": {"content": "x", "usage": {"input_tokens": 2000,
                                                             "output_tokens": 1000,
                                                             "cached_tokens": 500}}})
    # claude-haiku-4-5: $1 in, $0.10 cache read, $5 out

    completion = make_client(server, "anthropic").complete(USER_PROMPT)

    assert completion.usage.input_tokens == 2000 and completion.usage.cached_input_tokens == 500
    assert completion.cost_usd == pytest.approx((1500 * 1.00 + 500 * 0.10 + 1000 * 5.00) / 1e6)


def test_unknown_price_is_none_not_zero_unless_overridden(scripted, make_client):
    server = scripted({"default": {"content": "x", "usage": {"input_tokens": 10_000,
                                                             "output_tokens": 2_000}}})
    ledger = UsageLedger()
    local = "openai-compatible/Qwen2.5-Coder-32B"
    unknown = make_client(server, model=local, base_url=server.openai_base_url, ledger=ledger)
    priced = make_client(server, model=local, base_url=server.openai_base_url, ledger=ledger,
                         prices={local: {"input": 0.5, "output": 1.5}})

    assert unknown.complete(USER_PROMPT, sample_index=0, use_cache=False).cost_usd is None
    assert priced.complete(USER_PROMPT, sample_index=1, use_cache=False).cost_usd == \
        pytest.approx((10_000 * 0.5 + 2_000 * 1.5) / 1e6)
    totals = ledger.totals()
    assert totals.calls_with_unknown_cost == 1
    assert "+1 calls of unknown price" in totals.describe()


def test_price_override_replaces_builtin_and_is_validated():
    table = PriceTable({"openai/gpt-4.1": {"input": 1.0, "output": 2.0}})

    assert table.price("openai/gpt-4.1") == Price(1.0, 2.0)
    assert table.cost("openai/gpt-4.1", TokenUsage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    with pytest.raises(LLMConfigError, match="needs input and output"):
        PriceTable({"openai/x": {"input": 1.0}})
    with pytest.raises(LLMConfigError, match="unknown keys.*'outptu'"):
        PriceTable({"openai/x": {"input": 1.0, "output": 1.0, "outptu": 2}})
