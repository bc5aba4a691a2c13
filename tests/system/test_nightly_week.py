"""A simulated week: seven real `ttseval nightly` runs against two fake vendors, one of which silently speaks 30%
slower from night 3 on (tests/support/week.py says what is proved), and the week's trends page and its one alert
looked at in Chromium. The four-night version that the development gate runs is
tests/e2e/test_nightly_four_nights.py; the false-alarm rate over many weeks and the nights a slow slide takes are
measured on the pure function (tests/unit/test_metrics_trends.py), not by running nightly hundreds of times."""

from __future__ import annotations

from pathlib import Path

from tests.support.week import check_nights


def test_a_week_flags_the_silent_change_on_night_3_and_nothing_else(
    prefect_api: str, keyed_env: dict[str, str], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support.browser import SCREENSHOTS, chromium, mail_page

    alert = check_nights(7, prefect_api, keyed_env, tmp_path)
    page = tmp_path / "s" / "runs" / "nightly-20261107T020000Z" / "html" / "trends.html"
    with chromium(tmp_path) as driver:
        driver.get(page.as_uri())
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.series"))
        sections = driver.find_elements(By.CSS_SELECTOR, "section.series")
        charts = driver.find_elements(By.CSS_SELECTOR, "section.series svg")
        # a drawn chart per series, each laid out at a readable size, its axes dated by night
        assert len(charts) == len(sections) > 8
        assert all(c.size["width"] > 300 and c.size["height"] > 120 for c in charts)
        assert "2026-11-07 02:00" in charts[0].text and "night (UTC)" in charts[0].text
        # the steps are night 3's rows, dated, the changed voice's canary duration among them
        steps = driver.find_elements(By.CSS_SELECTOR, "td.step")
        rows = [s.find_element(By.XPATH, "./..").text for s in steps]
        assert rows and all("2026-11-03 02:00" in r and "nightly-20261103T020000Z" in r for r in rows), rows
        SCREENSHOTS.mkdir(exist_ok=True)
        driver.set_window_size(1000, 1400)
        duration = next(s for s in sections if "duration_s (fresh clips)" in s.text)
        driver.execute_script("arguments[0].scrollIntoView();", duration)
        driver.save_screenshot(str(SCREENSHOTS / "trends-week.png"))

        # the night-3 alert as a mail client shows it, and its report link opens the night's report
        (tmp_path / "alert.html").write_text(mail_page(alert["subject"], alert["body"]), encoding="utf-8")
        driver.set_window_size(1000, 700)
        driver.get((tmp_path / "alert.html").as_uri())
        assert driver.find_element(By.TAG_NAME, "h1").text == alert["subject"]
        driver.save_screenshot(str(SCREENSHOTS / "alert-week.png"))
        [report] = [a for a in driver.find_elements(By.TAG_NAME, "a") if a.text.endswith("/html/index.html")]
        report.click()
        WebDriverWait(driver, 30).until(lambda d: d.current_url.endswith("nightly-20261103T020000Z/html/index.html"))
        assert "nightly-20261103T020000Z" in driver.find_element(By.TAG_NAME, "body").text
