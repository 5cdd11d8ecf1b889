from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def expire_extra_reservations(apps, schema_editor):
    """Reservations that concurrent requests made beyond an evaluator's one per scenario:
    the oldest stays; the others give their places back."""
    Assignment = apps.get_model("evaluations", "Assignment")
    Task = apps.get_model("scenarios", "Task")
    kept: set[tuple[int, int]] = set()
    reserved = Assignment.objects.filter(status="reserved").order_by("created_at", "pk")
    for pk, scenario_id, evaluator_id, task_id in reserved.values_list(
        "pk", "scenario_id", "evaluator_id", "task_id"
    ):
        if (scenario_id, evaluator_id) in kept:
            Assignment.objects.filter(pk=pk).update(status="expired")
            Task.objects.filter(pk=task_id, taken__gt=0).update(taken=F("taken") - 1)
        kept.add((scenario_id, evaluator_id))


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0010_judge_batch_judge"),
        ("scenarios", "0003_type_from_the_registry"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(expire_extra_reservations, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "reserved")),
                fields=("scenario", "evaluator"),
                name="one_reservation_per_evaluator",
            ),
        ),
    ]
