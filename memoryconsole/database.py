"""Which PostgreSQL this process talks to, and as which role.

Two roles, always:

* the **owner** runs migrations and owns every table;
* the **application role** is what web requests and tasks use. It owns nothing, is not a
  superuser and has no BYPASSRLS, so PostgreSQL row-level security applies to every query.

Configuration:

* ``DATABASE_URL`` unset: the embedded server (see :mod:`memoryconsole.embedded`).
* ``DATABASE_URL``: the server and database, with the owner's credentials.
* ``DATABASE_APP_URL`` (optional): the application's login. Default: the same server and
  database as ``memoryconsole_app``, with the password generated once into
  ``$MEMORYCONSOLE_HOME/database_app_password`` (:mod:`memoryconsole.instance`); migrations
  create that role when it is missing and set its password when it no longer logs in (an
  install whose password was derived from ``SECRET_KEY``, before it was generated).
* ``MEMORYCONSOLE_DATABASE_NAME`` (embedded only): another database on the embedded server.
* ``MEMORYCONSOLE_DB_ROLE=owner`` makes a process use the owner; the ``memoryconsole`` and
  ``manage.py`` entry points set it for the commands that change the schema.
* ``MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT``: how long one statement of a web request may
  run, waits for locks included (:func:`request_statement_timeout`).
* ``DATABASE_REPLICA_URLS`` (optional, comma-separated): PostgreSQL streaming replicas of the
  primary that lag-tolerant reads may use (:func:`replicas`, :mod:`apps.tenancy.replicas`,
  docs/scaling.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dj_database_url

from . import embedded, instance


@dataclass(frozen=True)
class DatabaseTarget:
    owner: dict[str, Any]
    app: dict[str, Any]
    broker_url: str
    embedded: bool
    description: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def app_role(self) -> str:
        return str(self.app["USER"])


# A web request's statements are cancelled after this many seconds (apps.api.middleware):
# below gunicorn's worker timeout (memoryconsole/gunicorn_conf.py), so a request blocked on a
# lock answers 503 and rolls back instead of its worker being killed mid-request.
REQUEST_STATEMENT_TIMEOUT_DEFAULT = 20.0
# gunicorn's worker timeout stays this much above it: time to roll back and answer.
REQUEST_TIMEOUT_MARGIN = 10


def request_statement_timeout() -> float:
    """``MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT`` in seconds (default 20): a positive number."""
    raw = os.environ.get("MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT", "").strip()
    if not raw:
        return REQUEST_STATEMENT_TIMEOUT_DEFAULT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 24 * 60 * 60:
        raise ValueError(
            "MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT must be a number of seconds above 0 and "
            f"below a day, not {raw!r}"
        )
    return seconds


def _django_entry(url: str) -> dict[str, Any]:
    entry: dict[str, Any] = dict(
        dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    )
    entry["ENGINE"] = "django.db.backends.postgresql"
    entry["ATOMIC_REQUESTS"] = True
    options = entry.setdefault("OPTIONS", {})
    # Django turns psycopg's statement preparation off (None) for connection poolers; that
    # would also refuse an explicit ``prepare=True``. The ORM binds on the client and never
    # prepares whatever this says; only apps.tenancy.context.prepared_cursor's cursors do.
    options.setdefault("prepare_threshold", 5)
    return entry


REPLICA_ALIAS_PREFIX = "replica"
# A replica that does not answer this fast is taken out of rotation (reads use the primary)
# rather than holding a request up.
REPLICA_CONNECT_TIMEOUT = 2


def replicas(app: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``DATABASE_REPLICA_URLS`` as Django database entries ``replica1``, ``replica2``, ... .

    A replica is a physical copy of the primary, so it has the same roles and databases: a
    URL may name only the host and port; the login and the database default to the
    application role's (``app``): row-level security applies on replicas as on the primary.
    Each entry mirrors ``default`` under tests (Django neither creates nor flushes it)."""
    urls = [u.strip() for u in os.environ.get("DATABASE_REPLICA_URLS", "").split(",") if u.strip()]
    entries: dict[str, dict[str, Any]] = {}
    for number, url in enumerate(urls, start=1):
        parsed = _django_entry(url)
        entry = dict(app)
        entry["OPTIONS"] = {
            **app.get("OPTIONS", {}),
            "connect_timeout": REPLICA_CONNECT_TIMEOUT,
            **parsed.get("OPTIONS", {}),  # the URL's own (sslmode, say) win
        }
        entry["HOST"], entry["PORT"] = parsed.get("HOST", ""), parsed.get("PORT", "")
        for key in ("NAME", "USER", "PASSWORD"):
            if parsed.get(key):
                entry[key] = parsed[key]
        # Never the request's transaction: a replica read opens its own (apps.tenancy.replicas).
        entry["ATOMIC_REQUESTS"] = False
        entry["TEST"] = {"MIRROR": "default"}
        entries[f"{REPLICA_ALIAS_PREFIX}{number}"] = entry
    return entries


def resolve(home: Path) -> DatabaseTarget:
    """Where the database is and how each role logs in, from the environment and ``home``;
    computed only: nothing is started, connected to or written."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        pgdata = embedded.pgdata_dir(home)
        socket = quote(str(embedded.socket_dir(home)), safe="")
        # Another database on the same embedded server (benchmarks use their own).
        db = os.environ.get("MEMORYCONSOLE_DATABASE_NAME", "").strip() or embedded.DATABASE_NAME
        owner_url = f"postgresql://{embedded.OWNER_ROLE}@{socket}/{db}"
        app_url = f"postgresql://{embedded.APP_ROLE}@{socket}/{db}"
        broker = f"sqla+postgresql+psycopg://{embedded.OWNER_ROLE}@/{db}?host={socket}"
        return DatabaseTarget(
            owner=_django_entry(owner_url),
            app=_django_entry(app_url),
            broker_url=broker,
            embedded=True,
            description=f"embedded PostgreSQL in {pgdata}",
        )
    owner = _django_entry(url)
    app_url = os.environ.get("DATABASE_APP_URL", "").strip()
    if app_url:
        app = _django_entry(app_url)
    else:
        app = dict(owner)
        app["USER"] = embedded.APP_ROLE
        # None until an entry point has generated it (instance.setup).
        app["PASSWORD"] = instance.read_secret(home / instance.APP_PASSWORD_FILE)
    broker_url = "sqla+" + url.replace("postgres://", "postgresql+psycopg://", 1).replace(
        "postgresql://", "postgresql+psycopg://", 1
    )
    host = owner.get("HOST") or "local socket"
    return DatabaseTarget(
        owner=owner,
        app=app,
        broker_url=broker_url,
        embedded=False,
        description=f"PostgreSQL at {host}/{owner.get('NAME')}",
    )
