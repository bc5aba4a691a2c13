"""A provider's `base_url` is part of its spec, which runs store in their tables, manifests and logs: a URL carrying
a credential (user:password@, or a query parameter named like one) is refused when the provider is built, for every
kind of keyed provider (TTS vendors, LLMs and the judges built on them); other query parameters are kept."""

from __future__ import annotations

import pytest

from ttseval.providers.llm.openai_compat import OpenAICompatLLM
from ttseval.providers.tts.elevenlabs import ElevenLabsTTS
from ttseval.providers.tts.openai_speech import OpenAISpeechTTS

REFUSED = [
    ("http://10.0.0.5:8000/v1?api_key=sk-live-1", "'api_key'"),
    ("https://proxy.example/v1?key=AIza-canary", "'key'"),
    ("https://proxy.example/v1?access_token=t&api-version=2025-01-01", "'access_token'"),
    ("https://blob.example/v1?sig=abc&se=2026", "'sig'"),
    ("https://proxy.example/v1?xi-api-key=canary", "'xi-api-key'"),
    ("http://user:pw@10.0.0.5:8000/v1", "user:password@"),
]


@pytest.mark.parametrize(("url", "named"), REFUSED)
def test_a_base_url_carrying_a_credential_is_refused_by_every_keyed_provider(url: str, named: str) -> None:
    for build in (
        lambda: OpenAICompatLLM("gpt-4.1-mini", api_key="k", base_url=url),
        lambda: ElevenLabsTTS("v", api_key="k", base_url=url),
        lambda: OpenAISpeechTTS("alloy", api_key="k", base_url=url),
    ):
        with pytest.raises(ValueError, match="base_url must not hold credentials") as refused:
            build()
        assert named in str(refused.value)
        assert "canary" not in str(refused.value) and "sk-live" not in str(refused.value)


def test_a_base_url_with_other_query_parameters_is_kept() -> None:
    url = "https://example-resource.openai.azure.com/openai/v1?api-version=2025-04-01-preview"
    assert OpenAICompatLLM("gpt-4.1-mini", api_key="k", base_url=url).options.base_url == url
    assert ElevenLabsTTS("v", api_key="k", base_url="http://127.0.0.1:9/x?region=eu").options.base_url.endswith("eu")
