"""Audio made elsewhere, as a system (`files`): each item's clip is looked up by its item id, nothing is synthesized.

    files:<label>:dir=PATH         the clip of item X is the file in PATH named X.wav, X.flac, X.mp3 or X.ogg
    files:<label>:manifest=PATH    a .jsonl or .csv with columns item_id and path, one clip per item

The label names the system in every table and report (`files:gpt-4o-mini-tts-alloy` for the EmergentTTS-Eval
baseline `files:gpt-4o-mini-tts-alloy:manifest=...`; see `ttseval import-dataset`). A relative path in a manifest
is relative to the manifest's folder; a path (and the manifest or folder itself) may be a URI such as
s3://bucket/key, read with fsspec / s3fs, whose endpoint and credentials come from the standard AWS environment
variables (AWS_ENDPOINT_URL[_S3], AWS_ACCESS_KEY_ID, ...), as for the artifact store (ttseval/core/store.py).

Clips are decoded with soundfile (libsndfile: WAV, FLAC, MP3, OGG), mixed to mono float32 and kept at their own
sample rate. A clip that is missing, an item absent from the manifest, or a file that does not decode raises
DeferredProviderError naming the item id, the path and the reason: the item gets a failed row that the next run
of the same run id tries again (once the file is there), never a silently dropped item.

The manifest is read, and the folder listed, once per provider instance. The synthesis stage calls
`synthesize(..., item_id=...)` because of `keyed_by_item`, and never reuses one item's clip for another item
with the same text.

Workers never read the folder or manifest: a run stages each `files:` system on the client before any
work is handed out (`stage_clips`, called by ttseval.tasks.staging). Every item's clip is read and decoded there,
exactly as `synthesize` would, stored as 16-bit WAV in the store's content-addressed audio (blobs/audio/<sha>.wav,
as voice prompts and synthesized clips are), and the set is recorded, itself content-addressed:

    blobs/clipsets/<sha256>.json   {"label", "source", "clips": {item_id: audio sha256},
                                    "problems": {item_id: why the item has no clip}}

The run then names the system `files:<label>` and carries {label: clip set sha256} in its settings
(`clip_sets`); a worker builds `files:<label>` from the store alone, answering each item with its stored clip or
with the same failed row the folder would have given. So a system's identity is its label (its system id hashes
provider and label), and the audio its rows describe is their `audio_sha256`: never a path on someone's disk.
Moving the folder changes nothing; a clip changed under a label within one run id is refused (the run's rows
would mix two recordings), while a nightly run under a new run id tracks the same label's new clips (drift).
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.config import STORE_WAIT_S
from ttseval.core.errors import DeferredProviderError, PermanentProviderError
from ttseval.core.paths import is_uri, resolve_against
from ttseval.core.protocols import ANY_LANGUAGE, Languages, VoicePrompt
from ttseval.providers import canonical_spec, parse_options

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg")
MANIFEST_SUFFIXES = (".jsonl", ".ndjson", ".csv")
MANIFEST_COLUMNS = ("item_id", "path")
VERSION = "1"  # the lookup rules above; change it when they change


class FilesOptions(BaseModel):
    """Options of `files:<label>:key=value`: exactly one of dir and manifest."""

    dir: str | None = Field(None, description="folder whose file <item_id>.{wav,flac,mp3,ogg} is each item's clip")
    manifest: str | None = Field(None, description=".jsonl or .csv with columns item_id and path")


def display_path(path: str) -> str:
    """`path` without what may be a secret: a URI's user:password and its query (a presigned URL's signature)."""
    if not is_uri(path):
        return path
    parts = urlsplit(path)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def filesystem(path: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) for a local path or a URI; s3:// honours AWS_ENDPOINT_URL[_S3]."""
    if path.startswith("s3://"):
        import s3fs

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        client_kwargs: dict[str, str] = {
            "region_name": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        }
        if endpoint:
            client_kwargs["endpoint_url"] = endpoint
        return s3fs.S3FileSystem(client_kwargs=client_kwargs), path[len("s3://") :]
    from fsspec.core import url_to_fs

    fs, inner = url_to_fs(path)
    return fs, inner


class _SourceError(Exception):
    """The manifest or folder itself cannot be used (as opposed to one item's clip)."""


class FilesTTS:
    """Clips made by another system (a vendor's batch job, a paper's baseline, a model run elsewhere), looked up by
    item id. Speaks every language (it says nothing about them); output rate is each clip's own.

    Options: dir=PATH or manifest=PATH (exactly one); the label (voice slot) names the system and is required.
    Built as `files:<label>` with the run's store and `clip_sets` naming a clip set for the label (stage_clips),
    it reads that stored set instead (store mode: what a worker builds).
    """

    name: ClassVar[str] = "files"
    languages: ClassVar[Languages] = ANY_LANGUAGE
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[str] = VERSION
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()
    keyed_by_item: ClassVar[bool] = True
    # Audio made elsewhere may be a cloner's output for each item's voice prompt (Seed-TTS-eval's layout): the
    # prompt is accepted and not used; the similarity stage compares each clip with it.
    clones_voice: ClassVar[bool] = True
    # built with the run's store URI, its wait and its staged clip sets (ttseval.tasks.provider_cache.get_provider)
    run_settings: ClassVar[tuple[str, ...]] = ("store", "store_wait_s", "clip_sets")

    def __init__(
        self,
        voice: str | None = None,
        *,
        store: str | None = None,
        store_wait_s: float = STORE_WAIT_S,
        clip_sets: dict[str, str] | None = None,
        **options: str,
    ) -> None:
        self.options = parse_options(FilesOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        if not voice:
            raise ValueError(
                "files needs a label that names the system, e.g. "
                "files:my-system:dir=clips/ or files:my-system:manifest=clips.jsonl"
            )
        self.label = voice
        given = {k: v for k, v in (("dir", self.options.dir), ("manifest", self.options.manifest)) if v}
        self.staged: dict[str, Any] | None = None  # the clip set the run stored (store mode), else None
        self.clip_set: str | None = None
        self._entries: dict[str, str] | None = None  # item id -> clip path (manifest) or the clips found (dir)
        self._duplicates: dict[str, list[str]] = {}
        self._error: str | None = None
        if not given and clip_sets and voice in clip_sets and store is not None:
            self._read_staged(store, clip_sets[voice], store_wait_s)
            return
        if len(given) != 1:
            raise ValueError(
                f"files:{voice} needs exactly one of dir=PATH (clips named <item_id>.wav/.flac/.mp3/.ogg) and "
                f"manifest=PATH (.jsonl or .csv with columns item_id, path); "
                f"got {' and '.join(given) if given else 'neither'}"
            )
        ((self.source, self.path),) = given.items()
        if self.source == "manifest" and not self.path.lower().endswith(MANIFEST_SUFFIXES):
            raise ValueError(
                f"files:{voice}: manifest={display_path(self.path)!r} is neither .jsonl nor .csv; "
                "write one with columns item_id and path"
            )
        if not is_uri(self.path):
            self.path = os.path.abspath(self.path)  # on the client, which stages the clips (stage_clips)
            # A local folder or manifest is checked (and read) now, so a typo fails before any work.
            kind = "folder" if self.source == "dir" else "file"
            exists = os.path.isdir(self.path) if self.source == "dir" else os.path.isfile(self.path)
            if not exists:
                holds = "holds the clips" if self.source == "dir" else "lists the clips (item_id, path)"
                raise ValueError(
                    f"files:{voice}: {self.source}={self.path!r} is not an existing {kind}; "
                    f"give the path of the {kind} that {holds}"
                )
            try:
                self._load()
            except _SourceError as e:
                raise ValueError(f"files:{voice}: {e}") from e

    def _read_staged(self, store: str, clip_set: str, wait_s: float) -> None:
        """Store mode: the clips of `files:<label>` are the stored clip set `clip_set` (stage_clips)."""
        from ttseval.core.store import ArtifactStore

        self.store = ArtifactStore(store, wait_s=wait_s)
        try:
            self.staged = json.loads(self.store.read_bytes(clip_set_path(clip_set)))
        except Exception as e:
            raise ValueError(
                f"files:{self.label}: the run's clip set {clip_set[:12]} cannot be read from the store "
                f"{self.store.display()}: {type(e).__name__}: {e}"
            ) from e
        self.clip_set = clip_set
        self.source, self.path = "clips", self.staged["source"]

    def supports_language(self, language: str) -> bool:
        return True

    # lookup ----------------------------------------------------------------------------------------------------
    def _load(self) -> None:
        """Read the manifest or list the folder, once; the error, if any, is kept and raised again."""
        if self._entries is not None:
            return
        if self._error is not None:
            raise _SourceError(self._error)
        try:
            self._entries = self._read_manifest() if self.source == "manifest" else self._list_folder()
        except _SourceError as e:
            self._error = str(e)
            raise

    def _read_manifest(self) -> dict[str, str]:
        where = f"manifest {display_path(self.path)}"
        try:
            fs, inner = filesystem(self.path)
            with fs.open(inner, "rb") as f:
                text = f.read().decode("utf-8-sig")
        except (OSError, ValueError, ImportError) as e:
            raise _SourceError(f"{where} cannot be read: {type(e).__name__}: {e}") from e
        rows: list[tuple[int, dict[str, Any]]] = []
        if self.path.lower().endswith(".csv"):
            reader = csv.DictReader(io.StringIO(text))
            missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise _SourceError(
                    f"{where} has no column(s) {', '.join(missing)}; its header must name "
                    f"item_id and path (found: {', '.join(reader.fieldnames or []) or 'none'})"
                )
            rows = [(number, row) for number, row in enumerate(reader, start=2)]
        else:
            for number, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise _SourceError(f"{where} line {number} is not JSON: {e}") from e
                if not isinstance(row, dict):
                    raise _SourceError(f"{where} line {number} is not a JSON object")
                rows.append((number, row))
        entries: dict[str, str] = {}
        for number, row in rows:
            item_id, path = row.get("item_id"), row.get("path")
            if (
                not isinstance(item_id, (str, int))
                or not str(item_id).strip()
                or not isinstance(path, str)
                or not path.strip()
            ):
                raise _SourceError(
                    f"{where} line {number}: needs a non-empty item_id and path "
                    f"(got item_id={item_id!r}, path={path!r})"
                )
            item_id = str(item_id).strip()
            resolved = resolve_against(self.path, path)
            if entries.get(item_id, resolved) != resolved:
                raise _SourceError(
                    f"{where} line {number}: item_id {item_id!r} is listed twice, with "
                    f"{display_path(entries[item_id])} and {display_path(resolved)}; keep one"
                )
            entries[item_id] = resolved
        return entries

    def _list_folder(self) -> dict[str, str]:
        try:
            fs, inner = filesystem(self.path)
            names = fs.ls(inner, detail=False)
        except (OSError, ValueError, ImportError) as e:
            raise _SourceError(f"folder {display_path(self.path)} cannot be listed: {type(e).__name__}: {e}") from e
        found: dict[str, list[str]] = {}
        for name in names:
            base = posixpath.basename(str(name).rstrip("/"))
            stem, suffix = posixpath.splitext(base)
            if suffix.lower() in AUDIO_SUFFIXES:
                found.setdefault(stem, []).append(base)
        self._duplicates = {
            stem: sorted(self._join(b) for b in bases) for stem, bases in found.items() if len(bases) > 1
        }
        return {stem: self._join(bases[0]) for stem, bases in found.items() if len(bases) == 1}

    def _join(self, name: str) -> str:
        """The path of `name` in the folder (dir=)."""
        return f"{self.path.rstrip('/')}/{name}" if is_uri(self.path) else os.path.join(self.path, name)

    def _deferred(self, item_id: str, path: str, reason: str) -> DeferredProviderError:
        return DeferredProviderError(
            f"files:{self.label}: item {item_id!r}: {display_path(path)}: {reason}", spec=self.spec, key=item_id
        )

    def referenced_paths(self) -> list[str]:
        """The folder or manifest this system reads and every clip path it holds (a manifest's rows; a folder's
        clips as listed), for the check that confines what a run may read (setting confine_paths). A source
        that cannot be read gives its own path alone (the item rows then say why); a stored clip set, none."""
        if self.staged is not None:
            return []
        try:
            self._load()
        except _SourceError:
            return [self.path]
        assert self._entries is not None
        duplicates = [p for paths in self._duplicates.values() for p in paths]
        return [self.path, *sorted(self._entries.values()), *duplicates]

    def clips(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        """(item id -> clip path, item id -> the paths of a folder's two or more clips with one stem), read once.
        Raises ValueError when the folder or manifest itself cannot be read."""
        if self.staged is not None:
            raise ValueError(f"files:{self.label} is a stored clip set: its clips are in the store, not at paths")
        try:
            self._load()
        except _SourceError as e:
            raise ValueError(f"files:{self.label}: {e}") from e
        assert self._entries is not None
        return dict(self._entries), dict(self._duplicates)

    def clip_path(self, item_id: str) -> str:
        """The path or URI of `item_id`'s clip.

        Raises:
            DeferredProviderError: the manifest cannot be read, the item is not in it, the folder has no clip for
                it, or has two (same stem, two extensions).
        """
        try:
            self._load()
        except _SourceError as e:
            raise self._deferred(item_id, self.path, str(e)) from e
        assert self._entries is not None
        if item_id in self._entries:
            return self._entries[item_id]
        if self.source == "manifest":
            raise self._deferred(
                item_id,
                self.path,
                f'item id {item_id!r} is not in the manifest; add a row {{"item_id": "{item_id}", "path": ...}}',
            )
        if item_id in self._duplicates:
            both = " and ".join(display_path(p) for p in self._duplicates[item_id])
            raise self._deferred(item_id, self.path, f"two clips for one item: {both}; keep one")
        expected = self._join(f"{item_id}.{{{','.join(s.lstrip('.') for s in AUDIO_SUFFIXES)}}}")
        raise self._deferred(item_id, expected, "missing file (no clip with that name in the folder)")

    # protocol --------------------------------------------------------------------------------------------------
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
        """The clip of `item_id`, mono float32 at the file's own rate; `text`, `language`, `instruction` and the
        voice `prompt` are not used (the audio was made elsewhere, from them).

        Raises:
            DeferredProviderError: no clip for the item, or one that cannot be read or decoded.
            PermanentProviderError: called without an item id (a caller that ignores keyed_by_item).
        """
        if item_id is None:
            raise PermanentProviderError(
                "files looks clips up by item id; call synthesize(..., item_id=...)", spec=self.spec
            )
        if self.staged is not None:
            return self._staged_clip(item_id)
        path = self.clip_path(item_id)
        try:
            fs, inner = filesystem(path)
            with fs.open(inner, "rb") as f:
                data = f.read()
        except FileNotFoundError as e:
            raise self._deferred(item_id, path, "missing file") from e
        except (OSError, ValueError, ImportError) as e:
            raise self._deferred(item_id, path, f"cannot be read: {type(e).__name__}: {e}") from e
        import soundfile as sf

        try:
            samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        except (RuntimeError, ValueError, TypeError) as e:  # sf.LibsndfileError is a RuntimeError
            reason = getattr(e, "error_string", None) or str(e)
            raise self._deferred(item_id, path, f"cannot be decoded as audio ({len(data)} bytes): {reason}") from e
        return Audio(samples=samples.mean(axis=1).astype(np.float32), sample_rate_hz=int(rate))

    def _staged_clip(self, item_id: str) -> Audio:
        """Store mode: the item's stored clip, or the failed row its folder or manifest gave when it was staged."""
        assert self.staged is not None
        sha = self.staged["clips"].get(item_id)
        if sha is None:
            why = self.staged["problems"].get(item_id) or (
                f"files:{self.label}: item {item_id!r}: not staged from {self.path} (the run staged the clips of its "
                "own items only)"
            )
            raise DeferredProviderError(why, spec=self.spec, key=item_id)
        try:
            data = self.store.get_audio(sha)
        except Exception as e:
            raise DeferredProviderError(
                f"files:{self.label}: item {item_id!r}: clip {sha[:12]} cannot be read from "
                f"the store: {type(e).__name__}: {e}",
                spec=self.spec,
                key=item_id,
            ) from e
        return Audio.from_wav_bytes(data)

    def metadata(self) -> dict[str, Any]:
        where = (
            {"source": self.source, "path": display_path(self.path)}
            if self.staged is None
            else {"source": self.path, "clip_set": self.clip_set}
        )
        return {"engine": "files", "version": self.version, "label": self.label, **where}


CLIP_SETS = "blobs/clipsets"


def clip_set_path(sha256: str) -> str:
    return f"{CLIP_SETS}/{sha256}.json"


def stage_clips(source: FilesTTS, store: Any, item_ids: list[str]) -> tuple[str, dict[str, Any]]:
    """Read the clip of each of `item_ids` from `source`'s folder or manifest, here, as `synthesize` reads it
    (decoded, mono), store it as 16-bit WAV (content-addressed), and record the set (clip_set_path); returns the
    set's SHA-256 and the record. An item without a usable clip is recorded with the reason its row will carry.

    Raises:
        ValueError: `source` is not a folder or manifest (a system built in store mode).
    """
    from ttseval.core.audio import sha256_hex

    if source.staged is not None:
        raise ValueError(f"files:{source.label} is already a stored clip set")
    clips: dict[str, str] = {}
    problems: dict[str, str] = {}
    for item_id in item_ids:
        try:
            wav = source.synthesize("", "", item_id=item_id).to_wav_bytes()
        except DeferredProviderError as e:
            problems[item_id] = str(e)
            continue
        clips[item_id] = sha = sha256_hex(wav)
        store.put_audio(wav, sha)
    record = {
        "label": source.label,
        "source": f"{source.source} {display_path(source.path)}",
        "clips": dict(sorted(clips.items())),
        "problems": dict(sorted(problems.items())),
    }
    data = json.dumps(record, sort_keys=True, indent=1).encode("utf-8")
    sha = sha256_hex(data)
    if not store.exists(clip_set_path(sha)):
        store.write_bytes(clip_set_path(sha), data)
    return sha, record
