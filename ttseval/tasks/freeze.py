"""The last step both generation flows share: split rows into items and failures, freeze the version, publish."""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from prefect.artifacts import create_markdown_artifact

import ttseval
from ttseval.core.errors import DatasetError
from ttseval.core.ids import slug
from ttseval.core.schemas import GENERATED
from ttseval.core.store import ArtifactStore
from ttseval.corpus import catalog
from ttseval.tasks.llm import CallStats
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import now


def split_rows(rows: list[dict[str, Any]], what: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(every row, the ok items, the failed rows) with the GENERATED columns; raises when nothing survived,
    naming the first reasons."""
    generation = pd.DataFrame(rows).reindex(columns=GENERATED.names)
    generation["created_at"] = now()
    items = generation[generation["status"] == "ok"].reset_index(drop=True)
    failed = generation[generation["status"] != "ok"]
    if items.empty:
        reasons = "; ".join(f"{r.item_id}: {r.error_type}: {r.error_message}" for r in failed.head(3).itertuples())
        raise DatasetError(f"no {what} survived generation ({len(generation)} failed rows, e.g. {reasons})")
    return generation, items, failed


def freeze_and_publish(
    store: ArtifactStore,
    name: str,
    version: str | None,
    *,
    title: str,
    generation: pd.DataFrame,
    items: pd.DataFrame,
    failed: pd.DataFrame,
    stats_frame: pd.DataFrame,
    stats_md: str,
    manifest: dict[str, Any],
    calls: CallStats,
    t0: float,
    code: str | None,
) -> dict[str, Any]:
    """Write the version (catalog.write_version), publish a Markdown artifact, and return the flow's summary."""
    failures = {str(k): int(v) for k, v in failed["error_type"].value_counts().items()}
    manifest = {
        "created_at": generation["created_at"].iloc[0].isoformat(timespec="microseconds"),
        **manifest,
        "failed_by_reason": failures,
        "calls": calls.as_dict(),
        "ttseval": ttseval.__version__,
        "code": code or "unknown",
    }
    written = catalog.write_version(
        store,
        name,
        version,
        items=items,
        generation=generation,
        stats=stats_frame,
        stats_md=stats_md,
        manifest=manifest,
    )
    wall_s = time.perf_counter() - t0
    summary = (
        f"# {title.capitalize()} {written.ref}\n\n{len(items)} items, {len(failed)} failed rows "
        f"({', '.join(f'{k} {v}' for k, v in failures.items()) or 'none'}).\n\nLLM calls: {calls.made} made, "
        f"{calls.cached} from the cache; {calls.input_tokens} input and {calls.output_tokens} output tokens, "
        f"${calls.cost_usd:.4f}.\n\n{stats_md}\nStored at `{written.uri}`"
        + ("" if written.created else " (this version already existed with the same items)")
        + ".\n"
    )
    create_markdown_artifact(
        markdown=summary,
        key=f"ttseval-{slug(title)}-{slug(name, 'dataset')}",
        description=f"generated {title} {written.ref}",
    )
    logger().info(
        f"{title} {written.ref}: {len(items)} items at {written.uri} ({wall_s:.1f} s; "
        f"{calls.made} LLM calls made, {calls.cached} cached)"
    )
    return {
        "ref": written.ref,
        "uri": written.uri,
        "created": written.created,
        "n_items": len(items),
        "n_failed": len(failed),
        "failed_by_reason": failures,
        "calls": calls.as_dict(),
        "wall_s": wall_s,
        "stats_markdown": stats_md,
    }
