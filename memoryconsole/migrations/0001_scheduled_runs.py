from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="ScheduledRun",
            fields=[
                (
                    "task",
                    models.CharField(max_length=200, primary_key=True, serialize=False),
                ),
                ("expected_since", models.DateTimeField()),
                ("succeeded_at", models.DateTimeField(blank=True, null=True)),
            ],
        ),
    ]
