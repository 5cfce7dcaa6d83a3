"""Every fact has its scope now (0006): required, and part of the fact's identity."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("records", "0006_facts_split_by_scope")]

    operations = [
        migrations.AlterField(
            model_name="fact",
            name="scope",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="facts",
                to="records.scope",
            ),
        ),
        migrations.AddConstraint(
            model_name="fact",
            constraint=models.UniqueConstraint(
                fields=("tenant", "subject", "key", "scope"), name="fact_identity"
            ),
        ),
    ]
