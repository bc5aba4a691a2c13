"""The scorer protocol (providers/quality/command.py): a MOS-style predictor that runs in a second venv the tests
build (tests/support/scorer_env.py: only the standard library and `tinylevel`, which this environment lacks). Its scores
are checked against numpy's RMS level of the same 16-bit clips; a crash, a hang and each way of breaking the
protocol are retryable errors whose message carries the scorer's stderr. The same scorer runs through
`ttseval evaluate` in tests/e2e/test_predictors_cli.py."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.harness import ROOT
from tests.support.scorer_env import SCORER, make_scorer_venv
from ttseval.core.audio import Audio
from ttseval.core.errors import SpecError, TransientProviderError
from ttseval.providers.asr import ASR
from ttseval.providers.quality import QUALITY


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_scorer_venv(tmp_path_factory.mktemp("scorer") / "venv")


def tone(seconds: float, amplitude: float, hz: float = 220.0, rate: int = 22050) -> Audio:
    t = np.arange(int(seconds * rate)) / rate
    return Audio((amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32), rate)


def level_dbfs(clip: Audio) -> tuple[float, float]:
    """RMS and peak level of the clip as the scorer reads it (16-bit PCM), computed here with numpy."""
    stored = Audio.from_wav_bytes(clip.to_wav_bytes()).samples.astype(np.float64)
    return 20 * np.log10(np.sqrt(np.mean(stored**2))), 20 * np.log10(np.max(np.abs(stored)))


def level_mos(rms_dbfs: float) -> float:
    """The test scorer's mapping of a level onto the MOS scale: -60 dBFS 1, 0 dBFS 5."""
    return float(np.clip(5 + rms_dbfs / 15, 1, 5))


def spec(python: Path, *args: str, **options: str) -> str:
    run = shlex.join([str(python), str(SCORER), *args])
    return ":".join([f"command:level:run={run}", *(f"{k}={v}" for k, v in options.items())])


def test_scores_equal_numpy_in_any_batch_size_and_a_short_clip_is_refused(venv_python: Path) -> None:
    clips = [tone(0.5, 0.3), tone(0.8, 0.05, hz=440), tone(0.1, 0.3), tone(1.0, 0.7, rate=16000), tone(0.3, 0.01)]
    whole = QUALITY.build(spec(venv_python))
    assert whole.version == "level-1.2.3" and whole.metadata()["model"] == "rms-dbfs"
    scores = whole.score(clips)
    in_twos = QUALITY.build(spec(venv_python, batch_size="2")).score(clips)  # three calls, the same answers
    assert list(map(repr, in_twos)) == list(map(repr, scores))  # repr: NaN equals NaN there
    for clip, score in zip(clips, scores):
        if clip.duration_s < 0.2:
            assert np.isnan(score.mos) and score.refused == "level: clip shorter than 200 ms (100 ms)"
            continue
        rms, peak = level_dbfs(clip)
        assert score.refused is None and score.mos == pytest.approx(level_mos(rms), abs=1e-9)
        assert score.details == pytest.approx(
            {"level": level_mos(rms), "rms_dbfs": rms, "peak_dbfs": peak, "duration_s": clip.duration_s}
        )
    assert scores[1].details["rms_dbfs"] == pytest.approx(20 * np.log10(0.05 / np.sqrt(2)), abs=0.01)  # by hand


def test_it_runs_in_its_own_environment_without_ours(venv_python: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # would lend the scorer our packages
    scorer = QUALITY.build(spec(venv_python))
    assert scorer.command._described is None
    scorer.command.describe()
    found = subprocess.run([str(venv_python), "-c", "import tinylevel"], capture_output=True)
    assert found.returncode == 0
    here = subprocess.run([sys.executable, "-c", "import tinylevel"], capture_output=True)
    assert here.returncode == 1 and b"No module named 'tinylevel'" in here.stderr
    probe = venv_python.parent.parent / "probe.py"
    probe.write_text(
        "import json, os, sys\nimport importlib.util as u\njson.load(sys.stdin)\n"
        "print(json.dumps({'version': str(u.find_spec('ttseval') is not None) + ' ' "
        "+ os.environ.get('PYTHONPATH', 'none') + ' ' + ','.join(sorted(k for k in os.environ "
        "if k.startswith(('PROBE_', 'LANG', 'CUDA_VISIBLE'))))}))\n"
    )
    # only what says where things are and which devices to use goes through: no credential, whatever its name
    for name in (
        "PROBE_OPENAI_API_KEY",
        "PROBE_AWS_SECRET_ACCESS_KEY",
        "PROBE_HF_TOKEN",
        "PROBE_DB_PASSWORD",
        "PROBE_DATABASE_URL",
        "PROBE_SERVICE_APIKEY",
        "PROBE_PREFECT_API_AUTH_STRING",
        "LANG",
        "CUDA_VISIBLE_DEVICES",
    ):
        monkeypatch.setenv(name, "x")
    assert QUALITY.build(f"command:probe:run={venv_python} {probe}").version == "False none CUDA_VISIBLE_DEVICES,LANG"


def test_a_crash_is_a_retryable_error_with_the_end_of_its_stderr(venv_python: Path) -> None:
    scorer = QUALITY.build(spec(venv_python, "--crash"))
    with pytest.raises(TransientProviderError) as raised:
        scorer.score([tone(0.5, 0.3)])
    message = str(raised.value)
    assert message.startswith("level scorer exited with code 1 on a batch of 1 clip(s); its stderr ends:\n")
    assert "loading the level model" in message
    assert message.endswith("RuntimeError: the level model is corrupt (a test crash)")


def test_a_hang_is_killed_after_its_timeout_and_is_a_retryable_error(venv_python: Path) -> None:
    scorer = QUALITY.build(spec(venv_python, "--hang", timeout_s="2"))
    with pytest.raises(TransientProviderError) as raised:
        scorer.score([tone(0.5, 0.3), tone(0.6, 0.3)])
    assert str(raised.value) == (
        "level scorer ran past timeout_s=2 on a batch of 2 clip(s) and was killed; its stderr "
        "ends:\nwaiting for a GPU that never frees"
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "print('loading...')\nprint(json.dumps({'id': '0', 'score': 1.0}))",
            (
                "level scorer broke ttseval-scorer/1 on a batch of 1 clip(s): stdout line 1 is not a JSON object "
                "('loading...'); print logs to stderr; its stderr was empty"
            ),
        ),
        (
            "print(json.dumps({'id': '0', 'score': 1.0}))\nprint(json.dumps({'id': '0', 'score': 2.0}))",
            "level scorer broke ttseval-scorer/1 on a batch of 1 clip(s): clip id '0' answered twice",
        ),
        (
            "print(json.dumps({'id': '7', 'score': 1.0}))",
            "level scorer broke ttseval-scorer/1 on a batch of 1 clip(s): clip id '7' was not asked for",
        ),
        ("pass", "level scorer broke ttseval-scorer/1 on a batch of 1 clip(s): no line for clip id(s) ['0']"),
        (
            "print(json.dumps({'id': '0', 'score': float('nan')}))",
            (
                "level scorer broke ttseval-scorer/1: clip '0' needs a finite number 'score' and 'details' of finite "
                "numbers, got {'id': '0', 'score': nan}"
            ),
        ),
        (
            "print(json.dumps({'id': '0', 'score': 72.5}))",
            (
                "level scorer broke ttseval-scorer/1: clip '0' needs a 'score' on the MOS scale 1-5 (the quality table "
                "takes 0.5-5.5; other scales go in 'details'), got {'id': '0', 'score': 72.5}"
            ),
        ),
    ],
)
def test_each_break_of_the_protocol_is_a_retryable_error_that_names_it(
    venv_python: Path, body: str, error: str
) -> None:
    script = venv_python.parent.parent / f"broken_{abs(hash(body))}.py"
    script.write_text(
        "import json, sys\nrequest = json.load(sys.stdin)\nif request['op'] == 'describe':\n"
        "    print(json.dumps({'version': '1'}))\n    sys.exit(0)\n" + body + "\n"
    )
    scorer = QUALITY.build(f"command:level:run={venv_python} {script}")
    with pytest.raises(TransientProviderError) as raised:
        scorer.score([tone(0.5, 0.3)])
    assert str(raised.value) == error


def test_a_describe_without_a_version_is_refused(venv_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "mute.py"
    script.write_text("import json, sys\njson.load(sys.stdin)\nprint(json.dumps({'model': 'x'}))\n")
    with pytest.raises(TransientProviderError, match=r'describe must print one line \{"version"'):
        _ = QUALITY.build(f"command:mute:run={venv_python} {script}").version  # reading it asks `describe`


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("command:run=/usr/bin/python3 x.py", "command needs a label, the model's name in reports"),
        ("command:level", "command needs the command to run: command:LABEL:run="),
        ("command:level:run=/nowhere/bin/python /x.py", "'/nowhere/bin/python' is not an executable file on this host"),
        ("command:level:run='/usr/bin/python3", "does not split into words (No closing quotation); quote it"),
        ("command:level:run=/usr/bin/python3:timeout_s=0", "timeout_s"),
    ],
)
def test_bad_specs_are_refused_with_the_fix(text: str, error: str) -> None:
    with pytest.raises(SpecError) as raised:
        QUALITY.build(text)
    assert error in str(raised.value)


def test_a_cluster_preflight_asks_every_worker_for_the_scorer_program_and_script() -> None:
    from ttseval.flows.preflight import local_paths

    assert local_paths(
        [
            "command:level:run=/venvs/level/bin/python '/opt/my scorers/level.py' --fast:timeout_s=3",
            "piper:/voices/en us.onnx",
            "command:level:run=python3 -m level",
        ]
    ) == ["/opt/my scorers/level.py", "/venvs/level/bin/python", "/voices/en us.onnx"]


def test_a_recogniser_in_its_own_environment_gets_each_clips_language_hint_and_answers_in_order(
    venv_python: Path,
) -> None:
    recogniser = ASR.build(f"command:lengths:run={shlex.join([str(venv_python), str(SCORER)])}:batch_size=2")
    assert recogniser.version == "level-1.2.3"
    clips = [tone(0.5, 0.3), tone(0.25, 0.3, rate=16000), tone(1.0, 0.3), tone(0.1, 0.1)]
    transcripts = recogniser.transcribe(clips, ["en", "zh", None, "en"])
    assert [(t.text, t.detected_language, t.language_prob) for t in transcripts] == [
        ("a clip of 500 milliseconds", "en", 1.0),
        ("250 毫秒", "zh", 1.0),
        ("1000", None, None),
        ("a clip of 100 milliseconds", "en", 1.0),
    ]


def test_a_recogniser_answer_without_text_breaks_the_protocol(venv_python: Path, tmp_path: Path) -> None:
    script = tmp_path / "mute_asr.py"
    script.write_text(
        "import json, sys\nrequest = json.load(sys.stdin)\nif request['op'] == 'describe':\n"
        "    print(json.dumps({'version': '1'}))\n    sys.exit(0)\n"
        "print(json.dumps({'id': '0', 'language': 'en'}))\n"
    )
    with pytest.raises(TransientProviderError) as raised:
        ASR.build(f"command:mute:run={venv_python} {script}").transcribe([tone(0.5, 0.3)], ["en"])
    assert str(raised.value) == (
        "mute scorer broke ttseval-scorer/1: clip '0' needs a string 'text', and 'language' "
        "(a string) and 'language_prob' (0-1) or null, got {'id': '0', 'language': 'en'}"
    )
