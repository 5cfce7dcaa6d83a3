"""What deleting a row of subject data removes: one definition, read from the models.

Foreign keys say it with ``on_delete``: ``CASCADE`` (the referring rows go too), ``SET_NULL``
(their pointer is unlinked), ``PROTECT``/``RESTRICT`` (the deletion is refused). Columns that
name a row without a foreign key (a summary's sources, an outbox row's object, a stored
response's resource) are declared on the model holding them, as its ``deletion_rules``
(:class:`Rules`), with what the referring row undergoes when the named row goes:

* :data:`DELETE`: it goes too;
* :class:`Rewrite`: it stays, rewritten (a stored response becomes a content-free tombstone);
* :class:`Withdraw`: the row it belongs to is *withdrawn* (a summary citing a deleted source
  becomes invalid);
* :data:`KEEP`: it stays as it is, on purpose (a receipt keeps the ids it proves deleted).

A model's :class:`Withdrawal` says what withdrawing one of its rows means: the row stays,
its content goes (``rewrite``), rows derived from it go (``removes``: its embeddings), and
rows hanging off it are withdrawn with it (``withdraws``). Withdrawal is also what expiry
does to a record before compaction deletes it (a revoked consent, a shortened retention, a
closed run): the row stays, what was derived from it goes at once.

The engine discovers every model through the app registry, so it imports no domain app.
Every path reads it: the deletion of versions and facts, the discard of a closed run's
episodes, an erasure's totals, a deletion's preview, the verification of an erasure (a row
still referring to a deleted id is a residue), the tables reclamation vacuums, and stored
responses' tombstones. :func:`definition_problems` lists every relation of an installed model
to subject data that the definition does not cover (a test keeps the list empty).

A deletion runs as one SQL statement generated from the graph (:func:`statement_for`: CTEs
composed with :mod:`psycopg.sql`, one round trip, which an erasure's throughput needs;
``docs/performance.md``); a :class:`Plan` reads the same graph as querysets, for previews and
residues.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.apps import apps as registry
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import FieldDoesNotExist
from django.db import connection, models
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from psycopg import sql

from apps.core.database import id_array
from apps.core.errors import DomainError

# --- the declarative form ----------------------------------------------------------------------


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DELETE = _Sentinel("DELETE")
KEEP = _Sentinel("KEEP")
#: A reference whose target may be a row of any model with a UUID primary key.
ANY = _Sentinel("ANY")
#: A reference whose targets are the models that name it in their ``Rules.named_by``: a
#: lower app's column that may name rows of models above it, which it must not know.
DECLARED = _Sentinel("DECLARED")
#: Values a rewrite may set: the time of the deletion and its reason.
NOW = _Sentinel("NOW")
REASON = _Sentinel("REASON")


@dataclass(frozen=True)
class Column:
    """A rewrite's value read from another column of the same row."""

    name: str


@dataclass(frozen=True)
class JsonObject:
    """A rewrite's JSON object value, its members constants or :class:`Column`."""

    members: Mapping[str, Any]


@dataclass(frozen=True)
class Rewrite:
    """Rows that stay, rewritten. ``pending`` (field: value) picks the rows not yet rewritten
    (only those are counted, and a rewritten row left pending is a residue); ``first`` values
    are set only on rows that are pending (when they were first invalidated, say), the others
    keep theirs; ``stamp`` names the field that records the change's audit event, set once
    the event exists (:meth:`Outcome.stamp`)."""

    values: Mapping[str, Any]
    first: Mapping[str, Any] = field(default_factory=dict)
    pending: Mapping[str, Any] = field(default_factory=dict)
    stamp: str = ""


@dataclass(frozen=True)
class Withdraw:
    """The referring row's ``via`` (a foreign key) target is withdrawn."""

    via: str


#: The referring row is withdrawn with the row it names (it stays; what refers to it reacts).
WITHDRAWN = _Sentinel("WITHDRAWN")


@dataclass(frozen=True)
class Reference:
    """A column naming rows of other models without a foreign key (or, on a foreign key, an
    effect on top of its ``on_delete``). ``to`` is a model label or a tuple of them, a mapping
    from the values of ``kind`` (another column of the row) to model labels, :data:`ANY` or
    :data:`DECLARED`; ``text`` when the column holds the id as text."""

    field: str
    effect: Any
    to: str | tuple[str, ...] | Mapping[str, str] | _Sentinel | None = None
    kind: str = ""
    text: bool = False


@dataclass(frozen=True)
class Rules:
    """A model's part of the definition (module doc): whether its rows are ``subject_data``
    (what a deletion or an erasure is about); its declared ``references``; the columns that
    look like references but name no subject data (``unrelated``: column -> why); what
    withdrawing one of its rows rewrites (``withdrawal``); the name its rows are counted
    under in receipts, totals, previews and residues; and the :data:`DECLARED` references
    that may name its rows (``named_by``: ``"app_label.Model.field"``)."""

    subject_data: bool = False
    references: tuple[Reference, ...] = ()
    unrelated: Mapping[str, str] = field(default_factory=dict)
    withdrawal: Rewrite | None = None
    counted_as: str = ""
    named_by: tuple[str, ...] = ()

    def name(self, model: type[models.Model]) -> str:
        return self.counted_as or model._meta.model_name or model.__name__


def rules_of(model: type[models.Model]) -> Rules:
    rules = model.__dict__.get("deletion_rules")
    return rules if isinstance(rules, Rules) else Rules()


# --- the graph -------------------------------------------------------------------------------

ON_DELETE = {
    models.CASCADE: DELETE,
    models.SET_NULL: "unlink",
    models.PROTECT: "refuse",
    models.RESTRICT: "refuse",
}

Node = tuple[str, type[models.Model]]  # ("delete" | "withdraw", model)
# A condition of the generated statement: rows whose column (with a kind column = value, when
# given) is in an SQL array.
Part = tuple[tuple[str, str] | None, str, sql.Composable]


def _where(parts: Iterable[Part]) -> sql.Composable:
    """The parts as one condition: those on one column (and kind) as one ``= ANY`` of their
    arrays concatenated, which the planner reads as one index scan."""
    grouped: dict[tuple[tuple[str, str] | None, str], list[sql.Composable]] = {}
    for kind, column, array in parts:
        arrays = grouped.setdefault((kind, column), [])
        if array not in arrays:
            arrays.append(array)
    conditions = []
    for (kind, column), arrays in grouped.items():
        condition = sql.SQL("{} = ANY({})").format(sql.Identifier(column), _join(" || ", arrays))
        if kind is not None:
            condition = sql.SQL("({} = {} AND {})").format(
                sql.Identifier(kind[0]), _literal(kind[1]), condition
            )
        conditions.append(condition)
    return _join(" OR ", conditions) if conditions else sql.SQL("false")


def _join(separator: str, parts: Iterable[sql.Composable]) -> sql.Composable:
    return sql.SQL(separator).join(parts)


def _literal(text: str) -> sql.Composable:
    """A constant of the definition as an SQL string literal (``%`` doubled: the statement
    goes through the driver's parameter substitution)."""
    return sql.Literal(text.replace("%", "%%"))


@dataclass(frozen=True)
class Edge:
    """Rows of ``holder`` whose ``column`` names a row of ``target`` (with ``kind`` = value,
    when given), and what they undergo when it goes (``effect``); ``fk`` for a foreign key's
    own ``on_delete``, which applies to deletions only (a withdrawn row stays)."""

    holder: type[models.Model]
    target: type[models.Model] | None  # None: ANY
    field: str
    column: str
    effect: Any
    kind: tuple[str, str] | None = None
    text: bool = False
    fk: bool = False
    cascades: bool = False  # declared on a foreign key whose on_delete deletes the row anyway

    def applies(self, kind: str) -> bool:
        """Whether the edge acts when its target's rows are deleted (``kind="delete"``) or
        withdrawn: a foreign key's on_delete only on deletion (a withdrawn row stays), a
        declaration on a cascading foreign key only on withdrawal (the row goes anyway)."""
        return not (kind == "withdraw" and self.fk) and not (kind == "delete" and self.cascades)

    def q(self, ids: Any) -> Q:
        condition = Q(**{f"{self.field}__in": ids})
        if self.kind is not None:
            condition &= Q(**{self.kind[0]: self.kind[1]})
        return condition

    def part(self, array: sql.Composable) -> Part:
        """The condition on ``holder``'s table for ids given as the SQL array ``array``, as a
        :data:`Part` for :func:`_where` to combine with others."""
        kind = None if self.kind is None else (_column(self.holder, self.kind[0]), self.kind[1])
        return (kind, self.column, array)

    def leads_to(self, kind: str) -> Node | None:
        """The node this edge adds rows to when its target's rows are deleted or withdrawn."""
        if not self.applies(kind):
            return None
        if self.effect is DELETE:
            return ("delete", self.holder)
        if self.effect is WITHDRAWN:
            return ("withdraw", self.holder)
        if isinstance(self.effect, Withdraw):
            return ("withdraw", _related(self.holder, self.effect.via))
        return None


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field


def _column(model: type[models.Model], name: str) -> str:
    return str(_field(model, name).column)


def _related(model: type[models.Model], name: str) -> type[models.Model]:
    related = model._meta.get_field(name).related_model
    assert isinstance(related, type)
    return related


class DefinitionError(Exception):
    """The models declare something the engine cannot carry out."""


def _is_uuid_pk(model: type[models.Model]) -> bool:
    return isinstance(model._meta.pk, models.UUIDField)


@functools.cache
def definition() -> Definition:
    """The definition for the installed models (built once per process)."""
    return Definition(registry.get_models())


class Definition:
    def __init__(self, installed: Iterable[type[models.Model]]) -> None:
        self.models = list(installed)
        self.incoming: dict[type[models.Model], list[Edge]] = defaultdict(list)
        self.any_edges: list[Edge] = []
        for model in self.models:
            for edge in edges_of(model):
                if edge.target is None:
                    self.any_edges.append(edge)
                else:
                    self.incoming[edge.target].append(edge)

    def edges_into(self, model: type[models.Model]) -> list[Edge]:
        edges = list(self.incoming.get(model, ()))
        if _is_uuid_pk(model):
            edges += [
                Edge(e.holder, model, e.field, e.column, e.effect, e.kind, e.text)
                for e in self.any_edges
                if e.holder is not model  # queued work names other rows, not queued work
            ]
        return edges

    def subject_models(self) -> list[type[models.Model]]:
        return [m for m in self.models if rules_of(m).subject_data]

    def counted_names(self) -> list[str]:
        """Every name a deletion's counts use, in the registry's order."""
        return [rules_of(m).counted_as for m in self.models if rules_of(m).counted_as]

    def reached_from(self, roots: Iterable[type[models.Model]]) -> list[type[models.Model]]:
        """Every model a deletion or withdrawal of rows of ``roots`` may change, ``roots``
        first, then in the order the relations reach them."""
        seen: list[type[models.Model]] = []
        todo = list(roots)
        while todo:
            model = todo.pop(0)
            if model in seen:
                continue
            seen.append(model)
            for edge in self.edges_into(model):
                if edge.effect is not KEEP and edge.effect != "refuse":
                    todo.append(edge.holder)
                if isinstance(edge.effect, Withdraw):
                    todo.append(_related(edge.holder, edge.effect.via))
        return seen

    def tables(self) -> tuple[str, ...]:
        """The tables of every model holding subject data or changed by its deletion."""
        return tuple(m._meta.db_table for m in self.reached_from(self.subject_models()))


def edges_of(model: type[models.Model]) -> Iterable[Edge]:
    """The relations ``model`` holds: its foreign keys' ``on_delete`` and its declared
    references."""
    for fk in model._meta.concrete_fields:
        if isinstance(fk, models.ForeignKey):
            effect = ON_DELETE.get(fk.remote_field.on_delete)
            if effect is not None:
                yield Edge(model, _related(model, fk.name), fk.name, fk.column, effect, fk=True)
    for reference in rules_of(model).references:
        try:
            column = _field(model, reference.field)
            if isinstance(reference.effect, Withdraw):
                model._meta.get_field(reference.effect.via)
            if reference.to is None:
                targets: list[tuple[Any, tuple[str, str] | None]] = [(column.related_model, None)]
            elif reference.to is ANY:
                targets = [(None, None)]
            elif reference.to is DECLARED:
                name = f"{model._meta.label}.{reference.field}"
                targets = [(m, None) for m in registry.get_models() if name in rules_of(m).named_by]
            elif isinstance(reference.to, str):
                targets = [(registry.get_model(reference.to), None)]
            elif isinstance(reference.to, tuple):
                targets = [(registry.get_model(label), None) for label in reference.to]
            elif isinstance(reference.to, Mapping):
                targets = [
                    (registry.get_model(label), (reference.kind, value))
                    for value, label in reference.to.items()
                ]
        except (FieldDoesNotExist, LookupError):
            continue  # a declaration naming nothing: definition_problems reports it
        cascades = isinstance(column, models.ForeignKey) and (
            column.remote_field.on_delete is models.CASCADE
        )
        for target, kind in targets:
            yield Edge(
                model,
                target,
                column.name,
                str(column.column),
                reference.effect,
                kind=kind,
                text=reference.text,
                cascades=cascades,
            )


# --- a plan: what one deletion reaches -------------------------------------------------------


class Refused(DomainError):
    """A ``PROTECT`` or ``RESTRICT`` relation keeps a row the deletion would remove (409)."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"{what} keeps a row the deletion would remove.")


@dataclass
class Outcome:
    """What a deletion changed: rows per model label (deleted, rewritten, or withdrawn from
    pending), and the ids of the rows it withdrew that carry a stamp."""

    changed: dict[str, int] = field(default_factory=dict)
    withdrawn: dict[str, list[Any]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The counts under their declared names (:attr:`Rules.counted_as`), for the models
        the deletion reached."""
        return {
            rules_of(model).counted_as: self.changed[model._meta.label]
            for model in definition().models
            if rules_of(model).counted_as and model._meta.label in self.changed
        }

    def withdrawn_ids(self, model: type[models.Model]) -> list[Any]:
        return self.withdrawn.get(model._meta.label, [])

    def stamp_statements(self, event_id: Any) -> list[tuple[str, list[Any]]]:
        """Statements naming the change's audit event on the rows it withdrew (to run with the
        event: ``apps.audit.services.audit_append``)."""
        return [
            (update, [event_id, id_array(ids)])
            for label, ids in self.withdrawn.items()
            if ids and (update := _stamp_sql(label))
        ]

    def stamp(self, event_id: Any) -> None:
        """Name the change's audit event on the rows it withdrew, on a cursor of its own."""
        with connection.cursor() as cursor:
            for statement, params in self.stamp_statements(event_id):
                cursor.execute(statement, params)


@functools.cache
def _stamp_sql(label: str) -> str:
    """The update naming an audit event on a model's withdrawn rows ("" if it has no stamp)."""
    model = registry.get_model(label)
    rewrite = rules_of(model).withdrawal
    if rewrite is None or not rewrite.stamp:
        return ""
    return (
        sql.SQL("UPDATE {} SET {column} = %s WHERE {} = ANY(%s::{}[]) AND {column} IS NULL")
        .format(
            *_table(model),
            sql.SQL(_pk_type(model)),
            column=sql.Identifier(_column(model, rewrite.stamp)),
        )
        .as_string()
    )


def _node_key(node: Node) -> tuple[str, str]:
    return node[0], node[1]._meta.label


def _order(definition: Definition, roots: Iterable[Node]) -> list[Node]:
    """Every node ``roots`` reach, each after every node leading to it (a cascade cycle is a
    definition error: the generated statement selects each model's rows once)."""
    before: dict[Node, set[Node]] = defaultdict(set)
    seen: set[Node] = set()
    todo = list(roots)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        kind, model = node
        for edge in definition.edges_into(model):
            reached = edge.leads_to(kind)
            if reached is not None:
                before[reached].add(node)
                todo.append(reached)
    for kind, model in list(seen):
        # A withdrawal leaves out the rows that are deleted: it comes after their selection.
        if kind == "withdraw" and ("delete", model) in seen:
            before[("withdraw", model)].add(("delete", model))
    ordered: list[Node] = []
    marks: dict[Node, str] = {}

    def visit(node: Node) -> None:
        if marks.get(node) == "done":
            return
        if marks.get(node) == "open":
            raise DefinitionError(f"a cycle of relations through {node[1]._meta.label}")
        marks[node] = "open"
        for earlier in sorted(before.get(node, ()), key=_node_key):
            visit(earlier)
        marks[node] = "done"
        ordered.append(node)

    for node in sorted(seen, key=_node_key):
        visit(node)
    return ordered


class Plan:
    """Deleting the rows ``deleted`` and withdrawing the rows ``withdrawn`` (model: a list or
    a queryset of primary keys), with everything the definition says goes with them.

    Each model's rows are a queryset (subqueries on the roots), so a preview counts them
    without reading an id, and what a deletion left behind is found the same way
    (:meth:`residues`); :func:`run` carries a deletion out."""

    def __init__(
        self,
        *,
        deleted: Mapping[type[models.Model], Any] | None = None,
        withdrawn: Mapping[type[models.Model], Any] | None = None,
        definition_: Definition | None = None,
    ) -> None:
        self.definition = definition_ or definition()
        self.roots = dict(deleted or {})
        self.withdrawn_roots = dict(withdrawn or {})
        self.conditions: dict[Node, Q] = {}
        self.rewrites: dict[type[models.Model], list[tuple[Rewrite, Q]]] = defaultdict(list)
        self.unlinks: dict[type[models.Model], list[tuple[str, Q]]] = defaultdict(list)
        # Ids given as lists are also matched as such: rows still naming an id whose row has
        # gone are found too (a residue, after the deletion).
        self.literal: dict[Node, list[Any]] = {}
        for kind, given in (("delete", self.roots), ("withdraw", self.withdrawn_roots)):
            for model, ids in given.items():
                if not isinstance(ids, QuerySet):
                    self.literal[(kind, model)] = list(ids)
                self._grow((kind, model), Q(pk__in=ids))
        self.order = _order(
            self.definition,
            [("delete", m) for m in self.roots] + [("withdraw", m) for m in self.withdrawn_roots],
        )
        for node in self.order:
            self._follow(node)

    def _grow(self, node: Node, condition: Q) -> None:
        known = self.conditions.get(node)
        self.conditions[node] = condition if known is None else known | condition

    def _follow(self, node: Node) -> None:
        kind, model = node
        rows = self.rows(node)
        literal = self.literal.get(node)
        for edge in self.definition.edges_into(model):
            if not edge.applies(kind):
                continue
            reached = edge.q(_ids_for(edge, rows))
            if literal:
                reached |= edge.q([str(pk) for pk in literal] if edge.text else literal)
            if edge.effect is DELETE:
                self._grow(("delete", edge.holder), reached)
            elif edge.effect is WITHDRAWN:
                self._grow(("withdraw", edge.holder), reached)
            elif edge.effect == "unlink":
                self.unlinks[edge.holder].append((edge.field, reached))
            elif isinstance(edge.effect, Rewrite):
                self.rewrites[edge.holder].append((edge.effect, reached))
            elif isinstance(edge.effect, Withdraw):
                via = _field(edge.holder, edge.effect.via)
                referring = edge.holder._default_manager.filter(reached).values(via.attname)
                self._grow(
                    ("withdraw", _related(edge.holder, edge.effect.via)), Q(pk__in=referring)
                )

    def rows(self, node: Node) -> QuerySet[Any]:
        """The primary keys of the rows of ``node``'s model it deletes or withdraws."""
        kind, model = node
        if node not in self.conditions:
            return model._default_manager.none().values("pk")
        rows = model._default_manager.filter(self.conditions[node])
        if kind == "withdraw" and ("delete", model) in self.conditions:
            rows = rows.exclude(self.conditions[("delete", model)])
        return rows.values("pk")

    def deleted(self, model: type[models.Model]) -> QuerySet[Any]:
        return self.rows(("delete", model))

    def withdrawn(self, model: type[models.Model]) -> QuerySet[Any]:
        return self.rows(("withdraw", model))

    def pending(self, model: type[models.Model]) -> QuerySet[Any]:
        """The rows the plan withdraws that are not withdrawn yet."""
        rows = model._default_manager.filter(pk__in=self.withdrawn(model))
        rewrite = rules_of(model).withdrawal
        return rows.filter(**rewrite.pending) if rewrite and rewrite.pending else rows

    def rewritten(self, model: type[models.Model]) -> QuerySet[Any]:
        """The rows the plan rewrites (through a declared reference) that are still pending."""
        condition = Q()
        for _rewrite, reached in self.rewrites[model]:
            condition |= reached
        rows = model._default_manager.filter(condition)
        rewrite = self._rewrite_of(model)
        if rewrite.pending:
            rows = rows.filter(**rewrite.pending)
        if ("delete", model) in self.conditions:
            rows = rows.exclude(self.conditions[("delete", model)])
        return rows

    def _rewrite_of(self, model: type[models.Model]) -> Rewrite:
        rewrites = [rewrite for rewrite, _q in self.rewrites[model]]
        if any(other != rewrites[0] for other in rewrites):
            raise DefinitionError(f"{model._meta.label}: references with different rewrites")
        return rewrites[0]

    def reached(self) -> list[type[models.Model]]:
        models_ = [m for _k, m in self.order]
        models_ += [m for m in (*self.rewrites, *self.unlinks) if m not in models_]
        return models_

    def counts(self) -> dict[str, int]:
        """What :meth:`execute` would count now, changing nothing (a preview)."""
        changed = {m._meta.label: self._count(m) for m in self.reached() if rules_of(m).counted_as}
        return Outcome(changed=changed).counts()

    def _count(self, model: type[models.Model]) -> int:
        if ("delete", model) in self.conditions:
            return self.deleted(model).count()
        if ("withdraw", model) in self.conditions and rules_of(model).withdrawal:
            return self.pending(model).count()
        if model in self.rewrites:
            return self.rewritten(model).count()
        return 0

    def residues(self) -> list[tuple[str, str]]:
        """``(store, detail)`` for each row the plan would still change: after the deletion it
        describes was carried out, a row still referring to what went."""
        found = []
        for model in self.reached():
            name = rules_of(model).name(model)
            if ("delete", model) in self.conditions:
                for pk in self.deleted(model).values_list("pk", flat=True)[:100]:
                    found.append((name, f"{model._meta.verbose_name} {pk} still exists"))
            if ("withdraw", model) in self.conditions and rules_of(model).withdrawal:
                rewrite = rules_of(model).withdrawal
                assert rewrite is not None
                done = Q()
                for key, value in rewrite.values.items():
                    if value is None:
                        done &= Q(**{f"{key}__isnull": True})
                    elif _plain(value):
                        done &= Q(**{key: value})
                left = model._default_manager.filter(pk__in=self.withdrawn(model)).exclude(done)
                for pk in left.values_list("pk", flat=True)[:100]:
                    found.append((name, f"{model._meta.verbose_name} {pk} was not withdrawn"))
            if model in self.rewrites:
                for pk in self.rewritten(model).values_list("pk", flat=True)[:100]:
                    found.append((name, f"{model._meta.verbose_name} {pk} still describes it"))
            for field_name, reached in self.unlinks.get(model, ()):
                rows = model._default_manager.filter(reached)
                for pk in rows.values_list("pk", flat=True)[:100]:
                    found.append((name, f"{model._meta.verbose_name} {pk}.{field_name} names it"))
        return found


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, str, int, dict, list))


def _ids_for(edge: Edge, rows: QuerySet[Any]) -> QuerySet[Any]:
    if not edge.text:
        return rows
    texts: QuerySet[Any] = rows.annotate(id_text=Cast("pk", output_field=TextField()))
    return texts.values("id_text")


def run(
    *,
    deleted: Mapping[type[models.Model], Sequence[Any]] | None = None,
    withdrawn: Mapping[type[models.Model], Sequence[Any]] | None = None,
    now: datetime,
    reason: str,
    cursor: Any = None,
) -> Outcome:
    """Delete ``deleted`` and withdraw ``withdrawn`` (model: ids) with everything the definition
    says, in the caller's transaction (the caller locks the roots first): one generated
    statement, one round trip, on ``cursor`` (a prepared one: :mod:`apps.tenancy.context`)
    or on a Django cursor of its own."""
    # The statement depends on the roots' models only (one per shape, built once): the plan's
    # querysets, which only previews and residues read, would cost more Python than the
    # statement costs the database for one fact (docs/performance.md, "Request path").
    statement = statement_for(
        tuple(m._meta.label for m in deleted or {}),
        tuple(m._meta.label for m in withdrawn or {}),
    )
    ids = {
        "deleted": {m._meta.label: ids for m, ids in (deleted or {}).items()},
        "withdrawn": {m._meta.label: ids for m, ids in (withdrawn or {}).items()},
    }
    if cursor is not None:
        return statement.run(cursor, **ids, now=now, reason=reason)
    with connection.cursor() as own:
        return statement.run(own, **ids, now=now, reason=reason)


# --- the generated statement ----------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One SQL statement of data-modifying CTEs for a plan's shape (which models are roots),
    generated from the definition; the ids of each root model are bound once, as an array.

    Every CTE sees the statement's snapshot, so no row may be changed by two of them
    (PostgreSQL leaves that outcome undefined): rows that go are deleted, rows that stay and
    refer to them are unlinked or rewritten, each by one CTE that leaves out the rows that go.
    Foreign keys are checked at commit (Django creates them deferred), so the order of the
    deletes does not matter. Row-level security applies as to any query."""

    sql: str
    roots: tuple[str, ...]
    withdrawn_roots: tuple[str, ...]
    counted: tuple[str, ...]  # labels, in the order of the counts selected
    withdrawn: tuple[str, ...]  # labels whose withdrawn ids are selected after the counts
    refuses: bool = False

    def params(
        self,
        *,
        deleted: Mapping[str, Sequence[Any]] | None,
        withdrawn: Mapping[str, Sequence[Any]] | None,
        now: datetime,
        reason: str,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"now": now, "reason": reason}
        for label in self.roots:
            params[_param(label)] = id_array((deleted or {}).get(label, ()))
        for label in self.withdrawn_roots:
            params[_param(label, "w")] = id_array((withdrawn or {}).get(label, ()))
        return params

    def run(
        self,
        cursor: Any,
        *,
        deleted: Mapping[str, Sequence[Any]] | None = None,
        withdrawn: Mapping[str, Sequence[Any]] | None = None,
        now: datetime,
        reason: str,
    ) -> Outcome:
        """Execute on ``cursor`` (a Django cursor; prepared on the server where the caller
        wants one plan per session)."""
        cursor.execute(
            self.sql, self.params(deleted=deleted, withdrawn=withdrawn, now=now, reason=reason)
        )
        row = cursor.fetchone()
        assert row is not None
        values = list(row)
        if self.refuses:
            refused = values.pop(0)
            if refused:
                raise Refused(refused)
        outcome = Outcome()
        for label in self.counted:
            outcome.changed[label] = values.pop(0)
        for label in self.withdrawn:
            outcome.withdrawn[label] = list(values.pop(0))
        return outcome


def _param(label: str, prefix: str = "d") -> str:
    return f"{prefix}_{label.replace('.', '_').lower()}"


def _cte(prefix: str, model: type[models.Model], *column: str) -> sql.Identifier:
    """A CTE of the statement (or its ``column``): ``s*`` selects, ``x*`` changes."""
    return sql.Identifier(f"{prefix}_{model._meta.db_table}", *column)


def _pk_type(model: type[models.Model]) -> str:
    return str(model._meta.pk.db_type(connection))


def _table(model: type[models.Model]) -> tuple[sql.Identifier, sql.Identifier]:
    return sql.Identifier(model._meta.db_table), sql.Identifier(model._meta.pk.column)


@functools.cache
def statement_for(roots: tuple[str, ...], withdrawn_roots: tuple[str, ...] = ()) -> Statement:
    """The statement deleting rows of the models ``roots`` and withdrawing rows of
    ``withdrawn_roots`` (labels), with everything the definition says (one per shape)."""
    return _Builder(roots, withdrawn_roots).statement()


class _Builder:
    """One statement's CTEs, composed from the plan's nodes in order: each node's rows are
    selected by what its predecessors reach (``s*``), then changed (``x*``), counted and
    returned. A node's ids are an array of its selection, and a deleted model whose ids no
    other part reads is deleted in one pass (no selection)."""

    def __init__(self, roots: tuple[str, ...], withdrawn_roots: tuple[str, ...]) -> None:
        self.labels = {"delete": roots, "withdraw": withdrawn_roots}
        self.defn = definition()
        root_nodes = [
            (k, registry.get_model(label)) for k, ls in self.labels.items() for label in ls
        ]
        self.order = _order(self.defn, root_nodes)
        self.conditions: dict[Node, list[Part]] = defaultdict(list)
        for (kind, model), label in zip(root_nodes, (*roots, *withdrawn_roots), strict=True):
            array = sql.SQL("{}::{}[]").format(
                sql.Placeholder(_param(label, kind[0])), sql.SQL(_pk_type(model))
            )
            self.conditions[(kind, model)].append((None, model._meta.pk.column, array))
        self.rewrites: dict[type[models.Model], list[tuple[Part, Rewrite]]] = defaultdict(list)
        self.unlinks: dict[type[models.Model], list[Part]] = defaultdict(list)
        self.refusals: list[sql.Composable] = []
        self.read: set[Node] = set()  # the nodes whose ids another part reads
        self.wheres = {node: self._follow(node) for node in self.order}

    def ids(self, node: Node, *, text: bool = False) -> sql.Composable:
        self.read.add(node)
        column = sql.SQL("id::text" if text else "id")
        return sql.SQL("ARRAY(SELECT {} FROM {})").format(column, _cte("s" + node[0][0], node[1]))

    def kept(self, model: type[models.Model], where: sql.Composable) -> sql.Composable:
        """``where``, leaving out the rows of ``model`` the statement deletes (no row is
        changed by two CTEs)."""
        if ("delete", model) not in self.order:
            return where
        excluded = self.ids(("delete", model))
        return sql.SQL("({}) AND NOT ({} = ANY({}))").format(where, _table(model)[1], excluded)

    def _follow(self, node: Node) -> sql.Composable:
        """``node``'s condition (its predecessors have all added theirs), and what its rows
        reach through the relations into its model."""
        kind, model = node
        for edge in self.defn.edges_into(model):
            if not edge.applies(kind) or edge.effect is KEEP:
                continue
            part = edge.part(self.ids(node, text=edge.text))
            if edge.effect is DELETE or edge.effect is WITHDRAWN:
                reached = "delete" if edge.effect is DELETE else "withdraw"
                self.conditions[(reached, edge.holder)].append(part)
            elif edge.effect == "unlink":
                self.unlinks[edge.holder].append(part)
            elif edge.effect == "refuse":
                self.refusals.append(
                    sql.SQL("(SELECT {}::text FROM {} WHERE {} LIMIT 1)").format(
                        _literal(f"{edge.holder._meta.label}.{edge.field}"),
                        sql.Identifier(edge.holder._meta.db_table),
                        _where([part]),
                    )
                )
            elif isinstance(edge.effect, Rewrite):
                self.rewrites[edge.holder].append((part, edge.effect))
            elif isinstance(edge.effect, Withdraw):
                target = _related(edge.holder, edge.effect.via)
                via = sql.SQL("ARRAY(SELECT {} FROM {} WHERE {})").format(
                    sql.Identifier(_column(edge.holder, edge.effect.via)),
                    sql.Identifier(edge.holder._meta.db_table),
                    _where([part]),
                )
                self.conditions[("withdraw", target)].append((None, target._meta.pk.column, via))
        return _where(self.conditions[node])

    def statement(self) -> Statement:
        selections: dict[Node, sql.Composable] = {}
        changes: dict[Any, sql.Composable] = {}
        counts: dict[type[models.Model], sql.Composable] = {}
        withdrawn: list[type[models.Model]] = []
        for node in self.order:
            kind, model = node
            table, pk = _table(model)
            if kind == "delete":
                counts[model] = sql.SQL("(SELECT count(*) FROM {})").format(_cte("xd", model))
                continue
            rewrite = rules_of(model).withdrawal
            pending = _sql_match(model, rewrite.pending) if rewrite and rewrite.pending else None
            selections[node] = sql.SQL("SELECT {} AS id, {} AS pending FROM {} WHERE {}{}").format(
                pk,
                pending or sql.SQL("true"),
                table,
                self.kept(model, self.wheres[node]),
                sql.SQL(" FOR UPDATE" if rewrite is not None else ""),
            )
            if rewrite is None:
                continue
            if model in self.rewrites or model in self.unlinks:
                raise DefinitionError(f"{model._meta.label}: rows both withdrawn and rewritten")
            selected = _cte("sw", model)
            changes[node] = sql.SQL("UPDATE {} SET {} FROM {} WHERE {} = {} RETURNING 1").format(
                table,
                _sql_sets(model, rewrite, flag=_cte("sw", model, "pending")),
                selected,
                sql.Identifier(model._meta.db_table, model._meta.pk.column),
                _cte("sw", model, "id"),
            )
            counts[model] = sql.SQL("(SELECT count(*) FROM {} WHERE pending)").format(selected)
            withdrawn.append(model)
        for model, parts in self.unlinks.items():
            if model in self.rewrites:
                raise DefinitionError(f"{model._meta.label}: rows both unlinked and rewritten")
            by_column: dict[str, list[Part]] = defaultdict(list)
            for part in parts:
                by_column[part[1]].append(part)
            sets = _join(
                ", ",
                (
                    sql.SQL("{0} = CASE WHEN {1} THEN NULL ELSE {0} END").format(
                        sql.Identifier(column), _where(column_parts)
                    )
                    for column, column_parts in by_column.items()
                ),
            )
            where = self.kept(model, _where(parts))
            changes[("xu", model)] = sql.SQL("UPDATE {} SET {} WHERE {} RETURNING 1").format(
                _table(model)[0], sets, where
            )
        for model, declared in self.rewrites.items():
            their = declared[0][1]
            if any(other != their for _part, other in declared):
                raise DefinitionError(f"{model._meta.label}: references with different rewrites")
            where = _where(part for part, _rewrite in declared)
            if their.pending:
                where = sql.SQL("({}) AND {}").format(where, _sql_match(model, their.pending))
            changes[("xr", model)] = sql.SQL("UPDATE {} SET {} WHERE {} RETURNING 1").format(
                _table(model)[0],
                _sql_sets(model, their, flag=sql.SQL("true")),
                self.kept(model, where),
            )
            counts[model] = sql.SQL("(SELECT count(*) FROM {})").format(_cte("xr", model))
        # Every read is known now: a deleted model's rows are selected only if another part
        # reads their ids.
        for node in self.order:
            kind, model = node
            if kind != "delete":
                continue
            table, pk = _table(model)
            where = self.wheres[node]
            if node in self.read:
                selections[node] = sql.SQL("SELECT {} AS id FROM {} WHERE {}").format(
                    pk, table, where
                )
                where = sql.SQL("{} = ANY({})").format(pk, self.ids(node))
            changes[node] = sql.SQL("DELETE FROM {} WHERE {} RETURNING 1").format(table, where)
        selects: list[sql.Composable] = []
        if self.refusals:
            selects.append(sql.SQL("coalesce({})").format(_join(", ", self.refusals)))
        counted = [m for m in self.defn.models if rules_of(m).counted_as and m in counts]
        selects += [counts[m] for m in counted]
        selects += [sql.SQL("ARRAY(SELECT id FROM {})").format(_cte("sw", m)) for m in withdrawn]
        ctes = [
            sql.SQL("{} AS ({})").format(_cte("s" + node[0][0], node[1]), selections[node])
            for node in self.order
            if node in selections
        ]
        ctes += [
            sql.SQL("{} AS ({})").format(_cte("x" + node[0][0], node[1]), changes[node])
            for node in self.order
            if node in changes
        ]
        ctes += [
            sql.SQL("{} AS ({})").format(_cte(key[0], key[1]), change)
            for key, change in changes.items()
            if key[0] in ("xu", "xr")
        ]
        statement = sql.SQL("WITH\n{}\nSELECT {}").format(
            _join(",\n", ctes), _join(",\n       ", selects)
        )
        return Statement(
            sql=statement.as_string(),
            roots=self.labels["delete"],
            withdrawn_roots=self.labels["withdraw"],
            counted=tuple(m._meta.label for m in counted),
            withdrawn=tuple(m._meta.label for m in withdrawn),
            refuses=bool(self.refusals),
        )


def _sql_match(model: type[models.Model], values: Mapping[str, Any]) -> sql.Composable:
    parts = []
    for name, value in values.items():
        if not isinstance(value, bool):
            raise DefinitionError(f"{model._meta.label}.{name}: a match on booleans only")
        parts.append(
            sql.SQL("{} = {}").format(
                sql.Identifier(_column(model, name)), sql.SQL(str(value).lower())
            )
        )
    return sql.SQL("({})").format(_join(" AND ", parts))


def _sql_sets(
    model: type[models.Model], rewrite: Rewrite, *, flag: sql.Composable
) -> sql.Composable:
    sets = {
        _column(model, name): _sql_value(model, name, value)
        for name, value in rewrite.values.items()
    }
    for name, value in rewrite.first.items():
        column = _column(model, name)
        sets[column] = sql.SQL("CASE WHEN {} THEN {} ELSE {} END").format(
            flag, _sql_value(model, name, value), sql.Identifier(model._meta.db_table, column)
        )
    return _join(", ", (sql.SQL("{} = {}").format(sql.Identifier(c), v) for c, v in sets.items()))


def _sql_value(model: type[models.Model], name: str, value: Any) -> sql.Composable:
    db_type = sql.SQL(str(_field(model, name).db_type(connection)))
    if value is NOW or value is REASON:
        return sql.SQL("{}::{}").format(sql.Placeholder(value.name.lower()), db_type)
    if isinstance(value, Column):
        return sql.Identifier(model._meta.db_table, _column(model, value.name))
    if isinstance(value, JsonObject):
        members = []
        for key, member in value.members.items():
            rendered: sql.Composable
            if isinstance(member, Column):
                rendered = sql.Identifier(model._meta.db_table, _column(model, member.name))
            elif isinstance(member, str):
                rendered = sql.SQL("{}::text").format(_literal(member))
            else:
                rendered = sql.SQL("{}::jsonb").format(_literal(json.dumps(member)))
            members.append(sql.SQL("{}, {}").format(_literal(key), rendered))
        return sql.SQL("jsonb_build_object({})").format(_join(", ", members))
    if value is None:
        return sql.SQL("NULL")
    if isinstance(value, bool):
        return sql.SQL(str(value).lower())
    if isinstance(value, (dict, list)):
        return sql.SQL("{}::jsonb").format(_literal(json.dumps(value)))
    if isinstance(value, str):
        return sql.SQL("{}::{}").format(_literal(value), db_type)
    raise DefinitionError(f"{model._meta.label}.{name}: no SQL for {value!r}")


# --- coverage: every relation to subject data is in the definition -----------------------------


def _project_model(model: type[models.Model]) -> bool:
    return model._meta.app_config is not None and model._meta.app_config.name.startswith("apps.")


def _looks_like_reference(model: type[models.Model], column: models.Field[Any, Any]) -> bool:
    """A column that may name a row without a foreign key: a UUID (or an array of them), or a
    text column named ``*_id`` that is not the id of an actor (``<role>_type/_id/_label``)."""

    if isinstance(column, models.UUIDField):
        return True
    if isinstance(column, ArrayField) and isinstance(column.base_field, models.UUIDField):
        return True
    if isinstance(column, (models.CharField, models.TextField)) and column.name.endswith("_id"):
        role = column.name[: -len("_id")]
        names = {f.name for f in model._meta.concrete_fields}
        return not {f"{role}_type", f"{role}_label"} <= names
    return False


def definition_problems(installed: Iterable[type[models.Model]] | None = None) -> list[str]:
    """What the definition does not cover among ``installed`` (default: every installed
    model): a foreign key into what a deletion reaches whose ``on_delete`` the engine does not
    carry out (``DO_NOTHING``, ``SET_DEFAULT``, ``SET(...)``) or a many-to-many relation to it
    (its rows would go unseen); a column of the project's models that may name a row without a
    foreign key and is neither a declared reference nor declared unrelated; a declaration that
    names no field or model; a cycle of cascades. Empty when everything is covered."""
    candidates = list(registry.get_models() if installed is None else installed)
    defn = Definition(candidates)
    subject = defn.subject_models()
    problems: list[str] = []
    if not subject:
        problems.append("no model declares subject data (Rules(subject_data=True))")
    reached = set(defn.reached_from(subject))
    for model in candidates:
        label = model._meta.label
        rules = rules_of(model)
        for relation in model._meta.get_fields():
            if not relation.is_relation or not relation.concrete:
                continue  # reverse relations are checked on the model holding them
            target = _related(model, relation.name)
            if target not in reached:
                continue
            on_delete = getattr(relation.remote_field, "on_delete", None)
            if relation.many_to_many:
                problems.append(
                    f"{label}.{relation.name}: a many-to-many relation to {target._meta.label}"
                    " (give it a through model with foreign keys)"
                )
            elif on_delete not in ON_DELETE:
                problems.append(
                    f"{label}.{relation.name}: on_delete={getattr(on_delete, '__name__', '?')}"
                    f" to {target._meta.label}, which a deletion removes"
                )
        declared = {reference.field for reference in rules.references} | set(rules.unrelated)
        if _project_model(model):
            for column in model._meta.concrete_fields:
                if column.primary_key or column.is_relation or column.name in declared:
                    continue
                if _looks_like_reference(model, column):
                    problems.append(
                        f"{label}.{column.name}: may name a row without a foreign key; declare"
                        " it in deletion_rules (a Reference, or unrelated with why)"
                    )
        for name in declared:
            try:
                model._meta.get_field(name)
            except FieldDoesNotExist:
                problems.append(f"{label}.deletion_rules: no field {name!r}")
        for reference in rules.references:
            problems += _reference_problems(model, reference)
        for name in rules.named_by:
            if not _declares(name):
                problems.append(f"{label}.deletion_rules.named_by: no DECLARED reference {name}")
        rewrite = rules.withdrawal
        for name in (*rewrite.values, *rewrite.first, *rewrite.pending) if rewrite else ():
            try:
                model._meta.get_field(name)
            except FieldDoesNotExist:
                problems.append(f"{label}.deletion_rules.withdrawal: no field {name!r}")
    for model in subject:
        try:
            _order(defn, [("delete", model), ("withdraw", model)])
        except DefinitionError as error:
            problems.append(f"{model._meta.label}: {error}")
    return problems


def _declares(name: str) -> bool:
    """Whether ``name`` (``"app_label.Model.field"``) is a :data:`DECLARED` reference."""
    label, _, field_name = name.rpartition(".")
    try:
        holder = registry.get_model(label)
    except (LookupError, ValueError):
        return False
    return any(
        reference.field == field_name and reference.to is DECLARED
        for reference in rules_of(holder).references
    )


def _reference_problems(model: type[models.Model], reference: Reference) -> list[str]:
    label = f"{model._meta.label}.{reference.field}"
    try:
        column = model._meta.get_field(reference.field)
    except FieldDoesNotExist:
        return []  # reported with the declared names
    problems = []
    if reference.to is None and not column.is_relation:
        problems.append(f"{label}: a reference that is not a foreign key names its targets")
    labels: list[str] = []
    if isinstance(reference.to, str):
        labels = [reference.to]
    elif isinstance(reference.to, tuple):
        labels = list(reference.to)
    elif isinstance(reference.to, Mapping):
        labels = list(reference.to.values())
        try:
            model._meta.get_field(reference.kind)
        except FieldDoesNotExist:
            problems.append(f"{label}: no kind field {reference.kind!r}")
    for target in labels:
        try:
            registry.get_model(target)
        except LookupError:
            problems.append(f"{label}: no model {target}")
    effect = reference.effect
    if isinstance(effect, Withdraw):
        try:
            via = model._meta.get_field(effect.via)
        except FieldDoesNotExist:
            via = None
        if via is None or not via.many_to_one:
            problems.append(f"{label}: Withdraw({effect.via!r}) names no foreign key")
    elif not (effect in (DELETE, KEEP, WITHDRAWN) or isinstance(effect, Rewrite)):
        problems.append(f"{label}: an effect the engine does not know: {effect!r}")
    return problems
