"""What the audit app does when the apps below it ask (their ``signals`` modules): tenancy's
changes go into the tenant's chain. Connected on import (apps.py)."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from apps.tenancy.signals import audit_append

from .services import audit_record


@receiver(audit_append, dispatch_uid="audit.append")
def append(*, signal: Any, sender: Any, **event: Any) -> Any:
    return audit_record(**event)
