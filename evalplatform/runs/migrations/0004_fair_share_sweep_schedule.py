from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="runs-fair-share-sweep",
        defaults={"func": "evalplatform.runs.fairshare.sweep", "schedule_type": "I",
                  "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="runs-fair-share-sweep").delete()


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_team_task"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
