"""A series whose recorded clips are cut to 40% of their length on night 2: the cut is flagged as WER worse, and the
night's four views (drift.json's flagged rows, verdict.json, drift.md's verdict line, the command's last line) and
the alert sent through a real Prefect block report the same changes. The clips are instant-voice recordings served
by the `files:` system, heard by the instant recogniser (a cut clip loses exactly the words it cut)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import instant
from tests.support.alerts import webhook_receiver
from tests.support.harness import demo_items, run_cli
from ttseval.core.audio import Audio

EIGHT = ("emo-a-d0", "emo-a-d1", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1")
BLOCK = "ttseval-cut-clips"


def test_clips_cut_to_40_percent_are_flagged_for_wer_alike_in_every_view_and_the_alert(
    prefect_api: str, shared_env: dict[str, str], tmp_path: Path
) -> None:
    rows = demo_items(tmp_path / "eight.jsonl", EIGHT)
    clips = tmp_path / "clips"
    clips.mkdir()

    def record(share: float) -> None:
        for r in rows:
            clip = instant.speak(r["text"])
            cut = Audio(clip.samples[: int(len(clip.samples) * share)], clip.sample_rate_hz)
            (clips / f"{r['item_id']}.wav").write_bytes(cut.to_wav_bytes())

    receiver = webhook_receiver(prefect_api, BLOCK, "/cut")
    env = shared_env | instant.ENV | {"TTSEVAL_ALERT_BLOCKS": json.dumps([f"custom-webhook/{BLOCK}"])}
    store = tmp_path / "s"
    args = ["nightly", "--series", "cut", "--dataset", str(tmp_path / "eight.jsonl"), "--judges", ""]
    args += ["--systems", f"files:recorded:dir={clips}", "--store", str(store)]
    printed = []
    for share in (1.0, 0.4):
        record(share)
        done = run_cli(args, env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(done.stdout)
    receiver.shutdown()
    first, second = sorted(p.name for p in (store / "runs").iterdir())
    night = store / "runs" / second
    summary = json.loads((night / "nightly.json").read_text())
    assert summary["previous_run"] == first and summary["blind"] == []  # 8 items: each test can flag
    drift = [r for r in json.loads((night / "drift.json").read_text()) if r["flagged"]]
    verdict = json.loads((night / "verdict.json").read_text())
    n = summary["flagged"]
    # the cut: every clip lost its last 60%, so the recogniser misses those words
    wer = [r for r in drift if r["metric"] == "wer"]
    assert len(wer) == 1 and wer[0]["direction"] == "worse" and wer[0]["current"] > wer[0]["previous"] + 0.3
    # four views, one verdict
    key = ("system_spec", "metric", "direction")
    assert n == len(drift) == verdict["flagged"] == len(verdict["changes"]) >= 1
    assert sorted(tuple(r[k] for k in key) for r in drift) == sorted(
        tuple(c[k] for k in key) for c in verdict["changes"]
    )
    assert (night / "drift.md").read_text().split("\n\n")[1].startswith(f"{n} flagged change(s)")
    assert printed[1].rstrip().splitlines()[-1].endswith(f"flagged changes: {n}")
    # the alert: sent on night 2 only, its subject the count, a line per flagged row, the worse ones first
    [(path, message)] = receiver.received
    assert path == "/cut" and message["subject"].startswith(f"ttseval nightly {second}: {n} flagged change(s)")
    lines = [line for line in message["body"].splitlines() if line.startswith("- files:recorded")]
    assert len(lines) == n and lines[0].startswith("- files:recorded (instant-asr) ")
    assert sorted(line.split(" ")[3].rstrip(":") for line in lines) == sorted(r["metric"] for r in drift)
