"""The OpenAI-compatible speech provider's API key read from a Prefect Secret block on the session's Prefect server
when the variable is unset. The provider against its fake server is tests/unit/test_tts_openai.py."""

from __future__ import annotations

import json

import pytest

from tests.support.fake_tts import FakeOpenAISpeech
from ttseval.core.config import load_settings

KEY = "sk-test-secret-0123456789"


def test_a_key_from_a_prefect_secret_block_when_the_variable_is_unset(prefect_api, monkeypatch, tmp_path) -> None:
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ttseval.tasks.provider_cache import build_provider

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with temporary_settings({PREFECT_API_URL: prefect_api}), FakeOpenAISpeech(api_key=KEY) as fake:
        Secret(value=KEY).save("ttseval-test-openai-key", overwrite=True)
        settings = load_settings(store=str(tmp_path), secret_blocks={"OPENAI_API_KEY": "ttseval-test-openai-key"})
        spec = f"openai:alloy:base_url={fake.base_url}:model=tts-1"
        tts = build_provider("tts", spec, settings)
        tts.synthesize("From the block.", "en")
        assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in json.dumps(tts.metadata())
        missing = load_settings(store=str(tmp_path), secret_blocks={"OPENAI_API_KEY": "no-such-block"})
        with pytest.raises(Exception, match="no Prefect Secret block 'no-such-block'"):
            build_provider("tts", spec, missing)
