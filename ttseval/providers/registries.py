"""Every kind's registry, by kind: what lists all providers (`ttseval providers`, the reference docs) and what
builds one by kind name (the stages). Each registry is declared beside its providers, in
`ttseval/providers/<kind>/__init__.py`; this module only gathers them."""

from __future__ import annotations

from typing import Any

from ttseval.core.registry import Registry
from ttseval.providers.asr import ASR
from ttseval.providers.judges import JUDGES
from ttseval.providers.lid import LIDS
from ttseval.providers.llm import LLMS
from ttseval.providers.quality import QUALITY
from ttseval.providers.speaker import SPEAKERS
from ttseval.providers.tts import TTS

REGISTRIES: dict[str, Registry[Any]] = {
    registry.kind: registry for registry in (TTS, ASR, QUALITY, LIDS, SPEAKERS, JUDGES, LLMS)
}
