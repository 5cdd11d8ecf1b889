from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="evaluations-expire-reservations",
        defaults={"func": "evaluations.tasks.expire_reservations", "schedule_type": "I",
                  "minutes": 5, "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(
        name="evaluations-expire-reservations"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("evaluations", "0002_invitations"), ("django_q", "0018_task_success_index")]
    operations = [migrations.RunPython(schedule, unschedule)]
