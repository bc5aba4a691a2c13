"""Importers for published benchmark files: EmergentTTS-Eval, InstructTTSEval and Seed-TTS-eval, as items frames.

Each importer reads the benchmark's file as distributed (.jsonl / .json / .parquet / .csv) and returns a
pandas DataFrame with the items schema's columns (ttseval.core.schemas.ITEMS, `task` included), ready for
ttseval.corpus.items.validate_items. Problems are collected and raised together as one DatasetError whose
message names each row (1-based, as in ttseval.corpus.items) and the offending value. `import_items_file`
writes a checked items file (and the `files` manifest of clips made elsewhere): `ttseval import-dataset`.

Where the field names come from (read, not guessed):

Seed-TTS-eval (BytedanceSpeech/seed-tts-eval; the test set seedtts_testset/{en,zh}/meta.lst with prompt-wavs/):
  - its README and the evaluation scripts that read meta.lst (e.g. F5-TTS's get_seedtts_testset_metainfo): a
    line is `utt|prompt_text|prompt_wav|infer_text`, or `utt|prompt_text|prompt_wav|gt_text|gt_wav` in the lists
    that carry ground-truth recordings; prompt_wav and gt_wav are relative to meta.lst's folder unless absolute.
  - a system's clips are `<utt>.wav` in one folder (the `files` provider's dir=PATH finds them by item id).

EmergentTTS-Eval (Hugging Face `bosonai/EmergentTTS-Eval`, split "train"):
  - boson-ai/EmergentTTS-Eval-public, download_data.py: reads the HF rows' `category`,
    `text_to_synthesize`, `evolution_depth`, `language` and `audio` (the baseline system's clip, an HF Audio
    feature) and writes data/emergent_tts_eval_data.jsonl with the first four fields; clip i is saved as
    baseline_audios/{i}.wav.
  - boson-ai/EmergentTTS-Eval-public, utils_eval.py: UNIQUE_KEY_NAME = "unique_id_eval", assigned by
    add_unique_id_to_samples as the row's 0-based position (and asserted equal to it when present).
  - boson-ai/EmergentTTS-Eval-public, evaluation_runner.py (--categories_to_evaluate default) and prompts.py:
    the category values are "Emotions", "Paralinguistics", "Syntactic Complexity", "Foreign Words",
    "Questions" and "Pronunciation" (not "Complex Pronunciation"; both are accepted here).
  - inference.py: language is "en" for the whole set.
  The format carries no lineage (no parent column), so parent_id is null. The `audio` column is a baseline
  TTS output, not a reference recording, so it is not an item field. Item ids are "ette-<unique_id_eval>", or
  "ette-<row position>" when the file has no unique_id_eval (the same number the public code assigns).
  - The baseline clips (baseline_audios/<row position>.wav) are the paper's baseline system, gpt-4o-mini-tts
    with voice Alloy (EMERGENTTTS_BASELINE_*): `emergenttts_baseline_manifest` lists them for the `files`
    TTS provider (providers/tts/files.py), so the baseline is judged without being synthesized again.

InstructTTSEval (Hugging Face `CaasiHUANG/InstructTTSEval`, splits "en" and "zh", files {split}.parquet):
  - KexinHUANG19/InstructTTSEval, eval/README.md: rows are {"id", "text", "APS", "DSD", "RP"}, each task
    field an object {"instruction", "gen_path"} in the evaluation JSONL (gen_path is the clip a system made for
    that instruction: `instructttseval_generated_manifest` lists those clips for the `files` TTS provider).
  - Loaders of the HF parquet (e.g. a Step-Audio-2 InstructTTSEval client that reads `{split}.parquet` and
    keeps `id`, `text`, `APS`, `DSD`, `RP`) show the task fields there as plain instruction strings; ids look
    like "en_3" / "zh_12". The reference recording is an embedded HF Audio feature ({"bytes", "path"}).
  Embedded audio bytes are not written out: reference_audio_uri stays null for them. A reference given as a
  file path (a string column, or an audio struct with a path and no bytes) is kept; relative paths are
  resolved against the dataset file's folder. The exact name of the audio column in the HF parquet was not
  confirmed from source; any of REFERENCE_AUDIO_FIELDS is read.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ttseval.core.categories import EMERGENTTTS_CATEGORIES, MAX_DEPTH, canonical_category
from ttseval.core.errors import DatasetError, SpecError
from ttseval.core.instructtts import CATEGORY as INSTRUCT_CATEGORY
from ttseval.core.instructtts import TASKS
from ttseval.core.paths import resolve_against
from ttseval.core.schemas import ITEMS
from ttseval.corpus.items import read_jsonl_rows, validate_items

COLUMNS: list[str] = list(ITEMS.names) + ([] if "task" in ITEMS.names else ["task"])

# --- EmergentTTS-Eval ---------------------------------------------------------------------------------------

EMERGENTTTS_BENCHMARK = "emergenttts-eval"
EMERGENTTTS_SOURCE = "bosonai/EmergentTTS-Eval"
EMERGENTTTS_ID_PREFIX = "ette-"
EMERGENTTTS_DEFAULT_LANGUAGE = "en-US"
EMERGENTTTS_REQUIRED = ("category", "text_to_synthesize", "evolution_depth")

# --- InstructTTSEval ----------------------------------------------------------------------------------------

INSTRUCTTTSEVAL_BENCHMARK = "instructttseval"
INSTRUCTTTSEVAL_SOURCE = "CaasiHUANG/InstructTTSEval"
REFERENCE_AUDIO_FIELDS = (
    "reference_audio",
    "ref_audio",
    "reference_audio_path",
    "ref_audio_path",
    "reference_wav",
    "audio",
    "audio_path",
    "wav_path",
)
LANGUAGE_FIELDS = ("language", "lang", "split")
_SPLIT_LANGUAGES = {"en": "en-US", "english": "en-US", "zh": "zh-CN", "cn": "zh-CN", "chinese": "zh-CN"}

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".csv")

# --- audio made elsewhere (the `files` TTS provider) ------------------------------------------------------------

EMERGENTTTS_BASELINE_MODEL = "gpt-4o-mini-tts"  # the paper's baseline system: OpenAI gpt-4o-mini-tts ...
EMERGENTTTS_BASELINE_VOICE = "alloy"  # ... with voice Alloy
EMERGENTTTS_BASELINE_LABEL = f"{EMERGENTTTS_BASELINE_MODEL}-{EMERGENTTTS_BASELINE_VOICE}"
EMERGENTTTS_BASELINE_CLIP = "{index}.wav"  # download_data.py: baseline_audios/<row position>.wav
INSTRUCTTTSEVAL_GENERATED_LABEL = "instructttseval-gen"


# --- reading ------------------------------------------------------------------------------------------------


def _blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _compact(value: Any) -> Any:
    """Replace embedded audio bytes with a flag, so a large parquet is not held in memory as bytes."""
    if isinstance(value, dict) and "bytes" in value:
        return {**value, "bytes": bool(value["bytes"])}
    return value


def _read_jsonl(p: Path, text: str) -> list[dict[str, Any]]:
    return [{k: _compact(v) for k, v in row.items()} for row in read_jsonl_rows(p, text)]


def _read_records(path: str | Path) -> list[dict[str, Any]]:
    """The file's rows as dicts, in file order; raises DatasetError for a missing or unparseable file."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(
            f"dataset {str(p)!r} does not exist; pass the path of a {', '.join(SUFFIXES)} file", source=str(p)
        )
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        raise DatasetError(
            f"dataset {p}: unknown extension {suffix!r}; use one of {', '.join(SUFFIXES)}", source=str(p)
        )
    try:
        if suffix in (".jsonl", ".ndjson"):
            return _read_jsonl(p, p.read_text(encoding="utf-8"))
        if suffix == ".json":
            text = p.read_text(encoding="utf-8")
            try:
                whole = json.loads(text)
            except json.JSONDecodeError:
                return _read_jsonl(p, text)  # HF `Dataset.to_json` writes JSON Lines, whatever the name
            if isinstance(whole, dict):
                whole = [whole]
            if not isinstance(whole, list) or not all(isinstance(r, dict) for r in whole):
                raise DatasetError(f"dataset {p}: expected a JSON array of objects or JSON Lines", source=str(p))
            return [{k: _compact(v) for k, v in r.items()} for r in whole]
        if suffix == ".csv":
            with p.open(encoding="utf-8") as f:
                header = f.readline()
            sep = "|" if header.count("|") > header.count(",") else ","
            frame = pd.read_csv(p, sep=sep, dtype=str, keep_default_na=False)
            return [{k: (None if v == "" else v) for k, v in r.items()} for r in frame.to_dict("records")]
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = []
        for batch in pq.ParquetFile(p).iter_batches(batch_size=256):
            rows.extend({k: _compact(v) for k, v in r.items()} for r in batch.to_pylist())
        return rows
    except DatasetError:
        raise
    except (UnicodeDecodeError, OSError, ValueError, pd.errors.ParserError) as e:
        raise DatasetError(f"dataset {p}: cannot parse as {suffix} ({e})", source=str(p)) from e


def _columns(rows: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for r in rows:
        found.update(r)
    return found


def _require(p: Path, rows: list[dict[str, Any]], required: tuple[str, ...], fmt: str) -> None:
    if not rows:
        raise DatasetError(f"dataset {p} has no rows", source=str(p))
    found = _columns(rows)
    missing = [c for c in required if c not in found]
    if missing:
        raise DatasetError(
            f"dataset {p} is not in the {fmt} format: missing field(s) {', '.join(missing)}; "
            f"fields found: {', '.join(sorted(found)) or 'none'}",
            source=str(p),
            problems=[f"missing field {c}" for c in missing],
        )


def _raise_problems(p: Path, fmt: str, problems: list[str]) -> None:
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise DatasetError(
            f"dataset {p} ({fmt}): {len(problems)} problem(s):\n- " + "\n- ".join(shown),
            source=str(p),
            problems=problems,
        )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _id_text(value: Any) -> str:
    number = _as_int(value)
    return str(number) if number is not None and not isinstance(value, str) else str(value).strip()


def _frame(rows: list[dict[str, Any]], p: Path, fmt: str) -> pd.DataFrame:
    seen: dict[str, int] = {}
    problems = []
    for number, row in enumerate(rows, start=1):
        first = seen.setdefault(row["item_id"], number)
        if first != number:
            problems.append(f"row {number}: item_id {row['item_id']!r} repeats row {first}")
    _raise_problems(p, fmt, problems)
    frame = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows], columns=COLUMNS, dtype=object)
    frame["depth"] = frame["depth"].astype(int)
    return frame


# --- EmergentTTS-Eval ---------------------------------------------------------------------------------------


def import_emergenttts(path: str | Path) -> pd.DataFrame:
    """EmergentTTS-Eval rows (HF export or the public repo's emergent_tts_eval_data.jsonl) as items."""

    p = Path(path)
    fmt = "EmergentTTS-Eval"
    records = _read_records(p)
    _require(p, records, EMERGENTTTS_REQUIRED, fmt)
    rows, problems = [], []
    for index, rec in enumerate(records):
        number = index + 1
        raw_id = rec.get("unique_id_eval")
        item_id = EMERGENTTTS_ID_PREFIX + (str(index) if _blank(raw_id) else _id_text(raw_id))
        where = f"row {number} (item_id={item_id!r})"

        raw_category = rec.get("category")
        category = None
        if not _blank(raw_category) and isinstance(raw_category, str):
            category = canonical_category(raw_category)
        if category not in EMERGENTTTS_CATEGORIES:
            category = None
            problems.append(
                f"{where}: unknown category {raw_category!r}; EmergentTTS-Eval categories are "
                "Emotions, Paralinguistics, Foreign Words, Syntactic Complexity, Pronunciation "
                "(or Complex Pronunciation), Questions"
            )

        depth = _as_int(rec.get("evolution_depth"))
        if depth is None or not 0 <= depth <= MAX_DEPTH:
            problems.append(
                f"{where}: evolution_depth {rec.get('evolution_depth')!r} is not a whole number 0-{MAX_DEPTH}"
            )

        text = rec.get("text_to_synthesize")
        if _blank(text) or not isinstance(text, str):
            problems.append(f"{where}: text_to_synthesize is empty or not text ({text!r})")

        language = rec.get("language")
        if _blank(language):
            language = EMERGENTTTS_DEFAULT_LANGUAGE
        elif not isinstance(language, str):
            problems.append(f"{where}: language {language!r} is not text")
        else:
            language = language.strip()

        rows.append(
            {
                "item_id": item_id,
                "benchmark": EMERGENTTTS_BENCHMARK,
                "category": category,
                "depth": depth if depth is not None else 0,
                "parent_id": None,
                "language": language,
                "text": text,
                "instruction": None,
                "task": None,
                "reference_audio_uri": None,
                "source": EMERGENTTTS_SOURCE,
                "generator": None,
            }
        )
    _raise_problems(p, fmt, problems)
    return _frame(rows, p, fmt)


# --- InstructTTSEval ----------------------------------------------------------------------------------------


def _language_tag(value: Any) -> str | None:
    """'en' / 'zh' (split names) -> 'en-US' / 'zh-CN'; another valid BCP-47 tag is kept as given."""
    from ttseval.core.languages import is_known_language

    if _blank(value) or not isinstance(value, str):
        return None
    tag = value.strip()
    mapped = _SPLIT_LANGUAGES.get(tag.lower())
    if mapped:
        return mapped
    return tag if is_known_language(tag) else None


def _language_from_name(p: Path) -> str | None:
    for token in re.split(r"[^A-Za-z]+", p.stem.lower()):
        if token in ("en", "zh"):
            return _SPLIT_LANGUAGES[token]
    return None


def _reference_uri(rec: dict[str, Any], base: Path) -> str | None:
    for name in REFERENCE_AUDIO_FIELDS:
        value = rec.get(name)
        if _blank(value):
            continue
        if isinstance(value, dict):
            if value.get("bytes"):
                return None  # embedded in the file: nothing on disk to point at
            value = value.get("path")
            if _blank(value):
                continue
        if not isinstance(value, str):
            continue
        return resolve_against(base, value, base_is_folder=True)
    return None


def _instruction(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("instruction")
    if _blank(value) or not isinstance(value, str):
        return None
    return value


def import_instructttseval(path: str | Path, *, language: str | None = None) -> pd.DataFrame:
    """InstructTTSEval rows as items: one item per (example, task) with task APS, DSD or RP.

    Language, first found: the `language` argument (a split name 'en' / 'zh' or a BCP-47 tag), a
    language / lang / split field, the id's prefix ('en_3'), an 'en' / 'zh' token in the file name.
    """
    p = Path(path)
    fmt = "InstructTTSEval"
    forced = None
    if language is not None:
        forced = _language_tag(language)
        if forced is None:
            raise ValueError(f"language {language!r} is not a split name (en, zh) or a known BCP-47 tag")
    records = _read_records(p)
    _require(p, records, ("id", "text"), fmt)
    if not set(TASKS) & _columns(records):
        raise DatasetError(
            f"dataset {p} is not in the {fmt} format: none of the task fields {', '.join(TASKS)} is present",
            source=str(p),
        )
    from_name = _language_from_name(p)
    base = p.resolve().parent
    rows, problems = [], []
    for index, rec in enumerate(records):
        number = index + 1
        raw_id = rec.get("id")
        if _blank(raw_id):
            problems.append(f"row {number}: id is empty")
            continue
        example_id = _id_text(raw_id)
        where = f"row {number} (id={example_id!r})"

        text = rec.get("text")
        if _blank(text) or not isinstance(text, str):
            problems.append(f"{where}: text is empty or not text ({text!r})")

        tag = forced
        if tag is None:
            for field in LANGUAGE_FIELDS:
                if not _blank(rec.get(field)):
                    tag = _language_tag(rec[field])
                    if tag is None:
                        problems.append(f"{where}: {field} {rec[field]!r} is not en, zh or a known BCP-47 tag")
                    break
            else:
                prefix = re.match(r"(en|zh)(?=[_\-]|$)", example_id.lower())
                tag = _SPLIT_LANGUAGES[prefix.group(1)] if prefix else from_name
                if tag is None:
                    problems.append(
                        f"{where}: cannot tell the language (no language field, no en_/zh_ id "
                        "prefix, no en/zh in the file name); pass language='en' or 'zh'"
                    )

        reference = _reference_uri(rec, base)
        tasks = [(task, _instruction(rec.get(task))) for task in TASKS]
        tasks = [(task, text_) for task, text_ in tasks if text_ is not None]
        if not tasks:
            problems.append(f"{where}: no APS, DSD or RP instruction")
        for task, instruction in tasks:
            rows.append(
                {
                    "item_id": f"{example_id}-{task.lower()}",
                    "benchmark": INSTRUCTTTSEVAL_BENCHMARK,
                    "category": INSTRUCT_CATEGORY,
                    "depth": 0,
                    "parent_id": None,
                    "language": tag,
                    "text": text,
                    "instruction": instruction,
                    "task": task,
                    "reference_audio_uri": reference,
                    "source": INSTRUCTTTSEVAL_SOURCE,
                    "generator": None,
                }
            )
    _raise_problems(p, fmt, problems)
    return _frame(rows, p, fmt)


# --- audio made elsewhere -----------------------------------------------------------------------------------


def files_spec(label: str, manifest: str | Path) -> str:
    """The system spec of the `files` provider reading `manifest` under the system name `label`."""
    if not label or re.search(r"[:,\s]", label):
        raise ValueError(
            f"system name {label!r} cannot be a spec label: use letters, digits, '-', '_' or '.' "
            "(no ':', ',' or spaces)"
        )
    return f"files:{label}:manifest={Path(manifest).resolve()}"


def write_manifest(rows: list[dict[str, str]], path: str | Path) -> Path:
    """Write a `files` manifest: JSON Lines with item_id and path, one clip per item."""
    p = Path(path)
    p.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "path": r["path"]}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )
    return p


def emergenttts_baseline_manifest(
    path: str | Path, items: pd.DataFrame, baseline_audios: str | Path
) -> list[dict[str, str]]:
    """Manifest rows (item_id, path) of the baseline clips of an imported EmergentTTS-Eval file.

    `items` is `import_emergenttts(path)` (one item per row, in file order); clip i is
    `<baseline_audios>/<i>.wav`, as the release's download script writes them. Every item is listed, a missing
    clip too (the run records a failed, retryable row for it).

    Raises:
        DatasetError: baseline_audios is not a folder, or holds none of the clips.
    """
    folder = Path(baseline_audios)
    if not folder.is_dir():
        raise DatasetError(
            f"--baseline-audios {str(folder)!r} is not an existing folder; pass the baseline_audios "
            "folder that EmergentTTS-Eval's download_data.py writes (clips 0.wav, 1.wav, ...)",
            source=str(path),
        )
    folder = folder.resolve()
    rows = [
        {"item_id": str(item_id), "path": str(folder / EMERGENTTTS_BASELINE_CLIP.format(index=index))}
        for index, item_id in enumerate(items["item_id"])
    ]
    if rows and not any(Path(r["path"]).is_file() for r in rows):
        raise DatasetError(
            f"--baseline-audios {str(folder)!r} holds none of the {len(rows)} clips "
            f"({EMERGENTTTS_BASELINE_CLIP.format(index=0)} ... "
            f"{EMERGENTTTS_BASELINE_CLIP.format(index=len(rows) - 1)}); pass the baseline_audios "
            f"folder written for this file ({path})",
            source=str(path),
        )
    return rows


def instructttseval_generated_manifest(path: str | Path) -> list[dict[str, str]]:
    """Manifest rows of the clips an InstructTTSEval evaluation file names (each task's `gen_path`), keyed by the
    item ids `import_instructttseval` gives ('<id>-aps', ...); relative paths are resolved against the file's
    folder. Empty when the file names no clips (the HF parquet)."""
    p = Path(path)
    base = p.resolve().parent
    rows = []
    for rec in _read_records(p):
        if _blank(rec.get("id")):
            continue
        example_id = _id_text(rec["id"])
        for task in TASKS:
            value = rec.get(task)
            gen = value.get("gen_path") if isinstance(value, dict) else None
            if _blank(gen) or not isinstance(gen, str) or _instruction(value) is None:
                continue
            rows.append(
                {"item_id": f"{example_id}-{task.lower()}", "path": resolve_against(base, gen, base_is_folder=True)}
            )
    return rows


# --- Seed-TTS-eval ------------------------------------------------------------------------------------------

SEEDTTS_BENCHMARK = "seed-tts-eval"
SEEDTTS_CATEGORY = "zero_shot"  # one group: every item is a voice-cloning task
SEEDTTS_GROUND_TRUTH_LABEL = "seedtts-ground-truth"


def _seedtts_lines(path: str | Path) -> tuple[Path, list[tuple[int, list[str]]]]:
    """(meta.lst's folder, [(line number, fields)]) for every non-blank line; a line that has not 4 or 5 fields
    is an error naming it."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(
            f"{str(p)!r} does not exist; pass Seed-TTS-eval's meta.lst (e.g. seedtts_testset/en/meta.lst)",
            source=str(p),
        )
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{p}: not UTF-8 text ({e}); meta.lst is UTF-8", source=str(p)) from e
    lines, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.rstrip("\r\n").split("|")]
        if len(fields) not in (4, 5) or not fields[0] or not fields[2] or not fields[3]:
            problems.append(
                f"line {number}: {len(fields)} field(s) {line[:80]!r}; expected utt|prompt text|"
                "prompt wav|target text (and optionally |ground-truth wav), with utt, prompt wav and "
                "target text non-empty"
            )
            continue
        lines.append((number, fields))
    _raise_problems(p, "seedtts", problems)
    return p.resolve().parent, lines


def import_seedtts(path: str | Path, *, language: str | None = None) -> pd.DataFrame:
    """Seed-TTS-eval's meta.lst as items: one item per line `utt|prompt text|prompt wav|target text` (the hard-case
    and ground-truth lists add `|ground-truth wav`): item_id = utt, text = the target text, the voice prompt
    (prompt_audio_uri, resolved against meta.lst's folder, and prompt_text). The language comes from `language`,
    else from the folder name as the test set ships (en/ -> en-US, zh/ -> zh-CN)."""
    folder, lines = _seedtts_lines(path)
    tag = language or _SPLIT_LANGUAGES.get(folder.name.lower())
    if tag is None:
        raise DatasetError(
            f"{path}: cannot tell the language from the folder name {folder.name!r} (en or zh); "
            "pass --language, e.g. --language en-US",
            source=str(path),
        )
    rows: list[dict[str, Any]] = [
        {
            "item_id": utt,
            "benchmark": f"{SEEDTTS_BENCHMARK}/{folder.name}",
            "category": SEEDTTS_CATEGORY,
            "depth": 0,
            "parent_id": None,
            "language": tag,
            "text": target,
            "instruction": None,
            "task": None,
            "reference_audio_uri": None,
            "prompt_text": prompt_text or None,
            "prompt_audio_uri": resolve_against(folder, prompt, base_is_folder=True),
            "source": SEEDTTS_BENCHMARK,
            "generator": None,
        }
        for _, (utt, prompt_text, prompt, target, *_) in lines
    ]
    duplicates = sorted(utt for utt, n in Counter(r["item_id"] for r in rows).items() if n > 1)
    if duplicates:
        raise DatasetError(
            f"{path}: utt id(s) {', '.join(duplicates[:5])} appear more than once; each line needs its own utt",
            source=str(path),
        )
    return pd.DataFrame(rows)


def seedtts_ground_truth_manifest(path: str | Path) -> list[dict[str, str]]:
    """Manifest rows (item_id, path) of the ground-truth recordings a 5-field meta.lst names (natural speech of
    the target text: a `natural` system); empty for the 4-field lists."""
    folder, lines = _seedtts_lines(path)
    return [
        {"item_id": fields[0], "path": resolve_against(folder, fields[4], base_is_folder=True)}
        for _, fields in lines
        if len(fields) == 5 and fields[4]
    ]


# --- dispatch -----------------------------------------------------------------------------------------------

FORMATS: dict[str, Callable[..., pd.DataFrame]] = {
    "emergenttts": import_emergenttts,
    "instructttseval": import_instructttseval,
    "seedtts": import_seedtts,
}
_ALIASES = {"emergentttseval": "emergenttts", "seedttseval": "seedtts"}


def import_dataset(fmt: str, path: str | Path, **options: Any) -> pd.DataFrame:
    """Import `path` in the named published format ('emergenttts', 'instructttseval' or 'seedtts')."""
    key = re.sub(r"[\s_\-]", "", str(fmt).lower())
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"unknown dataset format {fmt!r}; formats: {', '.join(FORMATS)}")
    return FORMATS[key](path, **options)


# --- items files ----------------------------------------------------------------------------------------------

ITEMS_FILE_SUFFIXES = (".parquet", ".jsonl", ".ndjson")


@dataclass(frozen=True)
class ImportedFile:
    """What `import_items_file` wrote: the items file and, for clips made elsewhere, a `files` manifest."""

    fmt: str
    n_items: int
    out: Path
    manifest: Path | None = None  # the `files` manifest beside `out`, when the file named clips
    spec: str | None = None  # the `files` system spec that reads the manifest
    what: str = ""  # what the manifest's clips are
    n_clips: int = 0
    missing: list[str] = field(default_factory=list)  # clips listed but absent (a failed row each, retried later)


def write_items(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write an items frame as Parquet or JSON Lines, by `out`'s suffix."""
    out = Path(out)
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        frame.to_json(out, orient="records", lines=True, force_ascii=False)
    return out


def _absent(paths: list[str]) -> list[str]:
    return [p for p in paths if "://" not in p and not Path(p).is_file()]


def import_items_file(
    fmt: str,
    path: str | Path,
    out: str | Path,
    *,
    baseline_audios: str | Path | None = None,
    system_name: str | None = None,
    language: str | None = None,
) -> ImportedFile:
    """Convert a published benchmark file into a checked ttseval items file `out` (.jsonl or .parquet); with clips
    made elsewhere (EmergentTTS-Eval's `baseline_audios`, InstructTTSEval's gen_path fields, Seed-TTS-eval's
    ground-truth recordings) also a `files` manifest next to it, whose system spec is returned. Nothing is
    written unless every check passes.

    Raises:
        SpecError: an option that is not for `fmt`, a bad system name, an `out` that is not .jsonl / .parquet.
        DatasetError: the file breaks the format or the items rules (rows named), clips absent as described.
    """
    out = Path(out)
    if fmt == "seedtts":
        return _seedtts_items_file(
            path, out, baseline_audios=baseline_audios, system_name=system_name, language=language
        )
    if language is not None:
        raise SpecError("--language is for --format seedtts (its folder name says en or zh otherwise); drop it")
    emergent = fmt == "emergenttts"
    if baseline_audios is not None and not emergent:
        raise SpecError("--baseline-audios is for --format emergenttts (its baseline_audios folder); drop it")
    if system_name is not None and emergent:
        raise SpecError(
            "--system-name names the clips of an InstructTTSEval file's gen_path fields (the "
            f"EmergentTTS-Eval baseline is always {EMERGENTTTS_BASELINE_LABEL!r}); drop it"
        )
    if out.suffix not in ITEMS_FILE_SUFFIXES:
        raise SpecError(f"--out {out}: use a .jsonl or .parquet file name")
    label = EMERGENTTTS_BASELINE_LABEL if emergent else (system_name or INSTRUCTTTSEVAL_GENERATED_LABEL)
    try:
        files_spec(label, out)  # a bad --system-name fails before anything is written
    except ValueError as e:
        raise SpecError(f"--system-name: {e}") from e
    frame = import_dataset(fmt, path)
    validate_items(frame, source=str(path))
    clips: list[dict[str, str]] = []
    what, manifest = "", None
    if baseline_audios is not None:
        clips = emergenttts_baseline_manifest(path, frame, baseline_audios)
        what, manifest = (
            (f"baseline clips ({EMERGENTTTS_BASELINE_MODEL}, voice {EMERGENTTTS_BASELINE_VOICE.capitalize()})"),
            out.with_suffix(".baseline.jsonl"),
        )
    elif not emergent:
        clips = instructttseval_generated_manifest(path)
        what, manifest = "generated clips (gen_path)", out.with_suffix(".generated.jsonl")
        if not clips and system_name is not None:
            raise DatasetError(
                f"--system-name {system_name!r}: {path} has no gen_path fields (the evaluation "
                "JSONL has them, the HF parquet does not); drop --system-name",
                source=str(path),
            )
    write_items(frame, out)
    if not clips or manifest is None:  # the manifest is named wherever clips are found
        return ImportedFile(fmt, len(frame), out)
    write_manifest(clips, manifest)
    return ImportedFile(
        fmt,
        len(frame),
        out,
        manifest,
        files_spec(label, manifest),
        what,
        len(clips),
        _absent([c["path"] for c in clips]),
    )


def _seedtts_items_file(
    path: str | Path, out: Path, *, baseline_audios: str | Path | None, system_name: str | None, language: str | None
) -> ImportedFile:
    """Seed-TTS-eval's meta.lst -> an items file with voice prompts; with ground-truth recordings (5-field lines)
    also a `files` manifest of them, the natural-speech system."""
    if baseline_audios is not None or system_name is not None:
        raise SpecError("--baseline-audios and --system-name are not for --format seedtts; drop them")
    if out.suffix not in ITEMS_FILE_SUFFIXES:
        raise SpecError(f"--out {out}: use a .jsonl or .parquet file name")
    frame = import_seedtts(path, language=language)
    validate_items(frame, source=str(path))
    if missing := _absent(list(frame["prompt_audio_uri"])):
        raise DatasetError(
            f"{path}: {len(missing)} prompt clip(s) missing, e.g. {missing[0]}; keep meta.lst "
            "beside its prompt-wavs folder",
            source=str(path),
        )
    write_items(frame, out)
    if not (clips := seedtts_ground_truth_manifest(path)):
        return ImportedFile("seedtts", len(frame), out)
    manifest = write_manifest(clips, out.with_suffix(".ground-truth.jsonl"))
    return ImportedFile(
        "seedtts",
        len(frame),
        out,
        manifest,
        files_spec(SEEDTTS_GROUND_TRUTH_LABEL, manifest),
        "ground-truth recordings",
        len(clips),
        _absent([c["path"] for c in clips]),
    )
