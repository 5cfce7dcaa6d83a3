"""The contracts lower apps send to higher ones (apps/core/contracts.py): a required one with
no receiver fails start-up's system check (memoryconsole.E001) and raises when sent."""

from __future__ import annotations

import pytest
from django.core.checks import Error
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from apps.api.signals import stored_response_expired
from apps.core.contracts import contracts, contracts_check
from apps.records import signals as records
from apps.tenancy.signals import audit_append


def test_it_passes_the_check_with_every_app_installed():
    assert contracts_check() == []
    call_command("check")


def test_it_finds_the_contracts_of_every_app():
    names = {contract.name for contract in contracts()}
    assert {records.embed_record.name, audit_append.name, records.session_run_open.name} <= names


@pytest.mark.parametrize(
    "contract", [audit_append, records.session_run_open, records.derived_artifacts]
)
def test_the_check_fails_for_a_required_contract_with_no_receiver(monkeypatch, contract):
    monkeypatch.setattr(contract, "receivers", [])
    errors = contracts_check()
    assert [(type(e), e.id, e.obj) for e in errors] == [
        (Error, "memoryconsole.E001", contract.name)
    ]
    assert contract.required in errors[0].hint
    with pytest.raises(SystemCheckError, match=r"memoryconsole\.E001"):
        call_command("check")


def test_a_required_contract_sent_with_no_receiver_raises(monkeypatch):
    monkeypatch.setattr(records.derived_class_raise, "receivers", [])
    with pytest.raises(LookupError, match=r"records\.derived_class_raise"):
        records.derived_class_raise.results(record_id=None, sensitivity="public")


@pytest.mark.parametrize("contract", [stored_response_expired, records.embed_record])
def test_an_optional_contract_needs_no_receiver(monkeypatch, contract):
    monkeypatch.setattr(contract, "receivers", [])
    assert not contract.required
    assert contracts_check() == []
    assert contract.results(pk=None) == []
    call_command("check")
