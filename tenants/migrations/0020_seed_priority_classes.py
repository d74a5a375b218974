"""The platform's starting priority classes (docs/preemption.md); admins change them.

``normal`` is the default and behaves as requests did before classes: value 0, no
protection window, the platform's reclaim grace as notice. Only ``urgent`` may preempt.
"""

from django.db import migrations

CLASSES = [
    ("low", -100, "Runs when nothing else wants the GPUs; preempted first.", False, 0, False),
    ("normal", 0, "The default.", False, 0, True),
    (
        "high",
        100,
        "Goes before normal work; protected for its first 30 minutes.",
        False,
        1800,
        False,
    ),
    ("urgent", 1000, "May preempt lower classes, after notice.", True, 1800, False),
]


def seed(apps, schema_editor):
    PriorityClass = apps.get_model("tenants", "PriorityClass")
    for name, value, description, may_preempt, min_run, default in CLASSES:
        PriorityClass.objects.get_or_create(
            name=name,
            defaults={
                "value": value,
                "description": description,
                "may_preempt": may_preempt,
                "min_run_seconds": min_run,
                "is_default": default,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("tenants", "0019_priority_classes")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
