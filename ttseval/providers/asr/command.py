"""A recogniser in an environment of its own (`command:<label>:run=COMMAND`): ttseval runs COMMAND and speaks the
protocol `ttseval-scorer/1` with it (providers/_command.py), so a recogniser whose pins cannot sit beside ours
(Paraformer through FunASR, which needs torchaudio; anything pinned to an old torch) runs as the transcripts stage,
cached, reused and placed like the built-in recognisers.

Its op is `transcribe`; each clip in the request also holds `language`, the expected language (a hint, may be
null). Each clip's answer is

    {"id": "0", "text": "...", "language": "zh" or null, "language_prob": 0.98 or null}   language: detected

An empty text is a valid answer (nothing recognised). Anything else breaks the protocol: retryable rows, as a
crash or a hang.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ttseval.core.audio import Audio
from ttseval.core.protocols import ANY_LANGUAGE, Languages, Transcript
from ttseval.providers import canonical_spec, parse_options
from ttseval.providers._command import CommandOptions, Described, ProtocolCommand, finite


class CommandASR:
    """The transcripts a recogniser command in another environment gives each clip."""

    name: ClassVar[str] = "command"
    languages: ClassVar[Languages] = ANY_LANGUAGE  # the settings' asr table routes languages to it
    accepts_instruction: ClassVar[bool] = False
    gpu: ClassVar[bool] = True  # a GPU run places its shards on GPU workers; `device` tells the recogniser
    extra: ClassVar[str | None] = None
    output_sample_rate_hz: ClassVar[int | None] = None  # returns text
    version: ClassVar[Described] = Described()
    requires: ClassVar[tuple[str, ...]] = ()
    imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, voice: str | None = None, **options: str) -> None:
        self.command = ProtocolCommand(self.name, voice, parse_options(CommandOptions, options, provider=self.name))
        self.spec = canonical_spec(self.name, voice, options)

    def transcribe(self, batch: list[Audio], languages: list[str | None]) -> list[Transcript]:
        """The recogniser's transcript of each clip, in order, `languages[i]` sent as clip i's hint.

        Raises:
            TransientProviderError: the recogniser crashed, hung or broke the protocol on a call.
        """
        answers = self.command.ask("transcribe", batch, [{"language": language} for language in languages])
        return [self._one(answer) for answer in answers]

    def _one(self, answer: dict[str, Any]) -> Transcript:
        text, language, prob = answer.get("text"), answer.get("language"), answer.get("language_prob")
        if (
            not isinstance(text, str)
            or not (language is None or isinstance(language, str))
            or not (prob is None or (finite(prob) and 0 <= prob <= 1))
        ):
            raise self.command.broke(
                answer, "a string 'text', and 'language' (a string) and 'language_prob' (0-1) or null"
            )
        return Transcript(text=text, detected_language=language, language_prob=None if prob is None else float(prob))

    def metadata(self) -> dict[str, Any]:
        return self.command.metadata()
