"""``memoryconsole backup`` and ``restore`` on an embedded server of their own, as an operator
runs them: what was erased, deleted, redacted or discarded after a backup stays gone after
restoring it. One test tells the whole story (each step starts the server's processes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.processes import memoryconsole_command

FOREIGN_ENV = ("DATABASE_URL", "DATABASE_APP_URL", "CELERY_BROKER_URL", "MEMORYCONSOLE_DB_ROLE")

# After the backup: erase user:8812, delete org:acme's fact, redact user:9120's email, close
# the demo run. Each commits on its own, as they would from the API.
REMOVE = """
from apps.core.actors import Actor
from apps.derivations.services import record_redact
from apps.governance.erasure import erasure_run
from apps.records.models import MemoryRecord
from apps.records.purge import record_delete
from apps.state.models import Run
from apps.state.services import run_close
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

tenant, actor = Tenant.objects.get(slug="demo"), Actor.system("test")
with tenant_scope(tenant.pk):
    erasure_run(tenant=tenant, actor=actor, selector="subject", value="user:8812", reason="gdpr")
with tenant_scope(tenant.pk):
    record_delete(record=MemoryRecord.objects.get(subject="org:acme"), actor=actor, reason="x")
with tenant_scope(tenant.pk):
    email = MemoryRecord.objects.get(subject="user:9120")
    record_redact(record=email, actor=actor, fields=["value"], reason="pii")
with tenant_scope(tenant.pk):
    run_close(run=Run.objects.get(), actor=actor)
"""

# What the demo tenant holds about the removed data, as JSON on the last line.
STATE = """
import json
from apps.audit.models import DeletionReceipt
from apps.derivations.models import Embedding
from apps.records.models import MemoryRecord
from apps.state.models import Run
from apps.tenancy.context import tenant_scope
from apps.tenancy.models import Tenant

tenant = Tenant.objects.get(slug="demo")
with tenant_scope(tenant.pk):
    print(json.dumps({
        "user:8812": MemoryRecord.objects.filter(subject="user:8812").count(),
        "org:acme": MemoryRecord.objects.filter(subject="org:acme").count(),
        "email": MemoryRecord.objects.get(subject="user:9120").value,
        "embeddings": Embedding.objects.count(),
        "runs_open": Run.objects.filter(state="open").count(),
        "receipts": [str(r.pk) for r in DeletionReceipt.objects.filter(kind="erasure")],
    }))
"""


def _run(home: Path, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env["MEMORYCONSOLE_HOME"] = str(home)
    return subprocess.run(
        [*memoryconsole_command(), *argv],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _state(home: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(
        _ok(_run(home, "shell", stdin=STATE)).strip().splitlines()[-1]
    )
    return state


# Its own fresh embedded server, a backup, removals and a restore take minutes: it runs in
# .ci/run's fault step (a restore is recovery from losing the database), not the suite.
@pytest.mark.slow
@pytest.mark.faults
def test_it_restores_a_backup_without_bringing_back_what_was_removed_since(
    tmp_path: Path,
) -> None:
    home, backup = tmp_path / "home", tmp_path / "backup"
    _ok(_run(home, "migrate", "-v", "0"))
    _ok(_run(home, "load-demo"))

    taken = _run(home, "backup", str(backup))
    assert "backed up 1 tenant(s)" in _ok(taken)
    assert "dumping table" in taken.stderr  # progress, on stderr
    manifest = json.loads((backup / "manifest.json").read_text())
    assert manifest["tenants"]["demo"]["records_memoryrecord"] == 6
    assert manifest["files"]["database.dump"]["bytes"] == (backup / "database.dump").stat().st_size
    # A backup never overwrites one.
    again = _run(home, "backup", str(backup))
    assert again.returncode != 0
    assert "not an empty directory" in again.stderr

    removed = json.loads(_ok(_run(home, "shell", stdin=REMOVE + STATE)).strip().splitlines()[-1])
    assert removed["user:8812"] == removed["org:acme"] == removed["runs_open"] == 0

    # A database in use is replaced only when told (the forced restore below finds the
    # removals still to re-apply: the refusal changed nothing).
    refused = _run(home, "restore", str(backup))
    assert refused.returncode != 0
    assert "--force" in refused.stderr

    out = _ok(_run(home, "restore", str(backup), "--force"))
    assert "re-applied 1 deletion, 1 erasure, 1 redaction, 1 run_close" in out
    # The manifest's counts, less what was removed since (the backup held user:8812's four).
    assert "demo records_memoryrecord: 6 in the backup, 1 now" in out
    after = _state(home)
    assert after["user:8812"] == after["org:acme"] == after["runs_open"] == 0
    assert after["email"] == "[REDACTED]"
    assert after["embeddings"] == removed["embeddings"]
    # The re-applied erasure leaves a receipt that verification passes.
    (receipt,) = after["receipts"]
    assert "0 residues: verified" in _ok(_run(home, "verify-erasure", str(receipt)))

    # A damaged backup is refused before anything changes.
    with (backup / "database.dump").open("r+b") as dump:
        dump.seek(-100, os.SEEK_END)
        byte = dump.read(1)
        dump.seek(-100, os.SEEK_END)
        dump.write(bytes([byte[0] ^ 0xFF]))
    damaged = _run(home, "restore", str(backup), "--force")
    assert damaged.returncode != 0
    assert "does not match" in damaged.stderr


def test_it_refuses_dumpdata_and_loaddata_pointing_to_backup() -> None:
    with pytest.raises(CommandError, match="memoryconsole backup PATH"):
        call_command("dumpdata", "records.fact")
    with pytest.raises(CommandError, match="memoryconsole restore PATH"):
        call_command("loaddata", "fixture.json")
