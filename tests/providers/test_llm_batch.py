"""Batch lifecycles of the three protocols against the fake provider, over loopback HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

from evalplatform.providers.llm.batch import BatchLimits
from evalplatform.providers.llm.client import ProviderClient
from evalplatform.providers.llm.types import LLMRequest, ProviderError

PROTOCOLS = ["openai", "anthropic", "gemini"]


def items(n: int, *, prefix: str = "q", model: str = "m-1", extra: dict[int, str] | None = None):
    for i in range(n):
        user = f"{prefix} {i}: explain item {i}." + (extra or {}).get(i, "")
        yield f"req-{i}", LLMRequest(model=model, user=user, temperature=0.0, max_tokens=200)


async def lifecycle(url, kind, requests, *, limits=None, cancel=False, timeout=20.0):
    async with ProviderClient(kind=kind, base_url=url, api_key="k") as client:
        batches = client.batches(limits)
        handles = await batches.submit(requests, display_name="test-batch")
        if cancel:
            statuses = [await batches.cancel(h) for h in handles]
        outcome = []
        for handle in handles:
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                status = await batches.poll(handle)
                if status.done:
                    break
                assert asyncio.get_running_loop().time() < deadline, status
                await asyncio.sleep(0.05)
            results = [r async for r in batches.results(handle, status)]
            outcome.append((handle, status, results))
        return (outcome, statuses) if cancel else outcome


async def live_text(url, kind, request):
    async with ProviderClient(kind=kind, base_url=url, api_key="k") as client:
        return (await client.complete(request)).response.text


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_batch_lifecycle_with_a_failed_line(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.3
    requests = list(items(30, extra={7: " [[fault:400]]"}))
    [(handle, status, results)] = asyncio.run(lifecycle(fake_provider.url, kind, requests))
    assert handle.request_count == 30 and status.state == "completed"
    assert (status.total, status.succeeded, status.failed) == (30, 29, 1)
    by_id = {r.custom_id: r for r in results}
    assert sorted(by_id) == sorted(c for c, _ in requests) and len(results) == 30
    failed = by_id.pop("req-7")
    assert failed.response is None and failed.error.kind == "bad_request"
    assert not failed.error.retryable
    # Results carry text and usage, the same answer a live call gets.
    first = by_id["req-0"].response
    assert first.text == asyncio.run(live_text(fake_provider.url, kind, requests[0][1]))
    assert first.input_tokens > 0 and first.output_tokens > 0
    if kind != "gemini":  # OpenAI and Anthropic return results in any order
        assert [r.custom_id for r in results] != [c for c, _ in requests]


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_partial_failures_are_retryable(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.2
    fake_provider.config.batch_failure_rate = 0.3
    [(_, status, results)] = asyncio.run(lifecycle(fake_provider.url, kind, list(items(40))))
    failures = [r for r in results if r.error]
    assert 3 < len(failures) < 25 and status.failed == len(failures)
    assert all(r.error.retryable and r.error.kind == "server" for r in failures)
    assert len({r.custom_id for r in results}) == 40


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_expired_batch_reports_unfinished_requests(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.2
    requests = list(items(10, extra={0: " [[batch:expire]]"}))
    [(_, status, results)] = asyncio.run(lifecycle(fake_provider.url, kind, requests))
    assert status.state == "expired"
    expired = [r for r in results if r.error]
    assert len(expired) == 5 and all(r.error.kind == "expired" for r in expired)
    assert len({r.custom_id for r in results}) == 10


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_cancel(fake_provider, kind):
    fake_provider.config.batch_duration_s = 30
    outcome, statuses = asyncio.run(lifecycle(fake_provider.url, kind, list(items(8)), cancel=True))
    assert statuses[0].state in ("cancelling", "cancelled")
    [(_, status, results)] = outcome
    assert status.state == "cancelled"
    assert len(results) == 8 and all(r.error and r.error.kind == "cancelled" for r in results)


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_oversize_batches_are_split(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.1
    limits = BatchLimits(max_requests=4, max_bytes=1_000_000)
    outcome = asyncio.run(lifecycle(fake_provider.url, kind, items(10), limits=limits))
    assert [h.request_count for h, _, _ in outcome] == [4, 4, 2]
    assert sorted(r.custom_id for _, _, results in outcome for r in results) == sorted(
        f"req-{i}" for i in range(10)
    )
    # By size: room for two lines (and the body's wrapper) per provider batch.
    client = ProviderClient(kind=kind, base_url=fake_provider.url)
    line = len(client.batches().line("req-0", next(items(1))[1]))
    asyncio.run(client.aclose())
    max_bytes = int(line * 2.5) + 40
    by_bytes = asyncio.run(
        lifecycle(fake_provider.url, kind, items(6), limits=BatchLimits(10_000, max_bytes))
    )
    assert [h.request_count for h, _, _ in by_bytes] == [2, 2, 2]
    assert all(h.submitted_bytes <= max_bytes for h, _, _ in by_bytes)


def test_gemini_batches_are_per_model(fake_provider):
    fake_provider.config.batch_duration_s = 0.1
    mixed = [*items(3, model="gemini-a"), *items(2, prefix="p", model="gemini-b")]
    mixed = [(f"{c}-{r.model}", r) for c, r in mixed]
    outcome = asyncio.run(lifecycle(fake_provider.url, "gemini", mixed))
    assert sorted((h.model, h.request_count) for h, _, _ in outcome) == [
        ("gemini-a", 3),
        ("gemini-b", 2),
    ]
    for handle, _, results in outcome:
        assert [r.custom_id for r in results] == handle.custom_ids  # keyed by input order


def test_openai_uploads_jsonl_lines(fake_provider):
    fake_provider.config.batch_duration_s = 0.1
    [(handle, _, _)] = asyncio.run(lifecycle(fake_provider.url, "openai", list(items(3))))
    content = fake_provider.app.batches.files[handle.input_file_id].decode()
    lines = [json.loads(line) for line in content.splitlines()]
    assert [line["custom_id"] for line in lines] == ["req-0", "req-1", "req-2"]
    assert {line["url"] for line in lines} == {"/v1/chat/completions"}
    assert lines[0]["body"]["max_completion_tokens"] == 200 and lines[0]["method"] == "POST"


def test_mock_kind_has_no_provider_batch_api():
    from evalplatform.providers.llm.types import ProviderError

    with pytest.raises(ProviderError, match="no provider batch API"):
        ProviderClient(kind="mock").batches()


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_what_is_sent_stays_within_the_byte_limit(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.1
    client = ProviderClient(kind=kind, base_url=fake_provider.url)
    batches = client.batches()
    line = len(batches.line("req-0", next(items(1))[1]))
    wrapper = batches.new_chunk("test-batch", "m-1").size
    asyncio.run(client.aclose())
    exact = wrapper + 2 * line + 1  # two lines and their separator fill a batch exactly
    outcome = asyncio.run(
        lifecycle(fake_provider.url, kind, items(4), limits=BatchLimits(10_000, exact))
    )
    assert [h.request_count for h, _, _ in outcome] == [2, 2]
    assert all(h.submitted_bytes == exact for h, _, _ in outcome)
    if kind == "openai":
        sent = [len(fake_provider.app.batches.files[h.input_file_id]) for h, _, _ in outcome]
    else:
        sent = [len(raw) for path, raw in fake_provider.app.bodies if "atch" in path and raw][:2]
    assert sent == [exact, exact]
    with pytest.raises(ProviderError, match="alone exceeds"):
        asyncio.run(
            lifecycle(fake_provider.url, kind, items(1), limits=BatchLimits(10, wrapper + line - 1))
        )


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_a_failed_submission_reports_the_accepted_batches(fake_provider, kind):
    from evalplatform.providers.llm.batch import BatchSubmitError

    fake_provider.config.batch_duration_s = 0.1
    accepted = []

    async def go():
        async with ProviderClient(kind=kind, base_url=fake_provider.url) as client:
            await client.batches(BatchLimits(2, 10**7)).submit(
                items(5, extra={3: " [[fault:reject]]"}), on_submitted=accepted.append
            )

    with pytest.raises(BatchSubmitError) as err:
        asyncio.run(go())
    assert [h.request_count for h in err.value.handles] == [2] and accepted == err.value.handles
    assert accepted[0].custom_ids == ["req-0", "req-1"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_result_the_provider_lost_is_a_retryable_failure(fake_provider, kind):
    fake_provider.config.batch_duration_s = 0.1
    requests = list(items(5, extra={2: " [[batch:drop]]"}))
    [(_, _, results)] = asyncio.run(lifecycle(fake_provider.url, kind, requests))
    by_id = {r.custom_id: r for r in results}
    assert len(results) == 5 and by_id["req-2"].error.kind == "missing"
    assert by_id["req-2"].error.retryable


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_fake_writes_a_batchs_answers_once_when_its_results_are_read(fake_provider, kind):
    """Polls count the outcomes without writing answers; the results file streams each
    answer as it is written, and reading it again gives the same answers."""
    written = []
    answer = fake_provider.app.answer

    def counted(request):
        written.append(request.user)
        return answer(request)

    fake_provider.app.answer = counted
    fake_provider.config.batch_duration_s = 0
    # Sampled anew on each call (a temperature, no seed): only the first answers are kept.
    requests = [
        (f"req-{i}", LLMRequest(model="m-1", user=f"q {i}", temperature=1.0, max_tokens=50))
        for i in range(1200)
    ]

    async def run():
        async with ProviderClient(kind=kind, base_url=fake_provider.url, api_key="k") as client:
            batches = client.batches()
            [handle] = await batches.submit(requests, display_name="twice")
            for _ in range(3):
                status = await batches.poll(handle)
            assert status.done and status.succeeded == 1200
            assert written == []
            first = {r.custom_id: r.response.text async for r in batches.results(handle, status)}
            assert len(written) == 1200
            again = {r.custom_id: r.response.text async for r in batches.results(handle, status)}
            return first, again

    first, again = asyncio.run(run())
    assert len(written) == 1200 and first == again and len(first) == 1200
