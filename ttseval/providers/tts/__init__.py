"""Text-to-speech providers, one module per system: local engines (espeak-ng, flite, Piper), transformers models
(VITS/MMS-TTS, Dia), paid vendors on cloud.py's base (OpenAI, ElevenLabs, Gemini, Azure, Deepgram, Hume, Cartesia)
and audio made elsewhere (files, pushed). `TTS` below names each by its registry name."""

from __future__ import annotations

from ttseval.core.protocols import TTSProvider
from ttseval.core.registry import Registry

TTS = Registry[TTSProvider](
    "tts",
    TTSProvider,
    {
        "espeak-ng": "ttseval.providers.tts.espeak_ng:EspeakNGTTS",
        "flite": "ttseval.providers.tts.flite:FliteTTS",
        "piper": "ttseval.providers.tts.piper:PiperTTS",
        "files": "ttseval.providers.tts.files:FilesTTS",
        "pushed": "ttseval.providers.tts.pushed:PushedTTS",
        "transformers-tts": "ttseval.providers.tts.transformers_tts:TransformersTTS",
        "transformers-dia": "ttseval.providers.tts.transformers_dia:TransformersDiaTTS",
        "openai": "ttseval.providers.tts.openai_speech:OpenAISpeechTTS",
        "elevenlabs": "ttseval.providers.tts.elevenlabs:ElevenLabsTTS",
        "gemini": "ttseval.providers.tts.gemini_tts:GeminiTTS",
        "azure": "ttseval.providers.tts.azure:AzureTTS",
        "deepgram": "ttseval.providers.tts.deepgram:DeepgramTTS",
        "hume": "ttseval.providers.tts.hume:HumeTTS",
        "cartesia": "ttseval.providers.tts.cartesia:CartesiaTTS",
    },
)
