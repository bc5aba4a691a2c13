"""InstructTTSEval instruction generation as data and pure functions: features, caption, dropout, prompts, stats.

InstructTTSEval (section 3.2, appendices A-B) pairs each reference clip with three instructions of rising
abstraction, all derived from one caption of the clip:

  APS  Acoustic-Parameter Specification: the 12-feature caption itself, one labelled phrase per feature.
  DSD  Descriptive-Style Directive: free-form prose from the caption after random feature dropout (Table 8);
       a dropped feature is unconstrained for the TTS system and for the judge.
  RP   Role-Play: the model first reasons about which people and situations would sound like the caption,
       then writes role or scenario directions that leave the acoustics for the TTS system to infer.

The prompts here are ttseval's own (the paper's prompt texts are not reproduced). Each has a version, and the
rendered request's hash is stored with each item. Everything random (which dropout set, which features survive,
which of the three answers becomes the item) is drawn from a seed and the reference id, so a re-run draws the
same and its LLM calls are answered from the call cache.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ttseval.core.errors import DatasetError
from ttseval.core.ids import digest

# re-exported: ttseval.tasks.generate_instructions and the generate_instructions flow read them from here
from ttseval.core.instructtts import CATEGORY as CATEGORY
from ttseval.core.instructtts import FEATURES as FEATURES
from ttseval.core.instructtts import TASKS as TASKS
from ttseval.core.languages import is_known_language
from ttseval.core.paths import resolve_against
from ttseval.corpus.items import read_jsonl_numbered

CAPTION_PROMPT_VERSION = "caption-v1"
APS_RENDER_VERSION = "aps-v1"
DSD_PROMPT_VERSION = "dsd-v1"
RP_PROMPT_VERSION = "rp-v1"

METHODS = {"APS": "caption", "DSD": "dsd", "RP": "rp"}
BENCHMARK = "ttseval-instructions (InstructTTSEval-style, caption-v1/dsd-v1/rp-v1)"
N_INSTRUCTIONS = 3

LABELS = {
    "gender": "Gender",
    "pitch": "Pitch",
    "speed": "Speed",
    "volume": "Volume",
    "age": "Age",
    "clarity": "Clarity",
    "fluency": "Fluency",
    "accent": "Accent",
    "texture": "Texture",
    "emotion": "Emotion",
    "tone": "Tone",
    "personality": "Personality",
}

# What each feature covers, in ttseval's words (guidance for the captioning model).
FEATURE_GUIDE = {
    "gender": "the gender the voice presents as",
    "pitch": "how high or low the voice sits, relative to typical voices of that gender, and how it moves",
    "speed": "speaking rate and rhythm, including speeding up, slowing down or distinctive pausing",
    "volume": "loudness and its changes, anywhere from a whisper to shouting",
    "age": "the apparent life stage (child, teenager, young adult, middle-aged, elderly); a broad stage if unsure",
    "clarity": "how crisply sounds are articulated, from precise to mumbled or slurred",
    "fluency": "how smoothly the speech flows: hesitations, restarts, repeated words, fillers",
    "accent": "the regional or non-native pronunciation, as specific as the evidence allows "
    "(otherwise a broad variety such as American English or Mandarin Chinese)",
    "texture": "the timbre: e.g. breathy, raspy, warm, bright, nasal, velvety, thin, resonant",
    "emotion": "the feelings expressed and how they shift within the clip",
    "tone": "the attitude carried by the delivery: e.g. formal, ironic, eager, aloof, pleading",
    "personality": "stable traits the voice suggests (e.g. outgoing, reserved, self-assured, nervous); "
    "only those clearly audible",
}


@dataclass(frozen=True)
class Reference:
    """One reference clip of the references manifest: its id, WAV file, transcript (the text to speak) and
    language tag; `line` is its line in the manifest."""

    ref_id: str
    audio: Path
    text: str
    language: str
    line: int = 0


# -- the caption ----------------------------------------------------------------------------------------------
class Caption(BaseModel):
    """A reference clip described along the 12 features, each a short phrase (InstructTTSEval Fig. 3's JSON)."""

    model_config = ConfigDict(extra="ignore")

    gender: str
    pitch: str
    speed: str
    volume: str
    age: str
    clarity: str
    fluency: str
    accent: str
    texture: str
    emotion: str
    tone: str
    personality: str

    @field_validator(*FEATURES, mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        # A model sometimes answers a feature with null or a list of phrases; keep what it said as one phrase.
        if v is None:
            return ""
        if isinstance(v, list):
            return "; ".join(str(x) for x in v if x is not None)
        return v

    def described(self) -> dict[str, str]:
        """The features with a non-empty description, in FEATURES order, whitespace-trimmed."""
        return {f: " ".join(getattr(self, f).split()) for f in FEATURES if getattr(self, f).strip()}

    def to_json(self) -> str:
        return json.dumps({f: getattr(self, f) for f in FEATURES}, ensure_ascii=False)


def caption_prompt() -> str:
    guide = "\n".join(f"- {f}: {FEATURE_GUIDE[f]}" for f in FEATURES)
    keys = ", ".join(f'"{f}": "..."' for f in FEATURES)
    return (
        "You are an expert in voice and prosody. Listen to the attached recording and describe how the person "
        "speaks (not what they say), so that a voice actor could reproduce the delivery.\n\n"
        f"Describe these 12 characteristics:\n{guide}\n\n"
        "How to write each description:\n"
        "- a short phrase of a few words up to one clause; neither a single word nor a long sentence\n"
        "- say how the characteristic changes over the clip when it does (e.g. rising to a shout at the end, "
        "trailing off into a murmur); you may point to a moment by what is being said, in your own words, "
        "never by quoting the speech\n"
        "- keep pitch, speed and volume apart and be specific about each; do not fall back on vague middle "
        "words such as 'moderate', 'average' or 'normal'\n"
        "- vary your vocabulary; do not copy the examples above\n"
        "- write in English, whatever language is spoken\n\n"
        f"Answer with one JSON object only, with exactly these keys: {{{keys}}}"
    )


# -- APS: the caption as the instruction ------------------------------------------------------------------------
def _sentence(value: str) -> str:
    value = " ".join(value.split())
    return value if value.endswith((".", "!", "?")) else value + "."


def render_aps(caption: Caption) -> str:
    """The APS instruction: every described feature as 'Label: description.', in FEATURES order.

    InstructTTSEval uses the caption itself as the APS instruction; rendering its JSON as labelled phrases keeps
    every value verbatim and reads as plain text for TTS systems that take a free-text instruction."""
    return " ".join(f"{LABELS[f]}: {_sentence(v)}" for f, v in caption.described().items())


# -- DSD: feature dropout (InstructTTSEval appendix B, Table 8) ---------------------------------------------------
@dataclass(frozen=True)
class DropoutSet:
    """One of Table 8's weight settings: the chance of drawing it and each feature's chance to be KEPT."""

    number: int
    prob: float
    keep: dict[str, float]


def _keep(low: float, mid: float, high: float) -> dict[str, float]:
    groups = {
        "gender": low,
        "pitch": low,
        "speed": low,
        "volume": low,
        "clarity": low,
        "fluency": low,
        "age": mid,
        "accent": mid,
        "texture": mid,
        "emotion": high,
        "tone": high,
        "personality": high,
    }
    return {f: groups[f] for f in FEATURES}


DROPOUT_SETS: tuple[DropoutSet, ...] = (
    DropoutSet(1, 0.50, _keep(1.0, 1.0, 1.0)),
    DropoutSet(2, 0.25, _keep(0.5, 0.8, 1.0)),
    DropoutSet(3, 0.25, _keep(0.5, 0.5, 0.8)),
)
"""InstructTTSEval Table 8 ('Weights'), exactly: set probabilities 0.5 / 0.25 / 0.25; per-feature keep
probabilities set 1 all 1.0; set 2 gender, pitch, speed, volume, clarity, fluency 0.5, age, accent, texture 0.8,
emotion, tone, personality 1.0; set 3 the same six 0.5, age, accent, texture 0.5, emotion, tone, personality 0.8."""

MAX_DROPOUT_REDRAWS = 100


def dropout_rng(seed: int, ref_id: str) -> random.Random:
    """The generator of one reference's dropout draw: the same seed and reference draw the same features."""
    return random.Random(int(digest([seed, ref_id, "dsd-dropout"], length=16), 16))


def dropout(caption_keys: Any, rng: random.Random) -> tuple[int, tuple[str, ...]]:
    """(dropout set number 1-3, the kept features in FEATURES order) for one reference.

    Draws a set by Table 8's probabilities, then keeps each feature independently with the set's keep
    probability. All 12 decisions are drawn whatever `caption_keys` holds, so a feature's fate does not depend
    on which other features the caption described; features not in `caption_keys` are never kept. The paper
    does not say what happens when nothing survives (possible only in set 3, about 1 in 60,000 draws): the
    decisions are drawn again within the same set, i.e. the kept set is conditioned on being non-empty.
    """
    available = set(caption_keys)
    u, acc = rng.random(), 0.0
    chosen = DROPOUT_SETS[-1]
    for s in DROPOUT_SETS:
        acc += s.prob
        if u < acc:
            chosen = s
            break
    kept: tuple[str, ...] = ()
    for _ in range(MAX_DROPOUT_REDRAWS):
        draws = {f: rng.random() for f in FEATURES}
        kept = tuple(f for f in FEATURES if f in available and draws[f] < chosen.keep[f])
        if kept or not available:
            break
    return chosen.number, kept


# -- DSD and RP prompts ---------------------------------------------------------------------------------------
class InstructionsAnswer(BaseModel):
    """DSD answer: three alternative instructions."""

    instructions: list[str] = Field(min_length=N_INSTRUCTIONS)


class RolePlayAnswer(BaseModel):
    """RP answer: the reasoning about personas and scenarios first, then three role-play instructions."""

    reasoning: str = Field(description="which speakers and situations fit the description, and why")
    instructions: list[str] = Field(min_length=N_INSTRUCTIONS)


def _feature_lines(features: dict[str, str]) -> str:
    return "\n".join(f"- {LABELS[f]}: {v}" for f, v in features.items())


def dsd_prompt(features: dict[str, str], language: str = "English") -> str:
    """Ask for three free-form style directives built only from `features` (the caption after dropout)."""
    n = len(features)
    use = "4 or 5 of the characteristics above" if n >= 5 else "all the characteristics above"
    return (
        "You write style directions for an expressive text-to-speech system: a sentence or two, the kind a "
        "person would type, telling it how the voice should sound.\n\n"
        f"Voice description ({n} characteristic{'s' if n != 1 else ''}):\n{_feature_lines(features)}\n\n"
        f"Write {N_INSTRUCTIONS} different directions from this description. Rules:\n"
        f"- each one weaves {use} into natural prose: no labels, no lists; give "
        "the most distinctive ones the most weight\n"
        "- say nothing about the voice that the description does not give: anything it leaves out stays "
        "unconstrained\n"
        "- keep changes over time that the description mentions (where the voice rises, slows, breaks off)\n"
        "- make the three clearly different from one another: other opening words, other sentence shapes, other "
        "wording and another mix of characteristics; no two may begin with the same word\n"
        "- address the voice directly and plainly; no 'imagine' or 'picture' set-ups, no dialogue, no questions, "
        "no quoting of the text to be spoken\n"
        "- keep any phrase you take over from the description word for word\n"
        f"- write in {language}\n\n"
        'Answer with JSON only: {"instructions": ["...", "...", "..."]}'
    )


def rp_prompt(features: dict[str, str], language: str = "English") -> str:
    """Ask for reasoning about plausible speakers and situations, then three role-play directions."""
    return (
        "You write role-play directions for an expressive text-to-speech system: instead of describing the "
        "voice, each one casts the system as a character in a situation, and the system has to work out how "
        "that character would sound.\n\n"
        f"The voice to aim for:\n{_feature_lines(features)}\n\n"
        "Step 1, in `reasoning`: work out who could plausibly sound like this and in what situation. Go through "
        "the characteristics and say what each suggests about the speaker (age and role, occupation or kind of "
        "character, relationship to the listener) and about the moment (place, stakes, what just happened). "
        "Stay grounded in the description; invent nothing it contradicts. Keep it brief.\n\n"
        f"Step 2, in `instructions`: write {N_INSTRUCTIONS} role-play directions. Rules:\n"
        "- each names a concrete character or scenario that fits the whole description (realistic roles or "
        "imaginative ones such as a weary sea captain or a mischievous robot are both fine)\n"
        "- describe who is speaking, to whom and why; at most one short hint of manner, and no acoustic "
        "parameters (no pitch, speed, volume or timbre wording): the role must carry the style\n"
        "- one or two sentences each, declarative, in the second person or as a scene description\n"
        "- three different characters or scenarios, each opening differently; no lines of dialogue, no quoting "
        "of the text to be spoken\n"
        f"- write in {language}\n\n"
        'Answer with JSON only: {"reasoning": "...", "instructions": ["...", "...", "..."]}'
    )


def pick_index(seed: int, ref_id: str, task: str, n: int = N_INSTRUCTIONS) -> int:
    """Which of the n alternatives becomes the item: a seeded hash of the reference and task, so re-runs agree.
    (The paper generates three per call and does not say how one is chosen.)"""
    return int(digest([seed, ref_id, task, "pick"], length=8), 16) % n


def alternatives_json(instructions: list[str], chosen: int) -> str:
    """What `diversity_aspect` holds for DSD and RP items: all alternatives and the index of the chosen one."""
    return json.dumps({"chosen": chosen, "instructions": instructions}, ensure_ascii=False)


# -- statistics -----------------------------------------------------------------------------------------------
def instruction_statistics(items: pd.DataFrame) -> pd.DataFrame:
    """Per task and overall: item count, then min / mean / max characters and words of the instruction and
    of the text to speak."""
    frame = pd.DataFrame(
        {
            "task": items["task"],
            "instruction_chars": items["instruction"].str.len(),
            "instruction_words": items["instruction"].str.split().str.len(),
            "text_chars": items["text"].str.len(),
            "text_words": items["text"].str.split().str.len(),
        }
    )
    rows = []
    order = [t for t in TASKS if t in set(frame["task"])] + sorted(set(frame["task"]) - set(TASKS))
    groups = [(t, frame[frame["task"] == t]) for t in order] + [("overall", frame)]
    for task, g in groups:
        row: dict[str, Any] = {"task": task, "n_items": len(g)}
        for col in ("instruction_chars", "instruction_words", "text_chars", "text_words"):
            row[f"{col}_min"], row[f"{col}_mean"], row[f"{col}_max"] = g[col].min(), g[col].mean(), g[col].max()
        rows.append(row)
    return pd.DataFrame(rows)


_REF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def read_references(path: str | Path) -> list[Reference]:
    """The references manifest, JSON Lines of {ref_id, audio, text, language}; `audio` is a WAV file, relative to
    the manifest's folder or absolute. Errors name the line, the field and the fix."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(
            f"references manifest {str(p)!r} does not exist; pass --references PATH to a .jsonl file "
            "with one {ref_id, audio, text, language} object per line",
            source=str(p),
        )
    rows = read_jsonl_numbered(p, p.read_text(encoding="utf-8"))
    refs: list[Reference] = []
    problems: list[str] = []
    seen: set[str | None] = set()
    for n, row in rows:
        before = len(problems)
        ref_id = row.get("ref_id")
        ref_id = str(ref_id) if isinstance(ref_id, (str, int)) and not isinstance(ref_id, bool) else None
        if not ref_id or not _REF_ID.fullmatch(ref_id):
            problems.append(
                f"line {n}: ref_id {row.get('ref_id')!r} is missing or not an id; use letters, digits, "
                "'.', '_' or '-' (it names the items <ref_id>-APS/-DSD/-RP)"
            )
        elif ref_id in seen:
            problems.append(f"line {n}: ref_id {ref_id!r} is used twice; give each reference its own id")
        seen.add(ref_id)
        audio = row.get("audio")
        wav: Path | None = None
        if not isinstance(audio, str) or not audio.strip():
            problems.append(
                f"line {n}: audio is missing; give the path of the reference WAV file (relative to "
                f"{p.parent} or absolute)"
            )
        else:
            wav = Path(resolve_against(p, os.path.expanduser(audio)))
            why = _wav_problem(wav)
            if why:
                problems.append(f"line {n}: audio {audio!r}: {why}")
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(
                f"line {n}: text is missing or empty; write the reference clip's transcript (the text "
                "to synthesize) in `text`"
            )
        language = row.get("language")
        if not isinstance(language, str) or not is_known_language(language.strip()):
            problems.append(
                f"line {n}: language {language!r} is not a known BCP-47 / ISO 639 tag; use one such as en-US or zh-CN"
            )
        # no problem on this line: each field passed its check above (the other tests only narrow the types)
        if (
            len(problems) == before
            and ref_id
            and wav is not None
            and isinstance(text, str)
            and isinstance(language, str)
        ):
            refs.append(Reference(ref_id, wav.resolve(), text.strip(), language.strip(), n))
    if problems:
        raise DatasetError(
            f"references manifest {p} has {len(problems)} problem(s):\n- " + "\n- ".join(problems),
            source=str(p),
            problems=problems,
        )
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
