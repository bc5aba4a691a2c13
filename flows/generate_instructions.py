"""The generate_instructions flow (InstructTTSEval section 3.2): reference clips -> 12-feature captions (audio LLM)
-> APS / DSD / RP instructions -> validation -> a frozen, versioned dataset of `instruction_following` items.

Every LLM call is answered from the store's call cache when it was made before (tasks/llm.py), and every random
choice is seeded by the reference id, so a re-run with the same settings makes no calls and freezes the same
version. Failed calls are rows with their reason in `generation.parquet`; the flow goes on without them.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.evaluate import _git_commit
from flows.freeze import freeze_and_publish, split_rows
from tasks.common import get_provider, get_store, logger, now
from tasks.instructions import Captioned, aps_rows, caption_references, dsd_rows, rp_rows, screen
from tasks.llm import CallStats
from ttseval import instructions as ins
from ttseval.config import Settings, load_settings
from ttseval.dataset import read_jsonl_numbered
from ttseval.errors import DatasetError, SpecError

DEFAULT_CAPTION_LLM = ins.DEFAULT_CAPTION_LLM
_REF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def read_references(path: str | Path) -> list[ins.Reference]:
    """The references manifest, JSON Lines of {ref_id, audio, text, language}; `audio` is a WAV file, relative to
    the manifest's folder or absolute. Errors name the line, the field and the fix."""
    from ttseval.languages import is_known_language

    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"references manifest {str(p)!r} does not exist; pass --references PATH to a .jsonl file "
                           "with one {ref_id, audio, text, language} object per line", source=str(p))
    rows = read_jsonl_numbered(p, p.read_text(encoding="utf-8"))
    refs, problems, seen = [], [], set()
    for n, row in rows:
        before = len(problems)
        ref_id = row.get("ref_id")
        ref_id = str(ref_id) if isinstance(ref_id, (str, int)) and not isinstance(ref_id, bool) else None
        if not ref_id or not _REF_ID.fullmatch(ref_id):
            problems.append(f"line {n}: ref_id {row.get('ref_id')!r} is missing or not an id; use letters, digits, "
                            "'.', '_' or '-' (it names the items <ref_id>-APS/-DSD/-RP)")
        elif ref_id in seen:
            problems.append(f"line {n}: ref_id {ref_id!r} is used twice; give each reference its own id")
        seen.add(ref_id)
        audio = row.get("audio")
        wav: Path | None = None
        if not isinstance(audio, str) or not audio.strip():
            problems.append(f"line {n}: audio is missing; give the path of the reference WAV file (relative to "
                            f"{p.parent} or absolute)")
        else:
            wav = Path(audio).expanduser()
            wav = wav if wav.is_absolute() else p.parent / wav
            why = _wav_problem(wav)
            if why:
                problems.append(f"line {n}: audio {audio!r}: {why}")
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"line {n}: text is missing or empty; write the reference clip's transcript (the text "
                            "to synthesize) in `text`")
        language = row.get("language")
        if not isinstance(language, str) or not is_known_language(language.strip()):
            problems.append(f"line {n}: language {language!r} is not a known BCP-47 / ISO 639 tag; use one such "
                            "as en-US or zh-CN")
        if len(problems) == before:
            refs.append(ins.Reference(ref_id, wav.resolve(), text.strip(), language.strip(), n))
    if problems:
        raise DatasetError(f"references manifest {p} has {len(problems)} problem(s):\n- " + "\n- ".join(problems),
                           source=str(p), problems=problems)
    if not rows:
        raise DatasetError(f"references manifest {p} has no references", source=str(p))
    return refs


def _wav_problem(path: Path) -> str | None:
    if not path.is_file():
        return f"no such file ({path}); fix the path (relative paths start at the manifest's folder)"
    import soundfile as sf

    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError, ValueError) as e:  # soundfile raises LibsndfileError (a RuntimeError)
        return f"cannot be read as audio ({e}); give a WAV file"
    if info.format != "WAV":
        return f"is {info.format}, not WAV; convert it (e.g. ffmpeg -i IN OUT.wav)"
    if info.frames == 0:
        return "holds no audio; give a non-empty WAV file"
    return None


@task(name="caption-references", cache_policy=NO_CACHE)
def caption_stage(settings: Settings, refs: list[ins.Reference], llm_spec: str, temperature: float,
                  stats: CallStats) -> list[Captioned]:
    return caption_references(refs, get_provider("llm", llm_spec, settings), get_store(settings.store),
                              temperature=temperature, stats=stats)


@task(name="write-instructions", cache_policy=NO_CACHE)
def instruction_stage(settings: Settings, captioned: list[Captioned], llm_spec: str, temperature: float,
                      language: str, stats: CallStats) -> list[dict[str, Any]]:
    llm, store = get_provider("llm", llm_spec, settings), get_store(settings.store)
    common = {"temperature": temperature, "seed": settings.seed, "language": language, "stats": stats}
    rows = aps_rows(captioned) + dsd_rows(captioned, llm, store, **common) + rp_rows(captioned, llm, store, **common)
    order = {c.ref.ref_id: i for i, c in enumerate(captioned)}
    rows.sort(key=lambda r: (order[r["root_id"]], ins.TASKS.index(r["task"])))
    return screen(rows)


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
    settings = load_settings(store=store, seed=seed)
    st = get_store(settings.store)
    refs = read_references(references)
    instruct_llm = instruct_llm or caption_llm
    llms = {s: get_provider("llm", s, settings) for s in dict.fromkeys([caption_llm, instruct_llm])}
    log.info(f"generating instructions {name!r} for {len(refs)} reference clips with " + ", ".join(llms))
    stats = CallStats()
    captioned = caption_stage(settings, refs, caption_llm, caption_temperature, stats)
    rows = instruction_stage(settings, captioned, instruct_llm, temperature, instruction_language, stats)

    generation, items, failed = split_rows(rows, "instruction")
    stats_frame = ins.instruction_statistics(items)
    dsd = items[items["task"] == "DSD"]
    manifest = {
        "references": str(references),
        "references_sha256": hashlib.sha256(Path(references).read_bytes()).hexdigest(), "n_references": len(refs),
        "caption_llm": caption_llm, "instruct_llm": instruct_llm,
        "llm_ids": {s: m.llm_id for s, m in llms.items()},
        "prompt_versions": [ins.CAPTION_PROMPT_VERSION, ins.APS_RENDER_VERSION, ins.DSD_PROMPT_VERSION,
                            ins.RP_PROMPT_VERSION],
        "caption_temperature": caption_temperature, "temperature": temperature,
        "instruction_language": instruction_language, "seed": settings.seed,
        "features": list(ins.FEATURES),
        "dropout_sets": [{"set": s.number, "prob": s.prob, "keep": s.keep} for s in ins.DROPOUT_SETS],
        "dsd_by_dropout_set": {int(k): int(v) for k, v in dsd["dropout_set"].value_counts().sort_index().items()},
        "items_by_task": {t: int((items["task"] == t).sum()) for t in ins.TASKS},
        "failed_by_task": {str(k): int(v) for k, v in failed["task"].value_counts().items()},
    }
    result = freeze_and_publish(
        st, name, version, title="instructions", generation=generation, items=items, failed=failed,
        stats_frame=stats_frame, stats_md=ins.statistics_markdown(stats_frame), manifest=manifest, calls=stats,
        t0=t0, code=_git_commit())
    return result | {"items_by_task": manifest["items_by_task"], "failed_by_task": manifest["failed_by_task"],
                     "started_at": started.isoformat(timespec="seconds")}
