"""A provider's `base_url` is part of its spec, which runs store in their tables, manifests and logs: a URL that could
carry a credential (user:password@, a query string, a fragment) is refused when the provider is built, for every kind
of keyed provider (TTS vendors, LLMs and the judges built on them), and the refusal never repeats the secret."""

from __future__ import annotations

import pytest

from ttseval.core.config import load_settings
from ttseval.core.errors import SpecError
from ttseval.providers.llm.openai_compat import OpenAICompatLLM
from ttseval.providers.tts.elevenlabs import ElevenLabsTTS
from ttseval.providers.tts.openai_speech import OpenAISpeechTTS
from ttseval.tasks.provider_cache import build_provider

REFUSED = [
    "http://10.0.0.5:8000/v1?api_key=sk-live-canary",
    "https://proxy.example/v1?key=AIza-canary",
    "https://proxy.example/v1?code=canary-function-key",
    "https://proxy.example/v1?a=1;api_key=canary",
    "https://proxy.example/v1#api_key=canary",
    "https://example-resource.openai.azure.com/openai/v1?api-version=canary-2025",
    "http://user:canary@10.0.0.5:8000/v1",
]


@pytest.mark.parametrize("url", REFUSED)
def test_a_base_url_that_could_carry_a_credential_is_refused_by_every_keyed_provider(url: str) -> None:
    for build in (
        lambda: OpenAICompatLLM("gpt-4.1-mini", api_key="k", base_url=url),
        lambda: ElevenLabsTTS("v", api_key="k", base_url=url),
        lambda: OpenAISpeechTTS("alloy", api_key="k", base_url=url),
    ):
        with pytest.raises(ValueError, match="base_url must not hold credentials") as refused:
            build()
        assert "canary" not in str(refused.value)


def test_the_registrys_refusal_names_the_provider_not_the_spec_with_its_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELEVENLABS_API_KEY", "k")
    with pytest.raises(SpecError, match=r"tts spec 'elevenlabs': .*base_url must not hold credentials") as refused:
        build_provider("tts", "elevenlabs:v:base_url=https://h/v1?api_key=SECRETVAL", load_settings())
    assert "SECRETVAL" not in str(refused.value) and refused.value.__cause__ is None


def test_an_endpoint_alone_is_kept() -> None:
    url = "https://example-resource.openai.azure.com/openai/v1"
    assert OpenAICompatLLM("gpt-4.1-mini", api_key="k", base_url=url).options.base_url == url
    assert ElevenLabsTTS("v", api_key="k", base_url="http://127.0.0.1:9/x").options.base_url == "http://127.0.0.1:9/x"
