"""Headless Chromium for the tests that drive web pages (the Prefect UI, the HTML report), with the flags that
work on these machines (no GPU, no network but loopback, root). Needs Debian's chromium + chromium-driver and
selenium, which `scripts/setup.sh test` installs."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.support.harness import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
]
# screenshots the tests keep, for a person to look at after a run (git ignores the folder)
SCREENSHOTS = ROOT / "test-artifacts"


def require_chromium() -> None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            "the browser tests need Debian's chromium and chromium-driver: apt-get install chromium "
            "chromium-driver (scripts/setup.sh test installs them)"
        )


@contextlib.contextmanager
def chromium(folder: Path | None = None, log: Path | None = None) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with its own profile (under `folder`, else a temporary one), closed afterwards."""
    require_chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="chromium-", dir=folder)
    opts.add_argument(f"--user-data-dir={profile}")
    service = Service(CHROMEDRIVER, log_output=str(log) if log else None)
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def mail_page(subject: str, body: str) -> str:
    """An alert as a mail client shows a plain-text message: its subject as the heading, its body as preformatted
    text with the URLs in it made links (what clients do with text/plain); an HTML page to open in Chromium."""
    import html
    import re

    linked = re.sub(r"((?:https?|file)://\S+)", r'<a href="\1">\1</a>', html.escape(body))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>alert</title><style>"
        "body{font-family:sans-serif;margin:24px;max-width:960px}h1{font-size:18px}"
        "pre{white-space:pre-wrap;font-size:14px;line-height:1.4}</style></head><body>"
        f"<p>From: ttseval nightly</p><h1>{html.escape(subject)}</h1><pre>{linked}</pre></body></html>"
    )
