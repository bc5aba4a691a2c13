"""Speaker-verification encoders for speaker similarity (SIM): one embedding per clip."""

from __future__ import annotations

from ttseval.core.protocols import SpeakerEncoder
from ttseval.core.registry import Registry

SPEAKERS = Registry[SpeakerEncoder](
    "speaker",
    SpeakerEncoder,
    {
        "resemblyzer": "ttseval.providers.speaker.resemblyzer_ge2e:ResemblyzerEncoder",
        "transformers-sv": "ttseval.providers.speaker.transformers_sv:TransformersSpeakerEncoder",
        "sherpa-onnx": "ttseval.providers.speaker.sherpa_embedding:SherpaOnnxSpeakerEncoder",
        "speechbrain-ecapa": "ttseval.providers.speaker.speechbrain_ecapa:SpeechBrainECAPAEncoder",
        "seedtts-sim": "ttseval.providers.speaker.seedtts_wavlm:SeedTTSSimEncoder",
    },
)
