from django.db import migrations, models

import webapp.campaigns.models


class Migration(migrations.Migration):
    """Runs from before keep an empty suffix: their files were named by the id alone, and
    their cleanups must look for those names. New runs draw their own (new_tag_suffix)."""

    dependencies = [
        ("campaigns", "0018_run_cleanup"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="tag_suffix",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.AlterField(
            model_name="run",
            name="tag_suffix",
            field=models.CharField(
                blank=True, default=webapp.campaigns.models.new_tag_suffix, max_length=16
            ),
        ),
    ]
