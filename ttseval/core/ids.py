"""Stable identifiers: a readable name plus a hash of the parameters that define the thing."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces, so equal objects hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(obj: Any, *, length: int = 64) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]


def slug(text: str, fallback: str = "x") -> str:
    """Lower-case letters, digits and single dashes: safe in ids, artifact keys and file names."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or fallback


def stable_id(readable: str, params: Any) -> str:
    """'piper-joe-1a2b3c4d': a slug of `readable` and 8 hex digits of sha256(canonical JSON of `params`)."""
    return f"{slug(readable)}-{digest(params, length=8)}"
