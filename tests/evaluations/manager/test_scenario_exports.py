"""The scenario judgments exports (CSV and JSON) read column-wise: byte for byte what the
row-by-row reference (``scenario_export_reference``, the export as it was) writes for the
same judgments, for every scenario type, with people's, external raters' and judges'
judgments (a judge's unparseable reply and one without its call), flags, comments,
revisions and adjudications, and hostile text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from evalplatform.accounts.roles import Role
from evaluations.models import (
    Adjudication,
    ExternalRater,
    FlagReason,
    Judgment,
    ParseStatus,
    RaterKind,
    TaskFlag,
)
from scenarios.models import Task
from tests.helpers import scenario_export_reference as reference
from tests.helpers.evaluations import create_judge, make_scenario, rows, run_judge

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = ['=1+1, "quoted"\nline', "-2", "@sum", "plain", "ünïcödé ✓", "\ttab"]

CONFIGS = {
    "comparison": {"ties": True},
    "rating": {
        "dimensions": [
            {"name": "clarity", "min": 1, "max": 5},
            {"name": "accuracy", "min": 0, "max": 10},
        ]
    },
    "labeling": {"labels": ["concise", "polite", "=correct"], "multiple": True},
    "ranking": {},
}


def _body(response) -> bytes:
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def _judged(api, people, team, kind, member):
    """A scenario of ``kind`` judged by a mock judge (both orders where the type has them),
    then answered by a person, an external rater and that judge again in other ways."""
    data = [dict(r, model=HOSTILE[n % len(HOSTILE)]) for n, r in enumerate(rows())]
    scenario = make_scenario(people, team, kind, CONFIGS[kind], data=data)
    swap = kind in ("comparison", "ranking")
    judge = create_judge(
        api, people["manager"], scenario, name='=J, "judge"', model=people["model"].pk, swap=swap
    )
    run_judge(api, people["manager"], judge)
    judged = list(Judgment.objects.filter(scenario=scenario).order_by("pk"))
    assert judged
    external = ExternalRater.objects.create(team=team, name="+ext")
    raters = [member(team, Role.EVALUATOR, username=f"-ev{n}") for n in range(len(judged))]
    for n, j in enumerate(judged):
        text = HOSTILE[n % len(HOSTILE)]
        Judgment.objects.create(
            scenario=scenario,
            task_id=j.task_id,
            rater_kind=RaterKind.HUMAN,
            evaluator=raters[n],
            presented=j.presented,
            payload=j.payload,
            rationale=text,
            comment=HOSTILE[(n + 1) % len(HOSTILE)],
            time_spent_ms=None if n % 2 else 1234 + n,
            revised_at=datetime(2026, 1, 2, 3, 4, 5, 6789 * (n % 2), tzinfo=UTC) if n % 3 else None,
        )
        if n == 0:
            Judgment.objects.create(
                scenario=scenario,
                task_id=j.task_id,
                rater_kind=RaterKind.EXTERNAL,
                external_rater=external,
                presented=j.presented,
                payload=j.payload,
            )
    # A judge's reply that was no verdict, and a verdict whose call is gone.
    Judgment.objects.filter(pk=judged[0].pk).update(
        parse_status=ParseStatus.FAILED, payload={}, parse_error="=no JSON"
    )
    Judgment.objects.filter(pk=judged[1].pk).update(output=None)
    task = Task.objects.get(pk=judged[2].task_id)
    TaskFlag.objects.create(
        scenario=scenario, task=task, evaluator=raters[2], reason=FlagReason.values[0],
        note="-see, \"this\"",
    )  # fmt: skip
    Adjudication.objects.create(
        scenario=scenario,
        task=task,
        presented=judged[2].presented,
        payload=judged[2].payload,
        note="@settled",
        set_by=people["manager"],
    )
    return scenario


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_the_exports_are_the_reference_bytes(api, people, team_a, mock_judge, member, kind):
    people = people | {"model": mock_judge}
    scenario = _judged(api, people, team_a, kind, member)
    manager = api(people["manager"])
    csv = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/csv"))
    assert csv == "".join(reference.csv_chunks(scenario)).encode()
    assert csv.count(b"\r\n") > Judgment.objects.filter(scenario=scenario).count()
    body = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/json"))
    head = body.split(b', "variants": ', 1)[0].removeprefix(b'{"scenario": ')
    import json

    expected = "".join(reference.json_chunks(scenario, json.loads(head))).encode()
    assert body == expected
    assert b'"rater_kind": "external"' in body and b'"raw_reply": null' in body


@pytest.mark.parametrize("kind", ["rating", "labeling"])
def test_json_decoded_once_per_text_still_the_reference_bytes(
    api, people, team_a, mock_judge, member, kind, monkeypatch
):
    """The exports decode each distinct short JSON text once and share the value between
    rows (``exporting.JSON_MEMO``); with a memo of one text, evicted at every new one, and
    texts over 20 characters (the answers, not the presented orders) decoded each time, the
    bytes are still the reference's."""
    from evalplatform import exporting

    monkeypatch.setattr(exporting, "JSON_MEMO", 1)
    monkeypatch.setattr(exporting, "JSON_MEMO_TEXT", 20)
    people = people | {"model": mock_judge}
    scenario = _judged(api, people, team_a, kind, member)
    manager = api(people["manager"])
    csv = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/csv"))
    assert csv == "".join(reference.csv_chunks(scenario)).encode()
    body = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/json"))
    head = body.split(b', "variants": ', 1)[0].removeprefix(b'{"scenario": ')
    import json

    assert body == "".join(reference.json_chunks(scenario, json.loads(head))).encode()


@pytest.mark.parametrize("empty", [True, False])
def test_judgments_of_no_row_and_of_several_rows_export_as_the_reference(
    api, people, team_a, mock_judge, member, monkeypatch, empty
):
    """Ranking judgments with no places make no CSV row and a full one a row per place:
    the other columns follow their judgment's rows, here fewer rows than judgments (with no
    flag in the scenario too); or, all full, more rows than a block holds (batches of three
    judgments: blocks of three rows)."""
    from evalplatform import exporting

    people = people | {"model": mock_judge}
    scenario = _judged(api, people, team_a, "ranking", member)
    if not empty:
        monkeypatch.setattr(exporting, "EXPORT_BATCH", 3)
        csv = _body(api(people["manager"]).post(f"/api/scenarios/{scenario.pk}/export/csv"))
        assert csv == "".join(reference.csv_chunks(scenario)).encode()
        assert csv.count(b"\r\n") > Judgment.objects.filter(scenario=scenario).count() + 1
        return
    TaskFlag.objects.filter(scenario=scenario).delete()
    judged = Judgment.objects.filter(scenario=scenario).exclude(parse_status=ParseStatus.FAILED)
    *emptied, kept = judged.order_by("pk")
    Judgment.objects.filter(pk__in=[j.pk for j in emptied]).update(payload={"ranking": []})
    csv = _body(api(people["manager"]).post(f"/api/scenarios/{scenario.pk}/export/csv"))
    assert csv == "".join(reference.csv_chunks(scenario)).encode()
    exported = [line.split(b",", 1)[0] for line in csv.split(b"\r\n")[1:-1]]
    assert len(emptied) > len(exported) > 1 and str(kept.pk).encode() in exported


def test_an_empty_scenario_exports_its_header_and_no_judgments(api, people, team_a):
    scenario = make_scenario(people, team_a, "comparison", {})
    manager = api(people["manager"])
    csv = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/csv"))
    assert csv == "".join(reference.csv_chunks(scenario)).encode()
    assert csv.count(b"\r\n") == 1
    body = _body(manager.post(f"/api/scenarios/{scenario.pk}/export/json"))
    assert b'"judgments": [], "flags": []}' in body
