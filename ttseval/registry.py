"""Provider specs and the registries that build providers from them.

A spec string names a provider and its configuration: `provider[:voice][:key=value ...]`, for example
`piper:joe`, `espeak-ng:en-us`, `flite:slt`, `espeak-ng:en-us:speed=140`. It is parsed once into a frozen
`Spec`; `Spec.canonical` (options sorted) is what goes into rows, ids and cache keys.

Registries hold lazy `"module:Class"` entries, so listing providers imports nothing heavy.
"""

from __future__ import annotations

import difflib
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ttseval.errors import SpecError
from ttseval.ids import stable_id

T = TypeVar("T")
_OPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*=")

# Options the pipeline reads from a system spec itself. `prompt=category`: strong prompting (EmergentTTS-Eval
# 4.1): the category's description goes to the provider as its instruction.
PIPELINE_OPTIONS = frozenset({"prompt"})


@dataclass(frozen=True)
class Spec:
    """A parsed provider spec. `options` values stay strings; the provider validates and converts them."""

    provider: str
    voice: str | None = None
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str) -> Spec:
        """Parse `provider[:voice][:key=value ...]`. A value runs until the next `:key=`, so it may hold ':'
        (`base_url=http://127.0.0.1:8080`); a voice may not (use the provider's `model=` option for such paths)."""
        raw = text.strip()
        if not raw:
            raise SpecError("empty provider spec; expected 'provider[:voice][:key=value]', e.g. 'piper:joe'", spec=text)
        provider, _, rest = raw.partition(":")
        if not provider:
            raise SpecError(f"spec {text!r} has no provider name before ':'", spec=text)
        tokens = re.split(r":(?=[A-Za-z_][A-Za-z0-9_.-]*=)", rest) if rest else []
        voice: str | None = None
        if tokens and not _OPTION.match(tokens[0]):
            voice = tokens.pop(0) or None
            if voice and ":" in voice:
                raise SpecError(f"spec {text!r}: more than one voice in {voice!r}; options need key=value", spec=text)
        options: dict[str, str] = {}
        for token in tokens:
            key, _, value = token.partition("=")
            if key in options:
                raise SpecError(f"spec {text!r}: option {key!r} given twice", spec=text)
            options[key] = value
        return cls(provider=provider, voice=voice, options=tuple(sorted(options.items())))

    @property
    def canonical(self) -> str:
        parts = [self.provider]
        if self.voice:
            parts.append(self.voice)
        parts.extend(f"{k}={v}" for k, v in self.options)
        return ":".join(parts)

    def option(self, name: str) -> str | None:
        return dict(self.options).get(name)

    @property
    def id(self) -> str:
        """Stable id: readable name plus a hash of provider, voice and options (not the engine version)."""
        readable = "-".join(p for p in (self.provider, self.voice) if p)
        return stable_id(readable, {"provider": self.provider, "voice": self.voice, "options": dict(self.options)})

    def __str__(self) -> str:
        return self.canonical


class Registry(Generic[T]):
    """Named lazy entries of one kind of provider ('tts', 'asr', 'quality')."""

    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind = kind
        self._entries: dict[str, str] = {}
        for name, target in entries.items():
            self.register(name, target)

    def register(self, name: str, target: str) -> None:
        """Add `name` -> "module:Class". A name already taken raises, so two providers never share one."""
        if name in self._entries and self._entries[name] != target:
            raise SpecError(f"{self.kind} provider {name!r} is already registered as {self._entries[name]!r}")
        if ":" not in target:
            raise SpecError(f"{self.kind} provider {name!r}: target {target!r} must look like 'module:Class'")
        self._entries[name] = target

    @property
    def names(self) -> list[str]:
        return sorted(self._entries)

    def resolve(self, name: str, extra: dict[str, str] | None = None) -> type[T]:
        entries = {**self._entries, **(extra or {})}
        if name not in entries:
            close = difflib.get_close_matches(name, entries, n=3)
            hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
            raise SpecError(
                f"unknown {self.kind} provider {name!r}; {hint}available: {', '.join(sorted(entries))}", spec=name
            )
        module_name, _, class_name = entries[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ImportError(
                f"{self.kind} provider {name!r} needs {e.name or module_name!r}: "
                f"install it with pip install 'ttseval[all]' ({e})"
            ) from e
        return getattr(module, class_name)

    def build(self, spec: Spec | str, extra: dict[str, str] | None = None, **context: Any) -> T:
        """Construct the provider for `spec`: `Class(voice=spec.voice, **options, **context)`.

        Pipeline options (PIPELINE_OPTIONS, e.g. `prompt=category`) belong to the stage, not the provider, and
        are not passed on; they still make the spec, and so the system_id, different.
        """
        parsed = Spec.parse(spec) if isinstance(spec, str) else spec
        cls = self.resolve(parsed.provider, extra)
        options = {k: v for k, v in parsed.options if k not in PIPELINE_OPTIONS}
        try:
            return cls(voice=parsed.voice, **options, **context)  # type: ignore[call-arg]
        except (TypeError, ValueError) as e:
            raise SpecError(f"{self.kind} spec {parsed.canonical!r}: {e}", spec=parsed.canonical) from e


TTS = Registry[Any](
    "tts",
    {
        "espeak-ng": "providers.tts.espeak_ng:EspeakNGTTS",
        "flite": "providers.tts.flite:FliteTTS",
        "piper": "providers.tts.piper:PiperTTS",
    },
)

ASR = Registry[Any](
    "asr",
    {
        "faster-whisper": "providers.asr.faster_whisper:FasterWhisperASR",
        "transformers": "providers.asr.transformers_asr:TransformersASR",
    },
)

QUALITY = Registry[Any](
    "quality",
    {
        "dnsmos": "providers.quality.dnsmos:DNSMOSQuality",
    },
)

JUDGES = Registry[Any](
    "judge",
    {
        "objective": "providers.judges.objective:ObjectiveJudge",
        "gemini": "providers.judges.gemini:GeminiJudge",
        "transformers-judge": "providers.judges.transformers_judge:TransformersAudioJudge",
    },
)

LLMS = Registry[Any](
    "llm",
    {
        "gemini": "providers.llm.gemini:GeminiLLM",
        "openai": "providers.llm.openai_compat:OpenAICompatLLM",
    },
)

REGISTRIES: dict[str, Registry[Any]] = {"tts": TTS, "asr": ASR, "quality": QUALITY, "judge": JUDGES, "llm": LLMS}
