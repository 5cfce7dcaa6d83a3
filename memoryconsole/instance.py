"""The instance's home, and what every entry point does before the settings are used.

An instance keeps its state under ``$MEMORYCONSOLE_HOME`` (default ``var/`` beside the
project): the embedded PostgreSQL, and secrets generated once (files readable by their owner
only, never logged):

* ``secret_key``: Django's ``SECRET_KEY`` when the environment sets none;
* ``database_app_password``: the application role's password on a server named by
  ``DATABASE_URL`` when ``DATABASE_APP_URL`` names no login of its own. It is independent of
  ``SECRET_KEY``, so rotating that key never locks the application out of its database.

Settings only read these (:func:`read_secret`). The entry points (``memoryconsole`` and
``manage.py``, ``memoryconsole.wsgi``, the Celery worker and beat, the test session) call
:func:`setup` first, which writes what is missing and starts the embedded server.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

# File names, not secrets.
SECRET_KEY_FILE = "secret_key"  # noqa: S105
APP_PASSWORD_FILE = "database_app_password"  # noqa: S105
METRICS_DIRECTORY = "metrics"
# prometheus_client's: set before it is imported, it makes every process count into files there.
METRICS_DIRECTORY_ENV = "PROMETHEUS_MULTIPROC_DIR"


def home() -> Path:
    """``$MEMORYCONSOLE_HOME``, or ``var/`` beside the project."""
    configured = os.environ.get("MEMORYCONSOLE_HOME")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "var"


def metrics_directory_fresh(name: str) -> Path:
    """An empty directory under the home for the metrics of processes about to start
    together (``up``'s web workers and Celery worker: prometheus_client's multiprocess mode
    keeps one file per process and sums them at each scrape). Emptied first, as that mode
    asks: the files of processes that ran before would pile up and add their counts in."""
    directory = home() / METRICS_DIRECTORY / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, mode=0o700)
    return directory


def read_secret(path: Path) -> str | None:
    """The secret kept in ``path``, or None before :func:`setup` has written it."""
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def ensure_secret(path: Path) -> str:
    """The secret in ``path``, generated now if missing. Processes starting together (web
    workers) agree on one: the file appears whole (a hard link of a finished temporary file)
    and only the first link wins."""
    existing = read_secret(path)
    if existing:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_urlsafe(50))
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another process was first: use its secret
    finally:
        temporary.unlink()
    value = read_secret(path)
    assert value, f"{path} is empty"
    return value


def uses_generated_app_password() -> bool:
    """An external server whose application login the environment does not give."""
    return bool(os.environ.get("DATABASE_URL", "").strip()) and not (
        os.environ.get("DATABASE_APP_URL", "").strip()
    )


def setup(*, database: bool = True) -> None:
    """Prepare the instance for this process: its home and generated secrets and, with no
    ``DATABASE_URL`` and unless ``database`` is false, the embedded PostgreSQL (started, or
    attached to, and held until this process exits)."""
    where = home()
    # static/: collectstatic's target, which whitenoise looks at even when it serves from the
    # packages (it warns about a missing one).
    (where / "static").mkdir(parents=True, exist_ok=True)
    if not os.environ.get("SECRET_KEY", "").strip():
        ensure_secret(where / SECRET_KEY_FILE)
    if uses_generated_app_password():
        ensure_secret(where / APP_PASSWORD_FILE)
    if database and not os.environ.get("DATABASE_URL", "").strip():
        from memoryconsole import embedded

        embedded.start(where)
