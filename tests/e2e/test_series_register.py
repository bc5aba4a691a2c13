"""Nightly series declared in a settings file, registered on a Prefect server and run by name: `ttseval series
register` makes each declared series a scheduled deployment of its own and refuses one naming an alert block the
server does not hold; `ttseval nightly --series NAME` runs a night of the declaration. The refusals that need no
server are tests/unit/test_series_declared.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from tests.support import instant
from tests.support.harness import cli_env, demo_items, run_cli

EIGHT = ("emo-a-d0", "emo-a-d1", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1")
POOL = "ttseval-series-test"


def test_two_declared_series_become_their_own_scheduled_deployments_and_a_missing_block_is_refused(
    prefect_api: str, tmp_path: Path
) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    created = httpx.post(f"{prefect_api}/work_pools/", json={"name": POOL, "type": "process"}, timeout=30)
    assert created.status_code in (201, 409), created.text  # 409: made by an earlier test of this session
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        CustomWebhookNotificationBlock(
            name="series-oncall", url="http://127.0.0.1:9/hook", json_data={"text": "{{body}}"}
        ).save("ttseval-series-oncall", overwrite=True)
    demo_items(tmp_path / "eight.jsonl", EIGHT)
    settings = tmp_path / "ttseval.toml"
    settings.write_text(
        f"""
[series.voices-a]
dataset = "{tmp_path / "eight.jsonl"}"
systems = ["instant:a1", "instant:a2:pace=1.2"]
schedule = "30 1 * * *"
timezone = "Europe/Berlin"
alert_blocks = ["custom-webhook/ttseval-series-oncall"]

[series.voices-b]
dataset = "{tmp_path / "eight.jsonl"}"
systems = ["instant:b1"]
schedule = "0 3 * * 1"
""",
        encoding="utf-8",
    )
    env = cli_env(prefect_api, TTSEVAL_CONFIG=str(settings))
    done = run_cli(["series", "register", "--api-url", prefect_api, "--pool", POOL], env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.splitlines()[:2] == [
        "nightly/voices-a: '30 1 * * *' (Europe/Berlin)",
        "nightly/voices-b: '0 3 * * 1' (UTC)",
    ]
    assert f"TTSEVAL_CONFIG={settings}" in done.stdout
    for name, cron, zone in (("voices-a", "30 1 * * *", "Europe/Berlin"), ("voices-b", "0 3 * * 1", "UTC")):
        deployment = httpx.get(f"{prefect_api}/deployments/name/nightly/{name}", timeout=30).json()
        # the deployment names its series only; the worker reads the rest from the file it is handed
        assert deployment["parameters"] == {"series": name}
        assert deployment["job_variables"] == {"env": {"TTSEVAL_CONFIG": str(settings)}}
        assert deployment["work_pool_name"] == POOL
        [schedule] = [s["schedule"] for s in deployment["schedules"]]
        assert (schedule["cron"], schedule["timezone"]) == (cron, zone)

    # a third series alerting a block the server does not hold: refused, and nothing of it registered
    with settings.open("a", encoding="utf-8") as f:
        f.write(
            f'\n[series.voices-c]\ndataset = "{tmp_path / "eight.jsonl"}"\nsystems = ["instant:c1"]\n'
            'alert_blocks = ["custom-webhook/nobody"]\n'
        )
    refused = run_cli(["series", "register", "--api-url", prefect_api, "--pool", POOL], env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused.stderr.startswith(
        "ttseval: error: series 'voices-c' ([series.voices-c] in the settings file): alert block "
        f"'custom-webhook/nobody' does not exist on the Prefect server {prefect_api}"
    ), refused.stderr
    assert httpx.get(f"{prefect_api}/deployments/name/nightly/voices-c", timeout=30).status_code == 404


def test_a_night_of_a_declared_series_runs_its_declaration(shared_env: dict[str, str], tmp_path: Path) -> None:
    """`ttseval nightly --series voices-a` with no --dataset or --systems: the declared dataset, systems, judges
    (none), recognisers (English's replaced, the others the settings') and MOS predictors (two), under the series'
    run ids. On the instant voices, recogniser and MOS predictor."""
    import pandas as pd

    demo_items(tmp_path / "eight.jsonl", EIGHT)
    settings = tmp_path / "ttseval.toml"
    settings.write_text(
        f'[series.voices-a]\ndataset = "{tmp_path / "eight.jsonl"}"\n'
        'systems = ["instant:a1", "instant:a2:pace=1.2"]\njudges = []\n'
        'asr = {en = "instant-asr:series"}\nquality = ["instant-mos", "instant-mos:second"]\n',
        encoding="utf-8",
    )
    env = shared_env | instant.ENV | {"TTSEVAL_CONFIG": str(settings)}
    result = run_cli(["nightly", "--series", "voices-a", "--store", str(tmp_path / "store")], env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [run_id] = re.findall(r"nightly run (nightly-voices-a-\d{8}T\d{6}Z) of series voices-a:", result.stdout)
    run = tmp_path / "store" / "runs" / run_id
    log = json.loads(sorted((run / "log").glob("*.json"))[0].read_text())
    assert log["systems"] == "instant:a1, instant:a2:pace=1.2" and log["dataset"].endswith("eight.jsonl")
    assert json.loads((run / "series.json").read_text()) == {"series": "voices-a"}
    assert not (run / "judgments").exists() or not any((run / "judgments").iterdir())
    assert json.loads(log["asr"]) == {"*": "instant-asr", "en": "instant-asr:series"}
    assert log["MOS predictors"] == "instant-mos, instant-mos:second"
    transcripts = pd.read_parquet(run / "transcripts")
    languages = transcripts.groupby("asr_spec")["item_id"].nunique().to_dict()
    assert languages == {"instant-asr:series": 8}, languages  # EIGHT are English items
    quality = pd.read_parquet(run / "quality")
    assert quality.groupby("quality_spec")["item_id"].nunique().to_dict() == {"instant-mos": 8, "instant-mos:second": 8}
