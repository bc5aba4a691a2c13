"""Every table's pyarrow schema, declared once, with its key. All readers and writers use these.

Units are in the names (`duration_s`, `sample_rate_hz`). Failures are rows: `status`, `error_type`,
`error_message`, `retryable`, `attempt`, with the result columns null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"description": doc})


_STATUS = [
    _f("status", pa.string(), "ok, or why there is no result: failed / empty / unsupported / skipped", nullable=False),
    _f("error_type", pa.string(), "exception class or reason code; null when ok"),
    _f("error_message", pa.string(), "what went wrong, for a person; null when ok"),
    _f("retryable", pa.bool_(), "true when a later run should try this key again (transient failure)"),
    _f("attempt", pa.int32(), "how many calls this row took"),
    _f("created_at", pa.timestamp("us", tz="UTC"), "when the row was computed", nullable=False),
]

ITEMS = pa.schema(
    [
        _f("item_id", pa.string(), "unique item key", nullable=False),
        _f("benchmark", pa.string(), "benchmark name and version"),
        _f("category", pa.string(), "EmergentTTS-Eval category, or a user category", nullable=False),
        _f("depth", pa.int16(), "refinement depth, 0 = seed", nullable=False),
        _f("parent_id", pa.string(), "item this one was refined from"),
        _f("language", pa.string(), "BCP-47 tag as given", nullable=False),
        _f("text", pa.string(), "text to speak", nullable=False),
        _f("instruction", pa.string(), "style instruction for instruction-following systems"),
        _f("task", pa.string(), "InstructTTSEval task of the instruction: APS, DSD or RP"),
        _f("reference_audio_uri", pa.string(), "reference recording, where one exists"),
        _f("prompt_audio_uri", pa.string(), "voice prompt: the clip a voice-cloning system imitates (path or URI)"),
        _f("prompt_text", pa.string(), "what the voice prompt says"),
        _f("prompt_audio_sha256", pa.string(), "the prompt clip as stored in the run (set when the run starts)"),
        _f("source", pa.string(), "who wrote the item"),
        _f("generator", pa.string(), "model and prompt version that generated it, if any"),
    ]
)

GENERATED = pa.schema(
    [
        *[f.with_nullable(True) if f.name == "text" else f for f in ITEMS],  # a failed row may have no text
        _f("root_id", pa.string(), "depth-0 item this lineage grew from"),
        _f("seed_id", pa.string(), "human seed the item was written from or is"),
        _f("subcategory", pa.string(), "subcategory within the category, where the category has them"),
        _f("method", pa.string(), "how the item was made: seed, breadth, tongue-twister, or refine: <method>"),
        _f("diversity_aspect", pa.string(), "the diversity criterion a breadth item covers (the model's words)"),
        _f("reasoning", pa.string(), "the model's account of what makes a refinement harder (tts_synthesis_diversity)"),
        _f("caption", pa.string(), "InstructTTSEval: the reference clip's 12-feature caption (JSON)"),
        _f("dropout_set", pa.int16(), "InstructTTSEval DSD: which feature-dropout weight set (Table 8) was drawn, 1-3"),
        _f("features", pa.string(), "InstructTTSEval DSD: the caption features kept after dropout, comma-joined"),
        _f("repaired", pa.bool_(), "text passed through the grammar-repair call"),
        _f("text_before_repair", pa.string(), "the refinement's text before grammar repair"),
        _f("generator_model", pa.string(), "model that wrote the item"),
        _f("llm_id", pa.string(), "stable id of the LLM configuration (model and generation settings)"),
        _f("prompt_version", pa.string(), "version of ttseval's prompt template(s), '+'-joined when repaired"),
        _f("prompt_hash", pa.string(), "SHA-256 (16 hex) of the full rendered request(s): the LLM call cache key"),
        _f("temperature", pa.float64(), "sampling temperature of the call"),
        _f("input_tokens", pa.int64(), "prompt tokens of the call(s) that made the item"),
        _f("output_tokens", pa.int64(), "output tokens (thinking included) of the call(s)"),
        _f("cost_usd", pa.float64(), "cost of the call(s) at the configured prices"),
        _f("status", pa.string(), "ok, or failed (with the reason in error_type / error_message)", nullable=False),
        _f("error_type", pa.string(), "refusal, unparseable, transport, duplicate, validation, parent_failed"),
        _f("error_message", pa.string(), "what went wrong, for a person"),
    ]
)
"""A generated dataset's rows, failed ones included. The frozen items table is the ok rows."""

SYNTHESIS = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "stable id of the TTS configuration", nullable=False),
        _f("system_spec", pa.string(), "canonical provider spec", nullable=False),
        _f("audio_uri", pa.string(), "where the WAV blob is stored"),
        _f("audio_sha256", pa.string(), "SHA-256 of the WAV bytes; the blob's address"),
        _f("duration_s", pa.float64(), "audio duration in seconds"),
        _f("sample_rate_hz", pa.int32(), "native sample rate of the engine"),
        _f(
            "latency_s",
            pa.float64(),
            "wall time of the synthesize call in seconds (of the original call on a cache hit)",
        ),
        _f(
            "first_byte_s",
            pa.float64(),
            "remote voices: seconds from sending the last request to the first byte of "
            "the answer (the audio, where the vendor streams it); null for local engines and vendor SDKs",
        ),
        _f(
            "cache_hit",
            pa.bool_(),
            "audio reused from an earlier run: same spec, engine version, text, language, instruction",
        ),
        _f("billable_chars", pa.int64(), "characters the provider bills for the call (0 for local engines)"),
        _f(
            "cost_usd",
            pa.float64(),
            "what this row's call cost at the provider's price (0 for local engines and "
            "for reused audio, which made no call)",
        ),
        *_STATUS,
        _f("provider_version", pa.string(), "engine version"),
        _f("provider_metadata", pa.string(), "provider metadata as JSON (never secrets)"),
        _f(
            "audio_flags",
            pa.string(),
            "quality gates the clip failed, comma-separated (nan, clipped, too_short, "
            "too_long, sample_rate; metrics/audio_checks.py); null when it passed them all",
        ),
    ]
)

TRANSCRIPTS = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system whose audio was transcribed", nullable=False),
        _f("asr_id", pa.string(), "stable id of the recogniser configuration", nullable=False),
        _f("asr_spec", pa.string(), "canonical recogniser spec", nullable=False),
        _f("hypothesis", pa.string(), "raw recogniser output"),
        _f("detected_language", pa.string(), "language the recogniser detected, if it gives one"),
        _f("language_prob", pa.float64(), "probability of the detected language"),
        _f("normalizer", pa.string(), "name and version of the text normalizer used for WER/CER"),
        _f("ref_norm", pa.string(), "normalized reference"),
        _f("hyp_norm", pa.string(), "normalized hypothesis"),
        _f("word_errors", pa.int32(), "substitutions + deletions + insertions over words"),
        _f("ref_words", pa.int32(), "words in the normalized reference"),
        _f("char_errors", pa.int32(), "edit operations over characters"),
        _f("ref_chars", pa.int32(), "characters in the normalized reference"),
        _f("wer", pa.float64(), "word_errors / ref_words for this utterance"),
        _f("cer", pa.float64(), "char_errors / ref_chars for this utterance"),
        _f(
            "cache_hit",
            pa.bool_(),
            "transcript reused from an earlier run: same clip, asr_id, engine version, language",
        ),
        *_STATUS,
    ]
)

QUALITY = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system whose audio was scored", nullable=False),
        _f("quality_id", pa.string(), "stable id of the MOS predictor configuration", nullable=False),
        _f("quality_spec", pa.string(), "canonical predictor spec", nullable=False),
        _f("mos", pa.float64(), "predicted overall MOS, 1-5"),
        _f("details", pa.string(), "predictor sub-scores as JSON"),
        _f("cache_hit", pa.bool_(), "scores reused from an earlier run: same clip, quality_id, engine version"),
        *_STATUS,
    ]
)

LID = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system whose audio was identified", nullable=False),
        _f("lid_id", pa.string(), "stable id of the language-identification model configuration", nullable=False),
        _f("lid_spec", pa.string(), "canonical LID model spec", nullable=False),
        _f("language", pa.string(), "the model's top label's language code (e.g. pus, ps); null for an empty clip"),
        _f("prob", pa.float64(), "the model's probability of that label, 0-1"),
        _f("cache_hit", pa.bool_(), "reused from an earlier run: same clip, lid_id, engine version"),
        *_STATUS,
    ]
)

PROSODY = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system whose audio was measured", nullable=False),
        _f(
            "prosody_id", pa.string(), "version of the prosody and timing measures (metrics/prosody.py)", nullable=False
        ),
        _f("f0_mean_hz", pa.float64(), "mean F0 of voiced frames (Praat pitch, ac), Hz"),
        _f("f0_range_st", pa.float64(), "F0 5th-95th percentile span, semitones"),
        _f("voiced_share", pa.float64(), "share of frames Praat calls voiced, 0-1"),
        _f("speech_s", pa.float64(), "speech time by Silero VAD, seconds"),
        _f("leading_silence_s", pa.float64(), "silence before the first speech, seconds"),
        _f("trailing_silence_s", pa.float64(), "silence after the last speech, seconds"),
        _f("n_long_pauses", pa.int32(), "internal pauses of at least the pause threshold (0.5 s)"),
        _f("longest_pause_s", pa.float64(), "longest internal pause, seconds"),
        _f("cache_hit", pa.bool_(), "reused from an earlier run: same clip and prosody_id"),
        *_STATUS,
    ]
)

SIMILARITY = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system whose audio was compared", nullable=False),
        _f("encoder_id", pa.string(), "stable id of the speaker encoder configuration", nullable=False),
        _f("encoder_spec", pa.string(), "canonical speaker encoder spec", nullable=False),
        _f(
            "reference",
            pa.string(),
            "what the clip was compared with: 'prompt' (the item's voice prompt) or "
            "'voice' (the system's reference voice, setting reference_voices)",
        ),
        _f("reference_sha256", pa.string(), "the reference clip as stored"),
        _f("similarity", pa.float64(), "cosine similarity of the two embeddings, -1..1"),
        _f("cache_hit", pa.bool_(), "reused from an earlier run: same clip, reference, encoder_id, engine version"),
        *_STATUS,
    ]
)

_JUDGE_COST = [
    _f("raw_response", pa.string(), "the judge's raw output, kept for audit"),
    _f("parse_ok", pa.bool_(), "whether the output parsed into a verdict"),
    _f("attempts", pa.int32(), "answers requested (1 + re-asks after unparseable output)"),
    _f("retries", pa.int32(), "transport retries (429, 5xx, timeouts), counted apart from attempts"),
    _f("input_tokens", pa.int64(), "prompt tokens, summed over attempts"),
    _f("output_tokens", pa.int64(), "generated tokens, summed over attempts"),
    _f("cost_usd", pa.float64(), "cost of the calls in US dollars (0 for local judges)"),
    _f("samples", pa.int32(), "answers the verdict is the majority of (self-consistency; 1 = one answer)"),
    _f("sample_agreement", pa.float64(), "share of the parsed samples that agree with the majority verdict"),
    _f(
        "served_model",
        pa.string(),
        "the model the vendor says answered (OpenAI's model, Gemini's model_version), where it says: a version "
        "served under the judge's fixed model name",
    ),
]

JUDGMENTS = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "candidate TTS system", nullable=False),
        _f(
            "baseline_id",
            pa.string(),
            "the system it is compared with: the run's baseline, or under judge_pairs "
            "all / sampled the other system of the pair (the one listed first, the baseline first of all)",
            nullable=False,
        ),
        _f("judge_id", pa.string(), "judge model + prompt version + generation settings", nullable=False),
        _f("judge_spec", pa.string(), "canonical judge spec", nullable=False),
        _f(
            "vs_baseline",
            pa.bool_(),
            "whether baseline_id is the run's baseline (the rows win-rates read); null in "
            "runs stored before judge_pairs, all of whose rows are against the baseline",
        ),
        _f("candidate_first", pa.bool_(), "whether the candidate's clip was presented first"),
        _f("winner_raw", pa.string(), "the judge's answer in presentation order: first / second / tie"),
        _f("winner", pa.string(), "mapped back: candidate / baseline / tie; null when unparsed"),
        _f("score_candidate", pa.float64(), "judge's score for the candidate clip"),
        _f("score_baseline", pa.float64(), "judge's score for the baseline clip"),
        _f("reasoning_candidate", pa.string(), "judge's notes on the candidate clip"),
        _f("reasoning_baseline", pa.string(), "judge's notes on the baseline clip"),
        _f("comparison", pa.string(), "judge's comparison of the two"),
        *_JUDGE_COST,
        *_STATUS,
    ]
)

INSTRUCTION_JUDGMENTS = pa.schema(
    [
        _f("item_id", pa.string(), "item key", nullable=False),
        _f("system_id", pa.string(), "TTS system", nullable=False),
        _f("judge_id", pa.string(), "judge model + prompt version + generation settings", nullable=False),
        _f("judge_spec", pa.string(), "canonical judge spec", nullable=False),
        _f("task", pa.string(), "APS, DSD or RP"),
        _f("follows", pa.bool_(), "true / false; null when undecidable or unparsed"),
        _f("reasoning", pa.string(), "judge's reasoning"),
        *_JUDGE_COST,
        *_STATUS,
    ]
)

# One row per (system, recogniser): two recognisers' transcripts are never pooled. Synthesis and MOS columns are
# the system's and repeat on each of its rows.
REPORT = pa.schema(
    [
        _f("system_id", pa.string(), "TTS system", nullable=False),
        _f("system_spec", pa.string(), "canonical provider spec"),
        _f("asr_id", pa.string(), "recogniser whose transcripts the WER/CER columns pool; null when none"),
        _f("asr_spec", pa.string(), "canonical recogniser spec"),
        _f("n_items", pa.int64(), "items in the run"),
        _f("n_ok", pa.int64(), "clips synthesized"),
        _f("n_failed", pa.int64(), "items whose synthesis raised"),
        _f("n_empty", pa.int64(), "items with no usable clip: silent, or cut short on every attempt"),
        _f("n_unsupported", pa.int64(), "items in a language the system does not speak"),
        _f("n_missing", pa.int64(), "items with no synthesis row yet"),
        _f("completion_rate", pa.float64(), "n_ok / n_items (1 - F1 rate in INSV-A terms)"),
        _f("n_transcribed", pa.int64(), "clips with an ok transcript from this recogniser"),
        _f("wer", pa.float64(), "corpus WER: sum of word errors / sum of reference words"),
        _f("wer_ci_low", pa.float64(), "bootstrap 95% CI, low"),
        _f("wer_ci_high", pa.float64(), "bootstrap 95% CI, high"),
        _f("wer_utt_mean", pa.float64(), "mean of per-utterance WER"),
        _f("cer", pa.float64(), "corpus CER"),
        _f("cer_ci_low", pa.float64(), "bootstrap 95% CI, low"),
        _f("cer_ci_high", pa.float64(), "bootstrap 95% CI, high"),
        _f("cer_utt_mean", pa.float64(), "mean of per-utterance CER"),
        _f("perfect_pct", pa.float64(), "percent of transcribed clips with zero word errors"),
        _f("mos", pa.float64(), "mean predicted MOS"),
        _f("mos_ci_low", pa.float64(), "bootstrap 95% CI, low"),
        _f("mos_ci_high", pa.float64(), "bootstrap 95% CI, high"),
        _f("n_mos", pa.int64(), "clips with a MOS"),
        _f("mean_duration_s", pa.float64(), "mean clip duration in seconds"),
        _f("rtf", pa.float64(), "real-time factor: synthesis seconds per audio second (lower is faster)"),
    ]
)


WINRATES = pa.schema(
    [
        _f("judge_id", pa.string(), "judge", nullable=False),
        _f("judge_spec", pa.string(), "canonical judge spec"),
        _f("system_id", pa.string(), "candidate system", nullable=False),
        _f("baseline_id", pa.string(), "baseline system", nullable=False),
        _f("level", pa.string(), "overall, category, depth or category_depth", nullable=False),
        _f("category", pa.string(), "category (null at level overall)"),
        _f("depth", pa.int16(), "depth (null unless level depth or category_depth)"),
        _f("n_judged", pa.int64(), "comparisons with a parsed verdict"),
        _f("wins", pa.int64(), "candidate preferred"),
        _f("ties", pa.int64(), "no preference"),
        _f("losses", pa.int64(), "baseline preferred"),
        _f("win_rate", pa.float64(), "(wins + ties / 2) / n_judged"),
        _f(
            "win_rate_ci_low",
            pa.float64(),
            "BCa bootstrap 95% CI over items, low (null under 10 judged items: n too small)",
        ),
        _f("win_rate_ci_high", pa.float64(), "BCa bootstrap 95% CI over items, high (null under 10 judged items)"),
        _f("tie_rate", pa.float64(), "ties / n_judged"),
        _f("n_parse_failures", pa.int64(), "answers that did not parse (counted, not scored)"),
        _f("n_failed", pa.int64(), "comparisons whose judge call failed"),
        _f("n_skipped", pa.int64(), "comparisons without both clips"),
    ]
)

# Rethinking MUSHRA appendix A.6's scoresheet: six counts of faults, then three perceptual scores on 0-100.
DG_SHEET = {
    "mild_pronunciation": "mild pronunciation mistakes",
    "severe_pronunciation": "severe pronunciation mistakes",
    "unnatural_pauses": "unnatural pauses, speed-ups or slow-downs",
    "digital_artifacts": "digital artifacts",
    "energy_fluctuations": "sudden energy fluctuations",
    "word_skips": "words skipped",
    "liveliness": "liveliness, 0-100",
    "voice_quality": "voice quality, 0-100",
    "rhythm": "rhythm, 0-100",
}

LISTENING_STIMULI = pa.schema(
    [
        _f("test_id", pa.string(), "listening test", nullable=False),
        _f("kind", pa.string(), "mushra, mushra-nmr, mushra-dg, mushra-dg-nmr, mos or cmos", nullable=False),
        _f("trial_id", pa.string(), "webMUSHRA page id", nullable=False),
        _f(
            "stimulus",
            pa.string(),
            "the blinded name raters and webMUSHRA's results see ('reference': the page's hidden reference)",
            nullable=False,
        ),
        _f("source", pa.string(), "mushra (a slider), sheet (a MUSHRA-DG scoresheet), mos, cmos or practice"),
        _f("item_id", pa.string(), "item heard", nullable=False),
        _f("system_id", pa.string(), "system heard (anchor-x / anchor-y for the anchors)", nullable=False),
        _f("role", pa.string(), "system, reference (natural speech), anchor-x or anchor-y"),
        _f("other_system_id", pa.string(), "CMOS: the system the clip is compared with"),
        _f("b_is_system", pa.bool_(), "CMOS: the system under test plays second (B)"),
        _f("file", pa.string(), "the WAV's path relative to webMUSHRA's root"),
        _f("created_at", pa.timestamp("us", tz="UTC"), "when the test was exported", nullable=False),
    ]
)

RATINGS = pa.schema(
    [
        _f("test_id", pa.string(), "listening test", nullable=False),
        _f("kind", pa.string(), "mushra, mushra-nmr, mushra-dg, mushra-dg-nmr, mos or cmos", nullable=False),
        _f("rater_id", pa.string(), "rater", nullable=False),
        _f("session", pa.string(), "webMUSHRA session (or file and occurrence) the rating came in", nullable=False),
        _f("trial_id", pa.string(), "page", nullable=False),
        _f("item_id", pa.string(), "item heard", nullable=False),
        _f("system_id", pa.string(), "system heard", nullable=False),
        _f("role", pa.string(), "system, reference (hidden, natural speech), anchor-x or anchor-y"),
        _f(
            "score",
            pa.float64(),
            "MUSHRA 0-100; MUSHRA-DG: appendix A.6's formula over the scoresheet; MOS 1-5; "
            "CMOS -3..3, positive when the system is preferred over the one it is compared with",
        ),
        _f("slider", pa.float64(), "MUSHRA-DG: the page's slider score beside the scoresheet"),
        *[_f(name, pa.float64(), f"MUSHRA-DG scoresheet: {doc}") for name, doc in DG_SHEET.items()],
        _f("other_system_id", pa.string(), "CMOS: the system compared with"),
        _f("rating_time_s", pa.float64(), "time the rater spent, as the platform reports it"),
        _f("comment", pa.string(), "the rater's comment"),
        _f("questionnaire", pa.string(), "the rater's questionnaire answers as JSON"),
        _f(
            "flag", pa.string(), "why the row is left out of the analysis (a second rating of one page); null when used"
        ),
        _f("note", pa.string(), "a remark that does not exclude the row (the page has no hidden-reference rating)"),
        _f("source_file", pa.string(), "results file the rating came from (its name)"),
        _f("created_at", pa.timestamp("us", tz="UTC"), "when the rating was ingested", nullable=False),
    ]
)


STATUSES = ("ok", "failed", "empty", "unsupported")
"""The statuses of a synthesis row."""

CLIP_STATUSES = ("ok", "failed")
"""The statuses of a clip stage's rows: answered, or the model's batch failed (ttseval.tasks.failures.error_row)."""


@dataclass(frozen=True)
class TableDef:
    """A stored table: its schema, its key, and what validation (ttseval.core.validation) checks beyond them.

    Attributes:
        statuses: The values `status` may take; None: the table has no status rule (items, reports).
        clip_stage: A per-clip model stage's table (ttseval.tasks.stages declares how it is computed): one row per
            (item, system, model), the model's output id the key's last column, statuses CLIP_STATUSES.
    """

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    statuses: tuple[str, ...] | None = None
    clip_stage: bool = False

    @property
    def model_column(self) -> str:
        """A clip-stage table's model-id column (asr_id, quality_id, ...): its key's last column."""
        if not self.clip_stage:
            raise ValueError(f"table {self.name!r} is not a clip-stage table; it has no model column")
        return self.key[-1]


def _clip_stage(name: str, schema: pa.Schema, model_column: str) -> TableDef:
    """A clip stage's table: keyed by (item_id, system_id, `model_column`), its rows ok or failed."""
    return TableDef(name, schema, ("item_id", "system_id", model_column), statuses=CLIP_STATUSES, clip_stage=True)


_JUDGE_STATUSES = ("ok", "failed", "skipped")

TABLES: dict[str, TableDef] = {
    t.name: t
    for t in (
        TableDef("items", ITEMS, ("item_id",)),
        TableDef("synthesis", SYNTHESIS, ("item_id", "system_id"), statuses=STATUSES),
        _clip_stage("transcripts", TRANSCRIPTS, "asr_id"),
        _clip_stage("quality", QUALITY, "quality_id"),
        _clip_stage("lid", LID, "lid_id"),
        _clip_stage("prosody", PROSODY, "prosody_id"),
        _clip_stage("similarity", SIMILARITY, "encoder_id"),
        TableDef("judgments", JUDGMENTS, ("item_id", "system_id", "baseline_id", "judge_id"), statuses=_JUDGE_STATUSES),
        TableDef(
            "instruction_judgments",
            INSTRUCTION_JUDGMENTS,
            ("item_id", "system_id", "judge_id"),
            statuses=_JUDGE_STATUSES,
        ),
        # The position-bias audit: a sample of the judgments' pairs, asked again in the other order.
        TableDef(
            "position_audit", JUDGMENTS, ("item_id", "system_id", "baseline_id", "judge_id"), statuses=_JUDGE_STATUSES
        ),
        TableDef("report", REPORT, ("system_id", "asr_id")),
        TableDef("winrates", WINRATES, ("judge_id", "system_id", "baseline_id", "level", "category", "depth")),
        TableDef("listening_stimuli", LISTENING_STIMULI, ("test_id", "trial_id", "stimulus")),
        TableDef("ratings", RATINGS, ("test_id", "rater_id", "item_id", "system_id", "trial_id", "session")),
    )
}

CLIP_STAGE_TABLES = tuple(name for name, t in TABLES.items() if t.clip_stage)
"""The per-clip model stages' tables, in the order the stages run and report."""


def table_from_rows(table: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows (dicts) to a pyarrow Table with the declared schema; a missing column is null."""
    schema = TABLES[table].schema
    return pa.Table.from_pylist([{name: row.get(name) for name in schema.names} for row in rows], schema=schema)
