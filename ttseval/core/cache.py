"""One request cache: a JSON document per (namespace, request key), kept in the artifact store.

The LLM call cache (namespace `llm/<llm_id>`) and the synthesis reuse cache (namespace `synthesis`) both use it,
so there is one layout, one atomic write and one answer to "what if an entry is damaged":

    cache/<namespace>/<key[:2]>/<key>.json

This is the layout both caches had before they were merged, so entries written by older versions still hit.
The two-character fan-out keeps a local folder's listing short. Writes go through `ArtifactStore.write_bytes`
(temp file and rename locally, one PUT on S3), so a reader never sees half an entry. The key is the caller's:
sha256 of the canonical JSON of what the answer depends on (`ttseval.core.ids.digest`).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ttseval.core.errors import StoreError
from ttseval.core.ids import canonical_json
from ttseval.core.store import ArtifactStore

logger = logging.getLogger(__name__)

_KEY = re.compile(r"^[0-9a-f]{8,128}$")


class RequestCache:
    """JSON documents by request key under `cache/<namespace>/` of one store.

    Args:
        store: The artifact store that holds the entries.
        namespace: A relative folder name, e.g. `synthesis` or `llm/<llm_id>`; never absolute, never `..`.
    """

    def __init__(self, store: ArtifactStore, namespace: str) -> None:
        parts = namespace.split("/")
        if not namespace or namespace.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"cache namespace {namespace!r} must be a relative path such as 'synthesis'")
        self.store = store
        self.namespace = namespace

    def path(self, key: str) -> str:
        """The entry's path relative to the store root."""
        if not _KEY.match(key):
            raise ValueError(f"cache key {key!r} is not a hex digest (use ttseval.core.ids.digest)")
        return f"cache/{self.namespace}/{key[:2]}/{key}.json"

    def exists(self, key: str) -> bool:
        return self.store.exists(self.path(key))

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored document, or None when there is none or it cannot be read.

        A cache only saves work, so an entry that cannot be read (absent, a store error, damaged JSON) is a miss:
        the caller computes the answer again and `put` overwrites the entry. Damage is logged; absence is not.
        """
        try:
            data = self.store.read_bytes(self.path(key))
        except StoreError:
            return None
        try:
            entry = json.loads(data)
        except ValueError as e:
            logger.warning("cache entry %s is damaged (%s); computing it again", self.path(key), e)
            return None
        if not isinstance(entry, dict):
            logger.warning(
                "cache entry %s holds a %s, not an object; computing it again", self.path(key), type(entry).__name__
            )
            return None
        return entry

    def put(self, key: str, document: dict[str, Any]) -> str:
        """Write `document` as canonical JSON, atomically; returns the full path."""
        return self.store.write_bytes(self.path(key), canonical_json(document).encode("utf-8"))
