"""The page of a serving agentd in a real browser: signed in as a person clicking the login address, and
what a task's page shows."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from playwright.sync_api import Browser, Page

from runtime.daemon.lock import holder
from tests.helpers.daemon import wait_until
from tests.helpers.port import wait_for_port


def page_of(env: dict) -> tuple[str, str]:
    """The page's address, as the serving agentd announces it next to its pid, and the page token."""
    data_dir = Path(env["AGENTD_DATA_DIR"])
    found = wait_until(lambda: (h := holder(data_dir)) is not None and h[1] is not None and h)
    assert found, "agentd serve never announced its page"
    address = found[1]
    wait_for_port(urlsplit(address).port)
    return address, (data_dir / "page-token").read_text().strip()


@contextlib.contextmanager
def signed_in(browser: Browser, env: dict) -> Iterator[tuple[Page, str]]:
    """A fresh browser context that opened the login address, as a person clicking it would."""
    base, token = page_of(env)
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = context.new_page()
        response = page.goto(f"{base}?token={token}")
        assert response is not None and response.ok, f"the login address answered {response and response.status}"
        assert any(c["httpOnly"] for c in context.cookies()), "no session cookie after the login address"
        yield page, base
    finally:
        # Closed before agentd stops, so each test is about one thing; stopping with a page open has its own.
        context.close()


def phase_shown(page: Page, wanted: str, timeout: float = 40) -> str:
    """The task page's phase once it says `wanted`, or what it says at the deadline. Reloads while it
    waits, so this does not lean on live updates, which a test of their own covers."""
    deadline = time.monotonic() + timeout
    while True:
        shown = (page.locator(".phase").first.text_content() or "").strip()
        if shown == wanted or time.monotonic() > deadline:
            return shown
        page.wait_for_timeout(500)
        page.reload()


def screenshot(page: Page, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000, f"{path} is not a screenshot"
