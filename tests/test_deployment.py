"""docker-compose.yml and the Dockerfile agree with the code they deploy.

No container engine runs in CI, so these tests read the files: every variable the app
services set is one the settings read (and every one they read is set), every command names
a module, app or management command that exists, and the services wait for what they need.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# The modules settings.py runs at import (settings itself, database, embedded server).
SETTINGS_MODULES = ("settings.py", "database.py", "embedded.py")
APP_SERVICES = ("migrate", "web", "worker", "beat")
# Read by the settings but deliberately not set by the deployment, each with its reason. A new
# variable must either be set in docker-compose.yml or be added here.
NOT_FOR_DEPLOYMENT = {
    "MEMORYCONSOLE_DB_ROLE": "set by the memoryconsole entry point for schema commands",
    "MEMORYCONSOLE_DATABASE_NAME": "selects a database on the embedded server only",
    "MEMORYCONSOLE_WORK_STALLED_AFTER": "tuning: the default fits production",
    "MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER": "tuning: the default fits production",
    "MEMORYCONSOLE_API_AUTH_FAILURE_LIMIT": "tuning: the default fits production",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return dict(compose["services"])


def environment_names_read() -> set[str]:
    """Names the settings read: ``os.environ.get("X")``, ``os.environ["X"]``,
    ``os.getenv("X")`` and the ``_env_*("X", ...)`` helpers, found in the source."""
    names: set[str] = set()
    for filename in SETTINGS_MODULES:
        tree = ast.parse((ROOT / "memoryconsole" / filename).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args and _reads_environment(node.func):
                key: ast.AST = node.args[0]
            elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
                key = node.slice
            else:
                continue
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
    return names


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _reads_environment(func: ast.AST) -> bool:
    if isinstance(func, ast.Attribute):
        if func.attr == "get" and _is_os_environ(func.value):
            return True
        return func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os"
    return isinstance(func, ast.Name) and func.id.startswith("_env_")


def _documented_names() -> set[str]:
    settings_module = importlib.import_module("memoryconsole.settings")
    docstring = settings_module.__doc__ or ""
    listed = docstring.split("Environment variables read here", 1)[1]
    return set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", listed))


def _command(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def _option(argv: list[str], *names: str) -> str | None:
    """The value of ``--name value`` / ``--name=value`` / ``-A value`` in ``argv``."""
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _url(value: str) -> Any:
    """Parse a URL whose parts may be ``${VARIABLE...}`` substitutions."""
    return urlsplit(re.sub(r"\$\{[^}]*\}", "placeholder", value))


def _depends_on(service: dict[str, Any]) -> dict[str, str]:
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        return dict.fromkeys(depends, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in depends.items()}


def _volume_names(service: dict[str, Any]) -> dict[str, str]:
    """``{volume name: mount path}`` for the named volumes ``service`` mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = str(volume).split(":")[:2]
        mounts[source] = target
    return mounts


# --- services and environment -----------------------------------------------------------------


def test_it_defines_every_service(services: dict[str, Any]) -> None:
    assert set(services) >= {"db", "redis", *APP_SERVICES}


def test_it_finds_the_names_the_settings_read() -> None:
    # Guards the parser itself: if this fails, the checks below would prove nothing.
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS"} <= (
        environment_names_read()
    )


def test_it_documents_every_variable_the_settings_read() -> None:
    assert environment_names_read() <= _documented_names()


@pytest.mark.parametrize("name", APP_SERVICES)
def test_it_sets_only_variables_the_settings_read(services: dict[str, Any], name: str) -> None:
    environment = services[name].get("environment") or {}
    unknown = set(environment) - environment_names_read()
    assert not unknown, f"{name} sets variables no setting reads: {sorted(unknown)}"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_it_sets_every_variable_production_needs(services: dict[str, Any], name: str) -> None:
    environment = services[name].get("environment") or {}
    missing = environment_names_read() - set(NOT_FOR_DEPLOYMENT) - set(environment)
    assert not missing, f"{name} does not set {sorted(missing)}"


def test_it_points_the_app_at_the_compose_database_and_redis(services: dict[str, Any]) -> None:
    environment = services["web"]["environment"]
    database = _url(environment["DATABASE_URL"])
    assert database.scheme in {"postgres", "postgresql"}
    assert database.hostname == "db"
    assert database.path.lstrip("/") == services["db"]["environment"]["POSTGRES_DB"]
    assert database.username == services["db"]["environment"]["POSTGRES_USER"]
    broker = _url(environment["CELERY_BROKER_URL"])
    assert broker.scheme == "redis"
    assert broker.hostname == "redis"
    assert environment["DEBUG"].lower() in {"false", "0", "no", "off"}
    assert environment["SECRET_KEY"].startswith("${SECRET_KEY:?"), "SECRET_KEY must be required"


# --- commands ---------------------------------------------------------------------------------


def _console_script(name: str) -> None:
    """The image runs console scripts installed by ``pip install .``; so does this venv."""
    assert shutil.which(name, path=str(Path(sys.executable).parent)), f"no {name} script"


def test_it_migrates_with_an_existing_command_as_the_owner(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.management import get_commands

    from memoryconsole.cli import prepare_environment

    argv = _command(services["migrate"])
    assert argv[0] == "memoryconsole"
    _console_script("memoryconsole")
    monkeypatch.setenv("MEMORYCONSOLE_DB_ROLE", "app")  # restored after the test
    django_argv = prepare_environment(list(argv))
    assert django_argv[1] == "migrate"
    assert django_argv[1] in get_commands()
    assert os.environ["MEMORYCONSOLE_DB_ROLE"] == "owner"
    assert services["migrate"]["restart"] == "no"


def test_it_serves_an_existing_wsgi_application(services: dict[str, Any]) -> None:
    argv = _command(services["web"])
    assert argv[0] == "gunicorn"
    _console_script("gunicorn")
    [target] = [arg for arg in argv[1:] if not arg.startswith("-")]
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, attribute or "application"))
    bind = _option(argv, "--bind", "-b")
    assert bind is not None
    port = bind.rsplit(":", 1)[1]
    assert any(str(mapping).endswith(f":{port}") for mapping in services["web"]["ports"])


@pytest.mark.parametrize(("name", "subcommand"), [("worker", "worker"), ("beat", "beat")])
def test_it_runs_celery_on_the_real_app(
    services: dict[str, Any], name: str, subcommand: str
) -> None:
    from celery.app.utils import find_app

    from memoryconsole.celery import app

    argv = _command(services[name])
    assert argv[0] == "celery"
    _console_script("celery")
    assert subcommand in argv
    app_name = _option(argv, "-A", "--app")
    assert app_name is not None
    assert find_app(app_name) is app


def test_it_keeps_the_beat_schedule_in_the_database(services: dict[str, Any]) -> None:
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULER == "django_celery_beat.schedulers:DatabaseScheduler"
    assert _option(_command(services["beat"]), "--schedule", "-s") is None


# --- images, health checks, volumes, ordering -------------------------------------------------


def test_it_runs_postgresql_with_pgvector_and_checks_it(services: dict[str, Any]) -> None:
    db = services["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert "/var/lib/postgresql/data" in _volume_names(db).values()


def test_it_runs_redis_and_checks_it(services: dict[str, Any]) -> None:
    redis = services["redis"]
    assert redis["image"].startswith("redis:")
    assert redis["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    assert "/data" in _volume_names(redis).values()


def test_it_declares_every_named_volume(compose: dict[str, Any], services: dict[str, Any]) -> None:
    used = {name for service in services.values() for name in _volume_names(service)}
    named = {name for name in used if not name.startswith((".", "/"))}
    assert named <= set(compose.get("volumes") or {})


def test_it_checks_the_web_service_through_the_health_endpoint(services: dict[str, Any]) -> None:
    from django.urls import reverse

    test = " ".join(services["web"]["healthcheck"]["test"])
    assert reverse("api-health") in test
    assert "curl" in test
    # The image must contain the tool the health check runs.
    assert re.search(r"apt-get install[^\n]*\bcurl\b", DOCKERFILE.read_text())


def test_it_starts_the_app_after_its_dependencies(services: dict[str, Any]) -> None:
    assert _depends_on(services["migrate"]) == {"db": "service_healthy"}
    for name in ("web", "worker", "beat"):
        depends = _depends_on(services[name])
        assert depends.get("db") == "service_healthy", name
        assert depends.get("redis") == "service_healthy", name
        assert depends.get("migrate") == "service_completed_successfully", name


def test_it_builds_every_app_service_from_the_dockerfile(services: dict[str, Any]) -> None:
    for name in APP_SERVICES:
        build = services[name].get("build")
        context = build.get("context") if isinstance(build, dict) else build
        assert context == ".", name
        assert (ROOT / context / "Dockerfile").exists()


# --- Dockerfile -------------------------------------------------------------------------------


def test_it_builds_a_slim_image_that_does_not_run_as_root() -> None:
    text = DOCKERFILE.read_text()
    instructions = [line.strip() for line in text.splitlines() if line.strip()]
    instructions = [line for line in instructions if not line.startswith("#")]
    assert instructions[0] == "FROM python:3.12-slim"
    assert re.search(r"^RUN pip install \.", text, flags=re.MULTILINE)
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users, "no USER: the container would run as root"
    assert users[-1] not in {"root", "0"}
    assert re.search(rf"useradd\b[^\n]*\b{re.escape(users[-1])}\b", text)


def test_it_keeps_local_state_out_of_the_image() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "var", ".env"} <= ignored
    assert "README.md" not in ignored  # pyproject's readme: pip install . needs it


# --- production settings ----------------------------------------------------------------------


def test_it_passes_the_deploy_check_with_the_compose_environment(
    services: dict[str, Any], tmp_path: Path
) -> None:
    """`check --deploy` is clean with the environment compose gives the app."""
    environment = {
        name: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))
        for name, value in services["web"]["environment"].items()
    }
    environment.update(
        {
            "PATH": os.environ["PATH"],
            "SECRET_KEY": "k" * 30 + "-production-like-secret-" + "x" * 30,
            "POSTGRES_PASSWORD": "unused",
            "DATABASE_URL": "postgresql://memoryconsole:unused@127.0.0.1:1/memoryconsole",
            "MEMORYCONSOLE_HOME": str(tmp_path),
        }
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
