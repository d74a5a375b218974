"""A job's ``log_tail`` is NULL until the driver's output was read: an empty string
means the read happened and found nothing, so a failed read can be told apart and
tried again. Jobs that exist already were read (or never will be): they keep ''."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("clusters", "0013_provision_requested")]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="log_tail",
            field=models.TextField(blank=True, null=True),
        ),
    ]
