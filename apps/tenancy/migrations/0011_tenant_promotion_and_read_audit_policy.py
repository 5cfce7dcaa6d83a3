"""The tenant's promotion policy (a person may be required to confirm a record) and read-audit
policy (which fact reads, fact checks and context searches are audited). Existing tenants get
the defaults: promotions as before, and reads returning a restricted memory audited."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0010_view_restricted"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="audit_reads",
            field=models.CharField(
                choices=[
                    ("off", "none"),
                    ("restricted", "those that return a restricted memory"),
                    ("all", "every read"),
                ],
                default="restricted",
                help_text="Which fact reads, fact checks and context searches are audited (who, the filters, the ids returned; never content). Decision searches are always audited.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="tenant",
            name="promotion_requires_person",
            field=models.BooleanField(
                default=False,
                help_text="Only a person (a reviewer in the console) may confirm a record: an agent credential's approval is refused, and a second observation opens a promotion request instead of confirming at once.",
            ),
        ),
    ]
