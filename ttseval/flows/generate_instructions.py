"""The generate_instructions flow (InstructTTSEval section 3.2): reference clips -> 12-feature captions (audio LLM)
-> APS / DSD / RP instructions -> validation -> a frozen, versioned dataset of `instruction_following` items.

Every LLM call is answered from the store's call cache when it was made before (tasks/llm.py), and every random
choice is seeded by the reference id, so a re-run with the same settings makes no calls and freezes the same
version. Failed calls are rows with their reason in `generation.parquet`; the flow goes on without them.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from prefect import flow

from ttseval.core.errors import SpecError
from ttseval.corpus import DEFAULT_CAPTION_LLM
from ttseval.corpus import instructions as ins
from ttseval.flows.common import artifact_key, check_paths_confined, git_commit, run_settings
from ttseval.flows.progress import StageProgress
from ttseval.tasks.freeze import freeze_and_publish, split_rows
from ttseval.tasks.generate_instructions import caption_stage, instruction_stage
from ttseval.tasks.llm import CallStats
from ttseval.tasks.logs import logger
from ttseval.tasks.parts import get_store, now
from ttseval.tasks.provider_cache import get_provider
from ttseval.tasks.report import instruction_statistics_markdown


@flow(name="generate_instructions")
def generate_instructions(
    references: str,
    name: str = "instructions",
    version: str | None = None,
    caption_llm: str = DEFAULT_CAPTION_LLM,
    instruct_llm: str | None = None,
    caption_temperature: float = 0.0,
    temperature: float = 1.0,
    instruction_language: str = "English",
    seed: int | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Caption each reference clip and write its APS, DSD and RP instructions; freeze them as `name@version`.

    Args:
        references: JSON Lines manifest of reference clips: ref_id, audio (WAV path, relative to the manifest's
            folder or absolute), text (the transcript, which becomes the text to synthesize), language.
        name: the dataset's name in the store.
        version: the version to freeze; default `g` + a hash of the items (a re-run gives the same one).
        caption_llm: audio-capable LLM spec that captions the clips, e.g. 'gemini:gemini-2.5-pro'.
        instruct_llm: text LLM that writes the DSD and RP instructions; default `caption_llm`.
        caption_temperature: sampling temperature of the caption calls.
        temperature: sampling temperature of the DSD and RP calls.
        instruction_language: the language DSD and RP instructions are written in (captions are in English).
        seed: seed of the dropout draws and of the choice among the three alternatives; default settings.seed.
        store: artifact store URI; default from settings.
    """
    started, t0 = now(), time.perf_counter()
    log = logger()
    if not instruction_language.strip():
        raise SpecError("instruction_language is empty; name a language such as English")
    settings = run_settings(store=store, seed=seed)
    check_paths_confined(settings, "generate_instructions", references=references)
    st = get_store(settings.store, settings.store_wait_s)
    refs = ins.read_references(references)
    instruct_llm = instruct_llm or caption_llm
    llms = {s: get_provider("llm", s, settings) for s in dict.fromkeys([caption_llm, instruct_llm])}
    log.info("generating instructions %r for %d reference clips with %s", name, len(refs), ", ".join(llms))
    stats = CallStats()
    with StageProgress(f"generate instructions {name!r}", artifact_key("progress", f"dataset-{name}"), log) as progress:
        progress.add("captions", len(refs))
        progress.add("instructions", len(refs))
        captioned = caption_stage(settings, refs, caption_llm, caption_temperature, stats)
        progress.advance("captions", len(refs))
        rows = instruction_stage(settings, captioned, instruct_llm, temperature, instruction_language, stats)
        progress.advance("instructions", len(refs))

    generation, items, failed = split_rows(rows, "instruction")
    stats_frame = ins.instruction_statistics(items)
    dsd = items[items["task"] == "DSD"]
    manifest = {
        "references": str(references),
        "references_sha256": hashlib.sha256(Path(references).read_bytes()).hexdigest(),
        "n_references": len(refs),
        "caption_llm": caption_llm,
        "instruct_llm": instruct_llm,
        "llm_ids": {s: m.llm_id for s, m in llms.items()},
        "prompt_versions": [
            ins.CAPTION_PROMPT_VERSION,
            ins.APS_RENDER_VERSION,
            ins.DSD_PROMPT_VERSION,
            ins.RP_PROMPT_VERSION,
        ],
        "caption_temperature": caption_temperature,
        "temperature": temperature,
        "instruction_language": instruction_language,
        "seed": settings.seed,
        "features": list(ins.FEATURES),
        "dropout_sets": [{"set": s.number, "prob": s.prob, "keep": s.keep} for s in ins.DROPOUT_SETS],
        "dsd_by_dropout_set": {int(k): int(v) for k, v in dsd["dropout_set"].value_counts().sort_index().items()},
        "items_by_task": {t: int((items["task"] == t).sum()) for t in ins.TASKS},
        "failed_by_task": {str(k): int(v) for k, v in failed["task"].value_counts().items()},
    }
    result = freeze_and_publish(
        st,
        name,
        version,
        title="instructions",
        generation=generation,
        items=items,
        failed=failed,
        stats_frame=stats_frame,
        stats_md=instruction_statistics_markdown(stats_frame),
        manifest=manifest,
        calls=stats,
        t0=t0,
        code=git_commit(),
    )
    return result | {
        "items_by_task": manifest["items_by_task"],
        "failed_by_task": manifest["failed_by_task"],
        "started_at": started.isoformat(timespec="seconds"),
    }
