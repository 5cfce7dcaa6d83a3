"""Browser tests: Playwright for Python driving Debian's Chromium against a live server.

The browser is the system's ``/usr/bin/chromium`` (``apt-get install chromium``; ``.ci/run``
installs it), launched headless with ``--no-sandbox``; no test tool downloads a browser. When
it is missing these tests fail, saying so, rather than skip: a skipped browser suite looks
green in CI while testing nothing.

The live server (pytest-django's ``live_server``) serves the test database from another
thread, so these tests are transactional: their data is committed, and each test ends with a
flush that ``tests/conftest.py`` runs as the owner role. Every test leaves a screenshot of its
last page under ``test-output/screenshots/<test>.png``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
# Long enough for a cold page on a busy machine, short enough to fail fast when broken.
TIMEOUT_MS = 15_000


def _screenshot_path(node: pytest.Item) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", node.name)
    return SCREENSHOTS / f"{name}.png"


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One headless Chromium for this package's tests, closed when they are done.

    While Playwright runs, its sync API keeps an event loop marked running in this thread, and
    Django refuses ORM calls from such a thread unless told it is deliberate: the switch is on
    only while the browser is, so no other test runs with it.
    """
    if not CHROMIUM.exists():
        pytest.fail(
            f"Browser tests need Debian's Chromium at {CHROMIUM}: run `apt-get install -y "
            "chromium` (.ci/run does this). They never download a browser.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
            )
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(
    browser: Any, live_server: Any, request: pytest.FixtureRequest
) -> Iterator[Callable[[Any], Any]]:
    """``new_page(user, width=1280)``: a page at the live server, signed in as ``user`` (or
    anonymous for None). The last page opened is photographed when the test ends, pass or fail."""
    contexts: list[Any] = []
    pages: list[Any] = []

    def open_page(user: Any = None, *, width: int = 1280, bypass_csp: bool = False) -> Any:
        # bypass_csp: only for injecting test tooling (axe-core) into the page; the console's
        # own scripts never need it.
        context = browser.new_context(
            base_url=live_server.url,
            viewport={"width": width, "height": 900},
            bypass_csp=bypass_csp,
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        if user is not None:
            # Sign in without the form (the sign-in test covers the form): a session made by
            # Django's test client, handed to the browser as its cookie.
            client = Client()
            client.force_login(user)
            cookie = client.cookies[settings.SESSION_COOKIE_NAME]
            context.add_cookies(
                [{"name": cookie.key, "value": cookie.value, "url": live_server.url}]
            )
        page = context.new_page()
        pages.append(page)
        return page

    yield open_page
    if pages and not getattr(request.node, "screenshot_taken", False):
        _save_screenshot(pages[-1], request.node)
    for context in contexts:
        context.close()


def _save_screenshot(page: Any, node: pytest.Item) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(_screenshot_path(node)), full_page=True)
    node.screenshot_taken = True  # type: ignore[attr-defined]


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[Any], None]:
    """``screenshot(page)``: photograph the page now (the moment worth showing) instead of
    at the end of the test."""

    def take(page: Any) -> None:
        _save_screenshot(page, request.node)

    return take


@pytest.fixture
def owner_page(new_page: Callable[[Any], Any], owner: Any) -> Any:
    return new_page(owner)


@pytest.fixture
def reviewer_page(new_page: Callable[[Any], Any], reviewer: Any) -> Any:
    return new_page(reviewer)


@pytest.fixture
def member_page(new_page: Callable[[Any], Any], member: Any) -> Any:
    return new_page(member)


@pytest.fixture
def auditor_page(new_page: Callable[[Any], Any], auditor: Any) -> Any:
    return new_page(auditor)


@pytest.fixture
def console_path(tenant: Any) -> Callable[[str], str]:
    """``console_path("credentials")``: a console page's path in ``tenant``."""
    from django.urls import reverse

    def path(name: str, **kwargs: Any) -> str:
        return reverse(f"console:{name}", kwargs={"tenant_slug": tenant.slug, **kwargs})

    return path
