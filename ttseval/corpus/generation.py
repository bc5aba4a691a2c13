"""Dataset generation as data and pure functions: the category set, the prompts, de-duplication, statistics.

EmergentTTS-Eval (section 3.1, appendix A) grows a benchmark in two directions: breadth expansion writes new
depth-0 items per category from human seeds, led by diversity criteria and held by structural constraints;
depth refinement rewrites each item N times, each step making it harder by one category-specific method. The
prompts here are ttseval's own (the paper's prompt texts are not reproduced); every prompt has a version, and
the rendered request's hash is stored with each item, so any item can be traced to the exact call that made it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from ttseval.core.errors import ConfigError, DatasetError
from ttseval.corpus import DEFAULT_CATEGORY_SPEC
from ttseval.corpus.items import read_jsonl_numbered

BREADTH_PROMPT_VERSION = "breadth-v1"
REFINE_PROMPT_VERSION = "refine-v1"
REPAIR_PROMPT_VERSION = "repair-v1"
TWISTER_PROMPT_VERSION = "twister-v1"


# -- the category set ------------------------------------------------------------------------------------------
class CategorySpec(BaseModel):
    """One category's generation rules (a [categories.<name>] table of the spec file)."""

    name: str
    description: str
    diversity: list[str] = Field(min_length=1)
    constraints: list[str] = Field(default_factory=list)
    subcategories: list[str] = Field(default_factory=list)
    refinement: list[str] = Field(min_length=1)
    refine_guidance: list[str] = Field(default_factory=list)
    grammar_repair: bool = False
    tongue_twisters: int = Field(0, ge=0)
    tongue_twister_repeats: int = Field(6, ge=1)
    min_chars: int = Field(1, ge=1)
    max_chars: int = Field(2000, ge=1)


class GenerationSpec(BaseModel):
    version: str
    language: str = "en"
    words_per_minute: float = Field(133.0, gt=0)
    categories: dict[str, CategorySpec]


def load_spec(path: str | Path | None = None) -> GenerationSpec:
    """Read a category-set TOML file (default: EmergentTTS-Eval's six); errors name the file and the field."""
    p = Path(path) if path else DEFAULT_CATEGORY_SPEC
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"category spec {p}: cannot read ({e}); pass --categories PATH to a TOML file") from e
    cats = raw.get("categories")
    if not isinstance(cats, dict) or not cats:
        raise ConfigError(
            f"category spec {p}: no [categories.<name>] tables; see {DEFAULT_CATEGORY_SPEC} for the format"
        )
    try:
        return GenerationSpec(**{**raw, "categories": {k: {"name": k, **v} for k, v in cats.items()}})
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"category spec {p}: {problems} (see {DEFAULT_CATEGORY_SPEC} for the format)") from e


# -- answer schemas -------------------------------------------------------------------------------------------
class NewItem(BaseModel):
    text: str
    diversity_aspect: str = ""
    subcategory: str | None = None


class BreadthAnswer(BaseModel):
    items: list[NewItem]


class RefineAnswer(BaseModel):
    tts_synthesis_diversity: str = Field("", description="why this refinement is harder to speak")
    text_to_synthesize: str


class RepairAnswer(BaseModel):
    text_to_synthesize: str


class TwisterAnswer(BaseModel):
    tongue_twisters: list[str]


# -- prompts --------------------------------------------------------------------------------------------------
def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else "- (none)"


@dataclass(frozen=True)
class BreadthCall:
    """One breadth-expansion request: `count` new items led by one diversity criterion."""

    category: str
    call: int
    count: int
    lead: str
    subcategories: tuple[str, ...] = ()


def plan_breadth(spec: CategorySpec, total: int, batch: int) -> list[BreadthCall]:
    """Split `total` new items into calls of at most `batch`; each call is led by the next diversity criterion and,
    where the category has subcategories, names the subcategory of each item so they spread evenly."""
    calls, made = [], 0
    for k in range((total + batch - 1) // batch):
        count = min(batch, total - made)
        subs = (
            tuple(spec.subcategories[(made + j) % len(spec.subcategories)] for j in range(count))
            if spec.subcategories
            else ()
        )
        calls.append(BreadthCall(spec.name, k, count, spec.diversity[k % len(spec.diversity)], subs))
        made += count
    return calls


def breadth_prompt(spec: CategorySpec, call: BreadthCall, seeds: list[str], language: str) -> str:
    sub = ""
    if call.subcategories:
        sub = "\nWrite them in this order of subcategory (put each in `subcategory`):\n" + _bullets(
            list(call.subcategories)
        )
    return (
        "You write test sentences for evaluating text-to-speech systems.\n\n"
        f"Category: {spec.name}. {spec.description}\n\n"
        f"Examples written by people:\n{_bullets(seeds)}\n\n"
        f"Write {call.count} new, different items in language '{language}'. Above all, vary them along this "
        f"criterion: {call.lead}.\nAlso spread them over:\n{_bullets(spec.diversity)}\n\n"
        f"Every item must obey:\n{_bullets(spec.constraints)}\n"
        "- it is not a copy or a light rewording of an example or of another item\n"
        "- it is meant to be read aloud: no markdown, no numbering, no speaker labels" + sub + "\n\n"
        'Answer with JSON only: {"items": [{"text": "...", "diversity_aspect": "which criterion it covers", '
        '"subcategory": null}]}'
    )


def refine_prompt(spec: CategorySpec, text: str, method: str, depth: int) -> str:
    return (
        "You make text-to-speech test items harder, one step at a time.\n\n"
        f"Category: {spec.name}. {spec.description}\n\n"
        f"Current item (refinement step {depth - 1}):\n<<<\n{text}\n>>>\n\n"
        f"Rewrite it once, by this method: {method}.\n"
        f"Rules:\n{_bullets(spec.refine_guidance)}\n"
        "- the result is clearly harder to speak well than the current item, for the reason the category names\n"
        "- keep the language of the item; no markdown\n\n"
        "First explain in `tts_synthesis_diversity` what makes your rewrite harder for a TTS system, then give "
        'the rewrite. Answer with JSON only: {"tts_synthesis_diversity": "...", "text_to_synthesize": "..."}'
    )


REPAIR_SYSTEM = (
    "You are a careful copy editor of code-switched English. Fix grammatical and syntactic awkwardness in the "
    "text you are given so that it reads naturally, changing as little as possible. Keep every foreign word or "
    "phrase, in plain Latin letters, and keep the meaning. Answer with JSON only: "
    '{"text_to_synthesize": "..."}'
)


def twister_prompt(spec: CategorySpec, count: int, language: str) -> str:
    return (
        f"Category: {spec.name}. {spec.description}\n\n"
        f"Write {count} short, different tongue twisters in language '{language}' for testing text-to-speech "
        "pronunciation: each one sentence of at most 12 words, dense with similar sounds, original (not a "
        'well-known one). Answer with JSON only: {"tongue_twisters": ["...", "..."]}'
    )


def repeat_twister(text: str, times: int) -> str:
    """The tongue-twister rule: a short twister is said `times` times in a row (EmergentTTS-Eval repeats
    'The Sixth Sick Sheikh's Sixth Sheep's Sick' six times), because slips cascade under repetition."""
    sentence = text.strip()
    if not sentence.endswith((".", "!", "?")):
        sentence += "."
    return " ".join([sentence] * times)


def pick_method(spec: CategorySpec, root_id: str, depth: int, seed: int) -> str:
    """The refinement method for one step: seeded by item and depth, so a re-run picks the same one."""
    from ttseval.core.ids import digest

    return spec.refinement[int(digest([seed, root_id, depth], length=8), 16) % len(spec.refinement)]


# -- de-duplication -------------------------------------------------------------------------------------------
_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


def dedupe_key(text: str) -> str:
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


def near_duplicates(texts: list[str], lineages: list[str], *, threshold: float) -> list[tuple[int, float] | None]:
    """For each text, (index of an earlier near-duplicate, similarity 0-100) or None.

    Similarity is rapidfuzz's normalised Indel ratio of the normalised texts. Items of one lineage are not
    compared, because a refinement contains its parent by design; `lineages[i]` names item i's root.
    """
    from rapidfuzz import fuzz, process

    keys = [dedupe_key(t) for t in texts]
    if not keys:
        return []
    scores = process.cdist(keys, keys, scorer=fuzz.ratio, workers=1)
    found: list[tuple[int, float] | None] = []
    for i in range(len(keys)):
        best = None
        for j in range(i):
            if lineages[j] == lineages[i]:
                continue
            if scores[i][j] >= threshold and (best is None or scores[i][j] > best[1]):
                best = (j, float(scores[i][j]))
        found.append(best)
    return found


# -- statistics (EmergentTTS-Eval appendix A.7, Table 4) ----------------------------------------------------------
def dataset_statistics(items: pd.DataFrame, *, words_per_minute: float) -> pd.DataFrame:
    """Per category and overall: item count, then min / mean / max of characters, words and estimated seconds.

    Seconds are estimated as words / (words_per_minute / 60); the paper's figures are measured on audio, and its
    overall means (33.93 words, 15.32 s) correspond to about 133 words per minute.
    """
    frame = pd.DataFrame(
        {
            "category": items["category"],
            "chars": items["text"].str.len(),
            "words": items["text"].str.split().str.len(),
        }
    )
    frame["est_audio_s"] = frame["words"] / (words_per_minute / 60.0)
    rows = []
    groups = [(c, g) for c, g in frame.groupby("category", sort=True)] + [("overall", frame)]
    for category, g in groups:
        row: dict[str, Any] = {"category": category, "n_items": len(g)}
        for col in ("chars", "words", "est_audio_s"):
            row[f"{col}_min"], row[f"{col}_mean"], row[f"{col}_max"] = g[col].min(), g[col].mean(), g[col].max()
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class Seed:
    seed_id: str
    category: str
    text: str
    subcategory: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


SEED_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
GENERATED_ID = re.compile(r"^(b\d+-\d+|tt\d+)$|-d\d+$")


def read_seeds(path: str | Path, spec: GenerationSpec) -> list[Seed]:
    """Seed items from JSON Lines (category, text; optional seed_id, subcategory); errors name the line and fix."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"seed file {str(p)!r} does not exist; pass --seeds PATH to a .jsonl file", source=str(p))
    rows = read_jsonl_numbered(p, p.read_text(encoding="utf-8"))
    seeds, problems, seen = [], [], set()
    for n, row in rows:
        category, text = row.get("category"), row.get("text")
        if not isinstance(category, str) or category not in spec.categories:
            problems.append(
                f"line {n}: category {category!r} is not in the category set; use one of "
                f"{', '.join(spec.categories)} or add it to the --categories file"
            )
        if not isinstance(text, str) or not text.strip():
            problems.append(f"line {n}: text is missing or empty; write the seed sentence in `text`")
        seed_id = str(row.get("seed_id") or f"s{n}")
        if seed_id in seen:
            problems.append(f"line {n}: seed_id {seed_id!r} is used twice; give each seed its own id")
        if GENERATED_ID.match(seed_id):
            problems.append(
                f"line {n}: seed_id {seed_id!r} looks like a generated item's id (b<k>-<j>, tt<j>, "
                "...-d<depth>); choose another"
            )
        elif not SEED_ID.match(seed_id):
            problems.append(f"line {n}: seed_id {seed_id!r}: use letters, digits, '.', '_' or '-'")
        seen.add(seed_id)
        # no problem so far: category and text passed their checks above (the tests here only narrow the types)
        if not problems and isinstance(category, str) and isinstance(text, str):
            seeds.append(Seed(seed_id, category, text.strip(), row.get("subcategory")))
    if problems:
        raise DatasetError(
            f"seed file {p} has {len(problems)} problem(s):\n- " + "\n- ".join(problems),
            source=str(p),
            problems=problems,
        )
    if not rows:
        raise DatasetError(f"seed file {p} has no seeds", source=str(p))
    return seeds
