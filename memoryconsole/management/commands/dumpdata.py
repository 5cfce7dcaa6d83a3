"""``memoryconsole dumpdata``: refused, pointing to ``backup`` (see ``..refused``)."""

from memoryconsole.management.refused import RefusedCommand


class Command(RefusedCommand):
    help = "Refused here: use `memoryconsole backup PATH` and `memoryconsole restore PATH`."
    refusal = (
        "dumpdata cannot see every tenant's rows (row-level security) and would print an "
        "incomplete copy: use `memoryconsole backup PATH` for the whole instance"
    )
