"""CMU Flite, run as a subprocess; English only."""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ttseval.core.audio import Audio
from ttseval.core.errors import PermanentProviderError, TransientProviderError
from ttseval.core.languages import base_language
from ttseval.core.protocols import Languages
from ttseval.core.registry import require_program
from ttseval.providers import EngineVersion, canonical_spec, parse_options

_EXECUTABLE = "flite"
# Measured on flite 2.2: kal is the only 8 kHz voice among those compiled in.
_SAMPLE_RATE_HZ = {"kal": 8000}


class FliteOptions(BaseModel):
    """Options of `flite:<voice>:key=value`."""

    duration_stretch: float = Field(1.0, gt=0.2, le=5.0, description="> 1 speaks slower (flite duration_stretch)")
    timeout_s: float = Field(60.0, gt=0, description="seconds before one synthesis counts as hung (transient)")


def _require_executable() -> str:
    return require_program(_EXECUTABLE, needed_by="tts provider 'flite'")


@functools.cache
def flite_version() -> str:
    """The engine version from `flite --version`, e.g. 'flite-2.2-current'."""
    out = subprocess.run(
        [_require_executable(), "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    match = re.search(r"version:\s*(\S+)", out)
    return match.group(1) if match else out.strip()


LANGUAGES = frozenset({"en"})
"""What every flite voice speaks."""


@functools.cache
def flite_voices() -> tuple[str, ...]:
    """The voices compiled into this flite binary (`flite -lv`), e.g. ('kal', 'awb_time', 'kal16', 'awb', 'rms',
    'slt')."""
    out = subprocess.run([_require_executable(), "-lv"], capture_output=True, text=True, timeout=30, check=False).stdout
    return tuple(out.split(":", 1)[-1].split())


class FliteTTS:
    """Flite 2.2 via its command line. Text goes through a temporary file (`-f`), so text starting with '-' is
    not read as a flag; audio comes back through a temporary WAV (`-o`).

    Voices are the ones `flite -lv` lists (slt, kal, kal16, awb, rms, awb_time); the default is slt. Sample rate
    depends on the voice (slt 16 kHz, kal 8 kHz). English only. Output is deterministic.

    Options: duration_stretch (float, default 1.0; > 1 is slower), timeout_s (default 60).
    """

    name: ClassVar[str] = "flite"
    languages: ClassVar[Languages] = LANGUAGES
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = False
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None  # per voice: kal 8 kHz, the others 16 kHz
    version: ClassVar[EngineVersion] = EngineVersion(flite_version)
    requires: ClassVar[tuple[str, ...]] = (_EXECUTABLE,)
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.options = parse_options(FliteOptions, options, provider=self.name)
        self.spec = canonical_spec(self.name, voice, options)
        self.voice = voice or "slt"
        self._check_voice(self.voice)  # runs `flite -lv`: ConfigError when flite is not installed

    @staticmethod
    def _check_voice(voice: str) -> None:
        # flite falls back to its default voice on an unknown name and still exits 0, so check here.
        if voice not in flite_voices():
            raise ValueError(f"flite has no voice {voice!r}; available voices: {', '.join(flite_voices())}")

    def supports_language(self, language: str) -> bool:
        """True for English only, however tagged: 'en', 'en-GB', 'EN', 'eng'."""
        return base_language(language) in LANGUAGES

    def synthesize(self, text: str, language: str, voice: str | None = None, instruction: str | None = None) -> Audio:
        """Speak `text` with `voice` (default: the spec's). `language` is not used: flite speaks English.

        Raises:
            TransientProviderError: flite did not finish within timeout_s.
            PermanentProviderError: an unknown voice override, or flite exited non-zero (stderr attached).
        """
        chosen = voice or self.voice
        try:
            self._check_voice(chosen)
        except ValueError as e:
            raise PermanentProviderError(str(e), spec=self.spec) from e
        with tempfile.TemporaryDirectory(prefix="ttseval-flite-") as tmp:
            text_path, wav_path = Path(tmp) / "text.txt", Path(tmp) / "out.wav"
            text_path.write_text(text, encoding="utf-8")
            command = [_require_executable(), "-voice", chosen, "-f", str(text_path), "-o", str(wav_path)]
            if self.options.duration_stretch != 1.0:
                command += ["--setf", f"duration_stretch={self.options.duration_stretch}"]
            try:
                result = subprocess.run(command, capture_output=True, timeout=self.options.timeout_s, check=False)
            except subprocess.TimeoutExpired as e:
                raise TransientProviderError(
                    f"flite timed out after {self.options.timeout_s} s (voice {chosen!r}, {len(text)} chars)",
                    spec=self.spec,
                ) from e
            if result.returncode != 0 or not wav_path.is_file():
                stderr = result.stderr.decode("utf-8", "replace").strip()
                raise PermanentProviderError(
                    f"flite exited with {result.returncode} (voice {chosen!r}) and wrote "
                    f"{'a' if wav_path.is_file() else 'no'} WAV: {stderr}",
                    spec=self.spec,
                )
            data = wav_path.read_bytes()
        try:
            return Audio.from_wav_bytes(data)
        except RuntimeError as e:  # soundfile.LibsndfileError is a RuntimeError
            raise PermanentProviderError(
                f"flite wrote an unreadable WAV ({len(data)} bytes): {e}", spec=self.spec
            ) from e

    def voices(self) -> list[dict[str, Any]]:
        """The voices compiled into this flite binary (`flite -lv`), each English, with its sample rate."""
        return [
            {"id": v, "name": v, "language": "en", "description": f"{_SAMPLE_RATE_HZ.get(v, 16000) // 1000} kHz"}
            for v in flite_voices()
        ]

    def metadata(self) -> dict[str, Any]:
        return {
            "engine": "flite",
            "version": self.version,
            "voice": self.voice,
            "options": self.options.model_dump(),
            "sample_rate_hz": _SAMPLE_RATE_HZ.get(self.voice, 16000),
        }
