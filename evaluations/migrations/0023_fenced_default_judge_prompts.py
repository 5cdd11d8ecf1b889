"""Teams' default judge prompts that no one edited get a new version that fences each
response and tells the judge it is data (issue 35): the ``Default judge: <type>`` template
whose latest version has exactly the blocks the platform used to make gets the blocks it
makes now (``scenarios.types``). A template a team changed is left as it is. Judges that
name a version keep it; those on the default take the new one at their next run."""

from django.db import migrations

OLD_PREAMBLE = (
    "You are an impartial judge of AI-written responses. Judge quality alone: ignore the "
    "order in which responses appear, their length and their style of formatting."
)
# The variables the default prompts used before their fenced forms.
UNFENCED = {
    "{{response_a_fenced}}": "{{response_a}}",
    "{{response_b_fenced}}": "{{response_b}}",
    "{{responses_fenced}}": "{{responses}}",
    "{{response_fenced}}": "{{response}}",
}


def _old(blocks):
    from scenarios.types.base import JUDGE_PREAMBLE

    old = []
    for block in blocks:
        body = block["body"].replace(JUDGE_PREAMBLE, OLD_PREAMBLE)
        for new, was in UNFENCED.items():
            body = body.replace(new, was)
        old.append((block["title"], body))
    return old


def fence(apps, schema_editor):
    from scenarios.types import registry

    PromptTemplate = apps.get_model("prompts", "PromptTemplate")
    PromptVersion = apps.get_model("prompts", "PromptVersion")
    PromptBlock = apps.get_model("prompts", "PromptBlock")
    for kind in registry.every():
        blocks = [dict(block) for block in kind.judge_prompt]
        old = _old(blocks)
        for template in PromptTemplate.objects.filter(name=f"Default judge: {kind.value}"):
            latest = PromptVersion.objects.filter(template=template).order_by("-number").first()
            if latest is None:
                continue
            have = list(
                PromptBlock.objects.filter(version=latest)
                .order_by("position")
                .values_list("title", "body")
            )
            if have != old:
                continue  # edited by the team: theirs to change
            version = PromptVersion.objects.create(
                template=template,
                number=latest.number + 1,
                note="Responses fenced, and marked as data to judge (issue 35).",
                default_variables=latest.default_variables,
                sample_item=latest.sample_item,
            )
            PromptBlock.objects.bulk_create(
                PromptBlock(version=version, position=i, title=b["title"], body=b["body"])
                for i, b in enumerate(blocks)
            )


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0022_chunked_writes"),
        ("prompts", "0001_initial"),
        ("scenarios", "0010_variant_addresses_judge"),
    ]
    operations = [migrations.RunPython(fence, migrations.RunPython.noop)]
