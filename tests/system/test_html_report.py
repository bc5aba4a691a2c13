"""The HTML run report (tasks/report/html.py, tasks/report_html/) in headless Chromium, and `ttseval serve`
(ttseval/infra/serve.py): a 1,645-item run renders 40 rows and more as it scrolls, filters and sorts to the expected
items; two runs side by side with their deltas; the server serves only what the reports link to, read-only,
with byte ranges (from S3: tests/unit/test_serve_s3.py). The report of a real demo run is opened in
tests/e2e/test_evaluate_cli.py."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.browser import SCREENSHOTS, chromium
from tests.support.report_runs import SYSTEMS, http_get, serving, write_run
from ttseval.core.config import load_settings
from ttseval.core.store import ArtifactStore
from ttseval.tasks.report import write_full_report


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[ArtifactStore, dict[str, int]]:
    root = tmp_path_factory.mktemp("html") / "store"
    store = ArtifactStore(str(root))
    counts = write_run(store, "big", 1645)
    write_full_report(store, "big", load_settings(store=str(root)), list(SYSTEMS), {"run_id": "big", "baseline": "a"})
    return store, counts


def _rows(driver) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, "#items tbody tr"))


def _count(driver) -> str:
    return driver.find_element(By.ID, "count").text


def test_a_1645_item_run_renders_lazily_filters_and_sorts(large: tuple, tmp_path: Path) -> None:
    store, counts = large
    page = Path(store.path("runs", "big", "html", "index.html"))
    assert store.read_bytes("runs/big/report.md").decode().count(f"html report: file://{page}") == 1
    assets = sum((page.parent / f).stat().st_size for f in ("index.html", "app.js", "style.css", "compare.html"))
    assert assets < 60_000  # the page's own code; data.js is the run
    with chromium(tmp_path) as driver:
        started = time.perf_counter()
        driver.get(page.as_uri())
        WebDriverWait(driver, 30).until(lambda d: _count(d) == "1645 of 1645 items")
        print(f"1,645-item report loaded in {time.perf_counter() - started:.2f} s")
        assert _rows(driver) == 40  # rows are rendered lazily
        assert len(driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")) == 3
        # b's row: its win-rate with a 95% CI, its Bradley-Terry rank and Elo with a CI (values:
        # tests/unit/test_report.py)
        cells = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr:nth-child(2) td")]
        assert re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", cells[-2]), cells
        assert re.fullmatch(r"#\d, \d+ \[\d+, \d+\]", cells[-1]), cells
        driver.execute_script("document.getElementById('more').scrollIntoView()")
        WebDriverWait(driver, 10).until(lambda d: _rows(d) == 80)
        # the items where system b lost, worst first: two clicks
        Select(driver.find_element(By.ID, "f-system")).select_by_value("b")
        Select(driver.find_element(By.ID, "f-verdict")).select_by_value("loss")
        started = time.perf_counter()
        Select(driver.find_element(By.ID, "f-sort")).select_by_value("margin")
        WebDriverWait(driver, 10).until(lambda d: _count(d) == f"{counts['b_losses']} of 1645 items")
        print(f"filter and sort of 1,645 items: {time.perf_counter() - started:.2f} s")
        first = driver.find_element(By.CSS_SELECTOR, "#items tbody tr")
        # margins are baseline - candidate score: 0.8 + (i % 5) / 100 - 0.5, largest where i % 5 == 4
        assert int(first.get_attribute("data-item")[2:]) % 5 == 4
        assert first.find_element(By.CSS_SELECTOR, "del").text == "brown"  # the dropped word, marked
        assert "A = " in first.find_element(By.CSS_SELECTOR, ".verdict summary").text
        Select(driver.find_element(By.ID, "f-verdict")).select_by_value("")
        Select(driver.find_element(By.ID, "f-system")).select_by_value("c")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("failed")
        WebDriverWait(driver, 10).until(lambda d: _count(d) == f"{counts['c_failed']} of 1645 items")
        assert driver.find_element(By.CSS_SELECTOR, "#items tbody tr .badge").text == "failed"
        Select(driver.find_element(By.ID, "f-status")).select_by_value("")
        Select(driver.find_element(By.ID, "f-category")).select_by_value("questions")
        Select(driver.find_element(By.ID, "f-depth")).select_by_value("1")
        expected = sum(1 for i in range(1645) if i % 6 == 1 and i % 4 == 1)
        WebDriverWait(driver, 10).until(lambda d: _count(d) == f"{expected} of 1645 items")
        # the keyboard reaches the filters and the players
        driver.find_element(By.TAG_NAME, "body").click()
        tags = set()
        for _ in range(20):
            driver.switch_to.active_element.send_keys("\t")
            tags.add(driver.switch_to.active_element.tag_name)
        assert {"select", "audio"} <= tags
        SCREENSHOTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / "html-report-1645-items.png"))


def test_two_runs_side_by_side_with_their_deltas(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "store"))
    settings = load_settings(store=str(tmp_path / "store"))
    write_run(store, "night-1", 30)
    write_run(store, "night-2", 30, shift=0.5)  # system a's WER up by 50 points on even items
    for run in ("night-1", "night-2"):
        write_full_report(store, run, settings, list(SYSTEMS), {"run_id": run, "baseline": "a"})
    page = Path(store.path("runs", "night-2", "html", "compare.html"))
    with chromium(tmp_path) as driver:
        driver.get(page.as_uri() + "?a=night-1&b=night-2")
        WebDriverWait(driver, 20).until(lambda d: _count(d) == f"{30 * 3} clips")
        first = driver.find_element(By.CSS_SELECTOR, "#items tbody tr")
        assert first.get_attribute("data-system") == "a" and int(first.get_attribute("data-item")[2:]) % 2 == 0
        assert "WER +50.0 pp" in first.find_element(By.CSS_SELECTOR, ".delta").text
        assert len(first.find_elements(By.TAG_NAME, "audio")) == 2
        Select(driver.find_element(By.ID, "f-system")).select_by_value("b")
        WebDriverWait(driver, 10).until(lambda d: _count(d) == "30 clips")
        assert "WER 0.0 pp" in driver.find_element(By.CSS_SELECTOR, "#items tbody tr .delta").text


def test_serve_is_read_only_serves_only_reports_and_answers_ranges(large: tuple, tmp_path: Path) -> None:
    store, _ = large
    server, base = serving(store.uri)
    try:
        status, _, body = http_get(base + "/")
        assert status == 200 and b'href="runs/big/html/index.html"' in body
        status, headers, body = http_get(base + "/runs/big/html/data.js")
        assert status == 200 and headers["Content-Type"].startswith("text/javascript") and b"TTSEVAL_RUNS" in body
        wav = (
            store.read(  # a clip the page links to
                "big", "synthesis", columns=["audio_sha256", "status"]
            )
            .query("status == 'ok'")["audio_sha256"]
            .iloc[0]
        )
        blob = store.get_audio(wav)
        status, headers, body = http_get(f"{base}/blobs/audio/{wav[:2]}/{wav}.wav", Range="bytes=44-99")
        assert status == 206 and body == blob[44:100] and headers["Content-Range"] == f"bytes 44-99/{len(blob)}"
        assert http_get(f"{base}/blobs/audio/{wav[:2]}/{wav}.wav", Range="bytes=-10")[2] == blob[-10:]
        assert http_get(f"{base}/blobs/audio/{wav[:2]}/{wav}.wav", Range=f"bytes={len(blob)}-")[0] == 416
        for path in (
            "/runs/big/items/",
            "/runs/big/report.md",
            "/runs/big/html/../report.md",
            "/runs/big/html/%2e%2e/report.md",
            "/cache/llm/x.json",
            "/blobs/audio/zz/x.wav",
        ):
            assert http_get(base + path)[0] == 404, path
        request = urllib.request.Request(base + "/runs/big/html/index.html", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405
        with chromium(tmp_path) as driver:  # the page through the server: a player loads its clip
            driver.get(base + "/runs/big/html/index.html")
            WebDriverWait(driver, 30).until(lambda d: _count(d) == "1645 of 1645 items")
            duration = driver.execute_script(
                "const a = document.querySelector('audio'); a.preload = 'metadata'; a.load();"
                "return new Promise(r => a.addEventListener('loadedmetadata', () => r(a.duration)));"
            )
            assert duration == pytest.approx(0.6, abs=0.01)
    finally:
        server.shutdown()
        server.server_close()
