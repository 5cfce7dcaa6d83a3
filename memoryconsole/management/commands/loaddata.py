"""``memoryconsole loaddata``: refused, pointing to ``restore`` (see ``..refused``)."""

from memoryconsole.management.refused import RefusedCommand


class Command(RefusedCommand):
    help = "Refused here: use `memoryconsole backup PATH` and `memoryconsole restore PATH`."
    refusal = (
        "loaddata cannot see every tenant's rows (row-level security) and would load "
        "nothing: use `memoryconsole restore PATH` for the whole instance"
    )
