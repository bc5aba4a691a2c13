"""Spoken language identification (LID) of synthesized clips: the V gate of INSV-A (PashtoTTS-Bench 3.4)."""

from __future__ import annotations

from ttseval.core.protocols import LanguageIdentifier
from ttseval.core.registry import Registry

LIDS = Registry[LanguageIdentifier](
    "lid",
    LanguageIdentifier,
    {
        "transformers": "ttseval.providers.lid.transformers_lid:TransformersLID",
        "speechbrain-lid": "ttseval.providers.lid.speechbrain_lid:SpeechBrainLID",
    },
)
