"""Versioned, frozen datasets in the artifact store, referred to as NAME@VERSION.

    datasets/<name>/<version>/items.parquet       the ok items (GENERATED schema: items columns + lineage)
    datasets/<name>/<version>/generation.parquet  every row, failed ones with their reason
    datasets/<name>/<version>/stats.parquet, stats.md, manifest.json

A version is written once. Writing it again with the same items is a no-op; with different items it is
refused, so an evaluation that names NAME@VERSION always reads the same items. The default version is
`g` + the first 12 hex digits of the items' content hash.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ttseval.core.errors import DatasetError
from ttseval.core.ids import digest
from ttseval.core.schemas import GENERATED, ITEMS
from ttseval.core.store import ArtifactStore

REF_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)@(?P<version>[A-Za-z0-9][A-Za-z0-9._-]*)$")
_CONTENT_COLUMNS = [n for n in GENERATED.names if n not in ("created_at",)]


def is_ref(text: str) -> bool:
    return bool(REF_RE.match(text))


def _dir(name: str, version: str) -> str:
    return f"datasets/{name}/{version}"


def content_hash(items: pd.DataFrame) -> str:
    rows = items[[c for c in _CONTENT_COLUMNS if c in items.columns]].sort_values("item_id")
    return digest(json.loads(rows.to_json(orient="records", force_ascii=False)))


def _parquet(frame: pd.DataFrame, schema: pa.Schema | None = None) -> bytes:
    frame = frame.astype(object).where(frame.notna(), None)  # NaN in a text column is a missing value
    table = (
        pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in frame.to_dict("records")], schema=schema)
        if schema is not None
        else pa.Table.from_pandas(frame, preserve_index=False)
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data: bytes = sink.getvalue().to_pybytes()
    return data


@dataclass
class Written:
    ref: str
    uri: str
    created: bool


def write_version(
    store: ArtifactStore,
    name: str,
    version: str | None,
    *,
    items: pd.DataFrame,
    generation: pd.DataFrame,
    stats: pd.DataFrame,
    stats_md: str,
    manifest: dict[str, Any],
) -> Written:
    """Freeze a dataset version; returns its reference. Refuses to change an existing version."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise DatasetError(f"dataset name {name!r}: use letters, digits, '.', '_' or '-' (no '@' or '/')")
    sha = content_hash(items)
    version = version or f"g{sha[:12]}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", version):
        raise DatasetError(f"dataset version {version!r}: use letters, digits, '.', '_' or '-'")
    base = _dir(name, version)
    ref = f"{name}@{version}"
    if store.exists(f"{base}/manifest.json"):
        old = store.read_json(f"{base}/manifest.json")
        if old.get("content_sha256") != sha:
            raise DatasetError(
                f"dataset {ref} is frozen and holds other items (content {old.get('content_sha256', '?')[:12]} vs "
                f"{sha[:12]}); pass a new --version, or leave it out to get a content-addressed one"
            )
        return Written(ref, store.display(base), created=False)
    store.write_bytes(f"{base}/items.parquet", _parquet(items, GENERATED))
    store.write_bytes(f"{base}/generation.parquet", _parquet(generation, GENERATED))
    store.write_bytes(f"{base}/stats.parquet", _parquet(stats))
    store.write_bytes(f"{base}/stats.md", stats_md.encode("utf-8"))
    # The manifest goes last: a version without one is unfinished and is not listed or read.
    store.write_bytes(
        f"{base}/manifest.json",
        json.dumps(
            {**manifest, "name": name, "version": version, "ref": ref, "content_sha256": sha, "n_items": len(items)},
            indent=2,
            default=str,
        ).encode("utf-8"),
    )
    return Written(ref, store.display(base), created=True)


def versions(store: ArtifactStore, name: str) -> list[dict[str, Any]]:
    """Manifests of a dataset's finished versions, oldest first."""
    infos = store.fs.get_file_info(pafs.FileSelector(store.path("datasets", name), allow_not_found=True))
    found = []
    for info in infos:
        rel = f"{_dir(name, info.base_name)}/manifest.json"
        if info.type == pafs.FileType.Directory and store.exists(rel):
            found.append(store.read_json(rel))
    return sorted(found, key=_age)


def _age(manifest: dict[str, Any]) -> tuple[datetime, str]:
    """A version's place in time: its created_at (written to the microsecond; versions written before that carry
    seconds, and two of them made in one second are ordered by version name, never by the listing's order)."""
    try:
        at = datetime.fromisoformat(str(manifest.get("created_at")))
    except ValueError:
        at = datetime.min
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at, str(manifest.get("version", ""))


def resolve(store: ArtifactStore, ref: str) -> tuple[str, pd.DataFrame, str]:
    """(NAME@VERSION, the frozen items with the items schema's columns, sha256 of items.parquet) for `ref`;
    `NAME@latest` names the newest version."""
    import hashlib

    m = REF_RE.match(ref)
    if not m:
        raise DatasetError(f"dataset reference {ref!r}: write NAME@VERSION (or NAME@latest)")
    name, version = m["name"], m["version"]
    if version == "latest":
        found = versions(store, name)
        if not found:
            raise DatasetError(
                f"dataset {name!r} has no versions in store {store.display()}; "
                "run `ttseval generate-dataset` first or check --store"
            )
        version = found[-1]["version"]
    path = f"{_dir(name, version)}/items.parquet"
    if not store.exists(f"{_dir(name, version)}/manifest.json"):
        known = ", ".join(m_["version"] for m_ in versions(store, name)) or "none"
        raise DatasetError(f"dataset {name}@{version} is not in store {store.display()} (versions: {known})")
    data = store.read_bytes(path)
    frame = pd.read_parquet(io.BytesIO(data))
    frame = frame[ITEMS.names].astype(object).where(frame[ITEMS.names].notna(), None)
    frame["depth"] = frame["depth"].astype(int)
    return f"{name}@{version}", frame.reset_index(drop=True), hashlib.sha256(data).hexdigest()


def names(store: ArtifactStore) -> list[str]:
    """Every dataset name in the store's catalog that has a finished version, sorted."""
    infos = store.fs.get_file_info(pafs.FileSelector(store.path("datasets"), allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and versions(store, i.base_name))


def refs(store: ArtifactStore) -> list[str]:
    """NAME@VERSION of every finished version in the store, by name, oldest version first."""
    return [m["ref"] for name in names(store) for m in versions(store, name)]


def counts(items: pd.DataFrame) -> pd.DataFrame:
    """Items per category, language and depth: one row per (dimension, value)."""
    rows = [
        {"dimension": dim, "value": str(value), "items": int(n)}
        for dim in ("category", "language", "depth")
        for value, n in items[dim].value_counts().sort_index().items()
    ]
    return pd.DataFrame(rows, columns=["dimension", "value", "items"])


def counts_markdown(table: pd.DataFrame) -> str:
    lines = []
    for dim, group in table.groupby("dimension", sort=False):
        lines.append(f"by {dim}: " + ", ".join(f"{v} {n}" for v, n in zip(group["value"], group["items"])))
    return "\n".join(lines)


def _pushed_rows(items: pd.DataFrame) -> pd.DataFrame:
    """Pushed items as a version stores them: the generation columns a generated set fills, as one pushed."""
    return items.assign(status="ok", method="pushed")


def check_free(store: ArtifactStore, name: str, version: str | None, items: pd.DataFrame) -> None:
    """Refuse (DatasetError), before anything else is stored, what write_version would refuse: a bad name or
    version, or a frozen version that holds other items."""
    for what, value in (("name", name), ("version", version)):
        if value is not None and (not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value) or value == "latest"):
            raise DatasetError(
                f"dataset {what} {value!r}: use letters, digits, '.', '_' or '-' (no '@' or '/', not 'latest')"
            )
    if version is None:
        return  # content-addressed: the same items give the same version
    base, sha = _dir(name, version), content_hash(_pushed_rows(items))
    if store.exists(f"{base}/manifest.json"):
        old = store.read_json(f"{base}/manifest.json")
        if old.get("content_sha256") != sha:
            raise DatasetError(
                f"dataset {name}@{version} is frozen and holds other items (content "
                f"{old.get('content_sha256', '?')[:12]} vs {sha[:12]}); pass a new --version, or leave it out to get "
                "a content-addressed one"
            )


def push_items(
    store: ArtifactStore,
    name: str,
    version: str | None,
    items: pd.DataFrame,
    *,
    source: dict[str, Any],
    systems: list[str] | None = None,
) -> Written:
    """Freeze checked items (ttseval.corpus.items.load_items) as NAME@VERSION; the manifest says where they came
    from (`source`: the file's name and SHA-256) and which pushed systems came with them."""
    table = counts(items)
    rows = _pushed_rows(items)
    return write_version(
        store,
        name,
        version,
        items=rows,
        generation=rows,
        stats=table,
        stats_md=counts_markdown(table),
        manifest={
            "origin": "pushed",
            "source": source,
            "systems": list(systems or []),
            "created_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        },
    )


def describe(store: ArtifactStore, ref: str) -> tuple[dict[str, Any], pd.DataFrame]:
    """(the manifest of NAME@VERSION, its items counted by category, language and depth)."""
    resolved, items, _ = resolve(store, ref)
    name, version = resolved.split("@", 1)
    manifest = store.read_json(f"{_dir(name, version)}/manifest.json")
    return manifest, counts(items)
