"""The deletion definition covers every relation of every installed model to subject data,
and the check that says so fails on one it does not cover."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import models
from django.test.utils import isolate_apps

from apps.core import deletion
from apps.records.models import Fact, MemoryRecord
from apps.state.models import Episode

# The throwaway models below exist only to be checked; none is ever shown.
# ruff: noqa: DJ008


def test_every_relation_to_subject_data_is_covered():
    assert deletion.definition_problems() == []


def test_the_definition_reaches_every_table_holding_subject_data():
    tables = set(deletion.definition().tables())
    for model in (MemoryRecord, Fact, Episode):
        assert model._meta.db_table in tables
    # What hangs off a record, found from the relations, not from a list.
    for label in ("records.Observation", "review.ReviewClaim", "derivations.Embedding"):
        assert apps.get_model(label)._meta.db_table in tables


def _problems_with(*extra: type[models.Model]) -> list[str]:
    return deletion.definition_problems([*apps.get_models(), *extra])


@isolate_apps("apps.records")
def test_it_fails_on_a_foreign_key_to_a_record_it_cannot_carry_out():
    class Annotation(models.Model):
        record = models.ForeignKey(MemoryRecord, on_delete=models.DO_NOTHING, related_name="+")

        class Meta:
            app_label = "records"

    problems = _problems_with(Annotation)
    assert any("Annotation.record: on_delete=DO_NOTHING" in p for p in problems), problems


@isolate_apps("apps.records")
def test_it_fails_on_a_uuid_column_naming_a_record_without_a_declaration():
    class Bookmark(models.Model):
        record_id = models.UUIDField()
        note_id = models.CharField(max_length=64)

        class Meta:
            app_label = "records"

    problems = _problems_with(Bookmark)
    assert any("Bookmark.record_id: may name a row" in p for p in problems), problems
    assert any("Bookmark.note_id: may name a row" in p for p in problems), problems


@isolate_apps("apps.records")
def test_a_declared_reference_or_an_actor_column_covers_it():
    class Bookmark(models.Model):
        record_id = models.UUIDField()
        placed_by_type = models.CharField(max_length=16)
        placed_by_id = models.CharField(max_length=64)
        placed_by_label = models.CharField(max_length=200)

        deletion_rules = deletion.Rules(
            references=(
                deletion.Reference("record_id", deletion.DELETE, to="records.MemoryRecord"),
            )
        )

        class Meta:
            app_label = "records"

    assert _problems_with(Bookmark) == []
    # ... and the engine reaches it: a deletion of records deletes its bookmarks.
    defn = deletion.Definition([*apps.get_models(), Bookmark])
    assert Bookmark in defn.reached_from([MemoryRecord])


@isolate_apps("apps.records")
def test_it_fails_on_a_declaration_naming_nothing():
    class Broken(models.Model):
        source = models.UUIDField()

        deletion_rules = deletion.Rules(
            references=(
                deletion.Reference("source", deletion.DELETE, to="records.NoSuchModel"),
                deletion.Reference("source", deletion.Withdraw("summary"), to="records.Fact"),
            ),
            unrelated={"gone": "a field that was removed"},
        )

        class Meta:
            app_label = "records"

    problems = _problems_with(Broken)
    assert any("no model records.NoSuchModel" in p for p in problems), problems
    assert any("Withdraw('summary') names no foreign key" in p for p in problems), problems
    assert any("no field 'gone'" in p for p in problems), problems


def test_a_stored_response_names_the_models_that_declare_it():
    # The API layer holds the column, the apps above it declare their models (named_by).
    idempotency_key = apps.get_model("api.IdempotencyKey")
    targets = {edge.target for edge in deletion.edges_of(idempotency_key) if edge.text}
    assert targets == {
        apps.get_model(label)
        for label in (
            "records.MemoryRecord",
            "records.PromotionRequest",
            "records.Conflict",
            "derivations.Summary",
            "state.Run",
            "state.Episode",
            "state.Checkpoint",
            "state.Obligation",
        )
    }


@isolate_apps("apps.records")
def test_it_fails_on_a_named_by_naming_no_declared_reference():
    class Note(models.Model):
        deletion_rules = deletion.Rules(named_by=("api.IdempotencyKey.key", "api.Gone.id"))

        class Meta:
            app_label = "records"

    problems = _problems_with(Note)
    assert any("no DECLARED reference api.IdempotencyKey.key" in p for p in problems), problems
    assert any("no DECLARED reference api.Gone.id" in p for p in problems), problems


@isolate_apps("apps.records")
def test_it_fails_on_a_many_to_many_relation_to_subject_data():
    class Tag(models.Model):
        records = models.ManyToManyField(MemoryRecord, related_name="+")

        class Meta:
            app_label = "records"

    assert any("Tag.records: a many-to-many" in p for p in _problems_with(Tag))


@isolate_apps("apps.records")
def test_it_fails_on_a_cycle_of_cascades():
    class Left(models.Model):
        record = models.ForeignKey(MemoryRecord, on_delete=models.CASCADE, related_name="+")
        right = models.ForeignKey("Right", on_delete=models.CASCADE, related_name="+", null=True)

        class Meta:
            app_label = "records"

    class Right(models.Model):
        left = models.ForeignKey(Left, on_delete=models.CASCADE, related_name="+")

        class Meta:
            app_label = "records"

    assert any("a cycle of relations" in p for p in _problems_with(Left, Right))


@pytest.mark.parametrize(
    ("roots", "withdrawn"),
    [
        (("records.MemoryRecord", "records.Fact"), ()),
        (("state.Episode",), ()),
        (("state.Run",), ("state.Obligation",)),
        ((), ("records.MemoryRecord",)),
        ((), ("derivations.Summary",)),
    ],
)
def test_each_shape_the_product_deletes_generates_one_statement(roots: Any, withdrawn: Any):
    statement = deletion.statement_for(roots, withdrawn)
    assert statement.sql.startswith("WITH")
    assert statement.counted  # it counts what it changes
