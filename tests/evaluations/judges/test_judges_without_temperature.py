"""A judge that sends no temperature (issue 37): ``temperatures: [null]`` is taken as
jobs take it, no temperature goes out, its judgments say none was sent, every surface shows
"none sent", and a call without one is still answered once."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from evalplatform.providers.models import LLMModel, ProviderConnection
from evaluations.models import Judgment
from tests.helpers.evaluations import create_judge, make_scenario, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_judge_with_no_temperature_sends_none(api, people, team_a, fake_provider):
    connection = ProviderConnection.objects.create(
        team=team_a, name="fake", kind="openai", base_url=fake_provider.url
    )
    model = LLMModel.objects.create(connection=connection, model_id="j", display_name="J")
    scenario = make_scenario(people, team_a, "comparison", {"ties": False})
    manager = api(people["manager"])
    both = create_judge(api, people["manager"], scenario, name="Both", model=model.pk,
                        temperatures=[None, 0.5])  # fmt: skip
    assert both["temperatures"] == [None, 0.5]
    made = create_judge(api, people["manager"], scenario, name="None", model=model.pk,
                        temperatures=[None])  # fmt: skip
    assert made["temperatures"] == [None]
    assert manager.get(f"/api/judges/{made['id']}").json()["temperatures"] == [None]
    # A bad entry is still a 400 naming the field.
    bad = manager.post(f"/api/scenarios/{scenario.pk}/judges",
                       {"name": "Bad", "model": model.pk, "temperatures": [None, None]},
                       format="json")  # fmt: skip
    assert bad.status_code == 400 and "temperatures" in bad.json()["errors"]
    job = manager.post(f"/api/judges/{made['id']}/run", {}, format="json").json()["job"]
    run(job)
    sent = [json.loads(raw) for path, raw in fake_provider.app.bodies if "chat" in path]
    assert sent and all("temperature" not in body for body in sent)
    judgments = Judgment.objects.filter(judge_id=made["id"])
    assert judgments.exists() and {j.temperature for j in judgments} == {None}
    # One judgment per call, also without a temperature (NULLs are distinct in SQL).
    first = judgments.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Judgment.objects.create(
            scenario=scenario,
            task_id=first.task_id,
            rater_kind=first.rater_kind,
            judge_id=made["id"],
            presented=first.presented,
            repetition=first.repetition,
            temperature=None,
            swapped=first.swapped,
        )
    # The pages say none was sent; the form takes "none".
    client = Client()
    client.force_login(people["manager"])
    page = client.get(f"/judges/{made['id']}").content.decode()
    assert "temperatures none sent" in page
    assert "none sent, 0.5" in client.get(f"/scenarios/{scenario.pk}").content.decode()
    client.post(
        f"/scenarios/{scenario.pk}/judges",
        {"name": "Form", "model": str(model.pk), "temperatures": "none, 0",
         "mode": "live", "repetitions": "1"},
    )  # fmt: skip
    assert scenario.judges.get(name="Form").temperatures == [None, 0.0]
