"""The Prefect UI of the local stack, driven in headless Chromium with selenium.

Open the evaluate/adhoc deployment page, Run > Custom run, fill the generated form (dataset, systems, run_id),
submit, follow the run to Completed, then find the report artifact `ttseval-report-<run-id>` on the UI's
Artifacts page and open it. On failure a screenshot and the page source land in the stack's tmp folder.

Needs Debian's chromium + chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver) and selenium, which
`scripts/setup.sh test` installs; without them the tests fail and say what to install. Selectors are the visible
texts (button labels, property labels, placeholders), with explicit waits: the UI is a Vue single-page app that
renders after its API calls return.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import chromium, require_chromium
from tests.support.stack_fixtures import (
    SYSTEMS,
    api,
    flow_run_logs,
    new_run_id,
    read_table,
    report_artifact,
    wait_flow_run,
)
from ttseval.infra.stack import StackInfo

WAIT_S = 45


@pytest.fixture(scope="module", autouse=True)
def _browser_installed() -> None:
    require_chromium()


@pytest.fixture(scope="module")
def browser(stack: StackInfo) -> Iterator[webdriver.Chrome]:
    with chromium(stack.folder, stack.folder / "logs" / "chromedriver.log") as driver:
        yield driver


# Installed before submitting: when a "View run" button appears (the new run's toast; the UI may stack the same
# toast twice, the last is on top), keep the toast's text and click the button.
FOLLOW_TOAST_JS = """
sessionStorage.removeItem('ttsevalToast');
new MutationObserver((changes, observer) => {
  const buttons = [...document.querySelectorAll('button')].filter(b => b.textContent.trim() === 'View run');
  if (!buttons.length) return;
  observer.disconnect();
  const button = buttons[buttons.length - 1];
  let toast = button;  // the smallest element around the button that holds the toast's message
  while (toast.parentElement && toast !== document.body && !toast.innerText.includes('scheduled to start')) {
    toast = toast.parentElement;
  }
  sessionStorage.setItem('ttsevalToast', toast.innerText);
  button.click();
}).observe(document.body, {childList: true, subtree: true});
"""


# The page's API requests that answered 5xx or never got an answer (responseStatus 0), from the browser's resource
# timings (Chromium 109+ records each response's status there).
FAILED_REQUESTS_JS = """
return performance.getEntriesByType('resource')
  .filter(e => e.name.includes('/api/') && (e.responseStatus === 0 || e.responseStatus >= 500))
  .map(e => `${e.responseStatus} ${e.name}`);
"""


class Page:
    """Small helpers over the driver: waits by visible text, label-addressed form fields."""

    def __init__(self, driver: webdriver.Chrome, stack: StackInfo) -> None:
        self.d, self.stack = driver, stack
        self.wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))

    def open(self, path: str) -> None:
        self.d.get(self.stack.ui_url + path)

    def visible(self, xpath: str) -> WebElement:
        return self.wait.until(EC.visibility_of_element_located((By.XPATH, xpath)))

    def click(self, xpath: str) -> None:
        """Click the element once it is clickable; retry while an animation (a toast sliding in) covers it."""
        element = self.wait.until(EC.element_to_be_clickable((By.XPATH, xpath)))
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        for _ in range(10):
            try:
                self.wait.until(EC.element_to_be_clickable((By.XPATH, xpath))).click()
                return
            except ElementClickInterceptedException:
                time.sleep(0.5)
        self.d.execute_script("arguments[0].click()", self.wait.until(EC.element_to_be_clickable((By.XPATH, xpath))))

    def submit(self, run_id: str) -> None:
        """Submit the run form and follow the new run's toast to its page.

        The toast lives a few seconds; on a loaded machine a poll from here can miss it, so the page itself clicks
        the toast's View run button the moment it appears and records the toast's text (FOLLOW_TOAST_JS).

        A fresh-clone suite once saw Prefect's own "Oops. Something went wrong." toast after Submit (the UI shows it
        when any API call answers 5xx or fails at the network level) and no flow run created: the server, on a
        2-core machine also running a week of nightly runs, failed a request. A user would press Submit again, and
        so does this, once, and only when the server holds no run with this run id (so no run is made twice); the
        failed requests are printed either way, from the page's own resource timings."""
        for attempt in (1, 2):
            self.d.execute_script(FOLLOW_TOAST_JS)
            self.click("//button[@type='submit' and normalize-space()='Submit']")
            try:
                self.wait.until(EC.url_contains("/runs/flow-run/"))
                return
            except TimeoutException:
                failed = self.d.execute_script(FAILED_REQUESTS_JS)
                oops = self.d.find_elements(By.XPATH, "//*[normalize-space()='Oops. Something went wrong.']")
                held = _runs_with_run_id(self.stack, run_id)
                print(
                    f"Submit {attempt} did not reach a run page: Prefect's error toast "
                    f"{'shown' if oops else 'absent'}; requests that failed: {failed}; {held}"
                )
                if attempt == 2 or not oops or not held.endswith(": none"):
                    raise
            # the toast's countdown ring lies over its close button, so a pointer click lands on the ring
            # (ElementClickInterceptedException); the button's own click() closes it
            for close in self.d.find_elements(
                By.XPATH, "//button[@aria-label='Close' or contains(@class,'toast__close')]"
            ):
                if close.is_displayed():
                    self.d.execute_script("arguments[0].click()", close)
            with contextlib.suppress(TimeoutException):  # gone before Submit is pressed again, not over it
                WebDriverWait(self.d, 10).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".p-toast__close-btn"))

    def button(self, text: str) -> str:
        return f"//button[normalize-space()='{text}']"

    def prop(self, name: str) -> WebElement:
        """The block of the run form for parameter `name` (its label reads 'name' or 'name (Optional)')."""
        return self.visible(
            f"//span[contains(@class,'schema-form-property__label') and (normalize-space()='{name}'"
            f" or starts-with(normalize-space(), '{name} ('))]"
            "/ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' p-label ')][1]"
        )

    def type_into(self, element: WebElement, text: str) -> None:
        # select-all + delete fires the input events Vue's v-model listens to (element.clear() does not)
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        element.click()
        element.send_keys(Keys.CONTROL, "a")
        element.send_keys(Keys.DELETE)
        element.send_keys(text)
        self.wait.until(lambda _: element.get_property("value") == text)

    def set_text(self, name: str, text: str) -> None:
        self.type_into(self.prop(name).find_element(By.TAG_NAME, "textarea"), text)

    def set_list(self, name: str, values: list[str]) -> None:
        """A list parameter: delete surplus items with their trash button, add missing ones, type each value."""
        items = lambda: self.prop(name).find_elements(By.CSS_SELECTOR, ".schema-form-property-array-item")  # noqa: E731
        while len(items()) > len(values):
            n = len(items())
            trash = items()[-1].find_element(By.CSS_SELECTOR, ".schema-form-property-array-item__control > button")
            self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", trash)
            trash.click()
            self.wait.until(lambda _, n=n: len(items()) == n - 1)
        while len(items()) < len(values):
            n = len(items())
            add = self.prop(name).find_element(By.XPATH, ".//button[normalize-space()='Add item']")
            self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", add)
            add.click()
            self.wait.until(lambda _, n=n: len(items()) == n + 1)
        for item, value in zip(items(), values):
            self.type_into(item.find_element(By.TAG_NAME, "textarea"), value)


def _evidence(driver: webdriver.Chrome, folder: Path, name: str) -> str:
    shot, html = folder / f"{name}.png", folder / f"{name}.html"
    try:
        driver.save_screenshot(str(shot))
        html.write_text(driver.page_source)
    except Exception as e:  # noqa: BLE001 - evidence for another failure: the browser itself may be gone
        return f"(no screenshot: {e})"
    return f"screenshot {shot}, page source {html}, url {driver.current_url}"


def test_custom_run_from_the_ui(
    stack: StackInfo, deployed: list[str], tiny_dataset: Path, browser: webdriver.Chrome
) -> None:
    page = Page(browser, stack)
    run_id = new_run_id("ui")
    step = "start"
    try:
        # 1. the adhoc deployment page
        step = "open the evaluate/adhoc deployment page"
        deployment = api(stack, "/deployments/name/evaluate/adhoc")
        page.open(f"/deployments/deployment/{deployment['id']}")
        page.visible("//*[normalize-space()='adhoc']")

        # 2. Run > Custom run
        step = "click Run > Custom run"
        page.click(page.button("Run"))
        page.click("//*[normalize-space()='Custom run']")
        page.wait.until(EC.url_contains("/run"))

        # 3. the form generated from the flow's signature
        step = "fill the dataset field"
        page.set_text("dataset", str(tiny_dataset))
        step = "fill the systems list"
        page.set_list("systems", SYSTEMS)
        step = "fill the run_id field"
        page.set_text("run_id", run_id)
        # 4. the toast links to the new flow run
        step = "submit the form"
        page.submit(run_id)
        step = "follow the toast's View run link"
        toast = browser.execute_script("return sessionStorage.getItem('ttsevalToast')")
        assert toast and "scheduled to start" in toast, toast
        flow_run_id = browser.current_url.split("/runs/flow-run/")[1].split("?")[0].strip("/")
        run = api(stack, f"/flow_runs/{flow_run_id}")
        assert run["parameters"]["run_id"] == run_id
        assert run["parameters"]["systems"] == SYSTEMS
        assert run["parameters"]["dataset"] == str(tiny_dataset)

        # 5. the run completes; the flow run page says so
        step = "wait for the flow run to complete"
        run = wait_flow_run(stack, flow_run_id)
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}: {flow_run_logs(stack, flow_run_id)}"
        browser.refresh()
        page.visible("//*[normalize-space()='Completed']")
        assert len(read_table(stack, run_id, "synthesis")) == len(SYSTEMS) * 3

        # 6. the report artifact on the Artifacts page
        step = "find the report artifact on the Artifacts page"
        key = f"ttseval-report-{run_id}"
        assert report_artifact(stack, run_id) is not None, f"no artifact {key} in the API"
        deadline = time.monotonic() + 30
        while True:  # the list may lag the API by a refresh
            page.open("/artifacts")
            search = page.visible("//input[@placeholder='Search artifacts']")
            search.send_keys(key)
            try:
                WebDriverWait(browser, 10).until(
                    EC.element_to_be_clickable((By.XPATH, f"//*[normalize-space()='{key}']"))
                )
                break
            except TimeoutException:
                if time.monotonic() > deadline:
                    raise
        page.click(f"//*[normalize-space()='{key}']")
        page.wait.until(EC.url_contains(f"/artifacts/key/{key}"))
        step = "open the artifact's latest version"
        page.click("//a[contains(@href, '/artifacts/artifact/')]")
        page.wait.until(EC.url_contains("/artifacts/artifact/"))
        page.visible(f"//*[contains(normalize-space(), 'ttseval report: run {run_id}')]")
        body = browser.find_element(By.TAG_NAME, "body").text
        for system in SYSTEMS:
            assert system in body, f"{system} missing from the rendered report"
    except BaseException as e:
        where = _evidence(browser, stack.folder, f"ui-failure-{run_id}")
        raise AssertionError(
            f"UI step '{step}' failed: {type(e).__name__}: {e}\n{where}\n{_runs_with_run_id(stack, run_id)}"
        ) from e


def _runs_with_run_id(stack: StackInfo, run_id: str) -> str:
    """What the server holds for this run id: tells a submit that never reached it from a toast the page missed."""
    try:
        # not the nightly deployment's scheduled runs of the coming nights (up to 100 of them)
        runs = api(
            stack,
            "/flow_runs/filter",
            {
                "limit": 200,
                "sort": "EXPECTED_START_TIME_DESC",
                "flow_runs": {
                    "expected_start_time": {"before_": (datetime.now(UTC) + timedelta(minutes=10)).isoformat()}
                },
            },
        )
    except Exception as e:  # noqa: BLE001 - evidence for another failure: the server itself may be the problem
        return f"(flow runs not readable: {e})"
    mine = [f"{r['id']} {r['state_name']}" for r in runs if (r.get("parameters") or {}).get("run_id") == run_id]
    return f"flow runs with run_id {run_id}: {mine or 'none'}"


def test_a_pushed_dataset_and_clip_folder_run_from_the_ui(
    stack: StackInfo, deployed: list[str], tiny_dataset: Path, browser: webdriver.Chrome, tmp_path: Path
) -> None:
    """The items file and the clips are on the user's side; `datasets push` and `systems push` (with the
    stack's PREFECT_API_URL, as a user's shell would have it) put them in the store and into the adhoc form, whose
    description lists them; the run chosen in the form reads nothing but the store, and the report names the
    label. A choice that is not registered is refused by the flow's preflight before any work."""
    import json
    import shutil

    import numpy as np
    import soundfile as sf

    from tests.support.harness import cli_env, run_cli
    from tests.support.stack_fixtures import ENGLISH_ITEMS, run_deployment_and_wait

    user = tmp_path / "laptop"  # the user's side: copied here, deleted after the push
    (user / "clips").mkdir(parents=True)
    shutil.copy(tiny_dataset, user / "items.jsonl")
    t = np.arange(8000) / 16000
    for i, item_id in enumerate(ENGLISH_ITEMS):
        sf.write(user / "clips" / f"{item_id}.wav", 0.3 * np.sin(2 * np.pi * (200 + 60 * i) * t), 16000)
    env = cli_env(stack.api_url) | stack.env()
    label, name = new_run_id("rec"), new_run_id("mine")
    pushed = run_cli(
        ["datasets", "push", "items.jsonl", "--name", name, "--version", "v1"], env, cwd=user, timeout_s=300
    )
    assert pushed.returncode == 0 and "the evaluate/adhoc run form now offers" in pushed.stdout, pushed.stderr[-3000:]
    pushed = run_cli(["systems", "push", "--label", label, "--dir", "clips"], env, cwd=user, timeout_s=300)
    assert pushed.returncode == 0 and "the evaluate/adhoc run form now offers" in pushed.stdout, pushed.stderr[-3000:]
    shutil.rmtree(user)
    clips = json.loads(s3_object(stack, f"systems/{label}/manifest.json"))["clips"]
    assert sorted(clips) == sorted(ENGLISH_ITEMS)
    systems = [f"pushed:{label}", "espeak-ng"]

    # a wrong choice: the flow refuses it before any work, and says what is registered
    refused = run_deployment_and_wait(
        stack, "evaluate/adhoc", {"dataset": f"{name}@v2", "systems": systems, "run_id": new_run_id("refused")}
    )
    message = refused.state.message or ""
    assert refused.state.is_failed() and f"dataset {name}@v2 is not in store" in message and "versions: v1" in message
    refused = run_deployment_and_wait(
        stack, "evaluate/adhoc", {"dataset": f"{name}@v1", "systems": ["pushed:nope"], "run_id": new_run_id("refused")}
    )
    assert refused.state.is_failed() and "no system 'nope' was pushed" in (refused.state.message or "")
    assert f"pushed:{label}" in refused.state.message

    page = Page(browser, stack)
    run_id = new_run_id("ui-pushed")
    step = "start"
    try:
        step = "open the adhoc deployment's custom run form"
        deployment = api(stack, "/deployments/name/evaluate/adhoc")
        page.open(f"/deployments/deployment/{deployment['id']}")
        page.visible("//*[normalize-space()='adhoc']")
        page.click(page.button("Run"))
        page.click("//*[normalize-space()='Custom run']")
        page.wait.until(EC.url_contains("/run"))
        step = "read the registered choices in the form"
        page.wait.until(lambda _: f"{name}@v1" in page.prop("dataset").text)
        page.wait.until(lambda _: f"pushed:{label}" in page.prop("systems").text)
        step = "choose them"
        page.set_text("dataset", f"{name}@v1")
        page.set_list("systems", systems)
        page.set_text("run_id", run_id)
        step = "submit the form"
        page.submit(run_id)
        step = "follow the toast's View run link"
        flow_run_id = browser.current_url.split("/runs/flow-run/")[1].split("?")[0].strip("/")
        step = "wait for the flow run to complete"
        run = wait_flow_run(stack, flow_run_id, timeout_s=900)  # a bound, not a timing check: 2 engines' models
        assert run["state_type"] == "COMPLETED", f"{run['state_name']}: {flow_run_logs(stack, flow_run_id)}"
        assert run["parameters"]["dataset"] == f"{name}@v1" and run["parameters"]["systems"] == systems
        synthesis = read_table(stack, run_id, "synthesis")
        mine = synthesis[synthesis["system_spec"] == f"pushed:{label}"].set_index("item_id")["audio_sha256"]
        assert mine.to_dict() == clips  # the pushed clips themselves, read from the store on the worker
        step = "the report names the label"
        report = s3_object(stack, f"runs/{run_id}/report.md").decode()
        assert f"- dataset: {name}@v1" in report and f"- systems: pushed:{label}, espeak-ng" in report
        browser.refresh()
        page.visible("//*[normalize-space()='Completed']")
    except BaseException as e:
        where = _evidence(browser, stack.folder, f"ui-failure-{run_id}")
        raise AssertionError(
            f"UI step '{step}' failed: {type(e).__name__}: {e}\n{where}\n{_runs_with_run_id(stack, run_id)}"
        ) from e


def s3_object(stack: StackInfo, rel_path: str) -> bytes:
    """One object of the stack's S3 store, by its path under the store's root."""
    import boto3

    aws = stack.aws_env()
    s3 = boto3.client(
        "s3",
        endpoint_url=stack.s3_endpoint,
        aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"],
        region_name=aws["AWS_REGION"],
    )
    bucket, _, root = stack.store_uri[len("s3://") :].partition("/")
    return s3.get_object(Bucket=bucket, Key=f"{root}/{rel_path}".lstrip("/"))["Body"].read()
