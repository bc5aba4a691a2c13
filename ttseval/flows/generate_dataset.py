"""The generate_dataset flow (EmergentTTS-Eval section 3.1): seeds -> breadth expansion -> depth refinement
(x N, grammar repair for code-switched items) -> de-duplication and validation -> a frozen, versioned dataset.

Every LLM call is answered from the store's call cache when it was made before (tasks/llm.py), so a re-run with
the same settings makes no calls and an interrupted run resumes where it stopped. Failed calls and rejected
items are rows with their reason in `generation.parquet`; the flow goes on without them.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from prefect import flow

from ttseval.core.categories import MAX_DEPTH
from ttseval.core.errors import SpecError
from ttseval.corpus import DEFAULT_LLM, DEFAULT_SEEDS
from ttseval.corpus import generation as g
from ttseval.flows.common import artifact_key, check_paths_confined, git_commit, run_settings
from ttseval.flows.progress import StageProgress
from ttseval.tasks.freeze import freeze_and_publish, split_rows
from ttseval.tasks.generate import expand_breadth, refine_depth
from ttseval.tasks.llm import CallStats
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import get_store, now
from ttseval.tasks.provider_cache import get_provider
from ttseval.tasks.report import dataset_statistics_markdown


@flow(name="generate_dataset")
def generate_dataset(
    seeds: str = str(DEFAULT_SEEDS),
    name: str = "generated",
    version: str | None = None,
    llm: str = DEFAULT_LLM,
    refine_llm: str | None = None,
    repair_llm: str | None = None,
    categories: str | None = None,
    breadth: int = 5,
    breadth_batch: int = 5,
    depth_steps: int = 3,
    temperature: float = 1.0,
    duplicate_threshold: float = 90.0,
    store: str | None = None,
) -> dict[str, Any]:
    """Grow `seeds` into a dataset and freeze it in the store as `name@version`.

    Args:
        seeds: JSON Lines of human-written seed items (category, text; optional seed_id, subcategory).
        name: the dataset's name in the store.
        version: the version to freeze; default `g` + a hash of the items (a re-run gives the same one).
        llm: LLM spec for breadth expansion, e.g. 'gemini:gemini-2.5-pro' or 'openai:MODEL:base_url=...'.
        refine_llm: LLM for depth refinement; default `llm`.
        repair_llm: LLM for the grammar-repair pass; default the refinement LLM.
        categories: category-set TOML (default: EmergentTTS-Eval's six, corpus/data/generation/emergenttts.toml).
        breadth: new items per category from breadth expansion.
        breadth_batch: items asked for per breadth call.
        depth_steps: refinement steps (the paper uses 3); depth runs 0..depth_steps.
        temperature: sampling temperature of breadth and refinement calls (repair uses 0).
        duplicate_threshold: rapidfuzz ratio (0-100) at which two items of a category count as near-duplicates.
        store: artifact store URI; default from settings.
    """
    started, t0 = now(), time.perf_counter()
    log = logger()
    if not 0 <= depth_steps <= MAX_DEPTH:
        raise SpecError(
            f"depth_steps={depth_steps}: use 0 to {MAX_DEPTH} (items deeper than {MAX_DEPTH} are not "
            "accepted by the evaluate flow)"
        )
    if breadth < 0 or breadth_batch < 1:
        raise SpecError("breadth must be >= 0 and breadth_batch >= 1")
    settings = run_settings(store=store)
    check_paths_confined(settings, "generate_dataset", seeds=seeds, categories=categories)
    st = get_store(settings.store, settings.store_wait_s)
    spec = g.load_spec(categories)
    seed_list = g.read_seeds(seeds, spec)
    refine_llm = refine_llm or llm
    repair_llm = repair_llm or refine_llm
    llms = {s: get_provider("llm", s, settings) for s in dict.fromkeys([llm, refine_llm, repair_llm])}
    log.info(
        "generating %r from %d seeds over %d categories with %s",
        name,
        len(seed_list),
        len(spec.categories),
        ", ".join(sorted(llms)),
    )
    stats = CallStats()
    with StageProgress(f"generate dataset {name!r}", artifact_key("progress", f"dataset-{name}"), log) as progress:
        progress.add("breadth", 1)
        progress.add("depth refinement", depth_steps)
        rows = expand_breadth(
            settings,
            spec,
            seed_list,
            llm,
            breadth,
            breadth_batch,
            temperature,
            max_depth=depth_steps,
            threshold=duplicate_threshold,
            stats=stats,
        )
        progress.advance("breadth", 1)
        for depth in range(1, depth_steps + 1):
            rows = refine_depth(
                settings,
                spec,
                rows,
                depth,
                refine_llm,
                repair_llm,
                temperature,
                max_depth=depth_steps,
                threshold=duplicate_threshold,
                stats=stats,
            )
            progress.advance("depth refinement", 1)

    generation, items, failed = split_rows(rows, "item")
    stats_frame = g.dataset_statistics(items, words_per_minute=spec.words_per_minute)
    manifest = {
        "seeds": str(seeds),
        "seeds_sha256": hashlib.sha256(Path(seeds).read_bytes()).hexdigest(),
        "category_spec": spec.version,
        "categories": list(spec.categories),
        "llm": llm,
        "refine_llm": refine_llm,
        "repair_llm": repair_llm,
        "llm_ids": {s: m.llm_id for s, m in llms.items()},
        "prompt_versions": [
            g.BREADTH_PROMPT_VERSION,
            g.REFINE_PROMPT_VERSION,
            g.REPAIR_PROMPT_VERSION,
            g.TWISTER_PROMPT_VERSION,
        ],
        "breadth": breadth,
        "depth_steps": depth_steps,
        "temperature": temperature,
        "seed": settings.seed,
        "duplicate_threshold": duplicate_threshold,
        "items_by_depth": {int(k): int(v) for k, v in items["depth"].value_counts().sort_index().items()},
    }
    result = freeze_and_publish(
        st,
        name,
        version,
        title="dataset",
        generation=generation,
        items=items,
        failed=failed,
        stats_frame=stats_frame,
        stats_md=dataset_statistics_markdown(stats_frame, words_per_minute=spec.words_per_minute),
        manifest=manifest,
        calls=stats,
        t0=t0,
        code=git_commit(),
    )
    return result | {"items_by_depth": manifest["items_by_depth"], "started_at": started.isoformat(timespec="seconds")}
