from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="generation-drive-batches",
        defaults={"func": "generation.tasks.drive_batches", "schedule_type": "I", "minutes": 1,
                  "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="generation-drive-batches").delete()


class Migration(migrations.Migration):
    dependencies = [("generation", "0004_batch_mode"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
