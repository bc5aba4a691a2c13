"""espeak-ng, the formant synthesizer, run as a subprocess (`espeak-ng --stdout`)."""

from __future__ import annotations

import functools
import io
import re
import subprocess
import wave
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, TransientProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import Languages
from ttseval.core.registry import require_program
from ttseval.providers import EngineVersion, canonical_spec, parse_options

AUTO = "auto"
_EXECUTABLE = "espeak-ng"
SAMPLE_RATE_HZ = 22050  # every espeak-ng voice renders at 22.05 kHz


class EspeakNGOptions(BaseModel):
    """Options of `espeak-ng:<voice>:key=value`."""

    speed: int = Field(175, ge=80, le=450, description="speaking rate in words per minute (espeak-ng -s)")
    pitch: int = Field(50, ge=0, le=99, description="pitch adjustment 0-99 (espeak-ng -p)")
    timeout_s: float = Field(60.0, gt=0, description="seconds before one synthesis counts as hung (transient)")


@dataclass(frozen=True)
class _Voice:
    name: str  # what `-v` takes, e.g. 'en-us', 'fr-fr', 'cmn'
    priority: int  # lower is preferred when several voices speak a language
    languages: tuple[tuple[str, int], ...]  # (language tag, priority) incl. the voice's own language


def _require_executable() -> str:
    return require_program(_EXECUTABLE, needed_by="tts provider 'espeak-ng'")


@functools.cache
def espeak_version() -> str:
    """The engine version from `espeak-ng --version`, e.g. '1.51'."""
    out = subprocess.run(
        [_require_executable(), "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    match = re.search(r"text-to-speech:\s*(\S+)", out)
    return match.group(1) if match else out.strip()


@functools.cache
def espeak_voices() -> tuple[_Voice, ...]:
    """Every voice `espeak-ng --voices` lists, parsed once per process.

    Each line reads `Pty Language Age/Gender VoiceName File (other-lang pty)...`; the other languages are the
    extra tags a voice answers to, e.g. cmn answers to 'zh' and 'zh-cmn', en-gb to 'en'.
    """
    out = subprocess.run(
        [_require_executable(), "--voices"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    voices = []
    for line in out.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5 or not fields[0].isdigit():
            continue
        priority, name = int(fields[0]), fields[1].lower()
        others = tuple((tag.lower(), int(pty)) for tag, pty in re.findall(r"\(([^\s()]+)\s+(\d+)\)", line))
        voices.append(_Voice(name=name, priority=priority, languages=((name, priority), *others)))
    return tuple(voices)


@functools.cache
def espeak_languages() -> frozenset[str]:
    """The base languages of every espeak-ng voice ('en', 'fr', 'cmn', ...): what `espeak-ng:auto` can speak."""
    return frozenset(base_language(tag) for v in espeak_voices() for tag, _ in v.languages)


def voice_for_language(language: str) -> str | None:
    """The espeak-ng voice for a BCP-47 tag, or None when espeak-ng has none.

    The full tag is tried first ('en-GB' -> en-gb, 'pt-BR' -> pt-br), then its base language ('fr-FR' -> fr ->
    fr-fr, 'zh-CN' -> zh -> cmn); among several voices the lowest priority number wins, as in espeak-ng itself.
    """
    for tag in (language.strip().lower().replace("_", "-"), base_language(language)):
        candidates = [(pty, v.name) for v in espeak_voices() for lang, pty in v.languages if lang == tag]
        if candidates:
            return min(candidates)[1]
    return None


class EspeakNGTTS:
    """espeak-ng 1.51 via its command line; text goes in on stdin (never argv), WAV comes out on stdout.

    The voice is the system under test. `espeak-ng:en-us` always speaks with en-us and supports only English
    (the base languages the voice answers to); `espeak-ng` or `espeak-ng:auto` (the default) picks, per item,
    the espeak-ng voice for the item's language and supports every language espeak-ng has a voice for (no
    Pashto in 1.51). Output is 22.05 kHz mono and deterministic for a given text, voice and options.

    Options: speed (words/min, 80-450, default 175), pitch (0-99, default 50), timeout_s (default 60).
    """

    name: ClassVar[str] = "espeak-ng"
    languages: ClassVar[Languages] = staticmethod(espeak_languages)  # a fixed voice narrows it to its own
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = SAMPLE_RATE_HZ
    version: ClassVar[EngineVersion] = EngineVersion(espeak_version)
    requires: ClassVar[tuple[str, ...]] = (_EXECUTABLE,)
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(EspeakNGOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self.voice = (voice or AUTO).lower()
        _require_executable()  # built directly (not through the registry), fail here rather than mid-run
        if self.voice != AUTO:
            self._fixed_voice = self._find_voice(self.voice)

    @staticmethod
    def _find_voice(voice: str) -> _Voice:
        # A variant suffix ('en-us+f3') selects a speaker variant of the same language voice.
        language_part = voice.split("+", 1)[0]
        for v in espeak_voices():
            if v.name == language_part:
                return v
        names = sorted({v.name for v in espeak_voices()})
        raise ValueError(
            f"espeak-ng has no voice {voice!r}; use 'auto' or one of {len(names)} voices "
            f"(see `espeak-ng --voices`), e.g. {', '.join(names[:12])}, ..."
        )

    def supports_language(self, language: str) -> bool:
        """Whether this configuration speaks `language`: any espeak-ng language for 'auto', else the voice's."""
        if self.voice == AUTO:
            return voice_for_language(language) is not None
        return base_language(language) in {base_language(tag) for tag, _ in self._fixed_voice.languages}

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text`; `voice` overrides the spec's voice, 'auto' picks one from `language`.

        Raises:
            TransientProviderError: espeak-ng did not finish within timeout_s.
            PermanentProviderError: no voice for the language, or espeak-ng exited non-zero (stderr attached).
        """
        chosen = (voice or self.voice).lower()
        if chosen == AUTO:
            found = voice_for_language(language)
            if found is None:
                raise PermanentProviderError(
                    f"espeak-ng {self.version} has no voice for language {language!r}", spec=self.spec
                )
            chosen = found
        command = [
            _require_executable(),
            "-v",
            chosen,
            "-s",
            str(self.options.speed),
            "-p",
            str(self.options.pitch),
            "-b",
            "1",  # input is UTF-8
            "--stdout",
        ]
        try:
            result = subprocess.run(
                command, input=text.encode("utf-8"), capture_output=True, timeout=self.options.timeout_s, check=False
            )
        except subprocess.TimeoutExpired as e:
            raise TransientProviderError(
                f"espeak-ng timed out after {self.options.timeout_s} s (voice {chosen!r}, {len(text)} chars)",
                spec=self.spec,
            ) from e
        if result.returncode != 0:
            stderr = result.stderr.decode("utf-8", "replace").strip()
            raise PermanentProviderError(
                f"espeak-ng exited with {result.returncode} (voice {chosen!r}): {stderr}", spec=self.spec
            )
        return _read_espeak_wav(result.stdout, spec=self.spec)

    def voices(self) -> list[dict[str, Any]]:
        """Every installed espeak-ng voice (`espeak-ng --voices`)."""
        return [{"id": v.name, "name": v.name, "language": v.languages[0][0]} for v in espeak_voices()]

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "espeak-ng",
            "version": self.version,
            "voice": self.voice,
            "options": self.options.model_dump(),
            "sample_rate_hz": SAMPLE_RATE_HZ,
        }


def _read_espeak_wav(data: bytes, *, spec: str) -> Audio:
    """Decode espeak-ng's stdout WAV.

    When writing to a pipe espeak-ng cannot seek back, so the RIFF and data sizes in its header are
    placeholders (0x7ffff000-ish); read the format from the header and take every byte after it as PCM.
    Empty text makes espeak-ng write nothing at all: that is an empty clip, not an error (the pipeline
    classifies silence itself).
    """
    if not data:
        return Audio(samples=np.zeros(0, dtype=np.float32), sample_rate_hz=SAMPLE_RATE_HZ)
    try:
        with wave.open(io.BytesIO(data)) as header:
            rate, width, channels = header.getframerate(), header.getsampwidth(), header.getnchannels()
    except (wave.Error, EOFError) as e:
        raise PermanentProviderError(f"espeak-ng wrote no readable WAV ({len(data)} bytes): {e}", spec=spec) from e
    if width != 2:
        raise PermanentProviderError(f"espeak-ng wrote {8 * width}-bit audio; expected 16-bit", spec=spec)
    start = data.find(b"data", 12) + 8
    pcm = data[start : start + (len(data) - start) // (2 * channels) * 2 * channels]
    samples = np.frombuffer(pcm, dtype="<i2").reshape(-1, channels).mean(axis=1) / 32768.0
    return Audio(samples=samples.astype(np.float32), sample_rate_hz=int(rate))
