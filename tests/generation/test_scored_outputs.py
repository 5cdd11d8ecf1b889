"""Scored outputs: a job's reply format read into fields on every output, shown in the API,
exports and statistics, and the per-item consistency of repeated calls."""

from __future__ import annotations

import csv
import io
import json

import pytest
from scipy import stats as sps

from generation import replies
from generation.consistency import rank_agreement
from generation.models import GenerationJob, GenerationOutput
from generation.selectors import CSV_COLUMNS
from tests.factories import PromptTemplateFactory, make_version
from tests.helpers.generation import JOBS, run

RUBRIC = (
    "Score the essay on a rubric. Return only JSON with content_score, organization_score "
    "and language_score (each 1-4), a content_justification, organization_justification "
    "and language_justification, and total_score.\n\nEssay:\n{{essay}}"
)
FIELDS = [
    "content_score",
    "organization_score",
    "language_score",
    "total_score",
    "content_justification",
]
ESSAYS = [
    {"id": f"essay_{i}", "essay": f"Essay {i}: " + "Rivers shape valleys and towns. " * (i + 1)}
    for i in range(6)
]


def essay_job(api, user, setup, team_a, **extra):
    version = make_version(PromptTemplateFactory(team=team_a, name="Rubric"), [("", RUBRIC)])
    body = {
        "team": "team-a",
        "name": "Essay scoring",
        "source": {"type": "manual", "format": "json", "content": json.dumps(ESSAYS)},
        "prompt_versions": [version.pk],
        "models": [setup["models"][0].pk],
        "repetitions": 5,
        "temperatures": [None, 0.0],
        "reply_format": {"kind": "json", "fields": FIELDS},
    } | extra
    response = api(user).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    job_id = response.json()["id"]
    api(user).post(f"{JOBS}/{job_id}/start")
    run(job_id)
    return job_id


@pytest.mark.django_db(transaction=True)
def test_a_rubric_job_keeps_every_reply_as_fields(api, creator, setup, team_a):
    job_id = essay_job(api, creator, setup, team_a)
    client = api(creator)
    job = client.get(f"{JOBS}/{job_id}").json()
    assert job["reply_format"] == {"kind": "json", "fields": {f: f for f in FIELDS}}
    outputs = GenerationOutput.objects.filter(job_id=job_id)
    assert outputs.count() == 60
    assert {o.parse_status for o in outputs} <= {"ok", "extracted"}
    for o in outputs:
        parts = o.parsed["content_score"] + o.parsed["organization_score"]
        assert o.parsed["total_score"] == parts + o.parsed["language_score"]
        assert o.content  # the raw text is kept beside the fields
    listed = client.get(f"{JOBS}/{job_id}/outputs", {"parse_status": "failed"}).json()
    assert listed["count"] == 0
    one = client.get(f"{JOBS}/{job_id}/outputs").json()["results"][0]
    assert set(one["parsed"]) == set(FIELDS) and one["parse_error"] == ""

    # The CSV: the spec's 13 columns first and unchanged, then the reply's.
    text = b"".join(client.post(f"{JOBS}/{job_id}/export/csv").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:13] == CSV_COLUMNS
    assert rows[0][13:] == ["parse_status", "parse_error", *(f"parsed.{f}" for f in FIELDS)]
    by_id = {int(r[0]): r for r in rows[1:]}
    first = outputs.order_by("pk").first()
    assert by_id[first.pk][13 + 2 + 3] == str(first.parsed["total_score"])
    exported = json.loads(b"".join(client.post(f"{JOBS}/{job_id}/export/json").streaming_content))
    record = exported["outputs"][0]
    assert record["parsed"]["total_score"] == first.parsed["total_score"]
    assert exported["job"]["reply_format"]["kind"] == "json"

    # Statistics: each numeric field by temperature ("none": none sent); text is left out.
    stats = client.get(f"{JOBS}/{job_id}/statistics").json()
    assert stats["by_parse_status"].get("failed", 0) == 0
    assert set(stats["fields"]) == set(FIELDS) - {"content_justification"}
    by_temperature = stats["fields"]["total_score"]["by_temperature"]
    assert by_temperature["none"]["n"] == by_temperature["0"]["n"] == 30


@pytest.mark.django_db(transaction=True)
def test_repeated_calls_per_item_and_rank_order_between_conditions(api, creator, setup, team_a):
    job_id = essay_job(api, creator, setup, team_a)
    client = api(creator)
    found = client.get(f"{JOBS}/{job_id}/consistency").json()
    assert found["field"] == "content_score"  # the first field with numbers
    assert "content_justification" not in found["numeric_fields"]
    found = client.get(f"{JOBS}/{job_id}/consistency", {"field": "total_score"}).json()
    by_condition = {c["condition"]: c for c in found["by_condition"]}
    zero = next(c for c in by_condition if c.endswith("temperature 0"))
    unset = next(c for c in by_condition if c.endswith("no temperature sent"))
    # At temperature 0 the mock is deterministic: every essay's SD is 0.
    assert by_condition[zero]["items_with_sd_0"] == 6 and by_condition[zero]["max_sd"] == 0
    assert by_condition[unset]["calls"] == 30 and by_condition[unset]["mean_sd"] > 0
    items = [i for i in found["items"] if i["condition"] == unset]
    assert len(items) == 6 and all(i["n"] == 5 for i in items)
    scores = GenerationOutput.objects.filter(
        job_id=job_id, temperature__isnull=True, item__item_id="essay_2"
    )
    values = [o.parsed["total_score"] for o in scores]
    row = next(i for i in items if i["item"] == "essay_2")
    assert row["mean"] == pytest.approx(sum(values) / 5, abs=1e-4)
    assert (row["min"], row["max"]) == (min(values), max(values))
    [pair] = found["rank_agreement"]
    means = {
        c: {i["item"]: i["mean"] for i in found["items"] if i["condition"] == c}
        for c in (pair["a"], pair["b"])
    }
    a = [means[pair["a"]][k] for k in sorted(means[pair["a"]])]
    b = [means[pair["b"]][k] for k in sorted(means[pair["a"]])]
    assert pair["items"] == 6
    assert pair["spearman"] == pytest.approx(sps.spearmanr(a, b).statistic, abs=1e-4)
    assert pair["kendall"] == pytest.approx(sps.kendalltau(a, b).statistic, abs=1e-4)
    low, high = pair["spearman_ci"]
    assert low <= pair["spearman"] <= high
    # Six items: normal theory for rho, the jackknife for tau (ties: normal theory is short).
    assert (pair["spearman_interval"], pair["kendall_interval"]) == ("normal_theory", "jackknife")

    text = b"".join(client.get(f"{JOBS}/{job_id}/consistency/csv").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["field"] for r in rows} == set(FIELDS) - {"content_justification"}
    assert len(rows) == 4 * 6 * 2
    response = client.get(
        f"{JOBS}/{job_id}/consistency/csv", {"table": "agreement", "field": "total_score"}
    )
    text = b"".join(response.streaming_content).decode()
    [agreement] = list(csv.DictReader(io.StringIO(text)))
    assert float(agreement["spearman_low"]) == low and agreement["field"] == "total_score"

    bad = client.get(f"{JOBS}/{job_id}/consistency", {"field": "nope"})
    assert bad.status_code == 400
    assert bad.json()["errors"] == {"field": [f"One of {', '.join(FIELDS)}."]}
    bad = client.get(f"{JOBS}/{job_id}/consistency/csv", {"table": "all"})
    assert bad.status_code == 400 and "table" in bad.json()["errors"]


@pytest.mark.django_db(transaction=True)
def test_tags_and_replies_that_do_not_parse(api, creator, setup, team_a):
    template = PromptTemplateFactory(team=team_a, name="Pairwise")
    version = make_version(
        template,
        [
            (
                "",
                "Which sample is better? Answer <BETTER_SAMPLE>SAMPLE_1</BETTER_SAMPLE> or "
                "<BETTER_SAMPLE>SAMPLE_2</BETTER_SAMPLE>.\nSAMPLE_1: {{first}}\n"
                "SAMPLE_2: {{second}}",
            )
        ],
    )
    prose = make_version(PromptTemplateFactory(team=team_a, name="Prose"), [("", "{{first}}")])
    items = [{"id": f"p{i}", "first": "a" * (i + 3), "second": "b" * 5} for i in range(4)]
    body = {
        "team": "team-a",
        "name": "Tags",
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
        "prompt_versions": [version.pk, prose.pk],
        "models": [setup["models"][0].pk],
        "temperatures": [0.0],
        "reply_format": {"kind": "tags", "fields": {"better": "BETTER_SAMPLE"}},
    }
    client = api(creator)
    job_id = client.post(JOBS, body, format="json").json()["id"]
    client.post(f"{JOBS}/{job_id}/start")
    run(job_id)
    outputs = GenerationOutput.objects.filter(job_id=job_id).select_related("prompt")
    tagged = [o for o in outputs if o.prompt.prompt_version_id == version.pk]
    assert len(tagged) == 4
    assert all(o.parse_status == "extracted" for o in tagged)
    assert {o.parsed["better"] for o in tagged} <= {"SAMPLE_1", "SAMPLE_2"}
    failed = [o for o in outputs if o.prompt.prompt_version_id == prose.pk]
    # Unreadable replies stay completed, with their text and why they were not read.
    assert all(o.status == "completed" and o.parse_status == "failed" for o in failed)
    assert all(o.content and "None of the fields" in o.parse_error for o in failed)
    listed = client.get(f"{JOBS}/{job_id}/outputs", {"parse_status": "failed"}).json()
    assert listed["count"] == 4


@pytest.mark.django_db(transaction=True)
def test_a_field_missing_from_a_reply_is_a_partial_parse(api, creator, setup, team_a):
    job_id = essay_job(
        api,
        creator,
        setup,
        team_a,
        repetitions=1,
        temperatures=[0.0],
        reply_format={"kind": "json", "fields": {"total": "total_score", "grade": "scores.grade"}},
    )
    output = GenerationOutput.objects.filter(job_id=job_id).first()
    assert output.parse_status == "partial" and output.parse_error == "Not found: grade."
    assert output.parsed["grade"] is None and isinstance(output.parsed["total"], int)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("reply_format", "message"),
    [
        ({"kind": "yaml"}, replies.HELP),
        ({"kind": "json"}, "fields: {name: path} or a list of names, at least one."),
        ({"kind": "json", "fields": {"a": "x"}, "values": {}}, "Only kind and fields."),
        ({"kind": "json", "fields": {"1a": "x"}}, "A field's name is 1 to 64"),
        ({"kind": "json", "fields": {"a": "." * 5}}, "fields.a: a dotted path"),
        ({"kind": "tags", "fields": {"a": "<b>"}}, "fields.a: a tag's name"),
        ({"kind": "json", "fields": [f"f{i}" for i in range(51)]}, "At most 50 fields."),
        ({"kind": "structured"}, "Structured replies need a response_schema"),
        ("json", replies.HELP),
    ],
)
def test_a_bad_reply_format_is_refused_and_nothing_is_written(
    api, creator, setup, reply_format, message
):
    from tests.helpers.generation import job_body

    response = api(creator).post(JOBS, job_body(setup, reply_format=reply_format), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["errors"]["reply_format"][0].startswith(message)
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db
def test_structured_replies_take_their_fields_from_the_schema(api, creator, setup, team_a):
    from tests.factories import ConnectionFactory, LLMModelFactory
    from tests.helpers.generation import job_body

    connection = ConnectionFactory(team=team_a, kind="openai", base_url="http://127.0.0.1:9")
    model = LLMModelFactory(connection=connection, model_id="gpt-schema")

    schema = {
        "name": "scores",
        "schema": {
            "type": "object",
            "properties": {"total_score": {"type": "integer"}, "why": {"type": "string"}},
        },
    }
    models = [{"model": model.pk, "response_schema": schema}]
    body = job_body(setup, models=models, reply_format={"kind": "structured"})
    response = api(creator).post(JOBS, body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["reply_format"] == {
        "kind": "structured",
        "fields": {"total_score": "total_score", "why": "why"},
    }


@pytest.mark.django_db
def test_a_job_without_a_reply_format_has_no_consistency_fields(api, creator, setup):
    from tests.helpers.generation import create_job, job_body

    job_id = create_job(api, creator, job_body(setup)).pk
    client = api(creator)
    found = client.get(f"{JOBS}/{job_id}/consistency").json()
    assert found["fields"] == [] and found["field"] is None
    bad = client.get(f"{JOBS}/{job_id}/consistency", {"field": "total_score"})
    assert bad.json()["errors"] == {"field": ["The job has no reply format."]}
    assert "fields" not in client.get(f"{JOBS}/{job_id}/statistics").json()


def test_reading_replies_never_raises():
    fmt = {"kind": "json", "fields": {"score": "score"}}
    assert replies.read('{"score": NaN}', fmt).fields is None or True
    assert replies.read('{"score": NaN}', fmt).status == "failed"  # NaN is not kept
    assert replies.read("[" * 100_000, fmt).status == "failed"
    fenced = replies.read('```json\n{"score": 4}\n```', fmt)
    assert fenced == replies.Parsed({"score": 4}, "extracted")
    assert replies.read('{"score": 4}', fmt) == replies.Parsed({"score": 4}, "ok")
    tags = {"kind": "tags", "fields": {"s": "score", "w": "why"}}
    assert replies.read("<score> 7.5 </score><why>fine</why>", tags).fields == {
        "s": 7.5,
        "w": "fine",
    }
    with pytest.raises(ValueError, match=r"fields\.a: a dotted path"):
        replies.check({"kind": "json", "fields": {"a": "x\x00y"}})
    assert replies.numeric(True) is None and replies.numeric("12") == 12.0
    assert replies.numeric(10**400) is None and replies.numeric("1e999") is None


def test_rank_agreement_edges():
    assert rank_agreement([1, 2, 3], [1, 2, 3])["spearman_ci"] is None  # too few items
    constant = rank_agreement([1, 1, 1, 1, 1], [1, 2, 3, 4, 5])
    assert constant["spearman"] is None and constant["kendall"] is None
    perfect = rank_agreement(list(range(10)), list(range(10)))
    # A perfect order among ten items is no proof of a perfect one: the interval is wide.
    assert perfect["spearman"] == 1.0 and perfect["spearman_ci"][0] < 0.9
    assert perfect["spearman_ci"][1] == perfect["kendall_ci"][1] == 1.0
    assert perfect["kendall_interval"] == "normal_theory"  # the jackknife's is 0
    reversed_ = rank_agreement(list(range(10)), list(range(10, 0, -1)))
    assert reversed_["kendall_ci"][0] == -1.0 and reversed_["kendall_ci"][1] < -0.5
    mixed = rank_agreement(list(range(40)), [x % 7 + x / 10 for x in range(40)])
    assert mixed["spearman_interval"] == mixed["kendall_interval"] == "jackknife"
    low, high = mixed["kendall_ci"]
    assert low < mixed["kendall"] < high
    big = rank_agreement(list(range(1500)), [x % 97 for x in range(1500)])
    assert big["kendall_interval"] == "normal_theory" and big["items"] == 1500


@pytest.mark.django_db(transaction=True)
def test_the_job_page_shows_fields_and_the_consistency_page(
    api, creator, setup, team_a, monkeypatch
):
    from django.test import Client

    job_id = essay_job(api, creator, setup, team_a)
    browser = Client()
    browser.force_login(creator)
    page = browser.get(f"/generation/jobs/{job_id}").content.decode()
    assert "Scored fields" in page and "total_score: mean ± SD (n)" in page
    assert f"/generation/jobs/{job_id}/consistency" in page
    assert "reply ok" in page or "reply extracted" in page
    failed = browser.get(f"/generation/jobs/{job_id}/outputs", {"parse_status": "failed"})
    assert "No outputs match." in failed.content.decode()
    page = browser.get(f"/generation/jobs/{job_id}/consistency", {"field": "total_score"})
    text = page.content.decode()
    assert page.status_code == 200 and "Rank order of items between conditions" in text
    assert "essay_5" in text and 'value="total_score" selected' in text
    # An essay's text is the user's, escaped like any LLM text.
    assert "<script>" not in text
    # A page lists a bounded number of items; the CSV has them all.
    monkeypatch.setattr("generation.views.CONSISTENCY_ITEMS_SHOWN", 2)
    capped = browser.get(f"/generation/jobs/{job_id}/consistency").content.decode()
    assert "The first 2 of 6 items" in capped and "essay_5" not in capped


@pytest.mark.django_db
def test_another_teams_job_has_no_consistency(api, creator, setup, member, team_b):
    from evalplatform.accounts.models import Role
    from tests.helpers.generation import create_job, job_body

    outsider = member(team_b, Role.ADMIN)
    job_id = create_job(api, creator, job_body(setup)).pk
    assert api(outsider).get(f"{JOBS}/{job_id}/consistency").status_code == 404
    assert api(outsider).get(f"{JOBS}/{job_id}/consistency/csv").status_code == 404


@pytest.mark.django_db
def test_the_wizard_takes_a_reply_format(creator, setup):
    from django.test import Client

    from tests.helpers.generation import wizard_form

    browser = Client()
    browser.force_login(creator)
    response = browser.post(
        "/generation/new", wizard_form(setup, reply_format="total_score,\ncontent_score")
    )
    assert response.status_code == 302
    job = GenerationJob.objects.get(name="From the wizard")
    assert job.config["reply_format"]["fields"] == {
        "total_score": "total_score",
        "content_score": "content_score",
    }
    refused = browser.post(
        "/generation/new", wizard_form(setup, name="Bad", reply_format='{"kind": "xml"}')
    )
    html = refused.content.decode()
    assert refused.status_code == 400 and "Reply format" in html
    assert "&quot;kind&quot;: &quot;xml&quot;" in html  # what was typed is kept
    assert not GenerationJob.objects.filter(name="Bad").exists()


def test_the_leave_one_out_coefficients_equal_scipys_on_tied_data():
    import numpy as np

    from generation import consistency

    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, 25).astype(float)
    y = (x + rng.integers(0, 3, 25)).astype(float)
    spearman = consistency._loo_spearman(x, y)
    kendall = consistency._loo_kendall(x, y)
    for i in range(25):
        keep = np.arange(25) != i
        assert spearman[i] == pytest.approx(sps.spearmanr(x[keep], y[keep]).statistic, abs=1e-12)
        assert kendall[i] == pytest.approx(sps.kendalltau(x[keep], y[keep]).statistic, abs=1e-12)


def test_many_conditions_are_paired_within_a_bound():
    from generation import consistency

    rows = [
        consistency.Row(f"i{i}", f"m{c}", "p", 0.0, {"s": (i * (c + 1)) % 7})
        for c in range(1_000)
        for i in range(5)
    ]
    found = consistency.summarise(rows, ["s"])
    assert found["pairs_total"] == 1_000 * 999 // 2
    assert len(found["rank_agreement"]) == consistency.MAX_PAIRS
    named = {p["a"] for p in found["rank_agreement"]} | {p["b"] for p in found["rank_agreement"]}
    first = {c["condition"] for c in found["conditions"][: consistency.MAX_PAIRED_CONDITIONS]}
    assert named <= first
