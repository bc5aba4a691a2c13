"""Every provider contract in one place: the small protocols each kind implements and the records they exchange.

    kind     protocol                          records
    tts      TTSProvider                       (returns ttseval.core.audio.Audio)
    asr      ASRProvider                       Transcript
    quality  QualityProvider                   QualityScore
    lid      LanguageIdentifier                LanguageGuess
    speaker  SpeakerEncoder                    (numpy vectors, one per clip)
    judge    Judge: PairwiseJudge and/or       PairwiseRequest -> PairwiseVerdict,
             InstructionJudge                  InstructionRequest -> InstructionVerdict
    llm      LLM                               LLMRequest -> LLMResult (FAILURES)

Each protocol has one to three methods that take a batch (or one request) and return results of the same length
and order. The registry (`ttseval.core.registry`) checks a provider against its kind's protocol when it builds it.

Besides the protocol, every provider class declares its metadata once, as class attributes that the registry
reads without building the provider (`ProviderMetadata` below): languages, accepts_instruction, gpu, extra,
output_sample_rate_hz, version, requires, imports.

Providers raise `TransientProviderError` for failures worth retrying and `PermanentProviderError` for the rest;
the stages turn both into rows with a status and an error, never into a crash or a silent gap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from ttseval.core.audio import Audio

# -- metadata ------------------------------------------------------------------------------------------------------

ANY_LANGUAGE: Final = "any"
"""`languages` of a provider that does not depend on the language (a MOS predictor, an LLM judge)."""
PER_VOICE: Final = "per voice"
"""`languages` of a provider whose language is its voice's or model's (Piper's voice config, a local model):
only a built instance knows; ask its `supports_language`."""

Languages = frozenset[str] | Literal["any", "per voice"] | Callable[[], frozenset[str]]
"""Base language codes ('en', 'ps'; see ttseval.core.languages.base_language), ANY_LANGUAGE, PER_VOICE, or a
function listing them (espeak-ng asks its binary). The most any configuration of the class covers; one
configuration (a fixed voice, an English-only model) may cover fewer, and its `supports_language` says so."""


class ProviderMetadata(Protocol):
    """What a provider class declares about itself, once, as class attributes; read without building the provider
    by `Registry.info` (ttseval.core.registry), which returns a `ProviderInfo`.

    languages              see `Languages`.
    accepts_instruction    whether a style instruction changes the output (TTS) or is read at all.
    gpu                    whether the provider can run on a GPU (through an option such as device=cuda).
    extra                  the pip extra of ttseval that installs its Python packages ("engines", "models"),
                           None when the base install has them.
    output_sample_rate_hz  the rate of the audio it returns; None when it varies (per voice) or it returns none.
    version                the engine's version string, read lazily (providers.EngineVersion): recorded per row.
    requires               system programs it runs, e.g. ("espeak-ng",): checked on PATH before it is built.
    imports                Python modules it imports lazily, e.g. ("piper", "onnxruntime"): checked (without
                           importing) before it is built; a missing one names `extra`.
    """

    name: ClassVar[str]
    languages: ClassVar[Languages]
    accepts_instruction: ClassVar[bool]
    gpu: ClassVar[bool]
    extra: ClassVar[str | None]
    output_sample_rate_hz: ClassVar[int | None]
    version: ClassVar[str]
    requires: ClassVar[tuple[str, ...]]
    imports: ClassVar[tuple[str, ...]]


METADATA_DEFAULTS: dict[str, Any] = {
    "languages": PER_VOICE,
    "accepts_instruction": False,
    "gpu": False,
    "extra": None,
    "output_sample_rate_hz": None,
    "requires": (),
    "imports": (),
}
"""What a provider that declares nothing (a plugin written before these attributes) is taken to declare.
`version` has no default: it is 'unknown'. Built-in providers declare every attribute themselves."""


# -- text to speech -----------------------------------------------------------------------------------------------


@runtime_checkable
class TTSProvider(Protocol):
    """A text-to-speech system.

    Class attributes: `name` (registry name), `accepts_instruction` (whether `instruction` changes the output),
    and the rest of ProviderMetadata (`version` is recorded per row).

    Optional class attributes, read by the synthesis stage when present:
      keyed_by_item   True when clips are looked up by item id (audio made elsewhere), not made from the text:
                      the stage calls `synthesize(..., item_id=...)` and never reuses another item's clip.
      usd_per_char    (or a `cost_usd(text, instruction)` method) what one call costs: the stage records
                      `billable_chars` and `cost_usd` per row, plans `--dry-run` and `--budget-usd` with it.
      clones_voice    True when the system imitates a voice prompt: for an item with one, the stage calls
                      `synthesize(..., prompt=VoicePrompt(audio, text))`, and the prompt is part of the request's
                      cache key. Other systems never see prompts (their clips are still compared with it: SIM).
    """

    name: ClassVar[str]
    accepts_instruction: ClassVar[bool]

    def supports_language(self, language: str) -> bool:
        """Whether this system can speak `language` (a BCP-47 or ISO 639 tag such as 'en-US', 'eng' or 'fr')."""
        ...

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text` in `language`; `voice` overrides the spec's voice; `instruction` is a style prompt.

        Returns mono audio at the engine's native rate. Raises TransientProviderError or PermanentProviderError.
        """
        ...

    def metadata(self) -> dict[str, Any]:
        """JSON-safe facts about this configuration: engine, version, voice, options. Never secrets."""
        ...


@dataclass(frozen=True)
class VoicePrompt:
    """The voice a cloning system imitates: a clip and, when known, what it says (Seed-TTS-eval's prompt text)."""

    audio: Audio
    text: str | None = None


# -- speech recognition -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transcript:
    """One recogniser output. `detected_language` and `language_prob` are None when the backend gives none."""

    text: str
    detected_language: str | None = None
    language_prob: float | None = None


@runtime_checkable
class ASRProvider(Protocol):
    """A speech recogniser. `name` and the ProviderMetadata are class attributes."""

    name: ClassVar[str]

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        """Transcribe each clip; `languages[i]` is the expected language of clip i (a hint, may be None).

        Returns one Transcript per clip, in order. An empty text is a valid result (nothing recognised).
        """
        ...

    def metadata(self) -> dict[str, Any]: ...


# -- quality (MOS) ------------------------------------------------------------------------------------------------

MOS_BOUNDS = (0.5, 5.5)
"""Where a predicted MOS on the 1-5 scale may fall (predictors overshoot the scale a little): the quality table's
expectation (ttseval.core.validation) and the scorer protocol's check (providers/quality/command.py)."""


@dataclass(frozen=True)
class QualityScore:
    """A predicted mean opinion score on the 1-5 scale, with the predictor's sub-scores in `details`. `refused`
    says why the predictor gives this clip no score (too short for its model): the clip's row is failed, final,
    with that reason, and the batch's other clips keep their scores; `mos` is NaN then."""

    mos: float
    details: dict[str, float] = field(default_factory=dict)
    refused: str | None = None


@runtime_checkable
class QualityProvider(Protocol):
    """A reference-free quality (MOS) predictor. `name` and the ProviderMetadata are class attributes."""

    name: ClassVar[str]

    def score(self, batch: list[Audio]) -> list[QualityScore]:
        """Predict MOS for each clip, in order."""
        ...

    def metadata(self) -> dict[str, Any]: ...


# -- language identification -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LanguageGuess:
    """A LID model's answer for one clip: its label's language code ('pus', 'ps') and probability; both None
    when there was nothing to hear."""

    language: str | None
    prob: float | None = None


@runtime_checkable
class LanguageIdentifier(Protocol):
    """Spoken language identification (INSV-A's V gate). `name` and the ProviderMetadata are class attributes."""

    name: ClassVar[str]

    def identify(self, batch: list[Audio]) -> list[LanguageGuess]:
        """The most likely language of each clip, in order."""
        ...

    def metadata(self) -> dict[str, Any]: ...


# -- speaker similarity -------------------------------------------------------------------------------------------


@runtime_checkable
class SpeakerEncoder(Protocol):
    """A speaker-verification encoder: one embedding per clip, compared by cosine similarity
    (ttseval.metrics.similarity). `name` and the ProviderMetadata are class attributes."""

    name: ClassVar[str]

    def embed(self, batch: list[Audio]) -> list[Any]:
        """One 1-D float numpy vector per clip, in order (any norm: the metric normalises). Raises
        PermanentProviderError for a clip it cannot embed (empty, too short for its front end)."""
        ...

    def metadata(self) -> dict[str, Any]: ...


# -- judges -------------------------------------------------------------------------------------------------------
# A pairwise judge hears two clips of the same text in a given order (it is never told which is the baseline) and
# says which is better; the stage randomizes the order per (item, system, baseline) reproducibly and maps the
# answer back (tasks/judge.py). An instruction judge hears one clip and says whether it follows a style
# instruction. `judge_id` names the judge model, the prompt version and the generation settings, so a changed
# prompt or temperature is a different judge whose rows sit beside the old ones.

Winner = Literal["first", "second", "tie"]


@dataclass(frozen=True)
class PairwiseRequest:
    """Two clips of `text` in presentation order. `signals` carry objective facts per clip (cer, mos) for
    judges that use them; LLM judges ignore them."""

    item_id: str
    text: str
    language: str
    category: str
    rubric: str
    first: Audio
    second: Audio
    first_signals: dict[str, float | None] = field(default_factory=dict)
    second_signals: dict[str, float | None] = field(default_factory=dict)

    def swapped(self) -> PairwiseRequest:
        """The same pair with the clips (and their signals) in the other order."""
        return replace(
            self,
            first=self.second,
            second=self.first,
            first_signals=self.second_signals,
            second_signals=self.first_signals,
        )


@dataclass(frozen=True)
class PairwiseVerdict:
    """A judge's answer. `winner` is None when the output could not be parsed (`parse_ok` False)."""

    winner: Winner | None
    parse_ok: bool
    score_first: float | None = None
    score_second: float | None = None
    reasoning_first: str | None = None
    reasoning_second: str | None = None
    comparison: str | None = None
    difference: str | None = None
    """How far apart the judge heard the clips: none / subtle / significant (LLM judges), else None."""
    samples: int = 1
    """Answers the verdict is the majority of (self-consistency); `sample_agreement` is the share agreeing."""
    sample_agreement: float | None = None
    raw_response: str | None = None
    attempts: int = 1
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    transient: bool = False
    """No answer came (the transport failed after its retries): not a verdict, so a later run asks again."""
    served_model: str | None = None
    """The model the vendor says answered (LLMResult.served_model), where it says."""


@dataclass(frozen=True)
class InstructionRequest:
    item_id: str
    text: str
    language: str
    instruction: str
    task: str
    audio: Audio


@dataclass(frozen=True)
class InstructionVerdict:
    """`follows` is None when the judge could not decide or its output could not be parsed."""

    follows: bool | None
    parse_ok: bool
    reasoning: str | None = None
    samples: int = 1
    sample_agreement: float | None = None
    raw_response: str | None = None
    attempts: int = 1
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    transient: bool = False
    """No answer came (the transport failed after its retries): not a verdict, so a later run asks again."""
    served_model: str | None = None
    """The model the vendor says answered (LLMResult.served_model), where it says."""


@runtime_checkable
class Judge(Protocol):
    """What every judge has. Class attribute `name` (registry name); instance attribute `judge_id`. A judge also
    implements at least one of PairwiseJudge and InstructionJudge (the registry checks both)."""

    name: ClassVar[str]
    judge_id: str

    def metadata(self) -> dict[str, Any]: ...


@runtime_checkable
class PairwiseJudge(Judge, Protocol):
    """A judge of two clips. Class attribute `prompt_version`."""

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        """One verdict per request, in order. Never raises for one bad answer: parse failures are verdicts."""
        ...


@runtime_checkable
class InstructionJudge(Judge, Protocol):
    """A judge of instruction following (InstructTTSEval)."""

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order."""
        ...


# -- LLMs (dataset generation, captioning) ------------------------------------------------------------------------
# A request is plain data (text parts, WAV bytes, an output schema, a temperature, a sample number), so its
# identity can be hashed for the call cache (tasks/llm.py). A result never raises: a failed call is a result with
# `ok=False`, `failure` one of FAILURES and `error` saying why.

FAILURES = ("transport", "refusal", "unparseable")
"""Why a call produced no answer: the HTTP exchange failed, the model declined, or its output did not parse."""


@dataclass(frozen=True)
class LLMRequest:
    """One prompt.

    Args:
        parts: the user turn in order; `str` is text, `bytes` is a WAV clip sent inline.
        schema: pydantic model the answer must match (sent as the structured-output schema); None = free text.
        system: system instruction, if any.
        temperature: overrides the client's default temperature.
        sample: tells apart otherwise identical requests whose answers should differ (cache and seed key).
    """

    parts: tuple[str | bytes, ...]
    schema: type[BaseModel] | None = None
    system: str | None = None
    temperature: float | None = None
    sample: int = 0

    @property
    def text(self) -> str:
        return "\n".join(p for p in self.parts if isinstance(p, str))

    def identity(self) -> dict[str, Any]:
        """Everything that defines the request, audio by SHA-256: the call cache's key."""
        return {
            "parts": [p if isinstance(p, str) else {"wav_sha256": hashlib.sha256(p).hexdigest()} for p in self.parts],
            "schema": self.schema.model_json_schema() if self.schema is not None else None,
            "system": self.system,
            "temperature": self.temperature,
            "sample": self.sample,
        }


@dataclass
class LLMResult:
    """What one request came to. `data` is the validated schema instance (or the text when no schema)."""

    ok: bool
    data: Any = None
    raw: str | None = None
    failure: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    attempts: int = 0
    retries: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None
    served_model: str | None = None
    """The model the vendor says answered (OpenAI's `model`, Gemini's `model_version`), where it says: under a fixed
    name a vendor may serve another version."""
    cached: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class LLM(Protocol):
    """A chat model answering batches of requests; `llm_id` changes whenever answers could change.

    llm = LLMS.build("openai:gpt-4.1-mini:base_url=http://127.0.0.1:8000/v1")
    [result] = llm.generate([LLMRequest(parts=("Write three questions.",), schema=Questions)])
    result.ok, result.data, result.error, result.input_tokens, result.cost_usd
    """

    name: ClassVar[str]
    model: str
    spec: str
    llm_id: str

    def generate(self, batch: list[LLMRequest]) -> list[LLMResult]:
        """One result per request, in order; never raises for one failed call (see FAILURES)."""
        ...

    def metadata(self) -> dict[str, Any]: ...
