"""A simulated run of nightly evaluations (the nightly week tests): two fake vendors on loopback speaking OpenAI's
speech wire format (the real provider and client library), both with fresh audio every night (a 1.5% jitter); one
silently speaks 30% slower from night 3 on, the other never changes. One store, one real `ttseval nightly` run a
night on the keyed shared cluster with the instant recogniser and MOS predictor (tests/support/instant.py), alerts
through a Prefect custom-webhook block on the real local Prefect server to a receiver on loopback.

What `check_nights` proves, for any number of nights from 4: the changed voice is flagged on night 3 and on no other
night (its canary: 8 fresh clips, all longer, exact sign-flip p 2/256, Holm over the night's 2 canary tests 0.0156,
30% over canary_min_change); the steady voice raises nothing on any night (its jitter is under canary_min_change
even on a night it leans one way); one alert, sent on night 3; the trends page marks night 3's step and nothing
else; every clip is heard word for word (WER 0) every night."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.support import instant
from tests.support.alerts import webhook_receiver
from tests.support.changing_voice import KEY, ChangingVoice, write_items
from tests.support.harness import run_cli

CHANGE_NIGHT = 3


def check_nights(count: int, prefect_api: str, keyed_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Runs `count` nights and checks them (the module's docstring); returns the one alert as the receiver got it,
    its subject and body."""
    assert count > CHANGE_NIGHT, "the nights after the change show that it is flagged once"
    nights = [f"nightly-202611{d:02d}T020000Z" for d in range(1, count + 1)]
    block = f"ttseval-week-{count}"
    data = tmp_path / "items.jsonl"
    write_items(data, "w")
    receiver = webhook_receiver(prefect_api, block, "/week")
    outcomes, printed = [], {}
    with ChangingVoice(api_key=KEY) as changing, ChangingVoice(api_key=KEY) as steady:
        systems = [
            f"openai:alloy:base_url={changing.base_url}:model=tts-1",
            f"openai:nova:base_url={steady.base_url}:model=tts-1",
        ]
        env = (
            keyed_env
            | instant.ENV
            | {
                "TTSEVAL_CANARY_FIXED": "8",
                "TTSEVAL_CANARY_ROTATING": "0",
                "TTSEVAL_ALERT_BLOCKS": json.dumps([f"custom-webhook/{block}"]),
            }
        )
        args = ["nightly", "--dataset", str(data), "--systems", ",".join(systems), "--store", str(tmp_path / "s")]
        args += ["--judges", ""]
        for n, run_id in enumerate(nights, start=1):
            changing.night, steady.night = n, f"steady-{n}"  # fresh jitter every night, each voice its own
            if n == CHANGE_NIGHT:
                changing.pace = 1.3  # the vendor's silent change, kept from then on
            done = run_cli([*args, "--run-id", run_id] + (["--new-store"] if n == 1 else []), env, cwd=tmp_path)
            assert done.returncode == 0, (run_id, done.stderr[-3000:])
            outcomes.append((run_id, len(receiver.received)))
            printed[run_id] = done.stdout
    receiver.shutdown()

    store = tmp_path / "s" / "runs"
    after = count - CHANGE_NIGHT
    summaries = {r: json.loads((store / r / "nightly.json").read_text()) for r in nights}
    flagged = [summaries[r]["flagged"] for r in nights]
    assert flagged[:2] == [None, 0] and flagged[2] >= 1 and flagged[3:] == [0] * after, flagged
    assert [summaries[r]["canary"]["flagged"] for r in nights] == [None, 0, 1] + [0] * after
    assert [summaries[r]["trends"]["drifts"] for r in nights] == [0] * count
    # one verdict, four views: nightly.json, the command's line, drift.md's first line and (below) the alert's subject
    # and verdict.json, whose rows are the changes counted
    for r in nights[1:]:
        verdict = (store / r / "drift.md").read_text().split("\n\n")[1]
        assert verdict.startswith(f"{summaries[r]['flagged']} flagged change(s)"), (r, verdict[:200])
        assert f"flagged changes: {summaries[r]['flagged']}" in printed[r], r
        rows = json.loads((store / r / "verdict.json").read_text())
        assert rows["flagged"] == len(rows["changes"]) == summaries[r]["flagged"], r
    changed = json.loads((store / nights[2] / "verdict.json").read_text())["changes"]
    assert {(c["kind"], c["system_spec"]) for c in changed} >= {("canary", systems[0])}
    assert all(c["system_spec"] == systems[0] for c in changed)
    # one message, sent on night 3, naming the changed voice only, its measure, the size and the pages
    assert [n for _, n in outcomes] == [0, 0] + [1] * (after + 1)
    [(path, message)] = receiver.received
    assert path == "/week" and message["subject"].startswith(f"ttseval nightly {nights[2]}: {flagged[2]} flagged")
    assert f"- {systems[0]} canary duration_s: " in message["body"] and systems[1] not in message["body"]
    assert f"HTML report: file://{store / nights[2]}/html/index.html" in message["body"]
    assert f"trends: file://{store / nights[2]}/html/trends.html" in message["body"]
    assert f"drift table: file://{store / nights[2]}/drift.md" in message["body"]
    canary = pd.read_json(store / nights[2] / "canary.json").set_index("system_spec")
    assert canary.loc[systems[0], "p_permutation"] == 2 / 256 and bool(canary.loc[systems[0], "flagged"])
    assert not canary.loc[systems[1], "flagged"]
    # the trends, as of the last night: the changed voice's canary duration stepped on night 3, nothing else did
    trends = pd.read_json(store / nights[-1] / "trends.json")
    steps = trends[trends["step"]]
    assert set(steps["system_spec"]) == {systems[0]} and set(steps["run_id"]) == {nights[2]}
    assert "duration_s" in set(steps["metric"]) and len(steps) == flagged[2]
    duration = trends[(trends["system_spec"] == systems[0]) & (trends["metric"] == "duration_s")].set_index("run_id")
    assert duration.loc[nights[2:], "value"].min() > 1.2 * duration.loc[nights[:2], "value"].max()
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
    # the slower voice says the same words: every night's clips are heard word for word
    assert (trends.loc[trends["metric"] == "wer", "value"] == 0).all()
    page = (store / nights[-1] / "html" / "trends.html").read_text()
    assert page.count('class="step"') == flagged[2] and f"{systems[0]}: duration_s (fresh clips)" in page
    # `ttseval trends` prints the same series and writes the same page
    printed = run_cli(["trends", "--store", str(tmp_path / "s"), "--system", systems[0]], env, cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert (
        f"ttseval trends of series nightly: {count} night(s)" in printed.stdout
        and f"trends page: file://{store / nights[-1]}/html/trends.html" in printed.stdout
    )
    [line] = [ln for ln in printed.stdout.splitlines() if "duration_s" in ln]
    assert nights[2] in line and systems[1] not in printed.stdout
    return message
