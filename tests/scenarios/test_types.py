"""The scenario type registry: every type present, in the order of the model's choices, one
a module; each type's strict answer check (people) and lenient verdict reader (judges) agree
on the stored answer; the form mapping feeds the strict check, and so do the rows of an
imported file; and a fifth type is one new module that every generic call site takes without a
change."""

from __future__ import annotations

import json
import pkgutil
import sys
import textwrap
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.http import QueryDict
from django.template.loader import get_template
from django.test import Client

import scenarios.types
from evalplatform.accounts.models import Team
from evalplatform.accounts.roles import Role
from evalplatform.errors import FieldErrors
from evaluations.analytics.analyze import ANALYSES, Analysis, analysis_of
from evaluations.judges import verdicts
from evaluations.manager import exports, imports
from evaluations.review import selectors as review_selectors
from evaluations.workspace import services
from scenarios import design, forms
from scenarios import services as scenario_services
from scenarios.models import Scenario, ScenarioType, Task
from scenarios.types import registry
from scenarios.types.base import Rejected, ScenarioKind

RUBRIC = {
    "dimensions": [
        {"name": "Clarity", "min": 1, "max": 5},
        {"name": "Tone", "min": 0, "max": 2},
    ]
}
# For each type: a configuration as entered, a valid answer under the presented keys (with
# the presented variant ids), and the same answer as the evaluator page's form fields.
SAMPLES = {
    "rating": (RUBRIC, {"scores": {"Clarity": 4, "Tone": 0}}, [7], "score_0=4&score_1=0"),
    "ranking": ({}, {"ranking": ["C", "A", "B"]}, [7, 8, 9], "ranking=C,A,B"),
    "comparison": ({"ties": False}, {"winner": "B"}, [7, 8], "winner=B"),
    "labeling": ({"labels": ["good", "bad"]}, {"labels": ["bad"]}, [7], "labels=bad"),
}


def test_every_type_is_registered_in_the_models_order():
    assert registry.values() == ["rating", "ranking", "comparison", "labeling"]
    assert registry.choices() == ScenarioType.choices
    assert [registry.get(v).value for v in ScenarioType.values] == ScenarioType.values
    assert registry.find("nonsense") is None and registry.find(["rating"]) is None
    with pytest.raises(KeyError):
        registry.get("nonsense")


def test_each_module_of_the_package_holds_one_type():
    modules = {
        m.name for m in pkgutil.iter_modules(scenarios.types.__path__) if m.name[0] != "_"
    } - {"base", "registry"}
    assert modules == set(registry.values())
    for kind in registry.every():
        assert type(kind).__module__ == f"scenarios.types.{kind.value}"


@pytest.mark.parametrize("kind", registry.every(), ids=lambda k: k.value)
def test_each_type_has_everything_it_needs(kind):
    assert kind.value in SAMPLES, "add a sample of the new type to SAMPLES"
    get_template(f"evaluations/task_{kind.value}.html")
    assert kind.answer_keys and kind.export_columns and kind.judge_prompt
    assert kind.analysis is None or kind.analysis in ANALYSES
    assert kind.importable == bool(kind.import_columns)


@pytest.mark.parametrize("kind", registry.every(), ids=lambda k: k.value)
def test_the_strict_check_and_the_lenient_reader_agree(kind):
    entered, answer, presented, _ = SAMPLES[kind.value]
    config = kind.check_config(entered)
    keys = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(presented)])
    checked = kind.check_answer(answer, config=config, presented=presented)
    read = kind.read_verdict(json.loads(json.dumps(answer)), config=config, keys=keys)
    assert set(checked) == set(read) == set(kind.answer_keys)
    # Stored, the judge's verdict is the person's answer.
    assert kind.stored(read, presented) == checked
    # What neither takes, both refuse.
    with pytest.raises(FieldErrors):
        kind.check_answer({}, config=config, presented=presented)
    with pytest.raises(Rejected):
        kind.read_verdict({}, config=config, keys=keys)


@pytest.mark.parametrize("kind", registry.every(), ids=lambda k: k.value)
def test_the_evaluator_form_gives_the_answer_the_check_takes(kind):
    entered, answer, presented, fields = SAMPLES[kind.value]
    config = kind.check_config(entered)
    from_form = kind.answer_from_form(QueryDict(fields), config)
    assert kind.check_answer(from_form, config=config, presented=presented) == kind.check_answer(
        answer, config=config, presented=presented
    )


# For each type: the rows of a file of judgments that give the sample answer of SAMPLES (its
# variants ``v7``, ``v8``, ... with those ids), in the order of the file.
IMPORT_ROWS = {
    "rating": [
        {"variant": "v7", "dimension": "Clarity", "score": "4"},
        {"variant": "v7", "dimension": "Tone", "score": 0},
    ],
    "ranking": [
        {"variant": "v8", "rank": "3"},
        {"variant": "v9", "rank": 1},
        {"variant": "v7", "rank": " 2 "},
    ],
    "comparison": [{"variant_a": "v7", "variant_b": "v8", "winner": "B"}],
    "labeling": [{"variant": "v7", "labels": " bad "}],
}


@dataclass(frozen=True)
class FakeVariant:
    pk: int
    variant_id: str
    model_label: str = ""
    prompt_label: str = ""


@pytest.mark.parametrize("kind", registry.every(), ids=lambda k: k.value)
def test_imported_rows_give_the_answer_the_strict_check_gives(kind):
    """What a file of judgments imports is the answer a person would have given."""
    assert kind.importable == (kind.value in IMPORT_ROWS), "add the type's rows to IMPORT_ROWS"
    if not kind.importable:
        return
    entered, answer, presented, _ = SAMPLES[kind.value]
    config = kind.check_config(entered)
    shown = [FakeVariant(pk, f"v{pk}") for pk in presented]
    item_variants = sorted(shown, key=lambda v: v.pk)
    variants = {("q", v.variant_id): v for v in item_variants}
    judgment = None
    for row in IMPORT_ROWS[kind.value]:
        problems: list[str] = []
        read = kind.read_import_row(
            row,
            item="q",
            variants=variants,
            item_variants=item_variants,
            config=config,
            problems=problems,
        )
        assert problems == [] and read is not None
        if judgment is None:
            judgment = read
        else:
            assert judgment.presented == read.presented
            assert (
                kind.merge_imported(rater="r", earlier=judgment.answer, later=read.answer) is None
            )
    assert judgment is not None
    assert (
        kind.finish_imported(rater="r", answer=judgment.answer, presented=judgment.presented)
        is None
    )
    assert judgment.answer == kind.check_answer(answer, config=config, presented=presented)
    task = kind.import_task(judgment.presented)
    assert (task.a, task.b, sorted(task.order)) in (
        (presented[0], presented[1] if len(presented) == 2 else None, []),
        (None, None, sorted(presented)),
    )


def test_ranking_answers_are_stored_as_variant_ids():
    ranking = registry.get("ranking")
    assert ranking.stored({"ranking": ["C", "A", "B"]}, [7, 8, 9]) == {"ranking": [9, 7, 8]}


# --- a fifth type -----------------------------------------------------------------------------
FIFTH = '''
"""Acceptability: one variant a task, acceptable or not."""

from evalplatform.errors import FieldErrors
from scenarios.types.base import Rejected, ScenarioKind


class Acceptability(ScenarioKind):
    value = "acceptability"
    label = "Acceptability"
    position = 50
    answer_keys = ("acceptable",)
    export_columns = ("variant", "acceptable")
    judge_prompt = ({"title": "Task", "body": "Acceptable? {{response}}"},)

    def answer_from_form(self, post, config):
        return {"acceptable": post.get("acceptable") == "1"}

    def check_answer(self, answer, *, config, presented):
        if not isinstance(answer.get("acceptable"), bool):
            raise FieldErrors({"answer.acceptable": "true or false."})
        return {"acceptable": answer["acceptable"]}

    def read_verdict(self, found, *, config, keys):
        if not isinstance(found.get("acceptable"), bool):
            raise Rejected('No "acceptable": true or false.')
        return {"acceptable": found["acceptable"]}

    def export_rows(self, *, payload, shown, variants, task):
        yield [shown[0].variant_id, payload["acceptable"]]

    # What its answer means: compared by the verdict, summed up in words, a judge's schema.
    def answer_value(self, payload, presented):
        found = payload.get("acceptable")
        return found if isinstance(found, bool) else None

    def disagreement(self, values, config):
        return 0.0 if len(set(values)) == 1 else 1.0

    def summary(self, payload, presented, task_order):
        return "acceptable" if payload.get("acceptable") else "not acceptable"

    def agreement_key(self, payload, presented):
        return bool(payload.get("acceptable"))

    def verdict_properties(self, config):
        return {"acceptable": {"type": "boolean"}}
'''


@pytest.fixture
def fifth_type(tmp_path, monkeypatch):
    """The package with one more module: ``acceptability.py``, as a new type would be added
    (in a directory of the package's path, not in the source tree)."""
    (tmp_path / "acceptability.py").write_text(textwrap.dedent(FIFTH))
    monkeypatch.setattr(scenarios.types, "__path__", [*scenarios.types.__path__, str(tmp_path)])
    registry._by_value.cache_clear()
    yield registry.get("acceptability")
    registry._by_value.cache_clear()
    sys.modules.pop("scenarios.types.acceptability", None)


@pytest.mark.django_db
def test_a_fifth_type_is_one_module(fifth_type, member):
    assert isinstance(fifth_type, ScenarioKind)
    assert registry.values()[-1] == "acceptability"
    # Creating one: its settings are checked, its tasks designed, its form read.
    team = Team.objects.create(name="Fifth", slug="fifth")
    manager = member(team, Role.MANAGER)
    checked, errors = scenario_services._settings(
        team, {"name": "Fifth", "type": "acceptability", "config": {}}
    )
    assert errors == {} and checked["config"] == {}
    _, errors = scenario_services._settings(team, {"name": "Other", "type": "nonsense"})
    assert errors["type"] == "rating, ranking, comparison, labeling or acceptability."
    assert design.check_config("acceptability", {}) == {}
    tasks = design.design("acceptability", [(1, [10, 11])], {}, seed=0)
    assert sorted(t.a for t in tasks) == [10, 11]
    assert forms.config_from_post("acceptability", QueryDict("")) == {}
    # Answering it: a person's answer, a judge's verdict, the export's columns, the analysis.
    scenario = Scenario(type="acceptability", config={})
    task = Task(scenario=scenario, position=0, variant_a_id=10)
    assert services.check_answer(scenario, task, {"acceptable": True}) == {"acceptable": True}
    with pytest.raises(FieldErrors):
        services.check_answer(scenario, task, {"acceptable": "yes"})
    verdict = verdicts.read("acceptability", {}, 'Sure: {"acceptable": false}')
    assert verdict.payload == {"acceptable": False} and verdict.parse_status == "extracted"
    assert exports.columns(scenario)[5:7] == ["variant", "acceptable"]
    assert type(analysis_of(scenario)) is Analysis
    # Stored without a migration: no constraint and no migrated choice names the types.
    stored = scenario_services.scenario_from_upload(
        user=manager,
        team=team,
        data={"name": "Stored", "type": "acceptability"},
        raw=b"item_id,variant_id,content\nq1,v1,Yes\nq1,v2,No\n",
        filename="a.csv",
    )
    assert Scenario.objects.get(pk=stored.pk).type == "acceptability"
    assert stored.tasks.count() == 2
    # It takes no imported judgments (it has no import_columns): the import says which do.
    with pytest.raises(FieldErrors) as refused:
        imports.import_judgments(user=manager, scenario=stored, raw=b"x\n1\n", filename="j.csv")
    assert refused.value.errors == {
        "scenario": [
            "Judgments can be imported into comparison, labeling, ranking and rating scenarios."
        ]
    }
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits 1 on a change
    # Its answers are compared as it says: the review's disagreement and summary, the judge's
    # schema, the quality figures' agreement and gold (nothing else reads its answer keys).
    yes, no = {"acceptable": True}, {"acceptable": False}
    assert review_selectors.disagreement(fifth_type, [True, True, None], {}) == 0.0
    assert review_selectors.disagreement(fifth_type, [True, False], {}) == 1.0
    assert review_selectors.disagreement(fifth_type, [True], {}) is None
    assert fifth_type.summary(no, [10], [10]) == "not acceptable"
    schema = verdicts.verdict_schema("acceptability", {})
    assert schema["required"] == ["acceptable", "rationale"]
    assert fifth_type.correct(yes, [10], yes, [10]) and not fifth_type.correct(no, [10], yes, [10])
    assert fifth_type.agreement_with(yes, True, [(True, yes), (True, yes), (False, no)]) == 1.0
    assert fifth_type.in_task_keys(no, [10], [10]) == no
    # The scenario form offers it (a type without settings has no fieldset).
    client = Client()
    client.force_login(manager)
    page = client.get("/scenarios/new").content.decode()
    assert '<option value="acceptability">Acceptability</option>' in page


@pytest.mark.django_db
def test_the_scenario_form_shows_each_types_settings(member):
    team = Team.objects.create(name="Forms", slug="forms")
    client = Client()
    client.force_login(member(team, Role.MANAGER))
    page = client.get("/scenarios/new").content.decode()
    for kind in registry.every():
        assert f'<option value="{kind.value}"' in page
        if kind.settings_template:
            assert f'data-for="{kind.value}"' in page
    # Each settings fieldset shows what its type's form_values give.
    assert 'name="dim-0-name"' in page and 'name="dim-1-name"' in page  # the blank rubric rows
    assert 'name="labels"' in page and 'name="pairing"' in page
