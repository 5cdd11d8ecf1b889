from __future__ import annotations

import pytest

from evalplatform.accounts.roles import Role
from evalplatform.prompts import services
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion, VersionLocked
from tests.factories import PromptTemplateFactory, make_version

BLOCKS = [
    {"title": "System", "body": "You summarize {{language}} emails."},
    {"title": "Email", "body": "Subject: {{subject}}\n\n{{content}}"},
]


@pytest.fixture
def creator_a(team_a, member):
    return member(team_a, Role.CREATOR, username="cre-a")


def _create(api, user, **extra):
    body = {"team": "team-a", "name": "Summary", "blocks": BLOCKS} | extra
    return api(user).post("/api/prompts/templates", body, format="json")


@pytest.mark.django_db
def test_create_template_with_first_version(api, creator_a):
    r = _create(api, creator_a, default_variables={"language": "English"})
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["team"] == "team-a" and body["version_count"] == 1
    latest = body["latest_version"]
    assert latest["number"] == 1 and latest["locked"] is False
    assert latest["blocks"] == BLOCKS
    assert latest["variables"] == ["language", "subject", "content"]


@pytest.mark.django_db
def test_bad_blocks_are_400_with_field_messages_and_nothing_written(api, creator_a):
    r = _create(api, creator_a, blocks=[{"title": "x"}])
    assert r.status_code == 400
    assert "blocks" in r.json()["errors"]
    r = _create(api, creator_a, blocks=[])
    assert r.status_code == 400 and "blocks" in r.json()["errors"]
    r = _create(api, creator_a, name="")
    assert r.status_code == 400 and "name" in r.json()["errors"]
    assert PromptTemplate.objects.count() == 0 and PromptVersion.objects.count() == 0


@pytest.mark.django_db
def test_draft_version_edits_in_place_used_version_refuses(api, creator_a):
    template_id = _create(api, creator_a).json()["id"]
    client = api(creator_a)
    version = PromptVersion.objects.get(template_id=template_id)

    r = client.patch(
        f"/api/prompts/versions/{version.pk}",
        {"blocks": [{"title": "", "body": "Only {{content}}"}]},
        format="json",
    )
    assert r.status_code == 200, r.json()
    assert r.json()["blocks"] == [{"title": "", "body": "Only {{content}}"}]

    services.version_lock(version=version)
    r = client.patch(
        f"/api/prompts/versions/{version.pk}",
        {"blocks": [{"title": "", "body": "Changed"}]},
        format="json",
    )
    assert r.status_code == 409
    assert "create a new version" in r.json()["detail"]
    assert client.delete(f"/api/prompts/versions/{version.pk}").status_code == 409
    assert client.delete(f"/api/prompts/templates/{template_id}").status_code == 409
    assert [b.body for b in version.blocks.all()] == ["Only {{content}}"]

    # Editing a used prompt means creating the next version.
    r = client.post(
        f"/api/prompts/templates/{template_id}/versions",
        {"blocks": [{"title": "", "body": "Changed"}], "note": "shorter"},
        format="json",
    )
    assert r.status_code == 201, r.json()
    assert r.json()["number"] == 2 and r.json()["locked"] is False
    listed = client.get(f"/api/prompts/templates/{template_id}/versions").json()
    assert [v["number"] for v in listed] == [1, 2]


@pytest.mark.django_db
def test_locked_version_refuses_changes_at_the_model_level(team_a):
    template = PromptTemplateFactory(team=team_a)
    version = make_version(template, [("", "{{content}}")])
    services.version_lock(version=version)
    version.note = "sneaky"
    with pytest.raises(VersionLocked):
        version.save()
    block = version.blocks.get()
    block.body = "sneaky"
    with pytest.raises(VersionLocked):
        block.save()
    with pytest.raises(VersionLocked):
        PromptBlock(version=version, position=5, body="new").save()
    with pytest.raises(VersionLocked):
        version.delete()
    assert version.blocks.get().body == "{{content}}"


@pytest.mark.django_db
def test_render_endpoint_reports_missing_variables_by_item(api, creator_a):
    template_id = _create(api, creator_a).json()["id"]
    version = PromptVersion.objects.get(template_id=template_id)
    client = api(creator_a)
    ok = client.post(
        f"/api/prompts/versions/{version.pk}/render",
        {"items": [{"id": "m1", "betreff": "Hi", "thread_content": "Body", "language": "German"}]},
        format="json",
    )
    assert ok.status_code == 200, ok.json()
    assert ok.json() == [
        {"item_id": "m1", "system": "You summarize German emails.", "user": "Subject: Hi\n\nBody"}
    ]
    bad = client.post(
        f"/api/prompts/versions/{version.pk}/render",
        {"items": [{"id": "m1", "content": "x"}, {"id": "m2", "subject": "s", "content": "y"}]},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["missing"] == [
        {"item_id": "m1", "variable": "language"},
        {"item_id": "m1", "variable": "subject"},
        {"item_id": "m2", "variable": "language"},
    ]


@pytest.mark.django_db
def test_prompt_permissions_and_team_scoping(api, team_a, team_b, member, creator_a):
    theirs = PromptTemplateFactory(team=team_b)
    their_version = make_version(theirs, [("", "x")])
    mine_id = _create(api, creator_a).json()["id"]
    viewer = member(team_a, Role.VIEWER)
    evaluator = member(team_a, Role.EVALUATOR)

    for path in (
        f"/api/prompts/templates/{theirs.pk}",
        f"/api/prompts/versions/{their_version.pk}",
    ):
        assert api(creator_a).get(path).status_code == 404
        assert api(creator_a).patch(path, {"name": "x"}, format="json").status_code == 404
        assert api(creator_a).delete(path).status_code == 404
    assert (
        api(creator_a)
        .post(f"/api/prompts/templates/{theirs.pk}/versions", {"blocks": BLOCKS}, format="json")
        .status_code
        == 404
    )
    assert (
        api(creator_a)
        .post(f"/api/prompts/versions/{their_version.pk}/render", {}, format="json")
        .status_code
        == 404
    )

    assert [t["id"] for t in api(viewer).get("/api/prompts/templates").json()["results"]] == [
        mine_id
    ]
    assert (
        api(viewer)
        .patch(f"/api/prompts/templates/{mine_id}", {"name": "x"}, format="json")
        .status_code
        == 403
    )
    assert (
        api(viewer)
        .post(f"/api/prompts/templates/{mine_id}/versions", {"blocks": BLOCKS}, format="json")
        .status_code
        == 403
    )
    assert _create(api, viewer, name="Other").status_code == 403
    assert api(evaluator).get("/api/prompts/templates").status_code == 403
    assert PromptTemplate.objects.filter(team=team_a).count() == 1
    assert theirs.versions.count() == 1


@pytest.mark.django_db
def test_template_list_query_count_is_constant(api, team_a, member):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    viewer = member(team_a, Role.VIEWER)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            fresh = type(viewer).objects.get(pk=viewer.pk)
            assert api(fresh).get("/api/prompts/templates").status_code == 200
        return len(ctx.captured_queries)

    for _ in range(2):
        make_version(PromptTemplateFactory(team=team_a), [("System", "s"), ("", "{{content}}")])
    few = count()
    for _ in range(15):
        template = PromptTemplateFactory(team=team_a)
        make_version(template, [("", "a")])
        make_version(template, [("", "b"), ("", "{{c}}")])
    assert count() == few

    listed = api(viewer).get("/api/prompts/templates", {"page_size": 100}).json()["results"]
    latest = {t["id"]: t for t in listed}[template.pk]
    assert latest["version_count"] == 2
    assert latest["latest_version"]["number"] == 2
    assert latest["latest_version"]["variables"] == ["c"]
    assert [b["body"] for b in latest["latest_version"]["blocks"]] == ["b", "{{c}}"]


@pytest.mark.django_db
def test_placeholders_of_any_letters_and_paths_are_listed_as_variables(api, creator_a):
    blocks = [{"title": "", "body": "{{body.messages.0.content}} {{inhalt_ä}} {{email-thread}}"}]
    r = _create(api, creator_a, blocks=blocks)
    assert r.status_code == 201, r.json()
    assert r.json()["latest_version"]["variables"] == [
        "body.messages.0.content",
        "inhalt_ä",
        "email-thread",
    ]


@pytest.mark.django_db
def test_a_body_of_many_malformed_placeholders_quotes_twenty_and_counts_the_rest(api, creator_a):
    """A body of 50,000 "{{" and no "}}" (the largest body a block may have) is read in
    linear time (bench/pathological_inputs.py) and answered with a bounded message."""
    r = _create(api, creator_a, blocks=[{"title": "", "body": "{{" * 50_000}])
    assert r.status_code == 400
    [message] = r.json()["errors"]["blocks[0].body"]
    assert message.count("has no closing '}}'.") == 20
    assert message.endswith("And 49,980 more.") and len(message) < 2_000
    assert PromptTemplate.objects.count() == 0


@pytest.mark.django_db
def test_malformed_placeholders_are_refused_on_create_and_edit(api, creator_a):
    bad = [
        {"title": "System", "body": "Fine {{language}}"},
        {"title": "Task", "body": "Read {{name} and {{}} and {{ a..b }}"},
    ]
    r = _create(api, creator_a, blocks=bad)
    assert r.status_code == 400
    [message] = r.json()["errors"]["blocks[1].body"]
    assert "'{{name}' has no closing '}}'." in message
    assert "'{{}}' is empty" in message and "'{{ a..b }}' is not a variable" in message
    assert PromptTemplate.objects.count() == 0

    template_id = _create(api, creator_a).json()["id"]
    client = api(creator_a)
    r = client.post(
        f"/api/prompts/templates/{template_id}/versions", {"blocks": bad}, format="json"
    )
    assert r.status_code == 400 and "blocks[1].body" in r.json()["errors"]
    version = PromptVersion.objects.get(template_id=template_id)
    r = client.patch(f"/api/prompts/versions/{version.pk}", {"blocks": bad}, format="json")
    assert r.status_code == 400 and "blocks[1].body" in r.json()["errors"]
    assert PromptVersion.objects.count() == 1
    assert [b["body"] for b in BLOCKS] == list(version.blocks.values_list("body", flat=True))


@pytest.mark.django_db
def test_the_admin_refuses_malformed_placeholders(team_a, member):
    from django.test import Client

    manager = member(team_a, Role.MANAGER, username="mina")
    template = PromptTemplateFactory(team=team_a)
    client = Client()
    client.force_login(manager)
    form = {
        "template": template.pk,
        "note": "",
        "default_variables": "{}",
        "sample_item": "{}",
        "blocks-TOTAL_FORMS": 1,
        "blocks-INITIAL_FORMS": 0,
        "blocks-MIN_NUM_FORMS": 0,
        "blocks-MAX_NUM_FORMS": 1000,
        "blocks-0-position": 0,
        "blocks-0-title": "",
        "blocks-0-body": "Summarize {{content}",
    }
    refused = client.post("/admin/prompts/promptversion/add/", form)
    assert refused.status_code == 200
    assert "&#x27;{{content}&#x27; has no closing &#x27;}}&#x27;." in refused.content.decode()
    assert not PromptVersion.objects.filter(template=template).exists()
    form["blocks-0-body"] = "Summarize {{content}}"
    assert client.post("/admin/prompts/promptversion/add/", form).status_code == 302
    assert PromptVersion.objects.get(template=template).blocks.get().body == "Summarize {{content}}"
