"""The outbox now lives in work (apps/work/migrations/0001_initial takes it over, table and
all): derivations forgets it without touching the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("derivations", "0009_erasure_job_to_governance"),
        ("work", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="OutboxMessage")],
        ),
    ]
