"""A simulated week of nightly runs (issue 32's done-when): two fake vendors on loopback speaking OpenAI's speech
wire format (the real provider and client library), both with fresh audio every night (a 1.5% jitter); one
silently speaks 30% slower from night 3 on, the other never changes. One store, seven real `ttseval nightly` runs,
alerts through a Prefect custom-webhook block on a real local Prefect server to a receiver on loopback.

The changed voice is flagged on night 3 and on no night before (its canary: 8 fresh clips, all longer, exact
sign-flip p 2/256, Holm over the night's 2 canary tests 0.0156, 30% over canary_min_change); the steady voice
raises nothing on any night (its jitter is under canary_min_change even on a night it leans one way); the trends
page marks night 3's step. The false-alarm rate over many weeks and the nights a slow slide takes are
measured on the pure function (tests/unit/test_metrics_trends.py), not by running nightly hundreds of times."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from tests.support.alerts import Receiver
from tests.support.changing_voice import KEY, TEXTS, ChangingVoice
from tests.support.harness import cli_env, run_cli

NIGHTS = [f"nightly-202611{d:02d}T020000Z" for d in range(1, 8)]


# seven real nightly runs in one test: 802 s measured on a loaded 2-core machine (docs/performance.md), over the
# suite's 900 s per test
@pytest.mark.timeout(1800)
def test_a_week_flags_the_silent_change_on_night_3_and_nothing_else(prefect_api: str, tmp_path: Path) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    data = tmp_path / "items.jsonl"
    rows = [
        {"item_id": f"w{i}", "text": t, "language": "en-US", "category": ("questions", "emotions")[i % 2], "depth": 0}
        for i, t in enumerate(TEXTS)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        CustomWebhookNotificationBlock(
            name="tts", url=receiver.url + "/week", json_data={"subject": "{{subject}}", "body": "{{body}}"}
        ).save("ttseval-week", overwrite=True)
    outcomes = []
    with ChangingVoice(api_key=KEY) as changing, ChangingVoice(api_key=KEY) as steady:
        systems = [
            f"openai:alloy:base_url={changing.base_url}:model=tts-1",
            f"openai:nova:base_url={steady.base_url}:model=tts-1",
        ]
        env = cli_env(
            prefect_api,
            OPENAI_API_KEY=KEY,
            TTSEVAL_CANARY_FIXED="8",
            TTSEVAL_CANARY_ROTATING="0",
            TTSEVAL_ALERT_BLOCKS='["custom-webhook/ttseval-week"]',
        )
        args = [
            "nightly",
            "--dataset",
            str(data),
            "--systems",
            ",".join(systems),
            "--store",
            str(tmp_path / "s"),
            "--judges",
            "",
        ]
        for n, run_id in enumerate(NIGHTS, start=1):
            changing.night, steady.night = n, f"steady-{n}"  # fresh jitter every night, each voice its own
            if n == 3:
                changing.seconds_per_char = 0.026  # the vendor's silent change, kept from then on
            done = run_cli([*args, "--run-id", run_id] + (["--new-store"] if n == 1 else []), env, cwd=tmp_path)
            assert done.returncode == 0, (run_id, done.stderr[-3000:])
            outcomes.append((run_id, len(receiver.received)))
    receiver.shutdown()

    store = tmp_path / "s" / "runs"
    summaries = {r: json.loads((store / r / "nightly.json").read_text()) for r in NIGHTS}
    flagged = [summaries[r]["flagged"] for r in NIGHTS]
    assert flagged[:2] == [None, 0] and flagged[2] >= 1 and flagged[3:] == [0, 0, 0, 0], flagged
    assert [summaries[r]["canary"]["flagged"] for r in NIGHTS] == [None, 0, 1, 0, 0, 0, 0]
    assert [summaries[r]["trends"]["drifts"] for r in NIGHTS] == [0] * 7
    # one message, sent on night 3, naming the changed voice only, its measure, the size and the pages
    assert [count for _, count in outcomes] == [0, 0, 1, 1, 1, 1, 1]
    [(path, message)] = receiver.received
    assert path == "/week" and message["subject"].startswith(f"ttseval nightly {NIGHTS[2]}: {flagged[2]} flagged")
    assert f"- {systems[0]} canary duration_s: " in message["body"] and systems[1] not in message["body"]
    assert f"HTML report: file://{store / NIGHTS[2]}/html/index.html" in message["body"]
    assert f"trends: {store / NIGHTS[2]}/html/trends.html" in message["body"]
    canary = pd.read_json(store / NIGHTS[2] / "canary.json").set_index("system_spec")
    assert canary.loc[systems[0], "p_permutation"] == 2 / 256 and bool(canary.loc[systems[0], "flagged"])
    assert not canary.loc[systems[1], "flagged"]
    # the trends, as of the last night: the changed voice's canary duration stepped on night 3, nothing else did
    trends = pd.read_json(store / NIGHTS[-1] / "trends.json")
    steps = trends[trends["step"]]
    assert set(steps["system_spec"]) == {systems[0]} and set(steps["run_id"]) == {NIGHTS[2]}
    assert "duration_s" in set(steps["metric"]) and len(steps) == flagged[2]
    duration = trends[(trends["system_spec"] == systems[0]) & (trends["metric"] == "duration_s")].set_index("run_id")
    assert duration.loc[NIGHTS[2:], "value"].min() > 1.2 * duration.loc[NIGHTS[:2], "value"].max()
    assert set(trends["metric"]) >= {
        "completion_rate",
        "wer",
        "cer",
        "mos",
        "latency_s",
        "first_byte_s",
        "error_rate",
        "duration_s",
    }
    errors = trends[trends["metric"] == "error_rate"]
    assert (errors["value"] == 0).all() and (errors["n"] == 8).all()  # 8 fresh requests a night, none failed
    page = (store / NIGHTS[-1] / "html" / "trends.html").read_text()
    assert page.count('class="step"') == flagged[2] and f"{systems[0]}: duration_s (fresh clips)" in page
    # `ttseval trends` prints the same series and writes the same page
    printed = run_cli(["trends", "--store", str(tmp_path / "s"), "--system", systems[0]], env, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert (
        "7 nightly run(s)" in printed.stdout
        and f"trends page: file://{store / NIGHTS[-1]}/html/trends.html" in printed.stdout
    )
    [line] = [ln for ln in printed.stdout.splitlines() if "duration_s" in ln]
    assert NIGHTS[2] in line and systems[1] not in printed.stdout
