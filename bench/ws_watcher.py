"""One WebSocket client watching a generation job, as a browser with the job open does: it
connects to the platform's ASGI server (``ws/generation/jobs/<id>``, token auth), reads the
snapshot, prints ``ready``, then reads every event until the job ends, rebuilding each
cell's text from ``generation:item:token`` events (``delta`` at ``offset``).

    python bench/ws_watcher.py URI TOKEN

Its last line is one JSON object: the count of messages per event name and the text it
rebuilt for each completed cell (by output id), for the caller to compare with the
database. Run in its own process (bench/generation_throughput.py), so the client's CPU is
not the platform's.
"""

from __future__ import annotations

import asyncio
import json
import sys

from websockets.asyncio.client import connect

ENDS = {"generation:job:completed", "generation:job:failed", "generation:job:budget_exceeded"}


async def watch(uri: str, token: str) -> dict:
    counts: dict[str, int] = {}
    texts: dict[int, str] = {}
    finals: dict[int, str] = {}
    async with connect(
        uri, additional_headers=[("Authorization", f"Token {token}")], max_size=None
    ) as ws:
        first = json.loads(await ws.recv())
        for cell in first["data"].get("processing", []):
            texts[cell["output_id"]] = cell["text"]
        print("ready", flush=True)
        async for raw in ws:
            event = json.loads(raw)
            name, data = event["event"], event["data"]
            counts[name] = counts.get(name, 0) + 1
            if name == "generation:item:token":
                key = data["output_id"]
                texts[key] = texts.get(key, "")[: data["offset"]] + data["delta"]
            elif name == "generation:item:started":
                texts[data["output_id"]] = ""
            elif name == "generation:item:completed":
                finals[data["output_id"]] = texts.pop(data["output_id"], "")
            elif name == "generation:item:failed":
                texts.pop(data["output_id"], None)
            elif name in ENDS:
                break
    return {"events": counts, "texts": finals}


def main() -> None:
    uri, token = sys.argv[1], sys.argv[2]
    print(json.dumps(asyncio.run(watch(uri, token))), flush=True)


if __name__ == "__main__":
    main()
