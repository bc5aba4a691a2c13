"""What the listening-test tests share (tests/unit/test_listening.py, tests/e2e/test_human_eval_cli.py): a stored run
of harmonic 'voices' at four rates and lengths, and webMUSHRA's results as its service/write.php writes them for the
configs an export made."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ttseval.core.audio import Audio, sha256_hex
from ttseval.core.schemas import table_from_rows
from ttseval.core.store import ArtifactStore

RUN = "r"
SYSTEMS = ("good", "fair", "poor")
QUALITY = {"good": 75.0, "fair": 60.0, "poor": 35.0, "nat": 92.0, "anchor-x": 50.0, "anchor-y": 15.0}


def voice(f0: float, seconds: float, rate: int, seed: int) -> Audio:
    """A harmonic 'voice' with vibrato, in word-like bursts, at the given rate."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.08 * np.sin(2 * np.pi * 1.5 * t))) / rate
    bursts = (np.sin(2 * np.pi * 2.0 * t) > -0.3).astype(float)
    noise = 0.001 * np.random.default_rng(seed).standard_normal(len(t))
    harmonics = [k for k in range(1, 60) if k * f0 * 1.1 < 0.45 * rate]  # a buzz with energy up to ~7 kHz
    return Audio((0.1 * sum(np.sin(k * phase) / k for k in harmonics) * bursts + noise).astype(np.float32), rate)


def stored_run(
    root: Path, systems: tuple[str, ...] = SYSTEMS, items: int = 6, long_item: bool = False
) -> ArtifactStore:
    """A run's items and synthesis rows with audio at four different rates and lengths; 'nat' is natural speech."""
    store = ArtifactStore(str(root))
    now = datetime.now(UTC)
    rows, synthesis = [], []
    for i in range(items):
        rows.append(
            {
                "item_id": f"i{i}",
                "text": "one two three four five six",
                "language": "en",
                "category": "x",
                "depth": 0,
                "created_at": now,
            }
        )
        for k, system in enumerate((*systems, "nat")):
            seconds = 1.5 + 0.1 * i + 0.05 * k
            if long_item and (i, k) in ((0, len(systems)), (1, 0)):  # i0's natural clip, i1's first system's
                seconds = 13.0 if i == 0 else 10.5
            audio = voice(100 + 25 * k, seconds, (16000, 22050, 24000, 44100)[k % 4], 10 * i + k)
            wav = audio.to_wav_bytes()
            store.put_audio(wav, sha256_hex(wav))
            synthesis.append(
                {
                    "item_id": f"i{i}",
                    "system_id": system,
                    "system_spec": system,
                    "status": "ok",
                    "audio_sha256": sha256_hex(wav),
                    "duration_s": audio.duration_s,
                    "sample_rate_hz": audio.sample_rate_hz,
                    "created_at": now,
                }
            )
    store.write_part(RUN, "items", table_from_rows("items", rows))
    store.write_part(RUN, "synthesis", table_from_rows("synthesis", synthesis))
    return store


def rater_configs(folder: Path, test_id: str) -> list[dict]:
    return [
        yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((folder / "configs").glob(f"{test_id}-r*.yaml"))
    ]


def stimuli_key(store: ArtifactStore, test_id: str) -> pd.DataFrame:
    key = store.read(RUN, "listening_stimuli")
    return key[key["test_id"] == test_id]


def rater_score(system: str, rater: int, rng: np.random.Generator, bias: float = 0.0) -> float:
    return float(np.clip(QUALITY[system] + bias + rng.normal(0, 5), 0, 100))


def mushra_csv(
    folder: Path, test_id: str, key: pd.DataFrame, seed: int = 0, skip_reference: set | None = None, sessions: int = 1
) -> str:
    """mushra.csv as webMUSHRA's service/write.php writes it: session_test_id, the questionnaire's names,
    session_uuid, trial_id, rating_stimulus, rating_score, rating_time, rating_comment; one row per condition of
    each mushra page, the hidden reference as 'reference'."""
    systems = key.set_index(["trial_id", "stimulus"])["system_id"]
    rng = np.random.default_rng(seed)
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(
        [
            "session_test_id",
            "rater",
            "headphones",
            "session_uuid",
            "trial_id",
            "rating_stimulus",
            "rating_score",
            "rating_time",
            "rating_comment",
        ]
    )
    for n, config in enumerate(rater_configs(folder, test_id), start=1):
        for _ in range(sessions):
            session = str(uuid.UUID(int=int(rng.integers(2**63))))
            for page in config["pages"]:
                if page["type"] != "mushra":
                    continue
                for stimulus in ["reference", *page["stimuli"]]:
                    if stimulus == "reference" and skip_reference and (n, page["id"]) in skip_reference:
                        continue
                    score = rater_score(systems[(page["id"], stimulus)], n, rng)
                    out.writerow(
                        [config["testId"], f"rater {n}", "yes", session, page["id"], stimulus, f"{score:.0f}", 4321, ""]
                    )
    return buf.getvalue()
