"""Instruction-following stage (InstructTTSEval): does each clip follow its item's style instruction?

Items with an `instruction` (and a `task`: APS, DSD or RP) are judged true/false per system by every
configured instruction judge; undecidable or unparseable answers are kept as rows with `follows` null.
Planning, skips, failures and commits are the judge stage's (tasks/judge.py); this module says only what an
instruction judgement is: its table and key, the items it covers, the request and the row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.protocols import InstructionJudge, InstructionRequest, InstructionVerdict
from ttseval.core.store import ArtifactStore
from ttseval.tasks.cost import Budget
from ttseval.tasks.judge import Clips, JudgeKind, Placement, Work, run_judges
from ttseval.tasks.parts import StageResult
from ttseval.tasks.plan import Plan


def _wanted(
    store: ArtifactStore, run_id: str, system_ids: list[str], baseline_id: str | None, settings: Settings
) -> Iterator[Work]:
    """Every (item with an instruction, system); the baseline is judged like any other system."""
    items = store.read(run_id, "items")
    items = items[items["instruction"].notna() & (items["instruction"].astype(str).str.strip() != "")]
    clips = Clips.read(store, run_id)
    for system_id in system_ids:
        for item in items.itertuples(index=False):
            yield {
                "item_id": item.item_id,
                "system_id": system_id,
                "text": item.text,
                "language": item.language,
                "instruction": item.instruction,
                "task": item.task or "",
                "audio_sha256": clips.sha(item.item_id, system_id),
                "skip": clips.skip(
                    item.item_id, {"clip": system_id}, "NoAudio", "the system has no ok clip for this item"
                ),
            }


def _request(w: Work, store: ArtifactStore, settings: Settings) -> tuple[InstructionRequest, dict[str, Any]]:
    audio = Audio.from_wav_bytes(store.get_audio(w["audio_sha256"]))
    return InstructionRequest(
        item_id=w["item_id"],
        text=w["text"],
        language=w["language"],
        instruction=w["instruction"],
        task=w["task"],
        audio=audio,
    ), {}


def _ask(judge: InstructionJudge, requests: list[InstructionRequest]) -> list[InstructionVerdict]:
    return judge.judge_instructions(requests)


def _row(v: Any, known: dict[str, Any]) -> dict[str, Any]:
    return {"follows": v.follows, "reasoning": v.reasoning}


def _row_base(w: Work) -> dict[str, Any]:
    return {"task": w["task"] or None}


INSTRUCTION = JudgeKind(
    table="instruction_judgments",
    task_name="judge-instructions",
    wanted=_wanted,
    request=_request,
    ask=_ask,
    verdict_row=_row,
    row_base=_row_base,
)


def run_instruction_stage(
    settings: Settings,
    run_id: str,
    system_ids: list[str],
    judges: list[str],
    place: Placement = lambda spec: contextlib.nullcontext(),
    item_ids: set[str] | None = None,
    budget: Budget | None = None,
) -> tuple[list[Plan], list[StageResult]]:
    """Plan and run every instruction judge's missing judgements (over `item_ids` when given)."""
    return run_judges(INSTRUCTION, settings, run_id, system_ids, judges, place=place, item_ids=item_ids, budget=budget)
