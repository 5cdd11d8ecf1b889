"""Every ten minutes, scenarios whose writer died before all their rows were written (an
hour on) are deleted (``scenarios.services.discard_abandoned``)."""

from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="scenarios-discard-abandoned",
        defaults={"func": "scenarios.services.discard_abandoned", "schedule_type": "I",
                  "minutes": 10, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(
        name="scenarios-discard-abandoned"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("scenarios", "0008_scenario_writing"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
