"""Sentences and their voice prompts, spoken by two real engines (espeak-ng, flite), for the voice-cloning tests
(tests/unit/test_voice_cloning.py, tests/e2e/test_voice_cloning_cli.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

TEXTS = {
    "u1": "The weather was mild and the river ran slowly past the town.",
    "u2": "She packed three books and a lamp before the train left.",
    "u3": "Every morning the baker opens his shop at six o'clock.",
    "u4": "Our team finished the project two days ahead of schedule.",
}
PROMPT_TEXTS = {
    "u1": "A quiet evening settled over the hills.",
    "u2": "Please call me when you arrive home.",
    "u3": "The garden needs water after such a hot day.",
    "u4": "He read the letter twice and smiled.",
}


def speak(engine: str, text: str, path: Path) -> None:
    cmd = ["espeak-ng", "-w", str(path), text] if engine == "espeak" else ["flite", "-t", text, "-o", str(path)]
    subprocess.run(cmd, check=True, capture_output=True)
