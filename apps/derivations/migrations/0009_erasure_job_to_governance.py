"""Erasure jobs now live in governance (apps/governance/migrations/0001_initial takes them
over, table and all): derivations forgets them without touching the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("derivations", "0008_outbox_available_at"),
        ("governance", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ErasureJob")],
        ),
    ]
