"""Paths as users write them in files: the one rule for a path inside a dataset, manifest or list file.

A URI (s3://bucket/key, https://...) and an absolute path are kept as written; a relative path is relative to
the folder of the file that names it (a URI's folder when that file is a URI). Local results are absolute and
free of symbolic links (`Path.resolve`), so the same file gets the same string however it was reached.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds the `ttseval` package: the repository's root in a checkout (where the deployments' relative
paths, such as corpus/data/demo.jsonl, resolve), site-packages in an installed wheel."""

LOCAL_CACHE = Path("~/.cache/ttseval")
"""This machine's own cache (joined model weights, validations already passed): only ever a shortcut, so a worker
that lacks it redoes the work; never where a result lives (that is the store)."""


def source_fingerprint(*places: str | Path) -> str:
    """The sha256 of the code in `places` (files, or folders and all under them) as it is on disk: each file's path,
    size and modification time (a stat each, no reads). A result cached under it is not reused by other code: an
    upgrade, another checkout, an edit not yet committed (a version number or a commit alone miss the last two)."""
    digest = hashlib.sha256()
    for place in map(Path, places):
        for path in [place] if place.is_file() else sorted(place.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def is_uri(path: str) -> bool:
    """A URI such as s3://bucket/key, read with fsspec, rather than a local path."""
    return "://" in path


def resolve_against(base: str | Path, path: str, *, base_is_folder: bool = False) -> str:
    """`path` as written in the file `base` (or in a file inside the folder `base` when `base_is_folder`): URIs and
    absolute paths as they are (stripped of surrounding spaces), a relative path joined to base's folder."""
    path = path.strip()
    if is_uri(path) or os.path.isabs(path):
        return path
    base = str(base)
    if is_uri(base):
        return posixpath.join(base if base_is_folder else posixpath.dirname(base), path)
    folder = Path(base) if base_is_folder else Path(base).resolve().parent
    return str((folder / path).resolve())


def within(path: str, roots: Iterable[str | Path]) -> bool:
    """Whether `path` lies inside one of `roots` (folders, or URI prefixes such as s3://bucket/clips/).

    A local path (or a file:// URI) counts once resolved: symbolic links followed and `..` gone, so neither
    `data/../../etc/passwd` nor a link inside a root that points out of it is inside. Any other URI is inside only
    under a root written as a URI, prefix by whole path segments, and never with a `..` segment.
    """
    path = path.strip()
    if path.startswith("file://"):
        path = unquote(urlsplit(path).path)
    if is_uri(path):
        if ".." in path.split("://", 1)[1].split("/"):
            return False
        return any(is_uri(str(r)) and (path + "/").startswith(str(r).rstrip("/") + "/") for r in roots)
    real = Path(path).resolve()
    return any(not is_uri(str(r)) and real.is_relative_to(Path(r).resolve()) for r in roots)
