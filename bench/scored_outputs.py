"""What scoring replies costs: reading a reply by a job's reply format (per reply, beside the
cost of recording it), and the per-item consistency of a job at the cell limit (50,000
outputs), in the shapes that cost most: many items in two conditions (the jackknife's
O(n²) per pair, within its budget), and many conditions (the pairs capped).

    python bench/scored_outputs.py [--replies 20000]

In process, no database: the reading and the summaries are pure functions of the rows the
selectors read (``generation.replies``, ``generation.consistency``). The last line is one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from generation import consistency, replies

FIELDS = ["content_score", "organization_score", "language_score", "total_score"]


def reply(rng: random.Random) -> str:
    scores = {f: rng.randint(1, 4) for f in FIELDS[:3]}
    body = {
        **{f: v for f, v in scores.items()},
        **{f.replace("score", "justification"): "Judged on the rubric. " * 8 for f in scores},
        "total_score": sum(scores.values()),
    }
    text = json.dumps(body)
    return f"Here are the scores:\n```json\n{text}\n```" if rng.random() < 0.5 else text


def timed(function, *args):
    start = time.perf_counter()
    found = function(*args)
    return found, time.perf_counter() - start


def rows(items: int, conditions: int, reps: int, rng: random.Random):
    quality = [rng.gauss(0, 1) for _ in range(items)]
    for c in range(conditions):
        for i in range(items):
            for _ in range(reps):
                total = round(8 + 2 * quality[i] + rng.gauss(0, 1) * (c % 2))
                yield consistency.Row(
                    f"item-{i}",
                    f"model-{c // 4}",
                    f"prompt-{c % 4}",
                    float(c % 2),
                    {"total": total},
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replies", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(7)
    texts = [reply(rng) for _ in range(args.replies)]
    fmt = replies.check({"kind": "json", "fields": FIELDS})
    assert fmt is not None
    parsed, seconds = timed(lambda: [replies.read(t, fmt) for t in texts])
    assert all(p.status in ("ok", "extracted") for p in parsed)
    per_reply_us = seconds / len(texts) * 1e6
    print(f"read {len(texts):,} replies: {per_reply_us:.1f} µs a reply")
    tags = replies.check({"kind": "tags", "fields": {"better": "BETTER_SAMPLE"}})
    assert tags is not None
    tagged = ["<BETTER_SAMPLE>SAMPLE_2</BETTER_SAMPLE>\nSample 2 is clearer."] * len(texts)
    _, tag_seconds = timed(lambda: [replies.read(t, tags) for t in tagged])
    tag_us = tag_seconds / len(texts) * 1e6
    print(f"read {len(texts):,} tag replies: {tag_us:.1f} µs a reply")

    shapes = {
        # 1,000 items x 2 conditions x 25 calls: one pair, the jackknife at its size limit.
        "1000_items_2_conditions": (1000, 2, 25),
        # 250 items x 200 conditions: 19,900 pairs, 100 computed.
        "250_items_200_conditions": (250, 200, 1),
        # 10 essays x 2 conditions x 20 calls: the activity.
        "10_items_2_conditions": (10, 2, 20),
    }
    figures: dict[str, float] = {}
    for name, (items, conditions, reps) in shapes.items():
        data = list(rows(items, conditions, reps, rng))
        found, seconds = timed(consistency.summarise, data, ["total"], None)
        methods = {p["kendall_interval"] for p in found["rank_agreement"]}
        print(
            f"consistency of {len(data):,} outputs ({name}): {seconds:.2f} s, "
            f"{len(found['rank_agreement'])} of {found['pairs_total']} pairs, "
            f"intervals {sorted(m for m in methods if m)}"
        )
        figures[f"consistency_s_{name}"] = round(seconds, 3)
    print(
        json.dumps(
            {
                "us_per_json_reply": round(per_reply_us, 1),
                "us_per_tag_reply": round(tag_us, 1),
                **figures,
            }
        )
    )


if __name__ == "__main__":
    main()
