"""What the state app does when the apps below it ask (their ``signals`` modules): a
session-retained record write names an open run. Connected on import (apps.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.dispatch import receiver

from apps.records.signals import session_run_open
from apps.tenancy.models import Tenant

from .selectors import run_open_locked


@receiver(session_run_open, dispatch_uid="state.session_run_open")
def run_open(*, tenant: Tenant, run_id: uuid.UUID, **_: Any) -> bool:
    return run_open_locked(tenant, run_id)
