"""Work per request on inputs built to be slow: a prompt body of many "{{" and no "}}" (the
placeholder scan every prompt save and job plan runs) and a judge reply of many unclosed
tags (the "tags" reply reader). Each is timed at sizes n, 4n and 16n; a linear reader takes
about 4x the time for 4x the text (``growth_per_4x``), a quadratic one 16x.

    python bench/pathological_inputs.py [--size 20000]

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(fn, text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=20_000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
    os.environ.setdefault("EVAL_DATA_DIR", "/tmp/evalbench-pathological")
    import django

    django.setup()
    from evalplatform.prompts import rendering
    from evaluations.judges import verdicts
    from scenarios.types.base import Rejected

    def scan(text: str) -> None:
        rendering._placeholders.__wrapped__(text)  # not the per-text cache

    def tags(text: str) -> None:
        with contextlib.suppress(Rejected):  # no tag closes: the reply is refused
            verdicts.reshape(text, {"kind": "tags", "fields": {"winner": "a"}})

    summary: dict[str, float | int] = {"size_chars": args.size}
    for name, fn, unit in (("placeholders", scan, "{{"), ("tags", tags, "<a>")):
        seconds = []
        for factor in (1, 4, 16):
            text = unit * (args.size * factor // len(unit))
            seconds.append(timed(fn, text))
            print(f"{name:12s} {len(text):>9,} chars  {seconds[-1] * 1000:9.1f} ms")
        summary[f"{name}_ms_at_16x"] = round(seconds[2] * 1000, 1)
        summary[f"{name}_growth_per_4x"] = round((seconds[2] / seconds[0]) ** 0.5, 1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
