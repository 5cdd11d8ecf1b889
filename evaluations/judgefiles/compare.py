"""The regression report: two batches' verdicts row by row, by ``custom_id`` (each batch
with its re-submissions merged, ``services.combined``).

``compare(a, b)`` gives ``summary``: the rows of each and of both, the rows only in one
(``only_in_a``, ``only_in_b``), the rows whose score or verdict changed, the mean score
shift (b - a) with its 95% t interval, the share of A/B verdicts that flipped, Cohen's kappa
between the two runs' verdicts and the quadratic-weighted kappa between their whole-number
scores (each with the number of rows it rests on); and ``rows``: per ``custom_id`` both
scores and verdicts and whether it ``changed``.

A batch run for a scenario judge that its trust gate marks untrusted (docs/analytics.md,
"Trust gates") has its verdicts left out, as if it had none, unless a manager opted in:
``summary.trust`` says each batch's judge's trust, ``summary.excluded`` which were left out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# scipy.stats is imported inside the functions that use it: it takes about a second to
# import, and the web server loads this module before answering its first request.
from evaluations.analytics.agreement_stats import cohen_kappa
from evaluations.analytics.trust import stored_trust
from evaluations.judgefiles.models import JudgeBatch
from evaluations.judgefiles.services import combined


def _round(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


MAX_CATEGORIES = 50  # kappa's table is categories²: above, too many labels to mean much


def _kappa(pairs: list[tuple[Any, Any]], weights: str | None = None) -> float | None:
    if not pairs or len({v for p in pairs for v in p}) > MAX_CATEGORIES:
        return None
    return cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs], weights=weights)


def batch_trust(batch: JudgeBatch) -> dict[str, Any] | None:
    """The trust of the scenario judge a batch was run for (None: no judge, or no card)."""
    judge = batch.judge
    if judge is None:
        return None
    return stored_trust(judge.scenario).get(judge.pk)


def compare(a: JudgeBatch, b: JudgeBatch) -> dict[str, Any]:
    from scipy import stats as sps

    trusts = {"a": batch_trust(a), "b": batch_trust(b)}
    excluded = [k for k, t in trusts.items() if t is not None and not t["counted_in_rankings"]]
    old = combined(a) if "a" not in excluded else {}
    new = combined(b) if "b" not in excluded else {}
    both = sorted(set(old) & set(new))
    rows = []
    shifts, flips, verdict_pairs, score_pairs = [], [], [], []
    for custom_id in both:
        x, y = old[custom_id], new[custom_id]
        changed = x.score != y.score or x.verdict.strip().upper() != y.verdict.strip().upper()
        rows.append(
            {
                "custom_id": custom_id,
                "score_a": x.score,
                "score_b": y.score,
                "verdict_a": x.verdict,
                "verdict_b": y.verdict,
                "parsed_a": x.parsed,
                "parsed_b": y.parsed,
                "changed": changed,
            }
        )
        if x.score is not None and y.score is not None:
            shifts.append(y.score - x.score)
            if float(x.score).is_integer() and float(y.score).is_integer():
                score_pairs.append((int(x.score), int(y.score)))
        if x.verdict and y.verdict:
            va, vb = x.verdict.strip().upper(), y.verdict.strip().upper()
            verdict_pairs.append((va, vb))
            if va in ("A", "B") and vb in ("A", "B"):
                flips.append(va != vb)
    shift: dict[str, Any] = {"rows": len(shifts), "mean": None, "ci_low": None, "ci_high": None}
    if shifts:
        values = np.array(shifts, float)
        mean = float(values.mean())
        shift["mean"] = _round(mean)
        if len(values) > 1:
            error = float(values.std(ddof=1)) / math.sqrt(len(values))
            half = float(sps.t.ppf(0.975, len(values) - 1)) * error
            shift["ci_low"], shift["ci_high"] = _round(mean - half), _round(mean + half)
    summary = {
        "batch_a": a.public_id,
        "batch_b": b.public_id,
        "trust": trusts,
        "excluded": excluded,
        "rows_a": len(old),
        "rows_b": len(new),
        "rows_both": len(both),
        "only_in_a": sorted(set(old) - set(new)),
        "only_in_b": sorted(set(new) - set(old)),
        "changed": sum(1 for r in rows if r["changed"]),
        "score_shift": shift,
        "verdicts_flipped": {
            "rows": len(flips),
            "share": _round(sum(flips) / len(flips)) if flips else None,
        },
        "verdict_kappa": {
            "rows": len(verdict_pairs),
            "kappa": _round(_kappa(verdict_pairs)),
        },
        "score_kappa_quadratic": {
            "rows": len(score_pairs),
            "kappa": _round(_kappa(score_pairs, "quadratic")),
        },
    }
    return {"summary": summary, "rows": rows}
