"""The prompt pages through Django's test client: the list, a template's page, the editor
(create a template, a new version, edit a draft, a locked version refused), its live
preview, the block buttons without JavaScript; roles, other teams, CSRF and escaping."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evalplatform.accounts.roles import Role
from evalplatform.prompts import services
from evalplatform.prompts.models import PromptBlock, PromptTemplate, PromptVersion
from tests.factories import PromptTemplateFactory, make_version

XSS = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def browser(user):
    client = Client()
    client.force_login(user)
    return client


def text(response) -> str:
    """The page's text with tags removed and entities read (what a reader sees)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())).split())


def editor_form(blocks, *, sample=None, defaults=None, note="", **extra):
    return {
        "block_title": [title for title, _ in blocks],
        "block_body": [body for _, body in blocks],
        "sample_item": json.dumps(sample or {}) if not isinstance(sample, str) else sample,
        "default_variables": json.dumps(defaults or {})
        if not isinstance(defaults, str)
        else defaults,
        "note": note,
        **extra,
    }


def state():
    """Every row the editor could write."""
    return (
        list(PromptTemplate.objects.values_list("pk", "name", "updated_at")),
        list(PromptVersion.objects.values_list("pk", "number", "note", "sample_item")),
        list(PromptBlock.objects.values_list("pk", "version_id", "position", "title", "body")),
    )


@pytest.fixture
def creator(team_a, member):
    return member(team_a, Role.CREATOR, username="writer")


@pytest.fixture
def summary(team_a, creator):
    """A template of team A with a used (locked) version 1 and a draft version 2."""
    template = PromptTemplateFactory(team=team_a, name="Summary", description="Short ones")
    v1 = make_version(
        template,
        [("System", "You write in {{language}}."), ("", "Summarize: {{content}}")],
        note="first",
        default_variables={"language": "English"},
        sample_item={"content": "Rivers flow."},
        created_by=creator,
    )
    services.version_lock(version=v1)
    v2 = make_version(
        template,
        [("System", "You write tersely in {{language}}."), ("Text", "Summarize: {{content}}")],
        note="terser",
        default_variables={"language": "English"},
        sample_item={"content": "Rivers flow."},
        created_by=creator,
    )
    return template, v1, v2


# --- reading ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_list_shows_my_teams_templates_with_search(team_a, team_b, creator, summary):
    PromptTemplateFactory(team=team_b, name="Bravo secret")
    other = PromptTemplateFactory(team=team_a, name="Classifier")
    make_version(other, [("", "Label {{content}}")])
    client = browser(creator)

    page = client.get("/prompts/")
    assert page.status_code == 200
    rows = text(page)
    assert "Summary" in rows and "Classifier" in rows and "Team A" in rows
    assert "Bravo secret" not in rows
    assert "v2" in rows and "terser" in rows  # the latest version and its note
    assert 'href="/prompts/new"' in page.content.decode()

    found = text(client.get("/prompts/", {"q": "short"}))  # the description matches too
    assert "Summary" in found and "Classifier" not in found
    assert "No template matches" in text(client.get("/prompts/", {"q": "nothing like it"}))


@pytest.mark.django_db
def test_a_templates_page_shows_its_versions_the_latest_in_full(creator, summary):
    template, v1, v2 = summary
    page = browser(creator).get(f"/prompts/{template.pk}")
    assert page.status_code == 200
    body = page.content.decode()
    shown = text(page)
    latest = shown.split("Earlier versions")[0]
    assert "Version 2" in latest and "terser" in latest and "draft" in latest
    assert "You write tersely in {{language}}." in latest and "system prompt" in latest
    assert "{{language}}, {{content}}" in latest  # the variables in order of first use
    assert "writer" in latest  # created by
    assert f'href="/prompts/versions/{v2.pk}/edit"' in body  # a draft can be edited
    earlier = shown.split("Earlier versions")[1]
    assert "Version 1" in earlier and "locked" in earlier and "first" in earlier
    assert f'href="/prompts/versions/{v1.pk}/edit"' not in body  # a used one cannot
    assert f'href="/prompts/{template.pk}/versions/new?from=1"' in body


# --- writing ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_create_a_template_with_its_first_version(team_a, creator):
    client = browser(creator)
    assert client.get("/prompts/new").status_code == 200
    form = editor_form(
        [("System", "You are brief."), ("Email", "Subject: {{subject}}"), ("", "{{content}}")],
        defaults={"subject": "(none)"},
        sample={"content": "Hi"},
        note="start",
        team="team-a",
        name="Mail summary",
        description="For emails",
    )
    response = client.post("/prompts/new", form)
    template = PromptTemplate.objects.get(name="Mail summary")
    assert response.status_code == 302 and response["Location"] == f"/prompts/{template.pk}"
    assert template.team == team_a and template.description == "For emails"
    version = template.versions.get()
    assert (version.number, version.note, version.created_by) == (1, "start", creator)
    assert version.default_variables == {"subject": "(none)"}
    assert version.sample_item == {"content": "Hi"}
    assert [(b.title, b.body) for b in version.blocks.all()] == [
        ("System", "You are brief."),
        ("Email", "Subject: {{subject}}"),
        ("", "{{content}}"),
    ]


@pytest.mark.django_db
def test_bad_input_is_shown_by_its_fields_and_nothing_is_written(team_a, creator, summary):
    client = browser(creator)
    before = state()
    form = editor_form(
        [("System", "Fine"), ("", "Broken {{}} here"), ("x" * 201, "")],
        sample="{not json",
        note="n" * 301,
        team="team-a",
        name="Summary",  # the team has one of that name
    )
    response = client.post("/prompts/new", form)
    assert response.status_code == 400
    assert state() == before
    page = response.content.decode()
    shown = text(response)
    assert "Nothing was saved" in shown
    assert "Not valid JSON: Expecting property name" in shown  # the sample item
    # The services' messages of the other fields come at once, each by its field.
    editor = page.split("<template")[0]  # the blocks, not the new block's pattern
    blocks = re.findall(r"<li class=\"card block\".*?</li>", editor, re.S)
    assert len(blocks) == 3
    assert "is empty: name a variable" in html.unescape(blocks[1])
    assert "at most 200 characters" in blocks[2] and "non-empty text" in blocks[2]
    assert "Fine" in blocks[0] and "errorlist" not in blocks[0]
    assert "{not json" in shown  # what was typed comes back

    # Once the JSON parses, the template's own checks speak: the name and the note.
    response = client.post("/prompts/new", form | {"sample_item": "{}"})
    assert response.status_code == 400 and state() == before
    response = client.post(
        "/prompts/new",
        editor_form([("", "Fine {{content}}")], note="n" * 301, team="team-a", name="Other"),
    )
    assert response.status_code == 400 and state() == before
    assert "at most 300 characters" in text(response)
    response = client.post(
        "/prompts/new", editor_form([("", "Fine")], team="team-a", name="Summary")
    )
    assert response.status_code == 400 and state() == before
    assert "already exists" in text(response)


@pytest.mark.django_db
def test_a_new_version_starts_from_the_latest_or_a_chosen_one(creator, summary):
    template, _, v2 = summary
    client = browser(creator)
    page = client.get(f"/prompts/{template.pk}/versions/new")
    assert page.status_code == 200 and "You write tersely in" in text(page)
    page = client.get(f"/prompts/{template.pk}/versions/new", {"from": "1"})
    assert "You write in" in text(page) and "tersely" not in text(page)

    response = client.post(
        f"/prompts/{template.pk}/versions/new",
        editor_form([("System", "New {{language}}"), ("", "{{content}}")], note="third"),
    )
    assert response.status_code == 302 and response["Location"] == f"/prompts/{template.pk}"
    v3 = template.versions.get(number=3)
    assert v3.note == "third" and [b.body for b in v3.blocks.all()] == [
        "New {{language}}",
        "{{content}}",
    ]
    # The others are as they were.
    assert v2.blocks.all()[0].body == "You write tersely in {{language}}."


@pytest.mark.django_db
def test_a_draft_is_edited_in_place(creator, summary):
    template, _, v2 = summary
    client = browser(creator)
    page = client.get(f"/prompts/versions/{v2.pk}/edit")
    assert page.status_code == 200 and "You write tersely in" in text(page)
    response = client.post(
        f"/prompts/versions/{v2.pk}/edit",
        editor_form([("", "Only {{content}}")], sample={"content": "x"}, note="edited"),
    )
    assert response.status_code == 302
    v2.refresh_from_db()
    assert (v2.number, v2.note, v2.sample_item) == (2, "edited", {"content": "x"})
    assert [(b.title, b.body) for b in v2.blocks.all()] == [("", "Only {{content}}")]
    assert template.versions.count() == 2


@pytest.mark.django_db
def test_a_used_version_refuses_edits_and_offers_a_new_version(creator, summary):
    template, v1, _ = summary
    client = browser(creator)
    response = client.get(f"/prompts/versions/{v1.pk}/edit")
    assert response.status_code == 302
    assert response["Location"] == f"/prompts/{template.pk}/versions/new?from=1"
    followed = text(client.get(response["Location"]))
    assert "Version 1 is used by a job" in followed and "You write in" in followed

    before = state()
    form = editor_form([("", "Changed {{content}}")], note="changed")
    response = client.post(f"/prompts/versions/{v1.pk}/edit", form)
    assert response.status_code == 409 and state() == before
    shown = text(response)
    assert "create a new version" in shown and "Changed {{content}}" in shown
    assert f'formaction="/prompts/{template.pk}/versions/new"' in response.content.decode()
    # "Save as a new version" posts the same fields there.
    assert client.post(f"/prompts/{template.pk}/versions/new", form).status_code == 302
    assert [b.body for b in template.versions.get(number=3).blocks.all()] == ["Changed {{content}}"]


@pytest.mark.django_db
def test_the_block_buttons_work_without_javascript_and_save_nothing(creator, summary):
    _, _, v2 = summary
    client = browser(creator)
    url = f"/prompts/versions/{v2.pk}/edit"
    blocks = [("A", "first"), ("B", "second"), ("C", "third")]
    before = state()

    def titles(response):
        assert response.status_code == 200
        editor = response.content.decode().split("<template")[0]
        return re.findall(r'name="block_title" value="([^"]*)"', editor)

    assert titles(client.post(url, editor_form(blocks, op="up:1"))) == ["B", "A", "C"]
    assert titles(client.post(url, editor_form(blocks, op="down:1"))) == ["A", "C", "B"]
    assert titles(client.post(url, editor_form(blocks, op="remove:0"))) == ["B", "C"]
    assert titles(client.post(url, editor_form(blocks, op="add"))) == ["A", "B", "C", ""]
    assert titles(client.post(url, editor_form(blocks, op="up:0"))) == ["A", "B", "C"]
    assert titles(client.post(url, editor_form(blocks, op="down:99"))) == ["A", "B", "C"]
    assert titles(client.post("/prompts/new", editor_form(blocks, op="up:2"))) == ["A", "C", "B"]
    assert state() == before


# --- the live preview ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_preview_renders_the_messages_and_lists_the_variables(creator):
    client = browser(creator)
    before = state()
    response = client.post(
        "/prompts/preview",
        editor_form(
            [
                ("System", "Answer in {{language}}."),
                ("Email", "Subject: {{betreff}}"),
                ("", "{{body.messages.0.content}}"),
            ],
            sample={"subject": "Hello", "body": {"messages": [{"content": "First"}]}},
            defaults={"language": "German"},
        ),
    )
    assert response.status_code == 200 and state() == before
    shown = text(response)
    assert "{{language}}, {{betreff}}, {{body.messages.0.content}}" in shown
    pres = [
        html.unescape(p)
        for p in re.findall(r'<pre class="text">(.*?)</pre>', response.content.decode(), re.S)
    ]
    assert pres == ["Answer in German.", "Subject: Hello\n\nFirst"]  # system, then user
    assert "To fix" not in shown and "lack" not in shown


@pytest.mark.django_db
def test_preview_reports_malformed_placeholders_missing_variables_and_bad_json(creator):
    client = browser(creator)

    def preview(**fields):
        response = client.post("/prompts/preview", editor_form(**fields))
        assert response.status_code == 200
        assert "<pre" not in response.content.decode()  # nothing rendered
        return text(response)

    shown = preview(blocks=[("System", "Hi"), ("Email", "Dear {{name}, {{content}}")])
    assert "Block 2 (Email), body: '{{name}' has no closing '}}'" in shown
    assert "{{content}}" in shown  # the variables of what reads well are still listed

    shown = preview(blocks=[("", "{{content}} for {{audience}}")], sample={"content": "x"})
    assert "lack {{audience}}" in shown and "To fix" not in shown

    shown = preview(blocks=[("", "{{content}}")], sample='{"content": ', defaults="[1, 2]")
    assert "Sample item: Not valid JSON: Expecting value (line 1, column 13)." in shown
    assert "Default variables: Must be an object of variable names to values." in shown

    shown = preview(blocks=[("", "   ")])
    assert "Block 1, body: The body must be non-empty text." in shown

    # The new editor's blank form is quiet: a hint, nothing "to fix".
    shown = preview(blocks=[("System", ""), ("", "")])
    assert "To fix" not in shown and "Write a block to see the messages" in shown


@pytest.mark.django_db
def test_preview_and_editor_need_csrf(creator, summary):
    client = Client(enforce_csrf_checks=True)
    client.force_login(creator)
    before = state()
    form = editor_form([("", "{{content}}")], team="team-a", name="Forged")
    assert client.post("/prompts/preview", form).status_code == 403
    assert client.post("/prompts/new", form).status_code == 403
    assert state() == before


# --- who may ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_viewers_read_without_forms(team_a, member, summary):
    template, _, v2 = summary
    client = browser(member(team_a, Role.VIEWER))
    before = state()
    listing = client.get("/prompts/").content.decode()
    assert "Summary" in listing and "/prompts/new" not in listing
    page = client.get(f"/prompts/{template.pk}")
    assert page.status_code == 200
    body = page.content.decode()
    assert "/versions/new" not in body and "/edit" not in body
    assert body.count("<form") == 1  # sign out only
    form = editor_form([("", "{{content}}")], team="team-a", name="By a viewer")
    for url in ("/prompts/new", f"/prompts/{template.pk}/versions/new"):
        assert client.get(url).status_code == 403
        assert client.post(url, form).status_code == 403
    assert client.get(f"/prompts/versions/{v2.pk}/edit").status_code == 403
    assert client.post(f"/prompts/versions/{v2.pk}/edit", form).status_code == 403
    assert client.post("/prompts/preview", form).status_code == 403
    assert state() == before


@pytest.mark.django_db
def test_evaluators_get_no_link_and_no_page(team_a, member, summary):
    template, _, v2 = summary
    client = browser(member(team_a, Role.EVALUATOR))
    assert 'href="/prompts/"' not in client.get("/evaluate/").content.decode()
    assert client.get("/prompts/").status_code == 403
    assert client.get("/prompts/new").status_code == 403
    assert client.get(f"/prompts/{template.pk}").status_code == 404
    assert client.get(f"/prompts/{template.pk}/versions/new").status_code == 404
    assert client.get(f"/prompts/versions/{v2.pk}/edit").status_code == 404
    assert client.post("/prompts/preview", editor_form([("", "x")])).status_code == 403


@pytest.mark.django_db
def test_another_teams_template_is_a_404(team_b, member, summary):
    template, _, v2 = summary
    client = browser(member(team_b, Role.ADMIN))
    before = state()
    form = editor_form([("", "{{content}}")])
    for url in (
        f"/prompts/{template.pk}",
        f"/prompts/{template.pk}/versions/new",
        f"/prompts/versions/{v2.pk}/edit",
    ):
        assert client.get(url).status_code == 404, url
        assert client.post(url, form).status_code in (404, 405), url
    assert "Summary" not in text(client.get("/prompts/"))
    # Creating in a team one cannot edit in: the choice is refused, nothing is written.
    response = client.post("/prompts/new", form | {"team": "team-a", "name": "Intruder"})
    assert response.status_code == 400 and "Choose one of your teams" in text(response)
    assert state() == before


# --- escaping -----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_user_text_is_escaped_everywhere(team_a, creator):
    client = browser(creator)
    response = client.post(
        "/prompts/new",
        editor_form(
            [(XSS, f"{XSS} {{{{content}}}}")],
            sample={"content": XSS},
            note=XSS[:60],
            team="team-a",
            name="<b>bold</b>",
            description=XSS,
        ),
    )
    assert response.status_code == 302
    template = PromptTemplate.objects.get()
    version = template.versions.get()
    pages = [
        client.get("/prompts/"),
        client.get(f"/prompts/{template.pk}"),
        client.get(f"/prompts/versions/{version.pk}/edit"),
        client.post(
            "/prompts/preview",
            editor_form([("System", XSS), ("", "{{content}}")], sample={"content": XSS}),
        ),
        client.post("/prompts/preview", editor_form([(XSS, f"{XSS} {{{{")])),
    ]
    for page in pages:
        body = page.content.decode()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
        assert "<script>alert" not in body and "<img src=x" not in body
        assert "<b>bold" not in body
        scripts = re.findall(r"<script[^>]*>", body)
        assert all("src=" in tag for tag in scripts)  # only the project's own files


@pytest.mark.django_db
def test_the_list_and_a_templates_page_take_as_many_queries_for_many_rows(team_a, creator):
    client = browser(creator)
    template = PromptTemplateFactory(team=team_a, name="Grown")

    def queries(url):
        client.get(url)  # the session and the grants, loaded once
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    def grow():
        for _ in range(3):
            make_version(template, [("System", "S {{a}}"), ("", "U {{b}}")])
            PromptTemplateFactory(team=team_a)

    grow()
    few = queries("/prompts/"), queries(f"/prompts/{template.pk}")
    grow()
    assert (queries("/prompts/"), queries(f"/prompts/{template.pk}")) == few
