"""The version pointers get their foreign-key constraints back (0003 dropped them): every
deletion path unlinks them in the statement that deletes their target, and the erasure
benchmark shows the checks within the issue's bound (docs/performance.md)."""

import django.db.models.deletion
from django.db import migrations, models


def pointer() -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        null=True,
        on_delete=django.db.models.deletion.SET_NULL,
        related_name="+",
        to="records.memoryrecord",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0008_review_claims_and_reasons"),
    ]

    operations = [
        migrations.AlterField(model_name="conflict", name="resolved_record", field=pointer()),
        migrations.AlterField(model_name="fact", name="current", field=pointer()),
        migrations.AlterField(model_name="memoryrecord", name="superseded_by", field=pointer()),
        migrations.AlterField(model_name="memoryrecord", name="supersedes", field=pointer()),
    ]
