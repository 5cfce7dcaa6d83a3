"""The embedded PostgreSQL's own settings."""

from __future__ import annotations

import os

import pytest

from memoryconsole import embedded, instance


@pytest.mark.parametrize(
    ("memory_mb", "expected"),
    [(256, "128MB"), (1024, "256MB"), (8192, "2048MB"), (65536, "4096MB")],
)
def test_shared_buffers_take_a_quarter_of_the_memory_within_bounds(
    monkeypatch, memory_mb, expected
):
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": memory_mb * 256}
    monkeypatch.setattr(embedded.os, "sysconf", lambda name: pages[name])
    assert embedded.shared_buffers() == expected


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="an external database")
def test_bootstrap_sets_them_for_the_servers_next_start(db):
    # The test session has started (and so bootstrapped) the embedded server.
    auto_conf = instance.home() / "pgdata" / "postgresql.auto.conf"
    assert f"shared_buffers = '{embedded.shared_buffers()}'" in auto_conf.read_text()
