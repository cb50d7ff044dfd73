"""Browser tests: Debian's Chromium, headless, driven by Playwright, on the live server only.

Every page a test opens may talk to the live server and nothing else (a request anywhere
else fails the test: no CDN, no stray fetch), must not open a dialog (an `alert` is how an
injected script would show itself), and must log no JavaScript error. Screenshots go to
FEDPROBE_SCREENSHOT_DIR (the README's are made with docs/screenshots) or a temporary folder.
tests/conftest.py marks every test here `browser`: `pytest -m browser` runs them alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from webapp.accounts.services import user_set_role

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 900}
_BROWSER_TESTS = Path(__file__).parent


class _Chromium:
    """One Chromium for a run of browser tests in a row (a launch and Playwright's start cost
    seconds), stopped as soon as the next test is not a browser test: while Playwright's sync
    API is started, this thread has a running event loop, and tests that call asyncio.run
    would fail (pytest_runtest_teardown below)."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def browser(self) -> Any:
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            if not os.path.exists(CHROMIUM):
                pytest.fail(f"Chromium is not installed at {CHROMIUM}: run bin/setup")
            # Playwright's sync API keeps an event loop in this thread; Django's ORM calls in
            # the tests are still synchronous (Playwright's own documentation for Django tests).
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
            self._playwright = sync_playwright().start()
            self._browser = self._playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
            )
        return self._browser

    def stop(self) -> None:
        if self._playwright is None:
            return
        try:
            if self._browser is not None:
                self._browser.close()
        finally:
            self._playwright.stop()
            self._playwright = self._browser = None
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


_CHROMIUM = _Chromium()


@pytest.fixture
def chromium() -> Any:
    """Headless Chromium, shared by consecutive browser tests (_Chromium)."""
    return _CHROMIUM.browser()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a browser test's own teardown, stop Chromium unless the next test is one too
    (pytest calls this conftest's runtest hooks for tests under tests/browser only)."""
    yield
    if nextitem is None or not nextitem.path.is_relative_to(_BROWSER_TESTS):
        _CHROMIUM.stop()


class PageWatch:
    """What a page did that it should not have: requests elsewhere, dialogs, script errors."""

    def __init__(self) -> None:
        self.foreign_requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []

    def assert_clean(self) -> None:
        assert self.foreign_requests == [], "requests outside the live server"
        assert self.dialogs == [], "a dialog opened (an injected script ran?)"
        assert self.errors == [], "JavaScript errors"


@pytest.fixture
def browser_page(
    chromium: Any, live_server: Any, db: None
) -> Iterator[Callable[[str], tuple[Any, PageWatch]]]:
    """`open(role)`: a new page logged in as a user of that role, and its watch."""
    contexts = []
    watches = []

    def open_as(role: str) -> tuple[Any, PageWatch]:
        user = User.objects.create_user(f"{role}-{len(contexts)}", password="x")
        user_set_role(user=user, role=role)
        client = Client()
        client.force_login(user)
        context = chromium.new_context(viewport=VIEWPORT, accept_downloads=True)
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                    "url": live_server.url,
                }
            ]
        )
        watch = PageWatch()
        context.route("**/*", lambda route: _only_live_server(route, live_server.url, watch))
        page = context.new_page()
        page.on("dialog", lambda dialog: (watch.dialogs.append(dialog.message), dialog.dismiss()))
        page.on("pageerror", lambda error: watch.errors.append(str(error)))
        page.on(
            "console",
            lambda message: message.type == "error" and watch.errors.append(message.text),
        )
        contexts.append(context)
        watches.append(watch)
        return page, watch

    yield open_as
    for context in contexts:
        context.close()


def _only_live_server(route: Any, origin: str, watch: PageWatch) -> None:
    url = route.request.url
    if url.startswith(origin) or url.startswith(("data:", "blob:")):
        route.continue_()
    else:
        watch.foreign_requests.append(url)
        route.abort()


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[[Any, str], Path]:
    """`screenshot(page, name)` saves the page as NAME.png where the README's come from."""
    folder = Path(os.environ.get("FEDPROBE_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
