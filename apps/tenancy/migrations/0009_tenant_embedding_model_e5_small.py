"""New tenants embed with ``e5-small``, the semantic multilingual default.

Existing tenants keep the model they have (their vectors were made with it); they move with
``memoryconsole reembed --tenant SLUG --model e5-small``, searching by their old vectors
until the new ones are complete.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0008_review_lead")]

    operations = [
        migrations.AlterField(
            model_name="tenant",
            name="embedding_model",
            field=models.CharField(
                default="e5-small",
                help_text="e5-small (semantic, multilingual, built in), hashing-<dim> (lexical, "
                "built in), st-<model> (the [ml] extra) or client-<dim> (agents send vectors). "
                "Changing it needs `memoryconsole reembed`.",
                max_length=100,
            ),
        ),
    ]
