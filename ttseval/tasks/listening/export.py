"""export_test: a listening test picked from a stored run (items, systems, reference and anchors), its stimuli
written as webMUSHRA's folder and its key (blinded name -> item and system) stored in the run."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import SpecError
from ttseval.core.schemas import table_from_rows
from ttseval.tasks.listening.anchors import anchor_x, anchor_y, pad_to_longest
from ttseval.tasks.listening.common import KINDS, MUSHRA_KINDS, of_test
from ttseval.tasks.listening.webmushra import Stimulus, readme, write_configs
from ttseval.tasks.parts import get_store

CMOS_GAP_S = 0.6  # silence between A and B in a CMOS stimulus

_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _blind(test_id: str, seed: int, *parts: str) -> str:
    """A blinded name: nothing of the item or system in it, the same for every rater of the test."""
    return "s" + hashlib.sha256("\x1f".join((test_id, str(seed), *parts)).encode()).hexdigest()[:10]


def export_test(
    settings: Settings,
    run_id: str,
    out: Path,
    *,
    kind: str,
    test_id: str,
    raters: int = 20,
    items: int = 30,
    systems: list[str] | None = None,
    reference: str | None = None,
    anchor_x_on: bool | None = None,
    anchor_y_system: str | None = None,
    language: str = "English",
    seed: int = 0,
) -> dict[str, Any]:
    """Write the webMUSHRA folder for test `test_id` of a stored run and record its key; returns the test's
    description (also runs/<run>/listening/<test>/test.json).

    Raises:
        SpecError: an unknown kind, a bad test id, a test id the run already has, a system or reference without
            audio, a test that needs a reference and has none, or no item with audio from every system.
    """
    if kind not in KINDS:
        raise SpecError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    if not _ID.fullmatch(test_id):
        raise SpecError(
            f"--test-id {test_id!r}: use lower-case letters, digits, '-' and '_' (it names files and "
            "webMUSHRA's results folder)"
        )
    if raters < 1 or items < 1:
        raise SpecError("--raters and --items must be at least 1")
    store = get_store(settings.store, settings.store_wait_s)
    if not of_test(store, run_id, "listening_stimuli", test_id).empty:
        raise SpecError(f"run {run_id!r} already has a listening test {test_id!r}; give another --test-id")
    cfg = settings.listening
    synthesis = store.read(
        run_id, "synthesis", columns=["item_id", "system_id", "system_spec", "status", "audio_sha256", "duration_s"]
    )
    ok = synthesis[synthesis["status"] == "ok"]
    specs: dict[str, str] = dict(zip(synthesis["system_id"], synthesis["system_spec"]))
    ids_of: dict[str, str] = {**{s: s for s in specs}, **{spec: sid for sid, spec in specs.items()}}

    def system_id(name: str, what: str) -> str:
        if name not in ids_of:
            raise SpecError(
                f"{what} {name!r} has no audio in run {run_id!r}; systems there: {', '.join(sorted(specs.values()))}"
            )
        return ids_of[name]

    natural = [s for s in specs if settings.role_of(s) == "natural"]
    ref_id = system_id(reference, "--reference") if reference else (natural[0] if len(natural) == 1 else None)
    if kind in ("mushra", "mushra-dg", "cmos") and ref_id is None:
        raise SpecError(
            f"a {kind} test needs a reference: give --reference (a natural-speech system of the run, "
            "or for CMOS any system to compare with)" + (f"; the run's natural systems: {natural}" if natural else "")
        )
    chosen = (
        [system_id(s, "--systems") for s in systems]
        if systems
        else [s for s in specs if s != ref_id and settings.role_of(s) == "tts"]
    )
    chosen = [s for s in chosen if s != ref_id]
    if not chosen:
        raise SpecError(f"no system to rate in run {run_id!r} besides the reference")
    y_id = system_id(anchor_y_system, "--anchor-y") if anchor_y_system else None
    with_x = (
        kind in MUSHRA_KINDS and ref_id is not None and settings.role_of(ref_id) == "natural"
        if anchor_x_on is None
        else anchor_x_on
    )
    if with_x and (ref_id is None or kind not in MUSHRA_KINDS):
        raise SpecError("Anchor-X is the reference band-limited: it needs a MUSHRA kind and a --reference")
    if y_id and kind not in MUSHRA_KINDS:
        raise SpecError("anchors belong to MUSHRA tests; drop --anchor-y for MOS and CMOS")
    needed = [*chosen, *([ref_id] if ref_id else []), *([y_id] if y_id else [])]
    have = ok[ok["system_id"].isin(needed)]
    complete = have.groupby("item_id").agg(n=("system_id", "nunique"), longest=("duration_s", "max"))
    complete = complete[complete["n"] == len(set(needed))]
    if y_id:  # Anchor-Y is its system's clip slowed, and perhaps a word longer (a repeat): 15% to spare
        slowed = have[have["system_id"] == y_id].set_index("item_id")["duration_s"] * cfg.anchor_y_slowdown * 1.15
        complete["longest"] = np.maximum(complete["longest"], slowed.reindex(complete.index))
    too_long = 0
    if kind in MUSHRA_KINDS:
        too_long = int((complete["longest"] > cfg.max_duration_s).sum())
        complete = complete[complete["longest"] <= cfg.max_duration_s]
    if complete.empty:
        raise SpecError(
            f"no item of run {run_id!r} has audio from every one of {', '.join(needed)}"
            + (f" and at most {cfg.max_duration_s:g} s long (listening.max_duration_s)" if kind in MUSHRA_KINDS else "")
        )
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(sorted(complete.index), size=min(items, len(complete)), replace=False))
    texts = store.read(run_id, "items", columns=["item_id", "text"]).set_index("item_id")["text"]
    sha = have.set_index(["item_id", "system_id"])["audio_sha256"]
    sr = cfg.sample_rate_hz
    audio_dir = out / "configs" / "resources" / "audio" / test_id
    audio_dir.mkdir(parents=True, exist_ok=True)
    rel = f"configs/resources/audio/{test_id}"

    def load(item: str, system: str) -> Audio:
        return Audio.from_wav_bytes(store.get_audio(sha[(item, system)])).resampled(sr)

    def save(name: str, audio: Audio) -> str:
        (audio_dir / f"{name}.wav").write_bytes(audio.to_wav_bytes())
        return f"{rel}/{name}.wav"

    stimuli: list[Stimulus] = []
    pages: list[dict[str, Any]] = []  # trial_id, type, and what the YAML needs
    y_edits = set(rng.choice(picked, size=round(cfg.anchor_y_share * len(picked)), replace=False)) if y_id else set()
    if kind in MUSHRA_KINDS:
        per_page = cfg.max_conditions - 1 - int(with_x) - int(bool(y_id))  # the hidden reference is a condition
        if per_page < 1:
            raise SpecError(
                f"listening.max_conditions {cfg.max_conditions} leaves no room for a system beside the "
                "hidden reference and the anchors"
            )
        page_ref = ref_id or chosen[0]  # NMR without natural speech: one system plays the (hidden) reference
        rated = [s for s in chosen if s != page_ref]
        groups = [
            rated[i :: int(np.ceil(len(rated) / per_page))] for i in range(int(np.ceil(len(rated) / per_page)))
        ] or [[]]
        for item in picked:
            ref_audio = load(item, page_ref)
            extra: dict[str, Audio] = {}
            if with_x:
                extra["anchor-x"] = anchor_x(ref_audio, cfg.anchor_x_bandwidth_hz)
            if y_id:
                edit = str(rng.choice(["skip", "repeat"])) if item in y_edits else None
                extra["anchor-y"] = anchor_y(
                    load(item, y_id),
                    slowdown=cfg.anchor_y_slowdown,
                    edit=edit,
                    n_words=len(str(texts.get(item, "")).split()),
                    rng=rng,
                )
            for group in groups:
                trial = f"p{len(pages) + 1:03d}"
                names = [*group, *extra]
                clips = pad_to_longest([ref_audio, *[load(item, s) for s in group], *extra.values()])
                ref_file = save(_blind(test_id, seed, item, page_ref, trial), clips[0])
                role_ref = "reference" if settings.role_of(page_ref) == "natural" else "system"
                entries = {"reference": (page_ref, role_ref, ref_file)}
                for name, clip in zip(names, clips[1:]):
                    key = _blind(test_id, seed, item, name, trial)
                    entries[key] = (name, name if name.startswith("anchor-") else "system", save(key, clip))
                for key, (system, role, file) in entries.items():
                    stimuli.append(Stimulus(trial, key, "mushra", item, system, role, file))
                pages.append(
                    {
                        "trial_id": trial,
                        "item_id": item,
                        "reference": ref_file,
                        "stimuli": {k: v[2] for k, v in entries.items() if k != "reference"},
                    }
                )
                if kind.startswith("mushra-dg"):  # the scoresheet: every clip of the page, the hidden one by name
                    sheet = f"{trial}-sheet"
                    sheet_key = _blind(test_id, seed, item, page_ref, sheet)
                    stimuli.append(Stimulus(sheet, sheet_key, "sheet", item, page_ref, role_ref, ref_file))
                    sheet_stimuli = {sheet_key: ref_file}
                    for key, (system, role, file) in entries.items():
                        if key != "reference":
                            stimuli.append(Stimulus(sheet, key, "sheet", item, system, role, file))
                            sheet_stimuli[key] = file
                    pages[-1]["sheet"] = {"trial_id": sheet, "stimuli": sheet_stimuli}
    elif kind == "mos":
        for item in picked:
            for system in [*chosen, *([ref_id] if ref_id else [])]:
                key = _blind(test_id, seed, item, system)
                role = "reference" if settings.role_of(system) == "natural" else "system"
                stimuli.append(Stimulus("mos", key, "mos", item, system, role, save(key, load(item, system))))
    else:  # cmos: both orders are written; each rater hears one, drawn per pair
        assert ref_id is not None  # a cmos test without a reference was refused above
        gap = np.zeros(int(CMOS_GAP_S * sr), dtype=np.float32)
        for item in picked:
            ref_audio = load(item, ref_id)
            for system in chosen:
                clip = load(item, system)
                for b_is_system, (a, b) in ((True, (ref_audio, clip)), (False, (clip, ref_audio))):
                    key = _blind(test_id, seed, item, system, str(b_is_system))
                    file = save(key, Audio(np.concatenate([a.samples, gap, b.samples]), sr))
                    stimuli.append(Stimulus("cmos", key, "cmos", item, system, "system", file, ref_id, b_is_system))
    orders = write_configs(out, kind, test_id, stimuli, pages, raters, language, seed)
    now = datetime.now(UTC)
    store.write_part(
        run_id,
        "listening_stimuli",
        table_from_rows(
            "listening_stimuli", [{**s.__dict__, "test_id": test_id, "kind": kind, "created_at": now} for s in stimuli]
        ),
        label=test_id,
    )
    description = {
        "test_id": test_id,
        "kind": kind,
        "run_id": run_id,
        "seed": seed,
        "raters": raters,
        "items": [str(i) for i in picked],
        "systems": chosen,
        "reference": ref_id,
        "anchor_x": with_x,
        "anchor_y": y_id,
        "anchor_y_edited_items": sorted(str(i) for i in y_edits),
        "left_out_too_long": too_long,
        "sample_rate_hz": sr,
        "language": language,
        "pages_per_rater": len(orders[0]) if orders else 0,
        "page_orders": orders,
        "listening_settings": settings.listening.model_dump(),
        "exported_at": now.isoformat(),
    }
    store.write_bytes(f"runs/{run_id}/listening/{test_id}/test.json", json.dumps(description, indent=2).encode())
    (out / "README.md").write_text(readme(description), encoding="utf-8")
    return description
