"""``memoryconsole evaluate``: the table, the files, the exit status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from apps.audit.models import AuditEvent
from apps.evaluation.models import EvaluationRun
from apps.tenancy.context import tenant_scope

pytestmark = pytest.mark.django_db


def test_it_runs_for_a_tenant_prints_writes_and_stores(tenant, tiny_set_path, tmp_path, capsys):
    out = {name: tmp_path / f"report.{name}" for name in ("json", "html", "svg")}
    call_command(
        "evaluate",
        scenarios=tiny_set_path,
        tenant=tenant.slug,
        against="cache",
        json=out["json"],
        html=out["html"],
        plot=out["svg"],
    )
    printed = capsys.readouterr()
    assert "wrong-scope applications" in printed.out
    assert "PASSED" in printed.out
    assert "stored as evaluation run" in printed.err
    results = json.loads(out["json"].read_text())
    assert results["record"]["decisions"]["decisions"] == 2
    assert "cache" in results
    assert "<svg" in out["html"].read_text()
    assert out["svg"].read_text().startswith("<svg")
    with tenant_scope(tenant.pk):
        run = EvaluationRun.objects.get()
        assert run.passed is True
        assert run.scenario_set == "tiny"  # the set's name, never its path on the server
        assert run.results["record"] == results["record"]
        assert AuditEvent.objects.filter(action="evaluation.run", object_id=str(run.pk)).exists()


def test_a_failed_threshold_exits_1(tiny_set_path: Path, tmp_path: Path, capsys: Any):
    data = json.loads(tiny_set_path.read_text())
    data["thresholds"] = {"record.decision_accuracy": {"min": 1.5}}
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps(data))
    with pytest.raises(CommandError) as failed:
        call_command("evaluate", scenarios=strict)
    assert failed.value.returncode == 1
    assert "FAIL  record.decision_accuracy" in capsys.readouterr().out


def test_an_unusable_scenario_file_or_tenant_exits_2(tmp_path: Path, tiny_set_path: Path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "memoryconsole-evaluation-scenarios/1", "decisions": [{}]}')
    with pytest.raises(CommandError, match=r"decisions\[0\]\.memories: required") as refused:
        call_command("evaluate", scenarios=broken)
    assert refused.value.returncode == 2
    with pytest.raises(CommandError, match="No tenant 'nope'") as unknown:
        call_command("evaluate", scenarios=tiny_set_path, tenant="nope")
    assert unknown.value.returncode == 2


def test_a_broken_configuration_is_never_recorded_nor_stored_for_a_tenant(tenant):
    for options in ({"tenant": tenant.slug}, {"record_baseline": True}):
        with pytest.raises(CommandError, match="do not go with") as refused:
            call_command("evaluate", without_scope=True, **options)
        assert refused.value.returncode == 2
    with pytest.raises(CommandError, match="unknown baseline nope"):
        call_command("evaluate", against="store,nope")
