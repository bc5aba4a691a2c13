"""`ttseval store repair`: the store's catalog objects that do not parse, found and set aside.

The catalog is what commands list and resolve before any run: each dataset version's manifest
(datasets/<name>/<version>/manifest.json) and each pushed system's (systems/<label>/manifest.json). One written
corrupt (an S3 server that stored the upload's chunk framing as the object's bytes) made every `datasets list` and
`datasets push` fail. Reading one now raises CorruptObjectError naming it; this sets it aside: its bytes are kept
as `<object>.corrupt` (evidence, never read) and the object is removed, so the version or system reads as
unfinished (not listed, not resolved) until it is pushed again, which writes it whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs

from ttseval.core.errors import CorruptObjectError
from ttseval.core.store import ArtifactStore

CORRUPT_SUFFIX = ".corrupt"


@dataclass(frozen=True)
class Corrupt:
    rel_path: str  # the object, relative to the store's root
    reason: str  # CorruptObjectError's message
    push_again: str  # the command that writes it whole again


def _folders(store: ArtifactStore, rel: str) -> list[str]:
    infos = store.fs.get_file_info(pafs.FileSelector(store.path(rel), allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)


def catalog_objects(store: ArtifactStore) -> list[tuple[str, str]]:
    """(manifest path, the command that pushes it again) of every catalog object the store holds."""
    found = [
        (f"datasets/{name}/{version}/manifest.json", f"ttseval datasets push FILE --name {name} --version {version}")
        for name in _folders(store, "datasets")
        for version in _folders(store, f"datasets/{name}")
    ]
    found += [
        (f"systems/{label}/manifest.json", f"ttseval systems push --label {label} --dir FOLDER")
        for label in _folders(store, "systems")
    ]
    return [(rel, again) for rel, again in found if store.exists(rel)]


def corrupt_objects(store: ArtifactStore) -> list[Corrupt]:
    """The catalog objects whose bytes are not a JSON object."""
    out = []
    for rel, again in catalog_objects(store):
        try:
            value = store.read_json(rel)
        except CorruptObjectError as e:
            out.append(Corrupt(rel, str(e), again))
            continue
        if not isinstance(value, dict):
            out.append(Corrupt(rel, f"{store.display(rel)} holds {type(value).__name__}, not a JSON object", again))
    return out


def set_aside(store: ArtifactStore, found: list[Corrupt]) -> None:
    """Keep each object's bytes as `<object>.corrupt`, then remove the object."""
    for c in found:
        store.write_bytes(c.rel_path + CORRUPT_SUFFIX, store.read_bytes(c.rel_path))
        store.delete(store.path(c.rel_path))
