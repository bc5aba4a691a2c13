"""Instruction-generation stages (InstructTTSEval section 3.2): caption each reference clip, render APS, write DSD
(after feature dropout) and RP (after a reasoning step), screen the rows.

Each stage returns rows of the `GENERATED` schema (dicts), three per reference: `<ref_id>-APS`, `-DSD`, `-RP`. A
failed call is a row with status `failed` and the reason; when a caption fails, all three rows of its reference
carry the caption's failure. Every LLM call goes through the store's call cache (tasks/llm.py).

Where things are kept (the GENERATED columns):
  caption            the caption JSON (12 features), on all three rows
  features           the features the instruction was written from: all described ones for APS and RP, the kept
                     ones after dropout for DSD (comma-joined, in the paper's feature order)
  dropout_set        DSD only: the Table 8 weight set drawn (1-3)
  diversity_aspect   DSD and RP: {"chosen": i, "instructions": [the three alternatives]} as JSON
  reasoning          RP only: the model's reasoning about personas and scenarios
  prompt_version / prompt_hash / tokens / cost
                     of the row's own call: the caption call for APS, the DSD or RP call otherwise
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, TypedDict

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from ttseval.core.config import Settings
from ttseval.core.protocols import LLM, LLMRequest
from ttseval.core.store import ArtifactStore
from ttseval.core.validation import Rule, row_failures
from ttseval.corpus import instructions as ins
from ttseval.corpus.instructions import Caption, Reference
from ttseval.tasks.generate import _call_fields, _failed
from ttseval.tasks.llm import CallStats, cached_generate
from ttseval.tasks.parts import get_store
from ttseval.tasks.provider_cache import get_provider


@dataclass
class Captioned:
    """One reference after captioning: the caption, or why there is none, and the caption call's fields."""

    ref: Reference
    audio_uri: str | None
    caption: Caption | None
    fields: dict[str, Any]
    failure: str | None = None
    error: str | None = None


def _base(c: Captioned, task: str) -> dict[str, Any]:
    r = c.ref
    return {
        "item_id": f"{r.ref_id}-{task}",
        "benchmark": ins.BENCHMARK,
        "category": ins.CATEGORY,
        "depth": 0,
        "parent_id": r.ref_id,
        "root_id": r.ref_id,
        "seed_id": r.ref_id,
        "language": r.language,
        "text": r.text,
        "task": task,
        "method": ins.METHODS[task],
        "reference_audio_uri": c.audio_uri,
        "caption": c.caption.to_json() if c.caption is not None else None,
        "status": "ok",
    }


# -- captioning -------------------------------------------------------------------------------------------------
def caption_references(
    refs: list[Reference], llm: LLM, store: ArtifactStore, *, temperature: float, stats: CallStats
) -> list[Captioned]:
    """Store each reference WAV and caption it with the audio LLM (the clip sent inline with the prompt)."""
    out: list[Captioned | None] = [None] * len(refs)
    todo: list[tuple[int, str, LLMRequest]] = []
    prompt = ins.caption_prompt()
    for i, ref in enumerate(refs):
        try:
            wav = ref.audio.read_bytes()
        except OSError as e:
            out[i] = Captioned(ref, None, None, {}, "audio", f"cannot read the reference audio {ref.audio}: {e}")
            continue
        uri = store.put_audio(wav, hashlib.sha256(wav).hexdigest())
        todo.append((i, uri, LLMRequest(parts=(prompt, wav), schema=Caption, temperature=temperature)))
    results = cached_generate(store, llm, [t[2] for t in todo], stats)
    for (i, uri, req), result in zip(todo, results):
        fields = _call_fields(llm, req, result, f"{ins.CAPTION_PROMPT_VERSION}+{ins.APS_RENDER_VERSION}")
        caption = result.data if result.ok else None
        if caption is not None and not caption.described():
            out[i] = Captioned(refs[i], uri, None, fields, "unparseable", "the caption describes no feature")
            continue
        out[i] = Captioned(
            refs[i],
            uri,
            caption,
            fields,
            None if result.ok else (result.failure or "failed"),
            None if result.ok else result.error,
        )
    return [c for c in out if c is not None]


def _caption_failed(c: Captioned, task: str) -> dict[str, Any]:
    return _failed(_base(c, task), c.failure or "failed", f"caption of reference {c.ref.ref_id}: {c.error}")


# -- APS --------------------------------------------------------------------------------------------------------
def aps_rows(captioned: list[Captioned]) -> list[dict[str, Any]]:
    """The caption rendered as the APS instruction (no further call); the row carries the caption call."""
    rows = []
    for c in captioned:
        row = {**_base(c, "APS"), **c.fields}
        if c.caption is None:
            rows.append(_failed(row, c.failure or "failed", f"caption of reference {c.ref.ref_id}: {c.error}"))
            continue
        rows.append({**row, "instruction": ins.render_aps(c.caption), "features": ",".join(c.caption.described())})
    return rows


# -- DSD and RP -------------------------------------------------------------------------------------------------
class _RowOptions(TypedDict):
    """The keyword arguments dsd_rows and rp_rows share."""

    temperature: float
    seed: int
    language: str
    stats: CallStats


def dsd_rows(
    captioned: list[Captioned],
    llm: LLM,
    store: ArtifactStore,
    *,
    temperature: float,
    seed: int,
    language: str,
    stats: CallStats,
) -> list[dict[str, Any]]:
    """One DSD row per reference: draw a Table 8 dropout set and the kept features, ask for three directives
    from those features only, keep the seeded pick."""
    rows: list[dict[str, Any]] = []
    todo: list[tuple[dict[str, Any], Captioned, LLMRequest]] = []
    for c in captioned:
        if c.caption is None:
            rows.append(_caption_failed(c, "DSD"))
            continue
        described = c.caption.described()
        number, kept = ins.dropout(described, ins.dropout_rng(seed, c.ref.ref_id))
        features = {f: described[f] for f in kept}
        req = LLMRequest(
            parts=(ins.dsd_prompt(features, language),), schema=ins.InstructionsAnswer, temperature=temperature
        )
        row = {**_base(c, "DSD"), "dropout_set": number, "features": ",".join(kept)}
        rows.append(row)
        todo.append((row, c, req))
    _answer(todo, llm, store, ins.DSD_PROMPT_VERSION, "DSD", seed, stats)
    return rows


def rp_rows(
    captioned: list[Captioned],
    llm: LLM,
    store: ArtifactStore,
    *,
    temperature: float,
    seed: int,
    language: str,
    stats: CallStats,
) -> list[dict[str, Any]]:
    """One RP row per reference: reasoning about personas from the full caption, then three role-play
    directions; the reasoning is kept with the seeded pick."""
    rows: list[dict[str, Any]] = []
    todo: list[tuple[dict[str, Any], Captioned, LLMRequest]] = []
    for c in captioned:
        if c.caption is None:
            rows.append(_caption_failed(c, "RP"))
            continue
        described = c.caption.described()
        req = LLMRequest(
            parts=(ins.rp_prompt(described, language),), schema=ins.RolePlayAnswer, temperature=temperature
        )
        row = {**_base(c, "RP"), "features": ",".join(described)}
        rows.append(row)
        todo.append((row, c, req))
    _answer(todo, llm, store, ins.RP_PROMPT_VERSION, "RP", seed, stats)
    return rows


def _answer(
    todo: list[tuple[dict[str, Any], Captioned, LLMRequest]],
    llm: LLM,
    store: ArtifactStore,
    version: str,
    task: str,
    seed: int,
    stats: CallStats,
) -> None:
    """Make the calls and fill each row in place: the chosen instruction and its alternatives, or the failure."""
    results = cached_generate(store, llm, [t[2] for t in todo], stats)
    for (row, c, req), result in zip(todo, results):
        row.update(_call_fields(llm, req, result, version))
        if not result.ok:
            row.update(_failed(row, result.failure or "failed", f"{task} call: {result.error}"))
            continue
        options = [" ".join(str(s).split()) for s in result.data.instructions[: ins.N_INSTRUCTIONS]]
        chosen = ins.pick_index(seed, c.ref.ref_id, task, len(options))
        row.update(instruction=options[chosen], diversity_aspect=ins.alternatives_json(options, chosen))
        if task == "RP":
            row["reasoning"] = result.data.reasoning.strip() or None


# -- screening (Great Expectations) -----------------------------------------------------------------------------
SCREENING_RULES = [
    Rule("instruction is non-empty", "instruction", "ExpectColumnValuesToMatchRegex", {"regex": r"\S"}),
    Rule("task is APS, DSD or RP", "task", "ExpectColumnValuesToBeInSet", {"value_set": list(ins.TASKS)}),
    Rule("text is non-empty", "text", "ExpectColumnValuesToMatchRegex", {"regex": r"\S"}),
]


def screen(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark ok rows that break a rule as failed with error_type 'validation' and the rules' names."""
    candidates = [r for r in rows if r["status"] == "ok"]
    if not candidates:
        return rows
    frame = pd.DataFrame(
        {
            "row": range(1, len(candidates) + 1),
            "instruction": [r.get("instruction") or "" for r in candidates],
            "task": [r.get("task") for r in candidates],
            "text": [r.get("text") or "" for r in candidates],
        }
    )
    by_id = {}
    for number, rules in row_failures(frame, SCREENING_RULES, suite_name="generated-instructions").items():
        r = candidates[number - 1]
        by_id[r["item_id"]] = _failed(r, "validation", "; ".join(f"rule '{rule.name}' fails" for rule in rules))
    return [by_id.get(r["item_id"], r) for r in rows]


@task(name="caption-references", cache_policy=NO_CACHE)
def caption_stage(
    settings: Settings, refs: list[Reference], llm_spec: str, temperature: float, stats: CallStats
) -> list[Captioned]:
    return caption_references(
        refs,
        get_provider("llm", llm_spec, settings),
        get_store(settings.store, settings.store_wait_s),
        temperature=temperature,
        stats=stats,
    )


@task(name="write-instructions", cache_policy=NO_CACHE)
def instruction_stage(
    settings: Settings, captioned: list[Captioned], llm_spec: str, temperature: float, language: str, stats: CallStats
) -> list[dict[str, Any]]:
    llm, store = get_provider("llm", llm_spec, settings), get_store(settings.store, settings.store_wait_s)
    common: _RowOptions = {"temperature": temperature, "seed": settings.seed, "language": language, "stats": stats}
    rows = aps_rows(captioned) + dsd_rows(captioned, llm, store, **common) + rp_rows(captioned, llm, store, **common)
    order = {c.ref.ref_id: i for i, c in enumerate(captioned)}
    rows.sort(key=lambda r: (order[r["root_id"]], ins.TASKS.index(r["task"])))
    return screen(rows)
