"""Paid providers through the real CLI, against the wire-format fakes on loopback: every vendor, a self-hosted
OpenAI-compatible server, audio made elsewhere and the local engines in one run; the dry run's characters equal
what the fakes billed; a re-run calls nothing; the budget stops at the budget and a later run finishes the rest
without paying twice; a vendor limit holds across both Dask workers. The clips are heard by the instant recogniser
and MOS predictor (tests/support/instant.py): what is tested is what is bought and billed, not what a model hears."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.support import instant
from tests.support.fake_tts import FakeOpenAISpeech, encode, tone
from tests.support.harness import cli_env, run_cli
from tests.support.paid import KEY, TEXTS, dataset


def dry_run_table(stdout: str) -> dict[str, tuple[int, int, float]]:
    """system -> (calls, chars, usd), read from the dry run's printed table (what kind keys calls reused chars
    audio_s usd)."""
    out = {}
    for line in stdout.splitlines():
        fields = line.rsplit(maxsplit=7)  # a spec may hold spaces ('hume:Ava Song'); the 7 columns after it do not
        if len(fields) == 8 and fields[1] == "tts":
            out[fields[0].strip()] = (int(fields[3]), int(fields[5]), float(fields[7]))
    return out


@pytest.fixture(scope="module")
def openai_fake():
    with FakeOpenAISpeech(api_key=KEY) as fake:
        yield fake


def test_budget_stops_at_the_budget_and_a_later_run_finishes_without_paying_twice(
    keyed_env, tmp_path, openai_fake
) -> None:
    system = f"openai:alloy:base_url={openai_fake.base_url}:model=tts-1"  # canonical: options sorted
    # One dollar a character, so the budget is counted in characters: the first two items cost 21 + 44 = 65.
    env = keyed_env | instant.ENV | {"TTSEVAL_TTS_PRICES": json.dumps({"openai:tts-1": 1e6})}
    data = dataset(tmp_path)
    args = [
        "evaluate",
        "--dataset",
        str(data),
        "--systems",
        system,
        "--store",
        str(tmp_path / "store"),
        "--run-id",
        "b",
        "--judges",
        "",
    ]
    before = openai_fake.paid_calls

    dry = run_cli([*args, "--dry-run"], env, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert openai_fake.paid_calls == before  # a dry run calls nothing
    chars = sum(map(len, TEXTS))
    assert dry_run_table(dry.stdout) == {system: (3, chars, float(chars))}  # USD = characters at $1 each

    refused = run_cli([*args, "--budget-usd", "70"], env, cwd=tmp_path)  # a paid run on a new store
    assert refused.returncode == 2 and "pass --new-store" in refused.stderr and openai_fake.paid_calls == before
    first = run_cli([*args, "--budget-usd", "70", "--new-store"], env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert openai_fake.paid_calls - before == 2 and "1 key(s) past the budget" in first.stderr
    synthesis = pd.read_parquet(tmp_path / "store" / "runs" / "b" / "synthesis")
    assert sorted(synthesis["item_id"]) == ["p0", "p1"]
    assert synthesis["cost_usd"].sum() == pytest.approx(len(TEXTS[0]) + len(TEXTS[1]))
    assert (synthesis["billable_chars"].tolist(), synthesis["status"].unique().tolist()) == (
        [len(TEXTS[0]), len(TEXTS[1])] if synthesis["item_id"].iloc[0] == "p0" else [len(TEXTS[1]), len(TEXTS[0])],
        ["ok"],
    )

    second = run_cli(args, env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert openai_fake.paid_calls - before == 3
    paid = openai_fake.paid_keys[-3:]
    assert sorted(paid) == sorted(TEXTS)  # each text paid once
    synthesis = pd.read_parquet(tmp_path / "store" / "runs" / "b" / "synthesis")
    assert sorted(synthesis["item_id"]) == ["p0", "p1", "p2"]


def test_a_vendor_limit_holds_across_both_workers(prefect_api, tmp_path) -> None:
    with FakeOpenAISpeech(api_key=KEY, delay_s=0.4) as slow:
        system = f"openai:nova:model=tts-1:base_url={slow.base_url}"
        limits = json.dumps({"openai": {"concurrency": 1}})
        env = cli_env(prefect_api, OPENAI_API_KEY=KEY, TTSEVAL_VENDOR_LIMITS=limits, **instant.ENV)  # two workers
        result = run_cli(
            [
                "evaluate",
                "--dataset",
                str(dataset(tmp_path)),
                "--systems",
                system,
                "--store",
                str(tmp_path / "store"),
                "--run-id",
                "l",
                "--judges",
                "",
                "--shard-size",
                "1",
                "--workers",
                "2",
            ],
            env,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert slow.paid_calls == 3 and slow.max_in_flight == 1
        assert "ttseval-vendor-openai" in result.stderr


def leaks(secret: str, *roots: Path) -> int:
    """Fail when `secret` is in any file under `roots` (Parquet decoded, other files as raw bytes, audio skipped);
    returns how many files were read."""
    import pyarrow.parquet as pq

    n = 0
    for root in roots:
        for path in (p for p in Path(root).rglob("*") if p.is_file() and p.suffix != ".wav"):
            n += 1
            if path.suffix == ".parquet":
                assert secret not in pq.read_table(path).to_pandas().to_json(), path
            else:
                assert secret.encode() not in path.read_bytes(), path
    return n


def test_every_kind_of_system_in_one_run_and_a_rerun_calls_nothing(prefect_api, tmp_path, tmp_path_factory) -> None:
    import contextlib

    from tests.support.fake_azure import FakeAzureSpeech
    from tests.support.fake_cartesia import FakeCartesia
    from tests.support.fake_deepgram import FakeDeepgram
    from tests.support.fake_elevenlabs import FakeElevenLabs
    from tests.support.fake_gemini_tts import FakeGeminiTTS
    from tests.support.fake_hume import FakeHume
    from tests.support.vendors import VENDORS as VENDORS_A

    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(2):  # audio made elsewhere, at a rate of its own
        (clips / f"p{i}.flac").write_bytes(encode(tone(0.8, 44100, 330.0), 44100, "flac"))
    data = dataset(tmp_path, 2)
    with contextlib.ExitStack() as stack:
        paid = {  # spec -> its fake; every vendor checks its own key
            "openai:alloy:base_url={}:model=gpt-4o-mini-tts": stack.enter_context(FakeOpenAISpeech(api_key=KEY)),
            "openai:af_bella:base_url={}:model=kokoro": stack.enter_context(FakeOpenAISpeech(api_key=None)),
            f"elevenlabs:{VENDORS_A['elevenlabs'].voice}:base_url={{}}": stack.enter_context(
                FakeElevenLabs(api_key=KEY)
            ),
            f"deepgram:{VENDORS_A['deepgram'].voice}:base_url={{}}": stack.enter_context(FakeDeepgram(api_key=KEY)),
            f"cartesia:{VENDORS_A['cartesia'].voice}:base_url={{}}": stack.enter_context(FakeCartesia(api_key=KEY)),
            "azure:en-US-JennyNeural:base_url={}": stack.enter_context(FakeAzureSpeech(api_key=KEY)),
            "hume:Ava Song:base_url={}": stack.enter_context(FakeHume(api_key=KEY)),
            "gemini:Kore:base_url={}": stack.enter_context(FakeGeminiTTS(api_key=KEY)),
        }
        # A second voice of gpt-4o-mini-tts on the same endpoint: two voices of one model, for voice variance.
        paid["openai:nova:base_url={}:model=gpt-4o-mini-tts"] = paid["openai:alloy:base_url={}:model=gpt-4o-mini-tts"]
        keys = {v.env: KEY for v in VENDORS_A.values()} | {
            "OPENAI_API_KEY": KEY,
            "AZURE_SPEECH_KEY": KEY,
            "HUME_API_KEY": KEY,
            "GEMINI_API_KEY": KEY,
        }
        specs = {template.format(fake.base_url): fake for template, fake in paid.items()}
        systems = [*specs, f"files:made-elsewhere:dir={clips}", "espeak-ng:en-us", "flite:slt"]
        env = cli_env(prefect_api, **keys, **instant.ENV)  # a cluster of its own: every vendor's key on its workers
        args = [
            "evaluate",
            "--dataset",
            str(data),
            "--systems",
            ",".join(systems),
            "--store",
            str(tmp_path / "store"),
            "--run-id",
            "all",
            "--judges",
            "objective",
            "--baseline",
            "espeak-ng:en-us",
            "--new-store",
        ]

        dry = run_cli([*args, "--dry-run"], env, cwd=tmp_path)
        assert dry.returncode == 0, dry.stderr[-3000:]
        estimate = dry_run_table(dry.stdout)
        assert sum(f.paid_calls for f in specs.values()) == 0

        result = run_cli(args, env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-4000:]
        synthesis = pd.read_parquet(tmp_path / "store" / "runs" / "all" / "synthesis")
        assert len(synthesis) == 2 * len(systems) and synthesis["status"].eq("ok").all(), synthesis[
            ["system_spec", "status", "error_message"]
        ].to_string()
        rates = synthesis.groupby("system_spec")["sample_rate_hz"].first()
        assert rates["files:made-elsewhere"] == 44100 and rates["espeak-ng:en-us"] == 22050  # named by its label
        fakes = {id(f): f for f in specs.values()}
        for fake in fakes.values():
            mine = [spec for spec, f in specs.items() if f is fake]
            estimated = sum(
                chars
                for what, (_, chars, _) in estimate.items()
                if any(what.split(":")[:2] == spec.split(":")[:2] for spec in mine)
            )
            assert fake.paid_calls == 2 * len(mine), mine
            assert estimated == fake.billable_chars == len(mine) * (len(TEXTS[0]) + len(TEXTS[1])), mine
        judgments = pd.read_parquet(tmp_path / "store" / "runs" / "all" / "judgments")
        assert len(judgments) == 2 * (len(systems) - 1)
        report = (tmp_path / "store" / "runs" / "all" / "report.md").read_text()
        assert KEY not in report + result.stdout + result.stderr + synthesis.to_json()
        assert "## Voice variance" in report and "## Synthesis cost" in report
        model = (
            f"openai:base_url={paid['openai:nova:base_url={}:model=gpt-4o-mini-tts'].base_url}:model=gpt-4o-mini-tts"
        )
        assert f"`{model}` | overall | 2 |" in report, report[report.index("## Voice variance") :][:1500]

        again = run_cli(args, env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr[-3000:]
        assert [f.paid_calls for f in fakes.values()] == [
            2 * sum(f is g for g in specs.values()) for f in fakes.values()
        ]  # nothing paid twice

        # The secrets check: with a key set for every provider, no file the run wrote holds it: tables
        # (decoded, since Parquet compresses), report, logs, HTML pages, the exported bundle, the Prefect database
        bundle = run_cli(
            ["export", "--store", str(tmp_path / "store"), "--run-id", "all", "--out", str(tmp_path / "bundle")],
            env,
            cwd=tmp_path,
        )
        assert bundle.returncode == 0, bundle.stderr[-2000:]
        prefect_homes = list(Path(tmp_path_factory.getbasetemp()).glob("prefect-home*"))
        assert any(next(h.rglob("*.db"), None) for h in prefect_homes)  # the server's database: runs, logs, artifacts
        scanned = leaks(KEY, tmp_path / "store", tmp_path / "bundle", *prefect_homes)
        assert scanned > 50  # tables, parts, report, logs, pages, bundle files and the Prefect database
