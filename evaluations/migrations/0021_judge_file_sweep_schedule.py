"""The judge-file batches' sweep, every minute (``evaluations.judgefiles.services.sweep``):
reads of a batch no longer write, so its window's expiry and the steps lost with a worker
are the sweep's."""

from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="evaluations-judge-file-sweep",
        defaults={"func": "evaluations.judgefiles.services.sweep", "schedule_type": "I",
                  "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(
        name="evaluations-judge-file-sweep"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("evaluations", "0020_team_trust_gates"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
