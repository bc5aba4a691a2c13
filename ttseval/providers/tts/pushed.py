"""Audio made elsewhere, pushed into the store (`ttseval systems push`): a system named by its label alone.

    pushed:<label>     the clips `ttseval systems push --label <label>` stored, looked up by item id

A `files:` system reads a folder or manifest on the disk of whichever process runs it; on a shared server the
person filling the Prefect UI form is not on that machine. `systems push` reads the clips where the user is,
decodes each one and stores it as 16-bit WAV in the store's content-addressed audio (blobs/audio/<sha>.wav, the
form voice prompts and synthesized clips already take), and records the system:

    systems/<label>/manifest.json   {"label", "clips": {item_id: sha256}, "content_sha256", "n_clips", "sources",
                                     "created_at", "updated_at"}

The system's identity is its label and its clips' hashes, never a path: the spec `pushed:<label>` holds no path
(its system id hashes provider and label), and a label is frozen to its clips: pushing the same clips again is a
no-op, pushing clips for new items adds them, and pushing a different clip for an item already there is refused
(choose another label), so rows stored under the label always describe the same audio. The stored form is
keyed by label alone and records where each push came from, so any `files:` system can be turned into one
(read its folder or manifest, push under its label) where a cluster needs it.
"""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from typing import Any, ClassVar, TypedDict

import numpy as np

from ttseval.core.audio import Audio, sha256_hex
from ttseval.core.config import STORE_WAIT_S
from ttseval.core.errors import DatasetError, DeferredProviderError, PermanentProviderError
from ttseval.core.ids import digest
from ttseval.core.protocols import ANY_LANGUAGE, Languages, VoicePrompt
from ttseval.core.store import ArtifactStore
from ttseval.providers import canonical_spec

VERSION = "1"
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def manifest_path(label: str) -> str:
    return f"systems/{label}/manifest.json"


def check_label(label: str) -> str:
    if not isinstance(label, str) or not LABEL_RE.match(label):
        raise DatasetError(
            f"system label {label!r}: use letters, digits, '.', '_' or '-' (it names the system in "
            "reports and the spec pushed:<label>)"
        )
    return label


def read_system(store: ArtifactStore, label: str) -> dict[str, Any] | None:
    """The stored manifest of the pushed system `label`, or None."""
    path = manifest_path(label)
    manifest: dict[str, Any] | None = store.read_json(path) if store.exists(path) else None
    return manifest


def labels(store: ArtifactStore) -> list[str]:
    """The labels of every pushed system in the store, sorted."""
    import pyarrow.fs as pafs

    infos = store.fs.get_file_info(pafs.FileSelector(store.path("systems"), allow_not_found=True))
    return sorted(
        i.base_name for i in infos if i.type == pafs.FileType.Directory and store.exists(manifest_path(i.base_name))
    )


def clip_wav(data: bytes) -> tuple[bytes, str]:
    """One clip (soundfile: WAV, FLAC, MP3, OGG) as the 16-bit WAV the store keeps, and that WAV's SHA-256.
    Raises ValueError for a clip with no samples, RuntimeError / ValueError for one that does not decode."""
    audio = Audio.from_wav_bytes(data)
    if not len(audio.samples):
        raise ValueError("the clip has no samples")
    wav = audio.to_wav_bytes()
    return wav, sha256_hex(wav)


def store_clip(store: ArtifactStore, data: bytes) -> str:
    """Decode one clip (clip_wav), store it as 16-bit WAV; its SHA-256."""
    wav, sha = clip_wav(data)
    store.put_audio(wav, sha)
    return sha


def _refuse_changed_clips(store: ArtifactStore, label: str, clips: dict[str, str]) -> dict[str, Any] | None:
    """The label's stored manifest (None if new), after refusing clips that differ from the ones it holds."""
    old = read_system(store, label)
    held: dict[str, str] = dict(old["clips"]) if old else {}
    changed = sorted(i for i, sha in clips.items() if i in held and held[i] != sha)
    if changed:
        shown = ", ".join(repr(i) for i in changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise DatasetError(
            f"system {label!r} is registered with other clips for {len(changed)} item(s): {shown}. Fix: push them "
            "under a new --label (runs already stored under this label must keep describing the same audio)"
        )
    return old


def push_system(store: ArtifactStore, label: str, clips: dict[str, str], *, source: dict[str, Any]) -> dict[str, Any]:
    """Store `clips` (item_id -> SHA-256 of an already stored clip) under `label`; returns the manifest and
    whether anything changed (`added`: the item ids new to the label). A label's clip never changes: an item
    whose stored clip differs is refused (DatasetError naming the items and the fix)."""
    check_label(label)
    old = _refuse_changed_clips(store, label, clips)
    held: dict[str, str] = dict(old["clips"]) if old else {}
    added = sorted(set(clips) - set(held))
    if old and not added:
        return old | {"added": []}
    merged = dict(sorted((held | clips).items()))
    now = datetime.now(UTC).isoformat(timespec="seconds")
    manifest = {
        "label": label,
        "spec": f"pushed:{label}",
        "clips": merged,
        "content_sha256": digest(merged),
        "n_clips": len(merged),
        "sources": [*(old or {}).get("sources", []), source | {"added": len(added)}],
        "created_at": (old or {}).get("created_at", now),
        "updated_at": now,
    }
    store.write_bytes(manifest_path(label), json.dumps(manifest, indent=1).encode("utf-8"))
    return manifest | {"added": added}


def unknown_label_message(store: ArtifactStore, label: str) -> str:
    known = labels(store)
    return (
        f"no system {label!r} was pushed to store {store.display()} (pushed systems: "
        f"{', '.join(f'pushed:{k}' for k in known) or 'none'}); push its clips with `ttseval systems push "
        f"--label {label} --dir FOLDER`, or pick one of those"
    )


class PushedTTS:
    """Clips pushed into the run's store (`ttseval systems push`), looked up by item id. Speaks every language;
    output rate is each clip's own. The label (voice slot) is required; there are no options."""

    name: ClassVar[str] = "pushed"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[str] = VERSION
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()
    keyed_by_item: ClassVar[bool] = True
    clones_voice: ClassVar[bool] = True
    # built with store=<the run's store URI> and its wait (ttseval.tasks.provider_cache.get_provider)
    run_settings: ClassVar[tuple[str, ...]] = ("store", "store_wait_s")

    def __init__(
        self, voice: str | None = None, *, store: str | None = None, store_wait_s: float = STORE_WAIT_S, **options: str
    ) -> None:
        if options:
            raise ValueError(f"pushed takes no options (got {', '.join(sorted(options))}); write pushed:<label>")
        if not voice:
            raise ValueError(
                "pushed needs the label the clips were pushed under, e.g. pushed:my-system (see `ttseval systems list`)"
            )
        if store is None:
            raise ValueError("pushed reads the run's store; build it through ttseval.tasks.provider_cache.get_provider")
        self.spec = canonical_spec(self.name, voice, {})
        self.label = voice
        self.store = ArtifactStore(store, wait_s=store_wait_s)
        manifest = read_system(self.store, voice)
        if manifest is None:
            raise ValueError(unknown_label_message(self.store, voice))
        self.clips: dict[str, str] = manifest["clips"]
        self.content_sha256: str = manifest["content_sha256"]

    def supports_language(self, language: str) -> bool:
        return True

    def synthesize(
        self,
        text: str,
        language: str,
        voice: str | None = None,
        instruction: str | None = None,
        *,
        item_id: str | None = None,
        prompt: VoicePrompt | None = None,
    ) -> Audio:
        """The pushed clip of `item_id`; the text, language, instruction and prompt are not used.

        Raises:
            DeferredProviderError: no clip was pushed for the item, or its blob cannot be read (a failed row that a
                later run retries, e.g. after `systems push` adds the clip).
            PermanentProviderError: called without an item id.
        """
        if item_id is None:
            raise PermanentProviderError(
                "pushed looks clips up by item id; call synthesize(..., item_id=...)", spec=self.spec
            )
        sha = self.clips.get(item_id)
        if sha is None:
            raise DeferredProviderError(
                f"pushed:{self.label}: item {item_id!r}: no clip was pushed for it; push it with `ttseval systems push "
                f"--label {self.label}` (a file named {item_id}.wav in --dir, or a manifest row)",
                spec=self.spec,
                key=item_id,
            )
        try:
            data = self.store.get_audio(sha)
        except Exception as e:
            raise DeferredProviderError(
                f"pushed:{self.label}: item {item_id!r}: clip {sha[:12]} cannot be read from "
                f"the store: {type(e).__name__}: {e}",
                spec=self.spec,
                key=item_id,
            ) from e
        import soundfile as sf

        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        return Audio(samples=samples.mean(axis=1).astype(np.float32), sample_rate_hz=int(rate))

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "pushed",
            "version": self.version,
            "label": self.label,
            "n_clips": len(self.clips),
            "content_sha256": self.content_sha256,
        }


class _Source(TypedDict, total=False):
    """A `files:` system's source option: its folder or its manifest."""

    dir: str
    manifest: str


def push_files(
    store: ArtifactStore, label: str, *, dir: str | None = None, manifest: str | None = None
) -> dict[str, Any]:
    """Read every clip of a folder (<item_id>.wav/.flac/.mp3/.ogg) or a manifest (item_id, path), as a `files:`
    system would, store each one and register them under `label` (push_system). Every clip that cannot be used is
    named (item, path, reason) in one DatasetError before anything is registered. A clip a manifest lists that
    is not there is left out and named in the result (`missing`), as a `files:` run would give its item a failed
    row; pushing it later under the same label adds it."""
    from ttseval.providers.tts.files import FilesTTS, display_path, filesystem

    check_label(label)
    given: _Source = {}
    if dir:
        given["dir"] = dir
    if manifest:
        given["manifest"] = manifest
    try:
        source = FilesTTS(label, **given)
        found, duplicates = source.clips()
    except ValueError as e:
        raise DatasetError(f"systems push: {e}") from e
    problems = [
        f"item {i!r}: two clips with one name ({', '.join(display_path(p) for p in paths)}); keep one"
        for i, paths in sorted(duplicates.items())
    ]
    # Two passes, so a refused push stores nothing: every clip decoded and hashed first, then, once nothing is
    # refused, each one read again and stored (one clip in memory at a time, however many the push holds).
    clips: dict[str, str] = {}
    missing: list[str] = []

    def read(path: str) -> bytes:
        fs, inner = filesystem(path)
        with fs.open(inner, "rb") as f:
            data: bytes = f.read()
            return data

    for item_id, path in sorted(found.items()):
        try:
            clips[item_id] = clip_wav(read(path))[1]
        except FileNotFoundError:  # a manifest may list clips not made (yet): their items get failed rows
            missing.append(item_id)
        except Exception as e:  # noqa: BLE001 - any read or decode failure is the clip's, named below
            reason = getattr(e, "error_string", None) or str(e)
            problems.append(f"item {item_id!r}: {display_path(path)}: {type(e).__name__}: {str(reason)[:200]}")
    where = f"{source.source} {display_path(source.path)}"
    if problems:
        raise DatasetError(
            f"systems push --label {label}: {len(problems)} clip(s) in {where} cannot be used:\n- "
            + "\n- ".join(problems)
            + "\nFix: replace or remove them (WAV, FLAC, MP3 or OGG, named "
            "<item_id>.<ext> in a folder, or listed in a manifest); nothing was registered",
            source=where,
            problems=problems,
        )
    if not clips:
        raise DatasetError(
            f"systems push --label {label}: {where} holds no clips; a folder needs files named "
            "<item_id>.wav (or .flac, .mp3, .ogg), a manifest rows with item_id and path",
            source=where,
        )
    _refuse_changed_clips(store, label, clips)
    for item_id, sha in clips.items():
        wav, stored_sha = clip_wav(read(found[item_id]))
        if stored_sha != sha:
            raise DatasetError(f"systems push --label {label}: item {item_id!r}: its clip changed while being pushed")
        store.put_audio(wav, sha)
    done = push_system(store, label, clips, source={source.source: display_path(source.path), "n_clips": len(clips)})
    return done | {"missing": missing}
