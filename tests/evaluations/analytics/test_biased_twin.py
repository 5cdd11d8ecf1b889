"""A judge card a position-biased judge cannot game (issue 36, points 2 and 3): the twin of
a good judge, the same judge plus a push to the first position shown, scores lower than it
on kappa, alpha and raw agreement with the people (each verdict counts: a contradiction
between orders is a disagreement, not an item dropped), and a flip-rate gate excludes it
whether its pairs in both orders come from its own position swap or from the design's
reversed tasks (``reverse_share``)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from evalplatform.providers.llm.mock import quality
from tests.factories import ConnectionFactory, LLMModelFactory
from tests.helpers.evaluations import card_of, create_judge, make_scenario, rows


def _people_who_see_quality(api, manager, scenario) -> None:
    """One imported rater per task who prefers what the mock judge at temperature 0 does
    (the response of higher latent quality), but the other one on every fifth pair (in
    both its orders): a good judge agrees with them well above chance."""
    lines = ["item_id,variant_a,variant_b,winner,rater"]
    pairs: dict[frozenset[int], int] = {}  # each pair's number: a pair's tasks agree
    for task in scenario.tasks.select_related("variant_a", "variant_b").order_by("position"):
        a, b = task.variant_a, task.variant_b
        n = pairs.setdefault(frozenset((a.pk, b.pk)), len(pairs))
        preferred = a if quality(a.content) > quality(b.content) else b
        if (n + 1) % 5 == 0:
            preferred = b if preferred is a else a
        better = "A" if preferred is a else "B"
        lines.append(f"{a.item.item_id},{a.variant_id},{b.variant_id},{better},r1")
    file = SimpleUploadedFile("people.csv", "\n".join(lines).encode(), "text/csv")
    made = api(manager).post(
        f"/api/scenarios/{scenario.pk}/import", {"file": file}, format="multipart"
    )
    assert made.status_code == 201, made.json()


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("design", "swap"),
    [({"ties": True}, True), ({"ties": True, "reverse_share": 1.0}, False)],
    ids=["own swaps", "reversed tasks"],
)
def test_the_biased_twin_of_a_good_judge_scores_lower_and_is_gated_out(
    api, people, team_a, design, swap
):
    from tests.helpers.evaluations import run_judge

    scenario = make_scenario(people, team_a, "comparison", design, rows(items=10))
    _people_who_see_quality(api, people["manager"], scenario)
    cards = {}
    for name, push in (("Good", 0.0), ("Twin", 0.3)):
        connection = ConnectionFactory(
            team=team_a, kind="mock", name=name, options={"position_bias": push}
        )
        model = LLMModelFactory(connection=connection, model_id=f"mock-{name.lower()}")
        judge = create_judge(
            api, people["manager"], scenario, name=name, model=model.pk, swap=swap,
            temperatures=[0.0],
        )  # fmt: skip
        run_judge(api, people["manager"], judge)
        cards[name] = card_of(api, people["viewer"], judge)[1]
    good, twin = cards["Good"], cards["Twin"]
    for figure in ("kappa", "alpha", "agreement"):
        assert twin["human_agreement"][figure] < good["human_agreement"][figure], figure
    for card in (good, twin):
        assert card["human_agreement"]["shared_items"] == 30  # every item both judged
        assert card["human_agreement"]["verdicts"] == 60
        flips = card["flip_rate"]
        assert flips["pairs"] == 30
        assert (flips["own_swaps"], flips["design_reversals"]) == ((30, 0) if swap else (0, 30))
    assert twin["flip_rate"]["rate"] > good["flip_rate"]["rate"]

    gate = {"max_flip_rate": (good["flip_rate"]["rate"] + twin["flip_rate"]["rate"]) / 2}
    put = api(people["manager"]).put(
        f"/api/scenarios/{scenario.pk}/trust-gate", gate, format="json"
    )
    assert put.status_code == 200, put.json()
    after = {c["name"]: c for c in api(people["viewer"]).get(
        f"/api/scenarios/{scenario.pk}/analytics").json()["judge_cards"]}  # fmt: skip
    assert after["Good"]["trust"]["state"] == "trusted"
    assert after["Twin"]["trust"]["state"] == "untrusted"
    assert "max_flip_rate" not in after["Twin"]["trust"].get("unchecked", [])
