"""Review's claims and canned reasons now live in review (apps/review/migrations/0001_initial
takes them over, tables and all): records forgets them without touching the database."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0014_review_claims_on_conflicts"),
        ("review", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ReviewClaim"),
                migrations.DeleteModel(name="ReviewReason"),
            ],
        ),
    ]
