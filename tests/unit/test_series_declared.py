"""Nightly series declared once in the settings file ([series.NAME], ttseval.core.config.NightlySeries): what a
night of one takes from its declaration (ttseval.tasks.trends.night_of), and `ttseval series` listing them and
refusing to register one that could not work, before any Prefect server is asked. Registration on a server is
tests/e2e/test_series_register.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.harness import DEAD_API, demo_items
from ttseval.cli import main
from ttseval.core.config import DEFAULT_SYSTEMS, load_settings
from ttseval.core.errors import ConfigError
from ttseval.corpus import DEMO_DATASET
from ttseval.tasks.trends import declared_series, night_of

EIGHT = ("emo-a-d0", "emo-a-d1", "par-a-d0", "for-a-d0", "syn-a-d0", "pro-a-d0", "que-a-d0", "que-a-d1")


def declare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str) -> Path:
    """A settings file holding `toml`, the one this process reads (TTSEVAL_CONFIG)."""
    path = tmp_path / "ttseval.toml"
    path.write_text(toml, encoding="utf-8")
    monkeypatch.setenv("TTSEVAL_CONFIG", str(path))
    return path


def test_a_night_takes_what_its_command_leaves_out_from_the_series_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declare(
        tmp_path,
        monkeypatch,
        """
alert_blocks = ["slack-webhook/everyone"]

[series.voices-a]
dataset = "mine.jsonl"
systems = ["espeak-ng", "flite:slt"]
judges = []
alpha = 0.1
canary_fixed = 2
alert_blocks = ["custom-webhook/oncall"]
budget_usd = 3.5
asr = {en = ["whisper:tiny.en", "whisper:base"]}
quality = ["dnsmos", "utmos"]
schedule = "30 1 * * *"
timezone = "Europe/Berlin"
""",
    )
    settings = load_settings()
    night = night_of("voices-a", settings)
    assert (night.dataset, night.systems, night.judges, night.baseline, night.budget_usd) == (
        "mine.jsonl",
        ["espeak-ng", "flite:slt"],
        [],  # judges nothing, as declared
        None,
        3.5,
    )
    assert (night.settings.alpha, night.settings.canary_fixed, night.settings.alert_blocks) == (
        0.1,
        2,
        ["custom-webhook/oncall"],
    )
    assert night.settings.canary_rotating == settings.canary_rotating == 4  # not declared: the setting's
    asked = night_of("voices-a", settings, dataset="other.jsonl", systems=["piper:joe"], judges=["objective"])
    assert (asked.dataset, asked.systems, asked.judges) == ("other.jsonl", ["piper:joe"], ["objective"])
    # recognisers and predictors: English's replaced over the settings' own, the others kept; the same settings
    # for the night's evaluate, which reads them afresh and names the series (declared_series)
    assert (night.settings.asr, night.settings.qualities) == (
        {**settings.asr, "en": ["whisper:tiny.en", "whisper:base"]},
        ["dnsmos", "utmos"],
    )
    assert declared_series(settings, "voices-a") == night.settings and declared_series(settings, None) is settings
    with pytest.raises(ConfigError, match=r"series 'voices-b': not declared in the settings file .*declared: voices-a"):
        declared_series(settings, "voices-b")
    undeclared = night_of("voices-b", settings)
    assert (undeclared.dataset, undeclared.systems) == (str(DEMO_DATASET), list(DEFAULT_SYSTEMS))
    assert undeclared.settings is settings and undeclared.settings.alert_blocks == ["slack-webhook/everyone"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('dataset = "a.jsonl"\nsytems = ["espeak-ng"]', "sytems"),
        ('dataset = "a.jsonl"\nsystems = []', "systems"),
        ('dataset = "a.jsonl"\nsystems = ["espeak-ng"]\ntimezone = "Mars/Base"', "'Mars/Base' is not an IANA"),
        ('systems = ["espeak-ng"]', "dataset"),
    ],
)
def test_a_bad_declaration_is_refused_naming_its_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, said: str
) -> None:
    declare(tmp_path, monkeypatch, f"[series.voices-a]\n{body}\n")
    with pytest.raises(ConfigError, match="invalid ttseval settings") as caught:
        load_settings()
    assert "series.voices-a" in str(caught.value) and said in str(caught.value)


def test_series_list_says_each_series_and_where_it_alerts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    declare(
        tmp_path,
        monkeypatch,
        '[series.a]\ndataset = "a.jsonl"\nsystems = ["espeak-ng", "piper:joe"]\n'
        '[series.b]\ndataset = "b@1"\nsystems = ["flite"]\nschedule = "0 5 * * 1"\ntimezone = "Asia/Kabul"\n'
        'alert_blocks = ["custom-webhook/oncall"]\n',
    )
    assert main(["series", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "a: a.jsonl; systems espeak-ng, piper:joe; schedule '0 2 * * *' (UTC); alerts none",
        "b: b@1; systems flite; schedule '0 5 * * 1' (Asia/Kabul); alerts custom-webhook/oncall",
    ]


def register_refusal(capsys: pytest.CaptureFixture[str]) -> str:
    """`ttseval series register` against a server nothing answers on: exit 2 and its one error line."""
    assert main(["series", "register", "--api-url", DEAD_API]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ttseval: error: ") and "Traceback" not in err, err
    return err


def test_registration_refuses_a_series_that_could_not_work_before_asking_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo_items(tmp_path / "five.jsonl", EIGHT[:5])
    demo_items(tmp_path / "eight.jsonl", EIGHT)
    monkeypatch.setenv("TTSEVAL_STORE", str(tmp_path / "store"))
    series = '[series.{name}]\ndataset = "{dataset}"\nsystems = ["espeak-ng"]\n{more}\n'

    def refused(name: str = "voices", dataset: str = "eight.jsonl", more: str = "") -> str:
        declare(tmp_path, monkeypatch, series.format(name=name, dataset=tmp_path / dataset, more=more))
        return register_refusal(capsys)

    monkeypatch.setenv("TTSEVAL_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    assert "no nightly series is declared" in register_refusal(capsys)
    said = refused(name='"my voices"')
    assert "series 'my voices'" in said and "letters, digits, '_' and '-' only" in said
    said = refused(more='schedule = "61 2 * * *"')
    assert "series 'voices'" in said and "schedule '61 2 * * *' is not cron" in said
    said = refused(dataset="missing.jsonl")
    assert "dataset" in said and "missing.jsonl" in said and "cannot be read here" in said
    # 5 items: the smallest two-sided p of the paired permutation test is 2 / 2^5 = 0.0625 >= 0.05; 6 give 0.03125
    said = refused(dataset="five.jsonl")
    assert "with 5 items the smallest p a night's paired test can reach is 0.0625" in said
    assert "at least 6 items" in said
    # the series' own alpha: 8 items reach 2 / 2^8 = 0.0078, not under 0.005; 9 reach 0.0039
    said = refused(more="alpha = 0.005")
    assert "with 8 items the smallest p a night's paired test can reach is 0.00781, not under alpha 0.005" in said
    assert "at least 9 items" in said
    # a block named without its type is refused as it stands; a whole name is looked up on the server, which here
    # does not answer
    assert "alert block 'oncall' does not exist" in refused(more='alert_blocks = ["oncall"]')
    said = refused(more='alert_blocks = ["custom-webhook/oncall"]')
    assert f"the Prefect server {DEAD_API} does not answer" in said
