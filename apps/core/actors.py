"""Who caused a change: every service takes one and the audit chain records it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models


class ActorType(models.TextChoices):
    USER = "user", "person"
    CREDENTIAL = "credential", "agent credential"
    SYSTEM = "system", "system"


@dataclass(frozen=True)
class Actor:
    """Who caused a change: a person, an agent credential, or the system itself."""

    type: str
    id: str
    label: str

    def fields(self, prefix: str) -> dict[str, str]:
        """The actor as the three columns a model stamps it in (``<prefix>_type``, ``_id``,
        ``_label``; the label cut to those columns' 200 characters)."""
        return {
            f"{prefix}_type": self.type,
            f"{prefix}_id": self.id,
            f"{prefix}_label": self.label[:200],
        }

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(type=ActorType.SYSTEM, id="", label=label)

    @classmethod
    def for_user(cls, user: Any) -> Actor:
        return cls(type=ActorType.USER, id=str(user.pk), label=user.get_username())

    @classmethod
    def for_credential(cls, credential: Any) -> Actor:
        return cls(type=ActorType.CREDENTIAL, id=str(credential.pk), label=credential.name)
