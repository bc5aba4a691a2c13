"""A remote voice that changes behind an unchanged API version: the nightly canary hears it and
the alert reaches a webhook through a Prefect notification block.

The fake vendor (OpenAI's speech wire format on loopback, the real provider and client library) answers every
request with fresh audio: the instant voice (tests/support/instant.py) with a small jitter of its pace that changes
every night, so no two nights' clips are byte-identical, as with a real cloud voice. On night 2 it silently speaks
30% slower. The runs use the keyed shared cluster and the instant recogniser and MOS predictor: what is tested is
the canary, not what a model hears."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.alerts import webhook_receiver
from tests.support.changing_voice import KEY, ChangingVoice, write_items
from tests.support.harness import run_cli
from ttseval.metrics.canary import canary_sample


def test_a_silent_voice_change_is_heard_by_the_canary_and_alerted(
    prefect_api: str, keyed_env: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "items.jsonl"
    rows = write_items(data, "c")
    receiver = webhook_receiver(prefect_api, "ttseval-canary", "/canary")
    with ChangingVoice(api_key=KEY) as vendor:
        system = f"openai:alloy:base_url={vendor.base_url}:model=tts-1"  # canonical: options sorted
        env = (
            keyed_env
            | instant.ENV
            | {
                "TTSEVAL_CANARY_FIXED": "6",
                "TTSEVAL_CANARY_ROTATING": "0",
                "TTSEVAL_ALERT_BLOCKS": '["custom-webhook/ttseval-canary"]',
            }
        )
        args = ["nightly", "--dataset", str(data), "--systems", system, "--store", str(tmp_path / "s"), "--judges", ""]
        first = run_cli([*args, "--run-id", "nightly-20261122T020000Z", "--new-store"], env, cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        assert vendor.paid_calls == 8
        vendor.night, vendor.pace = 2, 1.3  # the vendor's silent change
        second = run_cli([*args, "--run-id", "nightly-20261123T020000Z"], env, cwd=tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        paid_tonight = vendor.paid_keys[8:]
    receiver.shutdown()

    run = tmp_path / "s" / "runs" / "nightly-20261123T020000Z"
    summary = json.loads((run / "nightly.json").read_text())
    canary = summary["canary"]["items"]
    assert canary == canary_sample(pd.DataFrame(rows), 6, 0, summary["canary"]["night"])
    assert len(canary) == 6 and summary["canary"]["systems"] == [system]
    # only the canary is bought again; the other two items' clips are night 1's
    by_text = {r["text"]: r["item_id"] for r in rows}
    assert sorted(by_text[t] for t in paid_tonight) == sorted(canary)
    synthesis = pd.read_parquet(run / "synthesis").set_index("item_id")
    assert synthesis["cache_hit"].to_dict() == {r["item_id"]: r["item_id"] not in canary for r in rows}
    # every canary clip is longer: all 6 differences positive, so the exact sign-flip p is 2 / 2^6
    changes = pd.read_json(run / "canary.json")
    duration = changes.set_index("measure").loc["duration_s"]
    assert (duration["n_items"], duration["identical_clips"]) == (6, 0)
    assert duration["p_permutation"] == 2 / 64 and bool(duration["flagged"])
    night1 = pd.read_parquet(run.parent / "nightly-20261122T020000Z" / "synthesis").set_index("item_id")
    delta = (synthesis.loc[canary, "duration_s"] - night1.loc[canary, "duration_s"]).mean()
    assert duration["delta"] == pytest.approx(delta)
    assert summary["canary"]["flagged"] == 1 and summary["flagged"] >= 1
    assert "## Canary: remote voices' fresh clips" in (run / "drift.md").read_text()
    # one message reached the webhook through the Prefect block, naming the system, the measure and the size
    assert summary["alerts"] == [{"block": "custom-webhook/ttseval-canary", "sent": True, "error": None}]
    assert len(receiver.received) == 1
    path, message = receiver.received[0]
    assert path == "/canary" and message["subject"].startswith("ttseval nightly nightly-20261123T020000Z: ")
    assert f"- {system} canary duration_s: " in message["body"] and "adjusted p 0.0312" in message["body"]
    assert f"HTML report: file://{run}/html/index.html" in message["body"]
