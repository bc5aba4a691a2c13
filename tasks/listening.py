"""Listening tests from a stored run (Rethinking MUSHRA): export for webMUSHRA, ratings back, analysis.

Export writes a folder laid out like webMUSHRA's root, to copy over it:

    <out>/configs/<test>-r01.yaml ...            one config per rater (page order and blinded names seeded)
    <out>/configs/resources/audio/<test>/*.wav   the stimuli: one rate, a page's stimuli padded to one length
    <out>/README.md                              how to run it and bring the results back

Raters open `?config=<test>-r07.yaml`; webMUSHRA writes results/<test>-r07/mushra.csv (and lss.csv for MOS, CMOS
and MUSHRA-DG scoresheets). The key from blinded names back to systems never goes into that folder: it is the
run's `listening_stimuli` table, and the seed, page orders and settings are runs/<run>/listening/<test>/test.json.

Test kinds, as the paper names them: `mushra` (mentioned reference, hidden reference, anchors), `mushra-nmr` (no
mentioned reference: the page hides its reference button; the natural speech is still rated, as the hidden
reference), `mushra-dg` and `mushra-dg-nmr` (a MUSHRA page to compare the clips, then appendix A.6's scoresheet
for each of them as a webMUSHRA multi-scale likert page; the score is the formula's), `mos` (5-point, one clip at a
time) and `cmos` (each system against the reference: the pair as one stimulus, A then B, rated -3..+3 in steps
of 0.5). Choices the paper or webMUSHRA leave open are stated where they are made.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttseval.metrics.listening import (COUNT_FIELDS, DG_FIELDS, DGWeights, cmos_summary, dg_score, fault_isolation,
                               lambda_effect, metric_correlation, mos_alpha, rater_rejection, subsampling,
                               system_stats)
from ttseval.tasks.common import get_store
from ttseval.core.audio import Audio
from ttseval.core.config import Settings
from ttseval.core.errors import ConfigError, DatasetError, SpecError
from ttseval.core.schemas import DG_SHEET, TABLES, table_from_rows
from ttseval.core.store import ArtifactStore

KINDS = ("mushra", "mushra-nmr", "mushra-dg", "mushra-dg-nmr", "mos", "cmos")
MUSHRA_KINDS = KINDS[:4]
SCALES = {"mushra": (0.0, 100.0), "mos": (1.0, 5.0), "cmos": (-3.0, 3.0)}
CMOS_GAP_S = 0.6  # silence between A and B in a CMOS stimulus
COUNT_CHOICES = list(range(9))  # 0..8 on the scoresheet ("8" means 8 or more; the formula caps lower anyway)
PERCEPTUAL_CHOICES = [60, 65, 70, 77.5, 85, 92.5, 100]  # appendix A.6's anchors (60/70/85/100) and midpoints
_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def scale_of(kind: str) -> tuple[float, float]:
    return SCALES["mushra" if kind in MUSHRA_KINDS else kind]


def dg_weights(settings: Settings) -> DGWeights:
    """ttseval.metrics.listening.DGWeights from settings.listening (dg_weights overrides, dg_clip)."""
    known = set(DGWeights.__dataclass_fields__) - {"clip"}
    if unknown := sorted(set(settings.listening.dg_weights) - known):
        raise ConfigError(f"listening.dg_weights: unknown name(s) {unknown}; known: {sorted(known)}")
    return DGWeights(**settings.listening.dg_weights, clip=settings.listening.dg_clip)


def _of_test(store: ArtifactStore, run_id: str, table: str, test_id: str) -> pd.DataFrame:
    """A listening table's rows of one test (the filter pushed down to the Parquet scan; test_id is in the key)."""
    import pyarrow.compute as pc

    return store.read(run_id, table, where=pc.field("test_id") == test_id)


# ---------------------------------------------------------------------------------------------------- anchors


def anchor_x(reference: Audio, bandwidth_hz: float) -> Audio:
    """Anchor-X: the reference band-limited to `bandwidth_hz` (resampled to twice it and back, soxr's
    anti-aliasing filter doing the low-pass), as BS.1534's 3.5 kHz anchor."""
    return reference.resampled(int(round(2 * bandwidth_hz))).resampled(reference.sample_rate_hz)


def anchor_y(clip: Audio, *, slowdown: float, edit: str | None, n_words: int, rng: np.random.Generator) -> Audio:
    """Anchor-Y in the spirit of the paper's (an ST2 output made worse): pitch flattened to the clip's mean F0 and
    the clip slowed `slowdown` times (Praat's PSOLA resynthesis, through parselmouth), and with `edit` 'skip' or
    'repeat' one word-long stretch of speech cut or said twice. A word's length is the voiced time over the
    text's word count; the stretch starts at a random point of a voiced region. (The paper also lowered ST2's
    diffusion steps and misspelt its input: those need the system itself, not its audio.)"""
    import librosa
    import parselmouth
    from parselmouth.praat import call

    samples = clip.samples.astype(np.float64)
    if edit:
        regions = librosa.effects.split(clip.samples, top_db=35)
        voiced = int(sum(e - s for s, e in regions))
        length = max(1, voiced // max(1, n_words))
        start, end = regions[int(np.argmax([e - s for s, e in regions]))] if len(regions) else (0, len(samples))
        at = int(rng.integers(start, max(start + 1, end - length)))
        chunk = samples[at:at + length]
        samples = (np.concatenate([samples[:at], samples[at + length:]]) if edit == "skip"
                   else np.concatenate([samples[:at + length], chunk, samples[at + length:]]))
    sound = parselmouth.Sound(samples, sampling_frequency=clip.sample_rate_hz)
    manipulation = call(sound, "To Manipulation", 0.01, 75, 600)
    pitch = call(manipulation, "Extract pitch tier")
    mean_f0 = call(pitch, "Get mean (curve)", 0, 0)
    if np.isfinite(mean_f0):  # no voiced frame: nothing to flatten
        call(pitch, "Remove points between", 0, sound.duration)
        call(pitch, "Add point", sound.duration / 2, mean_f0)
        call([pitch, manipulation], "Replace pitch tier")
    duration = call(manipulation, "Extract duration tier")
    call(duration, "Add point", 0, slowdown)
    call([duration, manipulation], "Replace duration tier")
    out = call(manipulation, "Get resynthesis (overlap-add)")
    return Audio(np.asarray(out.values[0], dtype=np.float32), clip.sample_rate_hz)


def _pad(clips: list[Audio]) -> list[Audio]:
    """Every clip zero-padded at its end to the longest (webMUSHRA refuses a page of unequal lengths)."""
    longest = max(len(c.samples) for c in clips)
    return [Audio(np.pad(c.samples, (0, longest - len(c.samples))), c.sample_rate_hz) for c in clips]


# ----------------------------------------------------------------------------------------------------- export


@dataclass(frozen=True)
class _Stimulus:
    trial_id: str
    stimulus: str
    source: str
    item_id: str
    system_id: str
    role: str
    file: str
    other_system_id: str | None = None
    b_is_system: bool | None = None


def _blind(test_id: str, seed: int, *parts: str) -> str:
    """A blinded name: nothing of the item or system in it, the same for every rater of the test."""
    return "s" + hashlib.sha256("\x1f".join((test_id, str(seed), *parts)).encode()).hexdigest()[:10]


def _instructions(kind: str, language: str) -> str:
    if kind in ("mos", "cmos"):
        return ""
    mentioned = kind in ("mushra", "mushra-dg")
    text = (f"<p>Listen to every sample of this page and rate how natural each sounds as {language} speech, on the "
            "scale 0-100: 100-80 Excellent, 80-60 Good, 60-40 Fair, 40-20 Poor, 20-0 Bad.</p>")
    text += ("<p>The button <i>Reference</i> plays natural speech of the same sentence; the reference is also "
             "hidden among the samples.</p>" if mentioned else
             "<p>There is no reference to compare with: rate each sample on its own merits.</p>"
             "<style>#buttonReference, .ui-btn#buttonReference {display: none !important;}</style>")
    if kind.startswith("mushra-dg"):
        text += ("<p>After this page you fill in a scoresheet for each sample (Rethinking MUSHRA's detailed "
                 "guidelines): count the mild and severe pronunciation mistakes, unnatural pauses, speed-ups or "
                 "slow-downs, digital artifacts (clicks, pops, vibration in pauses), sudden changes of energy, "
                 "rhythm or pitch, and skipped words; mark liveliness (100 human-like, 85 semi-expressive, 70 "
                 "robotic), voice quality (100 human, 85 slightly digital, 60-70 very digital) and rhythm (100 "
                 "human-like, 85 slightly fast or slow, 60 too fast or slow).</p>")
    return text


def _sheet_response() -> list[list[dict[str, Any]]]:
    """The scoresheet as webMUSHRA likert scales, one per DG field in DG_FIELDS order; each point's label names
    its field, as webMUSHRA shows no title per scale."""
    short = {"mild_pronunciation": "Mild pron.", "severe_pronunciation": "Severe pron.",
             "unnatural_pauses": "Pauses/speed", "digital_artifacts": "Artifacts", "energy_fluctuations": "Energy",
             "word_skips": "Skipped words", "liveliness": "Liveliness", "voice_quality": "Voice quality",
             "rhythm": "Rhythm"}
    return [[{"value": v, "label": f"{short[f]}: {v}{'+' if f in COUNT_FIELDS and v == COUNT_CHOICES[-1] else ''}"}
             for v in (COUNT_CHOICES if f in COUNT_FIELDS else PERCEPTUAL_CHOICES)] for f in DG_FIELDS]


MOS_RESPONSE = [{"value": v, "label": label} for v, label in
                ((1, "1 Bad"), (2, "2 Poor"), (3, "3 Fair"), (4, "4 Good"), (5, "5 Excellent"))]
CMOS_RESPONSE = [{"value": v / 2, "label": (f"{v / 2:+g}" + (" A much better" if v == -6 else " B much better"
                                                               if v == 6 else " same" if v == 0 else ""))}
                 for v in range(-6, 7)]


def export_test(settings: Settings, run_id: str, out: Path, *, kind: str, test_id: str, raters: int = 20,
                items: int = 30, systems: list[str] | None = None, reference: str | None = None,
                anchor_x_on: bool | None = None, anchor_y_system: str | None = None, language: str = "English",
                seed: int = 0) -> dict[str, Any]:
    """Write the webMUSHRA folder for test `test_id` of a stored run and record its key; returns the test's
    description (also runs/<run>/listening/<test>/test.json).

    Raises:
        SpecError: an unknown kind, a bad test id, a test id the run already has, a system or reference without
            audio, a test that needs a reference and has none, or no item with audio from every system.
    """
    if kind not in KINDS:
        raise SpecError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    if not _ID.fullmatch(test_id):
        raise SpecError(f"--test-id {test_id!r}: use lower-case letters, digits, '-' and '_' (it names files and "
                        "webMUSHRA's results folder)")
    if raters < 1 or items < 1:
        raise SpecError("--raters and --items must be at least 1")
    store = get_store(settings.store)
    if not _of_test(store, run_id, "listening_stimuli", test_id).empty:
        raise SpecError(f"run {run_id!r} already has a listening test {test_id!r}; give another --test-id")
    cfg = settings.listening
    synthesis = store.read(run_id, "synthesis", columns=["item_id", "system_id", "system_spec", "status",
                                                          "audio_sha256", "duration_s"])
    ok = synthesis[synthesis["status"] == "ok"]
    specs = dict(zip(synthesis["system_id"], synthesis["system_spec"]))
    ids_of = {**{s: s for s in specs}, **{spec: sid for sid, spec in specs.items()}}

    def system_id(name: str, what: str) -> str:
        if name not in ids_of:
            raise SpecError(f"{what} {name!r} has no audio in run {run_id!r}; systems there: "
                            f"{', '.join(sorted(specs.values()))}")
        return ids_of[name]

    natural = [s for s in specs if settings.role_of(s) == "natural"]
    ref_id = system_id(reference, "--reference") if reference else (natural[0] if len(natural) == 1 else None)
    if kind in ("mushra", "mushra-dg", "cmos") and ref_id is None:
        raise SpecError(f"a {kind} test needs a reference: give --reference (a natural-speech system of the run, "
                        "or for CMOS any system to compare with)" + (f"; the run's natural systems: {natural}"
                                                                    if natural else ""))
    chosen = ([system_id(s, "--systems") for s in systems] if systems else
              [s for s in specs if s != ref_id and settings.role_of(s) == "tts"])
    chosen = [s for s in chosen if s != ref_id]
    if not chosen:
        raise SpecError(f"no system to rate in run {run_id!r} besides the reference")
    y_id = system_id(anchor_y_system, "--anchor-y") if anchor_y_system else None
    with_x = (kind in MUSHRA_KINDS and ref_id is not None and settings.role_of(ref_id) == "natural"
              if anchor_x_on is None else anchor_x_on)
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
        raise SpecError(f"no item of run {run_id!r} has audio from every one of {', '.join(needed)}"
                        + (f" and at most {cfg.max_duration_s:g} s long (listening.max_duration_s)"
                           if kind in MUSHRA_KINDS else ""))
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

    stimuli: list[_Stimulus] = []
    pages: list[dict[str, Any]] = []  # trial_id, type, and what the YAML needs
    y_edits = set(rng.choice(picked, size=int(round(cfg.anchor_y_share * len(picked))), replace=False)) if y_id else set()
    if kind in MUSHRA_KINDS:
        per_page = cfg.max_conditions - 1 - int(with_x) - int(bool(y_id))  # the hidden reference is a condition
        if per_page < 1:
            raise SpecError(f"listening.max_conditions {cfg.max_conditions} leaves no room for a system beside the "
                            "hidden reference and the anchors")
        page_ref = ref_id or chosen[0]  # NMR without natural speech: one system plays the (hidden) reference
        rated = [s for s in chosen if s != page_ref]
        groups = [rated[i::int(np.ceil(len(rated) / per_page))] for i in range(int(np.ceil(len(rated) / per_page)))] or [[]]
        for item in picked:
            ref_audio = load(item, page_ref)
            extra: dict[str, Audio] = {}
            if with_x:
                extra["anchor-x"] = anchor_x(ref_audio, cfg.anchor_x_bandwidth_hz)
            if y_id:
                edit = str(rng.choice(["skip", "repeat"])) if item in y_edits else None
                extra["anchor-y"] = anchor_y(load(item, y_id), slowdown=cfg.anchor_y_slowdown, edit=edit,
                                             n_words=len(str(texts.get(item, "")).split()), rng=rng)
            for g, group in enumerate(groups):
                trial = f"p{len(pages) + 1:03d}"
                names = [*group, *extra]
                clips = _pad([ref_audio, *[load(item, s) for s in group], *extra.values()])
                ref_file = save(_blind(test_id, seed, item, page_ref, trial), clips[0])
                role_ref = "reference" if settings.role_of(page_ref) == "natural" else "system"
                entries = {"reference": (page_ref, role_ref, ref_file)}
                for name, clip in zip(names, clips[1:]):
                    key = _blind(test_id, seed, item, name, trial)
                    entries[key] = (name, name if name.startswith("anchor-") else "system", save(key, clip))
                for key, (system, role, file) in entries.items():
                    stimuli.append(_Stimulus(trial, key, "mushra", item, system, role, file))
                pages.append({"trial_id": trial, "item_id": item, "reference": ref_file,
                              "stimuli": {k: v[2] for k, v in entries.items() if k != "reference"}})
                if kind.startswith("mushra-dg"):  # the scoresheet: every clip of the page, the hidden one by name
                    sheet = f"{trial}-sheet"
                    sheet_key = _blind(test_id, seed, item, page_ref, sheet)
                    stimuli.append(_Stimulus(sheet, sheet_key, "sheet", item, page_ref, role_ref, ref_file))
                    sheet_stimuli = {sheet_key: ref_file}
                    for key, (system, role, file) in entries.items():
                        if key != "reference":
                            stimuli.append(_Stimulus(sheet, key, "sheet", item, system, role, file))
                            sheet_stimuli[key] = file
                    pages[-1]["sheet"] = {"trial_id": sheet, "stimuli": sheet_stimuli}
    elif kind == "mos":
        for item in picked:
            for system in [*chosen, *([ref_id] if ref_id else [])]:
                key = _blind(test_id, seed, item, system)
                role = "reference" if settings.role_of(system) == "natural" else "system"
                stimuli.append(_Stimulus("mos", key, "mos", item, system, role, save(key, load(item, system))))
    else:  # cmos: both orders are written; each rater hears one, drawn per pair
        gap = np.zeros(int(CMOS_GAP_S * sr), dtype=np.float32)
        for item in picked:
            ref_audio = load(item, ref_id)
            for system in chosen:
                clip = load(item, system)
                for b_is_system, (a, b) in ((True, (ref_audio, clip)), (False, (clip, ref_audio))):
                    key = _blind(test_id, seed, item, system, str(b_is_system))
                    file = save(key, Audio(np.concatenate([a.samples, gap, b.samples]), sr))
                    stimuli.append(_Stimulus("cmos", key, "cmos", item, system, "system", file, ref_id, b_is_system))
    orders = _write_configs(out, kind, test_id, stimuli, pages, raters, language, seed)
    now = datetime.now(timezone.utc)
    store.write_part(run_id, "listening_stimuli", table_from_rows(
        "listening_stimuli", [{**s.__dict__, "test_id": test_id, "kind": kind, "created_at": now} for s in stimuli]),
        label=test_id)
    description = {"test_id": test_id, "kind": kind, "run_id": run_id, "seed": seed, "raters": raters,
                   "items": [str(i) for i in picked], "systems": chosen, "reference": ref_id,
                   "anchor_x": with_x, "anchor_y": y_id, "anchor_y_edited_items": sorted(str(i) for i in y_edits),
                   "left_out_too_long": too_long, "sample_rate_hz": sr, "language": language,
                   "pages_per_rater": len(orders[0]) if orders else 0, "page_orders": orders,
                   "listening_settings": settings.listening.model_dump(), "exported_at": now.isoformat()}
    store.write_bytes(f"runs/{run_id}/listening/{test_id}/test.json", json.dumps(description, indent=2).encode())
    (out / "README.md").write_text(_readme(description), encoding="utf-8")
    return description


def _write_configs(out: Path, kind: str, test_id: str, stimuli: list[_Stimulus], pages: list[dict[str, Any]],
                   raters: int, language: str, seed: int) -> list[list[str]]:
    """One webMUSHRA config per rater; returns each rater's page (or stimulus) order."""
    import yaml

    intro = {"type": "generic", "id": "intro", "name": "Welcome", "content": (
        f"<p>In this test you rate {language} speech. Please use headphones in a quiet room, and do not change "
        "them during the test.</p>" + _instructions(kind, language))}
    finish = {"type": "finish", "name": "Thank you", "content": "Thank you for taking part.", "showResults": False,
              "writeResults": True, "questionnaire": [
                  {"type": "text", "label": "The rater id you were given", "name": "rater"},
                  {"type": "likert", "name": "headphones", "label": "Did you listen with headphones?",
                   "response": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}]}]}
    orders = []
    (out / "configs").mkdir(parents=True, exist_ok=True)
    for r in range(1, raters + 1):
        rater = f"r{r:02d}"
        rng = np.random.default_rng([seed, r])
        body: list[dict[str, Any]] = []
        if kind in MUSHRA_KINDS:
            order = [pages[i] for i in rng.permutation(len(pages))]
            orders.append([p["trial_id"] for p in order])
            if kind.startswith("mushra-dg"):  # a practice sheet first (the paper's raters had five pilot samples);
                # it also makes webMUSHRA's write.php label lss.csv's nine rating columns (it reads the first trial)
                first = order[0]["sheet"]["stimuli"]
                body.append({"type": "likert_single_stimulus", "id": "practice-sheet", "name": "Practice scoresheet",
                             "content": "A practice sample: fill in its scoresheet (not scored).", "mustRate": True,
                             "stimuli": {"practice": next(iter(first.values()))},
                             "response": _sheet_response()})
            for n, page in enumerate(order, start=1):
                body.append({"type": "mushra", "id": page["trial_id"], "name": f"Page {n} of {len(order)}",
                             "content": _instructions(kind, language), "showWaveform": False,
                             "enableLooping": False, "reference": page["reference"], "createAnchor35": False,
                             "createAnchor70": False,
                             # webMUSHRA appends the hidden reference after the listed conditions; only its own
                             # shuffle (per page load, not seeded) keeps the hidden reference from always coming last
                             "randomize": True, "showConditionNames": False, "stimuli": page["stimuli"]})
                if "sheet" in page:
                    body.append({"type": "likert_single_stimulus", "id": page["sheet"]["trial_id"],
                                 "name": f"Scoresheet {n} of {len(order)}", "content": _instructions(kind, language),
                                 "mustRate": True, "mustPlayback": "ended",
                                 "stimuli": page["sheet"]["stimuli"], "response": _sheet_response()})
        else:
            if kind == "mos":
                mine = list(stimuli)
            else:  # one of each pair's two orders, drawn per rater
                pairs: dict[tuple[str, str], dict[bool, _Stimulus]] = {}
                for s in stimuli:
                    pairs.setdefault((s.item_id, s.system_id), {})[bool(s.b_is_system)] = s
                mine = [both[bool(rng.integers(2))] for _, both in sorted(pairs.items())]
            order = [mine[i] for i in rng.permutation(len(mine))]
            orders.append([s.stimulus for s in order])
            content = ("Rate how natural the speech sounds." if kind == "mos" else
                       "You hear two versions of one sentence, A then B. Which sounds better, and by how much?")
            body.append({"type": "likert_single_stimulus", "id": kind, "name": kind.upper(), "content": content,
                         "mustRate": True, "mustPlayback": "ended",
                         "stimuli": {s.stimulus: s.file for s in order},
                         "response": MOS_RESPONSE if kind == "mos" else CMOS_RESPONSE})
        config = {"testname": f"{kind.upper()} listening test", "testId": f"{test_id}-{rater}", "bufferSize": 2048,
                  "stopOnErrors": True, "showButtonPreviousPage": False, "remoteService": "service/write.php",
                  "pages": [intro, *body, finish]}
        (out / "configs" / f"{test_id}-{rater}.yaml").write_text(
            yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    return orders


def _readme(d: dict[str, Any]) -> str:
    return f"""# Listening test `{d['test_id']}` ({d['kind']}) of run `{d['run_id']}`

Copy this folder over a webMUSHRA checkout (https://github.com/audiolabs/webMUSHRA), serve it with PHP, and give
rater k the page `?config={d['test_id']}-rNN.yaml` (r01 ... r{d['raters']:02d}). Results land in
`results/{d['test_id']}-rNN/` (mushra.csv; lss.csv for MOS, CMOS and scoresheets). Bring them back with

    ttseval human-eval ingest --run-id {d['run_id']} --test-id {d['test_id']} results/*/*.csv

{len(d['items'])} items, systems {', '.join(d['systems'])}, reference {d['reference']}; stimuli at
{d['sample_rate_hz']} Hz (the browser's audio device must run at that rate). The key from the blinded names back
to systems is kept in the run's store, not here.
"""


# ----------------------------------------------------------------------------------------------------- ingest

PLAIN_REQUIRED = ("rater_id", "trial_id", "stimulus")
PLAIN_OPTIONAL = ("score", "session", "rating_time_s", "comment", *DG_FIELDS)


def _rows_of_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read it as UTF-8 CSV ({e})", source=str(path)) from e
    rows = [r for r in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in r)]
    if not rows:
        raise DatasetError(f"{path}: empty; expected webMUSHRA's mushra.csv or lss.csv, or the plain CSV "
                           f"({', '.join(PLAIN_REQUIRED)}, score)", source=str(path))
    return [h.strip() for h in rows[0]], rows[1:]


def _number(value: str, *, what: str, where: str) -> float:
    if value is None or str(value).strip() in ("", "NA"):
        return float("nan")
    try:
        return float(value)
    except ValueError:
        raise DatasetError(f"{where}: {what} {value!r} is not a number") from None


def read_results(path: Path, test_id: str) -> pd.DataFrame:
    """The ratings of one results file, as raw rows (rater_id, session, trial_id, stimulus, score, the DG fields,
    rating_time_s, comment, questionnaire, source_file, line). Recognised by their header: webMUSHRA's mushra.csv
    (session_test_id, questionnaire fields, session_uuid, trial_id, rating_stimulus, rating_score, rating_time,
    rating_comment), its lss.csv (session_test_id, questionnaire fields, trial_id, one or more rating columns,
    stimuli, rating_time), or the plain CSV (README: rater_id, trial_id, stimulus, score, optional session,
    rating_time_s, comment and the nine scoresheet fields).

    Raises:
        DatasetError: an unknown header, a rater config of another test, a value that is not a number (row named).
    """
    header, rows = _rows_of_csv(path)
    out = []
    if header and header[0] == "session_test_id":
        is_mushra = "rating_stimulus" in header
        prefix = header.index("session_uuid" if is_mushra else "trial_id")
        for n, row in enumerate(rows, start=2):
            where = f"{path.name} row {n}"
            config = row[0]
            if not config.startswith(f"{test_id}-"):
                raise DatasetError(f"{where}: session_test_id {config!r} is not a rater config of test {test_id!r} "
                                   f"(expected {test_id}-rNN): wrong results file or --test-id", source=str(path))
            base = {"rater_id": config[len(test_id) + 1:], "source_file": path.name, "line": n,
                    "questionnaire": json.dumps(dict(zip(header[1:prefix], row[1:prefix])), ensure_ascii=False)}
            if is_mushra:
                uuid_, trial, stimulus, score, time_ms, comment = (row + [""] * 6)[prefix:prefix + 6]
                out.append({**base, "session": uuid_, "trial_id": trial, "stimulus": stimulus,
                            "score": _number(score, what="rating_score", where=where),
                            "rating_time_s": _number(time_ms, what="rating_time", where=where) / 1000,
                            "comment": comment or None})
            else:  # lss.csv: write.php labels the rating columns from the session's first trial, so count them
                trial, values, stimulus, time_ms = row[prefix], row[prefix + 1:-2], row[-2], row[-1]
                numbers = [_number(v, what="rating", where=where) for v in values]
                fields = dict(zip(DG_FIELDS, numbers)) if len(numbers) == len(DG_FIELDS) else {}
                out.append({**base, "session": "", "trial_id": trial, "stimulus": stimulus,
                            "score": numbers[0] if len(numbers) == 1 else float("nan"), **fields,
                            "rating_time_s": _number(time_ms, what="rating_time", where=where) / 1000})
    elif set(PLAIN_REQUIRED) <= set(header):
        unknown = sorted(set(header) - set(PLAIN_REQUIRED) - set(PLAIN_OPTIONAL))
        if unknown:
            raise DatasetError(f"{path}: unknown column(s) {unknown}; the plain CSV has {', '.join(PLAIN_REQUIRED)}"
                               f" and optionally {', '.join(PLAIN_OPTIONAL)}", source=str(path))
        for n, row in enumerate(rows, start=2):
            where = f"{path.name} row {n}"
            rec = dict(zip(header, (c.strip() for c in row)))
            if not rec.get("rater_id"):
                raise DatasetError(f"{where}: rater_id is empty; give each rater an id", source=str(path))
            out.append({"rater_id": rec["rater_id"], "session": rec.get("session", ""), "trial_id": rec["trial_id"],
                        "stimulus": rec["stimulus"], "source_file": path.name, "line": n, "questionnaire": None,
                        "score": _number(rec.get("score"), what="score", where=where),
                        **{f: _number(rec.get(f), what=f, where=where) for f in DG_FIELDS if f in rec},
                        "rating_time_s": _number(rec.get("rating_time_s"), what="rating_time_s", where=where),
                        "comment": rec.get("comment") or None})
    else:
        raise DatasetError(f"{path}: not a results file this test reads: its header {header[:6]} is neither "
                           "webMUSHRA's (session_test_id, ...) nor the plain CSV's (rater_id, trial_id, stimulus, "
                           "score)", source=str(path))
    return pd.DataFrame(out)


def ingest_ratings(settings: Settings, run_id: str, test_id: str, paths: list[Path]) -> dict[str, Any]:
    """Map every rating of `paths` through the test's key into the run's `ratings` table; returns counts.

    Refused as a whole, nothing written (DatasetError naming file, row, rater, page and stimulus): a stimulus or
    page the test does not have, a score outside the test's scale, a scoresheet value outside its scale. Stored
    and flagged, left out of the analysis: a rater's second rating of a page (another session or a repeated
    row; the first one counts). Stored with a note: a MUSHRA page whose hidden reference the rater did not rate.
    Re-ingesting a file changes nothing (its rows have the same keys).
    """
    store = get_store(settings.store)
    key = _of_test(store, run_id, "listening_stimuli", test_id)
    if key.empty:
        raise SpecError(f"run {run_id!r} has no listening test {test_id!r}; export one with ttseval human-eval "
                        "export")
    kind = key["kind"].iloc[0]
    raw = pd.concat([read_results(Path(p), test_id) for p in paths], ignore_index=True)
    if raw.empty:
        raise DatasetError(f"{', '.join(str(p) for p in paths)}: a header and no ratings; nothing to ingest")
    for column in ("score", *DG_FIELDS, "rating_time_s"):
        if column not in raw:
            raw[column] = np.nan
    for column in ("comment", "questionnaire"):
        if column not in raw:
            raw[column] = None
    raw = raw[raw["trial_id"] != "practice-sheet"]
    joined = raw.merge(key.drop(columns=["created_at"]), on=["trial_id", "stimulus"], how="left")
    unknown = joined[joined["item_id"].isna()]
    if len(unknown):
        r = unknown.iloc[0]
        raise DatasetError(f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page {r['trial_id']!r}: "
                           f"stimulus {r['stimulus']!r} is not one test {test_id!r} exported ({len(unknown)} such "
                           "rows): results of another test, or an edited file", source=str(r["source_file"]))
    low, high = scale_of(kind)
    scored = joined[joined["source"] != "sheet"]
    bad = scored[scored["score"].notna() & ~scored["score"].between(low, high)]
    if len(bad):
        r = bad.iloc[0]
        raise DatasetError(f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page {r['trial_id']!r}, "
                           f"stimulus {r['stimulus']!r}: score {r['score']:g} is outside the {kind} scale "
                           f"{low:g}..{high:g}", source=str(r["source_file"]))
    sheets = joined[joined["source"] == "sheet"]
    for field in DG_FIELDS:
        top = 100 if field not in COUNT_FIELDS else np.inf
        wrong = sheets[sheets[field].notna() & ~sheets[field].between(0, top)]
        if len(wrong):
            r = wrong.iloc[0]
            raise DatasetError(f"{r['source_file']} row {r['line']}: rater {r['rater_id']!r}, page "
                               f"{r['trial_id']!r}, stimulus {r['stimulus']!r}: {field} {r[field]:g} is outside "
                               f"0..{top:g}", source=str(r["source_file"]))
    existing = _of_test(store, run_id, "ratings", test_id)
    rows = _assemble(joined, kind, dg_weights(settings))
    rows["test_id"], rows["kind"] = test_id, kind
    # a second rating of one page by one rater (a second session, a repeated row) is kept but flagged: the first
    # counts, whether it came in earlier or earlier in this file
    seen = existing[["rater_id", "trial_id", "item_id", "system_id", "session"]].assign(_old=True)
    both = pd.concat([seen, rows.assign(_old=False)], ignore_index=True)
    both = both.drop_duplicates(["rater_id", "trial_id", "item_id", "system_id", "session"], keep="first")
    first = both.drop_duplicates(["rater_id", "trial_id", "item_id", "system_id"], keep="first")
    firsts = set(first[["rater_id", "trial_id", "item_id", "system_id", "session"]].itertuples(index=False, name=None))
    new = rows.merge(seen, on=["rater_id", "trial_id", "item_id", "system_id", "session"], how="left")
    new = new[new["_old"].isna()].drop(columns="_old")
    is_first = [t in firsts for t in new[["rater_id", "trial_id", "item_id", "system_id", "session"]].itertuples(
        index=False, name=None)]
    new["flag"] = [None if f else f"rater {r!r} rated page {t!r} again (session {s!r}); the first rating counts"
                   for f, r, t, s in zip(is_first, new["rater_id"], new["trial_id"], new["session"])]
    if kind in MUSHRA_KINDS:
        hidden = new[new["role"] == "reference"].groupby(["rater_id", "trial_id"]).size()
        has_ref = key[key["role"] == "reference"]["trial_id"].unique()
        lacking = [(r, t) for r, t in new[["rater_id", "trial_id"]].drop_duplicates().itertuples(index=False)
                   if t in has_ref and (r, t) not in hidden.index]
        lacking_set = set(lacking)
        new["note"] = [("no hidden-reference rating on this page" if (r, t) in lacking_set else None)
                       for r, t in zip(new["rater_id"], new["trial_id"])]
    now = datetime.now(timezone.utc)
    new["created_at"] = now
    records = new.astype(object).where(new.notna(), None).to_dict("records")  # NaN is no string: None
    store.write_part(run_id, "ratings", table_from_rows("ratings", records), label=test_id)
    return {"test_id": test_id, "kind": kind, "read": len(raw), "stored": len(new),
            "already_stored": len(rows) - len(new), "flagged": int(new["flag"].notna().sum()),
            "pages_without_hidden_reference": int(new.loc[new["note"].notna(), ["rater_id", "trial_id"]]
                                                  .drop_duplicates().shape[0]) if "note" in new else 0,
            "raters": sorted(new["rater_id"].unique())}


def _assemble(joined: pd.DataFrame, kind: str, weights: DGWeights) -> pd.DataFrame:
    """Raw rows mapped through the key into ratings rows: a session is numbered per repeated (rater, page,
    stimulus) within a file, CMOS scores turned to 'system over the other', MUSHRA-DG's slider and scoresheet of
    one clip joined into one row scored by the formula."""
    joined = joined.copy()
    repeat = joined.groupby(["source_file", "session", "rater_id", "trial_id", "stimulus"]).cumcount()
    joined["session"] = [f"{s or Path(f).stem}#{k}" if (k or not s) else s
                         for s, f, k in zip(joined["session"], joined["source_file"], repeat)]
    if kind == "cmos":  # the rater scored B against A; the system is B or A
        joined["score"] = np.where(joined["b_is_system"].astype(bool), joined["score"], -joined["score"])
    if kind.startswith("mushra-dg"):
        sliders = joined[joined["source"] == "mushra"]
        sheets = joined[joined["source"] == "sheet"].copy()
        sheets["trial_id"] = sheets["trial_id"].str.removesuffix("-sheet")
        sheets["n"] = sheets.groupby(["rater_id", "trial_id", "system_id"]).cumcount()
        sliders = sliders.assign(n=sliders.groupby(["rater_id", "trial_id", "system_id"]).cumcount())
        keep = ["rater_id", "trial_id", "item_id", "system_id", "role", "n"]
        merged = sliders[[*keep, "score", "session", "rating_time_s", "comment", "questionnaire", "source_file"]].merge(
            sheets[[*keep, *DG_FIELDS, "session", "source_file"]], on=keep, how="outer", suffixes=("", "_sheet"))
        merged["slider"] = merged["score"]
        merged["session"] = merged["session"].fillna(merged["session_sheet"])
        merged["source_file"] = merged["source_file"].fillna(merged["source_file_sheet"])
        merged["score"] = dg_score(merged, weights)
        joined = merged.drop(columns=["n", "session_sheet", "source_file_sheet"])
    columns = [c for c in TABLES["ratings"].schema.names if c in joined.columns]
    return joined[columns].reset_index(drop=True)


# --------------------------------------------------------------------------------------------------- analysis

GRID = (2, 3, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200)


def _grid(n: int) -> list[int]:
    return sorted({k for k in GRID if k < n} | {n})


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def rater_boxplot(used: pd.DataFrame, low: float, high: float) -> bytes:
    """Figure 1: per rater (sorted by their mean hidden-reference score, else mean score), one box per system."""
    plt = _pyplot()
    systems = list(system_stats(used)["system_id"])
    ref = used[used["role"] == "reference"].groupby("rater_id")["score"].mean()
    raters = sorted(used["rater_id"].unique(), key=lambda r: (ref.get(r, np.nan) if len(ref) else
                                                              used.loc[used["rater_id"] == r, "score"].mean(), r))
    fig, axes = plt.subplots(len(systems), 1, figsize=(max(6, 0.35 * len(raters) + 2), 1.9 * len(systems)),
                             sharex=True, squeeze=False)
    for ax, system in zip(axes[:, 0], systems):
        data = [used.loc[(used["rater_id"] == r) & (used["system_id"] == system), "score"].dropna().to_numpy()
                for r in raters]
        ax.boxplot(data, showfliers=False)
        ax.set_ylabel(system, fontsize=8)
        ax.set_ylim(low, high)
    axes[-1, 0].set_xticks(range(1, len(raters) + 1), raters, rotation=90, fontsize=7)
    axes[0, 0].set_title("scores per rater (Rethinking MUSHRA, Figure 1)")
    return _png(fig)


def subsampling_figure(curve: pd.DataFrame) -> bytes:
    """Figure 2: mean Spearman correlation against listeners, one line per number of utterances."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for n_utt, g in curve.groupby("utterances"):
        ax.plot(g["listeners"], g["mean_rho"], marker="o", label=f"{n_utt} utterances")
    ax.set_xlabel("listeners")
    ax.set_ylabel("mean Spearman rho with all ratings")
    ax.legend(fontsize=7)
    ax.set_title("listener x utterance subsampling (section 4.3)")
    return _png(fig)


def fault_figure(faults: pd.DataFrame) -> bytes:
    """Figure 5: stacked shares of clips with each fault, and the perceptual means, per system."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    bottom = np.zeros(len(faults))
    for field in COUNT_FIELDS:
        left.bar(faults["system_id"], 100 * faults[field], bottom=bottom, label=DG_SHEET[field])
        bottom += 100 * faults[field].to_numpy()
    left.set_ylabel("% of clips with the fault (stacked)")
    left.legend(fontsize=7)
    for field in DG_FIELDS[6:]:
        right.scatter(faults["system_id"], faults[field], label=DG_SHEET[field])
    right.set_ylim(0, 100)
    right.legend(fontsize=7)
    right.set_ylabel("mean score")
    fig.suptitle("MUSHRA-DG fault isolation (Figure 5)")
    return _png(fig)


def _automatic(store: ArtifactStore, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Automatic metrics of the run's clips: per clip (item, system) and per system; one column per metric."""
    clip_parts, system_parts = [], []
    transcripts = store.read(run_id, "transcripts", columns=["item_id", "system_id", "asr_id", "wer", "cer", "status"])
    for asr_id, g in transcripts[transcripts["status"] == "ok"].groupby("asr_id"):
        clip_parts.append(g.set_index(["item_id", "system_id"])[["wer", "cer"]].add_suffix(f" ({asr_id})"))
    quality = store.read(run_id, "quality", columns=["item_id", "system_id", "quality_id", "mos", "status"])
    for quality_id, g in quality[quality["status"] == "ok"].groupby("quality_id"):
        clip_parts.append(g.set_index(["item_id", "system_id"])[["mos"]].rename(columns={"mos": f"MOS ({quality_id})"}))
    clips = pd.concat(clip_parts, axis=1).reset_index() if clip_parts else pd.DataFrame(columns=["item_id", "system_id"])
    if clip_parts:
        system_parts.append(clips.drop(columns="item_id").groupby("system_id").mean())
    winrates = store.read(run_id, "winrates")
    overall = winrates[winrates["level"] == "overall"]
    for judge_id, g in overall.groupby("judge_id"):
        system_parts.append(g.set_index("system_id")[["win_rate"]].rename(columns={"win_rate": f"win-rate ({judge_id})"}))
    systems = pd.concat(system_parts, axis=1).reset_index().rename(columns={"index": "system_id"}) if system_parts \
        else pd.DataFrame(columns=["system_id"])
    return clips, systems


def analyse_test(settings: Settings, run_id: str, test_id: str) -> str:
    """The analysis of test `test_id` as Markdown, stored with its figures under runs/<run>/listening/<test>/.

    Raises:
        SpecError: the run has no ratings of the test.
    """
    from ttseval.tasks.report import markdown_table

    store = get_store(settings.store)
    ratings = _of_test(store, run_id, "ratings", test_id)
    if ratings.empty:
        raise SpecError(f"run {run_id!r} has no ratings of test {test_id!r}; ingest them with ttseval human-eval "
                        "ingest")
    cfg = settings.listening
    kind = ratings["kind"].iloc[0]
    used = ratings[ratings["flag"].isna()].dropna(subset=["score"])
    low, high = scale_of(kind)
    base = f"runs/{run_id}/listening/{test_id}"
    figures = f"{store.display()}/{base}"
    lines = [f"### Listening test `{test_id}` ({kind})", "",
             f"{used['rater_id'].nunique()} raters, {used['item_id'].nunique()} items, {len(used)} ratings used; "
             f"{int(ratings['flag'].notna().sum())} flagged and left out (a rater's second rating of a page); "
             f"{int(ratings[['rater_id', 'trial_id']][ratings['note'].notna()].drop_duplicates().shape[0])} pages "
             "without a hidden-reference rating."]
    for r in ratings[ratings["flag"].notna()].drop_duplicates(["rater_id", "trial_id", "session"]).head(10).itertuples():
        lines.append(f"- flagged: {r.flag}")
    lines.append("")
    if kind == "cmos":
        table = cmos_summary(used)
        others = ratings["other_system_id"].dropna().unique()
        lines += [f"CMOS against `{', '.join(others)}` (positive: the system preferred), mean and 95% CI "
                  "(Student's t); and the share of ratings preferring each side (Rethinking MUSHRA, Table 8).", "",
                  markdown_table(["system", "ratings", "CMOS", "sigma", "95% CI", "prefer other %", "equal %",
                                  "prefer system %"],
                                 [[r.system_id, r.n, f"{r.cmos:+.2f}", f"{r.sigma:.2f}", f"±{r.ci95:.2f}",
                                   f"{100 * r.prefer_reference:.1f}", f"{100 * r.equal:.1f}",
                                   f"{100 * r.prefer_system:.1f}"] for r in table.itertuples()])]
        human = table.rename(columns={"cmos": "score"})[["system_id", "score"]]
    else:
        table = system_stats(used)
        alpha = mos_alpha(used, level="ordinal" if kind == "mos" else "interval")
        what = {"mos": "MOS (1-5)", "mushra": "MUSHRA (0-100)", "mushra-nmr": "MUSHRA-NMR (0-100)",
                "mushra-dg": "MUSHRA-DG (appendix A.6 formula)", "mushra-dg-nmr": "MUSHRA-DG-NMR (appendix A.6 formula)"}
        lines += [f"{what[kind]}: mean, sigma and 95% CI (mean ± t(0.975, n-1) sigma / sqrt(n), over ratings); "
                  f"Krippendorff's alpha ({'ordinal' if kind == 'mos' else 'interval'}) over (item, system) units: "
                  + ("undefined" if np.isnan(alpha) else f"{alpha:.3f}") + ".", ""]
        headers = ["rank", "system", "role", "ratings", "mean", "sigma", "95% CI"]
        body = [[r.rank, r.system_id, r.role, r.n, f"{r.mean:.2f}", f"{r.sigma:.2f}", f"±{r.ci95:.2f}"]
                for r in table.itertuples()]
        if kind.startswith("mushra-dg"):
            sliders = system_stats(used.dropna(subset=["slider"]), score="slider").set_index("system_id")["mean"]
            headers.append("slider mean")
            body = [row + [f"{sliders.get(row[1], np.nan):.2f}"] for row in body]
            weights = dg_weights(settings)
            lines += [f"Scores from the scoresheet: (L + VQ + R) / 3 - {weights.mild_pronunciation:g} min(MP, "
                      f"{weights.mild_cap:g}) - {weights.severe_pronunciation:g} min(SP, {weights.severe_cap:g}) - "
                      f"{weights.unnatural_pauses:g} US - {weights.digital_artifacts:g} DA - {weights.word_skips:g} "
                      f"WS - {weights.energy_fluctuations:g} SEF" + (", clipped to 0-100" if weights.clip else "")
                      + "; the slider column is the page's MUSHRA slider beside it.", ""]
        lines.append(markdown_table(headers, body))
        human = table[["system_id", "mean"]].rename(columns={"mean": "score"})
        png = rater_boxplot(used, low, high)
        store.write_bytes(f"{base}/raters.png", png)
        lines += ["", f"Per-rater score distributions (Figure 1): `{figures}/raters.png`."]
        if kind in MUSHRA_KINDS and (used["role"] == "reference").any():
            verdict = rater_rejection(used, cfg.rejection_lambda, cfg.rejection_share)
            rejected = verdict[verdict["rejected"].fillna(False).astype(bool)]
            lines += ["", f"**Rater rejection rule** (reported, not applied): a rater who scores the hidden "
                      f"reference below {cfg.rejection_lambda:g} on more than {100 * cfg.rejection_share:g}% of "
                      f"their pages would be rejected: {len(rejected)} of {len(verdict)} raters"
                      + (f" ({', '.join(rejected['rater_id'])})" if len(rejected) else "") + ".", "",
                      markdown_table(["rater", "pages", f"hidden ref < {cfg.rejection_lambda:g}", "share", "rejected"],
                                     [[r.rater_id, r.pages, r.below, "–" if np.isnan(r.share_below) else
                                       f"{100 * r.share_below:.0f}%", "–" if pd.isna(r.rejected) else
                                       ("yes" if r.rejected else "no")] for r in verdict.itertuples()])]
            effect = lambda_effect(used, list(cfg.lambdas), cfg.rejection_share)
            systems = list(table["system_id"])
            rows = []
            for lam, g in effect.groupby("lambda", dropna=False, sort=False):
                means = g.set_index("system_id")
                rows.append(["none" if np.isnan(lam) else f"{lam:g}", g["raters_kept"].iloc[0]]
                            + [f"{means.loc[s, 'mean']:.1f} ({means.loc[s, 'rank']})" if s in means.index else "–"
                               for s in systems])
            lines += ["", "Effect of the rule's lambda on scores (and ranks) (section 4.4, Figure 3):", "",
                      markdown_table(["lambda", "raters kept", *systems], rows)]
        curve = subsampling(used, _grid(used["rater_id"].nunique()), _grid(used["item_id"].nunique()),
                            trials=cfg.subsample_trials, seed=settings.seed)
        if not curve.empty and len(table) > 1:
            store.write_bytes(f"{base}/subsampling.png", subsampling_figure(curve))
            pivot = curve.pivot(index="listeners", columns="utterances", values="mean_rho")
            lines += ["", f"**Listeners x utterances** (section 4.3): mean Spearman correlation of the systems' means "
                      f"with all ratings' over {cfg.subsample_trials} random draws per cell "
                      f"(`{figures}/subsampling.png`).", "",
                      markdown_table(["listeners \\ utterances", *pivot.columns],
                                     [[k, *("–" if np.isnan(v) else f"{v:.3f}" for v in row)]
                                      for k, row in zip(pivot.index, pivot.to_numpy())])]
        if kind.startswith("mushra-dg"):
            faults = fault_isolation(used)
            store.write_bytes(f"{base}/faults.png", fault_figure(faults))
            lines += ["", f"**Fault isolation** (Figure 5): share of clips with at least one fault of each kind, and "
                      f"the mean perceptual scores (`{figures}/faults.png`).", "",
                      markdown_table(["system", "clips", *(DG_SHEET[f] for f in DG_FIELDS)],
                                     [[r["system_id"], r["n"], *(f"{100 * r[f]:.0f}%" for f in COUNT_FIELDS),
                                       *(f"{r[f]:.1f}" for f in DG_FIELDS[6:])] for r in faults.to_dict("records")])]
    clips, systems_auto = _automatic(store, run_id)
    per_clip = used.groupby(["item_id", "system_id"])["score"].mean().reset_index()
    corr = pd.concat([metric_correlation(human, systems_auto, ["system_id"]).assign(level="systems"),
                      metric_correlation(per_clip, clips, ["item_id", "system_id"]).assign(level="clips")])
    corr = corr[corr["n"] > 0]
    if len(corr):
        lines += ["", "**Automatic metrics of the same audio against the human scores** (Spearman and Pearson; "
                  "across systems, and across clips with each clip's mean human score; WER should correlate "
                  "negatively):", "",
                  markdown_table(["metric", "over", "n", "Spearman", "Pearson"],
                                 [[r.metric, r.level, r.n, "–" if np.isnan(r.spearman) else f"{r.spearman:+.2f}",
                                   "–" if np.isnan(r.pearson) else f"{r.pearson:+.2f}"] for r in corr.itertuples()])]
    markdown = "\n".join(lines) + "\n"
    store.write_bytes(f"{base}/analysis.md", markdown.encode("utf-8"))
    return markdown

