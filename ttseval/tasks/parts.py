"""What a task writes and returns: its shard's rows as one immutable part (found again when Dask runs the shard
twice), the time stamp of its rows, the store object of its worker process, and the summary it hands back."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ttseval.core.config import STORE_WAIT_S
from ttseval.core.store import ArtifactStore, part_label


@functools.lru_cache(maxsize=8)
def get_store(uri: str, wait_s: float = STORE_WAIT_S) -> ArtifactStore:
    """One store object per URI in a worker process (settings.store, settings.store_wait_s)."""
    return ArtifactStore(uri, wait_s=wait_s)


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class StageResult:
    """What a task returns: counts, where the part landed, and the work it hands to the next stage."""

    stage: str
    label: str
    n_rows: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    part: str | None = None
    seconds: float = 0.0
    work: list[dict[str, Any]] = field(default_factory=list)

    def describe(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items()))
        return f"{self.stage} {self.label}: {self.n_rows} rows ({counts}) in {self.seconds:.1f} s"


def commit(
    store: ArtifactStore,
    run_id: str,
    table: str,
    rows: list[dict[str, Any]],
    *,
    label: str,
    replaces: set[tuple[Any, ...]],
    looked: bool = False,
    fence: str | None = None,
) -> tuple[str | None, dict[str, int]]:
    """Write the shard's rows as one part; drop older rows of keys it recomputed; returns (part, status counts of
    the rows written).

    Dask runs a finished task again when the worker holding its result dies before the next stage read it. The
    part its first attempt committed carries a label derived from the shard's keys, so the second attempt finds it
    and writes none of the rows it settled (its retryable ones are superseded): one row per key. Model stages and
    judges answer such keys from their caches, so nothing is computed twice either. Synthesis, whose provider may
    be paid, looks before it calls (`looked=True`: its `label` is that derived label already)."""
    from ttseval.core.schemas import TABLES, table_from_rows

    key_of = TABLES[table].key

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[c] for c in key_of)

    if not looked and rows:
        label = attempt_label(label, [key(r) for r in rows])
        earlier = earlier_attempt(store, run_id, table, label)
        settled = {key(r) for r in earlier if not r["retryable"]} - replaces
        replaces = replaces | {key(r) for r in earlier if r["retryable"]} - settled
        rows = [r for r in rows if key(r) not in settled]
    part = store.write_part(run_id, table, table_from_rows(table, rows), label=label, fence=fence)
    if part and replaces:
        store.supersede(run_id, table, replaces, keep=part)
    return part, dict(Counter(r["status"] for r in rows))


def attempt_label(prefix: str, keys: list[tuple[Any, ...]]) -> str:
    """A part label naming the shard by its keys: the same shard, run again, writes (and finds) the same label.
    The prefix is cut and made file-name safe as ArtifactStore.write_part makes it (store.part_label)."""
    import hashlib

    digest = hashlib.sha256("\x1e".join("\x1f".join(map(str, k)) for k in sorted(keys)).encode()).hexdigest()
    return f"{part_label(prefix[:60])}-{digest[:12]}"


def earlier_attempt(store: ArtifactStore, run_id: str, table: str, label: str) -> list[dict[str, Any]]:
    """The rows an earlier attempt of the same shard committed (parts labelled `label`).

    One listing of the table's parts and a read of the matching part: no scan of the whole table per task."""
    from ttseval.core.schemas import TABLES

    mine = [p for p in store.part_files(run_id, table) if f"-{label}-" in p.rsplit("/", 1)[-1]]
    rows: list[dict[str, Any]] = []
    for path in mine:
        rows += store.read_part(path, schema=TABLES[table].schema).to_pylist()
    return rows
