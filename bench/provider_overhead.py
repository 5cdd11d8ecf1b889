"""CPU cost of the adapter layer against bare httpx, for the same requests.

Starts the fake provider in its own process (zero latency), then sends N chat requests at
concurrency C twice: through ``ProviderClient`` (adapter, retries, concurrency cap, parsing)
and with a bare ``httpx.AsyncClient`` doing the minimum (post JSON, read text and usage).
CPU is this process's CPU time, so the server's work is not counted.

    python bench/provider_overhead.py [--requests 2000] [--concurrency 64] [--kind openai]

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
# The fake provider listens on loopback, which connections may call only when allowed
# (evalplatform/providers/netguard.py).
os.environ.setdefault("PROVIDER_HOSTS_ALLOWED", "127.0.0.1,localhost")

import httpx  # noqa: E402

from evalplatform.providers.llm.base import POOL_SHARD, join_url, tls_context  # noqa: E402
from evalplatform.providers.llm.client import ProviderClient  # noqa: E402
from evalplatform.providers.llm.types import LLMRequest  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_fake(port: int, *, latency: float = 0.0, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    # The fake runs in the embedded mode (no database needed) in its own process.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "fake_provider",
            "--port",
            str(port),
            "--latency",
            str(latency),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the fake provider did not start")


def requests(n: int) -> list[LLMRequest]:
    return [
        LLMRequest(
            model="gpt-4.1-mini",
            system="Be terse.",
            user=f"Question {i}: what is {i}+{i}?",
            temperature=0.0,
            max_tokens=64,
        )
        for i in range(n)
    ]


async def through_adapter(url: str, kind: str, batch: list[LLMRequest], concurrency: int) -> int:
    async with ProviderClient(
        kind=kind, base_url=url, api_key="k", max_concurrency=concurrency, timeout_s=60
    ) as client:
        results = await asyncio.gather(*(client.complete(r) for r in batch))
    return sum(r.response.output_tokens for r in results)


async def bare_httpx(url: str, batch: list[LLMRequest], concurrency: int) -> int:
    """The minimum a client does: post JSON, read text and usage. Its connections are split
    over pools of ``POOL_SHARD`` as the platform's are: httpcore's pool costs CPU in the
    square of its connections per call, so one pool of 128 would measure httpcore, not a
    client (at C=128 a single pool made the bare client spend ~4x the CPU per call)."""
    count = max(1, math.ceil(concurrency / POOL_SHARD))
    per = math.ceil(concurrency / count)
    limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
    endpoint = join_url(url, "/v1", "/chat/completions")
    headers = {"Authorization": "Bearer k"}
    gate = asyncio.Semaphore(concurrency)
    clients = [
        httpx.AsyncClient(limits=limits, timeout=60, verify=tls_context()) for _ in range(count)
    ]
    load = [0] * count
    retried = [0]

    async def one(r: LLMRequest) -> int:
        body = {
            "model": r.model,
            "temperature": r.temperature,
            "max_completion_tokens": r.max_tokens,
            "messages": [
                {"role": "system", "content": r.system},
                {"role": "user", "content": r.user},
            ],
        }
        async with gate:
            index = load.index(min(load))
            load[index] += 1
            try:
                for attempt in range(3):  # a connection the loaded server reset: once more
                    try:
                        response = await clients[index].post(endpoint, json=body, headers=headers)
                        break
                    except httpx.TransportError:
                        if attempt == 2:
                            raise
                        retried[0] += 1
            finally:
                load[index] -= 1
        data = response.json()
        _ = data["choices"][0]["message"]["content"]
        return int(data["usage"]["completion_tokens"])

    try:
        return sum(await asyncio.gather(*(one(r) for r in batch)))
    finally:
        for client in clients:
            await client.aclose()
        if retried[0]:
            print(f"  (bare client: {retried[0]} calls sent again after a transport error)")


def measure(label: str, make) -> dict:
    cpu, wall = time.process_time(), time.perf_counter()
    tokens = asyncio.run(make())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"label": label, "cpu_s": cpu, "wall_s": wall, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kind", default="openai", choices=["openai"])
    args = parser.parse_args()
    port = free_port()
    proc = start_fake(port)
    url = f"http://127.0.0.1:{port}"
    batch = requests(args.requests)
    try:
        measure("warm-up", lambda: bare_httpx(url, batch[:200], args.concurrency))
        runs: dict[str, list[dict]] = {"adapter": [], "bare": []}
        for _ in range(args.rounds):  # alternate, keep each side's best round
            runs["bare"].append(measure("bare", lambda: bare_httpx(url, batch, args.concurrency)))
            runs["adapter"].append(
                measure("adapter", lambda: through_adapter(url, args.kind, batch, args.concurrency))
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    best = {k: min(v, key=lambda m: m["cpu_s"]) for k, v in runs.items()}
    assert best["adapter"]["tokens"] == best["bare"]["tokens"], (
        "both sides must get the same replies"
    )
    n = args.requests
    for key, m in best.items():
        print(f"{key:8s} {n / m['wall_s']:8.0f} req/s  {m['cpu_s'] * 1000 / n:6.3f} CPU ms/request")
    ratio = best["adapter"]["cpu_s"] / best["bare"]["cpu_s"]
    print(f"adapter CPU per request / bare httpx: {ratio:.3f}")
    print(
        json.dumps(
            {
                "requests": n,
                "concurrency": args.concurrency,
                "adapter_requests_per_s": round(n / best["adapter"]["wall_s"], 1),
                "bare_httpx_requests_per_s": round(n / best["bare"]["wall_s"], 1),
                "adapter_cpu_ms_per_request": round(best["adapter"]["cpu_s"] * 1000 / n, 4),
                "bare_httpx_cpu_ms_per_request": round(best["bare"]["cpu_s"] * 1000 / n, 4),
                "adapter_over_bare_cpu_ratio": round(ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
