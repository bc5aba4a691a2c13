"""Planning: what each stage still has to compute, given what the store already holds.

`missing = wanted - present`, where a present row marked `retryable` counts as missing, and the recomputed row
then replaces it. Stages mark every failure retryable except a provider's documented PermanentProviderError
(ttseval.tasks.failures.error_row): a transient error that outlived its retries, and an unexpected one (a bug, fixed
since). This one rule gives resume after a crash, cheap re-runs, adding one system without redoing the others,
backfills, and failures that heal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ttseval.core.config import Settings
from ttseval.core.registry import Spec
from ttseval.core.schemas import TABLES
from ttseval.core.store import ArtifactStore


@dataclass
class Plan:
    stage: str
    wanted: int = 0
    present: int = 0
    shards: list[Any] = field(default_factory=list)

    @property
    def to_compute(self) -> int:
        return self.wanted - self.present

    def describe(self) -> str:
        return (
            f"{self.stage}: {self.wanted} wanted, {self.present} present (reused), {self.to_compute} to compute"
            f" in {len(self.shards)} shard(s)"
        )


def _present(frame: pd.DataFrame, key: list[str]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """(keys done for good, keys whose last row is retryable: computed again, the new row superseding the old)."""
    if frame.empty:
        return set(), set()
    retry = frame["retryable"].fillna(False).astype(bool)
    done = set(frame.loc[~retry, key].itertuples(index=False, name=None))
    again = set(frame.loc[retry, key].itertuples(index=False, name=None))
    return done, again


SMALLEST_SHARD = 8
"""Items per task when the shard_size setting is None and the stage is small: a crash loses little, progress moves
often, and a task's overhead (a Prefect task run, a Dask task, a store part: about 0.1 s of CPU) stays small."""
TASKS_PER_STAGE = 500
"""With shard_size None, shards grow past SMALLEST_SHARD so a stage has at most this many tasks: the per-task
overhead is then a shrinking share of a large run, and the scheduler and Prefect's database hold thousands of task
runs, not hundreds of thousands."""

LARGEST_SHARD = 256
"""With shard_size None, shards grow no larger than this: what a lost worker's task redoes, and what one task holds
in memory, stay bounded however large the run (past 128,000 items a stage has more than TASKS_PER_STAGE tasks)."""


def shard_size_for(settings: Settings, n: int) -> int:
    """Items per task for a stage of `n` items of work: the shard_size setting when set (it forces the size), else
    SMALLEST_SHARD, or larger when that would make more than TASKS_PER_STAGE tasks, up to LARGEST_SHARD."""
    if settings.shard_size is not None:
        return settings.shard_size
    return min(LARGEST_SHARD, max(SMALLEST_SHARD, math.ceil(n / TASKS_PER_STAGE)))


def _chunks(seq: list[Any], size: int) -> list[list[Any]]:
    return [seq[i : i + size] for i in range(0, len(seq), size)]


def plan_synthesis(
    store: ArtifactStore, run_id: str, items: pd.DataFrame, systems: list[Spec], settings: Settings
) -> Plan:
    done, again = _present(
        store.read(run_id, "synthesis", columns=["item_id", "system_id", "retryable"]), ["item_id", "system_id"]
    )
    plan = Plan("synthesis", wanted=len(items) * len(systems))
    columns = ["item_id", "language", "text", "instruction", "category", "prompt_audio_sha256", "prompt_text"]
    chosen = items.reindex(columns=columns).astype(object)  # prompt columns: None for items read before they existed
    records = chosen.where(chosen.notna(), None).to_dict("records")
    todo = {
        spec.canonical: [
            r | {"replaces": (r["item_id"], spec.id) in again} for r in records if (r["item_id"], spec.id) not in done
        ]
        for spec in systems
    }
    size = shard_size_for(settings, sum(map(len, todo.values())))
    for system, work in todo.items():
        plan.present += len(records) - len(work)
        chunks = _chunks(work, size)
        plan.shards += [{"system": system, "items": c, "index": i + 1, "of": len(chunks)} for i, c in enumerate(chunks)]
    return plan


def plan_model_stage(
    store: ArtifactStore,
    run_id: str,
    items: pd.DataFrame,
    systems: list[Spec],
    settings: Settings,
    *,
    table: str,
    models_for: Any,
    eligible: Any = None,
) -> Plan:
    """Clips synthesized earlier (ok) that still lack a row in `table` (a clip stage's: transcripts, quality, lid,
    ...; ttseval.tasks.stages.plan_stage) from each model `models_for(language)` lists as (spec, output id): a
    recogniser added later gets only its own rows.
    `eligible(item_id, system_id)`, when given, leaves out the clips it refuses (similarity: clips with no
    reference voice)."""
    synthesis = store.read(run_id, "synthesis", columns=["item_id", "system_id", "status", "audio_sha256"])
    plan = Plan(table)
    if synthesis.empty:
        return plan
    ids = {s.id for s in systems}
    ok = synthesis[(synthesis["status"] == "ok") & synthesis["system_id"].isin(ids)]
    ok = ok.merge(items[["item_id", "language", "text"]], on="item_id")
    key = list(TABLES[table].key)  # item_id, system_id and the model-id column
    done, again = _present(store.read(run_id, table, columns=[*key, "retryable"]), key)
    todo = []
    for r in ok.itertuples(index=False):
        if eligible is not None and not eligible(r.item_id, r.system_id):
            continue
        for model_spec, model_id in models_for(r.language):
            k = (r.item_id, r.system_id, model_id)
            plan.wanted += 1
            if k in done:
                continue
            todo.append(
                {
                    "item_id": r.item_id,
                    "system_id": r.system_id,
                    "audio_sha256": r.audio_sha256,
                    "language": r.language,
                    "text": r.text,
                    "replaces": k in again,
                    "model_spec": model_spec,
                }
            )
    plan.present = plan.wanted - len(todo)
    plan.shards = _chunks(todo, shard_size_for(settings, len(todo)))
    return plan
