"""What a lower app asks of the apps above it: Django signals, each with 0..n receivers.

A lower app cannot import a higher one (the layers in pyproject.toml), yet some of its
changes need the higher one's behaviour: a session write needs its run checked (the state
app's), a tenancy change needs the audit chain (the audit app's), a record write may have its
embedding made at once (the derivations app's). The lower app defines a :class:`Contract` (a
``django.dispatch.Signal``) and sends it; the higher app connects its receiver in its
``AppConfig.ready``, as pretix's plugins receive its signals. One contract, one receiver
kind: no app keeps a slot of its own.

Most contracts are optional, like any signal. Some the product cannot do without (a session
write whose run nobody checks would store what must be refused): those name why as
``required``. The system check below (``memoryconsole.E001``, run by ``manage.py check``,
``migrate`` and ``runserver``) fails start-up when one has no receiver, and sending one with
none raises rather than skipping the work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.dispatch import Signal
from django.utils.module_loading import autodiscover_modules

_contracts: list[Contract] = []


class Contract(Signal):
    """A signal a lower app sends to the apps above it. ``name`` says what it asks (in errors
    and checks); ``required`` says why the product needs a receiver ("" for an optional one).
    Receivers take ``sender`` (always None) and the contract's named arguments, and return
    their answer."""

    def __init__(self, name: str, *, required: str = "") -> None:
        super().__init__()
        self.name = name
        self.required = required
        _contracts.append(self)

    def answers(self, **named: Any) -> list[tuple[Any, Any]]:
        """Every receiver with its answer, in the order they connected. A required contract
        with no receiver raises: what it asks must never be skipped silently."""
        if self.required and not self.has_listeners():
            raise LookupError(f"No app receives {self.name}: {self.required}.")
        return self.send(sender=None, **named)

    def results(self, **named: Any) -> list[Any]:
        """Every receiver's answer (:meth:`answers`)."""
        return [response for _, response in self.answers(**named)]


def contracts() -> list[Contract]:
    """Every contract of the installed apps: each app defines those it sends in its
    ``signals`` module, imported here."""
    autodiscover_modules("signals")
    return list(_contracts)


def contracts_check(
    app_configs: Iterable[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """``memoryconsole.E001`` for each required contract no installed app receives."""
    return [
        checks.Error(
            f"No app receives {contract.name}.",
            hint=f"Required: {contract.required}. Install the app that connects a receiver "
            "in its AppConfig.ready.",
            obj=contract.name,
            id="memoryconsole.E001",
        )
        for contract in contracts()
        if contract.required and not contract.has_listeners()
    ]
