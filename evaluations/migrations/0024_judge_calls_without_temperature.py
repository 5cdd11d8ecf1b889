"""A judge's call that sent no temperature is unique too (NULLs are distinct in
``one_judgment_per_judge_call``): duplicates a judge file run again may have left are
removed first, the newest kept."""

from django.db import migrations, models
from django.db.models import Count, Max


def keep_the_newest(apps, schema_editor):
    Judgment = apps.get_model("evaluations", "Judgment")
    calls = (
        Judgment.objects.filter(judge__isnull=False, temperature__isnull=True)
        .values("judge", "task", "swapped", "repetition")
        .annotate(n=Count("id"), newest=Max("id"))
        .filter(n__gt=1)
    )
    for call in calls.iterator():
        Judgment.objects.filter(
            judge=call["judge"],
            task=call["task"],
            swapped=call["swapped"],
            repetition=call["repetition"],
            temperature__isnull=True,
            id__lt=call["newest"],
        ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0023_fenced_default_judge_prompts"),
    ]

    operations = [
        migrations.RunPython(keep_the_newest, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="judgment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("judge__isnull", False), ("temperature__isnull", True)),
                fields=("judge", "task", "swapped", "repetition"),
                name="one_judgment_per_judge_call_without_temperature",
            ),
        ),
    ]
