from django.db import migrations, models

import webapp.campaigns.models


class Migration(migrations.Migration):
    """Runs from before get an empty suffix (the database's default): their files were named
    by the id alone, and their cleanups must look for those names. New runs draw their own
    (new_tag_suffix)."""

    dependencies = [
        ("campaigns", "0018_run_cleanup"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="tag_suffix",
            field=models.CharField(
                blank=True,
                db_default="",
                default=webapp.campaigns.models.new_tag_suffix,
                max_length=16,
            ),
        ),
    ]
