"""The toy MOS predictor as an installed plugin package: built by name with no setting and no edit of ttseval,
listed by `ttseval providers`, and run by the quality stage like a built-in predictor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This folder pip-installed (a real build and install, metadata and entry point included) into a folder of
    its own, which the tests then put on the path: the venv itself is left as it was."""
    import shutil

    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("source") / "toy_mos"  # a copy: the build writes build/ and *.egg-info there
    shutil.copytree(HERE, source, ignore=shutil.ignore_patterns("__pycache__", "test_*.py", "__init__.py"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=source,
    )
    assert (target / "toy_mos.py").is_file() and list(target.glob("ttseval_toy_mos-*.dist-info"))
    return target


def _half_loud(seconds: float = 1.0, rate_hz: int = 16000):
    """A clip whose first half is a 440 Hz tone at half scale and whose second half is silence: by the rule,
    loud_share 0.5 and MOS 1 + 4 x 0.5 = 3.0 (worked by hand: every 10 ms frame of the tone is at -9 dBFS)."""
    from ttseval.core.audio import Audio

    n = int(seconds * rate_hz)
    t = np.arange(n // 2) / rate_hz
    samples = np.concatenate([0.5 * np.sin(2 * np.pi * 440 * t), np.zeros(n - n // 2)]).astype(np.float32)
    return Audio(samples=samples, sample_rate_hz=rate_hz)


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TTSEVAL_")}
    return env | {"PYTHONPATH": str(site)}


def test_the_installed_plugin_is_listed_by_ttseval_providers(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ttseval.cli", "providers"],
        env=_env(installed),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    quality = out.stdout.split("quality:")[1].split("\n\n")[0]
    [row] = [line.split() for line in quality.splitlines() if "toy-mos" in line]
    assert row[:3] == ["toy-mos", "(plugin)", "any"] and row[-1] == "0.1.0"
    # without the package on the path there is no such provider
    plain = subprocess.run(
        [sys.executable, "-m", "ttseval.cli", "providers"],
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0 and "toy-mos" not in plain.stdout


def test_the_quality_stage_runs_the_plugin_by_name_alone(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.healing import SPEC, run_synthesis, settings_for
    from ttseval.core.registry import _installed_entries
    from ttseval.providers.quality import QUALITY
    from ttseval.tasks.parts import get_store
    from ttseval.tasks.stages import QUALITY as QUALITY_STAGE
    from ttseval.tasks.stages import run_stage

    monkeypatch.syspath_prepend(str(installed))
    _installed_entries.cache_clear()  # entry points are read once per process; this one has just been installed
    try:
        assert QUALITY.entries()["toy-mos"] == "toy_mos:ToyMOS"
        [score] = QUALITY.build("toy-mos").score([_half_loud()])
        assert score.mos == pytest.approx(3.0) and score.details == {"loud_share": pytest.approx(0.5)}

        settings = settings_for(tmp_path, "FixedTTS", quality="toy-mos")
        assert "quality" not in settings.plugins  # found through the entry point, not the plugins setting
        run_synthesis(settings, [("p", "plain"), ("q", "plain plain")])
        clips = get_store(settings.store).read("r", "synthesis").set_index("item_id")
        work = [
            {
                "item_id": i,
                "system_id": SPEC.id,
                "audio_sha256": clips.loc[i, "audio_sha256"],
                "language": "en-US",
                "text": t,
            }
            for i, t in [("p", "plain"), ("q", "plain plain")]
        ]
        run_stage(QUALITY_STAGE, settings, "r", work)
        rows = get_store(settings.store).read("r", "quality").set_index("item_id").sort_index()
        assert rows["status"].tolist() == ["ok", "ok"]
        # FixedTTS speaks 50 ms of tone per word (tests.support.healing): every frame loud, MOS 5
        assert rows["mos"].tolist() == [5.0, 5.0]
    finally:
        _installed_entries.cache_clear()
