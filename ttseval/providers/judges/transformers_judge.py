"""A local audio-LLM judge: a Qwen2-Audio-class transformers model, loaded from disk, never downloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError
from ttseval.core.ids import stable_id
from ttseval.core.protocols import (
    ANY_LANGUAGE,
    InstructionRequest,
    InstructionVerdict,
    Languages,
    PairwiseRequest,
    PairwiseVerdict,
)
from ttseval.providers import EngineVersion, canonical_spec, package_version, parse_options
from ttseval.providers._local_models import resolve_local_model
from ttseval.providers.judges.prompts import (
    INSTRUCTION_PROMPT_VERSION,
    PAIRWISE_PROMPT_VERSION,
    WINNER_FROM_ANSWER,
    instruction_prompt,
    pairwise_prompt,
    parse_instruction,
    parse_pairwise,
)
from ttseval.providers.local_model import LazyModel, model_source

SUPPORTED_MODEL_TYPES = frozenset({"qwen2_audio"})


class TransformersJudgeOptions(BaseModel):
    """Options of `transformers-judge:<path or hub id>:key=value`."""

    model: str | None = Field(None, description="local directory or hub id; use this when the path contains ':'")
    device: str = Field("cpu", description="torch device, e.g. cpu, cuda, cuda:1")
    max_new_tokens: int = Field(512, ge=1, description="generation limit per answer")
    temperature: float = Field(0.0, ge=0, description="0 = greedy decoding; above 0 samples")
    max_attempts: int = Field(2, ge=1, description="generations per request while the answer does not parse")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="weight dtype; auto keeps the checkpoint's own"
    )


class TransformersAudioJudge:
    """Pairwise and instruction-following judging with a local Qwen2-Audio-class model.

    The model comes from the spec's voice or option `model=`: a directory written by save_pretrained, or a hub id
    already in the local Hugging Face cache; it is loaded with local_files_only=True on first use, once per
    instance. Each request is one conversation rendered by the processor's chat template: for a pair, the prompt,
    'Clip 1:', the first clip, 'Clip 2:', the second clip; for an instruction, the prompt, 'Recording:', the clip.
    Clips are resampled to the feature extractor's rate; Qwen2-Audio's feature extractor keeps at most its window
    (30 s) of each clip and drops the rest. Only the generated tokens are decoded and parsed with the project's
    tolerant parser. An answer that does not parse is asked again (up to max_attempts) only when sampling;
    otherwise it becomes a verdict with parse_ok False and the raw response kept. A request whose generation
    fails becomes a verdict with `error`; the rest of the batch goes on. Token counts are summed over attempts;
    cost_usd is 0.0 (local).
    """

    name: ClassVar[str] = "transformers-judge"
    prompt_version: ClassVar[str] = PAIRWISE_PROMPT_VERSION
    languages: ClassVar[Languages] = ANY_LANGUAGE  # asked in English about clips in any language
    accepts_instruction: ClassVar[bool] = True  # judges instruction following as well as pairs
    gpu: ClassVar[bool] = True  # device=cuda
    extra: ClassVar[str | None] = "models"  # torch; transformers itself is a base dependency
    output_sample_rate_hz: ClassVar[int | None] = None
    version: ClassVar[EngineVersion] = EngineVersion(lambda: package_version("transformers"))
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ("torch",)

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(TransformersJudgeOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        source = model_source(self.name, voice, self.options.model)
        self.voice = voice or source
        self.model_path = _resolve_local(source)
        basename = Path(source.rstrip("/")).name or source
        self.judge_id = stable_id(
            f"transformers-judge-{basename}",
            {
                "model": source,
                "prompt_version": PAIRWISE_PROMPT_VERSION,
                # one id covers both kinds of judgment, so either prompt changing makes a new judge
                "instruction_prompt_version": INSTRUCTION_PROMPT_VERSION,
                "temperature": self.options.temperature,
                "max_new_tokens": self.options.max_new_tokens,
            },
        )
        self._model: LazyModel[tuple[Any, Any]] = LazyModel(self._build)

    def _load(self) -> tuple[Any, Any]:
        """(model, processor), loaded once.

        Raises:
            ImportError: torch or transformers is missing.
            PermanentProviderError: the directory holds no loadable Qwen2-Audio model and processor.
        """
        return self._model.get()

    def _build(self) -> tuple[Any, Any]:
        try:
            import torch  # noqa: F401 - transformers needs it for the model class below
            from transformers import AutoProcessor, Qwen2AudioForConditionalGeneration
        except ImportError as e:
            raise ImportError(
                "transformers-judge needs the transformers and torch packages: pip install 'ttseval[models]'"
            ) from e
        path = str(self.model_path)
        try:
            model = Qwen2AudioForConditionalGeneration.from_pretrained(
                path, local_files_only=True, dtype=self.options.dtype
            )
            # transformers leaves the Auto classes' from_pretrained unannotated
            processor = AutoProcessor.from_pretrained(path, local_files_only=True)  # type: ignore[no-untyped-call]
        except (OSError, ValueError, KeyError) as e:
            raise PermanentProviderError(
                f"transformers-judge could not load a Qwen2-Audio model from {path!r}: {e}", spec=self.spec
            ) from e
        if not hasattr(processor, "feature_extractor") or not getattr(processor, "chat_template", None):
            raise PermanentProviderError(
                f"transformers-judge: the processor in {path!r} has no feature extractor or no chat template; "
                "save a Qwen2AudioProcessor with the model",
                spec=self.spec,
            )
        # transformers wraps PreTrainedModel.to in functools.wraps(Module.to), which mypy types as an unbound function
        model.to(self.options.device).eval()  # type: ignore[arg-type]
        return model, processor

    def judge_pairs(self, batch: list[PairwiseRequest]) -> list[PairwiseVerdict]:
        """One verdict per request, in order; parse failures and failed generations are verdicts, not raises.

        Raises:
            PermanentProviderError: the model cannot be loaded (no request can be judged).
        """
        self._load()
        return [self._judge_pair(r) for r in batch]

    def judge_instructions(self, batch: list[InstructionRequest]) -> list[InstructionVerdict]:
        """One verdict per request, in order; parse failures and failed generations are verdicts, not raises.

        Raises:
            PermanentProviderError: the model cannot be loaded (no request can be judged).
        """
        self._load()
        return [self._judge_instruction(r) for r in batch]

    def _judge_pair(self, r: PairwiseRequest) -> PairwiseVerdict:
        content = [
            {"type": "text", "text": pairwise_prompt(r.text, r.category, r.rubric) + "\n\nClip 1: "},
            {"type": "audio"},
            {"type": "text", "text": "Clip 2: "},
            {"type": "audio"},
        ]
        answer, error, common = self._ask(content, [r.first, r.second], parse_pairwise, r.item_id)
        if answer is None:
            return PairwiseVerdict(winner=None, parse_ok=False, error=error, **common)
        return PairwiseVerdict(
            winner=WINNER_FROM_ANSWER[answer.winner],
            parse_ok=True,
            score_first=answer.clip_1_score,
            score_second=answer.clip_2_score,
            reasoning_first=answer.clip_1_reasoning or None,
            reasoning_second=answer.clip_2_reasoning or None,
            comparison=answer.comparison or None,
            **common,
        )

    def _ask(
        self, content: list[dict[str, Any]], audios: list[Audio], parse: Any, item_id: str
    ) -> tuple[Any, str | None, dict[str, Any]]:
        """Generate and parse, re-asking up to the attempts allowed; returns (answer, error, verdict fields)."""
        raw, attempts, tokens_in, tokens_out, error = None, 0, 0, 0, None
        answer = None
        try:
            for attempt in range(1, self._attempts_allowed() + 1):
                attempts = attempt  # kept after the loop: the verdict counts the attempts made
                raw, n_in, n_out = self._generate(content, audios)
                tokens_in, tokens_out = tokens_in + n_in, tokens_out + n_out
                answer, error = parse(raw)
                if answer is not None:
                    break
        except (RuntimeError, ValueError) as e:  # torch reports shape, device and memory failures as RuntimeError
            answer, error = None, f"generation failed on item {item_id!r}: {type(e).__name__}: {e}"
        common = {
            "raw_response": raw,
            "attempts": max(attempts, 1),
            "retries": max(attempts - 1, 0),
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": 0.0,
        }
        return answer, error, common

    def _judge_instruction(self, r: InstructionRequest) -> InstructionVerdict:
        content = [
            {"type": "text", "text": instruction_prompt(r.text, r.instruction, r.task) + "\n\nRecording: "},
            {"type": "audio"},
        ]
        answer, error, common = self._ask(content, [r.audio], parse_instruction, r.item_id)
        if answer is None:
            return InstructionVerdict(follows=None, parse_ok=False, error=error, **common)
        return InstructionVerdict(follows=answer.follows, parse_ok=True, reasoning=answer.reasoning or None, **common)

    def _attempts_allowed(self) -> int:
        # Greedy decoding is deterministic: asking again returns the same unparseable text, so re-ask only when
        # sampling (temperature > 0), where another draw can come out well-formed.
        return self.options.max_attempts if self.options.temperature > 0 else 1

    def _generate(self, content: list[dict[str, str]], clips: list[Audio]) -> tuple[str, int, int]:
        """(decoded new text, input tokens, generated tokens) for one user turn holding `clips` in order."""
        import torch

        model, processor = self._load()
        rate_hz = int(processor.feature_extractor.sampling_rate)
        messages = [{"role": "user", "content": content}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # Under ~30 ms a clip yields no audio token and the processor's placeholder count no longer matches;
        # zero-pad short (or empty) clips to 100 ms so the model hears them as the silence they are.
        min_samples = rate_hz // 10
        arrays = []
        for clip in clips:
            samples = clip.resampled(rate_hz).samples.astype(np.float32)
            arrays.append(np.pad(samples, (0, max(0, min_samples - len(samples)))))
        inputs = processor(text=text, audio=arrays, sampling_rate=rate_hz, return_tensors="pt")
        inputs = inputs.to(model.device)
        inputs["input_features"] = inputs["input_features"].to(model.dtype)
        kwargs: dict[str, Any] = {"max_new_tokens": self.options.max_new_tokens}
        if self.options.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.options.temperature)
        else:
            kwargs.update(do_sample=False)
        with torch.inference_mode():
            generated = model.generate(**inputs, **kwargs)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        new_tokens = generated[0, prompt_tokens:]
        return processor.decode(new_tokens, skip_special_tokens=True), prompt_tokens, int(new_tokens.numel())

    def metadata(self) -> dict[str, Any]:
        return {
            "judge": self.name,
            "engine": "transformers",
            "version": self.version,
            "torch_version": package_version("torch"),
            "model": self.voice,
            "model_path": str(self.model_path),
            "prompt_version": PAIRWISE_PROMPT_VERSION,
            "instruction_prompt_version": INSTRUCTION_PROMPT_VERSION,
            "options": self.options.model_dump(),
        }


def _resolve_local(source: str) -> Path:
    """The local directory of a Qwen2-Audio model, or the cached snapshot of a hub id; ValueError naming `source`
    otherwise."""
    path = resolve_local_model(source, who="transformers-judge")
    config = path / "config.json"
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError) as e:
        raise ValueError(f"transformers-judge model {source!r}: unreadable config.json at {str(config)!r}: {e}") from e
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"transformers-judge model {source!r} is a {model_type!r} model; supported: "
            f"{', '.join(sorted(SUPPORTED_MODEL_TYPES))} (Qwen2-Audio-class models)"
        )
    return path
