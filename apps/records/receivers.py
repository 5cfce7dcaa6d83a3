"""What the records app does when the apps below it ask (their ``signals`` modules): a stored
response about a version (or a conflict) that expired since is not replayed. Connected on
import (apps.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.dispatch import receiver

from apps.api.signals import stored_response_expired

from .selectors import expired_since


@receiver(stored_response_expired, dispatch_uid="records.expired")
def expired(*, pk: uuid.UUID, **_: Any) -> bool:
    return expired_since(pk)
