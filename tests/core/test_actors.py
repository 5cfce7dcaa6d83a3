"""An actor as the three columns a model stamps it in."""

from __future__ import annotations

from apps.core.actors import Actor, ActorType


def test_an_actor_fills_its_three_columns_with_the_label_cut_to_fit() -> None:
    actor = Actor(type=ActorType.CREDENTIAL, id="c-1", label="x" * 250)
    assert actor.fields("requested_by") == {
        "requested_by_type": "credential",
        "requested_by_id": "c-1",
        "requested_by_label": "x" * 200,
    }
