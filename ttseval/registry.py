"""Provider specs and the registries that build providers from them.

A spec string names a provider and its configuration: `provider[:voice][:key=value ...]`, for example
`piper:joe`, `espeak-ng:en-us`, `flite:slt`, `espeak-ng:en-us:speed=140`. It is parsed once into a frozen
`Spec`; `Spec.canonical` (options sorted) is what goes into rows, ids and cache keys.

Registries hold lazy `"module:Class"` entries, so listing providers imports nothing heavy.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ttseval.errors import SpecError
from ttseval.ids import stable_id

T = TypeVar("T")


@dataclass(frozen=True)
class Spec:
    """A parsed provider spec. `options` values stay strings; the provider validates and converts them."""

    provider: str
    voice: str | None = None
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str) -> Spec:
        raw = text.strip()
        if not raw:
            raise SpecError("empty provider spec; expected 'provider[:voice][:key=value]', e.g. 'piper:joe'", spec=text)
        provider, *rest = raw.split(":")
        voice: str | None = None
        options: dict[str, str] = {}
        for token in rest:
            if "=" in token:
                key, value = token.split("=", 1)
                if not key or key in options:
                    raise SpecError(f"spec {text!r}: bad or repeated option {token!r}", spec=text)
                options[key] = value
            elif voice is None and token:
                voice = token
            else:
                raise SpecError(
                    f"spec {text!r}: more than one voice ({voice!r} and {token!r}); options need key=value", spec=text
                )
        if not provider:
            raise SpecError(f"spec {text!r} has no provider name before ':'", spec=text)
        return cls(provider=provider, voice=voice, options=tuple(sorted(options.items())))

    @property
    def canonical(self) -> str:
        parts = [self.provider]
        if self.voice:
            parts.append(self.voice)
        parts.extend(f"{k}={v}" for k, v in self.options)
        return ":".join(parts)

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
        """Construct the provider for `spec`: `Class(voice=spec.voice, **options, **context)`."""
        parsed = Spec.parse(spec) if isinstance(spec, str) else spec
        cls = self.resolve(parsed.provider, extra)
        try:
            return cls(voice=parsed.voice, **dict(parsed.options), **context)  # type: ignore[call-arg]
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

REGISTRIES: dict[str, Registry[Any]] = {"tts": TTS, "asr": ASR, "quality": QUALITY}
