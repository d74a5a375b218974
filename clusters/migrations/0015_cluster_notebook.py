"""A cluster may ask for JupyterLab on its head (``notebook``); existing ones did not."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0014_job_log_tail_unread"),
    ]

    operations = [
        migrations.AddField(
            model_name="clusterrequest",
            name="notebook",
            field=models.BooleanField(
                default=False,
                help_text="The head runs JupyterLab, reached through the product's proxy by the owner and the tenant's admins (docs/notebooks.md).",
            ),
        ),
    ]
