"""The product's name and version, as the installed distribution says them."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def version() -> str:
    """The version of this checkout (its ``pyproject.toml``) or, installed as a wheel, of the
    installed distribution: an editable install's metadata keeps the version it was installed
    at, which a checkout moved on since would misreport."""
    if PYPROJECT.exists():
        with PYPROJECT.open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])
    return metadata.version("memoryconsole")
