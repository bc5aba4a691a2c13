"""Voice prompts and reference voices: the clips a voice-cloning system imitates, stored once in the run's store.

An item may carry a voice prompt (`prompt_audio_uri`, `prompt_text`): Seed-TTS-eval's test sets do, and any items
file may. When a run starts, each prompt clip is read (a local path, relative paths already resolved against the
dataset's folder by ttseval.corpus.items, or a URI read with fsspec), decoded, and stored like synthesized audio; the
items table records its SHA-256 (`prompt_audio_sha256`). Synthesis hands it to providers that clone
(`clones_voice`), and the similarity stage compares each clip with it.

A system may instead have a reference voice (setting `reference_voices`, system id or spec -> clip): the voice
it is meant to speak with, compared with each of its clips where the item has no prompt.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError, DatasetError
from ttseval.core.registry import Spec
from ttseval.core.store import ArtifactStore


def _read_clip(path: str) -> bytes:
    from ttseval.providers.tts.files import filesystem

    fs, inner = filesystem(path)
    with fs.open(inner, "rb") as f:
        data: bytes = f.read()
    return data


def _stored(store: ArtifactStore, path: str) -> str:
    """Read, decode and store one clip as 16-bit WAV (as pushed systems' clips are); its SHA-256. Raises OSError /
    RuntimeError as they come."""
    from ttseval.providers.tts.pushed import store_clip

    return store_clip(store, _read_clip(path))


def store_prompts(store: ArtifactStore, items: pd.DataFrame, *, source: str) -> pd.DataFrame:
    """`items` with `prompt_audio_sha256` set for every item that has a prompt clip, each clip read and stored
    once. Every unreadable clip is named (row, item, path, reason) in one DatasetError, before anything of the
    run is written."""
    items = items.copy()
    if "prompt_audio_uri" not in items or items["prompt_audio_uri"].isna().all():
        items["prompt_audio_sha256"] = None
        return items
    shas: dict[str, str] = {}
    problems = []
    for row, (item_id, path) in enumerate(zip(items["item_id"], items["prompt_audio_uri"]), start=1):
        if not isinstance(path, str) or not path or path in shas:
            continue
        try:
            shas[path] = _stored(store, path)
        except Exception as e:  # noqa: BLE001 - any read or decode failure is the item's, named below
            problems.append(
                f"row {row} (item_id={item_id!r}) prompt_audio_uri {path!r}: {type(e).__name__}: {str(e)[:200]}"
            )
    if problems:
        raise DatasetError(
            f"dataset {source}: {len(problems)} voice prompt clip(s) cannot be read:\n- "
            + "\n- ".join(problems)
            + "\nFix: point prompt_audio_uri at a WAV/FLAC/MP3/OGG file (relative paths are relative to the "
            "dataset file), or leave it empty for items without a prompt",
            source=source,
            problems=problems,
        )
    paths = [p if isinstance(p, str) and p else None for p in items["prompt_audio_uri"]]
    # None, never NaN, in these string columns (pandas turns a None it maps or builds into NaN)
    items["prompt_audio_uri"] = pd.Series(paths, index=items.index, dtype=object)
    items["prompt_audio_sha256"] = pd.Series(
        [shas.get(p) if p else None for p in paths], index=items.index, dtype=object
    )
    return items


def store_reference_voices(
    store: ArtifactStore, run_id: str, settings: Settings, systems: list[Spec]
) -> dict[str, str]:
    """system id -> the SHA-256 of its reference voice clip (setting reference_voices, keyed by system id or
    spec), stored, and recorded for the run (runs/<run_id>/voices.json, read by References); systems without one
    are absent. A key that names no system of the run, or a clip that cannot be read, is a ConfigError naming
    the setting."""
    by_key: dict[str, str] = {}
    for system in systems:
        by_key[system.id] = by_key[system.canonical] = system.id
    out: dict[str, str] = {}
    for key, path in settings.reference_voices.items():
        system_id = by_key.get(key)
        if system_id is None:
            with contextlib.suppress(Exception):
                system_id = by_key.get(Spec.parse(key).canonical)
        if system_id is None:
            raise ConfigError(
                f"setting reference_voices: {key!r} is not a system of this run "
                f"({', '.join(s.id for s in systems)}); key it by system id or spec"
            )
        try:
            out[system_id] = _stored(store, path)
        except Exception as e:
            raise ConfigError(
                f"setting reference_voices.{key}: cannot read {path!r} ({type(e).__name__}: {e}); "
                "give a WAV/FLAC/MP3/OGG clip of the voice"
            ) from e
    recorded = References.voices_of(store, run_id) | out
    if recorded:
        store.write_bytes(f"runs/{run_id}/{VOICES_FILE}", json.dumps(recorded, sort_keys=True, indent=1).encode())
    return out


VOICES_FILE = "voices.json"


@dataclass(frozen=True)
class References:
    """What each clip of a run is compared with: its item's voice prompt, else its system's reference voice."""

    prompts: dict[str, str]  # item_id -> prompt clip SHA-256
    voices: dict[str, str]  # system_id -> reference voice SHA-256

    @staticmethod
    def voices_of(store: ArtifactStore, run_id: str) -> dict[str, str]:
        path = f"runs/{run_id}/{VOICES_FILE}"
        return json.loads(store.read_bytes(path)) if store.exists(path) else {}

    @classmethod
    def read(cls, store: ArtifactStore, run_id: str) -> References:
        items = store.read(run_id, "items")
        prompts = (
            {}
            if "prompt_audio_sha256" not in items
            else {i: s for i, s in zip(items["item_id"], items["prompt_audio_sha256"]) if isinstance(s, str) and s}
        )
        return cls(prompts, cls.voices_of(store, run_id))

    def of(self, item_id: str, system_id: str) -> tuple[str, str] | None:
        """('prompt', sha) or ('voice', sha), or None when the clip has nothing to be compared with."""
        if item_id in self.prompts:
            return "prompt", self.prompts[item_id]
        if system_id in self.voices:
            return "voice", self.voices[system_id]
        return None

    def __bool__(self) -> bool:
        return bool(self.prompts or self.voices)


def prompt_of(store: ArtifactStore, item: dict[str, Any]) -> Audio | None:
    """The item's stored voice prompt, or None."""
    sha = item.get("prompt_audio_sha256")
    return Audio.from_wav_bytes(store.get_audio(sha)) if sha else None
