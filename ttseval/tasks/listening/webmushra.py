"""webMUSHRA's side of a listening test: a stimulus of the key, one YAML config per rater (intro, pages or
scoresheets in a seeded order, the closing questionnaire), the rating scales, and the exported folder's README."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ttseval.metrics.listening import COUNT_FIELDS, DG_FIELDS
from ttseval.tasks.listening.common import MUSHRA_KINDS

COUNT_CHOICES = list(range(9))  # 0..8 on the scoresheet ("8" means 8 or more; the formula caps lower anyway)
PERCEPTUAL_CHOICES = [60, 65, 70, 77.5, 85, 92.5, 100]  # appendix A.6's anchors (60/70/85/100) and midpoints


@dataclass(frozen=True)
class Stimulus:
    trial_id: str
    stimulus: str
    source: str
    item_id: str
    system_id: str
    role: str
    file: str
    other_system_id: str | None = None
    b_is_system: bool | None = None


def _instructions(kind: str, language: str) -> str:
    if kind in ("mos", "cmos"):
        return ""
    mentioned = kind in ("mushra", "mushra-dg")
    text = (
        f"<p>Listen to every sample of this page and rate how natural each sounds as {language} speech, on the "
        "scale 0-100: 100-80 Excellent, 80-60 Good, 60-40 Fair, 40-20 Poor, 20-0 Bad.</p>"
    )
    text += (
        "<p>The button <i>Reference</i> plays natural speech of the same sentence; the reference is also "
        "hidden among the samples.</p>"
        if mentioned
        else "<p>There is no reference to compare with: rate each sample on its own merits.</p>"
        "<style>#buttonReference, .ui-btn#buttonReference {display: none !important;}</style>"
    )
    if kind.startswith("mushra-dg"):
        text += (
            "<p>After this page you fill in a scoresheet for each sample (Rethinking MUSHRA's detailed "
            "guidelines): count the mild and severe pronunciation mistakes, unnatural pauses, speed-ups or "
            "slow-downs, digital artifacts (clicks, pops, vibration in pauses), sudden changes of energy, "
            "rhythm or pitch, and skipped words; mark liveliness (100 human-like, 85 semi-expressive, 70 "
            "robotic), voice quality (100 human, 85 slightly digital, 60-70 very digital) and rhythm (100 "
            "human-like, 85 slightly fast or slow, 60 too fast or slow).</p>"
        )
    return text


def _sheet_response() -> list[list[dict[str, Any]]]:
    """The scoresheet as webMUSHRA likert scales, one per DG field in DG_FIELDS order; each point's label names
    its field, as webMUSHRA shows no title per scale."""
    short = {
        "mild_pronunciation": "Mild pron.",
        "severe_pronunciation": "Severe pron.",
        "unnatural_pauses": "Pauses/speed",
        "digital_artifacts": "Artifacts",
        "energy_fluctuations": "Energy",
        "word_skips": "Skipped words",
        "liveliness": "Liveliness",
        "voice_quality": "Voice quality",
        "rhythm": "Rhythm",
    }
    return [
        [
            {"value": v, "label": f"{short[f]}: {v}{'+' if f in COUNT_FIELDS and v == COUNT_CHOICES[-1] else ''}"}
            for v in (COUNT_CHOICES if f in COUNT_FIELDS else PERCEPTUAL_CHOICES)
        ]
        for f in DG_FIELDS
    ]


MOS_RESPONSE = [
    {"value": v, "label": label}
    for v, label in ((1, "1 Bad"), (2, "2 Poor"), (3, "3 Fair"), (4, "4 Good"), (5, "5 Excellent"))
]
CMOS_RESPONSE = [
    {
        "value": v / 2,
        "label": (
            f"{v / 2:+g}" + (" A much better" if v == -6 else " B much better" if v == 6 else " same" if v == 0 else "")
        ),
    }
    for v in range(-6, 7)
]


def write_configs(
    out: Path,
    kind: str,
    test_id: str,
    stimuli: list[Stimulus],
    pages: list[dict[str, Any]],
    raters: int,
    language: str,
    seed: int,
) -> list[list[str]]:
    """One webMUSHRA config per rater; returns each rater's page (or stimulus) order."""
    import yaml

    intro = {
        "type": "generic",
        "id": "intro",
        "name": "Welcome",
        "content": (
            f"<p>In this test you rate {language} speech. Please use headphones in a quiet room, and do not change "
            "them during the test.</p>" + _instructions(kind, language)
        ),
    }
    finish = {
        "type": "finish",
        "name": "Thank you",
        "content": "Thank you for taking part.",
        "showResults": False,
        "writeResults": True,
        "questionnaire": [
            {"type": "text", "label": "The rater id you were given", "name": "rater"},
            {
                "type": "likert",
                "name": "headphones",
                "label": "Did you listen with headphones?",
                "response": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            },
        ],
    }
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
                body.append(
                    {
                        "type": "likert_single_stimulus",
                        "id": "practice-sheet",
                        "name": "Practice scoresheet",
                        "content": "A practice sample: fill in its scoresheet (not scored).",
                        "mustRate": True,
                        "stimuli": {"practice": next(iter(first.values()))},
                        "response": _sheet_response(),
                    }
                )
            for n, page in enumerate(order, start=1):
                body.append(
                    {
                        "type": "mushra",
                        "id": page["trial_id"],
                        "name": f"Page {n} of {len(order)}",
                        "content": _instructions(kind, language),
                        "showWaveform": False,
                        "enableLooping": False,
                        "reference": page["reference"],
                        "createAnchor35": False,
                        "createAnchor70": False,
                        # webMUSHRA appends the hidden reference after the listed conditions; only its own
                        # shuffle (per page load, not seeded) keeps the hidden reference from always coming last
                        "randomize": True,
                        "showConditionNames": False,
                        "stimuli": page["stimuli"],
                    }
                )
                if "sheet" in page:
                    body.append(
                        {
                            "type": "likert_single_stimulus",
                            "id": page["sheet"]["trial_id"],
                            "name": f"Scoresheet {n} of {len(order)}",
                            "content": _instructions(kind, language),
                            "mustRate": True,
                            "mustPlayback": "ended",
                            "stimuli": page["sheet"]["stimuli"],
                            "response": _sheet_response(),
                        }
                    )
        else:
            if kind == "mos":
                mine = list(stimuli)
            else:  # one of each pair's two orders, drawn per rater
                pairs: dict[tuple[str, str], dict[bool, Stimulus]] = {}
                for s in stimuli:
                    pairs.setdefault((s.item_id, s.system_id), {})[bool(s.b_is_system)] = s
                mine = [both[bool(rng.integers(2))] for _, both in sorted(pairs.items())]
            order = [mine[i] for i in rng.permutation(len(mine))]
            orders.append([s.stimulus for s in order])
            content = (
                "Rate how natural the speech sounds."
                if kind == "mos"
                else "You hear two versions of one sentence, A then B. Which sounds better, and by how much?"
            )
            body.append(
                {
                    "type": "likert_single_stimulus",
                    "id": kind,
                    "name": kind.upper(),
                    "content": content,
                    "mustRate": True,
                    "mustPlayback": "ended",
                    "stimuli": {s.stimulus: s.file for s in order},
                    "response": MOS_RESPONSE if kind == "mos" else CMOS_RESPONSE,
                }
            )
        config = {
            "testname": f"{kind.upper()} listening test",
            "testId": f"{test_id}-{rater}",
            "bufferSize": 2048,
            "stopOnErrors": True,
            "showButtonPreviousPage": False,
            "remoteService": "service/write.php",
            "pages": [intro, *body, finish],
        }
        (out / "configs" / f"{test_id}-{rater}.yaml").write_text(
            yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8"
        )
    return orders


def readme(d: dict[str, Any]) -> str:
    return f"""# Listening test `{d["test_id"]}` ({d["kind"]}) of run `{d["run_id"]}`

Copy this folder over a webMUSHRA checkout (https://github.com/audiolabs/webMUSHRA), serve it with PHP, and give
rater k the page `?config={d["test_id"]}-rNN.yaml` (r01 ... r{d["raters"]:02d}). Results land in
`results/{d["test_id"]}-rNN/` (mushra.csv; lss.csv for MOS, CMOS and scoresheets). Bring them back with

    ttseval human-eval ingest --run-id {d["run_id"]} --test-id {d["test_id"]} results/*/*.csv

{len(d["items"])} items, systems {", ".join(d["systems"])}, reference {d["reference"]}; stimuli at
{d["sample_rate_hz"]} Hz (the browser's audio device must run at that rate). The key from the blinded names back
to systems is kept in the run's store, not here.
"""
