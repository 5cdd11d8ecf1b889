from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="live-prune-events",
        defaults={"func": "evalplatform.live.transport.prune", "schedule_type": "I",
                  "minutes": 1, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="live-prune-events").delete()


class Migration(migrations.Migration):
    dependencies = [("live", "0001_initial"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
