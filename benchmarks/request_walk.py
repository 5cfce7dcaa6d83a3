"""The files one request walks through: how many of the product's modules a reader follows.

    .venv/bin/python benchmarks/request_walk.py [--request write|search|delete|all]

On a fresh database of the embedded PostgreSQL, one tenant and an agent credential; one
request of each kind is sent first (imports, plan caches), then the same kind again under
``sys.setprofile``: every Python function called while Django's test client handles it is
noted, and the table lists the product's files among them (under ``apps/`` and
``memoryconsole/``; migrations, tests and benchmarks are never on the path), grouped by app,
with the number of the product's functions called in each. A count, not a time: the same on
a busy machine as on a quiet one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.harness import bench_database, setup_django, table
from benchmarks.request_path import Api, search_body, setup_tenant, write_body

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = (ROOT / "apps", ROOT / "memoryconsole")


def walk(request: Callable[[], object]) -> Counter[str]:
    """The product's files the request's calls ran in, with the number of calls in each."""
    calls: Counter[str] = Counter()
    product = tuple(str(p) + "/" for p in PRODUCT)

    def note(frame: Any, event: str, _arg: object) -> None:
        if event == "call":
            filename = frame.f_code.co_filename
            if filename.startswith(product):
                calls[str(Path(filename).relative_to(ROOT))] += 1

    sys.setprofile(note)
    try:
        request()
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request", choices=("write", "search", "delete", "all"), default="all")
    parser.add_argument("--list", action="store_true", help="and every file with its calls")
    args = parser.parse_args()
    rng = random.Random(7)  # noqa: S311 - test data

    with bench_database("request_walk"):
        setup_django()
        from django.conf import settings

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
        _tenant, token = setup_tenant()
        api = Api(token)
        ids = [api.post("/api/v1/records", write_body(n, rng), 201)["id"] for n in range(4)]
        fresh = itertools.count(len(ids))  # a new fact each time: a write that creates
        requests: dict[str, Callable[[], object]] = {
            "write": lambda: api.post("/api/v1/records", write_body(next(fresh), rng), 201),
            "search": lambda: api.post("/api/v1/search", search_body(0, rng), 200),
            "delete": lambda: api.delete(f"/api/v1/records/{ids.pop()}"),
        }
        names = list(requests) if args.request == "all" else [args.request]
        rows = []
        for name in names:
            requests[name]()  # warm: imports and caches, as a running server has them
            calls = walk(requests[name])
            apps = Counter(
                path.split("/")[1] if path.startswith("apps/") else "memoryconsole"
                for path in calls
            )
            rows.append(
                [
                    name,
                    len(calls),
                    sum(calls.values()),
                    len(apps),
                    ", ".join(f"{app} {n}" for app, n in sorted(apps.items())),
                ]
            )
            if args.list:
                print(f"\n{name}:")
                print(json.dumps(dict(sorted(calls.items())), indent=1))
        print(
            "\nThe product's files a request passes"
            " (functions called in them under sys.setprofile)\n"
        )
        print(table(["request", "files", "calls", "apps", "files per app"], rows))


if __name__ == "__main__":
    main()
