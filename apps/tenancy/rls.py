"""Row-level security for tenant tables, as one migration operation.

A migration that creates a tenant table opts in with one line::

    EnableTenantRLS("memoryrecord")

which enables and forces row-level security and adds the ``tenant_isolation`` policy.
``tests/tenancy/test_catalog.py`` fails if any table with a ``tenant_id`` column lacks it.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState

from .context import TENANT_SETTING

CURRENT_TENANT_SQL = f"NULLIF(current_setting('{TENANT_SETTING}', true), '')::uuid"


class EnableTenantRLS(migrations.operations.base.Operation):
    """ENABLE + FORCE row-level security on a model's table with the tenant policy.

    ``extra_select`` optionally adds a second, SELECT-only permissive policy (for example a
    credential visible to whoever presents its token hash). Writes stay bound to the tenant.
    """

    reduces_to_sql = True
    reversible = True

    def __init__(self, model_name: str, extra_select: str | None = None) -> None:
        self.model_name = model_name
        self.extra_select = extra_select

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """Row-level security changes no model state."""

    def _table(self, app_label: str, state: ProjectState) -> str:
        model = state.apps.get_model(app_label, self.model_name)
        return str(model._meta.db_table)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        table = schema_editor.quote_name(self._table(app_label, to_state))
        schema_editor.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        schema_editor.execute(
            f"CREATE POLICY tenant_isolation ON {table} FOR ALL "
            f"USING (tenant_id = {CURRENT_TENANT_SQL}) "
            f"WITH CHECK (tenant_id = {CURRENT_TENANT_SQL})"
        )
        if self.extra_select:
            schema_editor.execute(
                f"CREATE POLICY extra_select ON {table} FOR SELECT USING ({self.extra_select})"
            )

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        table = schema_editor.quote_name(self._table(app_label, from_state))
        if self.extra_select:
            schema_editor.execute(f"DROP POLICY IF EXISTS extra_select ON {table}")
        schema_editor.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        schema_editor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        schema_editor.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")

    def describe(self) -> str:
        return f"Enable tenant row-level security on {self.model_name}"

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {"model_name": self.model_name}
        if self.extra_select:
            kwargs["extra_select"] = self.extra_select
        return (self.__class__.__qualname__, [], kwargs)

    @property
    def migration_name_fragment(self) -> str:
        return f"rls_{self.model_name.lower()}"
