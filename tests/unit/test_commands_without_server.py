"""`ttseval voices` and `serve` through the real command, in their own processes, where they need no
server: voices lists the engines' installed voices (espeak-ng's and flite's own lists, read back here from the
programs) and refuses an unknown or listless engine; serve refuses a missing store. Neither starts or asks a Prefect
server (the command runs against an address nothing answers on). serve on a stored run is
tests/e2e/test_commands_cli.py; stack is tests/system/test_stack_command.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.harness import DEAD_API, cli_env, run_cli


def test_voices_lists_the_installed_espeak_and_flite_voices(tmp_path: Path) -> None:
    env = cli_env(DEAD_API)
    espeak = run_cli(["voices", "espeak-ng"], env, cwd=tmp_path, timeout_s=120)
    assert espeak.returncode == 0, espeak.stderr[-2000:]
    rows = [line.split("\t") for line in espeak.stdout.splitlines()]
    # espeak-ng's own list (its second column is the language; ttseval keeps language tags lower-case)
    listed = subprocess.run(["espeak-ng", "--voices"], capture_output=True, text=True, check=True).stdout
    languages = {line.split()[1].lower() for line in listed.splitlines()[1:]}
    assert {r[2] for r in rows} == languages and ["en-us", "en-us", "en-us", ""] in rows
    assert espeak.stderr.strip().endswith(f"{len(rows)} voice(s) of espeak-ng")
    flite = run_cli(["voices", "flite"], env, cwd=tmp_path, timeout_s=120)
    assert flite.returncode == 0, flite.stderr[-2000:]
    compiled = subprocess.run(["flite", "-lv"], capture_output=True, text=True, check=True).stdout
    assert [line.split("\t")[0] for line in flite.stdout.splitlines()] == compiled.split(":", 1)[1].split()
    assert "slt\tslt\ten\t16 kHz" in flite.stdout.splitlines() and "kal\tkal\ten\t8 kHz" in flite.stdout.splitlines()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("espeak", ["unknown tts provider 'espeak'", "did you mean 'espeak-ng'", "available: "]),
        (
            "piper:joe",
            ["tts provider 'piper' offers no voice list", "providers that list theirs: ", "espeak-ng, flite"],
        ),
    ],
)
def test_voices_of_an_unknown_or_listless_engine_is_exit_2_naming_the_fix(
    tmp_path: Path, spec: str, words: list[str]
) -> None:
    out = run_cli(["voices", spec], cli_env(DEAD_API), cwd=tmp_path, timeout_s=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("ttseval: error: ") and "Traceback" not in out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def test_serve_a_missing_store_is_exit_2(tmp_path: Path) -> None:
    typo = tmp_path / "nope"
    out = run_cli(["serve", "--store", str(typo), "--port", "0"], cli_env(DEAD_API), cwd=tmp_path, timeout_s=120)
    assert out.returncode == 2 and f"no store at {typo}" in out.stderr and not typo.exists()
