"""What the push tests share (tests/unit/test_datasets_push.py, tests/e2e/test_pushed_dataset_evaluate.py): the
command called in-process, and clips written as a user's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from ttseval.cli import main


def ttseval(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def clips(folder: Path, item_ids: list[str], *, rate: int = 16000, base_hz: float = 220.0) -> dict[str, np.ndarray]:
    """One distinct tone per item (0.5 s), written as <item_id>.wav (16-bit PCM); the float samples written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    t = np.arange(rate // 2) / rate
    for i, item_id in enumerate(item_ids):
        samples = (0.3 * np.sin(2 * np.pi * (base_hz + 40 * i) * t)).astype(np.float32)
        sf.write(folder / f"{item_id}.wav", samples, rate, subtype="PCM_16")
        written[item_id] = sf.read(folder / f"{item_id}.wav", dtype="float32")[0]
    return written
